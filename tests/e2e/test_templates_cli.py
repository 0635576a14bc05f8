"""`polpo validate/submit --param` on Polpo templates and the duplicate submit, as a user runs them (subprocesses)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.daemon import daemon_process, mission_json, run_cli, shell_task, wait_events, write_config

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "templates"
AUDIT = """
[channels.audit]
type = "file"
path = "audit.jsonl"
"""


def test_validate_fills_a_template_and_reports_every_parameter_problem(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=AUDIT)
    bug_fix = str(EXAMPLES / "bug-fix.workflow.json")
    r = run_cli("validate", "--config", str(config), bug_fix, "--param", "scope=src", "--param", "tests=x")
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f'{bug_fix}: $: --param tests: the template has no parameter "tests" (it declares: issue, test_command, '
        "scope)",
        f'{bug_fix}: $.parameters[0]: required parameter "issue" is missing: pass --param issue=… (Bug '
        "description or issue reference)",
    ]
    r = run_cli("validate", "--config", str(config), bug_fix, "--param", "issue=login fails")
    assert r.returncode == 0 and r.stdout.strip() == f"{bug_fix}: ok (3 task(s))", r.stdout + r.stderr
    site = str(EXAMPLES / "site-audit.workflow.json")
    r = run_cli("validate", "--config", str(config), site, "--param", "url=https://example.com")
    assert r.returncode == 1
    assert r.stdout.strip() == (f'{site}: $.plan.notifications.rules[0].channels[0]: no channel named "telegram"; '
                                "available: audit (or add [channels.telegram])")
    assert '$.plan.notifications.rules[0].events[0]: "plan:completed" is Polpo\'s name' in r.stderr


def test_submit_fills_site_audit_and_its_notification_reaches_the_file(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=AUDIT)
    with daemon_process(config):
        r = run_cli("submit", "--config", str(config), str(EXAMPLES / "site-audit.workflow.json"),
                    "--param", "url=https://example.com", "--param", "telegram_channel=audit", "--param", "depth=3")
        assert r.returncode == 0, r.stdout + r.stderr
        target = tmp_path / "missions" / "site-audit.json"
        assert r.stdout.splitlines()[0] == f"submitted {target} (filled from {EXAMPLES / 'site-audit.workflow.json'})"
        mission = json.loads(target.read_text())
        assert mission["name"] == "site-audit" and "{{" not in target.read_text()
        assert mission["tasks"][0]["title"] == "Crawl e analisi tecnica di https://example.com"
        assert "fino a 3 pagine" in mission["tasks"][0]["description"]
        wait_events(tmp_path / "state", lambda evs: any(e["event"] == "mission:completed" for e in evs))
        audit = tmp_path / "config" / "audit.jsonl"
        wait_events(tmp_path / "state", lambda _: audit.exists() and audit.read_text().strip() != "")
    note = json.loads(audit.read_text().splitlines()[0])
    assert (note["event"], note["summary"]) == ("mission:completed", "Audit completato per https://example.com")


def test_a_duplicate_submit_says_which_run_and_force_runs_it_again(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    state = tmp_path / "state"
    src = tmp_path / "job.json"
    src.write_text(mission_json(shell_task("ok", "true"), shell_task("broken", "exit 3", maxRetries=0)))
    r = run_cli("submit", "--config", str(config), str(src), "--force")
    assert r.returncode == 0, r.stderr  # nothing ran before: --force changes nothing
    with daemon_process(config):
        wait_events(state, lambda evs: any(e["event"] == "mission:completed" for e in evs))
        r = run_cli("submit", "--config", str(config), str(src))
        assert r.returncode == 1
        target = tmp_path / "missions" / "job.json"
        assert r.stderr.splitlines() == [
            f"Error: not submitted: these exact bytes already ran from {target} as mission job (failed); the "
            "daemon starts nothing for bytes it has already handled.",
            f"  run them again:   polpo submit {src} --config {config} --force",
            "  or retry a task:  polpo retry job:2",
        ]
        r = run_cli("submit", "--config", str(config), str(src), "--force")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"{target}: forgotten (last: mission job)" in r.stdout
        evs = wait_events(state, lambda evs: any(e["event"] == "mission:completed" and e["missionId"] == "job#2"
                                                 for e in evs))
        assert [e["missionId"] for e in evs if e["event"] == "mission:accepted"] == ["job", "job#2"]
    r = run_cli("submit", "--config", str(config), str(src), "--force")
    assert r.returncode == 1 and "--force needs the running daemon" in r.stderr


FIVE = {
    "bug-fix": ["issue=login returns 500", "test_command=python -m pytest -q"],
    "code-review": ["module=src/auth", "focus=security"],
    "preventivo-pdf": ["cliente=ACME", "email_cliente=a@acme.test", "descrizione_lavoro=sito web",
                       "importo=1200.50"],
    "refactoring": ["module=src/util", "goal=reduce complexity"],
    "site-audit": ["url=https://example.com"],
}


def test_each_polpo_example_is_submitted_with_only_a_config_file(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra='[channels.telegram]\ntype = "file"\npath = "telegram.jsonl"\n')
    for name, params in FIVE.items():
        args = [a for p in params for a in ("--param", p)]
        r = run_cli("submit", "--config", str(config), str(EXAMPLES / f"{name}.workflow.json"), *args)
        assert r.returncode == 0, r.stdout + r.stderr
        text = (tmp_path / "missions" / f"{name}.json").read_text()
        assert "{{" not in text and json.loads(text)["name"] == name
    r = run_cli("validate", "--config", str(config), *(str(p) for p in sorted((tmp_path / "missions").glob("*"))))
    assert r.returncode == 0 and r.stdout.count(": ok") == 5, r.stdout + r.stderr
    assert "€1200.50" in (tmp_path / "missions" / "preventivo-pdf.json").read_text()
