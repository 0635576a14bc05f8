"""Looking at state: ``polpo status`` and ``polpo show``.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

from typing import Any

import click

from polpo.cli.common import config_option, locate_or_exit, print_json, term
from polpo.cli.review_view import assessment_lines


def _show_task(t: dict[str, Any]) -> None:
    click.echo(f"task {term(t['id'])}: {term(t['title'])}")
    click.echo(f"  status {term(t['status'])}" + (f" — {term(t['reason'])}" if t["reason"] else ""))
    score = f"; score {t['score']:.2f}" if t.get("score") is not None else ""
    click.echo(f"  agent {term(t['agent'])}" + (f" (model {term(t['model'])})" if t.get("model") else "")
               + f"; attempts {t['attemptCount']}, retries {t['retries']}, fixes {t['total_fixes']}{score}")
    if t.get("escalation_level"):
        click.echo(f"  escalated to level {t['escalation_level']}")
    if t.get("expectations"):
        click.echo("  expectations corrected by the judge (the mission file's are kept; see --json)")
    for d in t.get("dimensions") or []:
        names = ", ".join(f"{term(x['name'])} {x['weight']:g}" for x in d["dimensions"])
        click.echo(f"  review #{d['check'] + 1} dimensions ({term(d['source'])}): {names}")
    for a in t["attempts"]:
        who = term(a["agent"] + (f"/{a['model']}" if a.get("model") else ""))
        click.echo(f"  attempt {a['number']} ({term(a['kind'])}, {who}): {term(a['status'])}, exit {a['exit_code']}"
                   + (", timed out" if a["timed_out"] else "") + (f", {term(a['error'])}" if a["error"] else "")
                   + (f", {a['duration']} s" if a["duration"] is not None else "")
                   + (f", {a['tokens']} tokens" if a.get("tokens") else ""))
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


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--all", "show_all", is_flag=True, help="List the tasks of finished missions too.")
@click.option("--limit", type=click.IntRange(min=0), default=200, show_default=True,
              help="Show the newest N missions (0: all of them).")
@config_option
def status(as_json: bool, show_all: bool, limit: int, config_path: str | None) -> None:
    """Missions and their tasks, with their state (the newest --limit missions; it says when it leaves some out)."""
    from polpo.daemon_probe import daemon_pid
    from polpo.store import read

    cfg = locate_or_exit(config_path)
    pid = daemon_pid(cfg.state_dir)
    try:
        con = read.open_reader(cfg)
    except read.Unreachable as e:
        raise click.ClickException(str(e)) from None
    except read.NoState as e:
        if as_json:
            print_json({"daemon": {"running": pid is not None, "pid": pid}, "missions": []})
            return
        raise click.ClickException(str(e)) from None
    ms = read.missions(con, limit=limit or None)
    total = read.mission_count(con)
    for m in ms:
        m["tasks"] = read.tasks(con, m["id"])
    if as_json:
        print_json({"daemon": {"running": pid is not None, "pid": pid, "stateDir": str(cfg.state_dir)},
                    "missions": ms, "total": total, "truncated": len(ms) < total})
        return
    click.echo(f"daemon: {'running (pid ' + str(pid) + ')' if pid else 'not running'}; "
               f"state {term(cfg.state_dir)}")
    if not ms:
        click.echo("no missions yet: drop a mission file into " + term(cfg.missions_dir))
        return
    if len(ms) < total:
        click.echo(f"(the newest {len(ms)} of {total} missions; --limit N or --limit 0 shows more)")
    for m in ms:
        progress = f"{m['done']}/{m['total']} done" + (f", {m['failed']} failed" if m["failed"] else "")
        click.echo(f"{term(m['id']):<24} {term(m['status']):<10} {progress:<22} {term(m['created_at'])}")
        if show_all or m["status"] in ("running", "cancelling"):
            for t in m["tasks"]:
                reason = f"  ({term(t['reason'])})" if t["reason"] and t["status"] != "done" else ""
                click.echo(f"  {term(t['id']):<22} {term(t['status']):<12} {term(t['title'][:40]):<40} "
                           f"attempts {t['attempts']}{reason}")


@click.command()
@click.argument("ident")
@click.option("--json", "as_json", is_flag=True, help="Everything stored, as JSON.")
@config_option
def show(ident: str, as_json: bool, config_path: str | None) -> None:
    """One mission (ID or name) or task (MISSION:N) with its attempts and check results."""
    from polpo.store import read

    cfg = locate_or_exit(config_path)
    try:
        con = read.open_reader(cfg)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    t = read.task(con, ident)
    if t is not None:
        t["attemptCount"] = t["attempts"]
        t["hasTiers"] = read.task_has_tiers(con, ident)
        t["attempts"] = read.attempts(con, ident, full=as_json)
        t["dimensions"] = read.dimensions(con, ident)
        if not as_json:
            from polpo.agents.transcript import timeline_text

            for a in t["attempts"]:
                turns = read.transcript(con, a["id"])
                a["timeline"] = timeline_text(turns, 1500) if turns else None
        if as_json:
            print_json(t)
            return
        _show_task(t)
        return
    m = read.mission(con, ident)
    if m is None:
        raise click.ClickException(f"no mission or task {term(repr(ident))}; see `polpo status`")
    m["tasks"] = read.tasks(con, m["id"])
    m["gates"] = read.gates(con, m["id"])
    if as_json:
        import orjson

        m["spec"] = orjson.loads(m["spec"])
        print_json(m)
        return
    click.echo(f"mission {term(m['id'])} ({term(m['name'])}): {term(m['status'])}")
    click.echo(f"  file {term(m['source'])}\n  workspace {term(m['workspace'])}\n  started {term(m['created_at'])}"
               + (f", finished {term(m['finished_at'])}" if m["finished_at"] else ""))
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
    for t in m["tasks"]:
        click.echo(f"  {term(t['id']):<22} {term(t['status']):<12} {term(t['title'])}"
                   + (f"  ({term(t['reason'])})" if t["reason"] and t["status"] != "done" else ""))
    for g in m["gates"]:
        click.echo(f"  gate {term(g['name'])}: {term(g['status'])} — {term(g['reason'])}")
