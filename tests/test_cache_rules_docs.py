"""Each documented caching rule pinned with the docs' own examples (issue 15, item 4):
OpenAI's 1,024-token minimum and 128-token increments, and expiry from the calls' times
(5 minutes, refreshed on every hit; one hour with ``ttl: 1h`` markers).

Sources and their quotations are in :mod:`prefixlock.cache.rules`. Token counts use the
default estimate (see tests/test_cachesim.py for the block sizes)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from prefixlock.cache.rules import (
    DEFAULT_TTL,
    ONE_HOUR_TTL_SECONDS,
    OPENAI_INCREMENT,
    OPENAI_MIN_TOKENS,
    rules_for,
)
from prefixlock.cache.simulator import (
    CallCache,
    PerfectBound,
    Simulation,
    _round_down,
    simulate,
)
from prefixlock.core import canonical
from prefixlock.core.errors import PrefixlockError

SONNET = "claude-sonnet-4-5"


def _anthropic(tokens: int, *, ttl: str | None = None) -> bytes:
    """One system block of ``tokens`` estimated tokens, marked, and a short user turn."""
    marker: dict[str, Any] = {"type": "ephemeral"}
    if ttl is not None:
        marker["ttl"] = ttl
    block = {"type": "text", "text": "x" * (4 * tokens - 25), "cache_control": marker}
    body = {
        "model": SONNET,
        "max_tokens": 100,
        "system": [block],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    return canonical.dumpb(body)


def _chat(tokens: int) -> bytes:
    """An OpenAI Chat body whose one message is ``tokens`` estimated tokens."""
    message = {"role": "user", "content": "x" * (4 * tokens - 28)}
    return canonical.dumpb({"model": "gpt-5", "messages": [message]})


def _usage(sim: Simulation) -> list[tuple[int, int]]:
    return [(c.cache_read_tokens, c.cache_write_tokens) for c in sim.calls]


# --- OpenAI: minimum and increments ----------------------------------------------------


def test_openai_minimum_and_increment_are_the_documented_figures() -> None:
    # "Caching is enabled automatically for prompts that are 1024 tokens or longer";
    # hits "in increments of 128 tokens".
    assert (OPENAI_MIN_TOKENS, OPENAI_INCREMENT) == (1024, 128)
    rules = rules_for("openai-chat", "gpt-5")
    assert (rules.min_tokens, rules.increment) == (1024, 128)
    assert rules_for("openai-responses", "gpt-4.1").increment == 128


@pytest.mark.parametrize(
    ("prompt", "cacheable"),
    # The guide's sequence of cached lengths: 1024, 1152, 1280, 1408, ...
    [
        (1023, 0),
        (1024, 1024),
        (1151, 1024),
        (1152, 1152),
        (1280, 1280),
        (1407, 1280),
        (1408, 1408),
        (2000, 1920),
    ],
)
def test_openai_cached_lengths_follow_the_guides_sequence(prompt: int, cacheable: int) -> None:
    assert _round_down(prompt, rules_for("openai-chat", "gpt-5")) == cacheable


def test_openai_prompt_below_the_minimum_is_never_cached() -> None:
    report = simulate("openai-chat", [_chat(1000), _chat(1000)])
    assert [(c.cache_read_tokens, c.cache_write_tokens) for c in report.calls] == [(0, 0)] * 2
    report = simulate("openai-chat", [_chat(1300), _chat(1300)])
    assert [(c.cache_read_tokens, c.cache_write_tokens) for c in report.calls] == [
        (0, 1280),
        (1280, 0),
    ]


# --- expiry from the calls' times -------------------------------------------------------


def test_ttl_figures() -> None:
    assert (DEFAULT_TTL, ONE_HOUR_TTL_SECONDS) == (300.0, 3600.0)


@pytest.mark.parametrize(("gap", "hit"), [(60.0, True), (300.0, True), (301.0, False)])
def test_anthropic_entry_expires_five_minutes_after_its_last_use(gap: float, hit: bool) -> None:
    sim = Simulation("anthropic")
    sim.add(_anthropic(2000), at=0.0)
    sim.add(_anthropic(2000), at=gap)
    assert _usage(sim) == [(0, 2000), (2000, 0) if hit else (0, 2000)]


def test_a_hit_refreshes_the_entry() -> None:
    # "The cache is refreshed for no additional cost each time the cached content is
    # used": three calls four minutes apart all hit, 8 minutes after the write.
    sim = Simulation("anthropic")
    for at in (0.0, 240.0, 480.0):
        sim.add(_anthropic(2000), at=at)
    assert _usage(sim) == [(0, 2000), (2000, 0), (2000, 0)]
    sim.add(_anthropic(2000), at=480.0 + 301.0)  # idle past the TTL: written again
    assert _usage(sim)[-1] == (0, 2000)


@pytest.mark.parametrize(("gap", "hit"), [(3000.0, True), (3600.0, True), (3601.0, False)])
def test_one_hour_markers_live_an_hour(gap: float, hit: bool) -> None:
    sim = Simulation("anthropic")
    sim.add(_anthropic(2000, ttl="1h"), at=0.0)
    sim.add(_anthropic(2000, ttl="1h"), at=gap)
    assert _usage(sim) == [(0, 2000), (2000, 0) if hit else (0, 2000)]
    assert sim.calls[0].write_multiplier == 2


@pytest.mark.parametrize(("gap", "hit"), [(300.0, True), (301.0, False)])
def test_implicit_cache_expires_too(gap: float, hit: bool) -> None:
    sim = Simulation("openai-chat")
    sim.add(_chat(1300), at=0.0)
    sim.add(_chat(1300), at=gap)
    assert _usage(sim) == [(0, 1280), (1280, 0) if hit else (0, 1280)]


def test_a_call_without_a_time_arrives_with_the_previous_one() -> None:
    sim = Simulation("anthropic")
    sim.add(_anthropic(2000), at=0.0)
    sim.add(_anthropic(2000))  # no time: at 0, with the previous call
    sim.add(_anthropic(2000), at=301.0)  # its last use was at 0: expired
    assert _usage(sim) == [(0, 2000), (2000, 0), (0, 2000)]


def test_calls_without_any_time_never_expire() -> None:
    report = simulate("anthropic", [_anthropic(2000)] * 3)
    assert [(c.cache_read_tokens, c.cache_write_tokens) for c in report.calls] == [
        (0, 2000),
        (2000, 0),
        (2000, 0),
    ]


def test_time_going_back_is_refused() -> None:
    sim = Simulation("anthropic")
    sim.add(_anthropic(2000), at=100.0)
    with pytest.raises(PrefixlockError, match="goes back"):
        sim.add(_anthropic(2000), at=50.0)


# --- the perfect-cache bound (issue 15, item 5) -----------------------------------------


def _call(index: int, tokens: int) -> CallCache:
    return CallCache(index, tokens, 0, 0, 1, 0, Fraction("0.1"), Fraction("1.25"))


def test_perfect_bound_writes_each_token_once_and_reads_it_later() -> None:
    bound = PerfectBound()
    bound.add(_call(1, 2000), 0)  # all written
    bound.add(_call(2, 2500), 0)  # 2000 read, 500 written
    bound.add(_call(3, 2500), 0)  # a retry: all read
    bound.add(_call(4, 1000), 1)  # a compaction: starts over
    expected = (
        2000 * Fraction("1.25")
        + 2000 * Fraction("0.1")
        + 500 * Fraction("1.25")
        + 2500 * Fraction("0.1")
        + 1000 * Fraction("1.25")
    )
    assert bound.cost == expected
    assert bound.ratio(expected * 2) == 2.0
    assert PerfectBound().ratio(Fraction(5)) == 1.0
