"""``polpo calibrate LABELS.jsonl``: how well the judge panel agrees with people, and a calibration to correct it.

Imports inside the command function are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import click

from polpo.cli.common import config_option, load_config_or_exit, print_json

__all__ = ["calibrate"]


@click.command()
@click.argument("labels", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.option("--labels", "labels_option", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The labelled set (the same as the argument; e.g. from `polpo labels export`).")
@click.option("--write", "write_to", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Save the linear calibration (scale, bias) to this file, for [judge] calibration.")
@click.option("--seats", type=click.IntRange(1, 9), default=None,
              help="Reviewers in the panel (default: [judge] seats); --seats 1 measures a single reviewer.")
@click.option("--results", "results_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where each finished item is kept (default: <state_dir>/calibrate/LABELS.results.jsonl).")
@click.option("--resume", is_flag=True, help="Reuse the scored items of the results file (same judges).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@config_option
def calibrate(labels: Path | None, labels_option: Path | None, write_to: Path | None, seats: int | None, results_path: Path | None, resume: bool,
              as_json: bool, config_path: str | None) -> None:
    """Run the judge panel on a labelled set (JSON lines: task, criteria or dimensions, output or workspace,
    the human score) and print Spearman's rho, quadratic-weighted Cohen's kappa, the mean bias, each reviewer's
    agreement and the panel against a single reviewer. A line per item goes to stderr as it finishes, and the
    item to the results file, so a stopped run keeps what it had (--resume continues it)."""
    if (labels is None) == (labels_option is None):
        raise click.UsageError("give the labelled set once: polpo calibrate LABELS.jsonl (or --labels LABELS.jsonl)")
    labels = labels or labels_option
    assert labels is not None
    import json
    import os
    import time

    import anyio

    from polpo.agents.client_setup import client_from_config
    from polpo.assessment.calibrate import (
        ItemResult,
        no_fit_reason,
        read_labels,
        render,
        report,
        run_calibration,
    )
    from polpo.assessment.calibrate_progress import ResultsFile, progress_line
    from polpo.assessment.review_backend import judge_settings
    from polpo.llm.secrets import load_env_file

    cfg = load_config_or_exit(config_path)
    if seats is not None:  # as [judge] seats would: the models cycled over that many seats
        cfg = cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"seats": seats})})
    judges = judge_settings(cfg)
    if not judges:
        raise click.ClickException("no LLM judge is configured: set [judge] model (or models), or POLPO_JUDGE_MODEL")
    try:
        items = read_labels(labels)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    if cfg.llm.env_file is not None:
        load_env_file(cfg.llm.env_file)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    llm = client_from_config(cfg)
    default = cfg.state_dir / "calibrate" / f"{labels.stem}.results.jsonl"
    kept = ResultsFile(results_path or default, [j.model for j in judges])
    ids = {i.id for i in items}
    done = {k: v for k, v in kept.previous().items() if k in ids} if resume else {}
    try:
        kept.start(done)
    except OSError as e:
        raise click.ClickException(f"cannot write the results file {kept.path}: {e.strerror or e}; "
                                   "choose another with --results") from None
    started, count = time.monotonic(), {"done": 0, "ran": 0}

    def finished(result: ItemResult, reused: bool) -> None:
        count["done"] += 1
        if not reused:
            count["ran"] += 1
            kept.append(result)
        click.echo(progress_line(count["done"], len(items), result, time.monotonic() - started, count["ran"])
                   + (" (from the results file)" if reused else ""), err=True)

    results = anyio.run(lambda: run_calibration(items, llm, judges, reviewer_error=cfg.judge.reviewer_error,
                                                reviewer_timeout=cfg.judge.reviewer_timeout.total_seconds(),
                                                max_turns=cfg.judge.max_turns, done=done, on_item=finished))
    rep = report(results)
    if write_to is not None:
        if rep["calibration"] is None:
            raise click.ClickException(f"no calibration to write: {no_fit_reason(rep)}")
        write_to.write_text(json.dumps({**rep["calibration"], "labels": str(labels), "items": rep["scored"],
                                        "kappa": rep["panel"]["kappa"], "spearman": rep["panel"]["spearman"],
                                        "createdAt": datetime.now(UTC).isoformat()}, indent=2) + "\n")
    if as_json:
        print_json(rep)
    else:
        click.echo(render(rep, source=str(labels), judges=[j.model for j in judges]))
        if write_to is not None:
            # absolute: [judge] calibration resolves against the config's folder, not the current one
            click.echo(f"calibration written to {write_to}; use it with [judge] calibration = "
                       f"\"{write_to.resolve()}\"")
    if rep["scored"] == 0:
        raise SystemExit(1)
