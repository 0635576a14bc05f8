"""No web page can drive the API: the cross-site requests that used to run a mission's command are refused by a
real `polpo daemon` process serving the API on 127.0.0.1 without a token, and their commands never run.

The evidence that nothing ran is not the status code alone: each attack's command would write its own marker
file (an absolute path), and after a legitimate mission sent behind the attacks has completed, no marker
exists, no attack was accepted (no ``mission:accepted`` event) and nothing was written to the missions folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.daemon import (
    daemon_process,
    mission_json,
    read_events,
    shell_task,
    wait_events,
    write_config,
)

ALLOWED = "http://ui.example:3000"
EXTRA = f"""
[http]
listen = "127.0.0.1:0"
token_env = "GUARD_TEST_NO_TOKEN"
hosts = ["polpo.example"]
allowed_origins = ["{ALLOWED}"]
"""


class Api:
    def __init__(self, root: Path, url: str) -> None:
        self.root, self.url = root, url
        self.port = int(url.rsplit(":", 1)[1])
        self.state = root / "state"

    def post(self, path: str, body: str | bytes, headers: dict[str, str]) -> httpx.Response:
        return httpx.post(self.url + path, content=body, headers=headers, timeout=30)

    def marker(self, name: str) -> Path:
        return self.root / "markers" / name

    def mission(self, name: str) -> str:
        """A mission whose only command writes the marker ``name`` (the effect an attack wants)."""
        return mission_json(shell_task("x", f"id > {self.marker(name)}"), name=name)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    root = tmp_path_factory.mktemp("guard")
    (root / "markers").mkdir()
    config = write_config(root, extra=EXTRA)
    with daemon_process(config):
        wait_events(root / "state", lambda evs: any(e["event"] == "orchestrator:started" for e in evs))
        yield Api(root, json.loads((root / "state" / "http.json").read_text())["url"])


def accepted(api: Api) -> list[str]:
    return [e["missionId"] for e in read_events(api.state) if e["event"] == "mission:accepted"]


def completed(api: Api, mission: str) -> None:
    wait_events(api.state, lambda evs: any(e["event"] == "mission:completed" and e.get("missionId") == mission
                                           for e in evs))


def test_the_cross_site_requests_are_refused_and_their_commands_never_run(api: Api) -> None:
    evil = {"Origin": "http://evil.example"}
    attacks: list[tuple[str, dict[str, str], int]] = [
        ("pwned-text", {**evil, "Content-Type": "text/plain"}, 403),
        ("pwned-form", {**evil, "Content-Type": "application/x-www-form-urlencoded"}, 403),
        ("pwned-json", {**evil, "Content-Type": "application/json"}, 403),
        ("pwned-rebind", {"Host": f"attacker.example:{api.port}", "Content-Type": "application/json"}, 421),
        ("pwned-plain", {"Content-Type": "text/plain"}, 415),  # no Origin: still not a simple request
        ("pwned-null", {"Origin": "null", "Content-Type": "text/plain"}, 403),  # a sandboxed frame
        ("pwned-nocors", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors",
                          "Content-Type": "application/json"}, 403),
    ]
    for name, headers, status in attacks:
        r = api.post("/api/missions", api.mission(name), headers)
        assert r.status_code == status, (name, r.status_code, r.text)
        problem = r.json()  # RFC 9457: says what happened and what to configure
        assert r.headers["content-type"] == "application/problem+json", name
        assert problem["status"] == status and problem["type"] == "about:blank" and problem["detail"], name
    # a mission sent after them goes through the same intake: once it has completed, any attack would have too
    r = api.post("/api/missions", api.mission("after"), {"Content-Type": "application/json"})
    assert r.status_code == 201, r.text
    completed(api, "after")
    assert api.marker("after").exists()  # the markers do show a command that ran
    assert not [n for n, *_ in attacks if api.marker(n).exists()]
    assert "after" in accepted(api) and not [m for m in accepted(api) if m.startswith("pwned")]
    assert not [p.name for p in (api.root / "missions").iterdir() if p.name.startswith("pwned")]


@pytest.mark.parametrize(("name", "headers"), [
    ("cli", {}),  # curl, the CLI, scripts: no Origin
    ("own", {"Origin": "http://127.0.0.1:{port}"}),  # the web view's own page
    ("own-localhost", {"Origin": "http://localhost:{port}", "Host": "localhost:{port}"}),
    ("allowed", {"Origin": ALLOWED}),
    ("named", {"Host": "polpo.example:{port}", "Origin": "http://polpo.example:{port}"}),  # [http] hosts
])
def test_legitimate_json_posts_still_run(api: Api, name: str, headers: dict[str, str]) -> None:
    sent = {"Content-Type": "application/json; charset=utf-8",
            **{k: v.format(port=api.port) for k, v in headers.items()}}
    r = api.post("/api/missions", api.mission(name), sent)
    assert r.status_code == 201, r.text
    assert r.headers.get("access-control-allow-origin") == (ALLOWED if name == "allowed" else None)
    completed(api, name)
    assert api.marker(name).exists()


def test_commands_need_json_too_and_the_cli_sends_it(api: Api) -> None:
    doc = mission_json(shell_task("wait", f"while [ ! -f {api.marker('go')} ]; do sleep 0.05; done"), name="held")
    assert api.post("/api/missions", doc, {"Content-Type": "application/json"}).status_code == 201
    wait_events(api.state, lambda evs: any(e["event"] == "agent:spawned" and e.get("missionId") == "held"
                                           for e in evs))
    for headers in ({}, {"Content-Type": "text/plain"}, {"Content-Type": "application/json", "Origin": "http://x.example"}):
        assert api.post("/api/missions/held/cancel", b"", headers).status_code in (403, 415), headers
    assert "mission:cancelled" not in [e["event"] for e in read_events(api.state) if e.get("missionId") == "held"]
    from polpo.http.client import call  # what `polpo cancel` sends

    answer = call(api.url, "POST", "/api/missions/held/cancel", "GUARD_TEST_NO_TOKEN")
    assert (answer.status, answer.body["message"]) == (200, "cancelling mission held")
    completed(api, "held")
    assert "mission:cancelled" in [e["event"] for e in read_events(api.state) if e.get("missionId") == "held"]


def test_reads_a_foreign_page_asks_for_are_refused_an_allowed_origin_gets_cors(api: Api) -> None:
    def get(path: str, **headers: Any) -> httpx.Response:
        return httpx.get(api.url + path, headers=headers, timeout=10)

    assert get("/api/missions").status_code == 200
    assert get("/api/missions", Origin="http://evil.example").status_code == 403
    assert get("/api/missions", Host=f"attacker.example:{api.port}").status_code == 421
    assert get("/healthz", Host=f"attacker.example:{api.port}").status_code == 421
    link = get("/", **{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"})
    assert link.status_code == 200  # a link from elsewhere opens the web view…
    assert link.headers["x-frame-options"] == "DENY"  # …which no other page may frame
    framed = get("/", **{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "iframe"})
    assert framed.status_code == 403
    ok = get("/api/missions", Origin=ALLOWED)
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == ALLOWED
    pre = httpx.options(api.url + "/api/missions", timeout=10, headers={
        "Origin": ALLOWED, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"})
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == ALLOWED
    assert "content-type" in pre.headers["access-control-allow-headers"]
    foreign = httpx.options(api.url + "/api/missions", timeout=10, headers={
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers
