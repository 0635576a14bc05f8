"""A node's service manager: starts its daemon, and starts it again ``restart`` seconds after it exits
(``Restart=always``, as the shipped unit's ``Restart=on-failure`` does for a crash), unless the node is held down
(a crashed machine not back yet) or the run is over.

Every life of the daemon is recorded (:class:`Life`): its pid, when it started and ended, its exit status, and
every line it printed with the time it arrived, so the invariants can tell a daemon that exited with a one-line
reason from one that hung half-alive, and when a node had said it was leaving.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["RESTART_DELAY", "Life", "Supervisor", "daemon_argv"]

RESTART_DELAY = 0.5  # seconds by default (the shipped unit waits 5; a plan draws its own)
STOP_WITHIN = 30.0  # seconds a SIGTERM'd daemon has at the end of a run (the unit's TimeoutStopSec)
LEAVING = ("leaving the cluster", "stopping: ")  # at level error: fenced, or no guard could be kept


@dataclass
class Life:
    pid: int
    started: float
    ended: float | None = None
    rc: int | None = None
    lines: list[tuple[float, str]] = field(default_factory=list)
    killed_by: str | None = None  # the harness's action that killed it (kill -9 of the daemon or the node)
    stopped_by_harness: bool = False  # the end of the run (SIGTERM)
    leaving_at: float | None = None  # when it said it was leaving (fenced, or no guard could be kept)

    @property
    def last_line(self) -> str:
        texts = [t for _, t in self.lines if t.strip()]
        return texts[-1] if texts else ""


class Supervisor:
    def __init__(self, name: str, argv: list[str], out: Path, env: dict[str, str] | None = None, *,
                 restart: float = RESTART_DELAY) -> None:
        """``out``: where everything the daemon prints goes; its folder is the daemon's working directory (not
        this process's: ``python -m polpo`` there would import this checkout's polpo, whatever ``argv[0]`` is)."""
        self.name = name
        self.argv = argv
        self.out = out
        self.env = env
        self.restart = restart
        self.lives: list[Life] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.held = False  # a crashed machine: not started again until up()
        self._over = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=f"supervisor-{name}", daemon=True)

    @property
    def life(self) -> Life | None:
        """The current life, if the daemon runs."""
        with self._lock:
            return self.lives[-1] if self.lives and self.lives[-1].ended is None else None

    def start(self) -> None:
        self._thread.start()

    def hold(self) -> None:
        self.held = True

    def up(self) -> None:
        self.held = False

    def _loop(self) -> None:
        while not self._over.is_set():
            if self.held:
                time.sleep(0.05)
                continue
            with self._lock:
                if self._over.is_set():
                    return
                proc = self.proc = subprocess.Popen(_die_with_parent(self.argv), stdout=subprocess.PIPE,
                                                    stderr=subprocess.STDOUT, start_new_session=True, env=self.env,
                                                    cwd=self.out.parent)
                life = Life(proc.pid, time.time())
                self.lives.append(life)
            self._read(proc, life)
            rc = proc.wait()
            life.rc, life.ended = rc, time.time()
            with self._lock:
                self.proc = None
            deadline = time.monotonic() + self.restart
            while time.monotonic() < deadline and not self._over.is_set():
                time.sleep(0.05)

    def _read(self, proc: subprocess.Popen[bytes], life: Life) -> None:
        assert proc.stdout is not None
        with open(self.out, "ab") as out:
            for raw in proc.stdout:
                now = time.time()
                out.write(raw)
                out.flush()
                text = raw.decode(errors="replace").rstrip("\n")
                life.lines.append((now, text))
                if life.leaving_at is None and any(m in text for m in LEAVING) and '"level": "error"' in text:
                    life.leaving_at = now

    def signal(self, sig: int, *, why: str | None = None) -> int | None:
        """Send ``sig`` to the daemon if it runs; its pid, or None."""
        with self._lock:
            life = self.lives[-1] if self.lives and self.lives[-1].ended is None else None
            if life is None:
                return None
            if sig == signal.SIGKILL and why is not None:
                life.killed_by = why
            with contextlib.suppress(ProcessLookupError):
                os.kill(life.pid, sig)
            return life.pid

    def stop(self) -> str | None:
        """The end of the run: SIGTERM, wait :data:`STOP_WITHIN`, then SIGKILL; what went wrong, or None."""
        self._over.set()
        problem = None
        with self._lock:
            proc, life = self.proc, (self.lives[-1] if self.lives else None)
            if proc is not None and life is not None and life.ended is None:
                life.stopped_by_harness = True
                with contextlib.suppress(ProcessLookupError):
                    os.kill(proc.pid, signal.SIGCONT)  # a paused one must be able to stop
                    os.kill(proc.pid, signal.SIGTERM)
        if proc is not None:
            try:
                proc.wait(timeout=STOP_WITHIN)
            except subprocess.TimeoutExpired:
                problem = f"node {self.name}: the daemon (pid {proc.pid}) did not stop within {STOP_WITHIN:g} s of SIGTERM"
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        if self._thread.ident is not None:
            self._thread.join(10)
        return problem


def _die_with_parent(argv: list[str]) -> list[str]:
    """``argv`` under ``setpriv --pdeathsig KILL`` (util-linux) when there is one: the daemon gets SIGKILL when the
    thread that started it ends (the nemesis itself killed), so no daemon outlives a run that could not stop it
    (its guard then kills its agents). The pid stays the daemon's (setpriv execs it)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", *argv] if setpriv else argv


def daemon_argv(config: Path, python: str | None = None) -> list[str]:
    """``polpo daemon`` with ``python``'s polpo (default: this one; another checkout's to try a seed on it)."""
    return [python or sys.executable, "-m", "polpo", "daemon", "--config", str(config)]
