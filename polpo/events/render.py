"""The one way an event is told to a person: the daemon's console, ``polpo tail`` and notifications.

Works on the event's JSON form (``{"event", "data", "missionId", "taskId", "ts"}``), so it renders a line of
``events.jsonl`` and a live event alike. Every value taken from the event is made terminal-safe first: a
newline, an escape sequence or another control character in a title or a message is shown escaped, so a
mission file can neither clear a terminal nor forge a second log line.

``render(ev, color=True)`` adds ANSI colour for a terminal: the event's name in green when something passed
or finished well, red when it failed, yellow for a fix, retry or warning, cyan for a start; the text is the
same with or without colour (escape codes come only from here, never from an event's values).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, TextIO

__all__ = ["headline", "paint", "render", "safe", "summary", "tone", "use_color"]

Data = Mapping[str, Any]
Ev = Mapping[str, Any]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def safe(value: Any) -> str:
    """``str(value)`` with control characters escaped (``\\n``, ``\\x1b`` …)."""
    text = str(value)
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match[str]) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def _num(v: Any, fmt: str = ".2f") -> str:
    return format(v, fmt) if isinstance(v, int | float) and not isinstance(v, bool) else "n/a"


def _dur_ms(ms: Any) -> str:
    """Milliseconds as a person reads them: 450 ms, 12s, 3m 5s, 2h 10m."""
    if not isinstance(ms, int | float):
        return "?"
    s = abs(ms) / 1000
    if s < 1:
        return f"{abs(ms):.0f} ms"
    if s < 60:
        return f"{s:.0f}s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m}m {s}s" if s else f"{m}m"
    h, m = divmod(m, 60)
    return f"{h}h {m}m" if m else f"{h}h"


def _entity(d: Data) -> str:
    return f"{safe(d.get('entityType', 'entity'))} {safe(d.get('entityId', '?'))}"


# ----------------------------------------------------------------------------------------------- per event


def _accepted(d: Data) -> str:
    s = f"{d.get('taskCount')} task(s) from {safe(d.get('file'))}"
    warnings = d.get("warnings") or []
    if warnings:
        s += f" ({len(warnings)} warning(s): {'; '.join(safe(w) for w in warnings[:3])})"
    return s


def _rejected(d: Data) -> str:
    lines = d.get("lines") or []
    more = d.get("more") or 0
    head = f"{safe(d.get('file'))}: {len(lines) + more} problem(s)"
    body = "".join(f"\n    {safe(ln)}" for ln in lines)
    return head + body + (f"\n    … and {more} more" if more else "")


def _completed(d: Data) -> str:
    rep = d.get("report") or {}
    s = f"{safe(d.get('outcome'))}: {safe(rep.get('summary', ''))} in {rep.get('durationSeconds', '?')} s"
    avg = (rep.get("quality") or {}).get("average")
    return s + (f"; quality {_num(avg)}" if avg is not None else "")


def _transition(d: Data) -> str:
    s = f"{safe(d.get('from'))} → {safe(d.get('to'))}"
    return s + (f" ({safe(d['reason'])})" if d.get("reason") else "")


def _spawned(d: Data) -> str:
    how = f"pid {d.get('pid')}" if d.get("pid") is not None else f"model {safe(d.get('model'))}"
    return f"agent {safe(d.get('agentName'))} started (attempt {d.get('attempt')}, {safe(d.get('kind'))}, {how})"


def _finished(d: Data) -> str:
    extra = " timed out" if d.get("timedOut") else ""
    extra += f" error: {safe(d['error'])}" if d.get("error") else ""
    return f"agent {safe(d.get('agentName'))} exited {d.get('exitCode')} after {d.get('duration')} s{extra}"


def _check_complete(d: Data) -> str:
    mark = "ERROR" if d.get("error") else "PERSON" if d.get("undecided") else "pass" if d.get("passed") else "FAIL"
    score = f" (score {_num(d['globalScore'])})" if d.get("globalScore") is not None else ""
    return f"[{mark}] {safe(d.get('type'))} {safe(d.get('label'))}: {safe(d.get('message'))}{score}"


def _baseline(d: Data) -> str:
    i = d.get("index")
    which = f"metric #{i + 1 if isinstance(i, int) else '?'} {safe(d.get('label'))}"
    if d.get("value") is None:
        return f"{which}: no baseline before attempt {d.get('attempt')}: {safe(d.get('problem'))}"
    return f"{which}: {_num(d['value'], '.10g')} before attempt {d.get('attempt')} (the baseline)"


def _assessment(d: Data) -> str:
    score = f" (score {_num(d['globalScore'])})" if d.get("globalScore") is not None else ""
    trigger = f" [{safe(d['trigger'])}]" if d.get("trigger") not in (None, "initial") else ""
    return ("passed" if d.get("passed") else "failed") + f"{score}{trigger}: {safe(d.get('message'))}"


def _deferred(d: Data) -> str:
    return (f"assessment could not be done ({safe(d.get('reason'))}); trying again in {_num(d.get('delay'), 'g')} s "
            f"({d.get('retry')}/{d.get('maxRetries')})")


def _assessment_error(d: Data) -> str:
    how = "retries spent" if d.get("retryable") else "not tried again by itself: it needs a change first"
    return (f"assessment could not be done ({how}): {safe(d.get('reason'))}; on hold until "
            f"`polpo retry {safe(d.get('taskId'))}`")


def _agent_interrupted(d: Data) -> str:
    s = f"attempt {d.get('attempt')} interrupted by the model provider: {safe(d.get('reason'))}"
    if d.get("waiting"):
        return s + "; on hold until `polpo retry`"
    return s + f"; runs again in {_num(d.get('delay'), 'g')} s ({d.get('retry')}/{d.get('maxRetries')})"


def _corrected(d: Data) -> str:
    fixes = "; ".join(f"#{c.get('index')} {safe(c.get('field'))}: {safe(repr(c.get('old')))} → "
                      f"{safe(repr(c.get('new')))}" for c in d.get("corrections") or [])
    return f"expectation judge corrected {fixes}"


def _failed_check(d: Data) -> str:
    return f" after {safe(d['check'])} failed" if d.get("check") else ""


def _retry(d: Data) -> str:
    s = f"retry {d.get('attempt')}/{d.get('maxRetries')}" + (" (manual)" if d.get("manual") else "")
    s += _failed_check(d)
    return s + (f": {safe(d['reason'])}" if d.get("reason") else "")


def _gate(d: Data) -> str:
    verdict = "passed" if "reason" not in d else "failed"
    where = f" in mission {safe(d['missionId'])}" if d.get("missionId") else ""
    avg = f" (average score {_num(d['avgScore'])})" if d.get("avgScore") is not None else ""
    return (f"quality gate {safe(d.get('gateName'))} {verdict}{where}{avg}"
            + (f": {safe(d['reason'])}" if d.get("reason") else ""))


def _sla_warning(d: Data) -> str:
    pct = d.get("percentUsed")
    used = f"{pct * 100:.0f}%" if isinstance(pct, int | float) else "most"
    return (f"SLA warning: {_entity(d)} has used {used} of its time; {_dur_ms(d.get('remaining'))} left "
            f"(deadline {safe(d.get('deadline'))})")


def _generic(d: Data) -> str:
    keep = {k: v for k, v in d.items() if not isinstance(v, dict | list) or len(str(v)) < 80}
    return " ".join(f"{safe(k)}={safe(v)}" for k, v in keep.items())


def _budget(d: Data) -> str:
    who = safe(d.get("scope")) + (f" {safe(d.get('key'))}" if d.get("key") else "")
    return f"{who} budget" + (f" of {safe(d.get('period'))}" if d.get("period") else "")


def _args(arguments: Any) -> str:
    """A tool call's arguments on one line, each value cut short."""
    if not isinstance(arguments, dict):
        return ""
    return ", ".join(f"{safe(k)}={safe(json.dumps(v, ensure_ascii=False, default=str)[:80])}"
                     for k, v in arguments.items())


def _spent(d: Data) -> str:
    return f"{_num(d.get('spent'), 'g')} of {_num(d.get('limit'), 'g')} {safe(d.get('measure'))}"


_FORMATS: dict[str, Callable[[Data], str]] = {
    "mission:accepted": _accepted,
    "mission:rejected": _rejected,
    "attention:digest": lambda d: f"{d.get('count')} waiting for you: " + "; ".join(
        f"{safe(i.get('state'))} {safe(i.get('target'))}" for i in (d.get("items") or [])[:5])
                                  + (" …" if (d.get("count") or 0) > 5 else ""),
    "workspace:unreachable": lambda d: f"node {safe(d.get('node'))} gave the task back: {safe(d.get('reason'))}",
    "mission:completed": _completed,
    "mission:cancelled": lambda d: f"cancelled by {safe(d.get('by'))}",
    "mission:resumed": lambda d: f"resumed by {safe(d.get('by'))} (task {safe(d.get('taskId'))})",
    "task:created": lambda d: f"{safe(d.get('title'))} (agent {safe(d.get('agent'))})",
    "task:transition": _transition,
    "task:recovered": lambda d: f"recovered from {safe(d.get('previousStatus'))}: {safe(d.get('action'))}",
    "task:timeout": lambda d: f"timed out after {d.get('elapsed')} s (limit {d.get('timeout')} s)",
    "task:fix": lambda d: f"fix attempt {d.get('attempt')}/{d.get('maxFix')}" + _failed_check(d),
    "task:retry": _retry,
    "task:retry:blocked": lambda d: f"waiting for `polpo approve`: {safe(d.get('reason'))}",
    "task:maxRetries": lambda d: f"retries exhausted ({d.get('retries')}/{d.get('maxRetries')})"
                                 + ("; escalating" if d.get("escalating") else ""),
    "task:approved": lambda d: f"approved: its {safe(d.get('next'))} runs next",
    "task:error": lambda d: f"internal error in {safe(d.get('where'))}: {safe(d.get('error'))}",
    "agent:spawned": _spawned,
    "agent:finished": _finished,
    "task:worktree": lambda d: f"works in {safe(d.get('path'))} on branch {safe(d.get('branch'))}"
                               + (f" ({safe(d['note'])})" if d.get("note") else ""),
    "task:merged": lambda d: f"merged {safe(d.get('branch'))} into {safe(d.get('into'))}",
    "task:merge:conflict": lambda d: f"{safe(d.get('branch'))} conflicts with {safe(d.get('into'))} in "
                                     f"{safe(', '.join(d.get('files') or []))}: back to a fix",
    "escalation:triggered": lambda d: f"escalated (level {d.get('level')}) to {safe(d.get('handler'))} "
                                      f"{safe(d.get('target'))}",
    "assessment:started": lambda d: f"{d.get('total')} check(s) for attempt {d.get('attempt')}"
                                    f" [{safe(d.get('trigger'))}]",
    "assessment:check:started": lambda d: f"check {_index(d)}: {safe(d.get('type'))} {safe(d.get('label'))}",
    "assessment:check:complete": _check_complete,
    "assessment:check:baseline": _baseline,
    "assessment:complete": _assessment,
    "assessment:corrected": _corrected,
    "assessment:deferred": _deferred,
    "assessment:error": _assessment_error,
    "assessment:needs-person": lambda d: f"{safe(d.get('title'))} waits for a person's review: "
                                         f"{safe(d.get('reason'))}; {safe(d.get('approve'))} or {safe(d.get('reject'))}",
    "assessment:person-verdict": lambda d: f"{'passed' if d.get('passed') else 'failed'} by {safe(d.get('by'))}"
                                           + (f" (score {_num(d['score'], 'g')})" if d.get("score") is not None
                                              else "") + f": {safe(d.get('reason'))}",
    "agent:interrupted": _agent_interrupted,
    "assessment:judged": lambda d: (f"expectation judge not called: {safe(d['skipped'])}" if d.get("skipped") else
                                    "expectation judge kept the expectations"
                                    + (f" ({safe(d['error'])})" if d.get("error") else "")),
    "quality:gate:passed": _gate,
    "checkpoint:reached": lambda d: f"checkpoint {safe(d.get('checkpointName'))} reached: "
                                    f"{safe(d.get('message') or 'waiting for a person')}; {safe(d.get('resume'))}",
    "checkpoint:resumed": lambda d: f"checkpoint {safe(d.get('checkpointName'))} resumed by {safe(d.get('by'))}"
                                    + (f": {safe(d['note'])}" if d.get("note") else ""),
    "delay:started": lambda d: f"delay {safe(d.get('delayName'))} started: blocked tasks wait until "
                               f"{safe(d.get('expiresAt'))}",
    "delay:expired": lambda d: f"delay {safe(d.get('delayName'))} expired",
    "approval:requested": lambda d: (f"{safe(d.get('tool'))}({_args(d.get('arguments'))})" if d.get("tool")
                                     else safe(d.get("title"))) + f" waits for approval: {safe(d.get('approve'))} "
                                    f"or {safe(d.get('reject'))}",
    "approval:resolved": lambda d: (f"{safe(d['tool'])} " if d.get("tool") else "") + f"{safe(d.get('status'))} "
                                   f"by {safe(d.get('by'))}" + (f": {safe(d['reason'])}" if d.get("reason") else ""),
    "question:asked": lambda d: f"asks a person: {safe(d.get('question'))} — {safe(d.get('answer'))}",
    "question:answered": lambda d: f"answered by {safe(d.get('by'))}: {safe(d.get('answer'))}",
    "task:verdict:overridden": lambda d: f"verdict overridden to {'pass' if d.get('passed') else 'fail'} by "
                                         f"{safe(d.get('by'))}: {safe(d.get('reason'))}",
    "quality:gate:failed": _gate,
    "quality:threshold:failed": lambda d: f"average score {d.get('avgScore')} below the mission threshold "
                                          f"{d.get('threshold')}",
    "sla:warning": _sla_warning,
    "budget:warning": lambda d: f"{_budget(d)} at {_spent(d)}",
    "budget:exceeded": lambda d: f"{_budget(d)} exceeded: {_spent(d)}"
                                 + (f", the next call needed {_num(d.get('needed'), 'g')}" if d.get("needed") else ""),
    "sla:violated": lambda d: f"SLA violated: {_entity(d)} is {_dur_ms(d.get('overdueMs'))} past its deadline "
                              f"{safe(d.get('deadline'))}",
    "sla:met": lambda d: f"SLA met: {_entity(d)} finished {_dur_ms(d.get('marginMs'))} before its deadline "
                         f"{safe(d.get('deadline'))}",
    "notification:sent": lambda d: f"{safe(d.get('event'))} sent to {safe(d.get('channel'))}",
    "notification:failed": lambda d: f"{safe(d.get('event'))} to {safe(d.get('channel'))} failed: "
                                     f"{safe(d.get('error'))}",
    "fault:paused": lambda d: f"{safe(d.get('work'))} paused on {safe(d.get('path'))}: {safe(d.get('error'))}; "
                              f"trying again in {_num(d.get('retryIn'), 'g')} s",
    "fault:resumed": lambda d: f"{safe(d.get('work'))} resumed on {safe(d.get('path'))} after "
                               f"{_num(d.get('waited'), 'g')} s ({d.get('tries')} failed tries)",
    "mission:filed": lambda d: f"{safe(d.get('file'))} moved to {safe(d.get('to'))}",
    "retention:pruned": lambda d: f"removed {d.get('missions')} finished mission(s), {d.get('events')} old event(s) "
                                  f"and {d.get('records')} other record(s) in {_num(d.get('seconds'), 'g')} s"
                                  + (f"; exported to {safe(d.get('exported'))}" if d.get("exported") else ""),
    "orchestrator:started": lambda d: f"polpo {safe(d.get('version'))} (pid {d.get('pid')}) watching "
                                      f"{safe(d.get('missionsDir'))}; {d.get('resumedMissions')} mission(s) "
                                      "resumed",
    "orchestrator:shutdown": lambda d: f"stopped (pid {d.get('pid')}); {d.get('unfinishedMissions')} "
                                       "mission(s) resume at the next start",
}


def _index(d: Data) -> str:
    i = d.get("index")
    return f"{i + 1}/{d.get('total')}" if isinstance(i, int) else "?"


def summary(ev: Ev) -> str:
    """What happened, in one line (a rejection lists its problems on indented lines below)."""
    d: Data = ev.get("data") or {}
    fn = _FORMATS.get(str(ev.get("event", "")))
    return fn(d) if fn is not None else _generic(d)


def _who(ev: Ev) -> str:
    return safe(ev.get("taskId") or ev.get("missionId") or "-")


def render(ev: Ev, *, color: bool = False) -> str:
    """A console / ``polpo tail`` line: time, event, task or mission, summary (coloured for a terminal)."""
    ts = str(ev.get("ts", ""))
    short = ts[11:23] if len(ts) >= 23 else ts
    name, who, text = f"{safe(ev.get('event', '?')):<26}", f"{_who(ev):<20}", summary(ev)
    if not color:
        return f"{safe(short)}  {name} {who} {text}"
    t = tone(ev)
    if t == "bad":
        text = paint(text, "bad")
    return f"{paint(safe(short), 'dim')}  {paint(name, t)} {paint(who, 'bold')} {text}"


# ------------------------------------------------------------------------------------------------- colour

_SGR = {"ok": "32", "bad": "31", "warn": "33", "info": "36", "dim": "2", "bold": "1"}
_BAD = frozenset({"mission:rejected", "task:error", "quality:gate:failed", "quality:threshold:failed",
                  "sla:violated", "notification:failed"})
_WARN = frozenset({"task:fix", "task:retry", "task:retry:blocked", "sla:warning", "budget:warning",
                   "budget:exceeded", "escalation:triggered",
                   "mission:cancelled", "task:timeout", "task:recovered", "assessment:corrected", "mission:resumed",
                   "fault:paused", "checkpoint:reached", "approval:requested", "delay:started",
                   "assessment:needs-person", "question:asked"})
_OK = frozenset({"quality:gate:passed", "sla:met", "mission:accepted", "task:approved", "fault:resumed",
                 "question:answered",
                 "checkpoint:resumed", "delay:expired"})
_INFO = frozenset({"agent:spawned", "orchestrator:started", "orchestrator:shutdown", "task:running",
                   "assessment:started", "assessment:check:started", "task:created", "mission:filed",
                   "retention:pruned"})


def tone(ev: Ev) -> str | None:
    """ok | bad | warn | info, or None: how an event reads at a glance."""
    name = str(ev.get("event", ""))
    d: Data = ev.get("data") or {}
    if name in _BAD or (name == "task:maxRetries" and not d.get("escalating")):
        return "bad"
    if name in _WARN or name == "task:maxRetries":
        return "warn"
    if name == "mission:completed":
        return "ok" if d.get("outcome") == "completed" else "bad"
    if name == "task:transition":
        return {"done": "ok", "failed": "bad"}.get(str(d.get("to")))
    if name == "assessment:check:complete" and d.get("undecided"):
        return "warn"
    if name in ("assessment:check:complete", "assessment:complete", "assessment:person-verdict"):
        return "ok" if d.get("passed") else "bad"
    if name == "assessment:check:baseline":
        return "info" if d.get("value") is not None else "bad"
    if name == "agent:finished":
        return "bad" if d.get("timedOut") or d.get("error") or d.get("exitCode") not in (0, None) else None
    if name in _OK:
        return "ok"
    return "info" if name in _INFO else None


def use_color(stream: TextIO | None) -> bool:
    """Colour for a terminal; never when piped, with ``NO_COLOR`` set, or on a dumb terminal."""
    if stream is None or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def paint(text: str, how: str | None) -> str:
    """``text`` in the colour named ``how`` (see :data:`_SGR`); unchanged for None."""
    code = _SGR.get(how or "")
    return f"\x1b[{code}m{text}\x1b[0m" if code else text


def headline(ev: Ev) -> str:
    """A notification's one line: whom it is about (unless the summary says it) and the summary's first line."""
    text = summary(ev).splitlines()[0]
    named = [f"{kind} {safe(ev[key])}" for kind, key in (("task", "taskId"), ("mission", "missionId")) if ev.get(key)]
    if not named or any(n in text for n in named):
        return text
    return f"{named[0]}: {text}"
