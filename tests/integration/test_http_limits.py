"""The HTTP server's bounds, against a real daemon process on 127.0.0.1 and raw sockets: a body over the cap is
refused without being buffered (the daemon's RSS says so), slow headers and slow bodies are cut off at their
timeouts, connections and event streams past their caps get 503, and 300 event streams leave no SQLite reader
connection behind (the daemon's own file descriptors say so)."""

from __future__ import annotations

import json
import os
import select
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from polpo.store.readers import FLOOR, SIZE
from tests.support.daemon import daemon_process, mission_files, wait_events, write_config

pytestmark = pytest.mark.slow

MiB = 1024 * 1024
JSON = {"content-type": "application/json"}  # the API takes only JSON bodies (http/guard.py)
HUGE = 100 * MiB


@dataclass
class Served:
    pid: int
    url: str
    port: int
    db: Path

    def host(self) -> bytes:
        return f"127.0.0.1:{self.port}".encode()


@contextmanager
def serving(tmp_path: Path, **http: object) -> Iterator[Served]:
    """A daemon process with ``[http]`` on a free loopback port and these settings."""
    lines = ['listen = "127.0.0.1:0"', 'token_env = "POLPO_TEST_NO_TOKEN"']
    lines += [f"{k} = {json.dumps(v)}" for k, v in http.items()]
    config = write_config(tmp_path, extra="[http]\n" + "\n".join(lines) + "\n")
    state = tmp_path / "state"
    with daemon_process(config) as proc:
        wait_events(state, lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        url = json.loads((state / "http.json").read_text())["url"]
        assert httpx.get(url + "/healthz").status_code == 200
        yield Served(proc.pid, url, int(url.rsplit(":", 1)[1]), state / "polpo.db")
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""  # it survived


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def db_fds(d: Served, suffix: str = "") -> int:
    """The daemon's open file descriptors on its SQLite file (``suffix="-wal"``: on its write-ahead log).

    Each connection that has read holds one on the log, closed with it: the count of open connections. The
    database file's own are a high-water mark: SQLite keeps a closed connection's descriptor (POSIX locks are
    per process, and the writer holds one) and gives it to the next connection it opens.
    """
    path = str(d.db) + suffix
    count = 0
    for fd in Path(f"/proc/{d.pid}/fd").iterdir():
        try:
            count += os.readlink(fd) == path
        except OSError:
            continue  # closed meanwhile
    return count


def connect(d: Served) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", d.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(d: Served, method: str, path: str, *extra: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", f"Host: {d.host().decode()}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_all(sock: socket.socket, wait: float = 15) -> bytes:
    """Everything the server sends until it closes the connection (bounded by ``wait``)."""
    out = b""
    sock.settimeout(wait)
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0


def send_until_answered(sock: socket.socket, chunks: Iterator[bytes]) -> tuple[int, bytes]:
    """Send the chunks, stopping as soon as an answer is readable: (bytes sent, the answer's first bytes)."""
    sent = 0
    for chunk in chunks:
        if select.select([sock], [], [], 0)[0]:
            break
        sock.sendall(chunk)
        sent += len(chunk)
    return sent, read_response(sock)


def read_response(sock: socket.socket) -> bytes:
    """One response with a Content-Length: its head and body."""
    sock.settimeout(30)
    out = b""
    while b"\r\n\r\n" not in out or len(out.partition(b"\r\n\r\n")[2]) < content_length(out):
        chunk = sock.recv(65536)
        assert chunk, out
        out += chunk
    return out


def content_length(response: bytes) -> int:
    for line in response.partition(b"\r\n\r\n")[0].lower().split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def drip(sock: socket.socket, data: bytes, every: float) -> tuple[int, bytes]:
    """Send ``data`` one byte per ``every`` seconds until the server answers or closes: (bytes sent, answer)."""
    for i in range(len(data)):
        readable = select.select([sock], [], [], every)[0]
        if readable:
            return i, read_all(sock)
        try:
            sock.sendall(data[i:i + 1])
        except (BrokenPipeError, ConnectionResetError):
            return i, read_all(sock)
    return len(data), b""


# -- body size ----------------------------------------------------------------------------------------------

def test_a_mission_larger_than_the_intake_takes_is_refused_before_it_is_written(tmp_path: Path) -> None:
    """Under [http] max_body (16 MiB) but over [daemon] max_mission_bytes (4 MiB): 413, naming the setting."""
    doc = {"name": "big", "description": "x" * (5 * MiB), "tasks": [{"title": "t", "description": "true"}]}
    with serving(tmp_path) as d:
        r = httpx.post(d.url + "/api/missions", content=json.dumps(doc).encode(), headers=JSON, timeout=60)
        assert r.status_code == 413, r.text
        assert "[daemon] max_mission_bytes" in r.json()["errors"][0]["message"]
        assert mission_files(tmp_path / "missions") == []


def test_a_100_mb_body_is_refused_without_being_buffered(tmp_path: Path) -> None:
    with serving(tmp_path, max_body=MiB) as d:
        ok = httpx.post(d.url + "/api/missions", content=b"x" * (MiB - 10), headers=JSON)  # under the cap: read and checked
        assert ok.status_code == 422 and ok.json()["errors"][0]["path"] == "$"
        rss = status_kib(d.pid, "VmRSS")
        Path(f"/proc/{d.pid}/clear_refs").write_text("5")  # VmHWM (the peak) starts again from here
        chunk = b"x" * 65536

        def body() -> Iterator[bytes]:
            return (chunk for _ in range(HUGE // len(chunk)))

        for framing in (f"Content-Length: {HUGE}", "Transfer-Encoding: chunked"):
            with connect(d) as sock:
                sock.sendall(head(d, "POST", "/api/missions", "Content-Type: application/json", framing))
                chunked = framing.startswith("Transfer")
                frames = (b"%x\r\n%s\r\n" % (len(c), c) for c in body()) if chunked else body()
                sent, answer = send_until_answered(sock, frames)
            assert status_of(answer) == 413, (framing, answer[:200])
            assert b"[http] max_body" in answer
            assert sent < HUGE // 2, (framing, sent)  # answered long before the client was done
        peak = status_kib(d.pid, "VmHWM")
        assert peak - rss < 20 * 1024, f"peak RSS grew by {(peak - rss) // 1024} MiB"
        assert status_kib(d.pid, "VmRSS") - rss < 20 * 1024
        assert not mission_files(tmp_path / "missions")  # nothing written

        big = httpx.post(d.url + "/api/missions", content=(chunk for _ in range(HUGE // len(chunk))), headers=JSON)
        assert big.status_code == 413  # an ordinary client (sends it all, then reads) gets the answer too


# -- read timeouts ------------------------------------------------------------------------------------------

def test_slow_headers_are_cut_off_at_the_header_timeout(tmp_path: Path) -> None:
    with serving(tmp_path, header_timeout=1) as d:
        request = head(d, "POST", "/api/missions", "Content-Type: application/json", "Content-Length: 2") + b"{}"
        with connect(d) as sock:  # one byte every 0.25 s: the whole head would take ~25 s
            sent, answer = drip(sock, request, every=0.25)
        assert sent < len(request) - 2, "the server waited for the whole head"
        assert status_of(answer) == 408 and b"headers did not arrive within 1 s" in answer, answer

        with connect(d) as sock:  # the same for the next request on a kept-alive connection
            sock.sendall(head(d, "GET", "/healthz"))
            assert status_of(read_response(sock)) == 200
            sent, answer = drip(sock, request, every=0.25)
        assert sent < len(request) - 2 and status_of(answer) == 408, answer

        with connect(d) as idle:  # a connection that says nothing is closed too (without an answer)
            assert read_all(idle) == b""

        with connect(d) as sock:  # a prompt request on a fresh connection is served
            sock.sendall(head(d, "GET", "/healthz", "Connection: close"))
            assert status_of(read_all(sock)) == 200


def test_a_slow_body_is_cut_off_at_the_body_timeout(tmp_path: Path) -> None:
    with serving(tmp_path, body_timeout=1) as d:
        body = b"{" + b" " * 198 + b"}"
        with connect(d) as sock:
            sock.sendall(head(d, "POST", "/api/missions", "Content-Type: application/json",
                              f"Content-Length: {len(body)}"))
            sent, answer = drip(sock, body, every=0.25)  # ~50 s for the whole body
        assert sent < len(body), "the server waited for the whole body"
        assert status_of(answer) == 408 and b"body did not arrive within 1 s" in answer, answer

        with connect(d) as sock:  # the same once refused (413, unread): the rest of the body is not awaited
            sock.sendall(head(d, "POST", "/api/missions", "Content-Type: application/json",
                              f"Content-Length: {HUGE}"))
            sent, answer = drip(sock, body, every=0.25)
            assert status_of(answer) == 413 and answer.count(b"HTTP/1.1") == 1  # then closed, no 408 after it
        assert not mission_files(tmp_path / "missions")


# -- caps ---------------------------------------------------------------------------------------------------

def test_connections_past_max_connections_get_503(tmp_path: Path) -> None:
    with serving(tmp_path, max_connections=4) as d, ExitStack() as held:
        idle = [held.enter_context(connect(d)) for _ in range(4)]
        with connect(d) as sock:
            sock.sendall(head(d, "GET", "/healthz"))
            assert status_of(read_all(sock)) == 503  # answered, then closed
        idle.pop().close()
        for _ in range(100):  # the server notices the closed one within a few rounds
            if httpx.get(d.url + "/healthz").status_code == 200:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("a freed connection slot was never reused")


def test_300_event_streams_then_one_more_and_no_reader_connection_left(tmp_path: Path) -> None:
    with serving(tmp_path, max_stream_clients=300, max_connections=400) as d:
        assert httpx.get(d.url + "/api/missions").status_code == 200  # the reader pool's first connection
        files, connections = db_fds(d), db_fds(d, "-wal")  # the writer's and that one
        most = files
        streams: list[socket.socket] = []
        try:
            for _ in range(300):  # all connect before any is read: 300 stream starts at once for the pool
                sock = connect(d)
                streams.append(sock)
                sock.sendall(head(d, "GET", "/api/events/stream"))
            for sock in streams:
                got = b""
                while b"retry: 2000" not in got:
                    chunk = sock.recv(4096)
                    assert chunk, got
                    got += chunk
                assert status_of(got) == 200
                most = max(most, db_fds(d), db_fds(d, "-wal"))
            with httpx.stream("GET", d.url + "/api/events/stream") as one_more:
                assert one_more.status_code == 503 and one_more.headers["retry-after"]
                assert "[http] max_stream_clients" in json.loads(one_more.read())["detail"]
            assert "polpo_http_stream_clients 300.0" in httpx.get(d.url + "/metrics").text
        finally:
            for sock in streams:
                sock.close()
        assert most <= files + SIZE - FLOOR, (files, most)  # the pool never held more than its size
        for _ in range(300):  # idle connections close after ~IDLE s; the streams' slots as the clients go
            metrics = httpx.get(d.url + "/metrics").text
            if db_fds(d, "-wal") == connections and "polpo_http_stream_clients 0.0" in metrics:
                break
            time.sleep(0.05)
        assert db_fds(d, "-wal") == connections, (connections, db_fds(d, "-wal"))  # down to the floor
        assert db_fds(d) <= files + SIZE - FLOOR
        assert "polpo_http_stream_clients 0.0" in httpx.get(d.url + "/metrics").text
        with httpx.stream("GET", d.url + "/api/events/stream") as again:  # the slots came back
            assert again.status_code == 200
