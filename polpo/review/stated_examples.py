"""The examples a task states about its own result, found in its text and in the work's docstrings. Pure.

A task that says ``>>> below_zero([1, 2, -4, 5])`` / ``True``, or ``add(2, 3) ➞ 5``, has told the reviewer how
to check part of the work: polpo runs those examples (:mod:`polpo.review.evidence_run`) before any model looks,
so the verdict rests on what the work does, not on what a model believes it does. Two forms are read:

* doctest examples (``>>> expr`` then the expected output), by the standard library's own parser, wherever they
  are: the task's description and criteria, the docstrings and comments of the work's Python files, a README;
* one-line examples ``call(args) ➞ value`` (also ``==>``, ``=>``, ``->``, ``==``, ``should return``,
  ``returns``), only when the call is to a function the work defines, so prose is never taken for an example;
* when the work defines exactly one function (tests and private helpers aside), the forms that do not name it:
  ``For lst = [1,2,3] the output should be 14`` (HumanEval/133; ``the result should be``, several parameters:
  /112), called with those parameters by name, and ``Input: [4,2,3]`` then ``Output: [2, 1]`` on the next line
  (/68; ``Input: arr = [1], k = 1`` names them), a bare input only when the function has one parameter.

An example must be concrete: a name in its arguments or expected value that is neither a builtin nor defined by
the work (``fib4(n) -> fib4(n-1) + fib4(n-2)`` defines, it does not exemplify) makes it prose, not an example:
run, it would fail on a ``NameError`` whatever the work does.

Each example keeps where it was found; the same example stated twice (the task's docstring copied into the
file) is kept once.
"""

from __future__ import annotations

import ast
import builtins
import doctest
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["MAX_EXAMPLES", "StatedExample", "defined_names", "find_examples"]

MAX_EXAMPLES = 40
"""Examples run per review: a docstring with hundreds of them says no more than its first forty."""
MAX_EXAMPLE_CHARS = 2_000

Style = Literal["doctest", "value"]

_ARROW = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:for\s+|e\.g\.\s*)?(?P<expr>(?P<name>[A-Za-z_][\w.]*)\s*\(.*\))\s*"
    r"(?:➞|==>|=>|->|→|==|\bshould\s+return\b|\bshould\s+be\b|\breturns?\b)\s*:?\s*(?P<want>.+?)\s*[.;,]?\s*$")
_FOR = re.compile(r"\bfor\s+(?P<args>[A-Za-z_]\w*\s*=.+?)\s*,?\s*the\s+(?:output|result)\s+should\s+be\s*:?\s*"
                  r"(?P<want>.+?)\s*$", re.IGNORECASE)
_INPUT = re.compile(r"^\s*(?:[-*•]\s*)?input\s*:\s*(?P<value>.+?)\s*$", re.IGNORECASE)
_FOR_LINE, _INPUT_LINE = (re.compile(r.pattern, re.IGNORECASE | re.MULTILINE) for r in (_FOR, _INPUT))
"""The same, on any line of a whole text: whether it is worth reading line by line."""
_OUTPUT = re.compile(r"^\s*(?:[-*•]\s*)?output\s*:\s*(?P<value>.+?)\s*$", re.IGNORECASE)
_BUILTINS = frozenset(vars(builtins))
_PARSER = doctest.DocTestParser()


@dataclass(frozen=True)
class StatedExample:
    """One example: ``source`` is Python code (a doctest's statements, or the call), ``want`` the expected
    output (doctest: what it prints; value: an expression the result must equal)."""

    source: str
    want: str
    style: Style
    origin: str
    """Where it was stated: ``task``, ``criteria``, or a file's path."""

    @property
    def key(self) -> tuple[str, str]:
        return (" ".join(self.source.split()), " ".join(self.want.split()))


@dataclass(frozen=True)
class _Function:
    name: str
    params: tuple[str, ...]


class _Defined:
    """What the work's Python sources define, parsed on first use: most texts state no example that names a
    function, and parsing every source for each review was most of the search's time."""

    def __init__(self, sources: Sequence[str]) -> None:
        self._sources = sources

    @functools.cached_property
    def _parsed(self) -> list[ast.Module]:
        return _trees(self._sources)

    @functools.cached_property
    def names(self) -> set[str]:
        return _names(self._parsed)

    @functools.cached_property
    def only(self) -> _Function | None:
        return _only_function(self._parsed)


def _trees(sources: Iterable[str]) -> list[ast.Module]:
    out = []
    for text in sources:
        try:
            out.append(ast.parse(text))
        except (SyntaxError, ValueError):
            continue  # a file that does not parse defines nothing (its examples may still be doctests)
    return out


def _only_function(trees: Sequence[ast.Module]) -> _Function | None:
    """The one top-level function the work defines (tests and ``_private`` helpers aside), or None."""
    found = [_Function(n.name, tuple(a.arg for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs]))
             for tree in trees for n in tree.body
             if isinstance(n, ast.FunctionDef) and not n.name.startswith(("_", "test"))]
    return found[0] if len(found) == 1 else None


def defined_names(sources: Iterable[str]) -> set[str]:
    """The functions and classes defined at the top level (and methods, as ``Class.name``) of Python sources
    that parse; a file that does not parse defines nothing (its examples may still be doctests)."""
    return _names(_trees(sources))


def _names(trees: Sequence[ast.Module]) -> set[str]:
    names: set[str] = set()
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names.add(node.name)
            elif isinstance(node, ast.ClassDef):
                names.add(node.name)
                names.update(f"{node.name}.{n.name}" for n in node.body
                             if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef))
    return names


_QUOTES = re.compile(r"\"\"\"|\'\'\'")


def _doctests(text: str, origin: str) -> list[StatedExample]:
    if ">>>" not in text:
        return []
    text = _QUOTES.sub("\n", text)  # a docstring's closing quotes end its last example's output
    try:
        examples = _PARSER.get_examples(text)
    except ValueError:  # inconsistent indentation inside one example: read it line by line instead
        examples = []
        for block in re.split(r"\n\s*\n", text):
            try:
                examples.extend(_PARSER.get_examples(block.strip("\n")))
            except ValueError:
                continue
    return [_doctest_example(e.source.rstrip("\n"), e.want.rstrip("\n"), origin) for e in examples
            if e.want.strip() or not e.source.lstrip().startswith(("import ", "from "))]


def _doctest_example(source: str, want: str, origin: str) -> StatedExample:
    """A comparison without an output line (``>>> f(0) == 0``, as HumanEval/108 writes them) states that it is
    true; run as doctest, the ``True`` it prints would fail it against the empty output."""
    if not want.strip() and isinstance(_expression(source), ast.Compare):
        return StatedExample(source, "True", "value", origin)
    return StatedExample(source, want, "doctest", origin)


def _arrows(text: str, origin: str, work: _Defined) -> list[StatedExample]:
    out: list[StatedExample] = []
    for line in text.splitlines():
        if ">>>" in line:
            continue  # a doctest line: read by the doctest parser
        m = _ARROW.match(line)
        if m is None or m.group("name") not in (names := work.names):
            continue
        want = m.group("want").strip().strip("`")
        if want in _TYPE_WORDS:
            continue  # "f(x) returns list" describes the type, not a value the call must equal
        if _concrete(m.group("expr"), names) and _concrete(want, names):
            out.append(StatedExample(m.group("expr").strip(), want, "value", origin))
    return out


def _expression(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None


_TYPE_WORDS = frozenset({"list", "dict", "set", "tuple", "str", "int", "float", "bool", "bytes", "object",
                         "type", "frozenset", "complex"})


def _concrete(expr: str, names: set[str]) -> bool:
    """Whether ``expr`` parses and every name in it is a builtin or defined by the work."""
    node = _expression(expr)
    return node is not None and all(n.id in _BUILTINS or n.id in names
                                    for n in ast.walk(node) if isinstance(n, ast.Name))


def _leading_value(text: str, names: set[str]) -> str | None:
    """The longest leading expression of an expected output ("14." → ``14``, "true" → ``True``)."""
    words = text.strip().strip("`").split()
    for n in range(len(words), 0, -1):
        candidate = " ".join(words[:n]).rstrip(".,;:")
        candidate = {"true": "True", "false": "False", "none": "None"}.get(candidate.lower(), candidate)
        if candidate and _concrete(candidate, names):
            return candidate
    return None


def _named_call(fn: _Function, args: str, names: set[str]) -> str | None:
    """``fn`` called with ``args`` (``lst = [1,2,3]``; ``s = "ab", c = "a"``) by name, cut at the last comma
    that leaves a valid call (``N = 150, the sum of digits will be 6`` → ``N = 150``)."""
    cuts = [len(args)] + [i for i in range(len(args) - 1, 0, -1) if args[i] == ","]
    for cut in cuts:
        call = f"{fn.name}({args[:cut].strip()})"
        node = _expression(call)
        if (isinstance(node, ast.Call) and node.keywords and not node.args
                and all(k.arg in fn.params for k in node.keywords) and _concrete(call, names)):
            return call
    return None


def _input_call(fn: _Function, value: str, names: set[str]) -> str | None:
    """``fn`` called on an ``Input:`` line's value: parameters by name, or a bare value for its one parameter."""
    if "=" in value and (call := _named_call(fn, value, names)) is not None:
        return call
    call = f"{fn.name}({value.strip()})"
    node = _expression(call)
    if len(fn.params) == 1 and isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
            and _concrete(call, names):
        return call
    return None


def _unnamed(text: str, origin: str, work: _Defined) -> list[StatedExample]:
    """The "For x = V the output should be W" and "Input: V" / "Output: W" examples of the one function."""
    out: list[StatedExample] = []
    if not (_FOR_LINE.search(text) or _INPUT_LINE.search(text)) or (fn := work.only) is None:
        return out
    names = work.names
    lines = [line for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if (m := _FOR.search(line)) is not None:
            call, want = _named_call(fn, m.group("args"), names), _leading_value(m.group("want"), names)
        elif (m := _INPUT.match(line)) is not None and i + 1 < len(lines) \
                and (o := _OUTPUT.match(lines[i + 1])) is not None:
            call, want = _input_call(fn, m.group("value"), names), _leading_value(o.group("value"), names)
        else:
            continue
        if call is not None and want is not None:
            out.append(StatedExample(call, want, "value", origin))
    return out


def find_examples(texts: Sequence[tuple[str, str]], python_sources: Sequence[str]) -> list[StatedExample]:
    """The examples stated in ``texts`` (``(origin, text)`` pairs: the task, its criteria, the work's files),
    about the functions ``python_sources`` define; doctests are kept whatever they call. At most
    :data:`MAX_EXAMPLES`, each source and output under :data:`MAX_EXAMPLE_CHARS`, the first of duplicates."""
    work = _Defined(python_sources)
    seen: set[tuple[str, str]] = set()
    out: list[StatedExample] = []
    for origin, text in texts:
        for ex in _doctests(text, origin) + _arrows(text, origin, work) + _unnamed(text, origin, work):
            if ex.key in seen or len(ex.source) > MAX_EXAMPLE_CHARS or len(ex.want) > MAX_EXAMPLE_CHARS:
                continue
            seen.add(ex.key)
            out.append(ex)
            if len(out) >= MAX_EXAMPLES:
                return out
    return out
