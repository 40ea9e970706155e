"""Cache TTL (issue 10, item 5): ``options: {cache_ttl: 1h}`` puts ``"ttl": "1h"`` on
every Anthropic ``cache_control`` and Bedrock ``cachePoint``; without it (or with
``5m``) bodies are byte-identical; the simulator prices one-hour writes at 2x."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import attrs
import pytest
from conv_helpers import open_conv, user
from prefixlock import ToolCall, ToolResult, providers
from prefixlock.cache.simulator import simulate
from prefixlock.core import canonical
from prefixlock.core.errors import SerializationError
from prefixlock.core.model import ModelRequest
from prefixlock.spec.loader import load_yaml_text
from prefixlock.spec.validate import validate_document
from sdk_judge import assert_valid


def _request() -> ModelRequest:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant("Reading.", [ToolCall("c1", "read_file", {"path": "a.py"})])
    return conv.tool_results([ToolResult("c1", "print(1)")])


def _with_options(request: ModelRequest, provider: str, **options: Any) -> ModelRequest:
    settings = tuple(
        attrs.evolve(s, options=canonical.dumps({**s.options_value, **options}))
        if s.provider == provider
        else s
        for s in request.settings
    )
    return attrs.evolve(request, settings=settings)


def _markers(value: Any, key: str) -> list[Any]:
    if isinstance(value, dict):
        found = [value[key]] if key in value else []
        return found + [m for v in value.values() for m in _markers(v, key)]
    if isinstance(value, list):
        return [m for v in value for m in _markers(v, key)]
    return []


@pytest.mark.parametrize(
    ("provider", "key", "marker"),
    [
        ("anthropic", "cache_control", {"type": "ephemeral", "ttl": "1h"}),
        ("bedrock-converse", "cachePoint", {"type": "default", "ttl": "1h"}),
    ],
)
def test_one_hour_ttl_is_on_every_marker_and_the_option_is_not_sent(
    provider: str, key: str, marker: dict[str, str]
) -> None:
    request = _request()
    wire = providers.get(provider)
    default = wire.serialize(request)
    assert wire.serialize(_with_options(request, provider, cache_ttl="5m")) == default
    one_hour = _with_options(request, provider, cache_ttl="1h")
    body = json.loads(wire.serialize(one_hour))
    assert "cache_ttl" not in body
    found = _markers(body, key)
    assert len(found) == 4
    assert found == [marker] * 4
    assert_valid(provider, wire.body(one_hour))
    # fresh full encode equals the incremental one (the TTL is in the fragment key)
    assert canonical.dumpb(wire.wire_body(one_hour)) == wire.serialize(one_hour)
    assert wire.serialize(request) == default
    # markers stripped, the bodies are equal: the TTL is a marker property only
    assert wire.strip_cache_markers(json.loads(default)) == wire.strip_cache_markers(body)


@pytest.mark.parametrize("provider", ["anthropic", "bedrock-converse"])
def test_a_bad_ttl_is_refused(provider: str) -> None:
    with pytest.raises(SerializationError, match=r"'cache_ttl' must be one of \['5m', '1h'\]"):
        providers.get(provider).serialize(_with_options(_request(), provider, cache_ttl="2h"))


@pytest.mark.parametrize("provider", ["anthropic", "bedrock-converse"])
def test_the_simulator_prices_one_hour_writes_at_twice_the_input_price(provider: str) -> None:
    request = _request()
    wire = providers.get(provider)
    model = request.settings_for(provider).model
    bodies = [wire.serialize(request)]
    hour = [wire.serialize(_with_options(request, provider, cache_ttl="1h"))]
    five = simulate(provider, bodies, model=model)
    one = simulate(provider, hour, model=model)
    assert five.calls[0].write_multiplier == Fraction("1.25")
    assert one.calls[0].write_multiplier == Fraction(2)
    assert one.calls[0].cache_write_tokens == five.calls[0].cache_write_tokens


def test_the_providers_schema_takes_cache_ttl_for_the_marker_wires_only() -> None:
    def problems(text: str) -> list[str]:
        return [str(e) for e in validate_document(load_yaml_text(text, "x.yaml"), "providers")]

    for name in ("anthropic", "bedrock-converse"):
        ok = f"providers:\n  {name}: {{model: m, max_tokens: 1, options: {{cache_ttl: 1h}}}}\n"
        assert problems(ok) == []
        bad = ok.replace("1h", "2h")
        assert len(problems(bad)) == 1 and "cache_ttl" in problems(bad)[0]
    for name in ("gemini", "openai-chat", "openai-responses"):
        text = f"providers:\n  {name}: {{model: m, max_tokens: 1, options: {{cache_ttl: 1h}}}}\n"
        assert len(problems(text)) == 1
