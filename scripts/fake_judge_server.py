"""A scripted, local OpenAI-compatible judge, to try llm_review without an API key (and for acceptance runs).

Usage: .venv/bin/python scripts/fake_judge_server.py [--port 8765] [--score 4] [--scores a=2,b=4,c=5]
       .venv/bin/python scripts/fake_judge_server.py --heuristic [--offsets b=1]
       .venv/bin/python scripts/fake_judge_server.py --down-for 60

Every reviewer scores every dimension with --score; --scores gives a score per model name instead
(e.g. with [judge] models = ["openai/a", "openai/b", "openai/c"]). --heuristic scores what it is shown instead
(1 + one per marker: a ``return``, ``[::-1]``, a docstring, ``->``; --offsets shifts a model's scores), so
``polpo calibrate tests/fixtures/calibration/labels.jsonl`` prints real agreement numbers. --down-for N answers
every request with HTTP 503 for the first N seconds (a judge outage). Point the config at it:

    [judge]
    model = "openai/fake-judge"
    api_base = "http://127.0.0.1:8765/v1"
    api_key_env = "FAKE_JUDGE_KEY"       # any value; litellm's OpenAI client wants one
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, error
from tests.support.judges import HeuristicJudge, ScriptedJudge


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=8765)
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
        return error(503) if time.monotonic() < up_at else judge(req)

    srv = FakeLLM(models=("fake-judge", *per_model, *offsets), port=args.port)
    srv.responder = answer
    srv.start()
    print(f"fake judge on http://127.0.0.1:{args.port}/v1 (Ctrl-C to stop)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        srv.close()


if __name__ == "__main__":
    main()
