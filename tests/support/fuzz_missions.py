"""Hostile mission files for the intake fuzz tests and ``scripts/fuzz_intake.py``.

Seeds are the bundled missions (``missions/*.json``) and Polpo's example plans (templates,
parameters filled in). Each mutation takes bytes and a ``random.Random`` and returns bytes, so one generator
serves hypothesis (``st.randoms`` drives it and shrinks it) and the long script (a seeded ``Random``). The
mutations are the issue's list: BOM, UTF-16/32, lone surrogates (escaped and as raw bytes), NUL, control
characters, huge integers and floats, deep nesting, 100 000-item arrays, megabyte strings, truncation, byte
noise, duplicate keys, wrong types; :func:`entries` adds what is not a file: directories, symlinks (to a
directory, to nothing, to themselves, to a valid file) and FIFOs named ``*.json``.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from polpo.mission.jsonbytes import UTF8_BOM

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "templates"


def _fill(node: Any, values: dict[str, str]) -> Any:
    if isinstance(node, str):
        return re.sub(r"\{\{(\w+)\}\}", lambda m: values.get(m.group(1), "x"), node)
    if isinstance(node, list):
        return [_fill(v, values) for v in node]
    if isinstance(node, dict):
        return {k: _fill(v, values) for k, v in node.items()}
    return node


def _seeds() -> list[bytes]:
    out = [p.read_bytes() for p in sorted((REPO / "missions").glob("*.json"))]
    for p in sorted(EXAMPLES.glob("*.workflow.json")):
        template = json.loads(p.read_text())
        values = {q["name"]: str(q.get("default", "x")) for q in template.get("parameters", [])}
        out.append(json.dumps(_fill(template["plan"], values), indent=2, ensure_ascii=False).encode())
    return out


SEEDS: list[bytes] = _seeds()

# ------------------------------------------------------------------------------------------ JSON surgery


def _nodes(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) slot of the document, to pick one to change."""
    out: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out.append((node, k))
            if isinstance(v, dict | list):
                stack.append(v)
    return out


_MARK = "@@FUZZ@@"


def _splice(raw: bytes, rnd: random.Random, fragment: bytes, *, strings_only: bool = False) -> bytes:
    """Put a raw JSON ``fragment`` at a random value slot of the document (or append to a string)."""
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return raw + fragment
    slots = _nodes(doc)
    if strings_only:
        slots = [(c, k) for c, k in slots if isinstance(c[k], str)]
    if not slots:
        return raw + fragment
    container, key = rnd.choice(slots)
    if strings_only:
        container[key] = container[key] + _MARK
        text = json.dumps(doc, ensure_ascii=rnd.random() < 0.5)
        return text.encode("utf-8", "surrogatepass").replace(_MARK.encode(), fragment)
    container[key] = _MARK
    return json.dumps(doc, ensure_ascii=rnd.random() < 0.5).encode("utf-8", "surrogatepass").replace(
        json.dumps(_MARK).encode(), fragment)


def _in_string(fragment: bytes) -> Callable[[bytes, random.Random], bytes]:
    return lambda raw, rnd: _splice(raw, rnd, fragment, strings_only=True)


def _as_value(make: Callable[[random.Random], bytes]) -> Callable[[bytes, random.Random], bytes]:
    return lambda raw, rnd: _splice(raw, rnd, make(rnd))


def _huge_int(rnd: random.Random) -> bytes:
    return rnd.choice([b"9007199254740993", b"-9007199254740993", b"9223372036854775808", b"18446744073709551616",
                       b"1" + b"0" * 30, b"-1" + b"0" * 40, b"1" + b"0" * 4000, b"1" + b"0" * 5000])


def _huge_float(rnd: random.Random) -> bytes:
    return rnd.choice([b"1e999", b"-1e999", b"1e308", b"4.9e-324", b"1.0e+400", b"-0.0", b"1E30"])


def _deep(rnd: random.Random) -> bytes:
    depth = rnd.choice([63, 64, 65, 200, 1000, 100_000])
    if rnd.random() < 0.5:
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


def _wide(rnd: random.Random) -> bytes:
    n = rnd.choice([1000, 100_000])
    item = rnd.choice([b"1", b'"x"', b"{}", b"[]", b"null", b'{"title":"t","description":"d"}'])
    return b"[" + b",".join([item] * n) + b"]"


def _long_string(rnd: random.Random) -> bytes:
    return b'"' + rnd.choice([b"x", b"\\n", b"\\u001b", b"\xc3\xa9"]) * rnd.choice([70_000, 1_000_000]) + b'"'


def _any_value(rnd: random.Random) -> bytes:
    return rnd.choice([b"null", b"true", b"0", b"-1", b"1.5", b'""', b'"x"', b"[]", b"{}", b'[null]',
                       b'{"type": "nope"}', b'"P99999Y"', b'"9999-12-31T23:59:59-14:00"', b'"PT0S"'])


def _truncate(raw: bytes, rnd: random.Random) -> bytes:
    return raw[:rnd.randrange(len(raw) + 1)]


def _flip(raw: bytes, rnd: random.Random) -> bytes:
    b = bytearray(raw)
    for _ in range(rnd.randint(1, 8)):
        if b:
            b[rnd.randrange(len(b))] = rnd.randrange(256)
    return bytes(b)


def _insert_bytes(raw: bytes, rnd: random.Random) -> bytes:
    at = rnd.randrange(len(raw) + 1)
    junk = rnd.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\x1b[2J", b",", b"}", b'"', b"\\"])
    return raw[:at] + junk + raw[at:]


def _delete_bytes(raw: bytes, rnd: random.Random) -> bytes:
    at = rnd.randrange(len(raw) + 1)
    return raw[:at] + raw[at + rnd.randint(1, 16):]


def _dup_key(raw: bytes, rnd: random.Random) -> bytes:
    starts = [m.start() for m in re.finditer(rb"\{", raw)]
    if not starts:
        return raw
    at = rnd.choice(starts) + 1
    return raw[:at] + b'"title": "a", "title": "b", ' + raw[at:]


def _drop_key(raw: bytes, rnd: random.Random) -> bytes:
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return raw
    objects = [c for c, k in _nodes(doc) if isinstance(c, dict)]
    if not objects:
        return raw
    obj = rnd.choice(objects)
    if obj:
        del obj[rnd.choice(sorted(obj))]
    else:
        obj["unknownKey"] = 1
    return json.dumps(doc).encode("utf-8", "surrogatepass")


def _reencode(codec: str) -> Callable[[bytes, random.Random], bytes]:
    def go(raw: bytes, rnd: random.Random) -> bytes:
        try:
            return raw.decode("utf-8-sig").encode(codec)
        except UnicodeError:
            return raw
    return go


Mutation = Callable[[bytes, random.Random], bytes]

MUTATIONS: dict[str, Mutation] = {
    "bom": lambda raw, rnd: UTF8_BOM + raw,
    "double-bom": lambda raw, rnd: UTF8_BOM + UTF8_BOM + raw,
    "utf-16": _reencode("utf-16"),
    "utf-16-le": _reencode("utf-16-le"),
    "utf-32": _reencode("utf-32"),
    "surrogate": _in_string(b"\\ud800"),
    "low-surrogate": _in_string(b"\\udfff tail"),
    "surrogate-bytes": _in_string(b"\xed\xa0\x80"),  # a surrogate written as (invalid) UTF-8 bytes
    "surrogate-key": lambda raw, rnd: raw.replace(b'"title"', b'"ti\\ud800tle"', 1),
    "nul": _in_string(b"\\u0000"),
    "control": _in_string(b"\\u001b[2J\\u001b]0;owned\\u0007\\n\\r\\t\\u007f\\u2028"),
    "huge-int": _as_value(_huge_int),
    "huge-float": _as_value(_huge_float),
    "deep": _as_value(_deep),
    "wide": _as_value(_wide),
    "long-string": _as_value(_long_string),
    "wrong-type": _as_value(_any_value),
    "truncate": _truncate,
    "flip": _flip,
    "insert-bytes": _insert_bytes,
    "delete-bytes": _delete_bytes,
    "duplicate-key": _dup_key,
    "drop-key": _drop_key,
}


def mutate(raw: bytes, names: list[str], rnd: random.Random) -> bytes:
    for name in names:
        raw = MUTATIONS[name](raw, rnd)
    return raw


def random_file(rnd: random.Random) -> tuple[str, bytes]:
    """One mutated seed: (what was done, bytes)."""
    names = [rnd.choice(sorted(MUTATIONS)) for _ in range(rnd.choice([1, 1, 1, 2, 3]))]
    return "+".join(names), mutate(rnd.choice(SEEDS), names, rnd)


# ------------------------------------------------------------------------------------------- hypothesis

_scalar = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False), st.text(max_size=20))
_json = st.recursive(_scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=20)
_field = st.sampled_from(["title", "description", "assignTo", "dependsOn", "expectations", "priority", "deadline",
                          "maxRetries", "maxFixAttempts", "maxDuration", "retryPolicy", "sideEffects",
                          "expectedOutcomes", "notifications", "metrics", "bogus"])
_task = st.dictionaries(_field, _json, max_size=6).map(lambda d: {"title": "t", "description": "d", **d})


@st.composite
def mission_documents(draw: st.DrawFn) -> bytes:
    """Mission-shaped JSON whose values are anything JSON can hold (hypothesis-generated, shrinkable)."""
    doc: dict[str, Any] = {"tasks": draw(st.lists(_task, min_size=0, max_size=3))}
    for key in draw(st.lists(st.sampled_from(["name", "team", "qualityGates", "settings", "deadline",
                                              "qualityThreshold", "workspace", "notifications"]), max_size=3)):
        doc[key] = draw(_json)
    return json.dumps(doc, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


_RANDOMS = st.randoms(use_true_random=False)
_RANDOMS.validate()  # builds it now: hypothesis imports its module on first use, and CPython 3.11.7 compiling a
# module deep inside a draw raised "SystemError: AST constructor recursion depth mismatch" (a fresh clone's run)


@st.composite
def mutated_seeds(draw: st.DrawFn) -> bytes:
    seed = draw(st.sampled_from(SEEDS))
    names = draw(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3))
    return mutate(seed, names, draw(_RANDOMS))


mission_files = st.one_of(mutated_seeds(), mission_documents())

# --------------------------------------------------------------------------------- entries in the folder

SPECIAL_KINDS = ("directory", "symlink-to-directory", "fifo", "dangling-symlink", "symlink-loop",
                 "symlink-to-valid")


@dataclass(frozen=True)
class Entry:
    """One name to drop into the missions folder: a file's bytes, or a special kind."""

    name: str
    kind: str  # "file" or one of SPECIAL_KINDS
    what: str
    data: bytes = b""

    def make(self, folder: Path, aside: Path) -> None:
        """Create it in ``folder`` (files atomically, as a careful writer would); ``aside`` holds link targets."""
        path = folder / self.name
        if self.kind == "file":
            tmp = folder / f".{self.name}.tmp"
            tmp.write_bytes(self.data)
            os.replace(tmp, path)
        elif self.kind == "directory":
            path.mkdir()
        elif self.kind == "symlink-to-directory":
            (aside / self.name).mkdir(exist_ok=True)
            path.symlink_to(aside / self.name)
        elif self.kind == "fifo":
            os.mkfifo(path)
        elif self.kind == "dangling-symlink":
            path.symlink_to(aside / "nothing-here")
        elif self.kind == "symlink-loop":
            path.symlink_to(path)
        elif self.kind == "symlink-to-valid":
            target = aside / f"{self.name}.target"
            target.write_bytes(self.data)
            path.symlink_to(target)

    def snapshot(self, folder: Path) -> tuple[object, ...]:
        path = folder / self.name
        if path.is_symlink():
            return ("link", os.readlink(path))
        if path.is_fifo():
            return ("fifo",)
        if path.is_dir():
            return ("dir", sorted(os.listdir(path)))
        return ("file", path.read_bytes())


def entries(count: int, seed: int, *, valid: bytes) -> Iterator[Entry]:
    """``count`` hostile entries from a seeded generator; ``valid`` is used for symlinks to a valid file."""
    rnd = random.Random(seed)
    for i in range(count):
        if rnd.random() < 0.1:
            kind = rnd.choice(SPECIAL_KINDS)
            yield Entry(f"fuzz-{seed}-{i:05d}.json", kind, kind, valid if kind == "symlink-to-valid" else b"")
        else:
            what, data = random_file(rnd)
            yield Entry(f"fuzz-{seed}-{i:05d}.json", "file", what, data)
