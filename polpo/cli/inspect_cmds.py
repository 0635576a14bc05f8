"""Looking at state: ``polpo status`` and ``polpo show``.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast. Every text that comes from a file, an agent or a model goes through :func:`term`, so it
cannot move the cursor or forge a line.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from polpo.cli.common import config_option, locate_or_exit, print_json, term
from polpo.cli.people_view import (
    awaiting_review,
    hold_lines,
    override_line,
    paused_at,
    paused_note,
    review_note,
)
from polpo.cli.questions_view import question_lines, waiting_lines
from polpo.cli.review_view import assessment_lines
from polpo.model.spend import usd_text


def _elapsed(start: str | None, end: str | None, now: datetime) -> str:
    """From ``start`` to ``end`` (or now, while it runs), as a person reads it: 45s, 3m 5s, 2h 10m."""
    if not start:
        return "-"
    try:
        a = datetime.fromisoformat(start)
        b = datetime.fromisoformat(end) if end else now
    except ValueError:
        return "?"
    s = max(0, int((b - a).total_seconds()))
    if s < 60:
        return f"{s}s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m}m {s}s"
    h, m = divmod(m, 60)
    return f"{h}h {m}m"


def _task_line(t: dict[str, Any], now: datetime, width: int = 40) -> str:
    """id, state, title, attempt N (kind), elapsed, score."""
    from polpo.attention.items import task_state

    attempt = f"attempt {t['attempts']}" + (f" ({term(t['attempt_kind'])})" if t.get("attempt_kind") else "") \
        if t["attempts"] else "not started"
    score = f"  score {t['score']:.2f}" if t.get("score") is not None else ""
    reason = f"  ({term(t['reason'])})" if t["reason"] and t["status"] != "done" else ""
    state = task_state(t["status"], t.get("waiting_for"))
    return (f"  {term(t['id']):<22} {term(state):<{STATE_WIDTH}} {term(t['title'][:width]):<{width}} {attempt:<20} "
            f"{_elapsed(t.get('started_at'), t.get('finished_at'), now):>8}{score}{reason}")


def _attempt_spend(a: dict[str, Any]) -> str:
    """The agent's own calls in an attempt: ``$0.0123, 1200 in / 300 out tokens`` (or ``cost unknown``)."""
    tally = {"tokensIn": a.get("tokens_in") or a["tokens"], "tokensOut": a.get("tokens_out") or 0,
             "usd": a.get("cost") or 0.0}
    return usd_text(tally if a.get("cost") is not None else {**tally, "costUnknown": [a.get("model") or "?"]})


def _show_task(t: dict[str, Any]) -> None:
    click.echo(f"task {term(t['id'])}: {term(t['title'])}")
    from polpo.attention.items import task_state

    state = task_state(t["status"], t.get("waiting_for"))
    click.echo(f"  status {term(state)}" + (f" — {term(t['reason'])}" if t["reason"] else ""))
    score = f"; score {t['score']:.2f}" if t.get("score") is not None else ""
    click.echo(f"  agent {term(t['agent'])}" + (f" (model {term(t['model'])})" if t.get("model") else "")
               + f"; attempts {t['attemptCount']}, retries {t['retries']}, fixes {t['total_fixes']}{score}")
    if (line := override_line(t.get("override"))) is not None:
        click.echo(line)
    for r in t.get("rejudgements") or []:  # `polpo rejudge`: the same work under another judge
        score = "no score" if r["global_score"] is None else f"score {r['global_score']:.2f}"
        click.echo(f"  rejudged {term(r['created_at'][:19])} by {term(r['setup'].split('#')[0])}: attempt "
                   f"{term(r['attempt_id'].rsplit('/', 1)[-1])} {term(r['decision'])} ({score}; was "
                   f"{'pass' if r['was_passed'] else 'fail'})" + (" — from the stored copy" if r["source"] == "digest"
                                                                  else ""))
    if t.get("escalation_level"):
        click.echo(f"  escalated to level {t['escalation_level']}")
    if t.get("expectations"):
        click.echo("  expectations corrected by the judge (the mission file's are kept; see --json)")
    for line in question_lines(t.get("questions") or [], t["status"]):
        click.echo(line)
    for d in t.get("dimensions") or []:
        names = ", ".join(f"{term(x['name'])} {x['weight']:g}" for x in d["dimensions"])
        click.echo(f"  review #{d['check'] + 1} dimensions ({term(d['source'])}): {names}")
    for b in t.get("baselines") or []:  # a metric's value before the task (polpo.engine.baselines)
        click.echo(f"  metric #{b['check'] + 1} {term(str(b.get('label')))}: {b['value']:.10g} before the task "
                   f"(its baseline, measured before attempt {b.get('attempt')})")
    for a in t["attempts"]:
        who = term(a["agent"] + (f"/{a['model']}" if a.get("model") else ""))
        click.echo(f"  attempt {a['number']} ({term(a['kind'])}, {who}): {term(a['status'])}, exit {a['exit_code']}"
                   + (", timed out" if a["timed_out"] else "") + (f", {term(a['error'])}" if a["error"] else "")
                   + (f", {a['duration']} s" if a["duration"] is not None else "")
                   + (f", {_attempt_spend(a)}" if a.get("tokens") else ""))
        files = a.get("files") or {}
        changed = [f"+{term(p)}" for p in files.get("created", [])] + [f"~{term(p)}" for p in files.get("modified", [])]
        if changed:
            click.echo(f"    files: {' '.join(changed[:12])}" + (" …" if len(changed) > 12 else ""))
        if files.get("note"):
            click.echo(f"    files: {term(files['note'])}")
        for asm in a["assessments"]:  # checks, review panels and verdicts: polpo/cli/review_view.py
            for line in assessment_lines(asm, tiers=t.get("hasTiers", False)):
                click.echo(term(line))  # reviewers' reasoning is model output: no terminal control codes
        if a.get("timeline"):
            click.echo("    what the agent did:")
            for line in a["timeline"].splitlines()[:15]:
                click.echo(f"      {term(line)}")
        if a["stderr_tail"] and a["verdict"] != "passed":
            lines = a["stderr_tail"].strip()[-300:].split("\n")
            click.echo("    stderr: " + "\n            ".join(term(line) for line in lines))
        # a command agent's output: some CLIs (aider) exit 0 and say only there why nothing happened
        if a["stdout_tail"].strip() and not a.get("model") and (a["verdict"] != "passed" or not changed):
            lines = a["stdout_tail"].strip()[-300:].split("\n")
            click.echo("    stdout: " + "\n            ".join(term(line) for line in lines))


_LIVE = ("running", "cancelling")  # missions whose tasks `polpo status` lists without --all
STATE_WIDTH = 20  # "waiting for approval"; a longer state pushes its line on rather than being cut


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--all", "show_all", is_flag=True, help="List the tasks of finished missions too.")
@click.option("--limit", type=click.IntRange(min=0), default=200, show_default=True,
              help="Show the newest N missions (0: all of them).")
@config_option
def status(as_json: bool, show_all: bool, limit: int, config_path: str | None) -> None:
    """What waits for you first, then the missions and the tasks of running ones (--all: of every one), with
    their state (the newest --limit missions; it says when it leaves some out)."""
    from polpo.attention.items import mission_state
    from polpo.attention.read import waiting
    from polpo.daemon_probe import daemon_pid
    from polpo.store import mission_list, questions_read, read, spend_read

    cfg = locate_or_exit(config_path)
    pid = daemon_pid(cfg.state_dir)
    try:
        con = read.open_reader(cfg)
    except read.Unreachable as e:
        raise click.ClickException(str(e)) from None
    except read.NoState as e:
        if as_json:
            print_json({"daemon": {"running": pid is not None, "pid": pid}, "attention": [], "missions": []})
            return
        raise click.ClickException(str(e)) from None
    items = waiting(con)
    ms = mission_list.missions(con, limit=limit or None)
    spent = spend_read.spend(con, [m["id"] for m in ms])
    for m in ms:
        m["spend"] = spent[m["id"]]
    total = mission_list.count(con)
    for m in ms:  # the text lists the tasks of running missions only (all with --all): read no others
        listed = as_json or show_all or m["status"] in _LIVE
        m["tasks"] = read.tasks(con, m["id"]) if listed else []
    lease = cfg.store.lease
    nodes = [{**n, "alive": n["age"] <= lease} for n in read.nodes(con)] if cfg.store.url else []
    down = {n["name"] for n in nodes if not n["alive"]} | (
        {m["home"] for m in ms if m["home"]} - {n["name"] for n in nodes} if cfg.store.url else set())
    for m in ms:
        m["waitingForNode"] = m["home"] if m["home"] in down and m["status"] in _LIVE else None
        m["pausedAt"] = paused_at(read.holds(con, m["id"])) if m["status"] == "running" else []
        m["awaitingReview"] = awaiting_review(m["tasks"])
        m["state"] = mission_state(m["status"], (i for i in items if i.mission_id == m["id"]))
        m["waiting"] = questions_read.waiting(con, m["id"]) if m["status"] in _LIVE else []  # for a person
    if as_json:
        print_json({"daemon": {"running": pid is not None, "pid": pid, "stateDir": str(cfg.state_dir)},
                    "attention": [i.to_json() for i in items], "missions": ms, "total": total, "truncated": len(ms) < total,
                    **({"nodes": nodes} if cfg.store.url else {})})
        return
    click.echo(f"daemon: {'running (pid ' + str(pid) + ')' if pid else 'not running'}; "
               f"state {term(cfg.state_dir)}")
    if nodes:
        click.echo("nodes: " + ", ".join(
            f"{term(n['name'])} ({'up' if n['alive'] else 'DOWN'}, heartbeat {n['age']:.0f} s ago)" for n in nodes))
    for line in attention_lines(items):
        click.echo(line)
    if not ms:
        click.echo("no missions yet: drop a mission file into " + term(cfg.missions_dir))
        return
    if len(ms) < total:
        click.echo(f"(the newest {len(ms)} of {total} missions; --limit N or --limit 0 shows more)")
    now = datetime.now(UTC)
    for m in ms:
        progress = f"{m['done']}/{m['total']} done" + (f", {m['failed']} failed" if m["failed"] else "")
        paused = paused_note(m["id"], m["pausedAt"]) + review_note(m["awaitingReview"])
        click.echo(f"{term(m['id']):<24} {term(m['state']):<{STATE_WIDTH}} {progress:<22} {term(m['created_at'])}  "
                   f"{_elapsed(m['created_at'], m['finished_at'], now)}{paused}")
        if m["spend"]["total"]["tokensIn"] or m["spend"]["total"]["tokensOut"]:
            click.echo(f"  spend {term(usd_text(m['spend']['total']))}" + "".join(
                f"; {term(a)} {term(usd_text(s))}" for a, s in m["spend"]["byAgent"].items()))
        if m["waitingForNode"]:
            click.echo(f"  waiting for node {term(m['waitingForNode'])}: it is down and this mission's tasks run "
                       'only there ("affinity": "node"); start it again (or use "affinity": "any")')
        if show_all or m["status"] in _LIVE:
            for t in m["tasks"]:
                click.echo(_task_line(t, now))
        for line in waiting_lines(m["waiting"]):
            click.echo(line)


@click.command()
@click.argument("ident")
@click.option("--json", "as_json", is_flag=True, help="Everything stored, as JSON.")
@config_option
def show(ident: str, as_json: bool, config_path: str | None) -> None:
    """One mission (ID or name) or task (MISSION:N) with its attempts and check results."""
    from polpo.store import read, views

    cfg = locate_or_exit(config_path)
    try:
        con = read.open_reader(cfg)
    except read.Unreachable as e:
        raise click.ClickException(str(e)) from None
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    t = views.task_view(con, ident, full=as_json)
    if t is not None:
        if as_json:
            print_json(t)
            return
        for a in t["attempts"]:
            turns = read.transcript(con, a["id"])
            a["timeline"] = _timeline(turns) if turns else None
        _show_task(t)
        return
    m = views.mission_view(con, ident)
    if m is None:
        raise click.ClickException(_not_found(con, ident))
    if as_json:
        print_json(m)
        return
    from polpo.attention.items import mission_state
    from polpo.attention.read import waiting

    items = [i for i in waiting(con) if i.mission_id == m["id"]] if m["status"] == "running" else []
    m["state"] = mission_state(m["status"], items)
    _show_mission(m)
    for line in attention_lines(items):
        click.echo(line)


def attention_lines(items: list[Any]) -> list[str]:
    """``polpo status``'s first lines: what waits for a person, each with what to do and the command that does it."""
    if not items:
        return []
    out = [f"waiting for you ({len(items)}):"]
    for i in items:
        what = f"{i.task_id} {i.title!r}" if i.task_id else f"{i.mission_id} {i.title}" if i.mission_id else i.title
        out.append(f"  {term(i.state):<{STATE_WIDTH}} {term(what)}" + (f" — {term(i.detail)}" if i.detail else ""))
        out.append(f"    {term(i.todo)}: {term(' | '.join(i.commands))}")
    return out


def _not_found(con: Any, ident: str) -> str:
    """No mission or task ``ident``: and if a file of that name was rejected, why and what to do."""
    from polpo.store.attention_read import rejected_file_named

    f = rejected_file_named(con, ident)
    if f is None:
        return f"no mission or task {term(repr(ident))}; see `polpo status`"
    return (f"no mission or task {term(repr(ident))}: the file {term(f['path'])} was rejected at {term(f['seen_at'])}"
            f" ({term(f['reason'] or 'see `polpo tail`')}); fix it and save it again (`polpo validate "
            f"{term(f['path'])}` says what is wrong)")


def _timeline(turns: list[dict[str, Any]]) -> str:
    """An LLM attempt's timeline (imported only when there is one: the module brings asyncio and git)."""
    from polpo.agents.transcript import timeline_text

    return timeline_text(turns, 1500)


def _show_mission(m: dict[str, Any]) -> None:
    now = datetime.now(UTC)
    click.echo(f"mission {term(m['id'])} ({term(m['name'])}): {term(m.get('state') or m['status'])}"
               + review_note(awaiting_review(m["tasks"])))
    click.echo(f"  file {term(m['source'])}\n  workspace {term(m['workspace'])}\n  started {term(m['created_at'])}"
               + (f", finished {term(m['finished_at'])}" if m["finished_at"] else "")
               + f" ({_elapsed(m['created_at'], m['finished_at'], now)})")
    for w in m.get("warnings") or []:
        click.echo(f"  warning: {term(w)}")
    if m.get("report"):
        rep = m["report"]
        click.echo(f"  report: {term(rep.get('summary'))}, {term(rep.get('attempts'))} attempt(s), "
                   f"{term(rep.get('durationSeconds'))} s")
        branch = rep.get("branch")
        if branch:
            click.echo(f"  result on branch {term(branch['name'])} in {term(branch['repository'])} "
                       f"({len(branch['tasks'])} task(s) merged): review with "
                       f"`git log -p {term(branch['base'][:12])}..{term(branch['name'])}`, "
                       f"then `git merge {term(branch['name'])}`")
    q = m["quality"]
    if q.get("average") is not None:
        verdict = "" if q.get("passed") is None else (" — passes" if q["passed"] else " — BELOW")
        limit = f" (threshold {q['threshold']:g}{verdict})" if q.get("threshold") is not None else ""
        click.echo(f"  quality average {q['average']:.2f} over {q['scored']} scored task(s){limit}")
    else:
        click.echo("  quality average: n/a (no done task has a score; scores come from llm_review checks)")
    spend = m.get("spend") or {}
    if spend.get("total", {}).get("tokensIn") or spend.get("total", {}).get("tokensOut"):
        click.echo(f"  spend {term(usd_text(spend['total']))}")
        for group in ("byPhase", "byAgent", "byTask"):
            spent = [f"{term(k)} {term(usd_text(v))}" for k, v in spend[group].items() if v["tokensIn"] or v["tokensOut"]]
            if spent:  # a command agent spends nothing: no empty "agent:" line
                click.echo(f"    {group[2:].lower()}: " + "; ".join(spent))
    if m["tasks"]:  # one write: a mission may have thousands of tasks
        click.echo("\n".join(_task_line(t, now, width=32) for t in m["tasks"]))
    stored = {g["name"]: g for g in m["gates"]}
    for g in m["spec"].get("qualityGates") or []:
        row = stored.get(g["name"]) or {"status": "waiting", "reason": None, "avg_score": None}
        rule = ", ".join(x for x in (f"minScore {g['minScore']:g}" if g.get("minScore") is not None else "",
                                     "requireAllPassed" if g.get("requireAllPassed") else "") if x)
        avg = f", average {row['avg_score']:.2f}" if row.get("avg_score") is not None else ""
        click.echo(f"  gate {term(g['name'])}: {term(row['status'])}{avg}"
                   + (f" — {term(row['reason'])}" if row.get("reason") else "")
                   + f"\n    after {term(', '.join(g['afterTasks']))}; blocks {term(', '.join(g['blocksTasks']))}"
                   + (f"; {rule}" if rule else ""))
    for line in hold_lines(m):
        click.echo(line)
