from __future__ import annotations

import pytest

from polpo.events.catalog import ALL_EVENTS
from polpo.events.names import matches


@pytest.mark.parametrize(
    ("name", "pattern", "expected"),
    [
        ("task:transition", "task:*", True),
        ("task:retry:blocked", "task:*", True),
        ("task:retry:blocked", "task:retry", False),
        ("sla:warning", "sla:*", True),
        ("mission:completed", "task:*", False),
        ("quality:gate:failed", "quality:gate:failed", True),
        ("quality:gate:failed", "quality:*:failed", True),
        ("anything:at:all", "*", True),
        ("assessment:check:complete", "assessment:**", True),
    ],
)
def test_matches(name: str, pattern: str, expected: bool) -> None:
    assert matches(name, pattern) is expected


def test_catalog_has_polpo_names_and_ours() -> None:
    for name in (
        "task:transition",
        "mission:completed",
        "assessment:complete",
        "task:maxRetries",
        "mission:accepted",
        "mission:rejected",
    ):
        assert name in ALL_EVENTS
