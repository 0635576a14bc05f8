"""A scripted, local OpenAI-compatible model server: the tutorial without an API key, and acceptance runs.

Usage: .venv/bin/python scripts/fake_llm_server.py [--port 8766] [--score 4] [--scores a=2,b=4,c=5]
       .venv/bin/python scripts/fake_llm_server.py --heuristic [--offsets b=1]
       .venv/bin/python scripts/fake_llm_server.py --down-for 60

It plays two parts, by what it is asked. An LLM agent's turn (a request offering write_file) gets the scripted
agent of the docs' examples: it writes the files the task names that it knows (the tutorial's fizzbuzz.py, the
README's HAIKU.md: tests/support/scripted_agent.py), then says it is done. Every other request is a judge's:
every reviewer scores every dimension with --score; --scores gives a score per model name instead (e.g. with
[judge] models = ["openai/a", "openai/b", "openai/c"]). --heuristic scores what it is shown instead (1 + one per
marker: a ``return``, ``[::-1]``, a docstring, ``->``; --offsets shifts a model's scores), so ``polpo calibrate
tests/fixtures/calibration/labels.jsonl`` prints real agreement numbers. --down-for N answers every request with
HTTP 503 for the first N seconds (an outage). Port 8766: the HTTP API's examples use 8765. Point the config at it
(no key: polpo sends none to an api_base without api_key_env):

    [agents.coder]
    type = "llm"
    model = "openai/fake-coder"
    api_base = "http://127.0.0.1:8766/v1"

    [judge]
    model = "openai/fake-judge"
    api_base = "http://127.0.0.1:8766/v1"
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error
from tests.support.judges import HeuristicJudge, ScriptedJudge
from tests.support.scripted_agent import is_agent_request, scripted_agent

PORT = 8766


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=PORT)
    ap.add_argument("--score", type=float, default=4.0)
    ap.add_argument("--scores", default="", help="per model: name=score,… (model name without provider)")
    ap.add_argument("--heuristic", action="store_true", help="score the work shown (see above)")
    ap.add_argument("--offsets", default="", help="with --heuristic, per model: name=offset,…")
    ap.add_argument("--down-for", type=float, default=0.0, help="answer 503 for this many seconds first")
    args = ap.parse_args()
    per_model = {k.strip(): float(v) for k, v in (p.split("=") for p in args.scores.split(",") if p)}

    def score_for(req: RecordedRequest) -> float:
        return per_model.get(str(req.get("model", "")).split("/")[-1], args.score)

    offsets = {k.strip(): int(v) for k, v in (p.split("=") for p in args.offsets.split(",") if p)}
    judge = HeuristicJudge(offsets=offsets) if args.heuristic else ScriptedJudge(score_for=score_for)
    up_at = time.monotonic() + args.down_for

    def answer(req: RecordedRequest) -> Reply:
        if time.monotonic() < up_at:
            return error(503)
        return scripted_agent(req) if is_agent_request(req) else judge(req)

    srv = FakeLLM(models=("fake-coder", "fake-judge", *per_model, *offsets), port=args.port)
    srv.responder = answer
    srv.start()
    print(f"scripted model server on http://127.0.0.1:{args.port}/v1 (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.close()


if __name__ == "__main__":
    main()
