"""The docs' shell examples (```sh) run as written, so a command that stops working as documented fails CI.

Each block listed in :data:`RUNS` runs through ``bash -e`` in a sandbox laid out like a checkout
(:mod:`tests.support.shell_blocks`): the repository files it names, ``.venv`` linked to this venv, and, where it
talks to a running daemon, the quick start's ``.venv/bin/polpo daemon --config config/polpo.toml`` started there as
a real process. A command that never ends by design (``tail -f``, an event stream) prints, then gets a Ctrl-C; a
server started in the foreground is probed, then gets one. Any other block carries ``<!-- example: not run:
REASON -->`` saying why no test can run it and what covers it instead; a new block with neither fails
:func:`test_every_shell_block_runs_or_says_why_not`.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from polpo.review import score_prompts
from polpo.review.dimensions import Dim, render_rubric
from tests.support.daemon import REPO, wait_events
from tests.support.doc_examples import Block, blocks, parse_blocks
from tests.support.shell_blocks import (
    block_env,
    daemon_in,
    require_free,
    run_block,
    sandbox,
    started_block,
    wait_listening,
    with_ctrl_c,
)

# The blocks run here: (page, how the block starts).
README_WATCH = ("README.md", ".venv/bin/polpo tail -f")
TUTORIAL_SUBMIT = ("docs/tutorial/first-mission.md", ".venv/bin/polpo validate my-mission.json")
TEMPLATE_SUBMIT = ("docs/how-to/missions.md", ".venv/bin/polpo validate templates/bug-fix.workflow.json")
CALIBRATE = ("docs/how-to/calibration.md", ".venv/bin/python scripts/fake_llm_server.py --heuristic")
PROVIDERS_JUDGE = ("docs/how-to/providers.md", ".venv/bin/python scripts/fake_llm_server.py")
TUTORIAL_AGENT = ("docs/tutorial/llm-agent.md", ".venv/bin/python scripts/fake_llm_server.py")
TUTORIAL_JUDGE = ("docs/tutorial/judged-task.md", ".venv/bin/python scripts/fake_llm_server.py")
HTTP_CURL = ("docs/reference/http-api.md", "export POLPO_HTTP_TOKEN=")
QUESTION_SUBMIT = ("docs/how-to/questions.md", ".venv/bin/polpo submit ask.json")
QUESTION_ANSWER = ("docs/how-to/questions.md", ".venv/bin/polpo status")
RUNS = (README_WATCH, TUTORIAL_SUBMIT, TEMPLATE_SUBMIT, CALIBRATE, PROVIDERS_JUDGE, TUTORIAL_AGENT, TUTORIAL_JUDGE,
        HTTP_CURL, QUESTION_SUBMIT, QUESTION_ANSWER)

MODEL_PORT = 8766  # the docs' scripted model server (scripts/fake_llm_server.py)
API_PORT = 8765  # the docs' HTTP API examples
EVENT_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3}\s+[a-z]+:\S+\s", re.M)  # a line of `polpo tail`


def _key(b: Block) -> tuple[str, str]:
    return str(b.file.relative_to(REPO)), b.body


def _matches(b: Block, key: tuple[str, str]) -> bool:
    page, start = _key(b)
    return page == key[0] and start.startswith(key[1])


def block(key: tuple[str, str]) -> Block:
    """The one shell block of page ``key[0]`` whose text starts with ``key[1]``."""
    found = [b for b in blocks("sh") if _matches(b, key)]
    assert len(found) == 1, f"{len(found)} sh blocks of {key[0]} start with {key[1]!r}"
    return found[0]


def neighbour(b: Block, lang: str, *, after: bool) -> Block:
    """The ``lang`` block of ``b``'s page nearest before it (a file the page had you save) or after it."""
    same = [o for o in blocks(lang) if o.file == b.file and (o.line > b.line if after else o.line < b.line)]
    assert same, f"{b.where}: no {lang} block {'after' if after else 'before'} it"
    return same[0] if after else same[-1]


def problems(sh: list[Block], runs: tuple[tuple[str, str], ...]) -> list[str]:
    """What is wrong with the shell blocks' coverage: a block neither run nor marked, a marker without a reason,
    a block both run and marked, an entry of ``runs`` that names no block."""
    out = []
    for b in sh:
        run = any(_matches(b, k) for k in runs)
        if b.not_run is None and not run:
            out.append(f"{b.where}: run it in tests/docs/test_shell_examples.py, or put `<!-- example: not run: "
                       f"REASON -->` on the line before its fence (why it cannot run in a test, what covers it)")
        elif b.not_run == "":
            out.append(f"{b.where}: its not-run marker gives no reason")
        elif b.not_run is not None and run:
            out.append(f"{b.where}: marked not run, yet listed in this module: drop one of the two")
    for k in runs:
        if not any(_matches(b, k) for b in sh):
            out.append(f"no sh block of {k[0]} starts with {k[1]!r} any more: update this module")
    return out


def test_every_shell_block_runs_or_says_why_not() -> None:
    sh = blocks("sh")
    found = problems(sh, RUNS)
    assert not found, "\n".join(found)
    assert len(sh) >= 20 and sum(b.not_run is not None for b in sh) >= 12


def test_a_new_block_with_neither_is_caught() -> None:
    page = REPO / "docs" / "new.md"
    text = ("# New\n\n```sh\necho one\n```\n\n<!-- example: not run: changes the machine; x covers it -->\n```sh\n"
            "echo two\n```\n\n<!-- example: not run:  -->\n```sh\necho three\n```\n\n```sh\necho run\n```\n")
    found = parse_blocks(page, text, "sh")
    assert [b.not_run for b in found] == [None, "changes the machine; x covers it", "", None]
    assert problems(found, (("docs/new.md", "echo run"),)) == [
        "docs/new.md:3: run it in tests/docs/test_shell_examples.py, or put `<!-- example: not run: REASON -->` "
        "on the line before its fence (why it cannot run in a test, what covers it)",
        "docs/new.md:13: its not-run marker gives no reason"]
    assert parse_blocks(page, "<!-- example: skip -->\n```json\n{}\n```\n", "json")[0].skip


# -- blocks that talk to the quick start's daemon ---------------------------------------------------------------

BUNDLED = {p.stem for p in (REPO / "missions").glob("*.json")}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A sandbox with the bundled config, missions and templates, the quick start's daemon running in it (shared
    by the blocks that talk to a running daemon); yields once the bundled missions completed."""
    root = sandbox(tmp_path_factory.mktemp("checkout"), "config", "missions", "templates")
    with daemon_in(root, env=block_env()):
        wait_events(root / ".polpo", lambda es: {e["missionId"] for e in es
                                                 if e["event"] == "mission:completed"} >= BUNDLED, timeout=60)
        yield root


def test_readme_watch_commands_show_the_bundled_missions(checkout: Path) -> None:
    ran = run_block(with_ctrl_c(block(README_WATCH).body, [".venv/bin/polpo tail -f"]), checkout, env=block_env())
    assert ran.status == 0, ran
    assert EVENT_LINE.match(ran.out), f"tail -f printed no event before the Ctrl-C:\n{ran}"
    assert re.search(r"^calculator\s+completed\s+4/4 done", ran.out, re.M), f"status:\n{ran}"
    assert "mission calculator (Calculator): completed" in ran.out, f"show:\n{ran}"


def test_tutorial_mission_is_validated_submitted_and_watched(checkout: Path) -> None:
    b = block(TUTORIAL_SUBMIT)
    (checkout / "my-mission.json").write_text(neighbour(b, "json", after=False).body)  # "Save this as …"
    ran = run_block(b.body, checkout, env=block_env())
    assert ran.status == 0, ran
    assert "my-mission.json: ok (3 task(s))" in ran.out and "missions/my-mission.json\n" in ran.out, ran
    assert "accepted: mission my-mission (3 tasks)" in ran.out, ran  # submit waited for the daemon's verdict
    assert re.search(r"^my-mission\s+(pending|running|completed)\s", ran.out, re.M), f"status:\n{ran}"
    assert "mission my-mission (my-mission): " in ran.out, f"show:\n{ran}"
    assert re.search(EVENT_LINE.pattern + r".*my-mission", ran.out, re.M), f"tail -n 20:\n{ran}"
    evs = wait_events(checkout / ".polpo", lambda es: any(
        e["event"] == "mission:completed" and e["missionId"] == "my-mission" for e in es))
    assert [e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"
            and e["missionId"] == "my-mission"] == ["completed"]


def test_template_is_filled_validated_and_submitted(checkout: Path) -> None:
    ran = run_block(block(TEMPLATE_SUBMIT).body, checkout, env=block_env())
    assert ran.status == 0, ran
    assert "templates/bug-fix.workflow.json: ok (3 task(s))" in ran.out, ran
    assert "missions/bug-fix.json (filled from templates/bug-fix.workflow.json)" in ran.out, ran
    filled = (checkout / "missions" / "bug-fix.json").read_text()
    assert "login returns 500" in filled and '"command": "python -m pytest -q"' in filled, filled
    assert "{{" not in filled


# -- the scripted judge ----------------------------------------------------------------------------------------

MODEL_FILES = ("scripts/fake_llm_server.py", "tests/__init__.py", "tests/support")


def test_calibration_with_the_scripted_judge_prints_the_documented_agreement(tmp_path: Path) -> None:
    b = block(CALIBRATE)
    root = sandbox(tmp_path, *MODEL_FILES, "tests/fixtures/calibration")
    (root / "calibrate.toml").write_text(neighbour(b, "toml", after=True).body)  # "with calibrate.toml holding"
    require_free(MODEL_PORT)
    ran = run_block(b.body, root, env=block_env())  # its judge, started with &, is ended after
    assert ran.status == 0, ran
    claim = re.search(r"It prints ρ ([0-9.]+) and κ ([0-9.]+) for the panel", b.file.read_text())
    assert claim, f"{b.where}: the page no longer says what it prints"
    rho, kappa = claim.groups()
    assert re.search(rf"^panel\s+\d+\s+{re.escape(rho)}\s+{re.escape(kappa)}\s", ran.out, re.M), ran


def _judge_request(model: str) -> dict[str, Any]:
    """A reviewer's first scoring request, as polpo writes it (the scores as JSON text)."""
    dims = [Dim("correctness", 0.5, "It works"), Dim("code_quality", 0.5, "It reads well")]
    user = score_prompts.scoring_user(analysis="correctness: fine (a.py:1). code_quality: fine (a.py:2).",
                                      rubric=render_rubric(dims), dim_names=[d.name for d in dims])
    return {"model": model, "messages": [{"role": "system", "content": score_prompts.SCORING_SYSTEM},
                                         {"role": "user", "content": user}]}


@pytest.mark.parametrize("key", [PROVIDERS_JUDGE, TUTORIAL_JUDGE], ids=["providers", "judged-task"])
def test_the_scripted_judge_serves_where_the_next_config_points(key: tuple[str, str], tmp_path: Path) -> None:
    """The server the block starts answers, at the ``[judge]`` the page's next config block gives, as a judge
    whose reviewers score every dimension 4 (the default, and the tutorial's --score 4)."""
    b = block(key)
    judge = tomllib.loads(neighbour(b, "toml", after=True).body)["judge"]
    root = sandbox(tmp_path, *MODEL_FILES)
    require_free(MODEL_PORT)
    with started_block(b.body, root, env=block_env()) as srv:
        wait_listening(MODEL_PORT, srv.proc, srv.out)
        r = httpx.post(f"{judge['api_base']}/chat/completions", json=_judge_request(judge["model"]),
                       headers={"Authorization": "Bearer anything"}, timeout=30)
    assert r.status_code == 200, r.text
    scores = json.loads(r.json()["choices"][0]["message"]["content"])["scores"]
    assert {s["dimension"] for s in scores} == {"correctness", "code_quality"}
    assert {s["score"] for s in scores} == {4.0}
    assert f"scripted model server on http://127.0.0.1:{MODEL_PORT}/v1" in srv.printed()
    assert srv.proc.returncode == 0, f"it did not stop cleanly on Ctrl-C:\n{srv.printed()}"


def test_the_tutorial_runs_without_a_key(tmp_path: Path) -> None:
    """Steps 2 and 3 as a newcomer without a key does them: the scripted server started as step 2 says, the pages'
    keyless config blocks added to config/polpo.toml, the quick start's daemon, the pages' missions submitted: the
    scripted agent writes fizzbuzz.py and its test passes; the scripted judge scores the greeting and it passes.
    (Step 1 runs in test_tutorial_mission_is_validated_submitted_and_watched, step 4's mission in
    tests/docs/test_docs_examples.py.)"""
    agent, judge = block(TUTORIAL_AGENT), block(TUTORIAL_JUDGE)
    root = sandbox(tmp_path, "config", *MODEL_FILES)
    with open(root / "config" / "polpo.toml", "a") as f:
        for b in (agent, judge):
            f.write("\n" + neighbour(b, "toml", after=True).body)
    (root / "fizzbuzz.json").write_text(neighbour(agent, "json", after=True).body)
    (root / "greeting.json").write_text(neighbour(judge, "json", after=True).body)
    require_free(MODEL_PORT)
    with started_block(agent.body, root, env=block_env()) as srv, daemon_in(root, env=block_env()):
        wait_listening(MODEL_PORT, srv.proc, srv.out)
        ran = run_block(".venv/bin/polpo submit fizzbuzz.json\n.venv/bin/polpo submit greeting.json\n", root,
                        env=block_env())
        assert ran.status == 0, ran
        evs = wait_events(root / ".polpo", lambda es: {e["missionId"] for e in es if e["event"] == "mission:completed"}
                          >= {"fizzbuzz", "greeting"}, timeout=240)  # a bound, not a speed check
    outcomes = {e["missionId"]: e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"}
    assert outcomes == {"fizzbuzz": "completed", "greeting": "completed"}, outcomes
    assert "return \"FizzBuzz\"" in (root / ".polpo" / "workspaces" / "fizzbuzz" / "fizzbuzz.py").read_text()


# -- the HTTP API ----------------------------------------------------------------------------------------------

def _json_values(text: str) -> tuple[list[Any], str]:
    """The JSON documents at the start of ``text`` (curl prints them without a newline) and the rest."""
    dec, values, pos = json.JSONDecoder(), [], 0
    while pos < len(text) and text[pos] in "{[":
        value, pos = dec.raw_decode(text, pos)
        values.append(value)
    return values, text[pos:]


def test_http_api_curl_examples_against_a_daemon_with_a_token(tmp_path: Path) -> None:
    """The token line runs first, the daemon starts with its value (as the comment says), then the curl lines run
    in a shell holding it: the list, the 201 of a submitted mission, and its events on the stream."""
    b = block(HTTP_CURL)
    root = sandbox(tmp_path, "config", "missions")
    with open(root / "config" / "polpo.toml", "a") as f:
        f.write("\n" + neighbour(b, "toml", after=False).body)  # the page's [http] block
    lines = b.body.splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if "before starting the daemon" in line) + 1
    token = run_block("".join(lines[:cut]) + 'printf %s "$POLPO_HTTP_TOKEN"\n', root, env=block_env())
    assert token.status == 0 and re.fullmatch(r"[0-9a-f]{32}", token.out), token
    env = block_env(POLPO_HTTP_TOKEN=token.out)
    require_free(API_PORT)
    with daemon_in(root, env=env) as daemon:
        wait_listening(API_PORT, daemon, root / "daemon.log")
        assert httpx.get(f"http://localhost:{API_PORT}/api/missions").status_code == 401  # the token guards it
        ran = run_block(with_ctrl_c("".join(lines[cut:]), ["curl -sN"]), root, env=env)
    assert ran.status == 0, ran
    (listed, created), stream = _json_values(ran.out)
    assert isinstance(listed["missions"], list), ran
    assert created["missionId"] == "calc" and created["file"].endswith("/missions/calc.json"), ran
    events = [json.loads(line[len("data: "):]) for line in stream.splitlines() if line.startswith("data: ")]
    assert events and {e["missionId"] for e in events} == {"calc"}, ran
    assert events[0]["event"] == "mission:accepted", ran


# -- questions -------------------------------------------------------------------------------------------------

def test_a_command_agents_question_is_asked_shown_and_answered_as_the_page_says(tmp_path: Path) -> None:
    """The page's config block joins the quick start's config, its mission is saved as ask.json; the submit block
    runs, the question is asked; the status-and-answer block shows it and answers it; the task runs again with
    the answer in $POLPO_ANSWER and completes."""
    submit = block(QUESTION_SUBMIT)
    root = sandbox(tmp_path, "config")
    (root / "missions").mkdir()
    with open(root / "config" / "polpo.toml", "a") as f:
        f.write("\n" + neighbour(submit, "toml", after=False).body)  # "In config/polpo.toml"
    (root / "ask.json").write_text(neighbour(submit, "json", after=False).body)  # "Save this as ask.json"
    with daemon_in(root, env=block_env()):
        ran = run_block(submit.body, root, env=block_env())
        assert ran.status == 0 and "accepted: mission ask" in ran.out, ran
        wait_events(root / ".polpo", lambda es: any(e["event"] == "question:asked" for e in es), timeout=60)
        answered = run_block(block(QUESTION_ANSWER).body, root, env=block_env())
        assert answered.status == 0, answered
        assert "ask:1 asks: Which database should I use, PostgreSQL or SQLite?" in answered.out, answered
        assert 'polpo answer ask:1 "…"' in answered.out, answered
        assert "answered ask:1: its agent goes on with the answer" in answered.out, answered
        evs = wait_events(root / ".polpo", lambda es: any(e["event"] == "mission:completed" for e in es),
                          timeout=60)
    assert [e["data"]["outcome"] for e in evs if e["event"] == "mission:completed"] == ["completed"]
    assert (root / ".polpo" / "workspaces" / "ask" / "database.txt").read_text() == "PostgreSQL\n"
    said = next(e["data"] for e in evs if e["event"] == "question:answered")
    assert (said["by"], said["answer"]) == ("you", "PostgreSQL")
