"""A command's target and its arguments in the one text column the command inbox and the relay carry.

``polpo retry/cancel/approve`` name only a target. ``resume``, ``reject`` and ``override`` carry what a person
said (a note, a reason, who they are): their target is then a JSON object ``{"target": ID, ...}``. Ids never
start with ``{``, so a plain target reads back as itself and older commands keep their meaning.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["decode", "encode"]


def encode(target: str, **args: Any) -> str:
    """``target`` alone when no argument is set, else the JSON form (None values are left out)."""
    given = {k: v for k, v in args.items() if v is not None}
    return json.dumps({"target": target, **given}, sort_keys=True) if given else target


def decode(text: str) -> tuple[str, dict[str, Any]]:
    """(target, arguments) of an encoded command target; a text that is not our JSON is a plain target."""
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return text, {}
        if isinstance(data, dict) and isinstance(data.get("target"), str):
            target = data.pop("target")
            return target, data
    return text, {}
