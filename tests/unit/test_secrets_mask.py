"""Bearer tokens and ``api_key=`` values are masked in any text, whatever its case or spelling, and text that only
mentions an API is left as it is (the pattern's scan runs only where one of its words is)."""

from __future__ import annotations

import pytest

from polpo.llm.secrets import mask, redact


@pytest.mark.parametrize(("text", "masked"), [
    ("Authorization: Bearer abcdefghijklmnop123", "Authorization: Bearer ***"),
    ("authorization: bearer abcdefghijklmnop123", "authorization: bearer ***"),
    ("url?api_key=ABCDEFGHIJKL1234&x=1", "url?api_key=***&x=1"),
    ("API-KEY: abcdefghijklmnopq", "API-KEY: ***"),
    ("ApiKey=abcdefghijklmnopq", "ApiKey=***"),
    ("apikey:abcdefghijklmnop and more", "apikey:*** and more"),
])
def test_every_spelling_of_a_bearer_token_or_api_key_is_masked(text: str, masked: str) -> None:
    assert mask(text, []) == masked
    assert redact(text) == masked


def test_text_that_only_mentions_apis_is_unchanged() -> None:
    text = "The agent's work went through tools and APIs; its capital letters abcdefghijklmnopqrst stay. " * 50
    assert mask(text, []) == text and redact(text) == text
    assert mask("api key abcdefghijklmnopq", []) == "api key abcdefghijklmnopq"  # not the pattern's form
