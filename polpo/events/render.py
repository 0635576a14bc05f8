"""One readable line per event, for ``polpo tail`` and the daemon's console."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _short_ts(ts: str) -> str:
    return ts[11:23] if len(ts) >= 23 else ts


def summary(ev: Mapping[str, Any]) -> str:
    name = ev.get("event", "?")
    d: Mapping[str, Any] = ev.get("data") or {}
    match name:
        case "mission:accepted":
            s = f"{d.get('taskCount')} task(s) from {d.get('file')}"
            if d.get("warnings"):
                s += f" ({len(d['warnings'])} warning(s): {'; '.join(d['warnings'][:3])})"
            return s
        case "mission:rejected":
            lines = d.get("lines") or []
            return f"{d.get('file')}: {len(lines)} problem(s)\n" + "\n".join(f"    {ln}" for ln in lines)
        case "mission:completed":
            rep = d.get("report") or {}
            return f"{d.get('outcome')}: {rep.get('summary', '')} in {rep.get('durationSeconds', '?')} s"
        case "task:transition":
            s = f"{d.get('from')} → {d.get('to')}"
            return s + (f" ({d['reason']})" if d.get("reason") else "")
        case "agent:spawned":
            how = f"pid {d.get('pid')}" if d.get("pid") is not None else f"model {d.get('model')}"
            return f"agent {d.get('agentName')} started (attempt {d.get('attempt')}, {d.get('kind')}, {how})"
        case "agent:finished":
            extra = " timed out" if d.get("timedOut") else ""
            extra += f" error: {d['error']}" if d.get("error") else ""
            return f"agent {d.get('agentName')} exited {d.get('exitCode')} after {d.get('duration')} s{extra}"
        case "assessment:check:complete":
            mark = "pass" if d.get("passed") else "FAIL"
            return f"[{mark}] {d.get('type')} {d.get('label')}: {d.get('message')}"
        case "assessment:complete":
            score = f" (score {d['globalScore']:.2f})" if isinstance(d.get("globalScore"), int | float) else ""
            trigger = f" [{d['trigger']}]" if d.get("trigger") not in (None, "initial") else ""
            return ("passed" if d.get("passed") else "failed") + f"{score}{trigger}: {d.get('message')}"
        case "assessment:corrected":
            fixes = "; ".join(f"#{c.get('index')} {c.get('field')}: {c.get('old')!r} → {c.get('new')!r}"
                              for c in d.get("corrections") or [])
            return f"expectation judge corrected {fixes}"
        case "escalation:triggered":
            return f"escalated (level {d.get('level')}) to {d.get('handler')} {d.get('target')}"
        case "sla:warning":
            return f"{d.get('entityType')} at {d.get('percentUsed')}% of its deadline {d.get('deadline')}"
        case "sla:violated":
            return f"{d.get('entityType')} missed its deadline {d.get('deadline')} by {d.get('overdueMs')} ms"
        case "sla:met":
            return f"{d.get('entityType')} met its deadline {d.get('deadline')} ({d.get('marginMs')} ms to spare)"
        case "quality:threshold:failed":
            return f"average score {d.get('avgScore')} below the mission threshold {d.get('threshold')}"
        case "task:fix":
            return f"fix attempt {d.get('attempt')}/{d.get('maxFix')}"
        case "task:retry":
            return f"retry {d.get('attempt')}/{d.get('maxRetries')}" + (" (manual)" if d.get("manual") else "")
        case "task:maxRetries":
            return f"retries exhausted ({d.get('retries')}/{d.get('maxRetries')})"
        case "quality:gate:passed" | "quality:gate:failed":
            return f"gate {d.get('gateName')}" + (f": {d['reason']}" if d.get("reason") else "")
        case _:
            keep = {k: v for k, v in d.items() if not isinstance(v, dict | list) or len(str(v)) < 80}
            return " ".join(f"{k}={v}" for k, v in keep.items())


def render(ev: Mapping[str, Any]) -> str:
    who = ev.get("taskId") or ev.get("missionId") or "-"
    return f"{_short_ts(str(ev.get('ts', '')))}  {ev.get('event', '?'):<26} {who:<20} {summary(ev)}"
