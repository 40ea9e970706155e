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

ANTHROPIC = expected("anthropic", "turn1")  # thinking, redacted thinking, text, two calls
BEDROCK = expected("bedrock-converse", "turn1_reasoning_parallel_tools")
CLAUDE_ON_BEDROCK = "anthropic.claude-sonnet-4-5-20250929-v1:0"
EXAMPLE_CLAUDE = "claude-sonnet-5-5"  # rules/providers.yaml


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
    assert [i["type"] for i in openai["input"] if i.get("role") != "user"][:3] == [
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
