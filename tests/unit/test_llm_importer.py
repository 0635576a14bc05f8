"""litellm's import runs in a daemon thread of its own (polpo.llm.importer): a daemon that stops while it
imports (a node fenced right after its start) exits at once, instead of waiting at interpreter exit for the
import, which took tens of seconds on a loaded machine (found by the nemesis: a node said it was leaving and
stayed alive 25–50 s)."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from polpo.llm.importer import _in_daemon_thread

pytestmark = pytest.mark.anyio


async def test_the_work_runs_in_a_daemon_thread_and_its_result_or_error_comes_back() -> None:
    assert await _in_daemon_thread(lambda: threading.current_thread().daemon) is True

    def fails() -> None:
        raise ImportError("no litellm here")

    with pytest.raises(ImportError, match="no litellm here"):
        await _in_daemon_thread(fails)


def test_a_process_that_stops_while_the_work_runs_exits_without_waiting_for_it() -> None:
    code = ("import anyio, time\n"
            "from polpo.llm.importer import _in_daemon_thread\n"
            "async def main():\n"
            "    with anyio.move_on_after(0.2):\n"
            "        await _in_daemon_thread(lambda: time.sleep(600))\n"
            "    print('stopping', flush=True)\n"
            "anyio.run(main, backend='asyncio')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "stopping\n", done.stderr
