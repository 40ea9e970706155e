"""Failover and per-call model: one call on another provider or model, the history kept.

Rules (prefixlock.runtime.failover): Claude thinking signatures stay between Claude
platforms (Anthropic documents them valid across platforms), in the target's block
shape; an opaque Anthropic text block becomes its text; every other foreign opaque part
is left out of that call's body, never out of the history.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
from conv_helpers import CONTEXT_A, open_conv, user
from http_support import expected
from prefixlock import providers
from prefixlock.core import canonical
from prefixlock.core.errors import SerializationError, UnknownNameError, UsageError
from prefixlock.core.messages import OpaquePart
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers.base import Listener
from prefixlock.providers.transport import HttpRequest
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.tools import ToolResult
from sdk_judge import assert_valid

ANTHROPIC = expected("anthropic", "turn1")  # thinking, redacted thinking, text, two calls
BEDROCK = expected("bedrock-converse", "turn1_reasoning_parallel_tools")
CLAUDE_ON_BEDROCK = "anthropic.claude-sonnet-4-5-20250929-v1:0"
EXAMPLE_CLAUDE = "claude-sonnet-5-5"  # rules/providers.yaml
#: Gemini 3's dummy signature for a call it did not make (prefixlock.providers.gemini).
SKIP = "skip_thought_signature_validator"


def _answered(output: ModelOutput) -> Conversation:
    conv = open_conv()
    conv.handle(user("u1", context=CONTEXT_A))
    conv.record(output)
    conv.tool_results([ToolResult(c.call_id, "ok") for c in output.tool_calls])
    return conv


def _body(conv: Conversation, provider: str, model: str | None = None) -> dict[str, Any]:
    request = conv.request(provider=provider, model=model)
    value = json.loads(providers.get(provider).serialize(request))
    assert isinstance(value, dict)
    return value


def _thinking(output: ModelOutput) -> tuple[str, str]:
    value = output.parts[0]
    assert isinstance(value, OpaquePart) and value.provider == "anthropic"
    block = value.value
    return block["thinking"], block["signature"]


def test_without_failover_the_foreign_thinking_is_refused_as_before() -> None:
    conv = _answered(ANTHROPIC)
    with pytest.raises(SerializationError, match="opaque part of provider 'anthropic'"):
        providers.get("bedrock-converse").serialize(conv.request())


def test_anthropic_thinking_goes_to_claude_on_bedrock_with_its_signature() -> None:
    conv = _answered(ANTHROPIC)
    before = list(conv.history.messages)
    body = _body(conv, "bedrock-converse")
    text, signature = _thinking(ANTHROPIC)
    assistant = [m for m in body["messages"] if m["role"] == "assistant"]
    assert len(assistant) == 1
    content = assistant[0]["content"]
    # thinking kept (Bedrock's shape, same signature); redacted thinking left out (rule 4)
    assert content[0] == {
        "reasoningContent": {"reasoningText": {"text": text, "signature": signature}}
    }
    assert [next(iter(block)) for block in content] == [
        "reasoningContent",
        "text",
        "toolUse",
        "toolUse",
    ]
    assert conv.history.messages == before  # the history is untouched


def test_bedrock_claude_reasoning_goes_to_anthropic_as_a_thinking_block() -> None:
    conv = open_conv()
    conv.handle(user("u1", context=CONTEXT_A))
    conv.record(BEDROCK)
    conv.tool_results([ToolResult(c.call_id, "ok") for c in BEDROCK.tool_calls])
    reasoning = [
        p.value["reasoningContent"]["reasoningText"]
        for p in BEDROCK.parts
        if isinstance(p, OpaquePart) and "reasoningText" in p.value["reasoningContent"]
    ]
    body = _body(conv, "anthropic", "claude-sonnet-4-5")
    (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
    thinking = [b for b in assistant["content"] if b["type"] == "thinking"]
    assert thinking == [
        {"type": "thinking", "thinking": r["text"], "signature": r["signature"]} for r in reasoning
    ]
    assert reasoning  # the fixture has signed reasoning


def test_thinking_to_a_model_that_is_not_claude_is_left_out() -> None:
    conv = _answered(ANTHROPIC)
    request = conv.request(provider="bedrock-converse", model="amazon.nova-pro-v1:0")
    # The example's Bedrock settings ask for one-hour entries (cache_ttl: auto), which the
    # service refuses for a model of another vendor: the retargeted call says so.
    with pytest.raises(SerializationError, match="only supported for Anthropic models"):
        providers.get("bedrock-converse").serialize(request)
    five_minutes = tuple(
        attrs.evolve(s, options=canonical.dumps({**s.options_value, "cache_ttl": "5m"}))
        if s.provider == "bedrock-converse"
        else s
        for s in request.settings
    )
    body = json.loads(
        providers.get("bedrock-converse").serialize(attrs.evolve(request, settings=five_minutes))
    )
    assert body["messages"][1]["content"][0] == {"text": ANTHROPIC.text}
    assert "reasoningContent" not in json.dumps(body)
    openai = _body(conv, "openai-responses")
    assert ANTHROPIC.parts[0].data not in json.dumps(openai)  # type: ignore[union-attr]
    # the first item is the developer message holding the instructions (GPT-5.6)
    assert [i["type"] for i in openai["input"] if i.get("role") not in ("user", "developer")][
        :3
    ] == [
        "message",
        "function_call",
        "function_call",
    ]


def test_a_per_call_model_is_that_calls_model_only() -> None:
    conv = _answered(ANTHROPIC)
    assert _body(conv, "anthropic", "claude-opus-4-6")["model"] == "claude-opus-4-6"
    assert _body(conv, "anthropic")["model"] == EXAMPLE_CLAUDE
    plain = providers.get("anthropic").serialize(conv.request())
    assert json.loads(plain)["model"] == EXAMPLE_CLAUDE
    assert conv.request(provider="anthropic") is not None


def test_a_provider_that_is_not_configured_is_named() -> None:
    conv = _answered(ANTHROPIC)
    with pytest.raises(UnknownNameError) as caught:
        conv.request(provider="bedrock")
    assert str(caught.value).startswith(
        "provider 'bedrock' is not configured for this conversation ("
    )
    with pytest.raises(UsageError) as usage:
        conv.request(model="claude-opus-4-1")
    assert str(usage.value) == (
        "request(model='claude-opus-4-1'): name the provider too, this conversation is "
        "configured for anthropic, bedrock-anthropic, bedrock-converse, gemini, openai-chat, "
        "openai-responses"
    )


class Client:
    """A client of the runtime's protocol on ``provider``: answers, keeps the bodies."""

    def __init__(self, provider: str, output: ModelOutput) -> None:
        self.provider = provider
        self.output = output
        self.bodies: list[bytes] = []

    def send(self, call: HttpRequest) -> ModelOutput:
        self.bodies.append(call.body)
        return self.output

    def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput:
        return self.send(call)


def test_call_fails_over_to_claude_on_bedrock_and_records_its_answer() -> None:
    conv = _answered(ANTHROPIC)
    final = expected("bedrock-converse", "turn3_final_text")
    client = Client("bedrock-converse", final)
    model = "us." + CLAUDE_ON_BEDROCK
    expected_body = providers.get("bedrock-converse").serialize(
        conv.request(provider="bedrock-converse", model=model)
    )
    assert conv.call(client, model=model) == final
    assert client.bodies == [expected_body]
    _, signature = _thinking(ANTHROPIC)
    assert f'"signature":"{signature}"'.encode() in expected_body
    assert conv.history.messages[-1].parts == final.parts  # recorded as Bedrock's own
    # The next call back on Anthropic: Bedrock's answer has no opaque part, Anthropic's own
    # thinking goes back as it came.
    back = _body(conv, "anthropic")
    first = next(m for m in back["messages"] if m["role"] == "assistant")
    assert first["content"][0] == ANTHROPIC.parts[0].value  # type: ignore[union-attr]


def test_each_model_is_its_own_cache_namespace_in_the_simulator() -> None:
    from prefixlock.cache.simulator import simulate

    conv = _answered(ANTHROPIC)
    wire = providers.get("anthropic")
    sonnet = wire.serialize(conv.request())
    opus = wire.serialize(conv.request(provider="anthropic", model="claude-opus-4-1"))
    report = simulate("anthropic", [sonnet, sonnet, opus, sonnet])
    reads = [c.cache_read_tokens for c in report.calls]
    writes = [c.cache_write_tokens for c in report.calls]
    # The switch to another model reads nothing (a cache reset) and writes its prefix;
    # the first model's entries are still there for the call after.
    assert reads[0] == 0 and reads[1] > 0 and reads[2] == 0 and reads[3] == reads[1]
    assert writes[2] == writes[0] > 0


# -- one rule per part kind, to a target that does not take the part: exact bodies ------

_READ_APP = {"path": "src/app.py"}
_READ_TEST = {"lines": [1, 40], "path": "tests/test_app.py"}
_CALL_APP, _CALL_TEST = "toolu_01A09q90qw90lq917835lq9", "toolu_01B2c3d4e5f6g7h8i9j0k1l2"

#: (answer fixture, target) -> the body's model turn(s) for that call, exactly.
EXACT: dict[tuple[str, str, str], list[dict[str, Any]]] = {
    # Claude thinking (signed) and redacted thinking to Gemini: both left out; Gemini's
    # thoughtSignature is Gemini's own, a Claude signature is never sent as one.
    # The example's gemini-4-argon (Gemini 3 and later) refuses a step whose first call
    # has no thoughtSignature: Claude's first call gets the documented dummy signature.
    ("anthropic", "turn1", "gemini"): [
        {
            "role": "model",
            "parts": [
                {"text": "I'll read the module and its test."},
                {
                    "functionCall": {"id": _CALL_APP, "name": "read_file", "args": _READ_APP},
                    "thoughtSignature": SKIP,
                },
                {"functionCall": {"id": _CALL_TEST, "name": "read_file", "args": _READ_TEST}},
            ],
        }
    ],
    # Gemini's thought part and the thoughtSignature of its call to Claude: left out
    # (they only go back to Gemini); the text and the calls stay.
    ("gemini", "turn1", "anthropic"): [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll read the module and its test."},
                {"type": "tool_use", "id": "call-8f2a1c", "name": "read_file", "input": _READ_APP},
                {
                    "type": "tool_use",
                    "id": "call-3b7d90",
                    "name": "read_file",
                    "input": _READ_TEST,
                },
            ],
        }
    ],
    ("gemini", "turn1", "bedrock-converse"): [
        {
            "role": "assistant",
            "content": [
                {"text": "I'll read the module and its test."},
                {"toolUse": {"toolUseId": "call-8f2a1c", "name": "read_file", "input": _READ_APP}},
                {
                    "toolUse": {
                        "toolUseId": "call-3b7d90",
                        "name": "read_file",
                        "input": _READ_TEST,
                    }
                },
            ],
        }
    ],
    # OpenAI encrypted reasoning to every other provider: left out.
    ("openai-responses", "tool_calls", "anthropic"): [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll read both files."},
                {"type": "text", "text": " Then I'll run the test."},
                {
                    "type": "tool_use",
                    "id": "call_Qw12Er34Ty56",
                    "name": "read_file",
                    "input": {"path": "a.py"},
                },
                {
                    "type": "tool_use",
                    "id": "call_Ui78Op90As12",
                    "name": "read_file",
                    "input": {"limit": 200, "path": "tests/test_a.py"},
                },
            ],
        }
    ],
    ("openai-responses", "tool_calls", "gemini"): [
        {
            "role": "model",
            "parts": [
                {"text": "I'll read both files."},
                {"text": " Then I'll run the test."},
                {
                    "functionCall": {
                        "id": "call_Qw12Er34Ty56",
                        "name": "read_file",
                        "args": {"path": "a.py"},
                    },
                    "thoughtSignature": SKIP,
                },
                {
                    "functionCall": {
                        "id": "call_Ui78Op90As12",
                        "name": "read_file",
                        "args": {"limit": 200, "path": "tests/test_a.py"},
                    }
                },
            ],
        }
    ],
    ("openai-responses", "tool_calls", "openai-chat"): [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "I'll read both files."},
                {"type": "text", "text": " Then I'll run the test."},
            ],
            "tool_calls": [
                {
                    "id": "call_Qw12Er34Ty56",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
                },
                {
                    "id": "call_Ui78Op90As12",
                    "type": "function",
                    "function": {
                        "name": "read_file",
                        "arguments": '{"path":"tests/test_a.py","limit":200}',
                    },
                },
            ],
        }
    ],
}


def _model_turns(provider: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    turns = body["contents"] if provider == "gemini" else body["messages"]
    return [t for t in turns if t["role"] in ("assistant", "model")]


@pytest.mark.parametrize(("source", "name", "target"), sorted(EXACT))
def test_a_part_the_target_does_not_take_is_left_out_of_that_calls_body_only(
    source: str, name: str, target: str
) -> None:
    output = expected(source, name)
    conv = _answered(output)
    before = list(conv.history.messages)
    body = _body(conv, target)
    assert _model_turns(target, body) == EXACT[(source, name, target)]
    # The history keeps every part, and its own provider still gets them all back.
    assert conv.history.messages == before
    assert [m.parts for m in before if m.kind.value == "assistant"] == [output.parts]
    own = providers.get(source).serialize(conv.request(provider=source)).decode()
    opaque = [
        json.dumps(part.value[key], ensure_ascii=False)
        for part in output.opaque
        for key in ("signature", "data", "encrypted_content", "text")
        if key in part.value
    ]
    assert opaque and all(value in own for value in opaque)
    signed = [c.thought_signature for c in output.tool_calls if c.thought_signature]
    assert all(f'"thoughtSignature":"{s}"' in own for s in signed)
    assert not any(s in json.dumps(body) for s in signed)
    if source != "gemini":  # the dummy signature is never in the history
        assert SKIP not in json.dumps([m.to_json() for m in before])


# -- Gemini 3 and later: a function call Gemini did not make gets the dummy signature ---

_APP_CALL = {"id": _CALL_APP, "name": "read_file", "args": _READ_APP}
_TEST_CALL = {"id": _CALL_TEST, "name": "read_file", "args": _READ_TEST}
#: Claude's turn-1 step on a Gemini 3 model: the first call signed with the dummy.
_CLAUDE_STEP_SIGNED = {
    "role": "model",
    "parts": [
        {"text": "I'll read the module and its test."},
        {"functionCall": _APP_CALL, "thoughtSignature": SKIP},
        {"functionCall": _TEST_CALL},
    ],
}


def test_failover_to_gemini_3_mid_tool_loop_signs_the_first_call_of_each_step() -> None:
    """Anthropic answered with two parallel calls; the next call of the loop goes to
    gemini-3-pro-preview: the step's first call carries the dummy signature Google
    documents for calls another model made, the parallel one none (Gemini 3 validates
    the first call of each step), the results as they are. The history is untouched."""
    conv = _answered(ANTHROPIC)
    before = list(conv.history.messages)
    body = _body(conv, "gemini", "gemini-3-pro-preview")
    assert body["contents"][2:] == [
        _CLAUDE_STEP_SIGNED,
        {
            "role": "user",
            "parts": [
                {"functionResponse": {**_named(_CALL_APP), "response": {"output": "ok"}}},
                {"functionResponse": {**_named(_CALL_TEST), "response": {"output": "ok"}}},
            ],
        },
    ]
    assert conv.history.messages == before
    assert_valid("gemini", body)


def _named(call_id: str) -> dict[str, str]:
    return {"id": call_id, "name": "read_file"}


def test_gemini_2_5_gets_no_dummy_signature() -> None:
    """Gemini 2.5 does not refuse an unsigned call: its body carries the calls as made."""
    body = _body(_answered(ANTHROPIC), "gemini", "gemini-2.5-flash")
    assert body["contents"][2] == {
        "role": "model",
        "parts": [
            {"text": "I'll read the module and its test."},
            {"functionCall": _APP_CALL},
            {"functionCall": _TEST_CALL},
        ],
    }
    assert SKIP not in json.dumps(body)


def test_the_dummy_signature_stays_when_the_turn_ends() -> None:
    """The service validates only the current turn's calls, but the signature is kept on
    an earlier turn's call too: the next turn's body starts with the same bytes (the
    append-only invariant), and its model turn is the same."""
    conv = _answered(ANTHROPIC)
    wire = providers.get("gemini")
    first = wire.serialize(conv.request(provider="gemini", model="gemini-3-pro-preview"))
    conv.record(expected("anthropic", "turn2"))
    conv.handle(user("u2", "and the docs", context=CONTEXT_A))
    second = wire.serialize(conv.request(provider="gemini", model="gemini-3-pro-preview"))
    head = first[: first.index(b',"contents":[') + len(b',"contents":[')]
    history = first[len(head) :].rsplit(b"]", 1)[0]
    assert second.startswith(head + history + b",")
    assert json.loads(second)["contents"][2] == _CLAUDE_STEP_SIGNED


def test_gemini_own_signature_is_kept_and_nothing_is_added_to_its_step() -> None:
    """A step Gemini made carries its signature on the first call (Gemini 3's rule): it
    goes back as received on a Gemini 3 model, the parallel call unsigned, no dummy."""
    conv = _answered(expected("gemini", "turn1"))
    body = _body(conv, "gemini", "gemini-3-pro-preview")
    step = next(c for c in body["contents"] if c["role"] == "model")
    calls = [p for p in step["parts"] if "functionCall" in p]
    assert [c.get("thoughtSignature") for c in calls] == [
        "CiQB0e2Kb7TqHqYqgV8sdVJ5Q2oYb0q1Zt3vN6hX9kTq1bOeY2E=",
        None,
    ]
    assert SKIP not in json.dumps(body)
