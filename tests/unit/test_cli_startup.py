"""How `polpo validate` starts fast, checked in real subprocesses (the speed itself is scripts/bench_cli.py's).

What validate imports (no event catalog unless a mission has notification rules; no engine, store, asyncio,
SQLite or litellm; no pydantic plugin discovery), and the start-up of :class:`polpo.cli.LazyGroup` run as a
process: the imports frozen for the garbage collector, the collector back on for the command, pydantic's
plugin discovery skipped for the commands that build models; nothing changes when it is called in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.daemon import REPO, write_config

AUDIT = """
[channels.audit]
type = "file"
path = "audit.jsonl"
"""

# never on validate's path: the daemon's machinery, and what only a mission with notification rules needs
# (orjson is on it: the stored form of a mission, polpo.model.doc, is what validate round-trips)
NOT_IMPORTED = ("polpo.events.catalog", "polpo.engine", "polpo.store", "polpo.agents", "polpo.tools", "asyncio",
                "anyio", "sqlite3", "aiosqlite", "litellm", "importlib.metadata")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("POLPO_")}


def _imported_by(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``python -X importtime -m polpo ARGS``; the result and every module it imported."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "polpo", *args], cwd=REPO, env=_env(),
                       capture_output=True, text=True, timeout=60)
    modules = {ln.rsplit("|", 1)[1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")}
    return r, modules


def _mission(tmp_path: Path, rules: list[dict[str, object]] | None) -> str:
    task: dict[str, object] = {"title": "a", "description": "echo a", "assignTo": "shell"}
    doc: dict[str, object] = {"name": "m", "tasks": [task]}
    if rules is not None:
        doc["notifications"] = {"rules": rules}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_validate_imports_no_event_catalog_engine_store_asyncio_or_litellm(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=AUDIT)
    file = _mission(tmp_path, None)
    r, modules = _imported_by("validate", "--config", str(config), file)
    assert r.returncode == 0 and r.stdout.strip() == f"{file}: ok (1 task(s))", r.stdout
    assert "polpo.config" in modules and "polpo.intake.check" in modules  # the daemon's own check ran
    loaded = sorted(m for m in modules if m.startswith(NOT_IMPORTED))
    assert loaded == []


def test_a_mission_with_notification_rules_still_has_its_event_globs_checked(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=AUDIT)
    file = _mission(tmp_path, [{"events": ["task:*"], "channels": ["audit"]},
                               {"events": ["nothing:here"], "channels": ["audit"]}])
    r, modules = _imported_by("validate", "--config", str(config), file)
    assert r.returncode == 1
    assert r.stdout.strip() == (f'{file}: $.notifications.rules[1].events[0]: "nothing:here" matches no polpo '
                                "event (see `polpo tail`, or the event list in docs/reference/events.md)")
    assert "polpo.events.catalog" in modules


PROBE = """
import gc, sys
import click
from polpo.cli import main

@click.command()
def probe() -> None:
    print("during", gc.isenabled(), gc.get_freeze_count())

main.add_command(probe)
mode, *args = sys.argv[1:]
if mode == "in-process":
    main.main(["probe"], standalone_mode=False)  # as CliRunner and other in-process callers do
elif mode == "in-process-schema":
    main.main(["schema"], standalone_mode=False)
else:
    try:
        main(args)  # as the console script and python -m polpo run it (__call__)
    except SystemExit:
        pass
loader = sys.modules.get("pydantic.plugin._loader")
print("after", gc.isenabled(), gc.get_freeze_count(), "no loader" if loader is None else
      "pydantic's loader" if hasattr(loader, "__file__") else "stand-in")
"""


def _probe(*args: str) -> list[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=REPO, env=_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def test_run_as_a_process_the_imports_are_frozen_and_the_command_runs_collecting(tmp_path: Path) -> None:
    out = _probe("process", "probe")
    assert out[0].startswith("during True ") and out[1].startswith("after True "), out
    frozen = int(out[0].split()[2])
    assert frozen > 5_000 and out[1].endswith(" no loader")  # click and polpo.cli, frozen before the command ran
    config = write_config(tmp_path)
    file = _mission(tmp_path, None)
    out = _probe("process", "validate", "--config", str(config), file)
    assert out[0] == f"{file}: ok (1 task(s))" and out[1].startswith("after True ")
    assert int(out[1].split()[2]) > frozen + 10_000  # validate's module imports pydantic and the check: frozen
    assert out[1].endswith(" stand-in")  # pydantic asked polpo's stand-in for plugins, not the installed packages


def test_called_in_process_the_collector_and_pydantic_are_left_alone() -> None:
    assert _probe("in-process") == ["during True 0", "after True 0 no loader"]
    out = _probe("in-process-schema")
    assert out[-1] == "after True 0 pydantic's loader" and '"$defs"' in "".join(out)


def test_pydantics_other_loader_names_still_reach_the_real_module() -> None:
    code = ("import sys; from polpo.cli.pydantic_plugins import skip_discovery; print(skip_discovery()); "
            "from pydantic.plugin._loader import entry_points, get_plugins; "
            "print(list(get_plugins()), callable(entry_points), 'importlib.metadata' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    # the stand-in answers get_plugins; a name it does not know (here the loader's own entry_points) is served
    # by pydantic's real module, loaded only then
    assert r.stdout.split("\n")[:2] == ["True", "[] True True"]


def test_tail_does_not_build_the_event_catalog() -> None:
    code = ("import sys, polpo.cli.tail_cmd, polpo.events.names, polpo.events.render; "
            "print('polpo.events.catalog' in sys.modules)")  # what `polpo tail` imports to print lines
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_the_daemon_loads_no_web_stack_it_was_not_asked_for() -> None:
    code = ("import sys, polpo.daemon; "
            "print(sorted(m for m in ('uvicorn', 'starlette.applications', 'prometheus_client', 'httpx', 'litellm') "
            "if m in sys.modules))")  # [http] and HTTP notification channels import them when configured
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
