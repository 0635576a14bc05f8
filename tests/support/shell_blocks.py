"""Run the docs' shell examples as written: their text through bash, in a sandbox folder laid out like a checkout.

A sandbox holds copies of the repository files a block names and ``.venv``, a link to the venv running the tests,
so ``.venv/bin/polpo`` and ``.venv/bin/python`` work as the docs say. Every process a block starts is ended after
it (its own process group), and every wait is bounded.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from tests.support.daemon import REPO, read_events, terminate

CTRL_C = Path(__file__).with_name("ctrl_c.py")


def sandbox(root: Path, *paths: str) -> Path:
    """``root`` with copies of the repository's ``paths`` (files or folders) and ``.venv`` linked to this venv."""
    venv = Path(sys.prefix)
    assert (venv / "bin" / "polpo").exists(), (
        f"{venv}/bin/polpo is missing: run the tests with the venv polpo is installed in (the README's dev install)")
    root.mkdir(parents=True, exist_ok=True)
    (root / ".venv").symlink_to(venv)
    for p in paths:
        src, dst = REPO / p, root / p
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dst)
    return root


def block_env(**extra: str) -> dict[str, str]:
    """The tests' environment without ``POLPO_*`` (a caller's config or token would change what a block does)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("POLPO_")}, **extra}


def with_ctrl_c(script: str, endless: Iterable[str]) -> str:
    """``script`` with each line that starts with one of ``endless`` (a command that never ends by design) run
    under :mod:`tests.support.ctrl_c`: it prints, then gets a Ctrl-C, and the lines after it run."""
    lines = script.splitlines()
    for prefix in endless:
        hits = [i for i, line in enumerate(lines) if line.startswith(prefix)]
        assert hits, f"no line starts with {prefix!r} in:\n{script}"
        for i in hits:
            lines[i] = f"{shlex.quote(sys.executable)} {shlex.quote(str(CTRL_C))} -- {lines[i]}"
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, repr=False)
class Ran:
    """What a block did: its exit status and output; shown whole in a failing assertion."""
    status: int
    out: str
    err: str

    def __repr__(self) -> str:
        return f"exit {self.status}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def end_group(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM, wait: float = 10) -> None:
    """Send ``sig`` to the process group ``proc`` leads (a block's bash and the servers it left running), then
    SIGKILL what is still there after ``wait`` seconds; ``proc`` is reaped."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        proc.poll()  # a leader that ended is a zombie, still in the group, until reaped
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def run_block(script: str, cwd: Path, *, env: dict[str, str], timeout: float = 90) -> Ran:
    """``script`` through ``bash -e`` (a failing command ends it with its status), its output in files (a server
    it starts with ``&`` holds no pipe of ours open); then whatever it left running is ended."""
    out, err = cwd / ".block.out", cwd / ".block.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(["bash", "-e", "-c", script], cwd=cwd, env=env, stdout=o, stderr=e,
                                start_new_session=True)
        try:
            status = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = -1
        finally:
            end_group(proc)
    ran = Ran(status, out.read_text(), err.read_text())
    assert status != -1, f"the block did not end within {timeout} s:\n{ran}"
    return ran


@dataclass
class Running:
    """A block started in the foreground (a server): its process and what it printed so far."""
    proc: subprocess.Popen[bytes]
    out: Path

    def printed(self) -> str:
        return self.out.read_text()


@contextmanager
def started_block(script: str, cwd: Path, *, env: dict[str, str]) -> Iterator[Running]:
    """``script`` through bash in its own process group, left running; on exit a Ctrl-C (SIGINT to the group),
    as a person stops a server started in the foreground, and the process's end awaited (10 s at most)."""
    out = cwd / ".block.out"
    with open(out, "wb") as o:
        proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=o, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        yield Running(proc, out)
    finally:
        end_group(proc, signal.SIGINT)


def require_free(port: int) -> None:
    """Fail at once, saying so, when a program already listens on ``port`` (a docs example uses it)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT does not count
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise AssertionError(f"port {port} on 127.0.0.1 is taken ({e}); the docs' examples use it: stop the "
                                 f"program listening there (`ss -ltnp 'sport = {port}'` names it) and run again"
                                 ) from None


def wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 30) -> None:
    """Wait until something accepts connections on 127.0.0.1:``port`` while ``proc`` runs."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            pass
        if proc.poll() is not None:
            raise AssertionError(f"it ended ({proc.returncode}) before serving on {port}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing served on {port} within {timeout} s:\n{log.read_text()}")
        time.sleep(0.05)


@contextmanager
def daemon_in(folder: Path, *, env: dict[str, str], timeout: float = 60) -> Iterator[subprocess.Popen[bytes]]:
    """``.venv/bin/polpo daemon --config config/polpo.toml`` started in ``folder``, as the quick start starts it;
    yields once it logged ``orchestrator:started`` (state in ``folder/.polpo``), SIGTERM on exit."""
    log = folder / "daemon.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([".venv/bin/polpo", "daemon", "--config", "config/polpo.toml"], cwd=folder,
                                env=env, stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not any(e["event"] == "orchestrator:started" for e in read_events(folder / ".polpo")):
            if proc.poll() is not None:
                raise AssertionError(f"the daemon exited ({proc.returncode}):\n{log.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the daemon did not start within {timeout} s:\n{log.read_text()}")
            time.sleep(0.05)
        yield proc
    finally:
        terminate(proc, 30)
