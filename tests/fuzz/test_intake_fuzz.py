"""Fuzzing the intake: no file stops the daemon, every verdict can be stored, and `validate` agrees with the daemon.

Two parts, both deterministic (a derandomized hypothesis profile, a seeded corpus) and sized for CI:

* hypothesis drives mutated seeds and generated mission-shaped documents through the check the daemon and
  ``polpo validate`` share: never an internal error, every rejection encodable as an event and safe on a
  terminal, every accepted spec identical after the store's round trip and free of what argv cannot carry;
* a seeded corpus of hostile entries (files and non-files) goes into a running daemon, with valid missions
  between them: the daemon keeps running, each entry gets exactly one outcome, bad files are rejected and left
  byte-identical, the valid missions complete, ``polpo validate`` gives the same verdict on every file, and a
  restart on the same state decides nothing again.

``scripts/fuzz_intake.py`` runs the same generator for longer against a daemon subprocess.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import orjson
import pytest
from hypothesis import HealthCheck, given, settings

from polpo.config import Config, load_config
from polpo.events.catalog import MissionAccepted, MissionRejected, TaskCreated
from polpo.events.pipeline import event_data
from polpo.events.render import render
from polpo.intake.check import INTERNAL_ERROR, cap, check_mission, stored_round_trip
from polpo.mission.loader import format_problems
from tests.support.daemon import (
    EventWaiter,
    mission_json,
    polpo_cmd,
    running_daemon,
    shell_task,
    write_config,
)
from tests.support.fuzz_missions import Entry, entries, mission_files

KNOWN = ["shell"]
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=600, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example])

# agents that run nothing from the file; any HTTP a mutated LLM agent attempts goes to a closed local port
FUZZ_AGENTS = """
[agents.shell]
type = "command"
command = ["true"]
timeout = 10
"""
NO_NETWORK = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
              "ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "127.0.0.1,localhost"}
MAX_BYTES = 1024 * 1024  # smaller than the default, so some fuzzed files are over it
VALID = mission_json(shell_task("ok", "true")).encode()


@FUZZ
@given(mission_files)
def test_every_file_gets_a_verdict_that_can_be_stored_and_shown(raw: bytes) -> None:
    v = check_mission(raw, known_agents=KNOWN, channels=set())
    assert v.reason != INTERNAL_ERROR, v.problems
    if v.spec is None:
        assert v.problems
        shown, more = cap(v.problems)
        data = event_data(MissionRejected(file="/m/f.json", hash="h", reason=str(v.reason),
                                          errors=[{"path": p.path, "message": p.message} for p in shown],
                                          lines=format_problems("/m/f.json", shown), more=more or None))
        line = render({"event": "mission:rejected", "data": orjson.loads(orjson.dumps(data)), "ts": ""})
        assert "\x1b" not in line and "\x00" not in line
        return
    spec = v.spec
    assert stored_round_trip(spec) == spec
    orjson.dumps(event_data(MissionAccepted(name=spec.name or "n", file="f", hash="h", run=1,
                                            task_count=len(spec.tasks), workspace="w", warnings=v.warnings)))
    for t in spec.tasks:
        orjson.dumps(event_data(TaskCreated(title=t.title, agent=t.assign_to or "", depends_on=t.depends_on,
                                            priority=t.priority)))
        for text in (t.title, t.description):
            assert "\x00" not in text
            text.encode("utf-8")


# ------------------------------------------------------------------------------------------ the daemon


def _fuzz_config(root: Path) -> Config:
    path = write_config(root, agents=FUZZ_AGENTS)
    path.write_text(path.read_text().replace("[daemon]\n", f"[daemon]\nmax_mission_bytes = {MAX_BYTES}\n", 1))
    return load_config(path)


def _outcomes(w: EventWaiter, names: set[str]) -> dict[str, list[str]]:
    """Per entry name, its intake events in order (accepted / rejected)."""
    out: dict[str, list[str]] = {}
    for e in w.events:
        if e.event in ("mission:accepted", "mission:rejected"):
            name = Path(str(e.data["file"])).name
            if name in names:
                out.setdefault(name, []).append(e.event.split(":")[1])
    return out


async def _until(cond: object, timeout: float) -> None:
    """A harness wait (polls a condition), not a timing assertion."""
    with anyio.fail_after(timeout):
        while not cond():  # type: ignore[operator]
            await anyio.sleep(0.1)


async def _validate(cfg: Config, files: list[Path]) -> dict[str, bool]:
    """`polpo validate` on every file in one run: name → ok."""
    assert cfg.source is not None
    r = await anyio.run_process([*polpo_cmd("validate", "--config", str(cfg.source)), *map(str, files)],
                                check=False)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode in (0, 1) and "Traceback" not in err, err[-2000:]
    ok = {ln.split(": ok (")[0] for ln in out.splitlines() if ": ok (" in ln}
    return {f.name: str(f) in ok for f in files}


@pytest.mark.anyio
async def test_a_fuzzed_drop_into_a_running_daemon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in NO_NETWORK.items():
        monkeypatch.setenv(k, v)
    cfg = _fuzz_config(tmp_path)
    aside = tmp_path / "aside"
    aside.mkdir()
    corpus: list[Entry] = list(entries(60, seed=20240601, valid=VALID))
    names = {e.name for e in corpus}
    valid_names = {f"valid-{i}.json" for i in range(3)}
    missions = cfg.missions_dir
    async with running_daemon(cfg) as (_, w):
        for i, e in enumerate(corpus):
            e.make(missions, aside)
            if i % 20 == 10:
                Entry(f"valid-{i // 20}.json", "file", "valid", VALID).make(missions, aside)
        before = {e.name: e.snapshot(missions) for e in corpus}
        verdicts = await _validate(cfg, [missions / e.name for e in corpus])
        await _until(lambda: len(_outcomes(w, names | valid_names)) == len(names | valid_names), 120)
        accepted = {Path(str(e.data["file"])).name: e.mission_id for e in w.of("mission:accepted")}
        await _until(lambda: {e.mission_id for e in w.of("mission:completed")} >= set(accepted.values()), 120)
    outcomes = _outcomes(w, names | valid_names)
    assert all(len(v) == 1 for v in outcomes.values()), {k: v for k, v in outcomes.items() if len(v) != 1}
    for name in valid_names:
        assert outcomes[name] == ["accepted"]
        [done] = w.of("mission:completed", mission_id=accepted[name])
        assert done.data["outcome"] == "completed"
    for e in corpus:
        assert e.snapshot(missions) == before[e.name], f"{e.name} ({e.what}) was changed"
        assert verdicts[e.name] == (outcomes[e.name] == ["accepted"]), f"validate and the daemon disagree on {e.what}"
        if e.kind not in ("file", "symlink-to-valid"):
            [rej] = [x for x in w.of("mission:rejected") if str(x.data["file"]).endswith("/" + e.name)]
            assert rej.data["reason"] == "not a regular file", e.what
    reasons = {x.data["reason"] for x in w.of("mission:rejected")}
    assert "internal error" not in reasons
    assert not w.of("task:error")
    assert any(v == ["rejected"] for v in outcomes.values()) and any(v == ["accepted"] for v in outcomes.values())

    # a restart: the scan sees every entry again and decides nothing. The sentinel is cut short, like the
    # slowest-settling entries, and dropped after the scan, so once it is rejected the scan has been handled.
    async with running_daemon(cfg) as (_, w2):
        Entry("zz-sentinel.json", "file", "sentinel", VALID[:10]).make(missions, aside)
        await w2.wait_event("mission:rejected", timeout=60, file=str(missions / "zz-sentinel.json"))
    assert _outcomes(w2, names | valid_names) == {}
    for e in corpus:
        assert e.snapshot(missions) == before[e.name]
