"""Every example of the docs site and the README works, so an example that stops working fails CI.

Missions (```json with ``tasks``) pass ``polpo validate``; those that only use the command agents ``shell`` and
``python`` run to ``mission:completed`` through one real daemon. Config blocks (```toml) are accepted by the
config loader. Shell blocks (```sh) call only ``polpo`` commands and options that exist, through the venv's
``.venv/bin/polpo`` (bare ``polpo`` is not on the PATH after the quick start).
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest

from polpo.cli import main
from polpo.config import parse_config
from tests.support.daemon import daemon_process, run_cli, wait_events, write_config
from tests.support.doc_examples import Block, blocks, polpo_invocations

COMMAND_AGENTS = """
[agents.shell]
type = "command"
command = ["bash", "-c", "{description}"]
timeout = 30

[agents.python]
type = "command"
command = ["python3", "-c", "{description}"]
timeout = 30

[agents.coder]
type = "llm"
model = "openai/docs-model"
api_base = "http://127.0.0.1:9/v1"
"""


def _missions() -> list[tuple[Block, dict[str, Any]]]:
    out = []
    for b in blocks("json"):
        if b.skip:
            continue
        out.append((b, json.loads(b.body)))
    return out


def _json_object(text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def test_every_json_block_is_a_mission_or_marked() -> None:
    """A ```json block is a whole mission, or carries the skip marker; so none goes untested by mistake."""
    not_missions = [b.where for b in blocks("json") if not b.skip and "tasks" not in _json_object(b.body)]
    assert not not_missions, f"json blocks that are not missions: {not_missions}; mark fragments with the skip marker"
    assert len(_missions()) >= 6


def test_every_mission_example_validates(tmp_path: Path) -> None:
    config = write_config(tmp_path, agents=COMMAND_AGENTS)
    files = []
    for i, (b, _) in enumerate(_missions()):
        path = tmp_path / f"example-{i}.json"
        path.write_text(b.body)
        files.append((path, b.where))
    r = run_cli("validate", "--config", str(config), *(str(p) for p, _ in files))
    where = "\n".join(f"{p.name} = {w}" for p, w in files)
    assert r.returncode == 0, f"{r.stdout}{r.stderr}\n{where}"


def _runs_offline(doc: dict[str, Any]) -> bool:
    tasks = doc["tasks"]
    return ("team" not in doc and all(t.get("assignTo") in ("shell", "python") for t in tasks)
            and not any(e.get("type") == "llm_review" for t in tasks for e in t.get("expectations", [])))


def test_command_agent_missions_complete_in_a_daemon(tmp_path: Path) -> None:
    """The examples a newcomer can run without a model all complete, each in its own workspace."""
    config = write_config(tmp_path, agents=COMMAND_AGENTS)
    unique: dict[str, Block] = {}
    for b, doc in _missions():
        if _runs_offline(doc):
            unique.setdefault(hashlib.sha256(b.body.encode()).hexdigest(), b)
    assert len(unique) >= 2, "the README's (also the tutorial's) and the gate's examples run without a model"
    names = {f"ex{i}": b for i, b in enumerate(unique.values())}
    for name, b in names.items():
        (tmp_path / "missions" / f"{name}.json").write_text(b.body)
    with daemon_process(config):
        evs = wait_events(tmp_path / "state", lambda es: {e["missionId"] for e in es
                                                          if e["event"] == "mission:completed"} >= set(names)
                          or any(e["event"] == "mission:rejected" for e in es), timeout=120)
    rejected = [(names[e["missionId"]].where, e["data"]) for e in evs if e["event"] == "mission:rejected"]
    assert not rejected, rejected
    outcomes = {e["missionId"]: e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"}
    failed = {names[m].where: o for m, o in outcomes.items() if o != "completed"}
    assert not failed, failed


def test_every_config_example_is_accepted(tmp_path: Path) -> None:
    toml = [b for b in blocks("toml") if not b.skip]
    assert len(toml) >= 15
    problems = []
    for b in toml:
        try:
            parse_config(tomllib.loads(b.body), tmp_path / "polpo.toml")
        except Exception as e:  # every failure is reported with its place
            problems.append(f"{b.where}: {e}")
    assert not problems, "\n".join(problems)


def _command(argv: list[str]) -> tuple[click.Command, list[str], str]:
    """The click command an argv names, the arguments left, and its name."""
    ctx = click.Context(main, info_name="polpo")
    cmd: click.Command = main
    path = ["polpo"]
    rest = argv
    while isinstance(cmd, click.Group) and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(ctx, rest[0])
        assert sub is not None, f"no command `{' '.join([*path, rest[0]])}`"
        cmd, path, rest = sub, [*path, rest[0]], rest[1:]
        ctx = click.Context(cmd, info_name=path[-1], parent=ctx)
    return cmd, rest, " ".join(path)


def test_every_shell_example_uses_real_commands_and_options() -> None:
    checked = 0
    problems = []
    for b in blocks("sh"):
        for argv in polpo_invocations(b.body):
            program, args = argv[0], argv[1:]
            if program == "polpo":
                problems.append(f"{b.where}: bare `polpo` is not on the PATH after the quick start: .venv/bin/polpo")
            try:
                cmd, rest, name = _command(args)
            except AssertionError as e:
                problems.append(f"{b.where}: {e}")
                continue
            known = {o for p in cmd.params for o in [*p.opts, *p.secondary_opts]} | {"--help", "-h"}
            for word in rest:
                option = word.split("=", 1)[0]
                if option.startswith("-") and option != "-" and option not in known:
                    problems.append(f"{b.where}: `{name}` has no option {option}")
            checked += 1
    assert not problems, "\n".join(problems)
    assert checked >= 12


@pytest.mark.parametrize("snippet, expected", [
    (".venv/bin/polpo submit x.json --param a=1 \\\n  --name y.json  # comment", [["submit", "x.json", "--param", "a=1", "--name", "y.json"]]),
    ("A=1 polpo tail -f | grep x && .venv/bin/polpo status", [["tail", "-f"], ["status"]]),
    ("echo polpo", []),
])
def test_invocations_are_found(snippet: str, expected: list[list[str]]) -> None:
    assert [argv[1:] for argv in polpo_invocations(snippet)] == expected


def test_a_made_up_command_is_caught() -> None:
    with pytest.raises(AssertionError, match="no command `polpo schedules nosuch`"):
        _command(["schedules", "nosuch", "--json"])
