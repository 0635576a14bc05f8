"""Fix / retry / fail decisions, and the budget they add up to."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from polpo.engine.policy import Budget, Counters, Escalation, Target, decide, escalation_targets, max_runs


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


# ------------------------------------------------------------------------------------------------ escalation

MODEL = Target("model", "strong-model")
AGENT = Target("agent", "senior")


def test_exhausted_retries_escalate_to_the_stronger_model_then_the_fallback_agent() -> None:
    esc = Escalation((MODEL, AGENT))
    d = decide(passed=False, agent_ok=False, counters=Counters(3, 0), budget=Budget(3, 2), escalation=esc)
    assert (d.action, d.counters, d.target) == ("escalate", Counters(3, 0, 1), MODEL)
    d = decide(passed=False, agent_ok=False, counters=d.counters, budget=Budget(3, 2), escalation=esc)
    assert (d.action, d.counters, d.target) == ("escalate", Counters(3, 0, 2), AGENT)
    d = decide(passed=False, agent_ok=False, counters=d.counters, budget=Budget(3, 2), escalation=esc)
    assert d.action == "fail"
    assert "escalation exhausted" in d.reason


def test_escalated_level_still_gets_its_fixes() -> None:
    esc = Escalation((AGENT,))
    d = decide(passed=False, agent_ok=True, counters=Counters(3, 0, 1), budget=Budget(3, 2), escalation=esc)
    assert (d.action, d.counters) == ("fix", Counters(3, 1, 1))


def test_escalate_after_turns_that_retry_into_the_escalation() -> None:
    esc = Escalation((AGENT,), after=2)
    d1 = decide(passed=False, agent_ok=False, counters=Counters(0, 0), budget=Budget(3, 0), escalation=esc)
    assert (d1.action, d1.target) == ("retry", None)
    d2 = decide(passed=False, agent_ok=False, counters=d1.counters, budget=Budget(3, 0), escalation=esc)
    assert (d2.action, d2.counters, d2.target) == ("retry", Counters(2, 0, 1), AGENT)
    d3 = decide(passed=False, agent_ok=False, counters=d2.counters, budget=Budget(3, 0), escalation=esc)
    assert (d3.action, d3.target) == ("retry", None)  # no level left to climb: an ordinary retry


def test_model_target_only_for_llm_agents() -> None:
    assert escalation_targets(escalate_model="m", fallback_agent=None, agent_is_llm=False) == ()
    assert escalation_targets(escalate_model="m", fallback_agent="a", agent_is_llm=True) == (
        Target("model", "m"), Target("agent", "a"))


@given(st.integers(0, 4), st.integers(0, 3), st.sampled_from([(), (MODEL,), (AGENT,), (MODEL, AGENT)]),
       st.one_of(st.none(), st.integers(1, 5)), st.lists(st.booleans(), min_size=1, max_size=50))
def test_escalation_runs_never_exceed_max_runs(max_retries: int, max_fix: int, targets: tuple[Target, ...],
                                               after: int | None, agent_ok_seq: list[bool]) -> None:
    budget, esc = Budget(max_retries, max_fix), Escalation(targets, after)
    counters, runs, seen = Counters(), 0, []
    for agent_ok in agent_ok_seq * 100:
        runs += 1
        d = decide(passed=False, agent_ok=agent_ok, counters=counters, budget=budget, escalation=esc)
        if d.target is not None:
            seen.append(d.target)
        if d.action == "fail":
            break
        counters = d.counters
    else:
        raise AssertionError("never failed")
    assert runs <= max_runs(budget, esc)
    assert seen == list(targets[:len(seen)])  # levels climbed in order, each once
    if after is None:
        assert seen == list(targets)  # every level is tried before failing


def test_max_runs_is_reached_exactly_when_every_run_fails_its_checks() -> None:
    budget, esc = Budget(2, 1), Escalation((MODEL, AGENT))
    counters, runs = Counters(), 0
    while True:
        runs += 1
        d = decide(passed=False, agent_ok=True, counters=counters, budget=budget, escalation=esc)
        if d.action == "fail":
            break
        counters = d.counters
    assert runs == max_runs(budget, esc) == 3 * 2 + 2 * 2
