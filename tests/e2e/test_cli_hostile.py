"""`polpo validate`, `status` and `show` on hostile input: no traceback, the daemon's verdict, terminal-safe text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from polpo.config import load_config
from tests.support.daemon import mission_json, run_cli, running_daemon, shell_task, submit, write_config

pytestmark = pytest.mark.slow

ESC = "\x1b"

HOSTILE = {
    "c1-surrogate.json": (b'{"tasks":[{"title":"x","assignTo":"\\ud800"}]}', "$.tasks[0].assignTo"),
    "c3-nul.json": (mission_json(shell_task("a\u0000b", "true")).encode(), "$.tasks[0].title"),
    "c4-huge.json": (mission_json(shell_task("x", "true", maxRetries=10**30)).encode(), "$.tasks[0].maxRetries"),
    "utf16.json": (mission_json(shell_task("x", "true")).encode("utf-16"), "$"),
    "deep.json": (b'{"tasks":[{"title":"x","description":"d","notifications":' + b'{"a":' * 100 + b"1"
                  + b"}" * 100 + b"}]}", "$.tasks[0].notifications"),
}


def test_validate_rejects_hostile_files_without_a_traceback(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    for name, (raw, path) in HOSTILE.items():
        f = tmp_path / name
        f.write_bytes(raw)
        r = run_cli("validate", "--config", str(config), str(f))
        assert r.returncode == 1, (name, r.stderr)
        assert "Traceback" not in r.stderr, name
        first = r.stdout.splitlines()[0]
        assert first.startswith(f"{f}: {path}"), (name, r.stdout)


def test_validate_accepts_a_bom_file_and_rejects_directories_fifos_and_big_files(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    config.write_text(config.read_text().replace("[daemon]\n", "[daemon]\nmax_mission_bytes = 2048\n", 1))
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + mission_json(shell_task("x", "true")).encode())
    r = run_cli("validate", "--config", str(config), str(bom))
    assert (r.returncode, r.stdout) == (0, f"{bom}: ok (1 task(s))\n")
    (tmp_path / "dir.json").mkdir()
    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "link.json").symlink_to(tmp_path / "dir.json")
    (tmp_path / "big.json").write_text(mission_json(shell_task("x", "true" + " " * 3000)))
    names = ["dir.json", "fifo.json", "link.json", "big.json"]
    r = run_cli("validate", "--config", str(config), *(str(tmp_path / n) for n in names), timeout=30)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    assert [ln.split(": ", 1)[0] for ln in lines] == [str(tmp_path / n) for n in names]
    assert "not a regular file" in lines[0] and "FIFO" in lines[1] and "symbolic link" in lines[2]
    assert "too large" in lines[3] and "2048" in lines[3]


def test_validate_caps_the_problems_it_prints_unless_all(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    f = tmp_path / "wide.json"
    f.write_text(json.dumps({"tasks": [1] * 3000}))
    r = run_cli("validate", "--config", str(config), str(f))
    lines = r.stdout.splitlines()
    assert len(lines) == 51
    assert lines[-1] == f"{f}: … and 2950 more problem(s) (--all lists every one)"
    r = run_cli("validate", "--all", "--config", str(config), str(f))
    assert len(r.stdout.splitlines()) == 3000


def test_validate_escapes_control_characters(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    f = tmp_path / "esc.json"
    f.write_text(mission_json(shell_task(f"{ESC}[2Jx", "true", assignTo="nobody\nforged line"), name="n"))
    r = run_cli("validate", "--config", str(config), str(f))
    assert r.returncode == 1
    assert ESC not in r.stdout
    [line] = r.stdout.splitlines()
    assert 'no agent named "nobody\\nforged line"' in line


@pytest.mark.anyio
async def test_status_and_show_escape_titles_and_status_says_when_it_truncates(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    cfg = load_config(config)
    async with running_daemon(cfg) as (_, w):
        submit(cfg, "esc.json", mission_json(shell_task(f"{ESC}]0;owned{ESC}\\\nforged", "false")))
        await w.wait_event("mission:completed", mission_id="esc")
        for i in range(2):
            submit(cfg, f"m{i}.json", mission_json(shell_task("ok", "true")))
            await w.wait_event("mission:completed", mission_id=f"m{i}")
    for args in (["status", "--all"], ["show", "esc"], ["show", "esc:1"]):
        r = run_cli(*args, "--config", str(config))
        assert r.returncode == 0, r.stderr
        assert ESC not in r.stdout, args
        assert "\\x1b]0;owned\\x1b\\\\nforged" in r.stdout, (args, r.stdout)
        assert not any(line.startswith("forged") for line in r.stdout.splitlines())
    st = json.loads(run_cli("status", "--json", "--limit", "2", "--config", str(config)).stdout)
    assert (len(st["missions"]), st["total"], st["truncated"]) == (2, 3, True)
    assert [m["id"] for m in st["missions"]] == ["m0", "m1"]
    st = json.loads(run_cli("status", "--json", "--limit", "0", "--config", str(config)).stdout)
    assert (len(st["missions"]), st["truncated"]) == (3, False)
    text = run_cli("status", "--limit", "1", "--config", str(config)).stdout
    assert "(the newest 1 of 3 missions; --limit N or --limit 0 shows more)" in text


def test_validate_and_submit_apply_the_configs_security_policy(tmp_path: Path) -> None:
    """What the daemon's [security] refuses, `validate` and `submit` refuse too, with the JSON path."""
    config = write_config(tmp_path, extra="[security]\ncommand_checks = false\n")
    f = tmp_path / "checked.json"
    f.write_text(mission_json(shell_task("x", "true", expectations=[{"type": "test", "command": "true"}])))
    r = run_cli("validate", "--config", str(config), str(f))
    assert r.returncode == 1
    assert r.stdout.startswith(f"{f}: $.tasks[0].expectations[0]: test checks from missions are disabled")
    r = run_cli("submit", "--config", str(config), str(f))
    assert r.returncode == 1 and "$.tasks[0].expectations[0]" in r.stdout
    assert not (tmp_path / "missions" / "checked.json").exists()
    outside = tmp_path / "elsewhere.json"
    outside.write_text(mission_json(shell_task("x", "true"), workspace=str(tmp_path / "not-allowed")))
    r = run_cli("validate", "--config", str(config), str(outside))
    assert r.returncode == 1 and f"{outside}: $.workspace:" in r.stdout and "workspace_roots" in r.stdout
