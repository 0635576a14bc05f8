"""The tools polpo offers to models, in the order they are shown.

LLM agents get all of :data:`TOOLS`; reviewers get ``TOOLS.read_only()``, the subset whose ``read_only`` flag is
set (``read_file``, ``glob``, ``grep``, ``list_dir``).
"""

from __future__ import annotations

from polpo.tools.commands import RUN_COMMAND
from polpo.tools.edit import EDIT_FILE, WRITE_FILE
from polpo.tools.globbing import GLOB
from polpo.tools.grep import GREP
from polpo.tools.listing import LIST_DIR
from polpo.tools.outcomes import REGISTER_OUTCOME
from polpo.tools.read import READ_FILE
from polpo.tools.registry import ToolRegistry

__all__ = ["TOOLS"]

TOOLS = ToolRegistry([READ_FILE, GLOB, GREP, LIST_DIR, WRITE_FILE, EDIT_FILE, RUN_COMMAND, REGISTER_OUTCOME])
"""Every model-callable tool: the file tools, ``run_command`` and ``register_outcome``."""
