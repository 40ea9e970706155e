"""Reading Bedrock ``Converse`` responses and ``ConverseStream`` event streams.

Fixtures (``tests/data/responses/bedrock-converse``) are written from the Bedrock
Runtime API reference and validated here against botocore's own service model (the
``Converse`` and ``ConverseStream`` output shapes), so they cannot drift from the real
format. A stream fixture is a list of ``{"event", "payload"}``; the tests frame it with
:func:`encode_frame` and check botocore's event-stream decoder reads the same frames.
"""

from __future__ import annotations

import base64
import json
import random
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.eventstream import ChecksumMismatch, EventStream, EventStreamBuffer
from botocore.exceptions import ClientError
from botocore.model import Shape, StructureShape
from botocore.parsers import EventStreamJSONParser
from conv_helpers import CONV, example_bundle, user
from prefixlock import Conversation, SQLiteStore, ToolResult, providers
from prefixlock.core import canonical
from prefixlock.core.errors import ResponseError
from prefixlock.core.messages import OpaquePart, TextPart, ToolCallPart
from prefixlock.core.model import ModelRequest
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers import reader
from prefixlock.providers.readers.eventstream import FrameDecoder, encode_frame
from prefixlock.store.contract import MemoryStore
from stub_server import Reply, Seen, stub_server

DATA = Path(__file__).parent / "data" / "responses" / "bedrock-converse"
NAMES = ["turn1_reasoning_parallel_tools", "turn2_redacted_edit", "turn3_final_text"]
PROVIDER = "bedrock-converse"
EVENTSTREAM = "application/vnd.amazon.eventstream"

MODEL = botocore.session.get_session().get_service_model("bedrock-runtime")
CONVERSE_OUTPUT = MODEL.operation_model("Converse").output_shape
STREAM_SHAPE = MODEL.operation_model("ConverseStream").output_shape.members["stream"]


def body(name: str) -> bytes:
    return (DATA / f"{name}.json").read_bytes()


def events(name: str) -> list[dict[str, Any]]:
    value = json.loads((DATA / f"{name}.stream.json").read_text())
    assert isinstance(value, list)
    return value


def frame(event: str, payload: Any) -> bytes:
    headers = {":event-type": event, ":content-type": "application/json", ":message-type": "event"}
    return encode_frame(headers, json.dumps(payload).encode())


def exception_frame(kind: str, message: str) -> bytes:
    headers = {
        ":exception-type": kind,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return encode_frame(headers, json.dumps({"message": message}).encode())


def stream_bytes(name: str) -> bytes:
    return b"".join(frame(e["event"], e["payload"]) for e in events(name))


def read_stream(chunks: Iterator[bytes] | list[bytes]) -> ModelOutput:
    stream = reader(PROVIDER).stream_reader()
    for chunk in chunks:
        stream.feed(chunk)
    return stream.result()


def chunked(data: bytes, rng: random.Random) -> Iterator[bytes]:
    pos = 0
    while pos < len(data):
        size = rng.randint(1, 64)
        yield data[pos : pos + size]
        pos += size


# -- a strict walker over botocore's output shapes -------------------------------------


def walk(shape: Shape, value: Any, path: str = "$") -> list[str]:
    """Problems of ``value`` against a botocore output shape (JSON as on the wire)."""
    if shape.metadata.get("document"):
        return []  # any JSON value (ToolUseBlock.input)
    kind = shape.type_name
    if kind == "structure":
        assert isinstance(shape, StructureShape)
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {shape.name}"]
        problems = [
            f"{path}.{k}: unknown member of {shape.name}" for k in value if k not in shape.members
        ]
        problems += [
            f"{path}.{k}: required member of {shape.name} missing"
            for k in shape.required_members
            if k not in value
        ]
        if shape.metadata.get("union") and len(value) != 1:
            problems.append(f"{path}: union {shape.name} needs exactly one member")
        for key, item in value.items():
            if key in shape.members:
                problems += walk(shape.members[key], item, f"{path}.{key}")
        return problems
    if kind == "list":
        if not isinstance(value, list):
            return [f"{path}: expected an array"]
        member = shape.member  # type: ignore[attr-defined]
        return [p for i, item in enumerate(value) for p in walk(member, item, f"{path}[{i}]")]
    if kind == "string":
        if not isinstance(value, str):
            return [f"{path}: expected a string"]
        if shape.enum and value not in shape.enum:
            return [f"{path}: {value!r} is not one of {shape.enum}"]
        return []
    if kind in ("integer", "long"):
        ok = type(value) is int and value >= shape.metadata.get("min", -(2**63))
        return [] if ok else [f"{path}: expected an integer"]
    if kind == "blob":
        try:
            base64.b64decode(value, validate=True)
        except (TypeError, ValueError):
            return [f"{path}: expected base64"]
        return []
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: expected a boolean"]
    return [f"{path}: shape type {kind} not expected in a fixture"]


def walk_stream(items: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    for i, item in enumerate(items):
        member = STREAM_SHAPE.members.get(item["event"])
        if member is None or member.metadata.get("exception"):
            problems.append(f"$[{i}]: {item['event']!r} is not a ConverseStream event")
            continue
        problems += walk(member, item["payload"], f"$[{i}].{item['event']}")
    return problems


@pytest.mark.parametrize("name", NAMES)
def test_fixtures_match_botocore_output_shapes(name: str) -> None:
    assert walk(CONVERSE_OUTPUT, json.loads(body(name))) == []
    assert walk_stream(events(name)) == []


def test_the_shape_walker_rejects_drift() -> None:
    value = json.loads(body(NAMES[0]))
    value["usage"]["cachedTokens"] = 1
    del value["usage"]["outputTokens"]
    value["stopReason"] = "finished"
    value["output"]["message"]["content"][2]["toolUse"]["toolUseId"] = 7
    value["output"]["message"]["content"].append({"text": "a", "toolUse": {}})
    assert sorted(walk(CONVERSE_OUTPUT, value)) == sorted(
        [
            "$.output.message.content[2].toolUse.toolUseId: expected a string",
            "$.output.message.content[5]: union ContentBlock needs exactly one member",
            "$.output.message.content[5].toolUse.input: required member of ToolUseBlock missing",
            "$.output.message.content[5].toolUse.name: required member of ToolUseBlock missing",
            "$.output.message.content[5].toolUse.toolUseId: required member of ToolUseBlock "
            "missing",
            "$.stopReason: 'finished' is not one of "
            + str(CONVERSE_OUTPUT.members["stopReason"].enum),
            "$.usage.cachedTokens: unknown member of TokenUsage",
            "$.usage.outputTokens: required member of TokenUsage missing",
        ]
    )
    assert walk_stream([{"event": "throttlingException", "payload": {"message": "x"}}]) == [
        "$[0]: 'throttlingException' is not a ConverseStream event"
    ]
    assert walk_stream([{"event": "contentBlockDelta", "payload": {"delta": {"text": 1}}}]) == [
        "$[0].contentBlockDelta.contentBlockIndex: required member of ContentBlockDeltaEvent "
        "missing",
        "$[0].contentBlockDelta.delta.text: expected a string",
    ]


# -- whole responses -------------------------------------------------------------------


def test_parse_keeps_every_block_in_model_order() -> None:
    out = reader(PROVIDER).parse_response(body(NAMES[0]))
    blocks = json.loads(body(NAMES[0]))["output"]["message"]["content"]
    assert out.parts == (
        OpaquePart(PROVIDER, canonical.dumps(blocks[0])),
        TextPart("I'll read the module first."),
        ToolCallPart("tooluse_kZJMlvQmRJ6eAyJE5GIl_Q", "read_file", '{"path":"src/app.py"}'),
        TextPart("And search for its callers."),
        ToolCallPart(
            "tooluse_Q2pL8xN4TZq1bV0aYc7mWg",
            "grep_search",
            '{"include":"*.py","pattern":"parse_date("}',
        ),
    )
    assert out.opaque[0].value["reasoningContent"]["reasoningText"]["signature"].startswith("EqQB")
    assert (out.provider, out.stop_reason, out.model) == (PROVIDER, "tool_use", None)


def test_usage_counts_every_prompt_token_and_keeps_the_raw_object() -> None:
    out = reader(PROVIDER).parse_response(body(NAMES[1]))
    assert out.usage is not None
    raw = json.loads(body(NAMES[1]))["usage"]
    assert (
        out.usage.input_tokens,
        out.usage.cache_read_tokens,
        out.usage.cache_write_tokens,
        out.usage.output_tokens,
        out.usage.reasoning_tokens,
    ) == (388 + 6480 + 480, 6480, 480, 96, None)
    # totalTokens is inputTokens + cache reads + cache writes + outputTokens
    assert out.usage.input_tokens + out.usage.output_tokens == raw["totalTokens"]
    assert json.loads(out.usage.raw) == raw
    final = reader(PROVIDER).parse_response(body(NAMES[2])).usage
    assert final is not None
    assert (final.input_tokens, final.cache_read_tokens, final.cache_write_tokens) == (
        145 + 6960,
        6960,
        None,
    )


def test_redacted_reasoning_and_adjacent_texts_stay_separate_parts() -> None:
    redacted = reader(PROVIDER).parse_response(body(NAMES[1]))
    blob = json.loads(body(NAMES[1]))["output"]["message"]["content"][0]
    assert redacted.parts[0] == OpaquePart(PROVIDER, canonical.dumps(blob))
    assert "redactedContent" in redacted.parts[0].value["reasoningContent"]  # type: ignore[union-attr]
    final = reader(PROVIDER).parse_response(body(NAMES[2]))
    assert final.parts == (TextPart("Fixed: "), TextPart("parse_date now uses ISO dates."))
    assert (final.text, final.stop_reason) == ("Fixed: parse_date now uses ISO dates.", "end_turn")


# -- streams ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_a_stream_gives_the_same_output_as_the_whole_response(name: str) -> None:
    whole = reader(PROVIDER).parse_response(body(name))
    data = stream_bytes(name)
    assert read_stream([data]) == whole
    assert read_stream([data[i : i + 1] for i in range(len(data))]) == whole
    for seed in range(5):
        assert read_stream(chunked(data, random.Random(seed))) == whole


def test_a_split_inside_every_frame_header_position_is_read() -> None:
    data = stream_bytes(NAMES[0])
    whole = reader(PROVIDER).parse_response(body(NAMES[0]))
    for cut in range(1, 40):  # prelude (12 bytes) and the headers of the first frame
        assert read_stream([data[:cut], data[cut:]]) == whole


@pytest.mark.parametrize("name", NAMES)
def test_botocore_decodes_the_same_frames_as_prefixlock(name: str) -> None:
    data = stream_bytes(name)
    ours = FrameDecoder().feed(data)
    theirs = EventStreamBuffer()
    theirs.add_data(data)
    botocore_frames = list(theirs)
    assert len(ours) == len(botocore_frames) == len(events(name))
    for mine, other in zip(ours, botocore_frames, strict=True):
        assert dict(mine.headers) == other.headers
        assert mine.payload == other.payload

    class Raw:
        def stream(self) -> Iterator[bytes]:
            yield from chunked(data, random.Random(7))

    parsed = list(EventStream(Raw(), STREAM_SHAPE, EventStreamJSONParser(), "ConverseStream"))
    expected = []
    for item in events(name):  # botocore hands blobs over decoded
        payload = json.loads(json.dumps(item["payload"]))
        reasoning = payload.get("delta", {}).get("reasoningContent", {})
        if "redactedContent" in reasoning:
            reasoning["redactedContent"] = base64.b64decode(reasoning["redactedContent"])
        expected.append({item["event"]: payload})
    assert parsed == expected


@pytest.mark.parametrize("position", [1, 9, 13, 40, -30, -2])
def test_a_flipped_bit_is_caught_by_both_decoders(position: int) -> None:
    data = bytearray(stream_bytes(NAMES[2]))
    data[position] ^= 0x10
    with pytest.raises(ResponseError, match="CRC mismatch") as err:
        read_stream([bytes(data)])
    assert err.value.retry_safe
    theirs = EventStreamBuffer()
    theirs.add_data(bytes(data))
    with pytest.raises(ChecksumMismatch):
        list(theirs)


# -- failures --------------------------------------------------------------------------


HINT = {True: "a retry with the same event id is safe", False: "do not retry as is"}


def failure(chunks: list[bytes]) -> ResponseError:
    with pytest.raises(ResponseError) as err:
        read_stream(chunks)
    return err.value


def prefix_frames(name: str, count: int) -> list[bytes]:
    return [frame(e["event"], e["payload"]) for e in events(name)[:count]]


@pytest.mark.parametrize(
    ("kind", "retry_safe"),
    [
        ("throttlingException", True),
        ("serviceUnavailableException", True),
        ("internalServerException", True),
        ("modelStreamErrorException", True),
        ("validationException", False),
    ],
)
def test_exception_frames_raise_with_their_retry_class(kind: str, retry_safe: bool) -> None:
    err = failure([*prefix_frames(NAMES[0], 3), exception_frame(kind, "went wrong")])
    hint = "a retry with the same event id is safe" if retry_safe else "do not retry as is"
    assert str(err) == f"bedrock-converse stream: {kind}: went wrong ({hint})"
    assert err.retry_safe is retry_safe


def test_stream_failures_have_exact_messages() -> None:
    items = events(NAMES[2])
    last = frame(items[-1]["event"], items[-1]["payload"])
    cases: list[tuple[list[bytes], str, bool]] = [
        (
            prefix_frames(NAMES[2], len(items) - 1),
            "the stream ended before its final event",
            True,
        ),
        (
            [
                *prefix_frames(NAMES[2], len(items) - 2),
                last,
            ],
            "event 'metadata' before 'messageStop'",
            True,
        ),
        (
            [stream_bytes(NAMES[2])[:-5]],
            f"event stream: ended inside a frame ({len(last) - 5} bytes left)",
            True,
        ),
        (
            [encode_frame({":event-type": "messageStart", ":message-type": "event"}, b"{role")],
            "event 'messageStart': not JSON (Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1))",
            False,
        ),
        (
            [stream_bytes(NAMES[2]), frame("metadata", items[-1]["payload"])],
            "event 'metadata' after the end",
            False,
        ),
        (
            [
                encode_frame(
                    {
                        ":message-type": "error",
                        ":error-code": "InternalFailure",
                        ":error-message": "boom",
                    },
                    b"",
                )
            ],
            "bedrock-converse stream: error InternalFailure: boom",
            False,
        ),
        (
            [frame("citation", {})],
            "event 'citation' is not a ConverseStream event",
            False,
        ),
        (
            [frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"image": {}}})],
            "event 'contentBlockDelta' block 0: delta 'image' is not model output",
            False,
        ),
        (
            [
                frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "a"}}),
                frame(
                    "contentBlockDelta",
                    {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "b"}}},
                ),
            ],
            "event 'contentBlockDelta' block 0: a reasoningContent delta in a text block",
            False,
        ),
        (
            [
                frame(
                    "contentBlockDelta",
                    {
                        "contentBlockIndex": 0,
                        "delta": {"reasoningContent": {"redactedContent": "*"}},
                    },
                )
            ],
            "event 'contentBlockDelta' block 0: redactedContent is not base64",
            False,
        ),
        (
            [frame("contentBlockStop", {"contentBlockIndex": -1})],
            "event 'contentBlockStop': contentBlockIndex: expected a count",
            False,
        ),
    ]
    for chunks, message, retry_safe in cases:
        err = failure(chunks)
        assert (str(err), err.retry_safe) == (f"{message} ({HINT[retry_safe]})", retry_safe)


def test_bad_tool_input_in_a_stream_is_not_retry_safe() -> None:
    items = events(NAMES[1])
    for item in items:
        delta = item["payload"].get("delta", {})
        if "toolUse" in delta:
            delta["toolUse"]["input"] = delta["toolUse"]["input"].replace("{", "[", 1)
    err = failure([frame(e["event"], e["payload"]) for e in items])
    assert str(err).startswith("block 2 ('edit_file'): toolUse input is not JSON (")
    assert not err.retry_safe
    headless = [
        frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}),
        frame("messageStop", {"stopReason": "tool_use"}),
        frame(
            "metadata",
            {
                "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                "metrics": {"latencyMs": 1},
            },
        ),
    ]
    assert str(failure(headless)) == (
        "block 0: toolUse deltas without a contentBlockStart (do not retry as is)"
    )


def test_whole_response_failures_have_exact_messages() -> None:
    good = json.loads(body(NAMES[0]))
    no_usage = {k: v for k, v in good.items() if k != "usage"}
    assert reader(PROVIDER).parse_response(json.dumps(no_usage).encode()).usage is None
    cases: list[tuple[bytes, str]] = [
        (b"<html>", "response: not JSON (Expecting value: line 1 column 1 (char 0))"),
        (b"[]", "response: expected a JSON object"),
        (b"{}", "response.output: expected an object"),
        (
            b'{"output":{"message":{"content":{}}}}',
            "response.output.message.content: expected an array",
        ),
        (
            b'{"output":{"message":{"content":[{"image":{}}]}},"stopReason":"end_turn"}',
            "response.output.message.content[0]: content block 'image' is not model output",
        ),
        (
            b'{"output":{"message":{"content":[{"text":"a","toolUse":{}}]}}}',
            "response.output.message.content[0]: expected a ContentBlock with one member",
        ),
        (
            b'{"output":{"message":{"content":[{"toolUse":{"toolUseId":"t","name":"n","input":"{}"}}]}}}',
            "response.output.message.content[0].toolUse.input: expected an object",
        ),
        (b'{"output":{"message":{"content":[]}}}', "response.stopReason: expected a string"),
        (
            b'{"output":{"message":{"content":[]}},"stopReason":"end_turn","usage":7}',
            "response.usage: expected an object",
        ),
    ]
    for data, message in cases:
        with pytest.raises(ResponseError) as err:
            reader(PROVIDER).parse_response(data)
        assert str(err.value) == f"{message} (do not retry as is)"


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (429, "ThrottlingException", True),
        (503, "ServiceUnavailableException", True),
        (500, "InternalServerException", True),
        (429, "ModelNotReadyException", True),
        (408, "ModelTimeoutException", True),
        (400, "ValidationException", False),
        (403, "AccessDeniedException", False),
        (404, "ResourceNotFoundException", False),
        (424, "ModelErrorException", False),
        (502, "(a gateway)", True),
    ],
)
def test_is_retryable_follows_the_documented_errors(
    status: int, error_type: str, retryable: bool
) -> None:
    shape = MODEL.shape_for(error_type) if error_type[0] != "(" else None
    if shape is not None:  # the status is botocore's for that error type
        assert shape.metadata["error"]["httpStatusCode"] == status
    error_body = json.dumps({"message": error_type}).encode()
    assert providers.get(PROVIDER).is_retryable(status, error_body) is retryable


# -- round trip: parse -> record -> next request ---------------------------------------


def wire_blocks(data: bytes) -> list[tuple[str, str]]:
    """(role, block) of every message block in a body, cachePoints (which move) left out;
    block-level, so merging consecutive same-role messages does not change it."""
    wire = canonical.loads(data)
    assert isinstance(wire, dict)
    return [
        (m["role"], canonical.dumps(block))
        for m in wire["messages"]
        for block in m["content"]
        if set(block) != {"cachePoint"}
    ]


def results_for(out: ModelOutput) -> list[ToolResult]:
    return [ToolResult(c.call_id, f"{c.name} ran: ok") for c in out.tool_calls]


def test_round_trip_sends_every_opaque_part_back_byte_identical(tmp_path: Path) -> None:
    bedrock = providers.get(PROVIDER)
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), CONV)
    previous = bedrock.serialize(conv.handle(user("u1")))
    opaque_total = opaque_identical = 0
    for name in NAMES:
        out = bedrock.parse_response(body(name))
        conv.record(out)
        if out.tool_calls:
            request = conv.tool_results(results_for(out))
        else:
            request = conv.handle(user("u2", "thanks"))
        following = bedrock.serialize(request)
        blocks = wire_blocks(following)
        earlier = wire_blocks(previous)
        assert blocks[: len(earlier)] == earlier  # the previous body is a prefix
        for part in out.opaque:
            opaque_total += 1
            if part.data.encode() in following and ("assistant", part.data) in blocks:
                opaque_identical += 1
        sent_calls = [
            canonical.loads(b)["toolUse"]["toolUseId"]  # type: ignore[index,call-overload]
            for role, b in blocks[len(earlier) :]
            if role == "assistant" and b.startswith('{"toolUse"')
        ]
        answered = [
            canonical.loads(b)["toolResult"]["toolUseId"]  # type: ignore[index,call-overload]
            for role, b in blocks[len(earlier) :]
            if role == "user" and b.startswith('{"toolResult"')
        ]
        ids = [c.call_id for c in out.tool_calls]
        assert sent_calls == ids
        assert answered == ids
        previous = following
    figure = f"{opaque_identical} of {opaque_total}"
    print(f"bedrock-converse round trip: opaque parts byte-identical {figure}")
    assert (opaque_identical, opaque_total) == (2, 2)


# -- end to end: prefixlock's bytes over HTTP to a local stand-in -----------------------

#: turn -> whether the model call streams
STREAMS = {NAMES[0]: False, NAMES[1]: True, NAMES[2]: True}


def reference_bodies() -> list[bytes]:
    """The bodies of an uninterrupted in-process run (no HTTP, no restart)."""
    bedrock = providers.get(PROVIDER)
    conv = Conversation.open(MemoryStore(), example_bundle(), CONV)
    request = conv.handle(user("u1"))
    bodies = []
    for name in NAMES:
        bodies.append(bedrock.http_request(request, stream=STREAMS[name]).body)
        out = bedrock.parse_response(body(name))
        conv.record(out)
        if out.tool_calls:
            request = conv.tool_results(results_for(out))
    return bodies


class _Replayed:
    """A consumed event-stream body, handed on to botocore's EventStream parser."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    def stream(self, amt: int | None = None) -> Iterator[bytes]:
        yield from self.chunks


#: dummy credentials (the AWS documentation's example pair)
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")


def signature_holds(url: str, seen: Seen) -> bool:
    """Check a received request's SigV4 signature as the service would: recompute it from
    the method, path, signed headers and body bytes the stand-in received."""
    auth = seen.headers["authorization"]
    signed = auth.split("SignedHeaders=")[1].split(",")[0].split(";")
    request = AWSRequest(
        method=seen.method,
        url=url + seen.path,
        data=seen.body,
        headers={name: seen.headers[name] for name in signed},
    )
    request.context["timestamp"] = seen.headers["x-amz-date"]
    signer = SigV4Auth(CREDENTIALS, "bedrock", "us-east-1")
    expected = signer.signature(
        signer.string_to_sign(request, signer.canonical_request(request)), request
    )
    return bool(auth.endswith(f"Signature={expected}"))


class BotocoreTransport:
    """The ``bedrock-runtime`` client as the transport (``endpoint_url`` = the stub, dummy
    credentials): a ``before-sign`` hook puts http_request()'s exact body in place of
    the one botocore serialized, so SigV4 signs and the client sends prefixlock's bytes;
    a ``before-parse`` hook keeps the response bytes for prefixlock's reader while
    botocore parses them itself (``Converse`` into a dict, ``ConverseStream`` with its
    EventStream decoder and CRC checks). botocore's retries are off: the loop retries
    by ``is_retryable``, sending the same bytes."""

    def __init__(self, url: str) -> None:
        session = botocore.session.get_session()
        self.client: Any = session.create_client(
            "bedrock-runtime",
            region_name="us-east-1",
            endpoint_url=url,
            aws_access_key_id=CREDENTIALS.access_key,
            aws_secret_access_key=CREDENTIALS.secret_key,
            config=Config(retries={"mode": "standard", "total_max_attempts": 1}),
        )
        self.exact: Any = None
        self.raw: list[bytes] = []
        events = self.client.meta.events
        events.register("before-sign.bedrock-runtime.*", self._swap_body)
        events.register("before-parse.bedrock-runtime.*", self._keep_response)

    def _swap_body(self, request: AWSRequest, **_: Any) -> None:
        request.data = self.exact.body
        del request.headers["Content-Length"]  # botocore's body had another length
        for name, value in self.exact.headers.items():
            del request.headers[name]  # HTTPHeaders: a plain set would add a second one
            request.headers[name] = value

    def _keep_response(self, response_dict: dict[str, Any], **_: Any) -> None:
        if isinstance(response_dict["body"], bytes):
            self.raw = [response_dict["body"]]
        else:  # the event stream: read it here in 97-byte reads, replay it to botocore
            self.raw = list(response_dict["body"].stream(97))
            response_dict["body"] = _Replayed(self.raw)

    def send(self, request: ModelRequest, stream: bool) -> tuple[int, ModelOutput | bytes, Any]:
        """(status, prefixlock's output or the error body, botocore's parsed output)."""
        bedrock = providers.get(PROVIDER)
        exact = bedrock.http_request(request, stream=stream)
        model = urllib.parse.unquote(exact.path.split("/")[2])
        self.exact = exact
        operation = self.client.converse_stream if stream else self.client.converse
        try:
            parsed = operation(modelId=model, messages=[{"role": "user", "content": []}])
        except ClientError as error:
            return error.response["ResponseMetadata"]["HTTPStatusCode"], self.raw[0], error
        if not stream:
            return 200, bedrock.parse_response(self.raw[0]), parsed
        theirs = list(parsed["stream"])  # botocore decodes the frames it was handed
        reader_ = bedrock.stream_reader()
        for chunk in self.raw:
            reader_.feed(chunk)
        return 200, reader_.result(), theirs


def botocore_events(name: str) -> list[dict[str, Any]]:
    """A stream fixture as botocore's EventStream yields it (blobs decoded)."""
    expected = []
    for item in events(name):
        payload = json.loads(json.dumps(item["payload"]))
        reasoning = payload.get("delta", {}).get("reasoningContent", {})
        if "redactedContent" in reasoning:
            reasoning["redactedContent"] = base64.b64decode(reasoning["redactedContent"])
        expected.append({item["event"]: payload})
    return expected


def test_end_to_end_tool_loop_with_a_restart_sends_identical_bytes(tmp_path: Path) -> None:
    bedrock = providers.get(PROVIDER)
    rng = random.Random(11)
    db = tmp_path / "s.db"
    throttled = b'{"message":"Too many requests, please wait before trying again."}'
    with stub_server() as stub:
        stub.queue(Reply(200, body(NAMES[0])))
        stub.queue(Reply(429, throttled, headers=(("x-amzn-ErrorType", "ThrottlingException"),)))
        stub.queue(Reply(200, list(chunked(stream_bytes(NAMES[1]), rng)), EVENTSTREAM))
        stub.queue(Reply(200, list(chunked(stream_bytes(NAMES[2]), rng)), EVENTSTREAM))
        transport = BotocoreTransport(stub.url)
        conv = Conversation.open(SQLiteStore(db), example_bundle(), CONV)
        request = conv.handle(user("u1"))
        sent = []
        for name in NAMES:
            while True:
                sent.append(bedrock.http_request(request, stream=STREAMS[name]))
                status, result, theirs = transport.send(request, STREAMS[name])
                if status == 200:
                    break
                assert isinstance(result, bytes) and bedrock.is_retryable(status, result)
                assert theirs.response["Error"]["Code"] == "ThrottlingException"
            assert isinstance(result, ModelOutput)
            assert result == bedrock.parse_response(body(name))
            if STREAMS[name]:
                assert theirs == botocore_events(name)
            else:  # botocore's Converse parser read the same JSON
                theirs.pop("ResponseMetadata")
                assert theirs == json.loads(body(name))
            conv.record(result)
            if name == NAMES[1]:  # the process restarts: everything from SQLite
                conv = Conversation.open(SQLiteStore(db), example_bundle(), CONV)
            if result.tool_calls:
                request = conv.tool_results(results_for(result))
        assert conv.request().messages[-1].role == "assistant"
    assert len(stub.seen) == len(sent) == 4
    for seen, exact in zip(stub.seen, sent, strict=True):
        assert (seen.method, seen.path, seen.body) == (exact.method, exact.path, exact.body)
        assert {k: seen.headers[k] for k in exact.headers} == dict(exact.headers)
        scope = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"
        assert seen.headers["authorization"].startswith(scope)
        assert (
            seen.headers["authorization"].split(",")[0].endswith("/us-east-1/bedrock/aws4_request")
        )
    model = urllib.parse.quote("anthropic.claude-sonnet-5-5", safe="")
    assert [s.path for s in stub.seen] == [
        f"/model/{model}/converse",
        *[f"/model/{model}/converse-stream"] * 3,
    ]
    assert stub.seen[1].body == stub.seen[2].body  # the retry sends the same bytes
    bodies = [s.body for i, s in enumerate(stub.seen) if i != 1]
    assert bodies == reference_bodies()


def test_a_streamed_tool_input_beyond_64_bits_is_a_response_error() -> None:
    """The joined toolUse input is recorded and sent again: an integer past the
    canonical encoder's 64 bits is a ResponseError naming it, not a CanonicalJSONError."""
    found = events("turn1_reasoning_parallel_tools")
    first = next(e for e in found if "toolUse" in e["payload"].get("delta", {}))
    fragment = first["payload"]["delta"]["toolUse"]["input"]
    assert fragment.startswith("{")
    first["payload"]["delta"]["toolUse"]["input"] = '{"n":' + str(2**70) + "," + fragment[1:]
    data = b"".join(frame(e["event"], e["payload"]) for e in found)
    with pytest.raises(ResponseError) as caught:
        read_stream([data])
    assert str(caught.value) == (
        "block 2 ('read_file'): toolUse input: $.n: integer of 71 bits is beyond 64 bits"
        " (do not retry as is)"
    )
