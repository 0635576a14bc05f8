"""A call's hold on its budgets (polpo.engine.spend_accounts), pure: the settlement replaces the estimate by what
the reply used, and a row read back is counted once — without this node's calls in flight (they are counted
apart), with the usage of those that returned before their settlement is written."""

from __future__ import annotations

from polpo.engine.spend_accounts import Hold, estimate, in_flight, projected, settlement
from polpo.llm.spend import Spend
from polpo.store.tx import Tx


def test_the_estimate_counts_one_call_and_an_unknown_price_as_unknown() -> None:
    assert estimate(100, 50, 0.25) == Spend(100, 50, 0.25, True, 1)
    assert estimate(100, 50, None) == Spend(100, 50, 0.0, False, 1)


def test_the_settlement_adds_the_difference_and_a_failed_call_takes_its_estimate_back() -> None:
    est = estimate(100, 500, 0.5)
    used = Spend()
    used.add(80, 20, 0.1)
    assert settlement(est, used) == Spend(-20, -480, -0.4, True, 0)
    assert settlement(est, Spend()) == Spend(-100, -500, -0.5, True, -1)  # nothing used, no call counted


def test_a_row_read_back_is_counted_once_while_its_calls_are_in_flight_or_settling() -> None:
    flying, settling, written = Hold(estimate(100, 500, None)), Hold(estimate(10, 90, None)), Hold(
        estimate(1, 9, None))
    used = Spend()
    used.add(5, 15, None)
    settling.actual = used
    settling.settled = Tx()  # submitted, not written yet
    written.actual = used
    written.settled = Tx()
    written.settled.finish()
    # stored: 1000 tokens of settled calls (3 of them), plus the three holds' estimates (+3 calls), one settled
    stored = Spend(1000 + 100 + 10 + 5, 500 + 90 + 15, 0.0, True, 6)
    assert projected(stored, [flying, settling, written]) == Spend(1010, 30, 0.0, True, 5)
    assert in_flight([flying, settling, written]) == (0.0, 600)  # only the call not returned yet
    assert not flying.durable and not settling.durable and written.durable
