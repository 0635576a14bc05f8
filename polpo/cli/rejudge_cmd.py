"""``polpo rejudge TASK|MISSION``: the stored reviews run again under another judge; prints what changed.

Imports inside the command function are lazy on purpose, so the command starts fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from polpo.cli.common import config_option, load_config_or_exit, print_json

__all__ = ["rejudge"]


@click.command()
@click.argument("target", required=False)
@click.option("--labels", "labels_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Rejudge the tasks a labels file names (its lines' \"id\", as `polpo labels export` writes).")
@click.option("--judge-config", "judge_config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The config whose [judge] runs the reviews (default: --config's).")
@click.option("--all-attempts", is_flag=True, help="Every assessed attempt, not only each task's latest.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@config_option
def rejudge(target: str | None, labels_path: Path | None, judge_config: Path | None, all_attempts: bool,
            as_json: bool, config_path: str | None) -> None:
    """Run the llm_review checks of stored attempts again under another judge configuration, without running
    any agent: the new reviews are stored beside the old ones (`polpo show TASK` lists both), and the verdicts
    that changed are printed."""
    import os
    from datetime import UTC, datetime

    import anyio

    from polpo.agents.client_setup import client_from_config
    from polpo.assessment.calibrate_progress import setup_key
    from polpo.assessment.rejudge import RejudgeBackend, Rejudged, rejudge_check, rejudgement_row
    from polpo.assessment.review_backend import judge_settings, panel_options
    from polpo.llm.secrets import load_env_file
    from polpo.store import read, rejudge_rows
    from polpo.store import rows as R

    if (target is None) == (labels_path is None):
        raise click.UsageError("name what to rejudge: a TASK or MISSION id, or --labels FILE")
    cfg = load_config_or_exit(config_path)
    judge_cfg = load_config_or_exit(str(judge_config)) if judge_config is not None else cfg
    judges = judge_settings(judge_cfg)
    if not judges:
        raise click.ClickException(f"no LLM judge is configured in {judge_config or config_path or 'the config'}: "
                                   "set [judge] model (or models)")
    options = panel_options(judge_cfg)
    try:
        con = read.open_reader(cfg)
    except (read.NoState, read.Unreachable) as e:
        raise click.ClickException(str(e)) from None
    tasks = _targets(con, target, labels_path)
    if judge_cfg.llm.env_file is not None:
        load_env_file(judge_cfg.llm.env_file)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    llm = client_from_config(judge_cfg)
    setup = ",".join(j.model for j in judges) + "#" + setup_key(judges, options)
    done: list[Rejudged] = []

    async def run() -> None:
        for tid in tasks:
            found = rejudge_rows.mission_and_task(con, tid)
            rows = rejudge_rows.reviewed_checks(con, tid, every_attempt=all_attempts) if found else []
            if found is None or not rows:
                click.echo(f"{tid}: no assessed llm_review to rejudge", err=True)
                continue
            m = R.mission_from_row(found[0])
            task = R.task_from_row(found[1], m)
            dims = {d["check"]: (d["source"], d["dimensions"]) for d in read.dimensions(con, tid)}
            backend = RejudgeBackend(llm, judges, options, judge_cfg.judge.reviewer_timeout.total_seconds(), dims)
            for row in rows:
                click.echo(f"{tid}: rejudging attempt {row['number']} (check {row['idx'] + 1})…", err=True)
                r = await rejudge_check(task, m.workspace, row, backend)
                rejudge_rows.add_rejudgement(con, rejudgement_row(r, setup, datetime.now(UTC).isoformat()))
                done.append(r)

    anyio.run(run)
    changed = [r for r in done if r.changed]
    if as_json:
        print_json({"setup": setup, "rejudged": [_json(r) for r in done], "changed": len(changed)})
        return
    for r in changed:
        click.echo(f"{r.task_id} attempt {r.attempt_id.rsplit('/', 1)[-1]}: {_verdict(r.was_passed, r.was_score)} → "
                   f"{r.decision} ({_score(r.outcome.global_score)})"
                   + _where(r.source))
    errors = [r for r in done if r.outcome.error]
    for r in errors:
        click.echo(f"{r.task_id}: could not be rejudged: {r.outcome.error}", err=True)
    click.echo(f"{len(done)} review(s) rejudged by {setup.split('#')[0]}, {len(changed)} verdict(s) changed"
               + (f", {len(errors)} could not be done" if errors else "") + "; `polpo show TASK` lists them")


def _targets(con: Any, target: str | None, labels_path: Path | None) -> list[str]:
    if labels_path is not None:
        ids = []
        for line in labels_path.read_text(encoding="utf-8").splitlines():
            try:
                ident = json.loads(line).get("id") if line.strip() and not line.startswith("#") else None
            except (ValueError, AttributeError):
                ident = None
            if isinstance(ident, str):
                ids.append(ident)
        return ids
    from polpo.store import rejudge_rows

    assert target is not None
    found = rejudge_rows.task_ids(con, target)
    if not found:
        raise click.ClickException(f"no mission or task {target!r}; see `polpo status --all`")
    return found


def _where(source: str) -> str:
    return {"digest": " [judged from the stored copy: the workspace changed since]",
            "digest-cut": " [judged from the stored copy, some files cut to fit it: run results may not be the work's]",
            "workspace-unverified": " [judged on the workspace as it is now: its review stored no copy to check it "
                                    "against]"}.get(source, "")


def _score(score: float | None) -> str:
    return "no score" if score is None else f"score {score:.2f}"


def _verdict(passed: bool, score: float | None) -> str:
    return f"{'pass' if passed else 'fail'} ({_score(score)})"


def _json(r: Any) -> dict[str, Any]:
    return {"task": r.task_id, "attempt": r.attempt_id, "check": r.check_idx, "wasPassed": r.was_passed,
            "wasScore": r.was_score, "decision": r.decision, "score": r.outcome.global_score, "source": r.source,
            "changed": r.changed, "error": r.outcome.error}
