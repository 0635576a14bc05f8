"""Every example of the docs site and the README works, so an example that stops working fails CI.

Missions (```json with ``tasks``) pass ``polpo validate``; those that only use the command agents ``shell`` and
``python`` run to ``mission:completed`` through one real daemon; those for the LLM agent ``coder`` run too, the provider
played by the tests' OpenAI-compatible server (:data:`ANSWERS`). Config blocks (```toml) are accepted by the
config loader. Shell blocks (```sh) call only ``polpo`` commands and options that exist, through the venv's
``.venv/bin/polpo`` (bare ``polpo`` is not on the PATH after the quick start); ``test_shell_examples.py`` runs
them as written, or the page says why not (``<!-- example: not run: … -->``).
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
from tests.support.fake_llm import FakeLLM
from tests.support.judges import ScriptedJudge
from tests.support.scripted_agent import ANSWERS, is_agent_request, scripted_agent

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

[agents.asker]
type = "command"
command = ["bash", "-c", "{description}"]
ask_human = true

[channels.ops]
type = "file"
path = "ops-notifications.jsonl"
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


#: mission keys that make a run wait for a person or a clock (an approval, a checkpoint, a delay, a schedule)
WAITS = ("schedule", "checkpoints", "delays")


def _runs_with_command_agents(doc: dict[str, Any]) -> bool:
    """Its tasks are done by ``shell`` and ``python`` (reviews go to the scripted judge) and nothing waits."""
    return ("team" not in doc and not any(k in doc for k in WAITS)
            and all(t.get("assignTo") in ("shell", "python") and "approval" not in t for t in doc["tasks"]))


def _run_in_a_daemon(tmp_path: Path, names: dict[str, Block], responder: Any, *, coder: bool,
                     ) -> list[dict[str, Any]]:
    """Run the example missions ``names`` in one real daemon whose judge (and, with ``coder``, whose LLM agent
    ``coder``) is the tests' OpenAI-compatible server answering with ``responder``; the events until every
    mission completed or one was rejected."""
    with FakeLLM(models=("docs-model", "fake-judge")) as srv:
        srv.responder = responder
        agents = COMMAND_AGENTS if not coder else COMMAND_AGENTS.replace(
            'api_base = "http://127.0.0.1:9/v1"', f'api_base = "{srv.base_url}"\napi_key_env = "DOCS_JUDGE_KEY"')
        config = write_config(tmp_path, agents=agents, extra=f"""
[judge]
model = "openai/fake-judge"
api_base = "{srv.base_url}"
api_key_env = "DOCS_JUDGE_KEY"
""")
        for name, b in names.items():
            (tmp_path / "missions" / f"{name}.json").write_text(b.body)
        with daemon_process(config, env={"DOCS_JUDGE_KEY": "sk-docs"}):
            return wait_events(tmp_path / "state", lambda es: {e["missionId"] for e in es
                                                               if e["event"] == "mission:completed"} >= set(names)
                               or any(e["event"] == "mission:rejected" for e in es), timeout=120)


def test_command_agent_missions_complete_in_a_daemon(tmp_path: Path) -> None:
    """The examples run by command agents all complete, each in its own workspace, in one real daemon.

    Their ``llm_review`` checks are scored by the tests' scripted OpenAI-compatible judge (every dimension 4),
    the stand-in the tutorial documents (``scripts/fake_llm_server.py``).
    """
    unique: dict[str, Block] = {}
    reviewed = 0
    for b, doc in _missions():
        if _runs_with_command_agents(doc) and hashlib.sha256(b.body.encode()).hexdigest() not in unique:
            unique[hashlib.sha256(b.body.encode()).hexdigest()] = b
            reviewed += any(e.get("type") == "llm_review" for t in doc["tasks"] for e in t.get("expectations", []))
    assert len(unique) >= 4 and reviewed >= 2, "the README's, the judged task's and the gates' examples run here"
    names = {f"ex{i}": b for i, b in enumerate(unique.values())}
    judge = ScriptedJudge(score=4.0)
    evs = _run_in_a_daemon(tmp_path, names, judge, coder=False)
    rejected = [(names[e["missionId"]].where, e["data"]) for e in evs if e["event"] == "mission:rejected"]
    assert not rejected, rejected
    outcomes = {e["missionId"]: e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"}
    failed = {names[m].where: o for m, o in outcomes.items() if o != "completed"}
    assert not failed, failed
    assert judge.calls.get("forced", 0) + judge.calls.get("auto", 0) + judge.calls.get("json", 0) >= 3  # 3 seats


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


def _llm_missions() -> dict[str, Block]:
    unique: dict[str, Block] = {}
    for b, doc in _missions():
        if ("team" not in doc and not any(k in doc for k in WAITS)
                and all(t.get("assignTo") == "coder" and "approval" not in t for t in doc["tasks"])):
            unique.setdefault(hashlib.sha256(b.body.encode()).hexdigest(), b)
    return {f"llm{i}": b for i, b in enumerate(unique.values())}


def test_llm_agent_missions_complete_with_a_stand_in_provider(tmp_path: Path) -> None:
    """The docs' missions for an LLM agent run as documented, the provider played by the tests' OpenAI-compatible
    server: the agent writes the files its task names through write_file, three scripted reviewers score."""
    names = _llm_missions()
    assert len(names) >= 2, "the README's haiku and the tutorial's fizzbuzz"
    for b in names.values():
        files = [e["path"] for t in json.loads(b.body)["tasks"] for e in t.get("expectations", [])
                 if e.get("type") == "file_exists"]
        assert set(files) <= set(ANSWERS), f"{b.where}: add what the stand-in model writes for {files}"
    judge = ScriptedJudge(score=4.0)

    def provider(req: Any) -> Any:
        return scripted_agent(req) if is_agent_request(req) else judge(req)

    evs = _run_in_a_daemon(tmp_path, names, provider, coder=True)
    assert not [e["data"] for e in evs if e["event"] == "mission:rejected"]
    outcomes = {names[e["missionId"]].where: e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"}
    assert set(outcomes.values()) == {"completed"}, outcomes
