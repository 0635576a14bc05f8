"""Each node's model provider: a scripted OpenAI-compatible server (tests/support/fake_llm.py) that plays the
workload's LLM agent, bills every call, and can be faulty.

An LLM task's description names the file its expectation looks for; the model answers a fresh turn with a
``write_file`` tool call for it and the tool's result with "done" — two calls per attempt, each billed
:data:`PROMPT_TOKENS` in and :data:`COMPLETION_TOKENS` out. Every call it answers is *served*: appended to
``served.log`` (time, node, task, tokens) before the reply goes out, the provider's own bill, against which the
spend the store counted is checked (``spend`` invariant).

Faults (``mode``): ``slow`` answers after a few seconds, ``429`` / ``500`` refuses, ``kill`` answers once and
``kill -9`` s the node's daemon right after (a crash with the reply's spend in flight; issue 28's break 4).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.fake_llm import FakeLLM, RecordedRequest, Reply, delay, error, text, tool_call

__all__ = ["COMPLETION_TOKENS", "PROMPT_TOKENS", "Provider", "served"]

PROMPT_TOKENS = 2000
COMPLETION_TOKENS = 500
MARK = re.compile(r"NEMESIS-LLM (\S+) (done-\S+\.txt)")


class Provider:
    def __init__(self, node: str, bill: Path, kill: Callable[[], None]) -> None:
        self.node = node
        self.bill = bill
        self.kill = kill  # kill -9 of the node's daemon
        self.mode = ""  # "" | slow | 429 | 500 | kill
        self._lock = threading.Lock()
        self.server = FakeLLM()
        self.server.responder = self._answer

    def start(self) -> Provider:
        self.server.start()
        return self

    def close(self) -> None:
        self.server.close()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def _answer(self, req: RecordedRequest) -> Reply | None:
        messages: list[dict[str, Any]] = list(req.get("messages") or [])
        found = next((m for msg in messages if (m := MARK.search(str(msg.get("content") or "")))), None)
        if found is None:
            return error(400, {"error": {"message": "not a nemesis task", "type": "invalid_request_error"}})
        task, path = found.group(1), found.group(2)
        with self._lock:
            mode = self.mode
            if mode == "kill":
                self.mode = ""  # once
        if mode in ("429", "500"):
            return error(int(mode))
        usage = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": COMPLETION_TOKENS,
                 "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}
        last = messages[-1] if messages else {}
        reply: Reply = (text("done", usage=usage) if last.get("role") == "tool" else
                        tool_call("write_file", {"path": path, "content": task + "\n"}, usage=usage))
        with self.bill.open("a") as f:  # served: billed whatever becomes of the reply
            f.write(f"served {time.time():.6f} {self.node} {task} {PROMPT_TOKENS + COMPLETION_TOKENS}\n")
        if mode == "kill":
            threading.Timer(0.05, self.kill).start()  # right after the reply is on its way
        return delay(3.0, reply) if mode == "slow" else reply


def served(bill: Path) -> dict[str, int]:
    """Tokens the providers served, per task."""
    out: dict[str, int] = {}
    if bill.exists():
        for line in bill.read_text().splitlines():
            parts = line.split()
            if len(parts) == 5 and parts[0] == "served":
                out[parts[3]] = out.get(parts[3], 0) + int(parts[4])
    return out
