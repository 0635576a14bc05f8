"""A private, throw-away PostgreSQL cluster for tests and benchmarks.

Why this shape: `initdb` and `pg_ctl` refuse to run as root, and CI runs as root, so when we are root every
server-side command runs as an unprivileged user (`postgres` if the machine has it, else `nobody`) through
`subprocess`'s `user=`/`group=` (no PAM session, no shell quoting, unlike `runuser`/`su`). The cluster lives
in its own folder under /tmp (pytest's tmp folders are 0700 root and the server user could not enter them),
listens on a unix socket in that folder and on 127.0.0.1 with trust authentication, and runs without fsync.
A watchdog process, started in its own session, stops the server and removes the folder when the owning
process goes away by any means (even SIGKILL), so an interrupted test run leaves no server behind.

Run as a script it starts a cluster, prints its URL and waits for Ctrl-C (handy for poking at it with psql).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

PG_ROOT = Path("/usr/lib/postgresql")
SUPERUSER = "postgres"
_PORT_TRIES = 5
_SERVER_SETTINGS = {
    # durability is worthless in a throw-away cluster; these make commits and CREATE DATABASE cheap
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "200",
    "shared_buffers": "64MB",
    "log_min_messages": "warning",
    "log_min_error_statement": "panic",
}
_DURABLE = {"synchronous_commit": "on"}
"""For a cluster whose server the test kills (the nemesis): a commit is in the operating system's hands before it is
acknowledged, so a killed postmaster loses none (with ``synchronous_commit = off`` the last ~200 ms of acknowledged
commits went with it, and a node's event log, written after the acknowledgement, was then ahead of its store).
``fsync`` stays off: the operating system itself does not crash in a test."""


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine (the tests that need one are skipped)."""


def find_bindir() -> Path:
    """The bin folder of the newest PostgreSQL: $POLPO_PG_BINDIR, else /usr/lib/postgresql/<newest>/bin."""
    override = os.environ.get("POLPO_PG_BINDIR")
    if override:
        if not (Path(override) / "initdb").is_file():
            raise PostgresUnavailable(f"POLPO_PG_BINDIR={override} has no initdb")
        return Path(override)
    found = [p.parent for p in PG_ROOT.glob("*/bin/initdb") if p.parent.parent.name.isdigit()]
    if not found:
        raise PostgresUnavailable(
            f"no PostgreSQL server binaries ({PG_ROOT}/*/bin/initdb); install Debian's 'postgresql' package"
        )
    return max(found, key=lambda b: int(b.parent.name))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _RunAs:
    """Who runs the server-side commands: ourselves, or an unprivileged user when we are root."""

    uid: int | None = None
    gid: int | None = None
    name: str | None = None

    @classmethod
    def choose(cls) -> _RunAs:
        if os.geteuid() != 0:
            return cls()
        for name in (SUPERUSER, "nobody"):
            with contextlib.suppress(KeyError):
                entry = pwd.getpwnam(name)
                return cls(entry.pw_uid, entry.pw_gid, name)
        raise PostgresUnavailable("running as root and neither a 'postgres' nor a 'nobody' user exists")

    def kwargs(self) -> dict[str, Any]:
        """Popen keyword arguments that drop root (supplementary groups included)."""
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def chown(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)


def _server_env() -> dict[str, str]:
    # a HOME the server user can read (root's is 0700) and a neutral locale; PG* variables would leak into pg_ctl
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.update(HOME="/tmp", LC_ALL="C.UTF-8", LANG="C.UTF-8")
    return env


@dataclass
class PgCluster:
    """One running PostgreSQL server in a private folder; `stop()` (or the watchdog) removes it all."""

    bindir: Path
    base: Path
    port: int
    run_as: _RunAs
    _watchdog: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def sockdir(self) -> Path:
        return self.base

    @property
    def version(self) -> str:
        return (self.datadir / "PG_VERSION").read_text().strip()

    def url(self, dbname: str = SUPERUSER) -> str:
        """A libpq URL over TCP on 127.0.0.1 (what a second daemon on another machine would use)."""
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def socket_url(self, dbname: str = SUPERUSER) -> str:
        """A libpq URL over the unix socket in the cluster folder (asyncpg and psycopg both accept it)."""
        return f"postgresql://{SUPERUSER}@/{dbname}?host={self.sockdir}&port={self.port}"

    def psql(self, sql: str, dbname: str = SUPERUSER) -> str:
        """Run SQL with the cluster's own psql over the unix socket and return its unaligned output."""
        done = subprocess.run(
            [str(self.bindir / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1",
             "-h", str(self.sockdir), "-p", str(self.port), "-U", SUPERUSER, "-d", dbname, "-c", sql],
            capture_output=True, text=True, env=_server_env(), check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def create_database(self, prefix: str = "test") -> str:
        """A new empty database (copied from template0: ~45 ms) and its name."""
        name = f"{prefix}_{next(self._names)}"
        self.psql(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return name

    def drop_database(self, name: str) -> None:
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def password_role(self, role: str, password: str, dbname: str) -> str:
        """A login role that must give ``password`` over TCP (the rest of the cluster stays on trust), owning
        ``dbname``; returns its URL (without the password)."""
        hba = self.datadir / "pg_hba.conf"
        line = f"host all {role} 127.0.0.1/32 scram-sha-256\n"
        text = hba.read_text()
        if line not in text:
            hba.write_text(line + text)  # first match wins: only this role is affected
        self.psql(f"SET password_encryption = 'scram-sha-256'; "
                  f"DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN "
                  f"CREATE ROLE {role} LOGIN; END IF; END$$; "
                  f"ALTER ROLE {role} PASSWORD '{password}'; ALTER DATABASE \"{dbname}\" OWNER TO {role}; "
                  "SELECT pg_reload_conf()")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the reload is asynchronous: wait until TCP asks this role for it
            done = subprocess.run(
                [str(self.bindir / "psql"), "-X", "-w", "-h", "127.0.0.1", "-p", str(self.port), "-U", role,
                 "-d", dbname, "-c", "SELECT 1"], capture_output=True, text=True, env=_server_env(), check=False)
            if done.returncode != 0 and "password" in done.stderr:
                break
            time.sleep(0.02)
        else:
            raise RuntimeError(f"pg_hba.conf reload did not take effect for {role}")
        return f"postgresql://{role}@127.0.0.1:{self.port}/{dbname}"

    def stop_server(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE``, as an operator restarting the database does; the data stays."""
        done = subprocess.run(
            [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.datadir), "-m", mode, "-w", "-t", "60"],
            capture_output=True, text=True, env=_server_env(), check=False, **self.run_as.kwargs())
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl stop failed ({done.returncode}): {done.stderr.strip()}")

    def start_server(self) -> None:
        """``pg_ctl start`` again on the same port and data (after :meth:`stop_server`)."""
        started, text = _pg_ctl_start(self.bindir, self.base, self.port, self.run_as)
        if not started:
            raise RuntimeError(f"PostgreSQL did not start again:\n{text[-4000:]}")

    def stop(self) -> None:
        """Stop the server at once (no checkpoint: nothing here is worth keeping) and delete the folder."""
        _stop_and_remove(self.bindir, self.base, self.run_as)
        if self._watchdog is not None:
            with contextlib.suppress(OSError):
                if self._watchdog.stdin is not None:
                    self._watchdog.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watchdog.wait(timeout=10)
            self._watchdog = None


def _stop_and_remove(bindir: Path, base: Path, run_as: _RunAs) -> None:
    datadir = base / "data"
    if (datadir / "postmaster.pid").exists():
        subprocess.run(
            [str(bindir / "pg_ctl"), "stop", "-D", str(datadir), "-m", "immediate", "-w", "-t", "30"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_server_env(), check=False,
            **run_as.kwargs(),
        )
    shutil.rmtree(base, ignore_errors=True)


def _make_base(run_as: _RunAs) -> Path:
    # /tmp, not $TMPDIR or pytest's tmp_path: the server user has to reach the folder through every parent
    parent = Path(tempfile.gettempdir()) if run_as.uid is None else Path("/tmp")
    base = Path(tempfile.mkdtemp(prefix="polpo-pg-", dir=parent))
    run_as.chown(base)
    return base


def _initdb(bindir: Path, datadir: Path, run_as: _RunAs, durable: bool) -> None:
    done = subprocess.run(
        [str(bindir / "initdb"), "-D", str(datadir), "-U", SUPERUSER, "--auth=trust", "--encoding=UTF8",
         "--locale=C", "--no-sync", "--no-instructions"],
        capture_output=True, text=True, env=_server_env(), check=False, **run_as.kwargs(),
    )
    if done.returncode != 0:
        raise RuntimeError(f"initdb failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    with (datadir / "postgresql.conf").open("a") as conf:
        conf.write("\n# polpo test cluster\n")
        conf.writelines(f"{k} = '{v}'\n" for k, v in (_SERVER_SETTINGS | (_DURABLE if durable else {})).items())


def _pg_ctl_start(bindir: Path, base: Path, port: int, run_as: _RunAs) -> tuple[bool, str]:
    """Start the server on `port`; (started, log text). A taken port is reported, not raised."""
    log = base / "server.log"
    options = f"-k {base} -p {port} -c listen_addresses=127.0.0.1"
    done = subprocess.run(
        [str(bindir / "pg_ctl"), "start", "-D", str(base / "data"), "-l", str(log), "-w", "-t", "60",
         "-o", options],
        capture_output=True, text=True, env=_server_env(), check=False, start_new_session=True,
        **run_as.kwargs(),
    )
    text = log.read_text(errors="replace") if log.exists() else ""
    return done.returncode == 0, text + done.stdout + done.stderr


def _start_watchdog(bindir: Path, base: Path, run_as: _RunAs) -> subprocess.Popen[bytes]:
    """A process that outlives us: when our end of its stdin closes, it stops the server and removes `base`."""
    return subprocess.Popen(
        [sys.executable, "-I", __file__, "--watchdog", str(bindir), str(base), str(run_as.uid or ""),
         str(run_as.gid or "")],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )


def start_cluster(*, durable: bool = False) -> PgCluster:
    """initdb + pg_ctl start on a free port (retried when another process takes the port first); ``durable``: see
    :data:`_DURABLE`."""
    bindir = find_bindir()
    run_as = _RunAs.choose()
    base = _make_base(run_as)
    watchdog = _start_watchdog(bindir, base, run_as)
    cluster = PgCluster(bindir, base, 0, run_as, watchdog)
    try:
        _initdb(bindir, cluster.datadir, run_as, durable)
        log = ""
        for _ in range(_PORT_TRIES):
            cluster.port = _free_port()
            started, log = _pg_ctl_start(bindir, base, cluster.port, run_as)
            if started:
                return cluster
            if not re.search(r"could not (bind|create lock file)|already in use", log, re.IGNORECASE):
                break
        raise RuntimeError(f"PostgreSQL did not start:\n{log[-4000:]}")
    except BaseException:
        cluster.stop()
        raise


@contextlib.contextmanager
def running_cluster(*, durable: bool = False) -> Iterator[PgCluster]:
    """`start_cluster()` as a context manager that always stops and removes the cluster.

    Skips the test when the machine has no PostgreSQL server binaries; in CI (CI=true) that is a failure, since
    .ci/run installs them."""
    try:
        find_bindir()
    except PostgresUnavailable as e:
        import pytest  # here, not at the top: the watchdog runs this file as a script (python -I)

        if os.environ.get("CI"):
            pytest.fail(f"CI must have PostgreSQL: {e}")
        pytest.skip(str(e))
    cluster = start_cluster(durable=durable)
    try:
        yield cluster
    finally:
        cluster.stop()


def _watchdog_main(bindir: str, base: str, uid: str, gid: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for pytest must not skip our clean-up
    stdin: IO[bytes] = sys.stdin.buffer
    while stdin.read(65536):
        pass
    run_as = _RunAs(int(uid), int(gid), "?") if uid else _RunAs()
    _stop_and_remove(Path(bindir), Path(base), run_as)


def _main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--watchdog":
        _watchdog_main(*sys.argv[2:6])
        return
    with running_cluster() as cluster:
        print(cluster.url(), flush=True)
        print(f"folder: {cluster.base}", flush=True)
        print(f"psql: {cluster.bindir / 'psql'} -h {cluster.sockdir} -p {cluster.port} -U {SUPERUSER}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    _main()
