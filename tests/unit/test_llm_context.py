"""Fitting a request to the model's context window: estimates, largest-first trimming, the marker, refusal."""

from __future__ import annotations

from typing import Any

import pytest

from polpo.llm.context import ContextOverflow, estimate_tokens, fit_messages, text_tokens, tools_tokens

TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file " * 20,
                                           "parameters": {"type": "object", "properties": {}}}}]


def convo(*sizes: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful agent."}]
    for i, n in enumerate(sizes):
        msgs.append({"role": "user" if i % 2 == 0 else "tool", "content": f"<{i}>" + "x" * n + f"</{i}>"})
    return msgs


def test_estimates_are_conservative() -> None:
    assert text_tokens("a" * 300) == 100  # three characters per token (real tokenizers: about four)
    assert text_tokens("é" * 300) == 300  # non-ASCII: a token per character
    assert tools_tokens(TOOLS) == tools_tokens(TOOLS) > 100
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "1", "type": "function", "function": {"name": "write_file", "arguments": '{"content": "' + "y" * 900 + '"}'}}]}
    assert estimate_tokens([call]) > 300


def test_a_request_that_fits_is_the_same_list() -> None:
    msgs = convo(100, 200)
    fitted, used = fit_messages(msgs, TOOLS, window=4096, reserve=512)
    assert fitted is msgs and used == estimate_tokens(msgs, TOOLS)


def test_the_largest_pieces_are_trimmed_first_with_a_marker_and_the_result_fits() -> None:
    msgs = convo(30_000, 500, 9_000, 800)
    window, reserve = 4096, 512
    fitted, used = fit_messages(msgs, TOOLS, window, reserve)
    assert estimate_tokens(fitted, TOOLS) <= used <= window - reserve
    sizes = [len(m["content"]) for m in fitted]
    assert fitted[0] is msgs[0] and fitted[2] is msgs[2] and fitted[4] is msgs[4]  # the small ones are untouched
    for big in (1, 3):
        text = fitted[big]["content"]
        assert "characters trimmed to fit the model's context" in text
        assert text.startswith(f"<{big - 1}>") and text.endswith(f"</{big - 1}>")  # head and tail kept
    assert abs(sizes[1] - sizes[3]) < 10  # cut to the same size: the largest first, down to one cut-off
    assert msgs[1]["content"].count("x") == 30_000  # the caller's messages are not changed


def test_the_marker_says_how_much_was_cut() -> None:
    msgs = convo(20_000)
    fitted, _ = fit_messages(msgs, None, window=2048, reserve=256)
    text = fitted[1]["content"]
    kept = len(text) - len(text[text.index("\n[..."):text.index("...]\n") + 5])
    n = int(text.split("[... ")[1].split(" characters")[0].replace(" ", ""))
    assert n == len(msgs[1]["content"]) - kept


def test_a_request_that_cannot_fit_is_refused() -> None:
    big_args = {"role": "assistant", "content": "", "tool_calls": [  # tool-call arguments are never trimmed
        {"id": "1", "type": "function", "function": {"name": "write_file", "arguments": '"' + "y" * 9000 + '"'}}]}
    with pytest.raises(ContextOverflow) as err:
        fit_messages([*convo(5000), big_args], TOOLS, window=2048, reserve=512)
    assert err.value.window == 2048 and err.value.fixed > 2048 - 512
    assert "cannot be trimmed" in str(err.value)


def test_non_ascii_texts_are_counted_by_bytes_and_trimmed_to_fit() -> None:
    assert text_tokens("a" * 297 + "…") == 150  # one ellipsis: two bytes per token, not a token per character
    assert text_tokens("漢" * 100) == 150  # three bytes a character: 1.5 tokens
    mixed = "".join("漢字" if i % 7 == 0 else "ascii text " for i in range(4000))
    msgs: list[dict[str, Any]] = [{"role": "user", "content": mixed}]
    fitted, used = fit_messages(msgs, None, window=2048, reserve=256)
    assert estimate_tokens(fitted) <= used <= 2048 - 256
    assert "characters trimmed to fit the model's context" in fitted[0]["content"]
