"""Quality metrics from a real state database: true extremes, per-dimension means, attribution, filters, CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from polpo.cli.metrics_cmd import metrics as metrics_cmd
from polpo.metrics import AssessmentRow, dimension_averages, quality_metrics
from polpo.store.schema import MIGRATIONS, SCHEMA_VERSION

TS = "2026-03-01T12:00:00.000Z"


def make_db(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    for script in MIGRATIONS:
        con.executescript(script)
    con.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
    return con


def dims(**scores: float) -> str:
    return json.dumps([{"dimension": k, "score": v, "weight": 0.5, "reasoning": "r"} for k, v in scores.items()])


class Db:
    def __init__(self, con: sqlite3.Connection) -> None:
        self.con = con
        self.n = 0

    def mission(self, mid: str, seq: int) -> None:
        self.con.execute("INSERT INTO missions (id, seq, name, source, hash, run, spec, workspace, status, "
                         "created_at) VALUES (?, ?, ?, 's', 'h', 1, '{}', 'w', 'completed', ?)", (mid, seq, mid, TS))

    def task(self, tid: str, agent: str, *, retries: int = 0, fixes: int = 0, title: str = "") -> None:
        mid, idx = tid.split(":")
        self.con.execute("INSERT INTO tasks (id, mission_id, idx, title, agent, status, retries, total_fixes, "
                         "updated_at) VALUES (?, ?, ?, ?, ?, 'done', ?, ?, ?)",
                         (tid, mid, int(idx), title or f"task {tid}", agent, retries, fixes, TS))

    def assess(self, tid: str, agent: str, passed: bool, score: float | None, scores: str | None = None,
               *, kind: str = "initial", status: str = "complete") -> None:
        self.n += 1
        att = f"{tid}/a{self.n}"
        self.con.execute("INSERT INTO attempts (id, task_id, mission_id, number, kind, agent, status, started_at) "
                         "VALUES (?, ?, ?, ?, ?, ?, 'finished', ?)", (att, tid, tid.split(":")[0], self.n, kind,
                                                                      agent, TS))
        self.con.execute("INSERT INTO assessments (id, attempt_id, task_id, trigger, status, passed, created_at, "
                         "global_score, scores) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (f"{att}/1", att, tid, kind, status, int(passed), f"{TS}{self.n:04d}", score, scores))

    def mark(self, entity: str, kind: str, etype: str = "task") -> None:
        self.con.execute("INSERT INTO sla_marks (entity_id, kind, entity_type, mission_id, data, created_at) "
                         "VALUES (?, ?, ?, ?, '{}', ?)", (entity, kind, etype, entity.split(":")[0], TS))


@pytest.fixture
def db(tmp_path: Path) -> Db:
    d = Db(make_db(tmp_path / "polpo.db"))
    d.mission("m1", 1)
    d.mission("m2", 2)
    # m1:1 by alice: scores 1, 5, 3 (true extremes 1 and 5), one unscored assessment, one still running
    d.task("m1:1", "alice", retries=2, fixes=1, title="build")
    d.assess("m1:1", "alice", False, 1.0, dims(correctness=1, completeness=2))
    d.assess("m1:1", "alice", False, 5.0, dims(correctness=5), kind="fix")
    d.assess("m1:1", "alice", True, 3.0, dims(correctness=3, completeness=4), kind="retry")
    d.assess("m1:1", "alice", False, None, kind="retry")
    d.assess("m1:1", "alice", False, None, status="running")
    d.mark("m1:1", "warning")
    d.mark("m1:1", "violated")
    # m1:2 started by alice, escalated to bob who passed it
    d.task("m1:2", "bob", retries=1, title="test")
    d.assess("m1:2", "alice", False, 2.0)
    d.assess("m1:2", "bob", True, 4.0, kind="retry")
    d.mark("m1:2", "met")
    d.mark("m1", "met", "mission")
    # m2:1 by bob, no LLM review at all
    d.task("m2:1", "bob")
    d.assess("m2:1", "bob", True, None)
    d.con.commit()
    return d


def by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["entityId"]: r for r in rows}


def test_task_metrics_are_true_aggregates(db: Db) -> None:
    tasks = by_id(quality_metrics(db.con).to_json()["tasks"])
    t = tasks["m1:1"]
    assert t["totalAssessments"] == 4 and t["passedAssessments"] == 1  # the running one does not count
    assert (t["avgScore"], t["minScore"], t["maxScore"]) == (3.0, 1.0, 5.0)  # unscored one not in the mean
    assert t["dimensionScores"] == {"completeness": 3.0, "correctness": 3.0}
    assert (t["totalRetries"], t["totalFixes"]) == (2, 1)
    assert (t["deadlinesMet"], t["deadlinesMissed"]) == (0, 1)  # warnings are not outcomes
    assert (t["missionId"], t["title"], t["agent"]) == ("m1", "build", "alice")
    unscored = tasks["m2:1"]
    assert unscored["totalAssessments"] == 1 and unscored["avgScore"] is None and unscored["dimensionScores"] == {}


def test_mission_metrics_aggregate_rows_not_averages(db: Db) -> None:
    missions = by_id(quality_metrics(db.con).to_json()["missions"])
    m1 = missions["m1"]
    assert m1["totalAssessments"] == 6 and m1["passedAssessments"] == 2
    assert m1["avgScore"] == pytest.approx(3.0) and (m1["minScore"], m1["maxScore"]) == (1.0, 5.0)
    assert (m1["totalRetries"], m1["totalFixes"]) == (3, 1)
    assert (m1["deadlinesMet"], m1["deadlinesMissed"]) == (2, 1)  # m1:2 met, m1 itself met, m1:1 missed
    assert list(missions) == ["m1", "m2"]


def test_assessments_are_credited_to_the_attempt_agent(db: Db) -> None:
    agents = by_id(quality_metrics(db.con).to_json()["agents"])
    alice, bob = agents["alice"], agents["bob"]
    assert alice["totalAssessments"] == 5 and alice["passedAssessments"] == 1  # incl. m1:2's first attempt
    assert (alice["minScore"], alice["maxScore"]) == (1.0, 5.0) and alice["avgScore"] == pytest.approx(2.75)
    assert (alice["totalRetries"], alice["totalFixes"]) == (2, 1)  # the retry/fix attempts alice ran
    assert bob["totalAssessments"] == 2 and bob["avgScore"] == 4.0
    assert (bob["deadlinesMet"], bob["deadlinesMissed"]) == (1, 0)  # m1:2 is assigned to bob now
    assert (alice["deadlinesMet"], alice["deadlinesMissed"]) == (0, 1)


def test_mission_filter(db: Db) -> None:
    r = quality_metrics(db.con, mission="m2").to_json()
    assert [m["entityId"] for m in r["missions"]] == ["m2"]
    assert [t["entityId"] for t in r["tasks"]] == ["m2:1"]
    assert [(a["entityId"], a["totalAssessments"]) for a in r["agents"]] == [("bob", 1)]


def test_agent_filter(db: Db) -> None:
    r = quality_metrics(db.con, agent="bob").to_json()
    assert [a["entityId"] for a in r["agents"]] == ["bob"]
    assert [t["entityId"] for t in r["tasks"]] == ["m1:2", "m2:1"]
    m1 = by_id(r["missions"])["m1"]
    assert m1["totalAssessments"] == 2 and (m1["deadlinesMet"], m1["deadlinesMissed"]) == (1, 0)
    assert quality_metrics(db.con, agent="nobody").to_json() == {"missions": [], "agents": [], "tasks": []}


def test_dimension_mean_counts_each_assessment_once() -> None:
    two_reviews = [{"dimension": "correctness", "score": 2}, {"dimension": "correctness", "score": 4},
                   {"dimension": "style", "score": 5}]
    rows = [AssessmentRow("t", "m", "a", True, 3.0, two_reviews),
            AssessmentRow("t", "m", "a", True, 5.0, [{"dimension": "correctness", "score": 5}, {"bad": 1},
                                                     {"dimension": "style", "score": "n/a"}])]
    assert dimension_averages(rows) == {"correctness": 4.0, "style": 5.0}


def test_an_empty_database_has_no_metrics(tmp_path: Path) -> None:
    con = make_db(tmp_path / "empty.db")
    assert quality_metrics(con).to_json() == {"missions": [], "agents": [], "tasks": []}


# --------------------------------------------------------------------------------------------- CLI
@pytest.fixture
def config(tmp_path: Path, db: Db) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    db.con.close()
    (tmp_path / "polpo.db").rename(state / "polpo.db")
    cfg = tmp_path / "polpo.toml"
    cfg.write_text('[daemon]\nstate_dir = "state"\nmissions_dir = "missions"\n')
    return cfg


def test_cli_json(config: Path) -> None:
    res = CliRunner().invoke(metrics_cmd, ["--json", "--mission", "m1", "--config", str(config)])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert [m["entityId"] for m in data["missions"]] == ["m1"] and len(data["tasks"]) == 2


def test_cli_table(config: Path) -> None:
    res = CliRunner().invoke(metrics_cmd, ["--agent", "alice", "--config", str(config)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].split() == ["MISSION", "ASSESSED", "PASSED", "AVG", "MIN", "MAX", "RETRIES", "FIXES", "MET",
                                "MISSED"]
    assert any(line.split()[:6] == ["alice", "5", "1", "2.75", "1.00", "5.00"] for line in lines)
    assert any("dimensions: completeness 3.00, correctness 3.00" in line for line in lines)
    assert any(line.startswith("m1:1  build") for line in lines)


def test_cli_unknown_mission_and_missing_state(config: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(metrics_cmd, ["--mission", "nope", "--config", str(config)])
    assert res.exit_code == 1 and "no mission 'nope'" in res.output
    other = tmp_path / "other.toml"
    other.write_text('[daemon]\nstate_dir = "nothing-here"\n')
    res = CliRunner().invoke(metrics_cmd, ["--config", str(other)])
    assert res.exit_code == 1 and "start the daemon first" in res.output


def test_the_task_table_puts_every_title_and_every_number_in_one_column() -> None:
    from polpo.cli.metrics_cmd import render_table
    from polpo.metrics import MetricsReport, QualityMetrics

    tasks = [QualityMetrics("calculator:1", "task", total_assessments=1, context={"title": "Write the report"}),
             QualityMetrics("fix-loop:12", "task", total_assessments=22, context={"title": "Write the summary"}),
             QualityMetrics("hi:1", "task", total_assessments=3)]
    lines = render_table(MetricsReport(missions=[], agents=[], tasks=tasks)).splitlines()
    assert lines[1].index("Write the report") == lines[2].index("Write the summary")
    assert len({len(line) for line in lines}) == 1  # the number columns end in the same place on every line
