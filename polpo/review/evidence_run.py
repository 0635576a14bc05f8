"""Evidence first: what polpo learns by running the work, before any reviewer model looks at it.

Reviewers used to read the work and guess. A small model guesses badly (measured on Qwen2.5-Coder-1.5B: every
subtly broken function passed at the default threshold), while six of those ten functions failed the examples
their own task stated. So the panel starts from facts, gathered once per review and shown to every seat as
numbered items (``E1``, ``E2``…) that scores must cite:

* the task's cheap checks of this assessment (which tests ran, passed or failed, and what they printed), given
  by the caller;
* the examples the task states (:mod:`polpo.review.stated_examples`), run against the work's Python files by
  :mod:`polpo.review.example_harness` in a scratch copy of the workspace — a review never changes the work it
  judges — with the ``python3`` the agents' commands use, their secret-free environment and the attempt's
  marker, its own process group, a time limit per file import, per example and for the whole run;
* a work that is only text (no files) has its Python code blocks written to a scratch folder and run the same
  way; a text answer that is data (a list, a JSON value, numbers) is compared with what programs the judge
  writes from the task print (:mod:`polpo.review.answer_probe`).

A scratch copy holds the work's regular files (never a link, a pipe or a device) and leaves out version-control
folders; dependency folders (``node_modules``, virtual environments) are copied last, each only if it fits the
copy's bounds, and named when left out. A workspace too large to copy is said so, and nothing is run. Only the
files that define what the examples call are imported (not the tests), and examples that did not get to run are
notes, not failures of the work. The copy is made only when there is something to run: the examples are looked
for in the live files first (the panel read them once for every seat), since copying a workspace for a task that
states none cost more than the rest of the panel's own code.
"""

from __future__ import annotations

import ast
import json
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polpo.clock import Clock, SystemClock
from polpo.review.answer_probe import comparable
from polpo.review.answer_run import WriteAnswer, answer_probe
from polpo.review.evidence import CheckEvidence, Evidence
from polpo.review.probes import REFERENCE_FILE, called_function, derive_calls
from polpo.review.scratch import ANSWER, MAX_PY_FILES, Scratch, output_code
from polpo.review.stated_examples import StatedExample, defined_names, find_examples
from polpo.review.work_files import WorkFile
from polpo.tools.commands import command_env
from polpo.tools.procs import run_process

__all__ = ["gather_evidence"]

HARNESS = Path(__file__).with_name("example_harness.py")
PER_EXAMPLE = 5.0
RUN_LIMIT = 60.0
WriteReference = Callable[[str, int], Awaitable[str | None]]
"""Asks the judge model for its own implementation of a function (by name; the try, 0 first); the code, or None."""
REFERENCE_TRIES = 3
"""Implementations asked for until one passes every stated example: measured on Qwen2.5-Coder-1.5B, the first
failed one of HumanEval's stated examples on several problems, and a second, sampled, often passed."""
MAX_SHOWN_PROBES = 5


# ------------------------------------------------------------------------------------------------- gathering


async def gather_evidence(*, description: str, criteria: str, work: Sequence[WorkFile], output: str | None,
                          checks: Sequence[CheckEvidence], scratch: Scratch, clock: Clock | None = None,
                          env: Mapping[str, str] | None = None, write_reference: WriteReference | None = None,
                          write_answer: WriteAnswer | None = None) -> Evidence:
    """Run what can be run; never raises for what the work does (its failures are the evidence). ``work`` is
    the changed files as read (:func:`~polpo.review.work_files.read_work_files`)."""
    evidence = Evidence()
    for c in checks:
        detail = c.message + (f"\n    output (end): {c.output[-600:]}" if c.output.strip() else "")
        evidence.add("check", f"{c.type} check: {c.label}", c.passed, detail)
    # the examples are looked for in the live files (reading changes nothing); the work is copied only to run them
    if output is not None:
        code = output_code(output)
        if not code and write_answer is not None and comparable(output) is not None:
            await answer_probe(evidence, output, scratch, write_answer, clock or SystemClock(), env)
        sources, readmes = ([(ANSWER, code)] if code else []), []
    else:
        live = [f for f in work if f.plain]  # as the scratch copy holds them
        sources = [(f.name, f.text) for f in live if f.is_source][:MAX_PY_FILES]
        readmes = [(f.name, f.text) for f in live if f.is_readme]
    examples = find_examples([("task", description), ("criteria", criteria), *sources, *readmes],
                             [text for _, text in sources])
    if not examples:
        return evidence
    if not sources:
        evidence.add("note", f"the task states {len(examples)} example(s), but the work has no Python file to "
                     "run them against", None)
        return evidence
    root = await scratch.path()
    if root is None or not scratch.python_files:
        evidence.add("note", scratch.problem or "the work's Python files could not be copied to run them", None)
        return evidence
    needed, clock = _needed(scratch.python_files, dict(sources), examples), clock or SystemClock()
    probing = await _reference(root, examples, dict(sources), write_reference, f"{description}\n{criteria}")
    records = await _run_examples(evidence, root, needed, examples, clock, env, probing)
    tries = 1
    while probing is not None and write_reference is not None and tries < REFERENCE_TRIES \
            and records is not None and _weakness(records, len(examples)) != (0, 0):
        again = await write_reference(probing[0], tries)  # sampled: another implementation, not the same again
        tries += 1
        if again is None:
            continue
        (root / REFERENCE_FILE).write_text(again, encoding="utf-8")
        other = await _harness(root, needed, examples, clock, env, probing, work_examples=False)
        if other is not None and _weakness(other, len(examples)) < _weakness(records, len(examples)):
            records = other  # the better second opinion of the two
    if probing is not None and records is not None:
        _probe_items(evidence, probing, records, len(examples), tries)
    if scratch.left_out:
        evidence.add("note", "dependency folders too large to copy were left out of the copy the examples ran in: "
                     + ", ".join(scratch.left_out), None)
    return evidence


async def _reference(root: Path, examples: Sequence[StatedExample], sources: Mapping[str, str],
                     write: WriteReference | None, task: str) -> tuple[str, list[str]] | None:
    """``(function, probe calls)`` when the judge wrote its own implementation of the function the stated
    examples call (written into the copy as :data:`~polpo.review.probes.REFERENCE_FILE`); None otherwise."""
    if write is None:
        return None
    called = [c[0] for ex in examples if (c := called_function(ex)) is not None]
    defined = defined_names(sources.values())
    names = [n for n in dict.fromkeys(called) if n in defined]
    if not names:
        return None
    name = max(names, key=called.count)
    calls = derive_calls(examples, name, task)
    if not calls:
        return None
    code = await write(name, 0)
    if code is None:
        return None
    (root / REFERENCE_FILE).write_text(code, encoding="utf-8")
    return name, calls


def _called(examples: Sequence[StatedExample]) -> set[str]:
    """The names the examples' code uses (``f`` of ``f(1)``, ``mod`` of ``mod.f(1)``)."""
    names: set[str] = set()
    for ex in examples:
        try:
            tree = ast.parse(ex.source)
        except (SyntaxError, ValueError):
            continue
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    return names


def _needed(files: Sequence[str], sources: Mapping[str, str], examples: Sequence[StatedExample]) -> list[str]:
    """The files to import: those defining a name the examples call, else every file that is not a test (a
    test module imports the work the way its runner sets up, and its failure to load says nothing of it)."""
    called = _called(examples)
    plain = [f for f in files if not _is_test(f)]
    defining = [f for f in plain if defined_names([sources.get(f, "")]) & called]
    return defining or plain


def _is_test(name: str) -> bool:
    base = Path(name).name
    return base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py" or \
        "tests" in Path(name).parts[:-1]


@dataclass
class _Run:
    """What one harness run reported: the work's example results, the examples it started, the probes' records."""

    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    started: set[int] = field(default_factory=set)
    records: list[dict[str, Any]] = field(default_factory=list)
    load_errors: list[str] = field(default_factory=list)
    problem: str | None = None
    stderr: str = ""
    ended: str = ""


async def _harness(root: Path, files: list[str], examples: list[StatedExample], clock: Clock,
                   env: Mapping[str, str] | None, probing: tuple[str, list[str]] | None, *,
                   work_examples: bool = True) -> list[dict[str, Any]] | None:
    """The probes' records of one more harness run (a new implementation of the judge's); None if it failed."""
    run = await _run_harness(root, files, examples, clock, env, probing, work_examples=work_examples)
    return None if run.problem else run.records


async def _run_harness(root: Path, files: list[str], examples: list[StatedExample], clock: Clock,
                       env: Mapping[str, str] | None, probing: tuple[str, list[str]] | None, *,
                       work_examples: bool = True) -> _Run:
    nonce = secrets.token_hex(8)  # a line the work prints is not a result (see example_harness)
    request: dict[str, Any] = {"root": str(root), "files": files, "per_example": PER_EXAMPLE, "nonce": nonce,
                               "examples": [{"source": e.source, "want": e.want, "style": e.style} for e in examples],
                               "work_examples": work_examples}
    steps = len(files) + (len(examples) if work_examples else 0)
    if probing is not None:
        request |= {"reference": REFERENCE_FILE, "probes": probing[1]}
        steps += len(examples) + 2 * len(probing[1]) + 1
    limit = min(RUN_LIMIT + (RUN_LIMIT if probing else 0), PER_EXAMPLE * steps + 10)
    proc = await run_process(["python3", "-I", "-B", str(HARNESS)], cwd=root, env={**command_env(), **(env or {})},
                             clock=clock, stdin=json.dumps(request).encode(), timeout=limit, grace=1.0)
    run = _Run(stderr=proc.stderr_tail[-400:])
    for line in proc.stdout_tail.splitlines():
        mark, _, data = line.partition(" ")
        if mark != nonce:
            continue
        try:
            r = json.loads(data)
        except ValueError:
            continue
        if not isinstance(r, dict):
            continue
        if isinstance(r.get("start"), int):
            run.started.add(r["start"])
        elif {"reference", "refExample", "probe", "probeStart"} & r.keys():
            run.records.append(r)
        elif r.get("i") == -1:
            run.load_errors.append(str(r.get("error") or ""))
        elif isinstance(r.get("i"), int):
            run.results[r["i"]] = r
    if proc.error or (proc.timed_out and not run.results and work_examples):
        run.problem = proc.error or f"the examples did not finish within {limit:g} s"
    run.ended = ("the time limit" if proc.timed_out else f"signal {proc.signal}" if proc.signal is not None
                 else f"exit code {proc.exit_code}")
    return run


async def _run_examples(evidence: Evidence, root: Path, files: list[str], examples: list[StatedExample],
                        clock: Clock, env: Mapping[str, str] | None = None,
                        probing: tuple[str, list[str]] | None = None) -> list[dict[str, Any]] | None:
    """The stated examples on the work, as evidence; the probes' records (None when the run failed)."""
    run = await _run_harness(root, files, examples, clock, env, probing)
    for error in run.load_errors:
        evidence.add("load", "a file of the work failed to load", False, error)
    if run.problem:
        evidence.add("note", f"the stated examples could not be run: {run.problem}", None, run.stderr)
        return None
    results, started, ended = run.results, run.started, run.ended
    for i, ex in enumerate(examples):
        r = results.get(i)
        call = ex.source if ex.style == "value" else ex.source.replace("\n", " ; ")
        label = f"stated example: {call}"
        if r is None and i in started:  # the work ended the run while this example ran: its failure
            evidence.add("example", label, False, f"expected {ex.want}; the run ended while it ran ({ended})",
                         ex.origin)
        elif r is None:  # never asked: not the work's failure
            evidence.add("note", f"{label} did not run: the run ended before it ({ended})", None,
                         f"expected {ex.want}", ex.origin)
        elif r.get("passed"):
            evidence.add("example", label, True, f"expected {ex.want}, got {ex.want}", ex.origin)
        else:
            got = f"raised {r['error']}" if r.get("error") else f"got {str(r.get('got')).strip()}"
            evidence.add("example", label, False, f"expected {ex.want}, {got}", ex.origin)
    return run.records


def _weakness(records: list[dict[str, Any]], stated: int) -> tuple[int, int]:
    """How weak the judge's implementation is as a second opinion, (0, 0) at best: the stated examples it fails
    (all of them when it did not load), then the probes it raised on where the work returned a value (measured on
    HumanEval's strange_sort_list: a reference that raised on every odd-length list left the one bug the probes
    were for, which drops the middle element, uncounted)."""
    if any(r.get("reference") == "unloadable" for r in records):
        return stated + 1, 0
    failed = stated - sum(1 for r in records if "refExample" in r and r.get("passed"))
    raised = sum(1 for r in records if isinstance(r.get("probe"), int) and r.get("same") is None
                 and str(r.get("ref", "")).startswith("raised ") and not str(r.get("work", "")).startswith("raised "))
    return max(failed, 0), raised


def _probe_items(evidence: Evidence, probing: tuple[str, list[str]], records: list[dict[str, Any]],
                 stated: int, tries: int = 1) -> None:
    """The judge's own implementation and the work on the probes, as evidence: only when the implementation
    passed every stated example (else it is no second opinion) and the work loaded."""
    name, calls = probing
    if any(r.get("reference") == "unloadable" for r in records):
        evidence.add("note", f"the judge's own {name} (written from the task, to probe the work) did not load: "
                     "no probes", None)
        return
    ref_passed = sum(1 for r in records if "refExample" in r and r.get("passed"))
    if ref_passed < stated:
        written = "written from the task" + (f" ({tries} times)" if tries > 1 else "")
        evidence.add("note", f"the judge's own {name}, {written}, fails {stated - ref_passed} of the "
                     f"{stated} stated examples: it is no second opinion, and its probes are not evidence", None)
        return
    ran = [r for r in records if isinstance(r.get("probe"), int)]
    done = [r for r in ran if r.get("same") is not None]
    differ = [r for r in done if not r["same"]]
    if outside := len(ran) - len(done):  # a derived input may be one the task never promised to take
        evidence.add("note", f"{outside} probe(s) of {name} raised an error in one of the two and not the other: "
                     "the input may be outside what the task takes, so they are not counted", None)
    origin = "probes polpo derived from the stated examples"
    for r in differ[:MAX_SHOWN_PROBES]:
        evidence.add("probe", f"probe: {calls[r['probe']]}", False,
                     f"the work gives {r.get('work')}; the judge's own {name}, written from the task alone and "
                     f"passing all {stated} stated examples, gives {r.get('ref')}", origin)
    if len(differ) > MAX_SHOWN_PROBES:
        evidence.add("note", f"and {len(differ) - MAX_SHOWN_PROBES} more probe(s) where the two differ", None)
    if done and not differ:
        evidence.add("probe", f"{len(done)} probe(s) of {name} on inputs near the stated examples'", True,
                     f"the work gives the same as the judge's own {name}, written from the task alone and passing "
                     f"all {stated} stated examples, on every one", origin)
    elif not done:
        evidence.add("note", f"the probes of {name} did not run", None)
