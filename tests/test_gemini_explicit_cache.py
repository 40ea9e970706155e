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
from prefixlock.cache.simulator import simulate
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
