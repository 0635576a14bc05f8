"""The bundled LLM example (examples/llm) runs as shipped: the daemon process, its LLM agent writing the file
through its tools, the three-reviewer panel scoring it, against a local OpenAI-compatible server that stands in
for the provider (only the endpoint and key lines of the example config are changed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.support.daemon import REPO, daemon_process, run_cli, wait_events
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, text, tool_call
from tests.support.judges import ScriptedJudge

HAIKU = "Eight arms, one calm mind\nEach task finds its waiting hand\nThe reef hums, all done\n"


def test_the_bundled_llm_mission_completes_judged(tmp_path: Path) -> None:
    judge = ScriptedJudge(score=4.0)

    def provider(req: RecordedRequest) -> Reply:
        tools = {t["function"]["name"] for t in req.get("tools") or []}
        if "write_file" not in tools:  # a reviewer (its tools are read-only) or the expectation judge
            return judge(req)
        if not any(m.get("role") == "tool" for m in req["messages"]):
            return tool_call("write_file", {"path": "haiku.md", "content": HAIKU})
        return text("I wrote the haiku to haiku.md.")

    example = tmp_path / "llm"
    shutil.copytree(REPO / "examples" / "llm", example)
    with FakeLLM(models=("gpt-4o-mini",)) as srv:
        srv.responder = provider
        cfg = example / "polpo.toml"
        shipped = cfg.read_text()
        assert shipped.count('api_key_env = "OPENAI_API_KEY"') == 2  # the agent and the judge
        cfg.write_text(shipped.replace('api_key_env = "OPENAI_API_KEY"',
                                       f'api_key_env = "EXAMPLE_KEY"\napi_base = "{srv.base_url}"'))
        with daemon_process(cfg, env={"EXAMPLE_KEY": "sk-example"}):
            evs = wait_events(example / ".polpo", lambda es: any(e["event"] == "mission:completed" for e in es), 120)
    done = next(e for e in evs if e["event"] == "mission:completed")
    assert done["missionId"] == "haiku" and done["data"]["outcome"] == "completed"
    assert (example / ".polpo" / "workspaces" / "haiku" / "haiku.md").read_text() == HAIKU
    shown = json.loads(run_cli("show", "haiku:1", "--json", "--config", str(cfg)).stdout)
    reviews = shown["attempts"][0]["assessments"][0]["reviews"]
    assert len(reviews) == 3 and all(r["ok"] for r in reviews)
    assert {s["dimension"] for s in reviews[0]["scores"]} == {"form", "topic"}
