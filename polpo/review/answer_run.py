"""Running the judge's own programs for a text answer, and what they establish (the comparison itself is
:mod:`polpo.review.answer_probe`'s). Each program runs in the review's scratch folder with the agents'
``python3``, their secret-free environment and the attempt's marker, in its own process group, within
:data:`ANSWER_LIMIT` seconds."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path

from polpo.clock import Clock
from polpo.review.answer_probe import ANSWER_PROGRAM, ORIGIN, comparable, printed_answer, same_answer, shown
from polpo.review.evidence import Evidence
from polpo.review.scratch import Scratch
from polpo.tools.commands import command_env
from polpo.tools.procs import run_process

__all__ = ["ANSWER_CALL", "ANSWER_LIMIT", "ANSWER_TRIES", "WriteAnswer", "answer_probe"]

WriteAnswer = Callable[[int], Awaitable[str | None]]
"""Asks the judge model for a program that prints the task's answer (the try, 0 first); the code, or None."""
ANSWER_CALL = "the answer"
"""The judge's own call that wrote a program computing a text answer, as its record names it."""
ANSWER_TRIES = 3
"""Programs asked for at most: measured on Qwen2.5-Coder-1.5B, a first program often read a file the task never
gave (``open('input.csv')``) instead of the data in the task's text."""
ANSWER_LIMIT = 10.0
"""Seconds a program of the judge's may run: a task whose answer is data is small to compute."""


async def answer_probe(evidence: Evidence, output: str, scratch: Scratch, write: WriteAnswer, clock: Clock,
                        env: Mapping[str, str] | None) -> None:
    """The work's answer beside what the judge's own programs print (:mod:`polpo.review.answer_probe`): up to
    :data:`ANSWER_TRIES` programs, each sampled apart; one that agrees with the work is shown so, and the work
    differs only when two different programs print the same answer and it is not the work's."""
    root = await scratch.path()
    if root is None:
        evidence.add("note", scratch.problem or "no scratch folder to compute the answer in", None)
        return
    label = "the answer, computed by a program the judge wrote from the task alone"
    printed: list[str] = []
    seen: set[str] = set()
    why: list[str] = []
    for attempt in range(ANSWER_TRIES):
        code = await write(attempt)
        if code is None:
            why.append("no runnable program in the reply")
            continue
        if (key := " ".join(code.split())) in seen:  # the same program again is no second opinion
            continue
        seen.add(key)
        answer, problem = await _computed(root, code, clock, env)
        if answer is None:
            why.append(problem)
            continue
        if same_answer(answer, output):
            evidence.add("probe", label, True, f"it prints the same answer as the work: {shown(answer)}", ORIGIN)
            return
        if any(same_answer(answer, other) for other in printed):
            evidence.add("probe", label, False, f"the work answers {shown(output)}; two programs the judge wrote "
                         f"apart both print {shown(answer)}", ORIGIN)
            return
        printed.append(answer)
    detail = "; ".join([*(f"a program printed {shown(p)}" for p in printed), *why])[:1500]
    evidence.add("note", f"the judge's own programs for the answer ({len(seen)}) did not settle it: none agrees "
                 "with the work and no two agree with each other; not evidence either way", None, detail)


async def _computed(root: Path, code: str, clock: Clock, env: Mapping[str, str] | None) -> tuple[str | None, str]:
    """What one program of the judge's prints, when it is an answer (data); else None and why not."""
    (root / ANSWER_PROGRAM).write_text(code, encoding="utf-8")
    proc = await run_process(["python3", "-I", "-B", ANSWER_PROGRAM], cwd=root, env={**command_env(), **(env or {})},
                             clock=clock, stdin=b"", timeout=ANSWER_LIMIT, grace=1.0)
    printed = printed_answer(proc.stdout_tail)
    if not proc.ok:
        ended = proc.error or ("it ran out of time" if proc.timed_out else f"it ended with exit code {proc.exit_code}")
        err = proc.stderr_tail.strip().splitlines()
        return None, ended + (f" ({err[-1][-200:]})" if err else "")
    if proc.stdout_bytes > len(proc.stdout_tail.encode()) or comparable(printed) is None:
        return None, "it printed no answer polpo can compare as data"
    return printed, ""
