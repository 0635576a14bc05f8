"""An optional extra asked for but not installed stops ``polpo daemon`` in one line, before it says it started.

Each test runs the real command line in a subprocess that cannot import the extra's package
(:mod:`tests.support.hide_modules`), and checks stderr line by line: the message names the setting and the pip
command, there is no traceback, the exit code is 1, and no "watching" line came first.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.daemon import daemon_process, polpo_cmd, run_cli, write_config
from tests.support.hide_modules import hidden_env

pytestmark = pytest.mark.slow

PG = '[store]\nurl = "postgresql://polpo@127.0.0.1:9/polpo"\n'


def _daemon(config: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(polpo_cmd("daemon", "--config", str(config)), capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env})


def test_a_postgres_store_without_the_driver_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=PG)
    r = _daemon(config, hidden_env(tmp_path / "site", "asyncpg"))
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "polpo: [store] url needs the PostgreSQL driver: pip install 'polpo[postgres]'"], r.stderr
    assert not (tmp_path / "state" / "daemon.lock").exists()  # it stopped before it touched the state folder


def test_a_cli_read_of_a_postgres_store_without_the_driver_is_one_line(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra=PG)
    r = run_cli("status", "--config", str(config), env=hidden_env(tmp_path / "site", "asyncpg"))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().endswith("[store] url needs the PostgreSQL driver: pip install 'polpo[postgres]'")


def test_tracing_asked_for_without_opentelemetry_is_one_line_and_exit_1(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    env = {**hidden_env(tmp_path / "site", "opentelemetry"), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    r = _daemon(config, env)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "polpo: tracing (OTEL_* is set) needs OpenTelemetry: pip install 'polpo[otel]'; "
        "or set OTEL_SDK_DISABLED=true to run without traces"], r.stderr


def test_watching_is_printed_only_after_every_start_up_check(tmp_path: Path) -> None:
    """A start-up check that fails late (the API's port is taken) leaves no "watching" line behind."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        config = write_config(tmp_path, extra=f'[http]\nlisten = "127.0.0.1:{port}"\n')
        r = _daemon(config, {})
    finally:
        taken.close()
    assert r.returncode == 1
    assert "cannot listen on" in r.stderr
    assert "watching" not in r.stderr, r.stderr


def test_a_daemon_that_started_says_where_it_watches_once(tmp_path: Path) -> None:
    config = write_config(tmp_path, extra='[http]\nlisten = "127.0.0.1:0"\n')
    with daemon_process(config) as proc:
        assert proc.stderr is not None
        first = ""
        for _ in range(20):  # the console's own line for orchestrator:started may come first (its own thread)
            first = proc.stderr.readline()
            if "watching" in first and not first[:2].isdigit():
                break
        assert first.startswith(f"polpo: watching {tmp_path / 'missions'}"), first
        assert "API and web view at http://127.0.0.1:" in first
        proc.terminate()
        _, rest = proc.communicate(timeout=30)
    assert rest.count("polpo: watching") == 0  # once, not once per check
