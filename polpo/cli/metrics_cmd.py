"""``polpo metrics``: quality metrics per mission, agent and task, read from the state database.

Kept out of ``polpo/cli.py`` so the command and its table formatting live next to nothing else; it imports
neither anyio nor litellm, like the other quick commands.

Imports inside the command functions are lazy on purpose: each command loads only what it uses, so quick
commands start fast.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from polpo.metrics import MetricsReport, QualityMetrics

__all__ = ["metrics", "render_table"]

_COLS = ("ASSESSED", "PASSED", "AVG", "MIN", "MAX", "RETRIES", "FIXES", "MET", "MISSED")


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _line(name: str, m: QualityMetrics, width: int) -> str:
    vals = (m.total_assessments, m.passed_assessments, _num(m.avg_score), _num(m.min_score), _num(m.max_score),
            m.total_retries, m.total_fixes, m.deadlines_met, m.deadlines_missed)
    return f"{name:<{width}} " + " ".join(f"{v!s:>8}" for v in vals)


def _dims(m: QualityMetrics) -> str:
    def one(k: str, v: float) -> str:
        spread = m.dimension_spread.get(k)
        return f"{k} {v:.2f}" + (f" ±{spread:.2f}" if spread is not None else "")
    return ", ".join(one(k, v) for k, v in m.dimension_scores.items())


def render_table(report: MetricsReport) -> str:
    """A readable table per level; dimension averages under each mission and agent."""
    out: list[str] = []
    sections: list[tuple[str, list[QualityMetrics]]] = [
        ("MISSION", report.missions), ("AGENT", report.agents), ("TASK", report.tasks)]
    for title, rows in sections:
        if not rows:
            continue
        id_width = max(len(r.entity_id) for r in rows)  # titles start in one column, whatever the ids' lengths
        names = [(f"{r.entity_id:<{id_width}}  {r.context['title'][:30]}" if r.context.get("title") else r.entity_id)
                 for r in rows]
        width = max(12, len(title), *(len(n) for n in names))
        if out:
            out.append("")
        out.append(f"{title:<{width}} " + " ".join(f"{c:>8}" for c in _COLS))
        for name, row in zip(names, rows, strict=True):
            out.append(_line(name, row, width))
            if title != "TASK" and row.dimension_scores:
                out.append(f"{'':<{width}}   dimensions: {_dims(row)}")
            if title != "TASK" and (row.spend_usd or row.cost_unknown):
                per = row.cost_per_passed_task
                out.append(f"{'':<{width}}   spend ${row.spend_usd:.4f}, cost per passed task "
                           + (f"${per:.4f}" if per is not None else "- (none passed)")
                           + (f" (+ cost unknown for {', '.join(row.cost_unknown)})" if row.cost_unknown else ""))
            if title == "MISSION" and (row.cache_hits or row.cache_misses):
                out.append(f"{'':<{width}}   judge cache: {row.cache_hits} hit(s), {row.cache_misses} miss(es)")
    return "\n".join(out) if out else "no metrics yet: no mission has run"


@click.command()
@click.option("--mission", "mission_id", metavar="ID", help="Only this mission (id, or name for its latest run).")
@click.option("--agent", metavar="NAME", help="Only this agent's work.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--config", "config_path", metavar="PATH", default=None,
              help="Config file (default: $POLPO_CONFIG or config/polpo.toml).")
def metrics(mission_id: str | None, agent: str | None, as_json: bool, config_path: str | None) -> None:
    """Quality metrics: assessments, scores, per-dimension averages, retries, fixes, deadlines."""
    from polpo.config import ConfigError, load_config
    from polpo.metrics import quality_metrics
    from polpo.store import read

    try:
        cfg = load_config(config_path)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    try:
        con = read.open_reader(cfg)
    except read.NoState as e:
        raise click.ClickException(str(e)) from None
    try:
        mid = None
        if mission_id is not None:
            m = read.mission(con, mission_id)
            if m is None:
                raise click.ClickException(f"no mission {mission_id!r} (see polpo status)")
            mid = m["id"]
        report = quality_metrics(con, mission=mid, agent=agent)
    finally:
        con.close()
    if as_json:
        _json(report.to_json())
    else:
        click.echo(render_table(report))


def _json(obj: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")
