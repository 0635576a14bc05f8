"""How long `polpo daemon` takes to end on SIGTERM: from the signal to its ``orchestrator:shutdown`` event (its own
stop) and to the process's exit (what systemd, a terminal or a test waits for), with only a command agent run and
after an LLM agent ran (litellm is loaded: its modules are many objects for the interpreter's last collection).

Usage: .venv/bin/python scripts/bench_stop.py [--runs 5]
Each run starts a daemon (bench_common.bench_daemon) with a command agent and an LLM agent played by the tests'
scripted model server, runs one task of the kind measured, then sends SIGTERM. Medians are printed, with the load
average before and after. Goal: the exit follows the shutdown event within a second either way.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_common import bench_daemon, median, run_mission, wait_for

from tests.support.fake_llm import FakeLLM, text

LLM_AGENT = """
[agents.coder]
type = "llm"
model = "openai/fake-model"
api_base = "{base_url}"
"""


def one_stop(srv: FakeLLM, agent: str) -> tuple[float, float]:
    """(seconds from SIGTERM to orchestrator:shutdown, to the process's exit) after one task of ``agent``."""
    with bench_daemon(extra=LLM_AGENT.format(base_url=srv.base_url)) as (root, proc):
        run = run_mission(root, proc, "one", {"tasks": [{"title": "one", "description": "say done",
                                                          "assignTo": agent}]}, timeout=600)
        assert run.report["tasks"]["done"] == 1, run.report
        t0 = time.monotonic()
        proc.terminate()
        wait_for(root, lambda e: e["event"] == "orchestrator:shutdown", timeout=120)
        stopped = time.monotonic() - t0
        proc.wait(timeout=120)
        return stopped, time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    with FakeLLM() as srv:
        srv.responder = lambda _req: text("done")
        for agent, what in (("noop", "a command agent ran"), ("coder", "an LLM agent ran (litellm loaded)")):
            stops = [one_stop(srv, agent) for _ in range(args.runs)]
            print(f"{what}: SIGTERM → shutdown event {median([s for s, _ in stops]):.2f} s, "
                  f"→ process exit {median([e for _, e in stops]):.2f} s (median of {args.runs})")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
