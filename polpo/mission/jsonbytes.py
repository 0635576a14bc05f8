"""Mission file bytes → JSON values, refusing what no later stage can carry. Pure.

Text that is not UTF-8 (a UTF-8 byte-order mark is dropped, here and in the watcher alike), NUL characters and
lone surrogates in any string (argv, file names, SQLite and UTF-8 JSON cannot hold them), whole numbers beyond
±2^53 and numbers too large for a double (orjson and SQLite stop at 64 bits), nesting deeper than
:data:`MAX_DEPTH`, and more than :data:`MAX_ENTRIES` in one list or object or :data:`MAX_VALUES` in the
document (so the validation's work and memory stay bounded: 300 000 bad items would otherwise make 300 000
errors).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from polpo.mission.rawdoc import Loc, sort_key

__all__ = ["MAX_DEPTH", "MAX_ENTRIES", "MAX_SAFE_INT", "MAX_VALUES", "UTF8_BOM", "carryable", "parse", "strip_bom",
           "unsafe_values"]

MAX_DEPTH = 64  # objects and lists nested deeper than this are refused (orjson's own limit is 255)
MAX_SAFE_INT = 2**53  # the largest whole number every JSON reader (JavaScript's included) keeps exactly
MAX_ENTRIES = 10_000  # items of one list, keys of one object (10 000 tasks fit)
MAX_VALUES = 200_000  # values in the whole document: bounds the work (and the errors) of the validation
UTF8_BOM = b"\xef\xbb\xbf"


def carryable(text: str) -> str:
    """``text`` that UTF-8, SQLite and argv can carry: NUL and lone surrogates become ``\\x00`` / ``\\udXXX``."""
    if text.isascii() and "\x00" not in text:
        return text
    text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def strip_bom(raw: bytes) -> bytes:
    """The bytes without a leading UTF-8 byte-order mark (editors on Windows add one); the one BOM rule."""
    return raw[len(UTF8_BOM):] if raw.startswith(UTF8_BOM) else raw


_UTF_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
             (b"\xfe\xff", "UTF-16"))


def parse(raw: bytes) -> tuple[Any, str | None, list[tuple[Loc, str]]]:
    """JSON → data, or the one problem (at ``$``) that stops everything; plus duplicate keys (JSON keeps the
    last)."""
    raw = strip_bom(raw)
    if not raw.strip(b" \t\r\n"):
        return None, ("file is empty"), []
    for bom, name in _UTF_BOMS:
        if raw.startswith(bom):
            return None, (f"not valid JSON: the file is {name} text (it starts with a {name} "
                                      "byte-order mark); save it as UTF-8"), []
    if b"\x00" in raw:
        return None, ("not valid JSON: the file contains NUL bytes (UTF-16 or binary data?); "
                                  "save it as UTF-8 text"), []
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        return None, (f"not valid JSON: not UTF-8 text (line {line}, column {col})"), []
    dupes: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) < len(items):
            seen: set[str] = set()
            repeated = dupes[id(obj)] = []
            for k, _ in items:
                if k in seen:
                    repeated.append(k)
                seen.add(k)
        return obj

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as e:
        return None, (f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"), []
    except RecursionError:
        return None, (f"nested too deeply: at most {MAX_DEPTH} levels of objects and lists"), []
    except ValueError as e:
        return None, (f"not valid JSON: {e}"), []
    found: list[tuple[Loc, str]] = []
    if dupes:
        for loc, node in _walk(data):
            found.extend(((*loc, key), "duplicate key: JSON keeps only the last value; remove one")
                         for key in dupes.get(id(node), ()))
    return data, None, found


def unsafe_values(data: Any) -> list[tuple[Loc, str]]:
    """Strings, keys and numbers no later stage can carry, and nesting beyond :data:`MAX_DEPTH`; iterative."""
    found: list[tuple[Loc, str]] = []
    stack: list[tuple[Loc, Any]] = [((), data)]
    seen = 0
    while stack:
        loc, node = stack.pop()
        seen += 1
        if seen > MAX_VALUES:
            return [((), f"too many values: at most {MAX_VALUES} strings, numbers, lists and objects in one "
                         "mission file")]
        if isinstance(node, str):
            if (why := _unsafe_text(node)) is not None:
                found.append((loc, why))
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if not -MAX_SAFE_INT <= node <= MAX_SAFE_INT:
                found.append((loc, "number out of range: whole numbers must be between -2^53 and 2^53"))
        elif isinstance(node, float):
            if not math.isfinite(node):
                found.append((loc, "number out of range: too large to be stored"))
        elif isinstance(node, dict | list):
            if len(loc) >= MAX_DEPTH:
                found.append((loc, f"nested too deeply: at most {MAX_DEPTH} levels of objects and lists"))
                continue
            if len(node) > MAX_ENTRIES:
                found.append((loc, f"too many entries ({len(node)}): at most {MAX_ENTRIES} in one "
                                   + ("object" if isinstance(node, dict) else "list")))
                continue
            if isinstance(node, dict):
                for k, v in node.items():
                    if (why := _unsafe_text(k)) is not None:
                        found.append(((*loc, k), "this key " + why.removeprefix("this text ")))
                    stack.append(((*loc, k), v))
            else:
                stack.extend(((*loc, i), v) for i, v in enumerate(node))
    found.sort(key=lambda p: sort_key(p[0]))
    return found


def _unsafe_text(text: str) -> str | None:
    if text.isascii() and "\x00" not in text:
        return None
    if "\x00" in text:
        return ("this text contains a NUL character (\\u0000), which no command line, file name or database "
                "text can hold; remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return ("this text contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which is not a "
                "character; write the character itself or a complete surrogate pair")
    return None


def _walk(data: Any) -> Iterator[tuple[Loc, dict[str, Any]]]:
    """Every object in the document with its location; iterative, so deep documents are fine."""
    stack: list[tuple[Loc, Any]] = [((), data)]
    while stack:
        loc, node = stack.pop()
        if isinstance(node, dict):
            yield loc, node
            stack.extend(((*loc, k), v) for k, v in node.items() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend(((*loc, i), v) for i, v in enumerate(node) if isinstance(v, dict | list))
