"""Each documented caching rule pinned with the docs' own examples (issue 15, item 4):
OpenAI's 1,024-token minimum and 128-token increments, expiry from the calls' times
(5 minutes, refreshed on every hit; one hour with ``ttl: 1h`` markers), Anthropic's
20-block lookback (its 30-block example), the minimum tables of Anthropic, Bedrock (its
own) and Gemini, Bedrock's per-checkpoint minimum (its 1,024 / 2,048 example), and
mixed TTLs in one request (Anthropic's A / B / C billing, with its usage example).

Sources and their quotations are in :mod:`prefixlock.cache.rules`. Token counts use the
default estimate (see tests/test_cachesim.py for the block sizes)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from prefixlock import providers as registry
from prefixlock.cache.policy import cached_prefix
from prefixlock.cache.rules import (
    BEDROCK_MIN_TOKENS,
    CLAUDE_MIN_TOKENS,
    DEFAULT_TTL,
    LOOKBACK_BLOCKS,
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
from prefixlock.review.replay import iter_replay, serialize_at
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import call_time

REPO = Path(__file__).resolve().parents[1]

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


def _call(index: int, tokens: int, read: int) -> CallCache:
    return CallCache(
        index, tokens, 0, 0, 1, 0, Fraction("0.1"), Fraction("1.25"), bound_read_tokens=read
    )


def test_perfect_bound_writes_each_token_once_and_reads_it_later() -> None:
    bound = PerfectBound()
    bound.add(_call(1, 2000, 0))  # all written
    bound.add(_call(2, 2500, 2000))  # 2000 read, 500 written
    expected = 2000 * Fraction("1.25") + 2000 * Fraction("0.1") + 500 * Fraction("1.25")
    assert bound.cost == expected
    assert bound.ratio(expected * 2) == 2.0
    assert PerfectBound().ratio(Fraction(5)) == 1.0


def _with_history(system: str, *turns: str) -> bytes:
    messages = [{"role": "user", "content": [{"type": "text", "text": t}]} for t in turns]
    block = {"type": "text", "text": system}
    return canonical.dumpb({"model": SONNET, "system": [block], "messages": messages})


def test_a_perfect_cache_reads_the_longest_prefix_any_earlier_call_sent() -> None:
    # No minimum, no marker, no expiry: a retry reads all, a compaction (a new history
    # after the same instructions) still reads the instructions, a return to an earlier
    # prefix reads it.
    system, a, b, c = "s" * 8000, "a" * 4000, "b" * 4000, "c" * 4000
    sim = Simulation("anthropic")
    calls = [
        sim.add(_with_history(system, a), at=0.0),
        sim.add(_with_history(system, a, b), at=10.0),
        sim.add(_with_history(system, a, b), at=20.0),  # a retry
        sim.add(_with_history(system, c), at=9000.0),  # after a compaction, hours later
        sim.add(_with_history(system, a, b, c), at=9010.0),  # the old history again
    ]
    assert calls[0].bound_read_tokens == 0
    assert calls[1].bound_read_tokens == calls[0].input_tokens  # system + a
    assert calls[2].bound_read_tokens == calls[2].input_tokens
    assert 0 < calls[3].bound_read_tokens < calls[0].input_tokens  # the system, not a
    assert calls[4].bound_read_tokens == calls[1].input_tokens


# --- Anthropic: the lookback window (the docs' 30-block example) -----------------------


def _blocks(count: int, *, changed: int | None = None, marked: tuple[int, ...] = ()) -> bytes:
    """An Anthropic body of ``count`` 300-token message content blocks, numbered from 1
    as in the docs; block ``changed`` edited, breakpoints on the ``marked`` blocks."""
    content: list[dict[str, Any]] = []
    for n in range(1, count + 1):
        fill = "y" if n == changed else "x"
        block: dict[str, Any] = {"type": "text", "text": f"{n:04d}" + fill * (4 * 300 - 29)}
        if n in marked:
            block["cache_control"] = {"type": "ephemeral"}
        content.append(block)
    body = {"model": SONNET, "max_tokens": 100, "messages": [{"role": "user", "content": content}]}
    return canonical.dumpb(body)


def _conversation() -> Simulation:
    """Calls 1..30, call k ending at block k with its breakpoint there (a conversation
    that grew one block per call): an entry at every block from the minimum on."""
    sim = Simulation("anthropic")
    for k in range(1, 31):
        sim.add(_blocks(k, marked=(k,)))
    return sim


@pytest.mark.parametrize(
    ("changed", "marked", "hit"),
    [
        # "If you send block 31 with no changes ...: The system checks block 30 (match!)"
        (None, (30,), 30),
        # "If you modify block 25 ...: 30 -> 29 -> 28... -> 25 (no match) -> 24 (match!)"
        (25, (30,), 24),
        # "If you modify block 5 ...: 30 -> ... -> 11 (check #20). After 20 checks without
        # finding a match, it stops looking."
        (5, (30,), None),
        # "if you had set an explicit cache_control breakpoint on block 5, ... block 5 (no
        # match) -> block 4 (match!)"
        (5, (5, 30), 4),
    ],
)
def test_lookback_follows_the_docs_30_block_example(
    changed: int | None, marked: tuple[int, ...], hit: int | None
) -> None:
    sim = _conversation()
    call = sim.add(_blocks(31, changed=changed, marked=marked))
    assert call.cache_read_tokens == (0 if hit is None else 300 * hit)


def test_the_window_is_20_blocks_including_the_breakpoint() -> None:
    assert LOOKBACK_BLOCKS == 20
    # Block 12 edited: block 11 is check #20 and hits; block 11 edited: block 10 would be
    # check #21.
    for changed, read in ((12, 300 * 11), (11, 0)):
        sim = _conversation()
        assert sim.add(_blocks(31, changed=changed, marked=(30,))).cache_read_tokens == read


# --- minimum cacheable lengths ----------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "minimum"),
    # Anthropic's "Cache limitations" list (rules.CLAUDE_MIN_TOKENS)
    [
        ("claude-opus-5", 512),
        ("claude-fable-5", 512),
        ("claude-mythos-5", 512),
        ("claude-mythos-preview", 2048),
        ("claude-opus-4-7", 2048),
        ("claude-opus-4-6", 4096),
        ("claude-opus-4-5-20251101", 4096),
        ("claude-opus-4-8", 1024),
        ("claude-sonnet-5", 1024),
        # 2026-10-08: "512 tokens for Claude Fable 5.1, Claude Mythos 5.1, Claude Opus 5.5,
        # Claude Opus 5, Claude Sonnet 5.5, Claude Fable 5, Claude Mythos 5, and Claude
        # Haiku 5.5"
        ("claude-sonnet-5-5", 512),
        ("claude-haiku-5-5", 512),
        ("claude-opus-5-5", 512),
        ("claude-fable-5-1", 512),
        ("claude-mythos-5-1", 512),
        ("claude-sonnet-4-6", 1024),
        ("claude-sonnet-4-5-20250929", 1024),
        ("claude-opus-4-1-20250805", 1024),
        ("claude-opus-4-20250514", 1024),
        ("claude-sonnet-4-20250514", 1024),
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-3-5-haiku-20241022", 2048),
    ],
)
def test_anthropic_minimums_are_the_documented_list(model: str, minimum: int) -> None:
    assert CLAUDE_MIN_TOKENS[rules_for("anthropic", model).family] == minimum
    assert rules_for("anthropic", model).min_tokens == minimum


@pytest.mark.parametrize(
    ("model", "minimum"),
    # Bedrock's own table, "Minimum number of tokens per cache checkpoint" (model ids as
    # listed; a cross-region prefix changes nothing)
    [
        ("anthropic.claude-opus-4-8", 1024),
        ("anthropic.claude-opus-4-7", 4096),
        ("anthropic.claude-opus-4-6-v1", 4096),
        ("anthropic.claude-opus-4-5-20251101-v1:0", 4096),
        ("us.anthropic.claude-opus-4-5-20251101-v1:0", 4096),
        ("anthropic.claude-sonnet-5", 1024),
        ("anthropic.claude-sonnet-4-6", 1024),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", 1024),
        ("eu.anthropic.claude-sonnet-4-5-20250929-v1:0", 1024),
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", 1024),
        ("anthropic.claude-3-5-sonnet-20241022-v2:0", 1024),
        ("anthropic.claude-haiku-4-5-20251001-v1:0", 4096),
        ("anthropic.claude-opus-5", 512),
        ("anthropic.claude-fable-5-1", 512),
        ("anthropic.claude-mythos-preview", 4096),
    ],
)
def test_bedrock_minimums_are_bedrocks_own_table(model: str, minimum: int) -> None:
    rules = rules_for("bedrock-converse", model)
    assert rules.min_tokens == BEDROCK_MIN_TOKENS[rules.family] == minimum
    assert rules.min_tokens_per_checkpoint


def test_bedrock_and_anthropic_tables_differ_where_the_docs_do() -> None:
    """Claude Opus 4.7: 4,096 per checkpoint on Bedrock, 2,048 on Anthropic's list."""
    assert rules_for("bedrock-converse", "anthropic.claude-opus-4-7").min_tokens == 4096
    assert rules_for("anthropic", "claude-opus-4-7").min_tokens == 2048


def _bedrock(*sections: tuple[str, int]) -> bytes:
    """A Converse body: (section, tokens) text blocks each followed by a cachePoint;
    ``{"text":"<n>"}`` is n + 11 bytes."""
    body: dict[str, Any] = {"system": [], "messages": [{"role": "user", "content": []}]}
    for i, (section, tokens) in enumerate(sections):
        where = body["system"] if section == "system" else body["messages"][0]["content"]
        where.append({"text": str(i % 10) * (4 * tokens - 11)})
        where.append({"cachePoint": {"type": "default"}})
    return canonical.dumpb(body)


@pytest.mark.parametrize(
    ("second", "written"),
    # "For a model with a 1,024-token minimum, your first cache checkpoint can be defined
    # after 1,024 tokens and your second cache checkpoint can be defined after 2,048
    # tokens."
    [(1024, 2048), (1023, 1024)],
)
def test_bedrock_second_checkpoint_after_2048_tokens(second: int, written: int) -> None:
    body = _bedrock(("system", 1024), ("messages", second))
    [call] = simulate("bedrock-converse", [body], model="anthropic.claude-sonnet-4-5").calls
    assert call.cache_write_tokens == written


def test_bedrock_minimum_counts_across_sections() -> None:
    """ "The minimum cache size is evaluated against the cumulative tokens across all three
    sections combined, not each section individually": a system checkpoint at 600 tokens
    is not created, a message checkpoint 600 tokens later (1,200 in all) is."""
    body = _bedrock(("system", 600), ("messages", 600))
    [call] = simulate("bedrock-converse", [body], model="anthropic.claude-sonnet-4-5").calls
    assert call.cache_write_tokens == 1200


@pytest.mark.parametrize(
    ("model", "minimum"),
    # Gemini's implicit-caching table: "Gemini 4 Argon | 4,096 | Gemini 3.8 Flash | 4,096
    # ... Gemini 3.1 Pro Preview | 4,096 | Gemini 2.5 Flash | 2,048 | Gemini 2.5 Pro |
    # 2,048"
    [
        ("gemini-4-argon", 4096),
        ("models/gemini-3.8-flash", 4096),  # the API's resource name
        ("gemini-3.8-flash", 4096),
        ("gemini-3.1-pro-preview", 4096),
        ("gemini-2.5-flash", 2048),
        ("gemini-2.5-pro", 2048),
    ],
)
def test_gemini_implicit_minimums_are_the_documented_table(model: str, minimum: int) -> None:
    assert rules_for("gemini", model).min_tokens == minimum


@pytest.mark.parametrize(
    ("model", "cached"),
    # "Implicit caching is enabled by default for all Gemini 2.5 and newer models"
    [
        ("gemini-2.0-flash", False),
        ("gemini-1.5-pro-002", False),
        ("models/gemini-2.0-flash", False),
        ("gemini-2.5-flash", True),
        ("gemini-3.8-flash", False),  # about 3,000 tokens: under its 4,096 minimum
    ],
)
def test_gemini_models_before_2_5_have_no_implicit_cache(model: str, cached: bool) -> None:
    body = canonical.dumpb(
        {"contents": [{"role": "user", "parts": [{"text": "x" * (4 * 3000 - 38)}]}]}
    )
    sim = Simulation("gemini", model=model)
    first = sim.add(body)
    again = sim.add(body)
    assert 2048 < first.input_tokens == again.input_tokens < 4096
    assert (first.cache_read_tokens, again.cache_read_tokens) == (
        0,
        again.input_tokens if cached else 0,
    )
    if not cached:
        assert again.cache_write_tokens == 0 and again.cost == again.input_tokens


# --- OpenAI: by model generation and retention (the current guide's model table) -------


def _chat_model(tokens: int, model: str, **extra: str) -> bytes:
    message = {"role": "user", "content": "x" * (4 * tokens - 28)}
    return canonical.dumpb({"model": model, "messages": [message], **extra})


def _chat_breakpoints(tokens: int, ttl: str | None) -> bytes:
    """A gpt-5.6-sol Chat body: a developer message of ``tokens`` tokens ending in an
    explicit breakpoint (with ``ttl``, else the request's), then a user message."""
    marker = {"mode": "explicit", **({"ttl": ttl} if ttl else {})}
    part = {"type": "text", "text": "x" * (4 * tokens), "prompt_cache_breakpoint": marker}
    messages = [
        {"role": "developer", "content": [part]},
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
    ]
    return canonical.dumpb({"model": "gpt-5.6-sol", "messages": messages})


@pytest.mark.parametrize(
    ("model", "increment", "write"),
    # "Cached-token reporting | Exact eligible boundary ... | ... rounds down to a
    # multiple of 128"; "For GPT-5.6 and later, cache writes cost 1.25x"
    [("gpt-5.6-sol", 1, "1.25"), ("gpt-6", 1, "1.25"), ("gpt-5.5", 128, "1"), ("gpt-5", 128, "1")],
)
def test_openai_reporting_boundary_and_write_price_by_generation(
    model: str, increment: int, write: str
) -> None:
    rules = rules_for("openai-responses", model)
    assert (rules.increment, rules.write_multiplier, rules.min_tokens) == (
        increment,
        Fraction(write),
        1024,
    )
    sim = Simulation("openai-chat")
    sim.add(_chat_model(1300, model))
    assert sim.add(_chat_model(1300, model)).cache_read_tokens == (1300 if increment == 1 else 1280)


@pytest.mark.parametrize(
    ("model", "extra", "gap", "hit"),
    [
        # GPT-5.6 and later: "eligible for reuse for 30 minutes after its most recent
        # write or reuse"
        ("gpt-5.6-sol", {}, 29 * 60.0, True),
        ("gpt-5.6-sol", {}, 31 * 60.0, False),
        # earlier models, "in_memory: ... around 5 to 10 minutes of inactivity"
        ("gpt-5", {"prompt_cache_retention": "in_memory"}, 6 * 60.0, False),
        # "24h: Extended retention typically keeps entries available for around 30 minutes"
        ("gpt-5", {"prompt_cache_retention": "24h"}, 29 * 60.0, True),
        ("gpt-5", {"prompt_cache_retention": "24h"}, 31 * 60.0, False),
        # no retention in the body: the org's default is not visible; in_memory's 5 minutes
        ("gpt-5", {}, 6 * 60.0, False),
        ("gpt-4.1", {}, 4 * 60.0, True),
        # "For `gpt-5.5`, `gpt-5.5-pro`, and future models, only `24h` is supported": its
        # 30 minutes whatever the body says
        ("gpt-5.5", {}, 29 * 60.0, True),
        ("gpt-5.5-pro", {}, 29 * 60.0, True),
        # extended retention is for the guide's list alone (gpt-5.x, gpt-4.1): another
        # model's entries live in memory whatever the body asks
        ("gpt-4.1", {"prompt_cache_retention": "24h"}, 29 * 60.0, True),
        ("gpt-5.2", {"prompt_cache_retention": "24h"}, 29 * 60.0, True),
        ("gpt-4o", {"prompt_cache_retention": "24h"}, 20 * 60.0, False),
        ("o3-mini", {"prompt_cache_retention": "24h"}, 20 * 60.0, False),
        ("gpt-4o", {"prompt_cache_retention": "24h"}, 4 * 60.0, True),
        ("gpt-5.5", {}, 31 * 60.0, False),
    ],
)
def test_openai_lifetime_by_generation_and_retention(
    model: str, extra: dict[str, str], gap: float, hit: bool
) -> None:
    sim = Simulation("openai-chat")
    sim.add(_chat_model(2000, model, **extra), at=0.0)
    assert (sim.add(_chat_model(2000, model, **extra), at=gap).cache_read_tokens > 0) is hit


@pytest.mark.parametrize(
    ("body", "lifetime"),
    [
        (_anthropic(2000), DEFAULT_TTL),
        (_anthropic(2000, ttl="1h"), ONE_HOUR_TTL_SECONDS),
        (_chat_model(2000, "gpt-5", prompt_cache_retention="24h"), 1800.0),
        (_chat_model(2000, "gpt-5", prompt_cache_retention="in_memory"), 300.0),
        (_chat_model(2000, "gpt-5.6-sol"), 1800.0),
        (_chat_model(2000, "gpt-5.5"), 1800.0),
        # GPT-5.6 breakpoints: a 12h one keeps its entry 12 hours (the tail's implicit
        # entry still lives the request's 30 minutes); one without a ttl, 30 minutes
        (_chat_breakpoints(2000, "12h"), 43200.0),
        (_chat_breakpoints(2000, None), 1800.0),
    ],
)
def test_each_call_carries_the_lifetime_of_its_entries(body: bytes, lifetime: float) -> None:
    provider = "anthropic" if b'"system"' in body else "openai-chat"
    assert Simulation(provider).add(body, at=0.0).lifetime == lifetime


@pytest.mark.parametrize(
    ("body", "short"),
    [
        (_anthropic(2000), DEFAULT_TTL),
        (_anthropic(2000, ttl="1h"), DEFAULT_TTL),
        (_chat_model(2000, "gpt-5", prompt_cache_retention="24h"), 1800.0),
        (_chat_breakpoints(2000, "12h"), 1800.0),
        (_chat_breakpoints(2000, None), 1800.0),
    ],
)
def test_the_keep_alive_ttl_is_that_of_the_shorter_lived_entries(body: bytes, short: float) -> None:
    """What a keep-alive refreshes lives the shorter TTL: a 12h GPT-5.6 breakpoint does not
    make the tail's 30-minute entry last longer (cache.policy.cached_prefix)."""
    provider = "anthropic" if b'"system"' in body else "openai-chat"
    model = canonical.loads(body)["model"]
    assert cached_prefix(provider, model, body)[1] == short


# --- the floor: an ideal placement of markers under the same lifetimes ------------------


def test_the_floor_reads_past_the_lookback_window_and_sends_at_the_base_price() -> None:
    # The docs' block-5 example: the real cache stops looking 20 blocks back and writes
    # blocks 1-30 again at 1.25x (block 31, after the breakpoint, goes uncached); an
    # ideal placement reads blocks 1-4 and pays 1x for the rest.
    real, floor = _conversation(), Simulation("anthropic", floor=True)
    for k in range(1, 31):
        floor.add(_blocks(k, marked=(k,)))
    body = _blocks(31, changed=5, marked=(30,))
    ours, ideal = real.add(body), floor.add(body)
    assert (ours.cache_read_tokens, ideal.cache_read_tokens) == (0, 300 * 4)
    assert ours.cost == 30 * 300 * Fraction("1.25") + 300
    assert ideal.cost == 300 * 4 * Fraction("0.1") + 27 * 300
    assert ideal.lifetime == ours.lifetime == DEFAULT_TTL


def test_the_floor_keeps_the_lifetimes_minimum_and_increment() -> None:
    floor = Simulation("anthropic", floor=True)
    floor.add(_anthropic(2000), at=0.0)
    assert floor.add(_anthropic(2000), at=301.0).cache_read_tokens == 0  # expired
    chat = Simulation("openai-chat", floor=True)
    chat.add(_chat(1000))
    assert chat.add(_chat(1000)).cache_read_tokens == 0  # below 1,024 tokens
    chat.add(_chat(1300))
    assert chat.add(_chat(1300)).cache_read_tokens == 1280  # 128-token steps


@pytest.mark.parametrize("provider", ["anthropic", "bedrock-converse", "gemini", "openai-chat"])
def test_no_call_costs_less_than_its_floor(provider: str) -> None:
    """On the golden long-session case (expiry, a compaction, context changes): the floor
    is a lower bound call by call, and for the implicit caches it is the cost itself."""
    scenario = load_scenario(REPO / "golden" / "long-session" / "scenario.yaml")
    calls = list(iter_replay(scenario))
    model = calls[0].request.settings_for(provider).model
    real, floor = Simulation(provider, model=model), Simulation(provider, model=model, floor=True)
    wire = registry.get(provider)
    for call in calls:
        body, at = serialize_at(scenario, call, wire), call_time(scenario, call)
        ours, ideal = real.add(body, at), floor.add(body, at)
        assert ideal.cost <= ours.cost, call.index
        assert ideal.cache_read_tokens >= ours.cache_read_tokens, call.index
    rules = rules_for(provider, model)
    if not rules.explicit and not rules.considered_breakpoints:  # GPT-5.6 has breakpoints
        assert floor.report().cost == real.report().cost
    else:
        assert floor.report().cost < real.report().cost


@pytest.mark.parametrize("model", ["gpt-5.6-sol", "gpt-6", "gpt-4.1"])
def test_an_implicit_caches_floor_is_its_cost_whatever_its_write_price(model: str) -> None:
    # An implicit cache writes every cacheable token at its write price (1.25x from
    # GPT-5.6): no placement of markers can send one uncached instead, so the floor
    # prices writes as the cache does (it once took the base price, 1x, and so fell
    # below the real cost; found in review).
    def body(turns: int) -> bytes:
        messages = [{"role": "user", "content": f"{n:03d}" + "x" * 6000} for n in range(turns)]
        return canonical.dumpb({"model": model, "messages": messages})

    real, floor = Simulation("openai-chat"), Simulation("openai-chat", floor=True)
    for turns, at in ((1, 0.0), (2, 60.0), (3, 120.0), (4, 4000.0), (5, 4060.0)):
        assert floor.add(body(turns), at).cost == real.add(body(turns), at).cost, turns
    assert real.report().cost == floor.report().cost


def test_the_floor_lets_a_five_minute_read_keep_a_one_hour_entry() -> None:
    """The floor must stay a lower bound where a call that asks for five minutes reads an
    entry written for an hour (``cache_ttl: turn``: a turn's first call marks 1h, the
    calls after it 5m): the real cache keeps the entry's hour, so the floor does too."""
    one_hour, five_minutes = _system_blocks((2000, "1h")), _system_blocks((2000, "5m"))
    bodies = [(one_hour, 0.0)] + [(five_minutes, 100.0 + 400.0 * k) for k in range(5)]
    real, floor = Simulation("anthropic"), Simulation("anthropic", floor=True)
    for body, at in bodies:
        ours, ideal = real.add(body, at), floor.add(body, at)
        assert ideal.cost <= ours.cost, at
        assert ideal.cache_read_tokens >= ours.cache_read_tokens, at


def test_the_floor_keeps_a_one_hour_entry_read_after_another_system_prompt() -> None:
    """The same where the one-hour entry is not the latest call's prefix: a call with
    another system prompt (a subagent) came between, so the entry is an older chain's.
    The floor once shortened it to the reader's five minutes and cost more than the real
    cache 16 minutes later (found in review)."""

    def body(tag: str, ttl: str) -> bytes:
        block = {"type": "text", "text": tag * (4 * 3000), "cache_control": {"type": "ephemeral"}}
        if ttl == "1h":
            block["cache_control"]["ttl"] = "1h"
        turn = {"role": "user", "content": [{"type": "text", "text": "hi " + tag}]}
        return canonical.dumpb({"model": SONNET, "system": [block], "messages": [turn]})

    bodies = [(body("S", "1h"), 0.0), (body("T", "5m"), 10.0)]
    bodies += [(body("S", "5m"), 20.0), (body("S", "5m"), 1000.0)]
    real, floor = Simulation("anthropic"), Simulation("anthropic", floor=True)
    for raw, at in bodies:
        ours, ideal = real.add(raw, at), floor.add(raw, at)
        assert ideal.cost <= ours.cost, at
    assert real.calls[-1].cache_read_tokens > 0  # the hour-long entry is still there
    assert floor.calls[-1].cache_read_tokens >= real.calls[-1].cache_read_tokens


# --- mixing TTLs in one request (Anthropic, "Mixing different TTLs") ---------------------


def _system_blocks(*blocks: tuple[int, str | None], provider: str = "anthropic") -> bytes:
    """System blocks of the given estimated tokens, each with a marker of its TTL ("5m":
    a marker without ``ttl``; None: no marker), then a short unmarked user turn."""
    if provider == "bedrock-converse":
        system: list[Any] = []
        for tokens, ttl in blocks:
            system.append({"text": "x" * (4 * tokens - 11)})  # {"text":"..."}: 11 bytes
            if ttl is not None:
                point = {"type": "default", **({"ttl": ttl} if ttl == "1h" else {})}
                system.append({"cachePoint": point})
        return canonical.dumpb(
            {"system": system, "messages": [{"role": "user", "content": [{"text": "hi"}]}]}
        )
    items = []
    for tokens, ttl in blocks:
        block: dict[str, Any] = {"type": "text", "text": "x" * (4 * tokens - 25)}
        if ttl is not None:
            block["cache_control"] = {"type": "ephemeral", **({"ttl": ttl} if ttl == "1h" else {})}
        items.append(block)
    body = {
        "model": SONNET,
        "max_tokens": 100,
        "system": items,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    return canonical.dumpb(body)


def _split(call: CallCache) -> tuple[int, int, int]:
    """(reads, one-hour writes, five-minute writes)."""
    one_hour = call.cache_write_1h_tokens
    return call.cache_read_tokens, one_hour, call.cache_write_tokens - one_hour


def test_mixed_ttls_bill_a_b_c_as_the_docs_usage_example() -> None:
    # The page's usage: "cache_read_input_tokens": 1800, "ephemeral_1h_input_tokens": 100,
    # "ephemeral_5m_input_tokens": 148: a hit at A = 1800, the highest 1h breakpoint
    # after it at B = 1900, the last breakpoint at C = 2048.
    sim = Simulation("anthropic")
    first = sim.add(_system_blocks((1800, "1h")), at=0.0)
    assert _split(first) == (0, 1800, 0)
    call = sim.add(_system_blocks((1800, "1h"), (100, "1h"), (148, "5m")), at=1.0)
    assert _split(call) == (1800, 100, 148)
    assert call.cost - call.uncached_tokens == (
        1800 * Fraction("0.1") + 100 * Fraction(2) + 148 * Fraction("1.25")
    )
    # A past every 1h breakpoint: B = A, the rest are 5-minute writes.
    again = sim.add(_system_blocks((1800, "1h"), (100, "1h"), (148, "5m"), (200, "5m")), at=2.0)
    assert _split(again) == (2048, 0, 200)


def test_bedrock_bills_mixed_ttls_the_same_way() -> None:
    # Bedrock's per-checkpoint minimum (1,024 since the previous one for Sonnet 4.5)
    # keeps the docs' 100- and 148-token steps from counting; the same shape, larger.
    sim = Simulation("bedrock-converse", model="anthropic.claude-sonnet-4-5-20250929-v1:0")
    sim.add(_system_blocks((1800, "1h"), provider="bedrock-converse"), at=0.0)
    blocks = ((1800, "1h"), (1100, "1h"), (1200, "5m"))
    call = sim.add(_system_blocks(*blocks, provider="bedrock-converse"), at=1.0)
    assert _split(call) == (1800, 1100, 1200)


def test_a_uniform_ttl_bills_as_before() -> None:
    # No 1h marker: C - A at 1.25x; every marker 1h: B = C, all at 2x.
    for ttl, price in (("5m", Fraction("1.25")), ("1h", Fraction(2))):
        call = Simulation("anthropic").add(_system_blocks((1100, ttl), (900, ttl)))
        assert call.cache_write_tokens == 2000
        assert call.cost - call.uncached_tokens == 2000 * price
        assert call.write_multiplier == price


def test_a_five_minute_marker_reading_a_one_hour_entry_keeps_its_hour() -> None:
    # "The cache is refreshed for no additional cost each time the cached content is
    # used": a read refreshes the entry for its own TTL, whatever the reading marker asks
    # (nothing is written, so nothing is billed at the 5-minute price either).
    one_hour, five_minutes = _system_blocks((2000, "1h")), _system_blocks((2000, "5m"))
    sim = Simulation("anthropic")
    assert _split(sim.add(one_hour, at=0.0)) == (0, 2000, 0)
    assert _split(sim.add(five_minutes, at=100.0)) == (2000, 0, 0)
    assert _split(sim.add(five_minutes, at=500.0)) == (2000, 0, 0)  # 400 s after the read
    assert _split(sim.add(five_minutes, at=500.0 + 3601.0)) == (0, 0, 2000)


def test_a_one_hour_marker_after_a_five_minute_one_is_refused() -> None:
    # "Cache entries with longer TTL must appear before shorter TTLs"
    with pytest.raises(PrefixlockError, match="ttl 1h cache marker after a 5m one"):
        Simulation("anthropic").add(_system_blocks((1100, "5m"), (900, "1h")))
    with pytest.raises(PrefixlockError, match="ttl 1h cache marker after a 5m one"):
        Simulation("bedrock-converse").add(
            _system_blocks((1100, "5m"), (900, "1h"), provider="bedrock-converse")
        )


def test_each_entry_lives_for_the_ttl_of_its_own_marker() -> None:
    body = _system_blocks((1800, "1h"), (300, "5m"))
    sim = Simulation("anthropic")
    sim.add(body, at=0.0)
    # 30 minutes on: the 5-minute entry is gone, the one-hour entry is read; nothing after
    # A is a 1h breakpoint, so the rest is a 5-minute write
    assert _split(sim.add(body, at=1800.0)) == (1800, 0, 300)
    # the read refreshed the one-hour entry for an hour: 58 minutes later it still hits
    assert _split(sim.add(body, at=1800.0 + 3500.0)) == (1800, 0, 300)
    assert _split(sim.add(body, at=1800.0 + 3500.0 + 3601.0)) == (0, 1800, 300)
    assert [c.lifetime for c in sim.calls] == [ONE_HOUR_TTL_SECONDS] * 4


@pytest.mark.parametrize(
    ("provider", "model", "read"),
    [
        ("openai-chat", "o3-mini", "0.5"),  # $0.55 cached of $1.10 input
        ("openai-chat", "o3", "0.25"),
        ("gemini", "gemini-2.0-flash", "0.25"),  # explicit caches before 2.5: $0.025 of $0.1
        ("gemini", "gemini-1.5-pro", "0.25"),
        ("gemini", "gemini-2.5-flash", "0.1"),
    ],
)
def test_read_prices_of_older_models(provider: str, model: str, read: str) -> None:
    assert rules_for(provider, model).read_multiplier == Fraction(read)


def test_gemini_3_flash_preview_has_its_own_minimum() -> None:
    # "| Gemini 3 Flash Preview | 1024 | Gemini 3 Pro Preview | 4096 |"
    assert rules_for("gemini", "gemini-3-flash-preview").min_tokens == 1024
    assert rules_for("gemini", "gemini-3-pro-preview").min_tokens == 4096


@pytest.mark.parametrize(
    ("model", "read"),
    # The pricing page's "Cache Hits & Refreshes" column as multiples of "Base Input
    # Tokens": "Cache hits and refreshes on Claude Fable 5.1 and Claude Mythos 5.1 are
    # priced at 0.025x the base input price", "... on Claude Opus 5.5 and Claude Sonnet
    # 5.5 are priced at 0.05x", "All other models use the standard 0.1x multiplier".
    [
        ("claude-opus-5-5", "0.05"),  # $0.20 of $4
        ("claude-sonnet-5-5", "0.05"),
        ("claude-fable-5-1", "0.025"),  # $0.25 of $10
        ("claude-mythos-5-1", "0.025"),
        ("claude-fable-5-2", "0.025"),  # $0.20 of $8 (third-party figures only)
        ("claude-mythos-5-2", "0.025"),
        ("claude-fable-5", "0.1"),  # $1 of $10
        ("claude-mythos-5", "0.1"),
        ("claude-opus-5", "0.1"),  # $0.50 of $5
        ("claude-sonnet-5", "0.1"),  # $0.20 of $2
        ("claude-haiku-5-5", "0.1"),  # $0.01 of $0.10 (and $0.05 of $0.50 over 100k)
        ("claude-opus-4-8", "0.1"),
        ("claude-sonnet-4-5-20250929", "0.1"),
        ("claude-haiku-4-5-20251001", "0.1"),
    ],
)
def test_claude_read_prices_by_model(model: str, read: str) -> None:
    for provider, name in (("anthropic", model), ("bedrock-converse", f"anthropic.{model}")):
        rules = rules_for(provider, name)
        assert rules.read_multiplier == Fraction(read)
        # every model's writes: 1.25x (5m) and 2x (1h) its input price
        assert rules.write_multiplier == Fraction("1.25")


def test_a_cheaper_read_price_lowers_a_conversations_cost() -> None:
    def bodies(model: str) -> list[bytes]:
        body = canonical.loads(_anthropic(3000))
        return [canonical.dumpb({**body, "model": model})] * 3

    standard = simulate("anthropic", bodies("claude-opus-5"))
    cheaper = simulate("anthropic", bodies("claude-opus-5-5"))
    reads = [c.cache_read_tokens for c in standard.calls]
    assert [c.cache_read_tokens for c in cheaper.calls] == reads
    assert reads[0] == 0 and reads[1] > 0
    assert standard.cost - cheaper.cost == sum(reads) * (Fraction("0.1") - Fraction("0.05"))


def test_haiku_5_5_prompts_over_100k_tokens_pay_five_times_the_prices() -> None:
    # "Claude Haiku 5.5 is priced by prompt length: a prompt of over 100,000 tokens pays
    # higher prices": input $0.10 / $0.50, 5m write $0.125 / $0.625, 1h $0.20 / $1, read
    # $0.01 / $0.05 (the model's overview page): every price 5x, in the same ratios.
    assert rules_for("anthropic", "claude-haiku-5-5").long_prompt == (100_000, Fraction(5))
    assert rules_for("anthropic", "claude-haiku-4-5").long_prompt is None

    def body(tokens: int) -> bytes:
        return canonical.dumpb({**canonical.loads(_anthropic(tokens)), "model": "claude-haiku-5-5"})

    # the system block and a short user turn: 7 tokens more than the block
    short, long = (simulate("anthropic", [body(n)] * 2).calls for n in (99_993, 99_994))
    assert short[0].input_tokens == 100_000 and long[0].input_tokens == 100_001
    assert [c.price_factor for c in short] == [1, 1]
    assert [c.price_factor for c in long] == [5, 5]
    for a, b in zip(short, long, strict=True):
        assert b.cache_read_tokens - a.cache_read_tokens in (0, 1)
        # the cost and the cost without caching both at 5x: the ratio stays the tier's
        assert b.uncached_cost == 5 * b.input_tokens
        assert b.cost == 5 * (
            b.uncached_tokens
            + b.cache_write_tokens * b.write_multiplier
            + b.cache_read_tokens * b.read_multiplier
        )
    bound = PerfectBound()
    for call in long:
        bound.add(call)
    read = long[1].bound_read_tokens
    assert bound.cost == 5 * (
        long[0].input_tokens * long[0].write_multiplier
        + read * long[1].read_multiplier
        + (long[1].input_tokens - read) * long[1].write_multiplier
    )


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("claude-sonnet-5-5", "claude-sonnet-5-5"),  # not Sonnet 5's row
        ("claude-fable-5-20260609", "claude-fable-5"),  # a date is not Fable 5.2
        ("claude-opus-4-5-20251101", "claude-opus-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-sonnet-4-7", ""),  # no row names it: the default, not Sonnet 4's
    ],
)
def test_a_claude_row_names_one_model(model: str, family: str) -> None:
    assert rules_for("anthropic", model).family == (family or "claude")


def test_bedrock_models_its_table_does_not_list_take_anthropics_minimum() -> None:
    # Anthropic: "These minimums apply on every platform where each model is available"
    sonnet = rules_for("bedrock-converse", "us.anthropic.claude-sonnet-5-5")
    assert (sonnet.family, sonnet.min_tokens) == ("claude-sonnet-5-5", 512)
    assert rules_for("bedrock-converse", "anthropic.claude-sonnet-5").min_tokens == 1024
    fable = rules_for("bedrock-converse", "anthropic.claude-fable-5-1")
    assert (fable.family, fable.min_tokens) == ("anthropic.claude-fable-5-1", 512)
