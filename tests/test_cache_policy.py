"""Cache TTL policies (issue 45, item 1): ``cache_ttl: 5m | 1h | auto`` (``turn``, auto's
earlier name, means auto) on the marker wires; golden bodies per policy for Anthropic and
Bedrock pin every marker's TTL byte-exactly, and every body is SDK-validated and
service-rule checked (at most 4 breakpoints, every 1h marker before any 5m one)."""

from __future__ import annotations

import itertools
import json
import os
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import pytest
from conv_helpers import open_conv, user
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixlock import ToolCall, ToolResult, providers
from prefixlock.cache.policy import with_policy
from prefixlock.cache.simulator import Simulation
from prefixlock.core.errors import SerializationError
from prefixlock.review.replay import replay, serialize_at
from prefixlock.review.scenario import load_scenario
from sdk_judge import assert_valid

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "golden" / "changed-context" / "scenario.yaml"
DATA = Path(__file__).resolve().parent / "data" / "cache_policy"
WIRES = [
    ("anthropic", "cache_control"),
    ("bedrock-converse", "cachePoint"),
    ("bedrock-anthropic", "cache_control"),
]
POLICIES = ("5m", "1h", "auto")
#: A Bedrock model that takes one-hour entries (prefixlock.core.limits).
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"
#: Set to rewrite the golden files below (then read the diff before committing).
UPDATE = os.environ.get("PREFIXLOCK_UPDATE_POLICY_GOLDEN") == "1"


def _bodies(provider: str, policy: str) -> list[bytes]:
    scenario = load_scenario(SCENARIO)
    wire = providers.get(provider)
    out = []
    for call in replay(scenario):
        call = attrs.evolve(call, request=with_policy(call.request, provider, policy))
        out.append(serialize_at(scenario, call, wire))
    return out


def _request() -> Any:
    return replay(load_scenario(SCENARIO))[0].request


def _marks(value: Any, key: str, path: str = "$") -> list[tuple[str, str]]:
    """(json path, ttl) of every marker in body order ("5m" for one without ttl)."""
    out: list[tuple[str, str]] = []
    if isinstance(value, dict):
        if key in value:
            out.append((path, value[key].get("ttl", "5m")))
        for k, v in value.items():
            if k != key:
                out += _marks(v, key, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _marks(v, key, f"{path}[{i}]")
    return out


def _processing_order(marks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Anthropic's top-level marker applies to the last block: it comes last. Tools come
    before system before messages (Anthropic: "tools, system, and messages (in that
    order)"; Bedrock's toolConfig, system, messages likewise)."""
    order = {"tools": 0, "toolConfig": 0, "system": 1, "messages": 2}
    top = [m for m in marks if m[0] == "$"]
    rest = [m for m in marks if m[0] != "$"]
    rest.sort(key=lambda m: order.get(m[0].split(".")[1].split("[")[0], 3))
    return rest + top


def _golden_values(provider: str, policy: str, bodies: list[bytes]) -> list[Any]:
    """The bodies, each byte-equal to its golden file under ``DATA/provider/policy``
    (written there first with ``PREFIXLOCK_UPDATE_POLICY_GOLDEN=1``), parsed; none
    carries the ``cache_ttl`` option itself."""
    folder = DATA / provider / policy
    if UPDATE:
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.json"):
            old.unlink()
        for i, body in enumerate(bodies, 1):
            (folder / f"{i:04d}.json").write_bytes(body)
    files = sorted(folder.glob("*.json"))
    assert [f.name for f in files] == [f"{i:04d}.json" for i in range(1, len(bodies) + 1)]
    for file, body in zip(files, bodies, strict=True):
        assert body == file.read_bytes(), f"{provider}/{policy}/{file.name} differs"
        assert "cache_ttl" not in body.decode()
    return [json.loads(body) for body in bodies]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("provider", "key"), WIRES)
def test_golden_bodies_per_policy(provider: str, key: str, policy: str) -> None:
    bodies = _bodies(provider, policy)
    for value in _golden_values(provider, policy, bodies):
        ttls = [ttl for _, ttl in _processing_order(_marks(value, key))]
        assert len(ttls) <= 4
        assert ttls == sorted(ttls, key=lambda t: t != "1h"), ttls  # 1h never after 5m
        if policy == "5m":
            assert set(ttls) == {"5m"}
        if policy == "1h":
            assert set(ttls) == {"1h"}
        if provider.startswith("bedrock-"):  # modelId travels in the URI, not the body
            value = {"modelId": MODEL, **value}
        assert_valid(provider, value)


@pytest.mark.parametrize(("provider", "key"), WIRES)
def test_auto_marks_the_second_turn_one_hour_up_to_its_opening_message(
    provider: str, key: str
) -> None:
    """The golden case's calls: u1 (1), its tool loop (2), u2 with a new context (3),
    its loop (4, 5). auto's first turn is the 5m bodies; from u2 on the root, the new
    context and u2 are 1h (one marker each; u2's first call marks u1 too) and the loop's
    moving tail 5m."""
    five = _bodies(provider, "5m")
    auto = _bodies(provider, "auto")
    assert auto[:2] == five[:2]
    marks = [_processing_order(_marks(json.loads(b), key)) for b in auto[2:]]
    assert marks == EXPECTED_AUTO[provider]


EXPECTED_AUTO = {
    # the turn's first call also marks u1, the previous turn's opening message (4 markers)
    "anthropic": [
        [
            ("$.system[0]", "1h"),
            ("$.messages[1].content[0]", "1h"),
            ("$.messages[5].content[0]", "1h"),
            ("$.messages[6].content[0]", "1h"),
        ],
        [
            ("$.system[0]", "1h"),
            ("$.messages[5].content[0]", "1h"),
            ("$.messages[6].content[0]", "1h"),
            ("$", "5m"),
        ],
        [
            ("$.system[0]", "1h"),
            ("$.messages[5].content[0]", "1h"),
            ("$.messages[6].content[0]", "1h"),
            ("$", "5m"),
        ],
    ],
    # Bedrock merges the same-role context and runtime messages into one wire message
    "bedrock-converse": [
        [
            ("$.system[1]", "1h"),
            ("$.messages[0].content[2]", "1h"),
            ("$.messages[4].content[1]", "1h"),
            ("$.messages[4].content[3]", "1h"),
        ],
        [
            ("$.system[1]", "1h"),
            ("$.messages[4].content[1]", "1h"),
            ("$.messages[4].content[3]", "1h"),
            ("$.messages[6].content[1]", "5m"),
        ],
        [
            ("$.system[1]", "1h"),
            ("$.messages[4].content[1]", "1h"),
            ("$.messages[4].content[3]", "1h"),
            ("$.messages[8].content[1]", "5m"),
        ],
    ],
}


# Claude Messages on Bedrock: the Anthropic body's markers, at the same places
EXPECTED_AUTO["bedrock-anthropic"] = EXPECTED_AUTO["anthropic"]


@pytest.mark.parametrize(("provider", "key"), WIRES)
def test_turn_is_autos_earlier_name(provider: str, key: str) -> None:
    assert _bodies(provider, "turn") == _bodies(provider, "auto")


@pytest.mark.parametrize(("provider", "key"), WIRES)
def test_an_unknown_policy_is_refused_naming_the_values(provider: str, key: str) -> None:
    with pytest.raises(SerializationError) as caught:
        providers.get(provider).serialize(with_policy(_request(), provider, "2h"))
    assert str(caught.value) == (
        f"{provider}: settings option 'cache_ttl' must be one of "
        "['5m', '1h', 'auto', 'turn'], not '2h'"
    )


def test_the_providers_schema_takes_auto_and_turn_on_the_marker_wires() -> None:
    from prefixlock.spec.loader import load_yaml_text
    from prefixlock.spec.validate import validate_document

    for name, _ in WIRES:
        for value in ("5m", "1h", "auto", "turn"):
            options = f"{{cache_ttl: {value}}}"
            text = f"providers:\n  {name}: {{model: m, max_tokens: 1, options: {options}}}\n"
            assert validate_document(load_yaml_text(text, "x.yaml"), "providers") == []


# --- properties over random conversations ------------------------------------------------


#: Per turn: tool rounds, and per round the output's repetitions of a 40-byte line.
_SHAPES = st.lists(st.lists(st.integers(1, 300), max_size=4), min_size=2, max_size=3)


def _conversation(shape: list[list[int]]) -> list[Any]:
    conv = open_conv()
    requests = []
    for t, rounds in enumerate(shape):
        requests.append(conv.handle(user(f"u{t}", f"task {t}")))
        for r, size in enumerate(rounds):
            call = f"c{t}-{r}"
            conv.assistant(None, [ToolCall(call, "read_file", {"path": f"f{r}.py"})])
            requests.append(conv.tool_results([ToolResult(call, f"line {t} {r} {size}\n" * size)]))
        conv.assistant("Done.")
    return requests


@settings(max_examples=8, deadline=None)
@given(_SHAPES)
def test_auto_never_places_a_longer_ttl_after_a_shorter_one(shape: list[list[int]]) -> None:
    for provider, key in WIRES:
        wire = providers.get(provider)
        for request in _conversation(shape):
            body = json.loads(wire.serialize(with_policy(request, provider, "auto")))
            ttls = [ttl for _, ttl in _processing_order(_marks(body, key))]
            assert len(ttls) <= 4
            assert ttls == sorted(ttls, key=lambda t: t != "1h"), ttls


@settings(max_examples=8, deadline=None)
@given(_SHAPES)
def test_without_pauses_auto_costs_5m_plus_its_one_hour_premium(shape: list[list[int]]) -> None:
    """Calls 8 s apart (nothing expires): auto's cost exceeds 5m's by at most its
    documented premium (docs/cache-policy.md): (2 - 1.25) x its one-hour write tokens,
    and on Bedrock the tokens its per-checkpoint minimum leaves uncached after the turn
    marker (a tail checkpoint needs 1,024 tokens since the previous one), at most the
    base price each."""
    requests = _conversation(shape)
    for provider, _ in WIRES:
        wire = providers.get(provider)
        model = requests[0].settings_for(provider).model
        runs = {}
        for policy in ("5m", "auto"):
            sim = Simulation(provider, model=model)
            for i, request in enumerate(requests):
                sim.add(wire.serialize(with_policy(request, provider, policy)), 8.0 * i)
            runs[policy] = sim
        five, auto = runs["5m"].report(), runs["auto"].report()
        one_hour = sum(c.cache_write_1h_tokens for c in auto.calls)
        uncached = sum(
            max(
                a.uncached_tokens + a.cache_write_tokens - f.uncached_tokens - f.cache_write_tokens,
                0,
            )
            for f, a in zip(five.calls, auto.calls, strict=True)
        )
        if provider == "anthropic":
            assert uncached == 0  # no per-checkpoint minimum: only the premium
        assert auto.cost <= five.cost + Fraction(3, 4) * one_hour + uncached, provider


# --- OpenAI explicit breakpoints (GPT-5.6 and later; issue 45, item 3) --------------------

#: The OpenAI wires, and their history member.
OPENAI_WIRES = [("openai-chat", "messages"), ("openai-responses", "input")]
#: A model that takes prompt_cache_breakpoint.
GPT_56 = "gpt-5.6-sol"
BREAKPOINT = "prompt_cache_breakpoint"


def _on(request: Any, provider: str, model: str) -> Any:
    settings = tuple(
        attrs.evolve(s, model=model) if s.provider == provider else s for s in request.settings
    )
    return attrs.evolve(request, settings=settings)


def _openai_bodies(provider: str, policy: str, model: str = GPT_56) -> list[bytes]:
    scenario = load_scenario(SCENARIO)
    wire = providers.get(provider)
    out = []
    for call in replay(scenario):
        request = with_policy(_on(call.request, provider, model), provider, policy)
        out.append(serialize_at(scenario, attrs.evolve(call, request=request), wire))
    return out


def _breakpoints(body: Any, history: str) -> list[tuple[str, str]]:
    """(path, ttl) of every breakpoint ("30m": none, the request's default)."""
    return [
        (f"$.{history}[{i}].content[{j}]", part[BREAKPOINT].get("ttl", "30m"))
        for i, item in enumerate(body[history])
        for j, part in enumerate(
            item.get("content") if isinstance(item.get("content"), list) else []
        )
        if isinstance(part, dict) and BREAKPOINT in part
    ]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize(("provider", "history"), OPENAI_WIRES)
def test_openai_golden_bodies_per_policy(provider: str, history: str, policy: str) -> None:
    bodies = _openai_bodies(provider, policy)
    for value in _golden_values(provider, policy, bodies):
        ttls = [ttl for _, ttl in _breakpoints(value, history)]
        assert 1 <= len(ttls) <= 4
        if policy == "5m":
            assert set(ttls) == {"30m"} and "prompt_cache_options" not in value
        if policy == "1h":
            assert set(ttls) == {"12h"}
            options = {"prompt_cache_options": {"ttl": "12h"}}
            assert value.get("prompt_cache_options") == options.get(
                "prompt_cache_options" if provider == "openai-responses" else ""
            )
        assert_valid(provider, value)


def test_openai_auto_marks_root_context_and_turns_where_anthropic_does() -> None:
    """Chat, the golden case's calls (u1, its loop, u2 with a new context, its loop):
    the first turn marks the developer message (root) and the context, 30 minutes;
    from u2 on the root, the new context and u2 are 12h, and u2's first call marks u1
    too (four breakpoints, the most one request writes). The tail is OpenAI's implicit
    breakpoint: no marker."""
    marks = [_breakpoints(json.loads(b), "messages") for b in _openai_bodies("openai-chat", "auto")]
    first = [("$.messages[0].content[0]", "30m"), ("$.messages[1].content[0]", "30m")]
    later = [
        ("$.messages[0].content[0]", "12h"),
        ("$.messages[6].content[0]", "12h"),
        ("$.messages[7].content[0]", "12h"),
    ]
    assert marks == [
        first,
        first,
        [
            ("$.messages[0].content[0]", "12h"),
            ("$.messages[2].content[0]", "12h"),
            ("$.messages[6].content[0]", "12h"),
            ("$.messages[7].content[0]", "12h"),
        ],
        later,
        later,
    ]
    body = json.loads(_openai_bodies("openai-chat", "auto")[2])
    assert body["messages"][6]["role"] == "user"  # the new request context
    assert body["messages"][0]["role"] == "developer"


def test_openai_responses_root_is_a_developer_item_with_its_breakpoint() -> None:
    """Responses' top-level ``instructions`` string takes no breakpoint; on a model with
    breakpoints the instructions go as the first input item, a developer message whose
    one ``input_text`` part carries the root's breakpoint (as Chat's developer message),
    and the body has no ``instructions``; the context item's breakpoint follows."""
    scenario = load_scenario(SCENARIO)
    [call, *_] = replay(scenario)
    instructions = call.request.instructions
    for policy, ttl in (("5m", None), ("1h", "12h")):
        body = json.loads(_openai_bodies("openai-responses", policy)[0])
        marker = {"mode": "explicit", **({"ttl": ttl} if ttl else {})}
        assert "instructions" not in body
        assert body["input"][0] == {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": instructions, BREAKPOINT: marker}],
        }
        assert _breakpoints(body, "input") == [
            ("$.input[0].content[0]", ttl or "30m"),
            ("$.input[1].content[0]", ttl or "30m"),
        ]
        assert body["input"][1]["role"] == "user"


@pytest.mark.parametrize("model", ["gpt-5", "gpt-4.1", "gpt-5.5"])
@pytest.mark.parametrize(("provider", "history"), OPENAI_WIRES)
def test_openai_models_before_5_6_get_no_breakpoint_and_their_old_form(
    provider: str, history: str, model: str
) -> None:
    """Before GPT-5.6 (the example's OpenAI models until issue 45): no breakpoint, no
    prompt_cache_options, a single text still a string, whatever cache_ttl says."""
    scenario = load_scenario(SCENARIO)
    wire = providers.get(provider)
    for call in replay(scenario):
        request = _on(call.request, provider, model)
        settings = tuple(
            attrs.evolve(s, options='{"prompt_cache_retention":"24h"}')
            if s.provider == provider
            else s
            for s in request.settings
        )
        body = serialize_at(
            scenario, attrs.evolve(call, request=attrs.evolve(request, settings=settings)), wire
        )
        assert BREAKPOINT.encode() not in body and b"prompt_cache_options" not in body
        value = json.loads(body)
        if provider == "openai-responses":  # the instructions stay the top-level string
            assert value["instructions"] == request.instructions
            assert value[history][0]["role"] == "user"
        users = [m for m in value[history] if m.get("role") == "user"]
        assert users and all(isinstance(m["content"], str) for m in users)


@pytest.mark.parametrize(("provider", "history"), OPENAI_WIRES)
def test_openai_breakpoints_are_stripped_for_the_prefix_check(provider: str, history: str) -> None:
    """Moving a breakpoint changes no content: without markers, every body of the
    conversation is a structural prefix of the next (append-only)."""
    wire = providers.get(provider)
    stripped = [wire.strip_cache_markers(json.loads(b)) for b in _openai_bodies(provider, "auto")]
    for before, after in itertools.pairwise(stripped):
        assert after[history][: len(before[history])] == before[history]
        assert BREAKPOINT not in json.dumps(after)


# --- cache_ttl as prompt_cache_retention before GPT-5.6 (issue 45, item 2) --------------


@pytest.mark.parametrize(
    ("model", "policy", "retention"),
    [
        ("gpt-4.1", "5m", "in_memory"),
        ("gpt-4.1", "1h", "24h"),
        ("gpt-5", "auto", "24h"),
        ("gpt-5.5", "1h", "24h"),
        ("gpt-5.5", "5m", None),  # 24h only: its default
        ("gpt-4o", "5m", None),  # in memory only: its default
    ],
)
@pytest.mark.parametrize(("provider", "history"), OPENAI_WIRES)
def test_cache_ttl_sends_the_retention_it_names_before_5_6(
    provider: str, history: str, model: str, policy: str, retention: str | None
) -> None:
    request = _on(_request(), provider, model)
    settings = tuple(
        attrs.evolve(s, options="{}") if s.provider == provider else s for s in request.settings
    )
    request = with_policy(attrs.evolve(request, settings=settings), provider, policy)
    body = json.loads(providers.get(provider).serialize(request))
    assert body.get("prompt_cache_retention") == retention
    assert "cache_ttl" not in body and BREAKPOINT not in json.dumps(body)


@pytest.mark.parametrize(("provider", "history"), OPENAI_WIRES)
def test_cache_ttl_refuses_a_retention_it_contradicts_and_a_model_without_24h(
    provider: str, history: str
) -> None:
    wire = providers.get(provider)
    request = _on(_request(), provider, "gpt-4.1")  # the example's options: 24h
    with pytest.raises(SerializationError) as caught:
        wire.serialize(with_policy(request, provider, "5m"))
    assert str(caught.value) == (
        f"{provider}: settings options.prompt_cache_retention: '24h' contradicts cache_ttl "
        "'5m', which sends prompt_cache_retention 'in_memory' on 'gpt-4.1': set one of them"
    )
    request = _on(_request(), provider, "gpt-4o")
    with pytest.raises(SerializationError) as caught:
        wire.serialize(with_policy(request, provider, "1h"))
    assert str(caught.value) == (
        f"{provider}: settings options.cache_ttl: '1h' asks for longer-lived cache entries, "
        "but 'gpt-4o' has neither extended prompt_cache_retention (24h) nor "
        "prompt_cache_breakpoint (GPT-5.6 and later)"
    )


# --- auto after a compaction (issue 45) ---------------------------------------------------


def _compacted(provider: str) -> list[Any]:
    """u1 and u2 each with a tool round, then u3 compacts automatically and runs one
    tool round: the two requests after the compaction, under ``auto``."""
    conv = open_conv()
    for t in (1, 2):
        conv.handle(user(f"u{t}", f"task {t}"))
        conv.assistant(None, [ToolCall(f"c{t}", "read_file", {"path": f"f{t}.py"})])
        conv.tool_results([ToolResult(f"c{t}", f"line {t}\n" * 50)])
        conv.assistant("Done.")
    first = conv.handle(user("u3", "task 3", compact={"summary": "We read f1 and f2."}))
    conv.assistant(None, [ToolCall("c3", "read_file", {"path": "f3.py"})])
    loop = conv.tool_results([ToolResult("c3", "line 3\n" * 50)])
    wire = providers.get(provider)
    return [json.loads(wire.serialize(with_policy(r, provider, "auto"))) for r in (first, loop)]


@pytest.mark.parametrize(("provider", "key"), WIRES)
def test_auto_places_one_hour_markers_after_a_compaction(provider: str, key: str) -> None:
    """After a compaction the new history (the context, the summary, the turn's message)
    is written again: auto marks it one-hour as from a second turn on (root, context,
    the summary as the previous opening message, the turn), not as a first turn's
    five-minute bodies, so a pause after it does not cost the whole compacted history
    again (before: the long-session case's call 28 was cold)."""
    first, loop = (_processing_order(_marks(body, key)) for body in _compacted(provider))
    assert [ttl for _, ttl in first] == ["1h", "1h", "1h", "1h"], first
    assert [ttl for _, ttl in loop] == ["1h", "1h", "1h", "5m"], loop
    body = _compacted(provider)[0]
    history = body["messages"]
    if provider == "anthropic":  # context, summary, u3: the summary and u3 one-hour
        assert [m["role"] for m in history] == ["user", "user", "user"]
        assert [path for path, _ in first] == [
            "$.system[0]",
            "$.messages[0].content[0]",
            "$.messages[1].content[0]",
            "$.messages[2].content[0]",
        ]
        assert [path for path, _ in loop][:3] == [
            "$.system[0]",
            "$.messages[0].content[0]",
            "$.messages[2].content[0]",
        ]
