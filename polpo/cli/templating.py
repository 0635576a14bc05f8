"""What ``polpo validate`` and ``polpo submit`` share for templates and re-submits.

Filling a Polpo template (problems printed as ``FILE: $.path: reason``, paths in the template file), the
file name a filled template gets, and the duplicate check: bytes the daemon has already handled from a
file start nothing, so ``submit`` says which run they match and how to run them again.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from polpo.cli.common import polpo_command

if TYPE_CHECKING:
    from polpo.intake.check import Verdict
    from polpo.mission.templates import Template

__all__ = ["PARAM_HELP", "duplicate_or_none", "fill_or_none", "in_template", "target_name_for"]

PARAM_HELP = "A template parameter (repeat for each); parameters not given take their defaults."
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
ANSWER_WAIT = 10.0  # seconds to wait for the daemon to apply a queued rerun


def fill_or_none(file: str, raw: bytes, params: tuple[str, ...]) -> tuple[bytes | None, Template | None]:
    """(the mission's bytes, the template they were filled from). A mission file comes back as it is; for a
    template, every problem is printed and the bytes are None."""
    from polpo.mission import templates as tpl
    from polpo.mission.loader import json_path

    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        data = None  # the loader reports it, with line and column
    if not tpl.is_template(data):
        if params:
            click.echo(f"{file}: $: --param is for templates (parameters + plan or mission); this is a mission")
            return None, None
        return raw, None
    assert isinstance(data, dict)
    given, issues = tpl.parse_params(params)
    template, problems, warnings = tpl.parse_template(data)
    for loc, msg in warnings:
        click.echo(f"{file}: warning: {json_path(loc)}: {msg}", err=True)
    filled = tpl.fill(template, given) if template is not None else None
    issues += problems + (filled.issues if filled is not None else [])
    for loc, msg in issues:
        click.echo(f"{file}: {json_path(loc)}: {msg}")
    if issues or filled is None or filled.mission is None:
        return None, template
    return tpl.filled_bytes(filled.mission), template


def in_template(verdict: Verdict, template: Template | None) -> Verdict:
    """For a filled template, the verdict's paths in the template file (``$.tasks`` → ``$.plan.tasks``)."""
    from polpo.mission.loader import Problem

    result = verdict
    if template is None:
        return result

    def path(p: str) -> str:
        rest = p[1:]
        top = re.match(r"\.(\w+)", rest)
        if top and top.group(1) in ("name", "description") and top.group(1) not in template.body:
            return p  # the template's own name/description
        return f"$.{template.key}{rest}"

    def warning(w: str) -> str:
        head, sep, tail = w.partition(": ")
        return f"{path(head)}{sep}{tail}" if head.startswith("$") else w

    return replace(result, problems=[Problem(path(p.path), p.message) for p in result.problems],
                   warnings=[warning(w) for w in result.warnings])


def target_name_for(file: str, template: Template | None) -> str:
    """A mission keeps its file name; a filled template is written as ``<template name>.json``."""
    if template is None:
        return Path(file).name
    stem = template.name or Path(file).name.split(".")[0]
    return (_UNSAFE.sub("-", stem).strip("-.") or "mission") + ".json"


def duplicate_or_none(cfg: Any, source: str, raw: bytes, *, force: bool, again: list[str]) -> None:
    """Stop (ClickException) if the daemon already handled these exact bytes from ``source`` — unless
    ``force``: then the running daemon forgets them (a ``rerun`` command), so writing them starts a new run."""
    import hashlib

    from polpo.store import read

    try:
        con = read.connect(cfg.db_path)
    except read.NoState:
        return  # no daemon has run yet: nothing to match
    try:
        row = read.source(con, source)
        if row is None or row["hash"] != hashlib.sha256(raw).hexdigest() or row["outcome"] == "busy":
            return
        if force:
            _rerun(cfg, con, source)
            return
        raise click.ClickException(_already(con, row, again))
    finally:
        con.close()


def _already(con: Any, row: dict[str, Any], again: list[str]) -> str:
    import shlex

    from polpo.store import read

    mid = row["mission_id"]
    mission = read.mission(con, mid) if mid else None
    status = mission["status"] if mission else row["outcome"]
    if row["outcome"] == "rejected":
        what = f"these exact bytes were rejected from {row['path']} (see `polpo tail --mission {mid}`)"
    else:
        what = f"these exact bytes already ran from {row['path']} as mission {mid} ({status})"
    lines = [f"not submitted: {what}; the daemon starts nothing for bytes it has already handled."]
    if status in ("running", "cancelling"):
        lines.append(f"  follow it:        {polpo_command()} tail -f --mission {mid}")
        lines.append(f"  or stop it first: polpo cancel {mid}, then add --force")
        return "\n".join(lines)
    lines.append(f"  run them again:   {shlex.join([*again, '--force'])}")
    failed = [t["id"] for t in read.tasks(con, mid) if t["status"] == "failed"] if mission else []
    if failed:
        lines.append(f"  or retry a task:  polpo retry {failed[0]}"
                     + (f" (failed: {', '.join(failed)})" if len(failed) > 1 else ""))
    return "\n".join(lines)


def _rerun(cfg: Any, con: Any, source: str) -> None:
    """Queue ``rerun SOURCE`` and wait for the daemon's answer; only a running daemon can apply it in time."""
    from polpo.daemon_probe import daemon_pid
    from polpo.store import read

    if daemon_pid(cfg.state_dir) is None:
        raise click.ClickException("--force needs the running daemon (it forgets the earlier run of these bytes): "
                                   "start `polpo daemon`, then submit again")
    cid = read.queue_command(con, "rerun", source, datetime.now(UTC).isoformat())
    deadline = time.monotonic() + ANSWER_WAIT
    while time.monotonic() < deadline:
        answer = read.command(con, cid)
        if answer and answer["status"] != "queued":
            if answer["status"] == "refused":
                raise click.ClickException(f"not submitted: {answer['result']}")
            click.echo(answer["result"])
            return
        time.sleep(0.1)
    raise click.ClickException(f"not submitted: the daemon has not answered the rerun within {ANSWER_WAIT:g} s")
