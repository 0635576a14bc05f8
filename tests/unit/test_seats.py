"""The seats of a panel (pure): seat 0 is the configured reviewer; later seats get an angle, the evidence in
another order and, when their model would be deterministic, sampling with a seed of their own; ``copies`` says
when the seats were copies of one reviewer anyway."""

from __future__ import annotations

from polpo.llm.client import ModelSettings
from polpo.review.seats import FRAMINGS, SEAT_TEMPERATURE, SeatPlan, copies, plan_seats

ZERO = ModelSettings("openai/qwen", temperature=0)


def test_seat_0_is_the_configured_reviewer_and_later_seats_differ() -> None:
    plans = plan_seats([ZERO] * 3, evidence_items=3)
    assert plans[0] == SeatPlan(0) and plans[0].settings(ZERO) is ZERO
    one, two = plans[1:]
    assert (one.framing, two.framing) == (FRAMINGS[1], FRAMINGS[2]) and one.framing != two.framing
    assert (one.order, two.order) == ((2, 0, 1), (1, 2, 0))  # the items that came last come first
    assert (one.temperature, one.seed, two.temperature, two.seed) == (SEAT_TEMPERATURE, 1001, SEAT_TEMPERATURE, 1002)
    assert one.settings(ZERO) == ModelSettings("openai/qwen", temperature=SEAT_TEMPERATURE, seed=1001)
    assert one.to_json() == {"seat": 1, "framing": FRAMINGS[1], "order": [2, 0, 1], "temperature": 0.7,
                             "seed": 1001}


def test_a_model_left_at_the_providers_default_keeps_it() -> None:
    plans = plan_seats([ModelSettings("openai/qwen")] * 2, evidence_items=0)
    assert (plans[1].temperature, plans[1].seed) == (None, None)  # the provider's default samples already


def test_a_model_that_already_samples_keeps_its_sampling() -> None:
    warm = ModelSettings("openai/qwen", temperature=0.3)
    plans = plan_seats([warm] * 2, evidence_items=2)
    assert (plans[1].temperature, plans[1].seed, plans[1].order) == (None, None, (1, 0))
    assert plans[1].settings(warm) is warm and plans[1].framing


def test_fewer_than_two_evidence_items_are_not_reordered() -> None:
    assert [p.order for p in plan_seats([ZERO] * 3, evidence_items=1)] == [None, None, None]
    assert [p.order for p in plan_seats([ZERO] * 4, evidence_items=3)] == [None, (2, 0, 1), (1, 2, 0), None]


def test_more_seats_than_framings_reuse_them_never_the_empty_one() -> None:
    plans = plan_seats([ZERO] * 9, evidence_items=0)
    assert all(p.framing for p in plans[1:]) and plans[len(FRAMINGS)].framing == FRAMINGS[1]


def test_without_diversity_every_seat_is_the_configured_reviewer() -> None:
    assert plan_seats([ZERO] * 3, evidence_items=3, diversity=False) == [SeatPlan(0), SeatPlan(1), SeatPlan(2)]


def test_copies_are_one_deterministic_model_with_the_same_angle_and_order() -> None:
    same = [ZERO] * 3
    assert copies(same, plan_seats(same, 3, diversity=False))
    assert not copies(same, plan_seats(same, 3))  # diverse seats
    assert not copies([ZERO], plan_seats([ZERO], 3, diversity=False))  # one seat is no panel of copies
    mixed = [ZERO, ModelSettings("openai/llama", temperature=0), ZERO]
    assert not copies(mixed, plan_seats(mixed, 3, diversity=False))  # another model is another opinion
    other_server = [ZERO, ModelSettings("openai/qwen", api_base="http://127.0.0.1:9/v1", temperature=0)]
    assert not copies(other_server, plan_seats(other_server, 0, diversity=False))
    sampled = [ModelSettings("openai/qwen", temperature=0.8)] * 3
    assert not copies(sampled, plan_seats(sampled, 3, diversity=False))  # sampled seats may disagree
    default = [ModelSettings("openai/qwen")] * 3
    assert not copies(default, plan_seats(default, 3, diversity=False))  # the provider's default: unknown
