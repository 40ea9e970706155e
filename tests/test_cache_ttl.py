"""Cache TTL (issue 10, item 5): ``options: {cache_ttl: 1h}`` puts ``"ttl": "1h"`` on
every Anthropic ``cache_control`` and Bedrock ``cachePoint``; without it (or with
``5m``) bodies are byte-identical; the simulator prices one-hour writes at 2x.
``cache_ttl: turn`` (issue 15) mixes them: the first user turn's bodies are the 5m ones;
from the second, 1h markers up to the latest user message, a 5m tail, at most 4."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import attrs
import pytest
from conv_helpers import open_conv, user
from prefixlock import ToolCall, ToolResult, providers
from prefixlock.cache.simulator import Simulation, simulate
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
    message = r"'cache_ttl' must be one of \['5m', '1h', 'auto', 'turn'\]"
    with pytest.raises(SerializationError, match=message):
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


def test_the_providers_schema_takes_cache_ttl_for_the_marker_and_openai_wires_only() -> None:
    def problems(text: str) -> list[str]:
        return [str(e) for e in validate_document(load_yaml_text(text, "x.yaml"), "providers")]

    for name in ("anthropic", "bedrock-converse", "openai-chat", "openai-responses"):
        ok = f"providers:\n  {name}: {{model: m, max_tokens: 1, options: {{cache_ttl: 1h}}}}\n"
        assert problems(ok) == []
        assert problems(ok.replace("1h", "turn")) == []
        bad = ok.replace("1h", "2h")
        assert len(problems(bad)) == 1 and "cache_ttl" in problems(bad)[0]
    for name in ("gemini",):
        text = f"providers:\n  {name}: {{model: m, max_tokens: 1, options: {{cache_ttl: 1h}}}}\n"
        assert len(problems(text)) == 1


# --- cache_ttl: turn ---------------------------------------------------------------------

TURN_WIRES = [("anthropic", "cache_control"), ("bedrock-converse", "cachePoint")]


def _two_turns() -> list[ModelRequest]:
    """u1, a tool loop, u2 (a new turn), a tool loop: four calls."""
    conv = open_conv()
    requests = [conv.handle(user("u1"))]
    conv.assistant("Reading.", [ToolCall("c1", "read_file", {"path": "a.py"})])
    requests.append(conv.tool_results([ToolResult("c1", "print(1)")]))
    conv.assistant("Done.")
    requests.append(conv.handle(user("u2")))
    conv.assistant("Again.", [ToolCall("c2", "read_file", {"path": "b.py"})])
    requests.append(conv.tool_results([ToolResult("c2", "print(2)")]))
    return requests


def _marked_paths(value: Any, key: str, path: str = "$") -> list[tuple[str, str]]:
    """(json path, ttl) of every marker, in body order ("5m" for a marker without ttl)."""
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        if key in value:
            out.append((path, value[key].get("ttl", "5m")))
        for k, v in value.items():
            if k != key:
                out += _marked_paths(v, key, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _marked_paths(v, key, f"{path}[{i}]")
    return out


def _in_processing_order(marks: list[tuple[str, str]], provider: str) -> list[tuple[str, str]]:
    """Anthropic's top-level marker is on the last block: it comes last."""
    top = [m for m in marks if m[0] == "$"]
    return [m for m in marks if m[0] != "$"] + top


@pytest.mark.parametrize(("provider", "key"), TURN_WIRES)
def test_turn_ttl_keeps_the_first_turn_five_minute_and_then_mixes(provider: str, key: str) -> None:
    wire = providers.get(provider)
    requests = _two_turns()
    five = [json.loads(wire.serialize(r)) for r in requests]
    turn = [_with_options(r, provider, cache_ttl="turn") for r in requests]
    bodies = [json.loads(wire.serialize(r)) for r in turn]
    # the first turn: byte-identical to the 5m bodies
    assert [wire.serialize(r) for r in turn[:2]] == [wire.serialize(r) for r in requests[:2]]
    for body, request, plain in zip(bodies, turn, five, strict=True):
        assert "cache_ttl" not in body
        marks = _in_processing_order(_marked_paths(body, key), provider)
        ttls = [ttl for _, ttl in marks]
        assert len(marks) <= 4
        assert ttls == sorted(ttls, key=lambda t: t != "1h")  # every 1h before any 5m
        assert wire.strip_cache_markers(body) == wire.strip_cache_markers(plain)
        assert canonical.dumpb(wire.wire_body(request)) == wire.serialize(request)
        assert_valid(provider, wire.body(request))
    # the second turn's first call: 1h on the root, the context, u1 (the previous turn's
    # opening message: beyond the new marker's lookback after a tool loop) and u2 (the
    # last message); the second turn's tool loop: root, context and u2 1h, and a 5m tail
    if provider == "anthropic":
        assert _marked_paths(bodies[2], key) == [
            ("$.system[0]", "1h"),
            ("$.messages[0].content[0]", "1h"),
            ("$.messages[1].content[0]", "1h"),
            ("$.messages[5].content[0]", "1h"),
        ]
        assert _marked_paths(bodies[3], key) == [
            ("$", "5m"),
            ("$.system[0]", "1h"),
            ("$.messages[0].content[0]", "1h"),
            ("$.messages[5].content[0]", "1h"),
        ]
    else:
        # Bedrock merges same-role neighbours: the context and u1 are one wire message,
        # each cachePoint after the blocks of the canonical message it marks
        assert _marked_paths(bodies[2], key) == [
            ("$.system[1]", "1h"),
            ("$.messages[0].content[1]", "1h"),
            ("$.messages[0].content[3]", "1h"),
            ("$.messages[4].content[1]", "1h"),
        ]
        assert _marked_paths(bodies[3], key) == [
            ("$.system[1]", "1h"),
            ("$.messages[0].content[1]", "1h"),
            ("$.messages[4].content[1]", "1h"),
            ("$.messages[6].content[1]", "5m"),
        ]


@pytest.mark.parametrize(("provider", "key"), TURN_WIRES)
def test_turn_ttl_has_one_root_marker_the_last_tool_without_instructions(
    provider: str, key: str
) -> None:
    wire = providers.get(provider)
    request = _with_options(_two_turns()[3], provider, cache_ttl="turn")
    bare = attrs.evolve(request, instructions="")
    marks = _marked_paths(json.loads(wire.serialize(bare)), key)
    roots = [path for path, _ in marks if "tools" in path or "system" in path]
    assert len(roots) == 1 and "tools" in roots[0]
    assert [ttl for path, ttl in marks if path == roots[0]] == ["1h"]


@pytest.mark.parametrize(("provider", "key"), TURN_WIRES)
def test_turn_ttl_prices_the_same_streamed_and_whole(provider: str, key: str) -> None:
    wire = providers.get(provider)
    model = _two_turns()[0].settings_for(provider).model
    whole, stream = simulate_pair(provider, model)
    for i, request in enumerate(_two_turns()):
        fragments = wire.fragments(_with_options(request, provider, cache_ttl="turn"))
        expected = whole.add(fragments.join(), float(i))
        assert stream.add_fragments(fragments.as_body(), float(i)) == expected
    calls = stream.report().calls
    # Bedrock: the turn's few new tokens are below its per-checkpoint minimum (1,024
    # since the previous checkpoint), so its 1h checkpoint writes nothing here
    one_hour = [False, False, provider == "anthropic", False]
    assert [c.cache_write_1h_tokens > 0 for c in calls] == one_hour


def simulate_pair(provider: str, model: str) -> tuple[Simulation, Simulation]:
    return Simulation(provider, model=model), Simulation(provider, model=model)
