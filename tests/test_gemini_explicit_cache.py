"""Gemini explicit cache of the stable root (issue 10, item 3): ``cachedContent`` in the
settings options names a cache holding the instructions, tools and toolConfig; the
request then carries none of them; ``Gemini.cached_content_body`` creates that cache;
the simulator reads its tokens at the cache price."""

from __future__ import annotations

import json
from fractions import Fraction

import attrs
import pytest
from conv_helpers import open_conv, user
from prefixlock import ToolCall, ToolResult, providers
from prefixlock.cache.rules import rules_for
from prefixlock.cache.simulator import CallCache, simulate
from prefixlock.core import canonical
from prefixlock.core.errors import CacheSimulationError, SerializationError
from prefixlock.core.model import ModelRequest
from prefixlock.providers.gemini import Gemini
from sdk_judge import assert_valid

CACHE = "cachedContents/root-1"
TOOL_CONFIG = {"functionCallingConfig": {"mode": "AUTO"}}


def _requests() -> list[ModelRequest]:
    conv = open_conv()
    first = conv.handle(user("u1"))
    conv.assistant("Reading.", [ToolCall("c1", "read_file", {"path": "a.py"})])
    return [first, conv.tool_results([ToolResult("c1", "print(1)")])]


def _explicit(request: ModelRequest, **extra: object) -> ModelRequest:
    def change(options: dict[str, object]) -> str:
        return canonical.dumps({**options, "cachedContent": CACHE, **extra})

    settings = tuple(
        attrs.evolve(s, options=change(s.options_value)) if s.provider == "gemini" else s
        for s in request.settings
    )
    return attrs.evolve(request, settings=settings)


def test_explicit_cache_mode_leaves_the_root_to_the_cache() -> None:
    request = _requests()[1]
    wire = providers.get("gemini")
    plain = json.loads(wire.serialize(request))
    cached = _explicit(request, toolConfig=TOOL_CONFIG)
    body = json.loads(wire.serialize(cached))
    assert list(body) == ["generationConfig", "contents", "cachedContent"]
    assert body["contents"] == plain["contents"]
    assert body["cachedContent"] == CACHE
    assert_valid("gemini", wire.body(cached))  # SDK judge and service rules
    assert canonical.dumpb(wire.wire_body(cached)) == wire.serialize(cached)


def test_the_cache_body_holds_the_stable_root() -> None:
    request = _requests()[1]
    wire = providers.get("gemini")
    assert isinstance(wire, Gemini)
    plain = json.loads(wire.serialize(request))
    cached = _explicit(request, toolConfig=TOOL_CONFIG)
    body = wire.cached_content_body(cached, ttl="3600s", display_name="prefixlock-root")
    assert list(body) == [
        "model",
        "systemInstruction",
        "tools",
        "toolConfig",
        "ttl",
        "displayName",
    ]
    assert body["model"] == "models/" + request.settings_for("gemini").model
    assert body["systemInstruction"] == plain["systemInstruction"]
    assert body["tools"] == plain["tools"]
    assert body["toolConfig"] == TOOL_CONFIG
    # the same root gives the same cache body on every call
    first = wire.cached_content_body(_explicit(_requests()[0], toolConfig=TOOL_CONFIG))
    assert canonical.dumps(first) == canonical.dumps(wire.cached_content_body(cached))


def test_a_cached_content_that_names_no_cache_is_refused() -> None:
    request = _requests()[0]
    settings = tuple(
        attrs.evolve(s, options='{"cachedContent":"root-1"}') if s.provider == "gemini" else s
        for s in request.settings
    )
    with pytest.raises(SerializationError, match=r"must name a cache \('cachedContents/...'\)"):
        providers.get("gemini").serialize(attrs.evolve(request, settings=settings))


def test_the_simulator_reads_the_explicit_cache_at_the_cache_price() -> None:
    wire = providers.get("gemini")
    assert isinstance(wire, Gemini)
    requests = [_explicit(r) for r in _requests()]
    bodies = [wire.serialize(r) for r in requests]
    root = wire.cached_content_body(requests[0])
    model = requests[0].settings_for("gemini").model
    # the same bodies without the cache reference: only the implicit cache
    stripped = [{k: v for k, v in json.loads(b).items() if k != "cachedContent"} for b in bodies]
    plain = simulate("gemini", stripped, model=model)
    report = simulate("gemini", bodies, model=model, cached_contents={CACHE: root})
    root_tokens = report.calls[0].input_tokens - plain.calls[0].input_tokens
    assert root_tokens > 0
    first, second = report.calls
    assert first.cache_write_tokens - plain.calls[0].cache_write_tokens == root_tokens
    assert second.cache_read_tokens - plain.calls[1].cache_read_tokens == root_tokens
    assert second.read_multiplier == Fraction("0.1")
    with pytest.raises(CacheSimulationError, match="pass the body that created it"):
        simulate("gemini", bodies, model=model)


def _without_cache(body: bytes) -> dict[str, object]:
    return {k: v for k, v in json.loads(body).items() if k != "cachedContent"}


def _expiry_case(**cache_body: object) -> tuple[list[bytes], dict[str, object], str, int]:
    """Bodies naming the cache, its create body (with ``cache_body`` on top), the model,
    and the root's tokens (the cache's share of each call's input)."""
    wire = providers.get("gemini")
    assert isinstance(wire, Gemini)
    requests = [_explicit(r) for r in _requests()]
    bodies = [wire.serialize(r) for r in requests]
    root = {**wire.cached_content_body(requests[0]), **cache_body}
    model = requests[0].settings_for("gemini").model
    once = simulate("gemini", bodies[:1], model=model, cached_contents={CACHE: root})
    plain = simulate("gemini", [_without_cache(bodies[0])], model=model)
    return bodies, root, model, once.calls[0].input_tokens - plain.calls[0].input_tokens


def _root_written(times: list[float | None], **cache_body: object) -> list[bool]:
    """Per call at ``times`` (the second body, repeated): whether the call wrote the
    explicit cache (else it read it)."""
    bodies, root, model, tokens = _expiry_case(**cache_body)
    calls = [bodies[0]] + [bodies[1]] * (len(times) - 1)
    plain = simulate(
        "gemini",
        [_without_cache(b) for b in calls],
        model=model,
        times=times,
    )
    report = simulate("gemini", calls, model=model, cached_contents={CACHE: root}, times=times)
    out = []
    for call, base in zip(report.calls, plain.calls, strict=True):
        wrote = call.cache_write_tokens - base.cache_write_tokens
        read = call.cache_read_tokens - base.cache_read_tokens
        assert sorted([wrote, read]) == [0, tokens]
        out.append(wrote == tokens)
    return out


def test_the_explicit_cache_expires_an_hour_after_its_creation_reads_do_not_extend_it() -> None:
    # "If not set, the TTL defaults to 1 hour"; only an update moves the expiry.
    times: list[float | None] = [0.0, 1800.0, 3600.0, 3601.0, 3700.0, 7201.0, 7202.0]
    assert _root_written(times) == [True, False, False, True, False, False, True]


def test_the_explicit_cache_lives_its_create_bodys_ttl() -> None:
    times: list[float | None] = [0.0, 599.5, 600.0, 600.25, 1200.0, 1200.5]
    assert _root_written(times, ttl="600s") == [True, False, False, True, False, True]
    assert _root_written([0.0, 0.5, 0.75], ttl="0.5s") == [True, False, True]


def test_the_explicit_cache_expires_at_its_expire_time() -> None:
    start = 1_796_205_600.0  # 2026-12-02T10:00:00Z
    times: list[float | None] = [start, start + 3600, start + 7200]
    body = {"expireTime": "2026-12-02T12:00:00Z"}
    assert _root_written(times[:2], **body) == [True, False]
    with pytest.raises(CacheSimulationError) as err:
        _root_written([*times, start + 7201], **body)
    assert str(err.value) == (
        "gemini call 4: cachedContent 'cachedContents/root-1' must be created (again) for "
        "this call, but its body's expireTime 2026-12-02T12:00:00Z is already past"
    )


def test_a_cache_created_by_a_call_without_a_time_expires_from_the_first_known_time() -> None:
    # Its life counts from the first timed call, as an entry's does when a timed call
    # reads it; an expireTime is a time of its own.
    assert _root_written([None, 0.0, 3600.0, 3601.0]) == [True, False, False, True]
    assert _root_written([None, 0.0, 4000.0, 8000.0], ttl="60s") == [True, False, True, True]
    start = 1_796_205_600.0  # 2026-12-02T10:00:00Z
    body = {"expireTime": "2026-12-02T12:00:00Z"}
    assert _root_written([None, start, start + 7200], **body) == [True, False, False]
    with pytest.raises(CacheSimulationError, match="expireTime 2026-12-02T12:00:00Z is already"):
        _root_written([None, start, start + 7201], **body)


def test_without_call_times_the_explicit_cache_never_expires() -> None:
    assert _root_written([None] * 4) == [True, False, False, False]
    assert _root_written([None] * 3, ttl="1s") == [True, False, False]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"ttl": "10m"},
            "gemini cachedContent 'cachedContents/root-1': ttl '10m' is not a duration like "
            "'3600s' (seconds, up to nine fractional digits, then 's')",
        ),
        (
            {"ttl": 3600},
            "gemini cachedContent 'cachedContents/root-1': ttl 3600 is not a duration like "
            "'3600s' (seconds, up to nine fractional digits, then 's')",
        ),
        (
            {"ttl": "1.0000000001s"},
            "gemini cachedContent 'cachedContents/root-1': ttl '1.0000000001s' is not a "
            "duration like '3600s' (seconds, up to nine fractional digits, then 's')",
        ),
        (
            {"ttl": "315576000001s"},  # past google.protobuf.Duration's range
            "gemini cachedContent 'cachedContents/root-1': ttl '315576000001s' is not a "
            "duration like '3600s' (seconds, up to nine fractional digits, then 's')",
        ),
        (
            {"expireTime": "tomorrow"},
            "gemini cachedContent 'cachedContents/root-1': expireTime: 'tomorrow' is not an "
            "RFC 3339 timestamp like 2026-12-02T10:00:00Z",
        ),
        (
            {"ttl": "60s", "expireTime": "2026-12-02T12:00:00Z"},
            "gemini cachedContent 'cachedContents/root-1': gives both ttl and expireTime; "
            "the API takes one of them",
        ),
    ],
)
def test_an_expiry_the_api_would_refuse_is_named(extra: dict[str, object], message: str) -> None:
    with pytest.raises(CacheSimulationError) as err:
        _root_written([0.0, 1.0], **extra)
    assert str(err.value) == message


# --- storage: "Storage duration" is billed per token-hour ------------------------------


def _storage_case(
    times: list[float | None], model: str = "gemini-2.5-pro", **cache_body: object
) -> tuple[list[CallCache], list[CallCache], int]:
    """The explicit-cache calls at ``times`` (the second body repeated), the same bodies
    without the cache (implicit caching only), and the cache's tokens."""
    bodies, root, _, tokens = _expiry_case(**cache_body)
    calls = [bodies[0]] + [bodies[1]] * (len(times) - 1)
    cached = simulate("gemini", calls, model=model, cached_contents={CACHE: root}, times=times)
    plain = simulate("gemini", [_without_cache(b) for b in calls], model=model, times=times)
    return list(cached.calls), list(plain.calls), tokens


def _storage(call: CallCache) -> Fraction:
    """What the call's cost holds beyond its input tokens' prices."""
    priced = (
        call.uncached_tokens
        + call.cache_write_tokens * call.write_multiplier
        + call.cache_read_tokens * call.read_multiplier
    )
    return call.cost - priced


def test_each_creation_pays_the_cache_tokens_storage_for_its_whole_life() -> None:
    # Gemini 2.5 Pro: "$4.50 / 1,000,000 tokens per hour (storage price)" and "Input:
    # $1.25 / 1M tokens": a token-hour costs 3.6 input tokens.
    assert rules_for("gemini", "gemini-2.5-pro").storage_per_hour == Fraction(18, 5)
    times: list[float | None] = [0.0, 1800.0, 3601.0, 3700.0]
    cached, plain, tokens = _storage_case(times)
    assert [c.cache_storage_token_hours for c in cached] == [tokens, 0, tokens, 0]
    assert [_storage(c) for c in cached] == [
        Fraction(18, 5) * tokens,
        0,
        Fraction(18, 5) * tokens,
        0,
    ]
    assert [c.cache_storage_token_hours for c in plain] == [0] * 4  # implicit: no storage
    # a ten-minute ttl stores for a sixth of an hour
    cached, _, tokens = _storage_case([0.0, 60.0], ttl="600s")
    assert cached[0].cache_storage_token_hours == Fraction(tokens, 6)
    # an expireTime: until then from the creating call's time
    cached, _, tokens = _storage_case(
        [1735725600.0, 1735725660.0], expireTime="2025-01-01T10:30:00Z"
    )
    assert cached[0].cache_storage_token_hours == Fraction(tokens, 2)


def test_storage_is_priced_by_model_and_counts_in_the_totals() -> None:
    times: list[float | None] = [0.0, 60.0]
    pro, _, tokens = _storage_case(times)
    flash, _, _ = _storage_case(times, model="gemini-2.5-flash")
    assert _storage(flash[0]) == rules_for("gemini", "gemini-2.5-flash").storage_per_hour * tokens
    assert rules_for("gemini", "gemini-2.5-flash").storage_per_hour == Fraction(10, 3)
    assert _storage(pro[0]) > _storage(flash[0]) > 0
    bodies, root, _, _ = _expiry_case()
    report = simulate(
        "gemini",
        [bodies[0], bodies[1]],
        model="gemini-2.5-pro",
        cached_contents={CACHE: root},
        times=times,
    )
    assert report.cost == sum((c.cost for c in pro), Fraction(0))
    assert report.totals.cost == report.cost
    # the other providers have no storage
    assert rules_for("anthropic", "claude-sonnet-4-5").storage_per_hour == 0
