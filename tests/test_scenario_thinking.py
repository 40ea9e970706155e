"""A scenario's thinking / reasoning parts: each names the provider family whose
signature it carries, goes back to that wire as its reader records it, follows the
failover rule elsewhere (dropped from that body, never from the history; Claude thinking
goes to Claude on Bedrock too), and every invariant holds on every provider."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from prefixlock.core.errors import SpecErrors
from prefixlock.core.messages import OpaquePart, Part, TextPart
from prefixlock.core.model import MessageView
from prefixlock.providers.readers import reader
from prefixlock.review.replay import replay, replay_bodies
from prefixlock.review.scenario import load_scenario, thinking_part
from prefixlock.review.verify import verify_scenario
from prefixlock.spec.bundle import Bundle

#: The example bundle, built once for the module's scenarios.
BUNDLES: dict[Path, Bundle] = {}

ALL = [
    "anthropic",
    "openai-responses",
    "openai-chat",
    "gemini",
    "bedrock-converse",
    "bedrock-anthropic",
]

SCENARIO = """\
name: thinking
conversation: conv-think
steps:
  - user: {{event: u1, query: Fix the bug., timestamp: "2026-03-02T09:00:00Z"}}
  - assistant:
      thinking: {thinking}
      text: Reading.
      tool_calls: [{{id: c1, name: read_file, arguments: {{path: a.py}}}}]
  - tool_results: [{{call_id: c1, output: "x = 1"}}]
  - assistant: {{text: Fixed.}}
  - user: {{event: u2, query: Thanks., timestamp: "2026-03-02T09:01:00Z"}}
"""


def _write(tmp_path: Path, thinking: list[dict[str, Any]]) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(thinking=json.dumps(thinking)), encoding="utf-8")
    return path


def _assistant_blocks(name: str, body: dict[str, Any]) -> list[Any]:
    """The first assistant message's content blocks of a body (the Responses items
    after the first user message)."""
    if name == "openai-responses":
        return [i for i in body["input"] if i.get("role") not in ("user", "developer")]
    key, role, blocks = {
        "gemini": ("contents", "model", "parts"),
        "openai-chat": ("messages", "assistant", "content"),
    }.get(name, ("messages", "assistant", "content"))
    found: list[Any] = next(m for m in body[key] if m["role"] == role)[blocks]
    return found


def _bodies(path: Path) -> dict[str, list[dict[str, Any]]]:
    raw = replay_bodies(load_scenario(path, bundles=BUNDLES), ALL)
    return {name: [json.loads(b) for b in bodies] for name, bodies in raw.items()}


def _assert_on_converse_not_openai_or_gemini(
    bodies: dict[str, list[dict[str, Any]]], call: int, thinking: str, signature: str
) -> None:
    """Of the non-Messages wires, call ``call``'s Converse body alone carries the signed
    Claude thinking (as ``reasoningContent``, before the reply's text); the OpenAI and
    Gemini bodies carry neither its text nor its signature."""
    converse = _assistant_blocks("bedrock-converse", bodies["bedrock-converse"][call])
    assert converse[0] == {
        "reasoningContent": {"reasoningText": {"text": thinking, "signature": signature}}
    }
    assert "text" in converse[1]
    for name in ("openai-responses", "openai-chat", "gemini"):
        text = json.dumps(bodies[name][call])
        assert signature not in text and thinking not in text, name


CLAUDE = {"provider": "anthropic", "text": "Check a.py first.", "signature": "EqQBCkYIARgC"}


def test_claude_thinking_goes_to_both_claude_wires_and_nowhere_else(tmp_path: Path) -> None:
    path = _write(tmp_path, [CLAUDE, {"provider": "anthropic", "redacted": "EmwKAhgBEgy"}])
    bodies = _bodies(path)
    for call in range(1, 3):  # the reply is in the second and third call's history
        anthropic = _assistant_blocks("anthropic", bodies["anthropic"][call])
        assert anthropic[:2] == [
            {"type": "thinking", "thinking": "Check a.py first.", "signature": "EqQBCkYIARgC"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
        ]
        assert anthropic[2]["type"] == "text"
        # Claude on Bedrock: the same signature in Bedrock's block (redacted thinking
        # goes back only to the wire that made it)
        _assert_on_converse_not_openai_or_gemini(bodies, call, "Check a.py first.", "EqQBCkYIARgC")
    # never from the history
    calls = replay(load_scenario(path, bundles=BUNDLES))
    assistant = calls[1].request.messages[-2]
    assert assistant.parts[:2] == (
        OpaquePart(
            "anthropic",
            '{"signature":"EqQBCkYIARgC","thinking":"Check a.py first.","type":"thinking"}',
        ),
        OpaquePart("anthropic", '{"data":"EmwKAhgBEgy","type":"redacted_thinking"}'),
    )


def test_bedrock_anthropic_thinking_is_its_own_family(tmp_path: Path) -> None:
    """Claude thinking recorded on Bedrock's InvokeModel (``bedrock-anthropic``, the
    Messages body): its own family, so its redacted thinking goes back to that wire
    alone, and its signed thinking to every Claude wire (signatures are compatible
    across platforms) in each wire's block."""
    path = _write(
        tmp_path,
        [
            {"provider": "bedrock-anthropic", "text": "Check a.py first.", "signature": "EqQB"},
            {"provider": "bedrock-anthropic", "redacted": "EmwKAhgBEgy"},
        ],
    )
    bodies = _bodies(path)
    thinking = {"type": "thinking", "thinking": "Check a.py first.", "signature": "EqQB"}
    for call in range(1, 3):
        own = _assistant_blocks("bedrock-anthropic", bodies["bedrock-anthropic"][call])
        assert own[:2] == [thinking, {"type": "redacted_thinking", "data": "EmwKAhgBEgy"}]
        assert own[2]["type"] == "text"
        anthropic = _assistant_blocks("anthropic", bodies["anthropic"][call])
        assert anthropic[0] == thinking and anthropic[1]["type"] == "text"
        _assert_on_converse_not_openai_or_gemini(bodies, call, "Check a.py first.", "EqQB")
    calls = replay(load_scenario(path, bundles=BUNDLES))
    assert calls[1].request.messages[-2].parts[:2] == (
        OpaquePart(
            "bedrock-anthropic",
            '{"signature":"EqQB","thinking":"Check a.py first.","type":"thinking"}',
        ),
        OpaquePart("bedrock-anthropic", '{"data":"EmwKAhgBEgy","type":"redacted_thinking"}'),
    )


def test_openai_reasoning_goes_back_as_its_encrypted_item(tmp_path: Path) -> None:
    part = {"provider": "openai-responses", "summary": ["Look.", "Then fix."], "signature": "gAAAA"}
    path = _write(tmp_path, [part])
    bodies = _bodies(path)
    items = _assistant_blocks("openai-responses", bodies["openai-responses"][1])
    assert items[0] == {
        "type": "reasoning",
        "summary": [
            {"type": "summary_text", "text": "Look."},
            {"type": "summary_text", "text": "Then fix."},
        ],
        "encrypted_content": "gAAAA",
    }
    assert items[1]["type"] == "message"
    for name in ("anthropic", "openai-chat", "gemini", "bedrock-converse"):
        assert "gAAAA" not in json.dumps(bodies[name][1]), name


def test_gemini_thought_and_signature(tmp_path: Path) -> None:
    sig = "c2lnbmF0dXJl"
    path = _write(
        tmp_path,
        [
            {"provider": "gemini", "text": "Thinking.", "signature": sig},
            {"provider": "gemini", "signature": sig},
        ],
    )
    calls = replay(load_scenario(path, bundles=BUNDLES))
    assert calls[1].request.messages[-2].parts[1] == TextPart("", thought_signature=sig)
    bodies = _bodies(path)
    parts = _assistant_blocks("gemini", bodies["gemini"][1])
    assert parts[:2] == [
        {"text": "Thinking.", "thought": True, "thoughtSignature": sig},
        {"text": "", "thoughtSignature": sig},
    ]
    for name in ("anthropic", "openai-chat", "openai-responses", "bedrock-converse"):
        assert sig not in json.dumps(bodies[name][1]), name


def test_a_reply_of_thinking_alone_is_left_out_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            name: thinking only
            conversation: conv-think
            steps:
              - user: {event: u1, query: Hm., timestamp: "2026-03-02T09:00:00Z"}
              - assistant:
                  thinking: [{provider: openai-responses, summary: [], signature: gAAAA}]
              - user: {event: u2, query: "Well?", timestamp: "2026-03-02T09:01:00Z"}
            """
        ),
        encoding="utf-8",
    )
    bodies = _bodies(path)
    assert "assistant" not in [m["role"] for m in bodies["anthropic"][1]["messages"]]
    assert [i.get("type") for i in bodies["openai-responses"][1]["input"]][-3:] == [
        "message",
        "reasoning",
        "message",
    ]


@pytest.mark.parametrize(
    ("part", "message"),
    [
        (
            {"provider": "anthropic", "text": "x"},
            "a anthropic thinking part has text and signature (a thinking block), or redacted "
            "(redacted_thinking); got ['text']",
        ),
        (
            {"provider": "openai-responses", "text": "x", "signature": "g"},
            "a openai-responses thinking part has summary and signature (a reasoning item's "
            "encrypted_content); got ['signature', 'text']",
        ),
        (
            {"provider": "gemini", "signature": "not base64!"},
            "a gemini signature is base64 data, as the service sends it",
        ),
        (
            {"provider": "bedrock-converse", "redacted": "%%%"},
            "a bedrock-converse redacted is base64 data, as the service sends it",
        ),
        (
            {"provider": "bedrock-anthropic", "summary": ["x"]},
            "a bedrock-anthropic thinking part has text and signature (a thinking block), or "
            "redacted (redacted_thinking); got ['summary']",
        ),
    ],
)
def test_a_thinking_part_of_a_shape_its_provider_has_not_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, part: dict[str, Any], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, [CLAUDE, part])
    with pytest.raises(SpecErrors) as info:
        load_scenario(Path("s.yaml"), bundles=BUNDLES)
    field = {"gemini": ".signature", "bedrock-converse": ".redacted"}.get(part["provider"], "")
    if "base64" not in message:
        field = ""
    ((error,),) = [info.value.errors]
    assert str(error).startswith("s.yaml:")
    assert str(error).endswith(f"$.steps[1].assistant.thinking[1]{field}: {message}")


def test_an_unknown_provider_family_is_a_schema_error(tmp_path: Path) -> None:
    _write(tmp_path, [{"provider": "openai-chat", "text": "x"}])
    with pytest.raises(SpecErrors) as info:
        load_scenario(tmp_path / "s.yaml", bundles=BUNDLES)
    assert "$.steps[1].assistant.thinking[0].provider" in str(info.value)


def test_every_invariant_holds_with_every_family(tmp_path: Path) -> None:
    """One verify (it costs seconds) over a reply holding every family's parts."""
    path = _write(
        tmp_path,
        [
            CLAUDE,
            {"provider": "anthropic", "redacted": "EmwKAhgBEgy"},
            {"provider": "bedrock-converse", "text": "Hm.", "signature": "c2ln"},
            {"provider": "bedrock-converse", "redacted": "c2ln"},
            {"provider": "bedrock-anthropic", "text": "Hm.", "signature": "c2ln"},
            {"provider": "bedrock-anthropic", "redacted": "c2ln"},
            {"provider": "openai-responses", "summary": ["Look."], "signature": "gAAAA"},
            {"provider": "gemini", "text": "Thinking.", "signature": "c2ln"},
        ],
    )
    rows, failures = verify_scenario(load_scenario(path, bundles=BUNDLES), ALL)
    assert failures == []
    assert [row.prefix_stable for row in rows] == [True] * len(ALL)


def test_carried_requests_stay_views_of_one_list(tmp_path: Path) -> None:
    """What another provider takes is kept as one append-only list per history list,
    so its successive requests are views of one list (it encodes only what is new), and
    a request holding nothing foreign is handed on as it is."""
    path = _write(tmp_path, [CLAUDE])
    calls = replay(load_scenario(path, bundles=BUNDLES))
    assert calls[0].request_for("openai-chat") is calls[0].request  # nothing foreign yet
    assert calls[1].request_for("anthropic") is calls[1].request  # its own thinking
    later = [call.request_for("openai-chat").messages for call in calls[1:]]
    assert all(isinstance(m, MessageView) for m in later)
    assert later[0].shared_with(later[1]) == len(later[0])
    assert [m.id for m in later[1]] == [m.id for m in calls[2].request.messages]
    carried = next(m for m in later[1] if m.id == "assistant:1")
    assert not any(isinstance(p, OpaquePart) for p in carried.parts)
    kept = next(m for m in calls[2].request.messages if m.id == "assistant:1")
    assert carried.parts == kept.parts[1:]  # the text and the call, the thinking dropped


RESPONSES = Path(__file__).parent / "data" / "responses"


def _entry(provider: str, part: Part) -> dict[str, Any]:
    """The scenario thinking entry a converter writes for a part a reader recorded."""
    if isinstance(part, TextPart):  # Gemini's signature on a blank text part
        return {"provider": provider, "signature": part.thought_signature}
    assert isinstance(part, OpaquePart)
    value = part.value
    if provider in ("anthropic", "bedrock-anthropic"):
        if value["type"] == "redacted_thinking":
            return {"provider": provider, "redacted": value["data"]}
        return {"provider": provider, "text": value["thinking"], "signature": value["signature"]}
    if provider == "bedrock-converse":
        inner = value["reasoningContent"]
        if "redactedContent" in inner:
            return {"provider": provider, "redacted": inner["redactedContent"]}
        return {"provider": provider, **inner["reasoningText"]}
    if provider == "gemini":
        extra = {"signature": value["thoughtSignature"]} if "thoughtSignature" in value else {}
        return {"provider": provider, "text": value["text"], **extra}
    summary = [s["text"] for s in value["summary"]]
    return {"provider": provider, "summary": summary, "signature": value["encrypted_content"]}


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("anthropic", "turn1.json"),
        ("anthropic", "turn2.json"),
        ("bedrock-anthropic", "turn1.json"),
        ("bedrock-anthropic", "turn2.json"),
        ("bedrock-converse", "turn1_reasoning_parallel_tools.json"),
        ("bedrock-converse", "turn2_redacted_edit.json"),
        ("gemini", "turn1.json"),
        ("openai-responses", "tool_calls.json"),
        ("openai-responses", "final.json"),
    ],
)
def test_a_thinking_part_is_what_the_reader_records(provider: str, name: str) -> None:
    """Round trip: a recorded response's thinking, written as a scenario part, is the part
    the provider's reader made (an OpenAI reasoning item without its id: no input item
    carries one, the serializer drops it)."""
    output = reader(provider).parse_response((RESPONSES / provider / name).read_bytes())
    recorded = [
        p for p in output.parts if isinstance(p, OpaquePart) and p.value.get("type") != "text"
    ]
    assert recorded
    for part in recorded:
        made = thinking_part(_entry(provider, part), "$", _never)
        assert isinstance(made, OpaquePart)
        if provider == "openai-responses":
            assert made.value == {k: v for k, v in part.value.items() if k not in ("id", "status")}
        else:
            assert made == part


def _never(path: str, message: str, *, at_key: bool = False) -> None:
    raise AssertionError(f"{path}: {message}")
