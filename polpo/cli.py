"""The ``polpo`` command line.

Quick commands (validate, status, show, tail, schema) import neither anyio nor litellm, so they answer fast.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from polpo.cli_metrics import metrics as metrics_command

CONFIG_HELP = "Config file (default: $POLPO_CONFIG or config/polpo.toml)."


def _config_option(f: Any) -> Any:
    return click.option("--config", "config_path", metavar="PATH", default=None, help=CONFIG_HELP)(f)


def _load(config_path: str | None) -> Any:
    from polpo.config import ConfigError, load_config

    try:
        return load_config(config_path)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None


def _show_task(t: dict[str, Any]) -> None:
    click.echo(f"task {t['id']}: {t['title']}")
    click.echo(f"  status {t['status']}" + (f" — {t['reason']}" if t["reason"] else ""))
    score = f"; score {t['score']:.2f}" if t.get("score") is not None else ""
    click.echo(f"  agent {t['agent']}" + (f" (model {t['model']})" if t.get("model") else "")
               + f"; attempts {t['attemptCount']}, retries {t['retries']}, fixes {t['total_fixes']}{score}")
    if t.get("escalation_level"):
        click.echo(f"  escalated to level {t['escalation_level']}")
    if t.get("expectations"):
        click.echo("  expectations corrected by the judge (the mission file's are kept; see --json)")
    for d in t.get("dimensions") or []:
        names = ", ".join(f"{x['name']} {x['weight']:g}" for x in d["dimensions"])
        click.echo(f"  review #{d['check'] + 1} dimensions ({d['source']}): {names}")
    for a in t["attempts"]:
        who = a["agent"] + (f"/{a['model']}" if a.get("model") else "")
        click.echo(f"  attempt {a['number']} ({a['kind']}, {who}): {a['status']}, exit {a['exit_code']}"
                   + (", timed out" if a["timed_out"] else "") + (f", {a['error']}" if a["error"] else "")
                   + (f", {a['duration']} s" if a["duration"] is not None else "")
                   + (f", {a['tokens']} tokens" if a.get("tokens") else ""))
        files = a.get("files") or {}
        changed = [f"+{p}" for p in files.get("created", [])] + [f"~{p}" for p in files.get("modified", [])]
        if changed:
            click.echo(f"    files: {' '.join(changed[:12])}" + (" …" if len(changed) > 12 else ""))
        for asm in a["assessments"]:
            if asm["trigger"] == "judge":
                click.echo("    re-assessed after the expectation judge's correction:")
            for c in asm["checks"]:
                mark = "pass" if c["passed"] else "FAIL"
                click.echo(f"    [{mark}] {c['type']} {c['label']}: {c['message']}")
            for r in asm.get("reviews") or []:
                score_txt = f"{r['globalScore']:.2f}" if r.get("globalScore") is not None else "-"
                status = f"score {score_txt} via {r['strategy']}" if r["ok"] else f"failed: {r['error']}"
                click.echo(f"      reviewer {r['reviewer']} ({r['model']}): {status}; "
                           f"read {len(r.get('filesRead') or [])} file(s)")
        if a.get("timeline"):
            click.echo("    what the agent did:")
            for line in a["timeline"].splitlines()[:15]:
                click.echo(f"      {line}")
        if a["stderr_tail"] and a["verdict"] != "passed":
            click.echo("    stderr: " + a["stderr_tail"].strip()[-300:].replace("\n", "\n            "))


def _json(obj: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode() + "\n")


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="polpo")
def main() -> None:
    """polpo — a daemon that turns mission files into assessed work.

    Drop a mission JSON into the missions folder (or use `polpo submit`); the daemon validates it, runs its
    tasks with the configured agents, checks every result and logs every step to <state_dir>/events.jsonl.

    \b
    Start:      polpo daemon --config config/polpo.toml
    Watch:      polpo tail -f            polpo status
    Inspect:    polpo show MISSION|TASK  (add --json for everything)
  Quality:    polpo metrics [--mission ID] [--agent NAME] [--json]
    Act:        polpo retry TASK | cancel MISSION | approve TASK
    """


@main.command()
@_config_option
def daemon(config_path: str | None) -> None:
    """Run the daemon in the foreground until SIGTERM/SIGINT.

    It watches [daemon] missions_dir, keeps its state in [daemon] state_dir (SQLite + events.jsonl) and
    resumes unfinished missions after a restart or a crash.
    """
    from polpo.daemon import run_daemon

    cfg = _load(config_path)
    click.echo(f"polpo: watching {cfg.missions_dir}; state in {cfg.state_dir}; log {cfg.events_path}",
               err=True)
    click.echo(f"polpo: follow it with `polpo tail -f --config {cfg.source}`", err=True)
    sys.exit(run_daemon(cfg))


@main.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_config_option
def validate(files: tuple[str, ...], config_path: str | None) -> None:
    """Check mission files without running them. Exit 1 if any is invalid.

    Each problem is printed as `FILE: $.json.path: reason`. Agent names are checked against the config's
    agents when a config is found.
    """
    from polpo.config import config_path as resolve_config
    from polpo.mission.loader import format_problems, load_mission

    known: list[str] | None = None
    if config_path or resolve_config(None).exists():
        known = sorted(_load(config_path).agents)
    else:
        click.echo(f"polpo: no config at {resolve_config(None)}; agent names are not checked", err=True)
    bad = 0
    for name in files:
        try:
            raw = Path(name).read_bytes()
        except OSError as e:
            click.echo(f"{name}: $: cannot read the file: {e.strerror}")
            bad += 1
            continue
        result = load_mission(raw, known_agents=known)
        for w in result.warnings:
            click.echo(f"{name}: warning: {w}", err=True)
        if result.spec is None:
            bad += 1
            for line in format_problems(name, result.problems):
                click.echo(line)
        else:
            click.echo(f"{name}: ok ({len(result.spec.tasks)} task(s))")
    sys.exit(1 if bad else 0)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", help="File name in the missions folder (default: the file's own name).")
@click.option("--no-validate", is_flag=True, help="Write the file even if it does not validate.")
@_config_option
def submit(file: str, name: str | None, no_validate: bool, config_path: str | None) -> None:
    """Put a mission file into the watched folder atomically (temp file + rename).

    The file is validated first, so mistakes show here rather than only in the log.
    """
    from polpo.mission.loader import format_problems, load_mission

    cfg = _load(config_path)
    raw = Path(file).read_bytes()
    if not no_validate:
        result = load_mission(raw, known_agents=sorted(cfg.agents))
        if result.spec is None:
            for line in format_problems(file, result.problems):
                click.echo(line)
            raise click.ClickException("not submitted: fix the problems above (or pass --no-validate)")
    target_name = name or Path(file).name
    if not target_name.endswith(".json") or target_name.startswith("."):
        raise click.ClickException("the name must end in .json and not start with a dot")
    folder = cfg.missions_dir
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / target_name
    tmp = folder / f".{target_name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(raw)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    click.echo(f"submitted {target}")
    click.echo(f"follow it: polpo tail -f --mission {Path(target_name).stem}"
               + (f" --config {config_path}" if config_path else ""))


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--all", "show_all", is_flag=True, help="List the tasks of finished missions too.")
@_config_option
def status(as_json: bool, show_all: bool, config_path: str | None) -> None:
    """Missions and their tasks, with their state."""
    from polpo.daemon_probe import daemon_pid
    from polpo.store import read

    cfg = _load(config_path)
    pid = daemon_pid(cfg.state_dir)
    try:
        con = read.connect(cfg.db_path)
    except read.NoState as e:
        if as_json:
            _json({"daemon": {"running": pid is not None, "pid": pid}, "missions": []})
            return
        raise click.ClickException(str(e)) from None
    ms = read.missions(con)
    for m in ms:
        m["tasks"] = read.tasks(con, m["id"])
    if as_json:
        _json({"daemon": {"running": pid is not None, "pid": pid, "stateDir": str(cfg.state_dir)},
               "missions": ms})
        return
    click.echo(f"daemon: {'running (pid ' + str(pid) + ')' if pid else 'not running'}; state {cfg.state_dir}")
    if not ms:
        click.echo("no missions yet: drop a mission file into " + str(cfg.missions_dir))
        return
    for m in ms:
        progress = f"{m['done']}/{m['total']} done" + (f", {m['failed']} failed" if m["failed"] else "")
        click.echo(f"{m['id']:<24} {m['status']:<10} {progress:<22} {m['created_at']}")
        if show_all or m["status"] in ("running", "cancelling"):
            for t in m["tasks"]:
                reason = f"  ({t['reason']})" if t["reason"] and t["status"] != "done" else ""
                click.echo(f"  {t['id']:<22} {t['status']:<12} {t['title'][:40]:<40} "
                           f"attempts {t['attempts']}{reason}")


@main.command()
@click.argument("ident")
@click.option("--json", "as_json", is_flag=True, help="Everything stored, as JSON.")
@_config_option
def show(ident: str, as_json: bool, config_path: str | None) -> None:
    """One mission (ID or name) or task (MISSION:N) with its attempts and check results."""
    from polpo.store import read

    cfg = _load(config_path)
    try:
        con = read.connect(cfg.db_path)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    t = read.task(con, ident)
    if t is not None:
        t["attemptCount"] = t["attempts"]
        t["attempts"] = read.attempts(con, ident, full=as_json)
        t["dimensions"] = read.dimensions(con, ident)
        if not as_json:
            from polpo.agents.transcript import timeline_text

            for a in t["attempts"]:
                turns = read.transcript(con, a["id"])
                a["timeline"] = timeline_text(turns, 1500) if turns else None
        if as_json:
            _json(t)
            return
        _show_task(t)
        return
    m = read.mission(con, ident)
    if m is None:
        raise click.ClickException(f"no mission or task {ident!r}; see `polpo status`")
    m["tasks"] = read.tasks(con, m["id"])
    m["gates"] = read.gates(con, m["id"])
    if as_json:
        import orjson

        m["spec"] = orjson.loads(m["spec"])
        _json(m)
        return
    click.echo(f"mission {m['id']} ({m['name']}): {m['status']}")
    click.echo(f"  file {m['source']}\n  workspace {m['workspace']}\n  started {m['created_at']}"
               + (f", finished {m['finished_at']}" if m["finished_at"] else ""))
    for w in m.get("warnings") or []:
        click.echo(f"  warning: {w}")
    if m.get("report"):
        click.echo(f"  report: {m['report'].get('summary')}, {m['report'].get('attempts')} attempt(s), "
                   f"{m['report'].get('durationSeconds')} s")
    for t in m["tasks"]:
        click.echo(f"  {t['id']:<22} {t['status']:<12} {t['title']}"
                   + (f"  ({t['reason']})" if t["reason"] and t["status"] != "done" else ""))
    for g in m["gates"]:
        click.echo(f"  gate {g['name']}: {g['status']} — {g['reason']}")


@main.command()
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events as they arrive.")
@click.option("--mission", "mission_id", metavar="ID", help="Only this mission's events.")
@click.option("--event", "pattern", metavar="GLOB", help="Only events matching, e.g. 'task:*' or 'sla:*'.")
@click.option("--json", "as_json", is_flag=True, help="Print the raw JSON lines.")
@click.option("-n", "--lines", default=20, show_default=True, help="How many past events to show first.")
@_config_option
def tail(follow: bool, mission_id: str | None, pattern: str | None, as_json: bool, lines: int,
         config_path: str | None) -> None:
    """Show the event log (<state_dir>/events.jsonl) readably."""
    import orjson

    from polpo.events.catalog import matches
    from polpo.events.render import render

    cfg = _load(config_path)
    path = cfg.events_path

    def keep(ev: dict[str, Any]) -> bool:
        if mission_id and ev.get("missionId") != mission_id and not str(ev.get("missionId", "")).startswith(
                mission_id + "#"):
            return False
        return not (pattern and not matches(str(ev.get("event", "")), pattern))

    def emit(raw: bytes) -> None:
        try:
            ev = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return
        if keep(ev):
            click.echo(raw.decode().rstrip("\n") if as_json else render(ev))

    while not path.exists():
        if not follow:
            raise click.ClickException(f"no event log at {path} yet: start the daemon first")
        time.sleep(0.2)
    from collections import deque

    with open(path, "rb") as f:
        recent: deque[bytes] = deque(maxlen=max(lines, 0) or None)
        for raw in f:
            if not raw.endswith(b"\n"):
                f.seek(-len(raw), os.SEEK_CUR)
                break
            try:
                if keep(orjson.loads(raw)):
                    recent.append(raw)
            except orjson.JSONDecodeError:
                continue
        if lines == 0:
            recent.clear()
        for raw in recent:
            emit(raw)
        if not follow:
            return
        buf = b""
        try:
            while True:
                chunk = f.readline()
                if not chunk:
                    time.sleep(0.1)
                    continue
                buf += chunk
                if buf.endswith(b"\n"):
                    emit(buf)
                    buf = b""
        except KeyboardInterrupt:
            return


def _queue(kind: str, target: str, config_path: str | None) -> None:
    from polpo.daemon_probe import daemon_pid
    from polpo.store import read

    cfg = _load(config_path)
    try:
        con = read.connect(cfg.db_path)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    exists = read.task(con, target) if kind in ("retry", "approve") else read.mission(con, target)
    if exists is None:
        raise click.ClickException(f"no {'task' if kind != 'cancel' else 'mission'} {target!r}; "
                                   "see `polpo status --all`")
    target = exists["id"]
    cid = read.queue_command(con, kind, target, datetime.now(UTC).isoformat())
    if daemon_pid(cfg.state_dir) is None:
        click.echo(f"queued {kind} {target}: no daemon is running; it applies when the daemon starts")
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        row = read.command(con, cid)
        if row and row["status"] != "queued":
            if row["status"] == "refused":
                raise click.ClickException(row["result"])
            click.echo(row["result"])
            return
        time.sleep(0.1)
    click.echo(f"queued {kind} {target}; the daemon has not picked it up yet")


@main.command()
@click.argument("task_id", metavar="TASK")
@_config_option
def retry(task_id: str, config_path: str | None) -> None:
    """Run a failed task again with a fresh retry budget (tasks that failed because of it re-open too)."""
    _queue("retry", task_id, config_path)


@main.command()
@click.argument("mission_id", metavar="MISSION")
@_config_option
def cancel(mission_id: str, config_path: str | None) -> None:
    """Cancel a running mission: its agents' process groups are killed, open tasks fail."""
    _queue("cancel", mission_id, config_path)


@main.command()
@click.argument("task_id", metavar="TASK")
@_config_option
def approve(task_id: str, config_path: str | None) -> None:
    """Let a task with sideEffects run its fix or retry (it waits in awaiting_approval until then)."""
    _queue("approve", task_id, config_path)


@main.command()
def schema() -> None:
    """Print the mission file's JSON Schema (for editors)."""
    from polpo.mission.schema import mission_json_schema

    _json(mission_json_schema())


main.add_command(metrics_command)

if __name__ == "__main__":
    main()
