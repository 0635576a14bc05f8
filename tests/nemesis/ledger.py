"""The workload's agent and its ledger: every run of every task on every node, by the agents themselves.

Each run appends lines to one file with O_APPEND writes (``>>``: one ``write`` per line, so lines from many
processes never interleave): ``start`` when it begins, ``beat`` every :data:`BEAT` seconds while it works, ``end``
with its exit code. Every line carries the wall-clock time (``$EPOCHREALTIME``), the task, the attempt number,
the node, the agent's pid (its process group) and its parent's pid (the daemon that started it). A run that was
killed has no ``end``: its last ``beat`` says until when, at least, it lived.

The agent works ``SECONDS`` (its task's description), writes the file its task's expectation looks for, and, when
the description says ``flaky``, fails its first attempt (exit 1) so the policy sends a fix.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["AGENT", "BEAT", "Line", "Run", "parse", "runs"]

BEAT = 0.5  # seconds between two beats (half the second: half the blind spot of a killed run)

AGENT = f"""#!/bin/bash
# nemesis agent: $1 = seconds of work, $2 = ok | flaky  (see tests/nemesis/ledger.py)
me="$POLPO_TASK_ID $POLPO_ATTEMPT $NEMESIS_NODE $$ $PPID"
echo "start $EPOCHREALTIME $me" >> "$NEMESIS_LEDGER"
steps=$(awk -v s="$1" -v b="{BEAT}" 'BEGIN {{ n = int(s / b + 0.5); print (n < 1 ? 1 : n) }}')
for ((i = 0; i < steps; i++)); do
    sleep {BEAT}
    echo "beat $EPOCHREALTIME $me" >> "$NEMESIS_LEDGER"
done
rc=0
if [ "$2" = flaky ] && [ "$POLPO_ATTEMPT" = 1 ]; then rc=1; fi
[ $rc = 0 ] && echo "$POLPO_TASK_ID" > "done-${{POLPO_TASK_ID//[:#]/_}}.txt"
echo "end $EPOCHREALTIME $me $rc" >> "$NEMESIS_LEDGER"
exit $rc
"""


def done_file(task_id: str) -> str:
    """The file the agent writes when it succeeds (its task's ``file_exists`` expectation)."""
    return "done-" + task_id.replace(":", "_").replace("#", "_") + ".txt"


@dataclass(frozen=True)
class Line:
    kind: str  # start | beat | end
    t: float
    task: str
    attempt: int
    node: str
    pid: int
    ppid: int
    rc: int | None = None


@dataclass
class Run:
    """One run of one attempt: from its ``start`` to its ``end``, or to its last ``beat`` if it was killed."""

    task: str
    attempt: int
    node: str
    pid: int
    ppid: int  # the daemon that started it
    start: float
    last: float
    end: float | None = None
    rc: int | None = None
    times: list[float] = field(default_factory=list)

    @property
    def killed(self) -> bool:
        return self.end is None

    def __str__(self) -> str:
        how = f"ended {self.rc}" if self.end is not None else "no end (killed)"
        return f"{self.task}/{self.attempt} on {self.node} (pid {self.pid}, daemon {self.ppid}, {how})"


def parse(path: Path) -> list[Line]:
    """The ledger's lines (a torn last line, from a writer killed mid-write, is skipped)."""
    if not path.exists():
        return []
    out = []
    for raw in path.read_text(errors="replace").splitlines():
        parts = raw.split()
        if len(parts) < 7 or parts[0] not in ("start", "beat", "end"):
            continue
        try:
            out.append(Line(parts[0], float(parts[1]), parts[2], int(parts[3]), parts[4], int(parts[5]),
                            int(parts[6]), int(parts[7]) if parts[0] == "end" and len(parts) > 7 else None))
        except ValueError:
            continue
    return out


def runs(lines: list[Line]) -> list[Run]:
    """The runs the lines tell of, in order of their start."""
    by: dict[tuple[str, int, str, int], Run] = {}
    for ln in lines:
        key = (ln.task, ln.attempt, ln.node, ln.pid)
        r = by.get(key)
        if r is None:
            r = by[key] = Run(ln.task, ln.attempt, ln.node, ln.pid, ln.ppid, ln.t, ln.t)
        r.last = max(r.last, ln.t)
        r.start = min(r.start, ln.t)
        r.times.append(ln.t)
        if ln.kind == "end":
            r.end, r.rc = ln.t, ln.rc
    return sorted(by.values(), key=lambda r: r.start)
