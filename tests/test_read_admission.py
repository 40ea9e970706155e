"""Readers validate what they read against the wire schema and run the admission checks
before they return an output (issue 43, finding 4): a part the provider would refuse when
it is sent back is a ``ResponseError``, never recorded; a value of the wrong type is a
``ResponseError``, never an ``AttributeError``, ``TypeError`` or ``KeyError``; and what
a stream's grammar shows of a lost or repeated event is caught (docs/providers.md,
"Stream integrity")."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from prefixlock.core.errors import ResponseError
from prefixlock.providers.readers import reader
from prefixlock.providers.readers.eventstream import encode_frame
from read_support import fixture

HINT = " (do not retry as is)"


def whole(provider: str, name: str) -> dict[str, Any]:
    value = json.loads(fixture(provider, name))
    assert isinstance(value, dict)
    return value


def refused(provider: str, body: Any) -> str:
    with pytest.raises(ResponseError) as caught:
        reader(provider).parse_response(json.dumps(body).encode())
    assert not caught.value.retry_safe
    return str(caught.value)


def refused_stream(provider: str, data: bytes) -> str:
    stream = reader(provider).stream_reader()
    with pytest.raises(ResponseError) as caught:
        stream.feed(data)
        stream.result()
    assert not caught.value.retry_safe
    return str(caught.value)


def sse(*events: tuple[str | None, Any]) -> bytes:
    out = ""
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out += f"{head}data: {json.dumps(data)}\n\n"
    return out.encode()


# -- parts a provider refuses when they are sent back ----------------------------------


def test_an_anthropic_thinking_block_without_its_signature_is_refused() -> None:
    body = whole("anthropic", "turn1.json")
    del body["content"][0]["signature"]
    assert refused("anthropic", body) == (
        "anthropic content block 0 'thinking': 'signature' is missing" + HINT
    )
    body["content"][0]["signature"] = ""
    assert refused("anthropic", body) == (
        "anthropic content block 0 'thinking': the signature is empty" + HINT
    )


def test_an_anthropic_cited_text_that_is_blank_is_refused() -> None:
    body = whole("anthropic", "cited.json")
    cited = next(i for i, b in enumerate(body["content"]) if b.get("citations"))
    body["content"][cited]["text"] = "  \n"
    assert refused("anthropic", body) == (
        f"anthropic content block {cited} 'text': a cited text is blank" + HINT
    )


def test_an_unknown_anthropic_block_is_refused_not_dropped() -> None:
    """A mangled ``tool_use`` was once kept as an opaque block: the call was lost."""
    body = whole("anthropic", "turn1.json")
    body["content"][3]["type"] = "tool_usx"
    assert refused("anthropic", body) == (
        "anthropic content block 3 'tool_usx': unknown content block type" + HINT
    )


def test_an_anthropic_citation_of_the_wrong_shape_is_refused() -> None:
    body = whole("anthropic", "cited.json")
    cited = next(i for i, b in enumerate(body["content"]) if b.get("citations"))
    body["content"][cited]["citations"][0]["document_index"] = "0"
    assert refused("anthropic", body) == (
        f"anthropic content block {cited} 'text'.citations[0].document_index: expected an "
        "integer" + HINT
    )


def test_a_gemini_thought_signature_that_is_not_base64_is_refused() -> None:
    body = whole("gemini", "turn1.json")
    body["candidates"][0]["content"]["parts"][2]["thoughtSignature"] = "not base64!"
    assert refused("gemini", body) == (
        "gemini part 2.thoughtSignature: expected base64 text" + HINT
    )


def test_a_gemini_part_with_two_data_members_or_an_unknown_one_is_refused() -> None:
    body = whole("gemini", "turn1.json")
    parts = body["candidates"][0]["content"]["parts"]
    parts[1]["functionCall"] = {"name": "x"}
    assert refused("gemini", body) == (
        "gemini part 1: a Part holds exactly one of codeExecutionResult, executableCode, "
        "fileData, functionCall, functionResponse, inlineData, text, not 2" + HINT
    )
    del parts[1]["functionCall"]
    parts[0]["thought_x"] = True
    assert refused("gemini", body) == (
        "gemini part 0: unknown member 'thought_x' (it could not be sent back)" + HINT
    )


def test_a_bedrock_reasoning_signature_that_is_not_base64_is_refused() -> None:
    body = whole("bedrock-converse", "turn1_reasoning_parallel_tools.json")
    block = body["output"]["message"]["content"][0]["reasoningContent"]
    block["reasoningText"]["signature"] = "not base64!"
    assert refused("bedrock-converse", body) == (
        "response.output.message.content[0].reasoningContent.reasoningText.signature: "
        "expected base64 text" + HINT
    )


def test_a_bedrock_streamed_signature_that_is_not_base64_is_refused() -> None:
    events = json.loads(fixture("bedrock-converse", "turn1_reasoning_parallel_tools.stream.json"))
    for item in events:
        reasoning = item["payload"].get("delta", {}).get("reasoningContent", {})
        if "signature" in reasoning:
            reasoning["signature"] += "!"
    data = b"".join(
        encode_frame(
            {":event-type": e["event"], ":message-type": "event"}, json.dumps(e["payload"]).encode()
        )
        for e in events
    )
    assert refused_stream("bedrock-converse", data) == (
        "block 0: reasoningContent.reasoningText.signature: expected base64 text" + HINT
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda item: item.update(summary="thought"),
            "openai-responses output[0] 'reasoning'.summary: expected an array",
        ),
        (
            lambda item: item.pop("id"),
            "openai-responses output[0] 'reasoning': 'id' is missing",
        ),
        (
            lambda item: item.update(summary=[{"type": "summary_text", "text": 1}]),
            "openai-responses output[0] 'reasoning'.summary[0].text: expected a string",
        ),
        (
            lambda item: item.update(status="done"),
            "openai-responses output[0] 'reasoning'.status: unknown status 'done'",
        ),
    ],
)
def test_a_malformed_responses_reasoning_item_is_refused(change: Any, message: str) -> None:
    body = whole("openai-responses", "tool_calls.json")
    assert body["output"][0]["type"] == "reasoning"
    change(body["output"][0])
    assert refused("openai-responses", body) == message + HINT


def test_a_text_that_is_not_a_string_is_refused() -> None:
    """Once accepted, and then a crash in ``record()``."""
    body = whole("openai-responses", "final.json")
    message = next(i for i, item in enumerate(body["output"]) if item["type"] == "message")
    body["output"][message]["content"][0]["text"] = 0
    assert refused("openai-responses", body) == (
        f"openai-responses output[{message}].content[0].text: expected a string" + HINT
    )
    chat = whole("openai-chat", "final.json")
    chat["choices"][0]["message"]["content"] = ["a"]
    assert refused("openai-chat", chat) == (
        "openai-chat response: choice.message.content: expected a string or null" + HINT
    )


def test_a_part_the_answering_provider_refuses_is_refused_by_its_reader() -> None:
    """The admission checks run before an output is returned (here Bedrock's
    ``toolUseId`` pattern, ``[a-zA-Z0-9_.:-]{1,64}``)."""
    body = whole("bedrock-converse", "turn1_reasoning_parallel_tools.json")
    body["output"]["message"]["content"][2]["toolUse"]["toolUseId"] = "tooluse 7f"
    assert refused("bedrock-converse", body) == (
        "bedrock-converse response: bedrock-converse: message 'assistant:read' part 2: tool "
        "use id 'tooluse 7f' must be 1-64 characters of a-z, A-Z, 0-9, '_.:-': it could not "
        "be sent back" + HINT
    )


def test_a_tool_call_id_used_twice_in_one_output_is_refused() -> None:
    body = whole("gemini", "turn1.json")
    parts = body["candidates"][0]["content"]["parts"]
    parts[3]["functionCall"]["id"] = parts[2]["functionCall"]["id"]
    assert refused("gemini", body) == (
        "gemini response: tool call id 'call-8f2a1c' is used twice: it could not be sent back"
        + HINT
    )


# -- values of the wrong type: a ResponseError, never a crash --------------------------


@pytest.mark.parametrize(
    ("provider", "name", "path", "value", "message"),
    [
        (
            "openai-chat",
            "tool_calls.json",
            ("choices", 0, "message", "tool_calls", 0),
            "x",
            "openai-chat response: choice.message.tool_calls[0]: expected an object",
        ),
        (
            "openai-chat",
            "final.json",
            ("choices", 0, "index"),
            [0],
            "openai-chat response: the index of choice 0 is not an integer",
        ),
        (
            "openai-responses",
            "tool_calls.json",
            ("output",),
            True,
            "openai-responses response.output: expected an array or null",
        ),
        (
            "anthropic",
            "turn1.json",
            ("content", 1),
            7,
            "anthropic content block 1: expected an object",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_a_response_error(
    provider: str, name: str, path: tuple[Any, ...], value: Any, message: str
) -> None:
    body = whole(provider, name)
    target = body
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    assert refused(provider, body) == message + HINT


def test_usage_details_of_another_shape_count_nothing() -> None:
    body = whole("openai-chat", "final.json")
    body["usage"]["prompt_tokens_details"] = [1]
    out = reader("openai-chat").parse_response(json.dumps(body).encode())
    assert out.usage is not None and out.usage.cache_read_tokens is None


# -- stream integrity ------------------------------------------------------------------


def anthropic_events() -> list[tuple[str | None, Any]]:
    events = []
    for block in fixture("anthropic", "turn1.sse").decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n") if line)
        if lines:
            events.append((lines.get("event"), json.loads(lines["data"])))
    return events


def test_an_anthropic_block_that_skips_an_index_is_refused() -> None:
    events = anthropic_events()
    first = next(i for i, (n, _) in enumerate(events) if n == "content_block_start")
    dropped = [e for i, e in enumerate(events) if i != first]
    dropped = [e for e in dropped if e[1].get("index") != 0]  # block 0's events all lost
    assert refused_stream("anthropic", sse(*dropped)) == (
        "anthropic stream: content_block_start at index 1, expected 0 (an event is missing)" + HINT
    )


def test_an_anthropic_block_started_twice_or_a_delta_after_its_stop_is_refused() -> None:
    events = anthropic_events()
    start = next(i for i, (n, _) in enumerate(events) if n == "content_block_start")
    twice = [*events[: start + 1], events[start], *events[start + 1 :]]
    assert refused_stream("anthropic", sse(*twice)) == (
        "anthropic stream: bad content_block_start at index 0" + HINT
    )
    stop = next(i for i, (n, _) in enumerate(events) if n == "content_block_stop")
    delta = next(e for e in events if e[0] == "content_block_delta")
    late = [*events[: stop + 1], delta, *events[stop + 1 :]]
    assert refused_stream("anthropic", sse(*late)) == (
        "anthropic stream: content_block_delta for block 0, which has stopped" + HINT
    )


def test_an_anthropic_delta_for_a_block_never_started_is_refused() -> None:
    events = anthropic_events()
    start = next(i for i, (n, _) in enumerate(events) if n == "content_block_start")
    assert refused_stream("anthropic", sse(*events[:start], *events[start + 1 :])) == (
        "anthropic stream: content_block_delta for unknown block index 0" + HINT
    )


def test_an_anthropic_stream_whose_block_never_stopped_is_refused() -> None:
    """A tool input is parsed at its block's stop: without the stop it was read as {}."""
    events = anthropic_events()
    stops = [i for i, (n, _) in enumerate(events) if n == "content_block_stop"]
    lost = [e for i, e in enumerate(events) if i != stops[-1]]
    assert refused_stream("anthropic", sse(*lost)) == (
        f"anthropic stream: message_stop before block {len(stops) - 1} stopped (an event "
        "is missing)" + HINT
    )


def chat_chunks() -> list[tuple[str | None, Any]]:
    out: list[tuple[str | None, Any]] = []
    for line in fixture("openai-chat", "tool_calls.sse").decode().split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append((None, json.loads(line[6:])))
    return out


def test_a_chat_tool_call_that_skips_an_index_or_starts_twice_is_refused() -> None:
    chunks = chat_chunks()
    starts = [
        i
        for i, (_, c) in enumerate(chunks)
        if c["choices"] and (c["choices"][0]["delta"].get("tool_calls") or [{}])[0].get("id")
    ]
    assert len(starts) >= 2
    skipped = [c for i, c in enumerate(chunks) if i != starts[0]]
    text = refused_stream("openai-chat", sse(*skipped) + b"data: [DONE]\n\n")
    assert text == (
        "openai-chat stream chunk: choice 0 delta tool call 0: its first delta has no id or "
        "name (an event is missing)" + HINT
    )
    twice = [*chunks[: starts[0] + 1], copy.deepcopy(chunks[starts[0]]), *chunks[starts[0] + 1 :]]
    assert refused_stream("openai-chat", sse(*twice) + b"data: [DONE]\n\n") == (
        "openai-chat stream chunk: choice 0 delta tool call 0: started twice (an event is "
        "repeated)" + HINT
    )


def bedrock_frames(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        encode_frame(
            {":event-type": e["event"], ":message-type": "event"}, json.dumps(e["payload"]).encode()
        )
        for e in events
    )


def test_a_bedrock_block_that_skips_an_index_or_starts_twice_is_refused() -> None:
    events = json.loads(fixture("bedrock-converse", "turn1_reasoning_parallel_tools.stream.json"))
    block0 = [e for e in events if e["payload"].get("contentBlockIndex") != 0]
    assert refused_stream("bedrock-converse", bedrock_frames(block0)).startswith(
        "event 'contentBlock"
    )
    assert "block 1 starts after block -1 (an event is missing)" in refused_stream(
        "bedrock-converse", bedrock_frames(block0)
    )
    start = next(i for i, e in enumerate(events) if e["event"] == "contentBlockStart")
    twice = [*events[: start + 1], events[start], *events[start + 1 :]]
    assert refused_stream("bedrock-converse", bedrock_frames(twice)) == (
        f"event 'contentBlockStart': block {events[start]['payload']['contentBlockIndex']} "
        "started twice" + HINT
    )
    stop = next(i for i, e in enumerate(events) if e["event"] == "contentBlockStop")
    late = [*events[: stop + 1], events[stop - 1], *events[stop + 1 :]]
    assert refused_stream("bedrock-converse", bedrock_frames(late)) == (
        "event 'contentBlockDelta': block 0 has stopped" + HINT
    )


def test_a_responses_item_done_twice_is_refused() -> None:
    data = fixture("openai-responses", "tool_calls.sse").decode()
    blocks = data.split("\n\n")
    done = next(i for i, b in enumerate(blocks) if "response.output_item.done" in b)
    repeated = "\n\n".join([*blocks[: done + 1], blocks[done], *blocks[done + 1 :]])
    assert refused_stream("openai-responses", repeated.encode()) == (
        "openai-responses stream: 'response.output_item.done' event: output 0 is done twice" + HINT
    )


def test_a_chat_tool_call_whose_every_delta_is_lost_is_caught_by_the_next_index() -> None:
    chunks = [
        c
        for c in chat_chunks()
        if not (
            c[1]["choices"]
            and (c[1]["choices"][0]["delta"].get("tool_calls") or [{}])[0].get("index") == 0
        )
    ]
    assert refused_stream("openai-chat", sse(*chunks) + b"data: [DONE]\n\n") == (
        "openai-chat stream chunk: choice 0 delta tool call 1: starts after call -1 (an "
        "event is missing)" + HINT
    )


def test_an_anthropic_stream_that_lost_its_message_delta_is_refused() -> None:
    """The stop reason comes in ``message_delta`` only: without it the output was read
    with no stop reason."""
    events = [e for e in anthropic_events() if e[0] != "message_delta"]
    assert refused_stream("anthropic", sse(*events)) == (
        "anthropic stream: message_stop without a stop reason (the message_delta is missing)" + HINT
    )


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses"])
def test_an_event_type_that_is_not_a_string_is_refused(provider: str) -> None:
    """Once a ``TypeError`` (unhashable type) in the Responses reader."""
    assert refused_stream(provider, sse((None, {"type": {"a": 1}}))) == (
        f"{provider} stream: an event type is not a string" + HINT
    )
