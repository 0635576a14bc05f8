"""``polpo calibrate LABELS.jsonl``: how well the judge panel agrees with people, the rule that keeps its false
passes in bounds, and a comparison of two judge set-ups.

Imports inside the command function are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from polpo.cli.common import config_option, load_config_or_exit, print_json

if TYPE_CHECKING:
    from polpo.assessment.calibrate import ItemResult, LabelledItem
    from polpo.assessment.calibrate_progress import ResultsFile
    from polpo.config import Config

__all__ = ["calibrate"]


@click.command()
@click.argument("labels", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.option("--labels", "labels_option", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The labelled set (the same as the argument; e.g. from `polpo labels export`).")
@click.option("--write", "write_to", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Save the linear calibration and the fitted rule to this file, for [judge] calibration.")
@click.option("--max-false-pass", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="The rule's limit on broken work passing without a person (default: [judge] max_false_pass).")
@click.option("--max-false-fail", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=None,
              help="The rule's limit on good work failing without a person (default: [judge] max_false_fail).")
@click.option("--rule", "rule_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Report what this calibration file's rule decides on the labels (default: [judge] calibration's).")
@click.option("--compare", "compare_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Another config: score its [judge] on the same labels and show both side by side.")
@click.option("--seats", type=click.IntRange(1, 9), default=None,
              help="Reviewers in the panel (default: [judge] seats); --seats 1 measures a single reviewer.")
@click.option("--results", "results_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where each finished item is kept (default: <state_dir>/calibrate/LABELS.<set-up>.results.jsonl).")
@click.option("--resume", is_flag=True, help="Reuse the scored items of the results file (same judge set-up, "
                                             "matched by item id).")
@click.option("--report-only", is_flag=True, help="Score nothing: report on the items the results file already holds "
              "for this judge set-up (a new --rule, --write), without calling a model.")
@click.option("--traces", "traces_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Keep each item's review (evidence, every reviewer's conversation) as ID.json in this folder.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@config_option
def calibrate(labels: Path | None, labels_option: Path | None, write_to: Path | None, max_false_pass: float | None,
              max_false_fail: float | None, rule_path: Path | None, compare_path: Path | None, seats: int | None,
              results_path: Path | None, resume: bool, report_only: bool, traces_dir: Path | None, as_json: bool,
              config_path: str | None) -> None:
    """Run the judge panel on a labelled set (JSON lines: task, criteria or dimensions, output or workspace,
    the person's score or verdict) and print Spearman's rho, quadratic-weighted Cohen's kappa, the mean bias,
    each reviewer's agreement, the panel against a single reviewer, and what a rule decides: how many items it
    passes, fails and sends to a person. A person passes an item labelled 3 or more. A line per item goes to
    stderr as it starts and finishes, and the item to the results file, so a stopped run keeps what it had
    (--resume continues it)."""
    if (labels is None) == (labels_option is None):
        raise click.UsageError("give the labelled set once: polpo calibrate LABELS.jsonl (or --labels LABELS.jsonl)")
    labels = labels or labels_option
    assert labels is not None
    if report_only and (compare_path is not None or traces_dir is not None):
        raise click.UsageError("--report-only scores nothing: it cannot --compare another judge or keep --traces")
    import json
    from datetime import UTC, datetime

    from polpo.assessment.calibrate import read_labels
    from polpo.assessment.calibrate_report import fit, no_fit_reason, render, report
    from polpo.review.calibration import load_calibration

    cfg = _config(config_path, seats)
    try:
        items = read_labels(labels)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    results = (_stored(cfg, items, labels, results_path) if report_only
               else _measure(cfg, items, labels, results_path, resume, traces_dir))
    rule, no_rule = None, ""
    if write_to is not None:
        rule, no_rule = fit(results, max_false_pass=max_false_pass or cfg.judge.max_false_pass,
                            max_false_fail=max_false_fail or cfg.judge.max_false_fail)
    else:
        source = rule_path or cfg.judge.calibration
        if source is not None:
            try:
                rule = load_calibration(source).rule
            except ValueError as e:
                raise click.ClickException(str(e)) from None
    rep = report(results, rule, fitted=write_to is not None)
    if write_to is not None:
        if rep["calibration"] is None and rep["rule"] is None:
            raise click.ClickException(f"nothing to write: {no_fit_reason(rep)}")
        line = rep["calibration"] or {"scale": 1.0, "bias": 0.0}
        write_to.write_text(json.dumps({**line, "rule": rep["rule"], "labels": str(labels), "items": rep["scored"],
                                        "kappa": rep["panel"]["kappa"], "spearman": rep["panel"]["spearman"],
                                        "createdAt": datetime.now(UTC).isoformat()}, indent=2) + "\n")
    other = None
    if compare_path is not None:  # the other judge with its own rule: fitted the same way, or its config's
        other_cfg = _config(str(compare_path), seats)
        other_results = _measure(other_cfg, items, labels, None, resume, None)
        other_rule = rule if rule_path is not None else None  # a rule file given: measure both judges on it
        if write_to is not None:
            other_rule = fit(other_results, max_false_pass=max_false_pass or other_cfg.judge.max_false_pass,
                             max_false_fail=max_false_fail or other_cfg.judge.max_false_fail)[0]
        elif other_rule is None and other_cfg.judge.calibration is not None:
            other_rule = load_calibration(other_cfg.judge.calibration).rule
        other = report(other_results, other_rule, fitted=write_to is not None)
    if as_json:
        print_json({**rep, "compare": other} if other is not None else rep)
    else:
        click.echo(render(rep, source=str(labels), judges=[m for m in cfg.judge.panel_models()]))
        if other is not None:
            click.echo(f"\ncompared with {compare_path}:")
            click.echo(render(other, source=str(labels), judges=[m for m in _config(str(compare_path), seats)
                                                                  .judge.panel_models()]))
            click.echo(_side_by_side(rep, other, str(config_path or "this config"), str(compare_path)))
        if write_to is not None and rule is None:
            click.echo(f"no rule written: {no_rule}; the threshold decides as before")
        if write_to is not None:
            # absolute: [judge] calibration resolves against the config's folder, not the current one
            click.echo(f"calibration written to {write_to}; use it with [judge] calibration = "
                       f"\"{write_to.resolve()}\"")
    if rep["scored"] == 0:
        raise SystemExit(1)


def _config(path: str | None, seats: int | None) -> Config:
    cfg: Config = load_config_or_exit(path)
    if seats is not None:  # as [judge] seats would: the models cycled over that many seats
        cfg = cfg.model_copy(update={"judge": cfg.judge.model_copy(update={"seats": seats})})
    if not cfg.judge.panel_models():
        raise click.ClickException(f"no LLM judge is configured in {path or 'the config'}: set [judge] model (or "
                                   "models), or POLPO_JUDGE_MODEL")
    return cfg


def _results_file(cfg: Config, labels: Path, results_path: Path | None) -> ResultsFile:
    """The results file of ``cfg``'s judge set-up: ``results_path``, or the default one under the state folder."""
    from polpo.assessment.calibrate_progress import ResultsFile, setup_key
    from polpo.assessment.review_backend import judge_settings, panel_options

    key = setup_key(judge_settings(cfg), panel_options(cfg))
    return ResultsFile(results_path or cfg.state_dir / "calibrate" / f"{labels.stem}.{key}.results.jsonl", key)


def _stored(cfg: Config, items: list[LabelledItem], labels: Path, results_path: Path | None) -> list[ItemResult]:
    """The labelled items as the results file scored them (an item it lacks is reported as not scored)."""
    from polpo.assessment.calibrate import ItemResult

    kept = _results_file(cfg, labels, results_path)
    if not kept.path.is_file():
        raise click.ClickException(f"no results file at {kept.path}: run polpo calibrate without --report-only "
                                   "first (or give --results FILE)")
    done = kept.previous()
    click.echo(f"calibrate: {len(items)} item(s) of {labels}, {sum(i.id in done for i in items)} scored in "
               f"{kept.path} (--report-only: nothing is scored now)", err=True)
    return [done.get(i.id) or ItemResult(i.id, i.human, None, error="not in the results file (--report-only)")
            for i in items]


def _measure(cfg: Config, items: list[LabelledItem], labels: Path, results_path: Path | None,
             resume: bool, traces_dir: Path | None) -> list[ItemResult]:
    """Each item scored by ``cfg``'s panel (reusing an earlier run's with --resume), with progress on stderr."""
    import json
    import os
    import time

    import anyio

    from polpo.agents.client_setup import client_from_config
    from polpo.assessment.calibrate import run_calibration
    from polpo.assessment.calibrate_progress import progress_line
    from polpo.assessment.review_backend import judge_settings, panel_options
    from polpo.llm.secrets import load_env_file

    judges = judge_settings(cfg)
    options = panel_options(cfg)
    if cfg.llm.env_file is not None:
        load_env_file(cfg.llm.env_file)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    llm = client_from_config(cfg)
    kept = _results_file(cfg, labels, results_path)
    ids = {i.id for i in items}
    done = {k: v for k, v in kept.previous().items() if k in ids} if resume else {}
    try:
        earlier = kept.start(done)
    except OSError as e:
        raise click.ClickException(f"cannot write the results file {kept.path}: {e.strerror or e}; "
                                   "choose another with --results") from None
    click.echo(f"calibrate: {len(items)} item(s) of {labels}, {len(judges)} reviewer(s) "
               f"({', '.join(j.model for j in judges)}); results in {kept.path}"
               + (f" (the earlier run's are in {earlier})" if earlier else "")
               + (f"; {len(done)} reused" if done else ""), err=True)
    started, count = time.monotonic(), {"done": 0, "ran": 0}

    def starting(i: int, item: LabelledItem) -> None:
        click.echo(f"[{i + 1}/{len(items)}] {item.id}: scoring…", err=True)

    def finished(result: ItemResult, reused: bool) -> None:
        count["done"] += 1
        if not reused:
            count["ran"] += 1
            kept.append(result)
            if traces_dir is not None:
                traces_dir.mkdir(parents=True, exist_ok=True)
                (traces_dir / f"{result.id}.json").write_text(json.dumps(result.review, indent=1, default=str))
        click.echo(progress_line(count["done"], len(items), result, time.monotonic() - started, count["ran"])
                   + (" (from the results file)" if reused else ""), err=True)

    return anyio.run(lambda: run_calibration(items, llm, judges, options=options,
                                             reviewer_timeout=cfg.judge.reviewer_timeout.total_seconds(),
                                             done=done, on_item=finished, on_start=starting))


def _side_by_side(a: dict[str, Any], b: dict[str, Any], name_a: str, name_b: str) -> str:
    def cell(rep: dict[str, Any], key: str) -> str:
        v = rep["panel"][key]
        return "n/a" if v is None else f"{v:.3f}"

    def rule(rep: dict[str, Any]) -> str:
        if not rep["rule"]:
            return "n/a"
        on = rep["rule"]["onLabels"]
        return f"{on['passed']}/{on['failed']}/{on['person']} fp {on['falsePass']}"
    rows = [("", name_a[-28:], name_b[-28:]), ("scored", str(a["scored"]), str(b["scored"])),
            *((k, cell(a, k), cell(b, k)) for k in ("spearman", "kappa", "bias")),
            ("rule pass/fail/person", rule(a), rule(b))]
    return "\n".join(f"{r[0]:<22} {r[1]:>28} {r[2]:>28}" for r in rows)
