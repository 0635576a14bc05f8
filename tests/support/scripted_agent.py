"""The stand-in model of the docs' LLM-agent examples: it writes the files a task names, through write_file.

:data:`ANSWERS` is what it writes for each file the docs' missions name (a new example needs its answer here: the
docs test fails until it has one). ``scripts/fake_llm_server.py`` plays it for a newcomer without a key, and the
docs tests for the README's and the tutorial's missions.
"""

from __future__ import annotations

from typing import Any

from tests.support.fake_llm import Reply, text, tool_calls

__all__ = ["ANSWERS", "is_agent_request", "scripted_agent"]

ANSWERS = {
    "HAIKU.md": "Eight arms, one calm mind\nEach task finds its waiting hand\nThe reef hums, all done\n",
    "fizzbuzz.py": ("def fizzbuzz(n: int) -> str:\n"
                    "    if n % 15 == 0:\n        return \"FizzBuzz\"\n"
                    "    if n % 3 == 0:\n        return \"Fizz\"\n"
                    "    if n % 5 == 0:\n        return \"Buzz\"\n"
                    "    return str(n)\n"),
}


def is_agent_request(req: Any) -> bool:
    """An LLM agent's turn (it offers write_file), not a reviewer's."""
    return "write_file" in {t["function"]["name"] for t in req.get("tools") or []}


def scripted_agent(req: Any) -> Reply:
    """First turn: write every file of :data:`ANSWERS` the task names; after the tools answered: done."""
    if any(m.get("role") == "tool" for m in req["messages"]):
        return text("done")
    task = " ".join(str(m.get("content")) for m in req["messages"] if m.get("role") == "user")
    calls = [("write_file", {"path": f, "content": c}) for f, c in ANSWERS.items() if f in task]
    return tool_calls(calls) if calls else text("I do not know what to write for this task (a scripted model).")
