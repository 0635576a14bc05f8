"""The fenced examples of the docs and the README, as the docs tests read them.

A block right after ``<!-- example: skip -->`` (a fragment shown inside a larger document, or an example that
is wrong on purpose) is kept with ``skip=True``, so a test can tell it from a block it must run. A shell block
right after ``<!-- example: not run: REASON -->`` keeps REASON as ``not_run``: why no test can run it (it changes
the machine, needs docker or a download) and what covers it instead, so a block nobody runs says so in the page.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SKIP = "<!-- example: skip -->"
NOT_RUN = re.compile(r"<!--\s*example:\s*not run:(?P<reason>(?:(?!-->).)*)-->\Z", re.S)
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[A-Za-z]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.M | re.S)
SHELL_OPERATORS = {"|", "||", "&", "&&", ";", "(", ")", "<", ">", ">>"}


@dataclass(frozen=True)
class Block:
    file: Path
    line: int
    lang: str
    body: str
    skip: bool
    not_run: str | None = None  # the marker's reason ("" when the marker gives none); None without a marker

    @property
    def where(self) -> str:
        return f"{self.file.relative_to(REPO)}:{self.line}"


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(lang: str) -> list[Block]:
    """Every fenced block of ``lang`` in the README and docs/**/*.md, in file order."""
    return [b for path in doc_files() for b in parse_blocks(path, path.read_text(), lang)]


def parse_blocks(path: Path, text: str, lang: str) -> list[Block]:
    """The fenced blocks of ``lang`` in ``text``, the content of ``path``, with their markers."""
    out = []
    for m in FENCE.finditer(text):
        if m.group("lang") != lang:
            continue
        body = textwrap.dedent(m.group("body")) if m.group("indent") else m.group("body")
        before = text[:m.start()].rstrip()
        marker = NOT_RUN.search(before)
        not_run = " ".join(marker.group("reason").split()) if marker else None
        out.append(Block(path, text.count("\n", 0, m.start()) + 1, lang, body, before.endswith(SKIP), not_run))
    return out


def polpo_invocations(script: str) -> list[list[str]]:
    """The argv (after the program) of every command a shell snippet runs through a ``polpo`` executable."""
    script = script.replace("\\\n", " ")
    found = []
    for line in script.splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            tokens = list(lexer)
        except ValueError as e:  # an unclosed quote
            raise ValueError(f"cannot split {line!r}: {e}") from e
        segment: list[str] = []
        for tok in [*tokens, ";"]:
            if tok in SHELL_OPERATORS:
                words = [w for w in segment if not re.match(r"^[A-Z_][A-Z0-9_]*=", w)]  # VAR=value prefixes
                if words and (words[0] == "polpo" or words[0].endswith("/polpo")):
                    found.append([words[0], *words[1:]])
                segment = []
            else:
                segment.append(tok)
    return found
