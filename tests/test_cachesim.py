"""The cache simulator against hand-computed cases.

Token counts use the default estimate, ceil(UTF-8 bytes / 4) of each block's canonical
JSON, so the helpers below build blocks of an exact token size: a text block
``{"text":"<n chars>","type":"text"}`` is n + 25 bytes; a Chat message
``{"content":"<n chars>","role":"user"}`` is n + 28 bytes.
"""

from __future__ import annotations

import importlib.util
from fractions import Fraction
from typing import Any

import pytest
from prefixlock.cache.simulator import LOOKBACK_BLOCKS, rules_for, simulate
from prefixlock.cache.tokens import ByteEstimate, get_tokenizer
from prefixlock.core import canonical
from prefixlock.core.errors import PrefixlockError

SONNET = "claude-sonnet-4-5"
CC = {"type": "ephemeral"}


def text(tokens: int, fill: str = "x", *, marked: bool = False) -> dict[str, Any]:
    """An Anthropic text block of exactly ``tokens`` (>= 7) estimated tokens."""
    block: dict[str, Any] = {"type": "text", "text": fill * (4 * tokens - 25)}
    if marked:
        block["cache_control"] = CC
    return block


def anthropic(system: list[Any], messages: list[Any], *, auto: bool = False) -> bytes:
    body: dict[str, Any] = {"model": SONNET, "max_tokens": 100, "system": system}
    body["messages"] = messages
    if auto:
        body["cache_control"] = CC
    return canonical.dumpb(body)


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def assistant(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def usage(report: Any) -> list[tuple[int, int, int]]:
    return [(c.input_tokens, c.cache_read_tokens, c.cache_write_tokens) for c in report.calls]


# --- tokens -----------------------------------------------------------------------------


def test_estimate_is_utf8_bytes_over_four_rounded_up() -> None:
    estimate = ByteEstimate()
    assert [estimate.count(s) for s in ("", "a", "abcd", "abcde", "é" * 2)] == [0, 1, 1, 2, 1]
    assert get_tokenizer().name == "estimate"
    assert text(7)["text"] and ByteEstimate().count(canonical.dumps(text(7))) == 7


def test_unknown_tokenizer_is_refused() -> None:
    with pytest.raises(PrefixlockError, match=r"unknown tokenizer 'bpe' \(known: estimate"):
        get_tokenizer("bpe")


@pytest.mark.skipif(importlib.util.find_spec("tiktoken") is not None, reason="installed")
def test_tiktoken_missing_is_an_error_not_a_fallback() -> None:
    with pytest.raises(PrefixlockError, match="'tiktoken' is not installed"):
        get_tokenizer("tiktoken")


# --- Anthropic ----------------------------------------------------------------------------


def test_anthropic_breakpoint_prefix_of_2000_tokens_is_read_on_the_next_call() -> None:
    system = [text(2000, "s", marked=True)]
    first = anthropic(system, [user(text(10, "a"))])
    second = anthropic(system, [user(text(10, "a")), assistant(text(10, "b")), user(text(10))])
    report = simulate("anthropic", [first, second])
    assert usage(report) == [(2010, 0, 2000), (2030, 2000, 0)]
    # call 1: 10 uncached + 2000 written at 1.25; call 2: 30 uncached + 2000 read at 0.1
    assert [c.cost for c in report.calls] == [Fraction(2510), Fraction(230)]
    assert report.uncached_cost == 4040
    assert report.cached_share == 2000 / 4040
    assert report.cost_ratio == 2740 / 4040
    assert report.rules.family == SONNET and report.rules.min_tokens == 1024


def test_anthropic_prefix_below_the_minimum_is_not_cached() -> None:
    system = [text(1000, "s", marked=True)]
    bodies = [anthropic(system, [user(text(10))]), anthropic(system, [user(text(10))])]
    assert usage(simulate("anthropic", bodies)) == [(1010, 0, 0), (1010, 0, 0)]


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-3-5-haiku-20241022", 2048),
        ("claude-haiku-4-5", 4096),
        ("claude-opus-4-5", 4096),
        ("claude-opus-4-1", 1024),
    ],
)
def test_anthropic_minimum_depends_on_the_model_family(model: str, minimum: int) -> None:
    assert rules_for("anthropic", model).min_tokens == minimum


def test_automatic_caching_marks_the_last_block_and_moves_with_the_tail() -> None:
    system = [text(2000, "s")]
    first = anthropic(system, [user(text(10, "a"))], auto=True)
    second = anthropic(system, [user(text(10, "a")), assistant(text(20, "b"))], auto=True)
    # call 1 writes 2010 at its last block; call 2 finds that entry one block back.
    assert usage(simulate("anthropic", [first, second])) == [(2010, 0, 2010), (2030, 2010, 20)]


@pytest.mark.parametrize(("appended", "read"), [(LOOKBACK_BLOCKS - 1, 2010), (LOOKBACK_BLOCKS, 0)])
def test_lookback_checks_20_blocks_counting_the_breakpoints_own(appended: int, read: int) -> None:
    """The entry sits ``appended`` blocks before the new breakpoint: found at check
    ``appended + 1``, so at most 19 blocks back (see tests/test_cache_rules_docs.py)."""
    system = [text(2000, "s")]
    first = anthropic(system, [user(text(10, "a"))], auto=True)
    blocks = [text(7, chr(ord("A") + i % 26)) for i in range(appended)]
    second = anthropic(system, [user(text(10, "a")), assistant(*blocks)], auto=True)
    call = simulate("anthropic", [first, second]).calls[1]
    assert (call.cache_read_tokens, call.cache_write_tokens) == (read, 2010 + 7 * appended - read)


def test_a_prefix_break_misses_and_rewrites() -> None:
    first = anthropic([text(2000, "s", marked=True)], [user(text(10))])
    second = anthropic([text(2000, "t", marked=True)], [user(text(10))])
    assert usage(simulate("anthropic", [first, second])) == [(2010, 0, 2000), (2010, 0, 2000)]


def test_cache_markers_are_not_part_of_the_prefix() -> None:
    """The context marker moves between calls; the prefix it leaves behind still hits."""
    first = anthropic([text(2000, "s")], [user(text(10, "c", marked=True))])
    second = anthropic([text(2000, "s")], [user(text(10, "c")), user(text(7, "d", marked=True))])
    assert usage(simulate("anthropic", [first, second])) == [(2010, 0, 2010), (2017, 2010, 7)]


def test_more_than_four_breakpoints_is_an_api_error() -> None:
    system = [text(300, str(i), marked=True) for i in range(5)]
    with pytest.raises(PrefixlockError, match="anthropic call 1: 5 cache breakpoints; the API"):
        simulate("anthropic", [anthropic(system, [user(text(1))])])


# --- Bedrock ------------------------------------------------------------------------------


def bedrock_text(tokens: int, fill: str = "x") -> dict[str, Any]:
    """``{"text":"<n>"}`` is n + 11 bytes."""
    return {"text": fill * (4 * tokens - 11)}


POINT = {"cachePoint": {"type": "default"}}


def test_bedrock_checkpoints_need_the_minimum_since_the_previous_one() -> None:
    def body(*messages: Any) -> bytes:
        return canonical.dumpb(
            {"system": [bedrock_text(1500, "s"), POINT], "messages": list(messages)}
        )

    first = body({"role": "user", "content": [bedrock_text(600, "a"), POINT]})
    second = body(
        {"role": "user", "content": [bedrock_text(600, "a")]},
        {"role": "assistant", "content": [bedrock_text(10, "b"), POINT]},
    )
    report = simulate("bedrock-converse", [first, second], model="anthropic.claude-sonnet-4-5")
    # the message checkpoint ends 600 tokens after the system one (< 1024): not created
    assert usage(report) == [(2100, 0, 1500), (2110, 1500, 0)]
    assert report.rules.min_tokens_per_checkpoint


# --- OpenAI -------------------------------------------------------------------------------


def chat_message(tokens: int, fill: str = "x", role: str = "user") -> dict[str, Any]:
    # {"content":"<n>","role":"user"} is n + 28 bytes (role "developer": n + 33)
    extra = 28 + len(role) - 4
    return {"role": role, "content": fill * (4 * tokens - extra)}


def chat(*messages: dict[str, Any], key: str = "conv") -> bytes:
    return canonical.dumpb(
        {"model": "gpt-4.1", "messages": list(messages), "prompt_cache_key": key}
    )


@pytest.mark.parametrize(
    ("shared", "read"),
    [(1000, 0), (1023, 0), (1024, 1024), (1100, 1024), (1151, 1024), (1152, 1152), (1300, 1280)],
)
def test_openai_reads_the_seen_prefix_from_1024_tokens_in_128_token_steps(
    shared: int, read: int
) -> None:
    first = chat(chat_message(shared, "d", "developer"), chat_message(10, "a"))
    second = chat(chat_message(shared, "d", "developer"), chat_message(10, "b"))
    call = simulate("openai-chat", [first, second]).calls[1]
    assert call.cache_read_tokens == read


def test_openai_writes_are_the_cacheable_rest_at_the_normal_price() -> None:
    first = chat(chat_message(1200, "d", "developer"), chat_message(10, "a"))
    second = chat(chat_message(1200, "d", "developer"), chat_message(10, "a"), chat_message(90))
    report = simulate("openai-chat", [first, second])
    # 1210 -> 1152 cacheable; then 1300 seen up to 1210 -> read 1152, rest 1280 - 1152
    assert usage(report) == [(1210, 0, 1152), (1300, 1152, 128)]
    assert report.rules.read_multiplier == Fraction(1, 4)  # gpt-4.1: cached input 0.25x
    assert report.calls[1].cost == 1300 - 1152 + Fraction(1152, 4)


def test_openai_prompt_cache_key_separates_caches() -> None:
    prompt = (chat_message(1200, "d", "developer"), chat_message(10))
    report = simulate("openai-chat", [chat(*prompt, key="a"), chat(*prompt, key="b")])
    assert [c.cache_read_tokens for c in report.calls] == [0, 0]


@pytest.mark.parametrize(("model", "read"), [("gpt-5", "0.1"), ("gpt-4o", "0.5"), ("o3", "0.25")])
def test_openai_discount_depends_on_the_model_family(model: str, read: str) -> None:
    assert rules_for("openai-responses", model).read_multiplier == Fraction(read)


# --- Gemini -------------------------------------------------------------------------------


def gemini(*texts: str) -> bytes:
    contents = [{"role": "user", "parts": [{"text": t}]} for t in texts]
    return canonical.dumpb({"contents": contents})


@pytest.mark.parametrize(("tokens", "read"), [(2000, 0), (2100, 2100)])
def test_gemini_implicit_cache_has_its_minimum(tokens: int, read: int) -> None:
    # {"text":"<n>"} is n + 11 bytes
    big = "g" * (4 * tokens - 11)
    report = simulate("gemini", [gemini(big), gemini(big, "more")], model="gemini-2.5-pro")
    assert report.calls[1].cache_read_tokens == read
    assert report.rules.min_tokens == 2048 and report.rules.read_multiplier == Fraction(1, 10)


# --- input errors -------------------------------------------------------------------------


def test_unknown_provider_and_non_object_bodies_are_refused() -> None:
    with pytest.raises(PrefixlockError, match="unknown provider 'cohere'"):
        simulate("cohere", [])
    with pytest.raises(PrefixlockError, match="gemini call 1: the body is not a JSON object"):
        simulate("gemini", [b"[]"])
