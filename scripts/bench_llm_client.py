"""polpo's own cost per LLMClient.chat() call, with litellm's network call replaced by an instant answer.

Usage: .venv/bin/python scripts/bench_llm_client.py [REPO]   (REPO: a checkout to measure, default this one;
       run it on two checkouts, interleaved, to compare them)
It times 7 rounds of 500 calls (a 6 000-character prompt, max_tokens 512) and prints the median µs per call:
the client's own work (retries, limits, context fitting, failure blame, pricing) without the provider.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anyio

from polpo.llm import client as C


async def main() -> None:
    litellm = await C.load_litellm()
    resp = litellm.ModelResponse(
        choices=[{"message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop", "index": 0}],
        usage={"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}, model="gpt-4o-mini")

    async def instant(**_: Any) -> Any:
        return resp

    litellm.acompletion = instant
    client = C.LLMClient()
    settings = C.ModelSettings(model="openai/fake-model", api_base="http://127.0.0.1:9/v1", api_key_env=None)
    messages = [{"role": "system", "content": "x" * 2000}, {"role": "user", "content": "y" * 4000}]
    rounds = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(500):
            await client.chat(settings, messages, max_tokens=512)
        rounds.append((time.perf_counter() - t) / 500 * 1e6)
    print(f"{C.__file__}: {statistics.median(rounds):.1f} µs per chat() (median of 7 rounds of 500)")


if __name__ == "__main__":
    anyio.run(main)
