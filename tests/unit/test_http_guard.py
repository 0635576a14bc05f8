"""The browser guard's policy, request by request (the pure decision; tests/integration/test_http_guard.py sends
the same requests to a real daemon and checks that nothing ran)."""

from __future__ import annotations

from typing import Any

import pytest

from polpo.config import HttpSettings
from polpo.http.guard import GuardPolicy, Seen, decide

PORT = 8765
LOCAL = ("127.0.0.1", PORT)
JSON = "application/json"
POLICY = GuardPolicy.of(HttpSettings(listen=f"127.0.0.1:{PORT}"))
OPEN = GuardPolicy.of(HttpSettings(listen=f"127.0.0.1:{PORT}", hosts=["polpo.example.com", "Box.lan:9000"],
                                   allowed_origins=["https://Ops.example.com:443", "http://localhost:3000"]))
WILD = GuardPolicy.of(HttpSettings(listen="0.0.0.0:0"))
V6 = GuardPolicy.of(HttpSettings(listen="[::1]:0"))


def post(host: str = f"127.0.0.1:{PORT}", ctype: str | None = JSON, **kw: Any) -> Seen:
    return Seen(method="POST", host=host, content_type=ctype, server=kw.pop("server", LOCAL), **kw)


def get(host: str = f"127.0.0.1:{PORT}", **kw: Any) -> Seen:
    return Seen(method="GET", host=host, server=kw.pop("server", LOCAL), **kw)


CASES: list[tuple[str, GuardPolicy, Seen, int]] = [
    # what non-browser clients send: served
    ("curl/CLI JSON post", POLICY, post(), 0),
    ("curl GET", POLICY, get(), 0),
    ("localhost name", POLICY, post(f"localhost:{PORT}"), 0),
    ("upper-case name", POLICY, get(f"LOCALHOST:{PORT}"), 0),
    ("[::1] name", POLICY, get(f"[::1]:{PORT}"), 0),
    ("JSON with charset", POLICY, post(ctype="Application/JSON; charset=utf-8"), 0),
    # Host: DNS rebinding and strays
    ("rebound name", POLICY, post(f"attacker.example:{PORT}"), 421),
    ("rebound name, GET", POLICY, get(f"attacker.example:{PORT}"), 421),
    ("loopback name, other port", POLICY, get("localhost:9999"), 421),
    ("no port means 80", POLICY, get("localhost"), 421),
    ("no Host", POLICY, Seen(method="GET", host=None, server=LOCAL), 421),
    ("malformed Host", POLICY, get(f"127.0.0.1:{PORT}/x"), 421),
    ("user info in Host", POLICY, get(f"a@127.0.0.1:{PORT}"), 421),
    ("configured name, any port", OPEN, post("polpo.example.com"), 0),
    ("configured name and port", OPEN, post("box.lan:9000"), 0),
    ("configured name, other port", OPEN, post("box.lan:9001"), 421),
    ("port 0 listen: the port reached counts", WILD, get("localhost:40001", server=("127.0.0.1", 40001)), 0),
    ("wildcard listen: the address reached", WILD, get("10.1.2.3:40001", server=("10.1.2.3", 40001)), 0),
    ("wildcard listen: its URL's 0.0.0.0", WILD, get("0.0.0.0:40001", server=("127.0.0.1", 40001)), 0),
    ("wildcard listen: another address", WILD, get("10.9.9.9:40001", server=("10.1.2.3", 40001)), 421),
    ("IPv6 listen", V6, get("[::1]:40002", server=("::1", 40002)), 0),
    # Origin
    ("own origin", POLICY, post(origin=f"http://127.0.0.1:{PORT}"), 0),
    ("own origin by another loopback name", POLICY, post(origin=f"http://localhost:{PORT}"), 0),
    ("foreign origin, JSON", POLICY, post(origin="http://evil.example"), 403),
    ("foreign origin, text/plain", POLICY, post(ctype="text/plain", origin="http://evil.example"), 403),
    ("foreign origin, GET", POLICY, get(origin="http://evil.example"), 403),
    ("loopback origin, other port", POLICY, post(origin="http://127.0.0.1:3000"), 403),
    ("null origin", POLICY, post(origin="null"), 403),
    ("origin with a path", POLICY, post(origin=f"http://127.0.0.1:{PORT}/"), 403),
    ("file origin", POLICY, post(origin="file://"), 403),
    ("allowed origin", OPEN, post(origin="https://ops.example.com"), 0),
    ("allowed origin, port written", OPEN, post(origin="http://localhost:3000"), 0),
    ("allowed origin, other scheme", OPEN, post(origin="http://ops.example.com"), 403),
    ("origin of a configured host", OPEN, post("polpo.example.com", origin="https://polpo.example.com"), 0),
    # Sec-Fetch-Site without Origin
    ("cross-site no-cors read", POLICY, get(fetch_site="cross-site", fetch_mode="no-cors", fetch_dest="script"), 403),
    ("cross-site post without Origin", POLICY, post(fetch_site="cross-site", fetch_mode="no-cors"), 403),
    ("same-site fetch", POLICY, get(fetch_site="same-site", fetch_mode="cors"), 403),
    ("cross-site link to the view", POLICY, get(fetch_site="cross-site", fetch_mode="navigate", fetch_dest="document"), 0),
    ("cross-site frame of the view", POLICY, get(fetch_site="cross-site", fetch_mode="navigate", fetch_dest="iframe"), 403),
    ("cross-site navigating post", POLICY, post(fetch_site="cross-site", fetch_mode="navigate", fetch_dest="document"), 403),
    ("same-origin read", POLICY, get(fetch_site="same-origin", fetch_mode="cors"), 0),
    ("typed in", POLICY, get(fetch_site="none", fetch_mode="navigate"), 0),
    # Content-Type of mutating methods
    ("text/plain post", POLICY, post(ctype="text/plain"), 415),
    ("form post", POLICY, post(ctype="application/x-www-form-urlencoded"), 415),
    ("multipart post", POLICY, post(ctype="multipart/form-data; boundary=x"), 415),
    ("no content type", POLICY, post(ctype=None), 415),
    ("JSON-ish type", POLICY, post(ctype="application/json-patch+json"), 415),
    ("DELETE without type", POLICY, Seen(method="DELETE", host=f"127.0.0.1:{PORT}", server=LOCAL), 415),
    ("GET needs no type", POLICY, get(), 0),
    # the checks' order: Host, then Origin, then Content-Type
    ("rebound and foreign and text", POLICY, post(f"evil:{PORT}", ctype="text/plain", origin="http://evil"), 421),
    ("foreign and text", POLICY, post(ctype="text/plain", origin="http://evil"), 403),
    # a preflight: answered for an allowed origin only
    ("allowed preflight", OPEN, Seen(method="OPTIONS", host=f"127.0.0.1:{PORT}", origin="https://ops.example.com",
                                     preflight=True, server=LOCAL), 204),
    ("foreign preflight", POLICY, Seen(method="OPTIONS", host=f"127.0.0.1:{PORT}", origin="http://evil.example",
                                       preflight=True, server=LOCAL), 403),
]


@pytest.mark.parametrize(("name", "policy", "req", "status"), CASES, ids=[c[0] for c in CASES])
def test_the_guard_decides(name: str, policy: GuardPolicy, req: Seen, status: int) -> None:
    assert decide(policy, req).status == status


def test_an_allowed_origin_gets_cors_headers_and_a_refusal_says_what_to_configure() -> None:
    assert decide(OPEN, post(origin="https://ops.example.com")).cors == "https://ops.example.com"
    assert decide(OPEN, post(origin="https://ops.example.com", ctype="text/plain")).cors == "https://ops.example.com"
    assert decide(POLICY, post(origin=f"http://localhost:{PORT}")).cors is None  # its own page needs none
    assert "[http] hosts" in decide(POLICY, post(f"attacker.example:{PORT}")).message
    refused = decide(POLICY, post(origin="http://evil.example:81"))
    assert '"http://evil.example:81" to [http] allowed_origins' in refused.message
    assert "Content-Type: application/json" in decide(POLICY, post(ctype="text/plain")).message


@pytest.mark.parametrize("bad", ["https://x.example/", "ops.example.com", "ftp://x", "https://x:99999", "null",
                                 "https://u@x", "https://x?a"])
def test_an_allowed_origin_must_be_an_origin(bad: str) -> None:
    with pytest.raises(ValueError, match="expected an origin"):
        HttpSettings(allowed_origins=[bad])


@pytest.mark.parametrize("bad", ["http://x", "x/y", "x:port", "", "a b"])
def test_a_host_entry_must_be_a_name(bad: str) -> None:
    with pytest.raises(ValueError, match="expected a host name"):
        HttpSettings(hosts=[bad])


def test_entries_are_kept_as_browsers_write_them() -> None:
    s = HttpSettings(allowed_origins=["HTTPS://Ops.Example.com:443", "http://x:8080"], hosts=["Box.LAN", "[FD00::1]:80"])
    assert s.allowed_origins == ["https://ops.example.com", "http://x:8080"]
    assert s.hosts == ["box.lan", "[fd00::1]:80"]
