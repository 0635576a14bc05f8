"""Fix / retry / fail decisions, and the budget they add up to."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from polpo.engine.policy import Budget, Counters, decide, max_runs


def test_pass_is_done() -> None:
    d = decide(passed=True, agent_ok=True, counters=Counters(), budget=Budget(3, 2))
    assert d.action == "done"


def test_failed_checks_after_clean_exit_get_a_fix_first() -> None:
    d = decide(passed=False, agent_ok=True, counters=Counters(0, 0), budget=Budget(3, 2))
    assert (d.action, d.counters) == ("fix", Counters(0, 1))


def test_fixes_used_up_then_full_retry_resets_fixes() -> None:
    d = decide(passed=False, agent_ok=True, counters=Counters(0, 2), budget=Budget(3, 2))
    assert (d.action, d.counters) == ("retry", Counters(1, 0))


def test_agent_failure_goes_straight_to_retry() -> None:
    d = decide(passed=False, agent_ok=False, counters=Counters(0, 0), budget=Budget(3, 2))
    assert (d.action, d.counters) == ("retry", Counters(1, 0))


def test_passing_checks_with_failed_agent_is_not_done() -> None:
    d = decide(passed=True, agent_ok=False, counters=Counters(0, 0), budget=Budget(3, 2))
    assert d.action == "retry"


def test_everything_used_up_fails() -> None:
    d = decide(passed=False, agent_ok=True, counters=Counters(3, 2), budget=Budget(3, 2))
    assert d.action == "fail"
    assert "retries exhausted" in d.reason


def test_side_effects_block_instead_of_rerunning() -> None:
    d = decide(passed=False, agent_ok=True, counters=Counters(), budget=Budget(3, 2), side_effects=True)
    assert d.action == "block"


def test_zero_budget_fails_at_once() -> None:
    assert decide(passed=False, agent_ok=True, counters=Counters(), budget=Budget(0, 0)).action == "fail"


@given(st.integers(0, 6), st.integers(0, 6), st.lists(st.booleans(), min_size=1, max_size=200))
def test_runs_never_exceed_the_budget(max_retries: int, max_fix: int, agent_ok_seq: list[bool]) -> None:
    """Always failing, with any mix of agent failures: at most (R+1)(F+1) runs, and it ends failed."""
    budget = Budget(max_retries, max_fix)
    counters = Counters()
    runs = 0
    for agent_ok in agent_ok_seq * 100:
        runs += 1
        d = decide(passed=False, agent_ok=agent_ok, counters=counters, budget=budget)
        if d.action == "fail":
            break
        assert d.action in ("fix", "retry")
        counters = d.counters
    else:
        raise AssertionError("never failed")
    assert runs <= max_runs(budget)
    assert counters.retries == max_retries


def test_all_fixes_then_all_retries_uses_exactly_the_budget() -> None:
    budget = Budget(3, 2)
    counters, runs = Counters(), 0
    while True:
        runs += 1
        d = decide(passed=False, agent_ok=True, counters=counters, budget=budget)
        if d.action == "fail":
            break
        counters = d.counters
    assert runs == max_runs(budget) == 12
