"""Command agents: run a program (a script, a coding-agent CLI) in the task workspace.

The program gets the task three ways: placeholders in its argv (``{title}``, ``{description}``, ``{prompt}``,
``{workspace}``, ``{task_id}``, ``{mission_id}``, ``{attempt}``, substituted per argument, never through a shell),
``POLPO_*`` environment variables, and a JSON document on stdin. An agent with ``ask_human`` that exits 0 with a
question runs again once it is answered, the answer in its prompt (``[Polpo Clarification]``), in
``$POLPO_QUESTION`` / ``$POLPO_ANSWER`` and in the document's ``clarifications``.

Its environment is the minimal one (PATH, HOME, locale…: no keys) plus the variables ``[security]
env_passthrough`` names, the agent's ``env`` and the ``POLPO_*`` ones. Only an agent of the config may set
``inherit_env`` to get the daemon's whole environment instead.

**Outcomes.** ``$POLPO_OUTCOMES`` names an empty file (outside the workspace) where the program may declare its
deliverables, one JSON object per line, as an LLM agent does with ``register_outcome``::

    {"type": "file", "label": "Audit Report", "path": "audit-report.md"}
    {"type": "text", "label": "Summary", "value": "Three pages checked, two issues."}
    {"type": "url", "label": "Preview", "value": "https://example.com/preview"}
    {"type": "json", "label": "Totals", "value": {"net": 100, "vat": 22}}

A ``file`` must exist inside the workspace; the same label again replaces the earlier line. Each line is
validated like the tool's arguments; a line that is not valid is ignored and named at the end of the attempt's
stderr (``[polpo] $POLPO_OUTCOMES line N ignored: …``). The file is read once the program has exited, then deleted.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import anyio
import orjson
from pydantic import ValidationError

from polpo.agents.base import AgentRequest, AgentResult
from polpo.clock import Clock
from polpo.fsfaults import passing
from polpo.tools.outcomes import RegisterOutcomeArgs, register_outcome
from polpo.tools.procs import ProcResult, minimal_env, run_process
from polpo.tools.sandbox import Sandbox

__all__ = ["PLACEHOLDERS", "CommandAgent", "agent_env", "agent_stdin", "read_outcomes", "render_argv"]

PLACEHOLDERS: tuple[str, ...] = (
    "title",
    "description",
    "prompt",
    "workspace",
    "task_id",
    "mission_id",
    "attempt",
)
_PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_EMPTY: Mapping[str, str] = MappingProxyType({})


def _values(request: AgentRequest) -> dict[str, str]:
    return {
        "title": request.title,
        "description": request.description,
        "prompt": request.prompt,
        "workspace": os.fspath(request.workspace),
        "task_id": request.task_id,
        "mission_id": request.mission_id,
        "attempt": str(request.attempt_number),
    }


def render_argv(command: Sequence[str], request: AgentRequest) -> list[str]:
    """``command`` with the known placeholders substituted in each argument; other braces are left alone."""
    values = _values(request)
    return [_PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], arg) for arg in command]


def agent_env(
    request: AgentRequest,
    *,
    extra: Mapping[str, str] = _EMPTY,
    inherit_env: bool = False,
    passthrough: Sequence[str] = (),
    outcomes_file: str | None = None,
) -> dict[str, str]:
    """The child's environment: base (daemon env, or :func:`minimal_env` + the ``passthrough`` variables that
    are set) + ``extra`` + POLPO_* + the marker."""
    if inherit_env:
        env = dict(os.environ)
    else:
        env = minimal_env({name: os.environ[name] for name in passthrough if name in os.environ})
    env.update(extra)
    env.update(_texts(request))
    env.update(
        {
            "POLPO_TASK_ID": request.task_id,
            "POLPO_MISSION_ID": request.mission_id,
            "POLPO_MISSION_NAME": request.mission_name,
            "POLPO_WORKSPACE": os.fspath(request.workspace),
            "POLPO_ATTEMPT": str(request.attempt_number),
            "POLPO_ATTEMPT_KIND": request.kind,
            "POLPO_ATTEMPT_ID": request.attempt_id,
        }
    )
    if outcomes_file is not None:
        env["POLPO_OUTCOMES"] = outcomes_file
    key, value = request.env_marker
    env[key] = value
    return env


ENV_TEXT_MAX = 64 * 1024
"""Bytes a text variable may hold; Linux refuses to start a program with one over 128 KiB. Longer texts are on
stdin (always whole), and the variable says where: ``POLPO_PROMPT_ON_STDIN=1``."""


def _texts(request: AgentRequest) -> dict[str, str]:
    texts = {"POLPO_TASK_TITLE": request.title, "POLPO_TASK_DESCRIPTION": request.description,
             "POLPO_PROMPT": request.prompt, "POLPO_FEEDBACK": request.feedback or ""}
    if request.clarifications:  # its last question and the answer it waited for (all of them are in the prompt)
        texts["POLPO_QUESTION"] = request.clarifications[-1].question
        texts["POLPO_ANSWER"] = request.clarifications[-1].answer
    out = {}
    for name, text in texts.items():
        if len(text.encode("utf-8", "surrogatepass")) <= ENV_TEXT_MAX:
            out[name] = text
        else:
            out[name] = ""
            out[f"{name}_ON_STDIN"] = "1"
    return out


def agent_stdin(request: AgentRequest) -> bytes:
    """The JSON document written to the child's stdin."""
    return orjson.dumps(
        {
            "taskId": request.task_id,
            "missionId": request.mission_id,
            "missionName": request.mission_name,
            "title": request.title,
            "description": request.description,
            "prompt": request.prompt,
            "feedback": request.feedback,
            "workspace": os.fspath(request.workspace),
            "attempt": {"id": request.attempt_id, "number": request.attempt_number, "kind": request.kind},
            "expectations": request.expectations,
            "expectedOutcomes": request.expected_outcomes,
            "clarifications": [{"question": c.question, "answer": c.answer, "told": c.told}
                               for c in request.clarifications],
        }
    )


def _to_agent_result(proc: ProcResult, outcomes: list[dict[str, Any]], notes: list[str]) -> AgentResult:
    stderr = proc.stderr_tail + "".join(f"\n[polpo] {n}" for n in notes)
    return AgentResult(
        exit_code=proc.exit_code,
        signal=proc.signal,
        timed_out=proc.timed_out,
        stdout_tail=proc.stdout_tail,
        stderr_tail=stderr,
        stdout_bytes=proc.stdout_bytes,
        stderr_bytes=proc.stderr_bytes,
        duration=proc.duration,
        error=proc.error,
        permanent=proc.permanent,
        outcomes=outcomes,
    )


MAX_OUTCOME_LINES = 200


async def read_outcomes(path: str, workspace: os.PathLike[str] | str) -> tuple[list[dict[str, Any]], list[str]]:
    """(outcomes, notes about ignored lines) of a ``$POLPO_OUTCOMES`` file; the last line of a label wins."""
    try:
        if os.stat(path).st_size == 0:  # the usual case, no outcome declared: not worth a worker thread
            return [], []
        text = await anyio.Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return [], []
    sandbox = Sandbox(os.fspath(workspace))
    found: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for n, line in enumerate(text.splitlines()[:MAX_OUTCOME_LINES], 1):
        if not line.strip():
            continue
        try:
            args = RegisterOutcomeArgs.model_validate(orjson.loads(line))
        except (orjson.JSONDecodeError, ValidationError) as exc:
            notes.append(f"$POLPO_OUTCOMES line {n} ignored: {str(exc).splitlines()[0][:200]}")
            continue
        out = await register_outcome(sandbox, args)
        if not out.ok:
            notes.append(f"$POLPO_OUTCOMES line {n} ignored: {out.text[:200]}")
            continue
        outcome = out.data["outcome"]
        found.pop(outcome["label"], None)
        found[outcome["label"]] = outcome
    return list(found.values()), notes


_outcome_files = itertools.count(1)
_outcomes_ready: set[str] = set()  # daemons' folders made (and cleared of a previous life's files) by this process
_outcomes_temp: list[str] = []  # this process's own folder in the temp folder, for agents given none


def outcomes_dir(folder: str | None) -> str:
    """The private folder (0700) for ``$POLPO_OUTCOMES`` files: ``folder`` (the daemon's, in its state folder), or
    one of this process's own in the temp folder, removed at exit.

    A name in a private folder needs no file made in advance (``mkstemp`` cost a random name, an exclusive
    create and a close per attempt), and nobody else can plant a file or a link under that name. A folder that
    vanished (a ``/tmp`` cleaner, after days without an attempt) is made again. The daemon's folder is cleared
    the first time: a file left by a daemon killed mid-attempt must not be read as a new attempt's.
    """
    if folder is None:
        if not _outcomes_temp or not os.path.isdir(_outcomes_temp[-1]):
            _outcomes_temp.append(tempfile.mkdtemp(prefix="polpo-outcomes-"))
            atexit.register(shutil.rmtree, _outcomes_temp[-1], ignore_errors=True)
        return _outcomes_temp[-1]
    if folder not in _outcomes_ready or not os.path.isdir(folder):
        try:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(folder)
            os.makedirs(folder, mode=0o700)  # (its making fails as its clearing does, absent or not)
        except OSError as e:  # a read-only or full state folder (a passing fault): this process's own folder, in
            if passing(e) is None:  # the temp folder, does as well; the daemon's is tried again next time
                raise
            return outcomes_dir(None)
        _outcomes_ready.add(folder)
    return folder


class CommandAgent:
    """An :class:`~polpo.agents.base.Agent` that runs one program per attempt."""

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        clock: Clock,
        default_timeout: float | None = 1800.0,
        env: Mapping[str, str] = _EMPTY,
        inherit_env: bool = False,
        passthrough: Sequence[str] = (),
        grace: float = 5.0,
        output_limit: int = 64 * 1024,
        outcomes_dir: str | None = None,
    ) -> None:
        if not command:
            raise ValueError(f"agent {name!r}: empty command")
        self.name = name
        self.command: tuple[str, ...] = tuple(command)
        self.clock = clock
        self.default_timeout = default_timeout
        self.env: dict[str, str] = dict(env)
        self.inherit_env = inherit_env
        self.passthrough: tuple[str, ...] = tuple(passthrough)
        self.grace = grace
        self.output_limit = output_limit
        self.outcomes_dir = outcomes_dir  # where $POLPO_OUTCOMES files go (see outcomes_dir()); None: a temp folder

    def __repr__(self) -> str:
        return f"CommandAgent(name={self.name!r}, command={list(self.command)!r})"

    async def run(self, request: AgentRequest, *, on_start: Callable[[int], None]) -> AgentResult:
        start = self.clock.monotonic()
        try:
            if not os.path.isdir(request.workspace):  # noqa: ASYNC240 - one stat; the folder exists but once
                await anyio.Path(request.workspace).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return AgentResult(
                exit_code=None,
                signal=None,
                timed_out=False,
                stdout_tail="",
                stderr_tail="",
                stdout_bytes=0,
                stderr_bytes=0,
                duration=max(0.0, self.clock.monotonic() - start),
                error=f"cannot create workspace {request.workspace}: {exc.strerror or exc}",
            )
        # the agent creates it; the name is this process's own: a daemon's folder is cleared at its first use
        outcomes_file = os.path.join(outcomes_dir(self.outcomes_dir), f"{os.getpid()}-{next(_outcome_files)}.jsonl")
        try:
            proc = await run_process(
                render_argv(self.command, request),
                cwd=request.workspace,
                env=agent_env(request, extra=self.env, inherit_env=self.inherit_env, passthrough=self.passthrough,
                              outcomes_file=outcomes_file),
                clock=self.clock,
                stdin=agent_stdin(request),
                timeout=request.timeout if request.timeout is not None else self.default_timeout,
                grace=self.grace,
                output_limit=self.output_limit,
                on_start=on_start,
            )
            outcomes, notes = await read_outcomes(outcomes_file, request.workspace)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(outcomes_file)
        return _to_agent_result(proc, outcomes, notes)
