"""bedrock-anthropic: Claude Messages on AWS Bedrock InvokeModel.

The body is the Anthropic wire's with ``"anthropic_version": "bedrock-2023-05-31"``
first and no ``model`` (the path carries it); responses are Anthropic Messages JSON, and
streams are AWS event-stream frames of ``chunk`` events wrapping the Anthropic events
(decoded here and by botocore's own parser, compared)."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import botocore.session
import pytest
from botocore.eventstream import EventStream, EventStreamBuffer
from botocore.parsers import EventStreamJSONParser
from conv_helpers import CONTEXT_A, open_conv, user
from http_support import chunk_frame, chunk_frames, expected
from prefixlock.core import canonical
from prefixlock.core.errors import ResponseError
from prefixlock.core.messages import OpaquePart
from prefixlock.core.model import ModelRequest, ProviderSettings
from prefixlock.core.output import ModelOutput
from prefixlock.providers import get
from prefixlock.providers.readers import reader
from prefixlock.providers.readers.bedrock_anthropic import STREAM_EXCEPTIONS
from prefixlock.providers.readers.eventstream import FrameDecoder, encode_frame
from prefixlock.runtime.tools import ToolResult
from provider_cases import (
    ANTHROPIC_THINKING,
    BEDROCK_REASONING,
    image,
    long_text,
    opaque,
    produce,
    refused,
    request,
    simple,
    tool_loop,
    unicode,
    with_options,
)

NAME = "bedrock-anthropic"
VERSION_HEAD = b'{"anthropic_version":"bedrock-2023-05-31",'
DATA = Path(__file__).parent / "data" / "responses" / "anthropic"
SERVICE = botocore.session.get_session().get_service_model("bedrock-runtime")
STREAM_SHAPE = SERVICE.operation_model("InvokeModelWithResponseStream").output_shape.members["body"]
THINKING_SELF = canonical.dumps(
    {"type": "thinking", "thinking": "Check the file first.", "signature": "sig-EqQBCkYIBxgCKkA"}
)


def with_model(req: ModelRequest, model: str) -> ModelRequest:
    settings = tuple(
        attrs.evolve(s, model=model) if s.provider == NAME else s for s in req.settings
    )
    return attrs.evolve(req, settings=settings)


def anthropic_tail(req: ModelRequest) -> bytes:
    """Anthropic's body for ``req`` after its ``"model":...,`` member."""
    model = next(s.model for s in req.settings if s.provider == "anthropic")
    head = canonical.dumpb({"model": model})[:-1] + b","
    data = get("anthropic").serialize(req)
    assert data.startswith(head)
    return data[len(head) :]


# -- the body ------------------------------------------------------------------------


@pytest.mark.parametrize("case", [simple, tool_loop, unicode, long_text, image])
def test_the_body_is_anthropics_with_the_bedrock_version_first_and_no_model(case: Any) -> None:
    req = case()
    data = get(NAME).serialize(req)
    assert data == VERSION_HEAD + anthropic_tail(req)
    full = produce(NAME, req)  # the SDK judge (botocore + anthropic) and service rules
    assert list(full)[:3] == ["modelId", "anthropic_version", "max_tokens"]
    assert full["modelId"] == "anthropic.claude-sonnet-4-5-v1:0"


def test_exact_bytes_of_a_simple_call() -> None:
    data = get(NAME).serialize(simple())
    assert data.startswith(
        b'{"anthropic_version":"bedrock-2023-05-31","max_tokens":4096,"system":[{"type":"text",'
    )
    assert b'"model"' not in data and b'"stream"' not in data and b'"modelId"' not in data
    assert data.endswith(b'"cache_control":{"type":"ephemeral"}}')


def test_own_thinking_goes_back_verbatim_and_anthropics_is_refused() -> None:
    own = get(NAME).serialize(opaque(NAME, THINKING_SELF))
    assert own == VERSION_HEAD + anthropic_tail(opaque("anthropic", ANTHROPIC_THINKING))
    refused(
        NAME,
        opaque("anthropic", ANTHROPIC_THINKING),
        "opaque part of provider 'anthropic' cannot be sent to 'bedrock-anthropic'",
    )


def test_a_streaming_call_sends_the_same_bytes_to_the_stream_path() -> None:
    req = tool_loop()
    provider = get(NAME)
    plain, streamed = provider.http_request(req), provider.http_request(req, stream=True)
    assert (plain.method, plain.path) == (
        "POST",
        "/model/anthropic.claude-sonnet-4-5-v1%3A0/invoke",
    )
    assert streamed.path == "/model/anthropic.claude-sonnet-4-5-v1%3A0/invoke-with-response-stream"
    assert plain.body == streamed.body == provider.serialize(req)
    assert dict(plain.headers) == {"content-type": "application/json"}
    assert dict(streamed.headers) == {
        "content-type": "application/json",
        "accept": "application/vnd.amazon.eventstream",
    }
    operations = {
        op: SERVICE.operation_model(op).http["requestUri"]
        for op in ("InvokeModel", "InvokeModelWithResponseStream")
    }
    assert operations == {
        "InvokeModel": "/model/{modelId}/invoke",
        "InvokeModelWithResponseStream": "/model/{modelId}/invoke-with-response-stream",
    }


@pytest.mark.parametrize("key", ["model", "stream", "modelId", "system", "cache_control"])
def test_options_may_not_set_what_the_wire_or_the_path_carries(key: str) -> None:
    refused(NAME, with_options(simple(), NAME, **{key: "x"}), "reserved key(s)", repr(key))


def test_the_version_is_not_an_option_here() -> None:
    refused(
        NAME,
        with_options(simple(), NAME, anthropic_version="2023-06-01"),
        "bedrock-anthropic: settings options.anthropic_version:",
    )


def test_betas_travel_in_the_body_as_anthropic_beta() -> None:
    req = with_options(simple(), NAME, anthropic_beta=["context-1m-2025-08-07"])
    data = get(NAME).serialize(req)
    assert data.endswith(
        b'"cache_control":{"type":"ephemeral"},"anthropic_beta":["context-1m-2025-08-07"]}'
    )
    produce(NAME, req)


def test_one_hour_ttl_on_every_marker_and_refused_where_bedrock_refuses_it() -> None:
    req = with_options(tool_loop(), NAME, cache_ttl="1h")
    body = produce(NAME, req)
    markers = [b["cache_control"] for b in body["system"]] + [body["cache_control"]]
    markers += [t["cache_control"] for t in body["tools"] if "cache_control" in t]
    assert markers and all(m == {"type": "ephemeral", "ttl": "1h"} for m in markers)
    old = with_model(req, "anthropic.claude-3-5-sonnet-20241022-v2:0")
    refused(NAME, old, "settings options.cache_ttl", "Claude Sonnet 4.5, Haiku 4.5, Opus 4.5")


# -- responses -----------------------------------------------------------------------


def _as_anthropic(output: ModelOutput) -> ModelOutput:
    parts = tuple(
        OpaquePart("anthropic", p.data) if isinstance(p, OpaquePart) else p for p in output.parts
    )
    return attrs.evolve(output, provider="anthropic", parts=parts)


@pytest.mark.parametrize("name", ["turn1", "turn2", "cited"])
def test_a_whole_response_reads_as_anthropics_with_this_wires_opaque_parts(name: str) -> None:
    mine = reader(NAME).parse_response((DATA / f"{name}.json").read_bytes())
    assert mine.provider == NAME
    assert {p.provider for p in mine.parts if isinstance(p, OpaquePart)} <= {NAME}
    assert _as_anthropic(mine) == expected("anthropic", name)


def read_stream(chunks: list[bytes]) -> ModelOutput:
    stream = reader(NAME).stream_reader()
    for chunk in chunks:
        stream.feed(chunk)
    return stream.result()


@pytest.mark.parametrize("name", ["turn1", "turn2", "cited"])
def test_a_stream_gives_the_same_output_as_the_whole_response(name: str) -> None:
    data = chunk_frames((DATA / f"{name}.sse").read_bytes())
    whole = reader(NAME).parse_response((DATA / f"{name}.json").read_bytes())
    assert read_stream([data]) == whole
    rng = random.Random(3)
    cuts = sorted(rng.sample(range(1, len(data)), 40))
    bounds = zip([0, *cuts], [*cuts, len(data)], strict=True)
    assert read_stream([data[a:b] for a, b in bounds]) == whole


def test_botocore_decodes_the_same_frames_and_chunks_as_prefixlock() -> None:
    sse = (DATA / "turn1.sse").read_bytes()
    data = chunk_frames(sse)
    ours = FrameDecoder().feed(data)
    theirs = EventStreamBuffer()
    theirs.add_data(data)
    boto_frames = list(theirs)
    assert len(ours) == len(boto_frames) > 5
    for mine, other in zip(ours, boto_frames, strict=True):
        assert dict(mine.headers) == other.headers
        assert mine.payload == other.payload

    class Raw:
        def stream(self) -> Iterator[bytes]:
            yield from (data[i : i + 33] for i in range(0, len(data), 33))

    parsed = list(
        EventStream(Raw(), STREAM_SHAPE, EventStreamJSONParser(), "InvokeModelWithResponseStream")
    )
    # botocore hands the chunk's blob over decoded: the Anthropic event, byte for byte
    events = [json.loads(frame.payload)["bytes"] for frame in ours]
    assert parsed == [{"chunk": {"bytes": base64.b64decode(e)}} for e in events]
    assert [json.loads(p["chunk"]["bytes"])["type"] for p in parsed][:2] == [
        "message_start",
        "content_block_start",
    ]


def test_the_exception_table_is_the_service_models() -> None:
    members = {
        name: shape.metadata["error"]["httpStatusCode"]
        for name, shape in STREAM_SHAPE.members.items()
        if shape.metadata.get("exception")
    }
    assert set(STREAM_EXCEPTIONS) == set(members)
    assert {n for n, safe in STREAM_EXCEPTIONS.items() if not safe} == {"validationException"}


def _exception(kind: str, message: str = "try later") -> bytes:
    return encode_frame(
        {
            ":exception-type": kind,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )


@pytest.mark.parametrize(("kind", "safe"), sorted(STREAM_EXCEPTIONS.items()))
def test_an_exception_frame_is_a_typed_error(kind: str, safe: bool) -> None:
    head = chunk_frames((DATA / "turn1.sse").read_bytes().split(b"\n\n")[0] + b"\n\n")
    with pytest.raises(ResponseError) as info:
        read_stream([head + _exception(kind)])
    hint = "a retry with the same event id is safe" if safe else "do not retry as is"
    assert str(info.value) == f"bedrock-anthropic stream: {kind}: try later ({hint})"
    assert (info.value.error_type, info.value.retry_safe) == (kind, safe)


def _events(*events: dict[str, Any]) -> bytes:
    return b"".join(chunk_frame(canonical.dumpb(e)) for e in events)


START = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
}
STOP = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {
        "type": "message_stop",
        "amazon-bedrock-invocationMetrics": {"inputTokenCount": 3, "outputTokenCount": 2},
    },
]
TEXT = [
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {"type": "content_block_stop", "index": 0},
]


def test_bedrocks_invocation_metrics_on_message_stop_are_ignored() -> None:
    out = read_stream([_events(START, *TEXT, *STOP)])
    assert (out.text, out.stop_reason, out.provider) == ("Hi", "end_turn", NAME)


def _event_frame(event_type: str, payload: bytes) -> bytes:
    return encode_frame(
        {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"},
        payload,
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            _event_frame("chunk", b'{"bytes":"@@not base64"}'),
            "bedrock-anthropic chunk: 'bytes' is not base64",
        ),
        (
            _event_frame("chunk", b'{"bytes":5}'),
            "bedrock-anthropic chunk: 'bytes' is not a base64 string",
        ),
        (
            _event_frame("messageStart", b"{}"),
            "bedrock-anthropic stream: event 'messageStart' is not an "
            "InvokeModelWithResponseStream event ('chunk')",
        ),
        (
            _events(START, *TEXT, *STOP, START),
            "bedrock-anthropic stream: a chunk after message_stop",
        ),
        (
            _events(START, TEXT[0], TEXT[2], TEXT[1], *STOP),
            "anthropic stream: content_block_delta for block 0, which has stopped",
        ),
    ],
    ids=["not-base64", "not-a-string", "other-event", "after-the-end", "delta-after-stop"],
)
def test_stream_failures_have_exact_messages(data: bytes, message: str) -> None:
    with pytest.raises(ResponseError) as info:
        read_stream([data])
    assert str(info.value) == f"{message} (do not retry as is)"
    assert info.value.retry_safe is False


def test_a_flipped_bit_is_a_crc_mismatch_a_retry_may_cure() -> None:
    data = bytearray(_events(START, *TEXT, *STOP))
    data[30] ^= 0x04
    with pytest.raises(ResponseError, match="CRC mismatch") as info:
        read_stream([bytes(data)])
    assert info.value.retry_safe is True


def test_a_stream_cut_short_is_retry_safe() -> None:
    data = _events(START, *TEXT)
    with pytest.raises(ResponseError, match="ended before its final event") as info:
        read_stream([data])
    assert info.value.retry_safe is True


# -- failover ------------------------------------------------------------------------


def test_thinking_keeps_its_signature_between_anthropic_and_bedrock_anthropic() -> None:
    conv = open_conv()
    conv.handle(user("u1", context=CONTEXT_A))
    first = expected("anthropic", "turn1")  # thinking, redacted thinking, text, two calls
    conv.record(first)
    conv.tool_results([ToolResult(c.call_id, "ok") for c in first.tool_calls])
    request_ = conv.request(provider=NAME)
    body = json.loads(get(NAME).serialize(request_))
    (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
    thinking = first.parts[0]
    assert isinstance(thinking, OpaquePart)
    assert assistant["content"][0] == thinking.value  # the same block, signature and all
    assert [b["type"] for b in assistant["content"]] == ["thinking", "text", "tool_use", "tool_use"]


def test_bedrock_anthropic_thinking_goes_to_anthropic_and_converse() -> None:
    req = opaque(NAME, THINKING_SELF)
    block = json.loads(THINKING_SELF)
    from prefixlock.runtime.failover import retarget

    to_anthropic = json.loads(get("anthropic").serialize(retarget(req, "anthropic")))
    assert to_anthropic["messages"][-2]["content"][0] == block
    to_converse = json.loads(get("bedrock-converse").serialize(retarget(req, "bedrock-converse")))
    reasoning = {"text": block["thinking"], "signature": block["signature"]}
    assert {"reasoningContent": {"reasoningText": reasoning}} in [
        b for m in to_converse["messages"] for b in m["content"]
    ]
    back = retarget(opaque("bedrock-converse", BEDROCK_REASONING), NAME)
    sent = json.loads(get(NAME).serialize(back))
    inner = json.loads(BEDROCK_REASONING)["reasoningContent"]["reasoningText"]
    assert {"type": "thinking", "thinking": inner["text"], "signature": inner["signature"]} in [
        b for m in sent["messages"] for b in m["content"] if isinstance(b, dict)
    ]


def test_the_settings_of_the_case_requests() -> None:
    # the shared cases configure this wire with a Bedrock Claude model id
    assert ProviderSettings(NAME, "anthropic.claude-sonnet-4-5-v1:0", 4096) in request().settings
