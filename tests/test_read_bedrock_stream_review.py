"""Review findings on the Bedrock reader and its event-stream decoder, each judged by
botocore's own decoder where botocore decides what a frame is.

The frames here come from an encoder of this file (any header type, any header bytes),
not from :func:`~prefixlock.providers.readers.eventstream.encode_frame`, so that
malformed header blocks can be written.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from prefixlock.core.errors import ResponseError
from prefixlock.core.messages import ToolCallPart
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers import reader
from prefixlock.providers.readers.base import load_object
from prefixlock.providers.readers.eventstream import FrameDecoder

PROVIDER = "bedrock-converse"
HINT = {True: "a retry with the same event id is safe", False: "do not retry as is"}


def header(name: str, kind: int, value: Any = None) -> bytes:
    raw = name.encode()
    out = bytes([len(raw)]) + raw + bytes([kind])
    if kind in (0, 1):
        return out
    fixed = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}
    if kind in fixed:
        return out + struct.pack(fixed[kind], value)
    if kind == 9:
        return out + bytes(value)
    data = value.encode() if kind == 7 else value
    return out + struct.pack(">H", len(data)) + data


def message(headers: bytes, payload: bytes) -> bytes:
    prelude = struct.pack(">II", 12 + len(headers) + len(payload) + 4, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    data = prelude + headers + payload
    return data + struct.pack(">I", zlib.crc32(data))


def event_headers(event: str) -> bytes:
    return (
        header(":event-type", 7, event)
        + header(":content-type", 7, "application/json")
        + header(":message-type", 7, "event")
    )


def event(name: str, payload: Any) -> bytes:
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return message(event_headers(name), data)


def exception(kind: str, payload: bytes) -> bytes:
    headers = (
        header(":exception-type", 7, kind)
        + header(":content-type", 7, "application/json")
        + header(":message-type", 7, "exception")
    )
    return message(headers, payload)


START = event("messageStart", {"role": "assistant"})
STOP = event("messageStop", {"stopReason": "end_turn"})
TOOL_STOP = event("messageStop", {"stopReason": "tool_use"})
META = event(
    "metadata",
    {"usage": {"inputTokens": 3, "outputTokens": 5, "totalTokens": 8}, "metrics": {"latencyMs": 1}},
)


def text_delta(text: str) -> bytes:
    return event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}})


def tool_stream(arguments: str) -> bytes:
    start = {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "f"}}}
    delta = {"contentBlockIndex": 0, "delta": {"toolUse": {"input": arguments}}}
    return b"".join(
        [
            START,
            event("contentBlockStart", start),
            event("contentBlockDelta", delta),
            event("contentBlockStop", {"contentBlockIndex": 0}),
            TOOL_STOP,
            META,
        ]
    )


def whole_tool_body(arguments: str) -> bytes:
    block = '{"toolUse":{"toolUseId":"tooluse_1","name":"f","input":' + arguments + "}}"
    return (
        '{"output":{"message":{"role":"assistant","content":[' + block + "]}},"
        '"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":5,"totalTokens":8},'
        '"metrics":{"latencyMs":1}}'
    ).encode()


def read_stream(chunks: list[bytes]) -> ModelOutput:
    stream = reader(PROVIDER).stream_reader()
    for chunk in chunks:
        stream.feed(chunk)
    return stream.result()


def failure(chunks: list[bytes]) -> ResponseError:
    with pytest.raises(ResponseError) as err:
        read_stream(chunks)
    return err.value


def botocore_read(chunks: list[bytes]) -> tuple[list[dict[str, Any]], BaseException | None]:
    """botocore's ConverseStream events of ``chunks`` and the error it raised, if any."""
    import botocore.session
    from botocore.eventstream import EventStream
    from botocore.parsers import EventStreamJSONParser

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    shape = model.operation_model("ConverseStream").output_shape.members["stream"]

    class Raw:
        def stream(self) -> Iterator[bytes]:
            yield from chunks

    out: list[dict[str, Any]] = []
    try:
        for item in EventStream(Raw(), shape, EventStreamJSONParser(), "ConverseStream"):
            out.append(item)
    except Exception as err:
        return out, err
    return out, None


def nested(depth: int) -> str:
    """A JSON object ``depth`` levels deep: ``{"a":[[...]]}``."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


# -- 1: nesting beyond the parser's stack is a ResponseError, never a RecursionError ---


def test_deep_nesting_never_escapes_as_a_recursion_error() -> None:
    deep = "[" * 5000 + "]" * 5000
    deep_input = '{"a":' + deep + "}"
    cases: list[tuple[Any, str]] = [
        (
            lambda: reader(PROVIDER).parse_response(whole_tool_body(deep_input)),
            "response: nesting deeper than 106 levels",
        ),
        (
            lambda: load_object(deep_input.encode()),
            "response: nesting deeper than 100 levels",
        ),
        (
            lambda: reader("openai-chat").parse_response(b'{"choices":' + deep.encode() + b"}"),
            "response: nesting deeper than 100 levels",
        ),
        (
            lambda: read_stream(
                [START, event("contentBlockDelta", b'{"delta":%s}' % deep.encode())]
            ),
            "event 'contentBlockDelta': nesting deeper than 100 levels",
        ),
        (
            lambda: read_stream([tool_stream(deep_input)]),
            "block 0 ('f'): toolUse input: nesting deeper than 100 levels",
        ),
    ]
    for call, text in cases:
        with pytest.raises(ResponseError) as err:
            call()
        assert (str(err.value), err.value.retry_safe) == (f"{text} ({HINT[False]})", False)
    # an exception frame whose payload is too deep to parse: its raw text is the message
    payload = b'{"message":%s}' % deep.encode()
    err = failure([START, exception("validationException", payload)])
    assert str(err) == f"bedrock-converse stream: validationException: {payload.decode()} " + (
        f"({HINT[False]})"
    )
    assert err.retry_safe is False


# -- 2: frames are handed on message by message, whatever the chunking ----------------


def test_an_exception_frame_ahead_of_a_corrupt_one_fails_the_same_in_any_chunking() -> None:
    from botocore.exceptions import EventStreamError

    bad = bytearray(text_delta("x"))
    bad[-1] ^= 1
    refused = exception("validationException", b'{"message":"Input is too long"}')
    data = START + refused + bytes(bad)
    cut = len(START) + len(refused)
    expected = f"bedrock-converse stream: validationException: Input is too long ({HINT[False]})"
    for chunks in ([data], [data[:cut], data[cut:]], [data[: cut + 3], data[cut + 3 :]]):
        err = failure(chunks)
        assert (str(err), err.retry_safe) == (expected, False)
        events, boto_error = botocore_read(chunks)
        assert events == [{"messageStart": {"role": "assistant"}}]
        assert isinstance(boto_error, EventStreamError)
        assert boto_error.response["Error"]["Code"] == "validationException"
    # the frames ahead of the bad one come out; the error follows on the next call
    decoder = FrameDecoder()
    assert [f.headers[":message-type"] for f in decoder.feed(data)] == ["event", "exception"]
    for call in (decoder.close, lambda: decoder.feed(b"")):
        with pytest.raises(ResponseError) as caught:
            call()
        assert (str(caught.value), caught.value.retry_safe) == (
            f"event stream: message CRC mismatch ({HINT[True]})",
            True,
        )
    # a corrupt frame behind a complete stream still fails it, in one chunk or two
    complete = START + text_delta("a") + STOP + META
    for chunks in ([complete + bytes(bad)], [complete, bytes(bad)]):
        err = failure(chunks)
        assert (str(err), err.retry_safe) == (
            f"event stream: message CRC mismatch ({HINT[True]})",
            True,
        )


# -- 3: the frame bound is the spec's largest message, not 16 MiB ----------------------


def test_a_17_mib_text_delta_reads_as_botocore_decodes_it() -> None:
    text = "x" * (17 * 1024 * 1024)
    data = START + text_delta(text) + STOP + META
    events, boto_error = botocore_read([data])
    assert boto_error is None
    assert read_stream([data]).text == events[1]["contentBlockDelta"]["delta"]["text"] == text


def test_only_a_frame_beyond_the_largest_legal_message_is_refused() -> None:
    largest = 12 + 128 * 1024 + 24 * 1024 * 1024 + 4  # prelude, headers, payload, CRC

    def prelude(total: int) -> bytes:
        head = struct.pack(">II", total, 100)
        return head + struct.pack(">I", zlib.crc32(head))

    decoder = FrameDecoder()
    assert decoder.feed(prelude(largest)) == []  # waits for the rest of the frame
    with pytest.raises(ResponseError) as err:
        FrameDecoder().feed(prelude(largest + 1))
    assert (str(err.value), err.value.retry_safe) == (
        f"event stream: frame length {largest + 1} exceeds the largest message the "
        f"event-stream spec allows ({largest} bytes) ({HINT[False]})",
        False,
    )


# -- 4: a header block botocore refuses is refused ------------------------------------


def test_cut_short_fixed_size_values_and_duplicate_names_are_malformed_headers() -> None:
    from botocore.eventstream import DuplicateHeader

    rest = text_delta("a") + STOP + META
    payload = b'{"role":"assistant"}'
    short_int = event_headers("messageStart") + b"\x01x\x04\x00\x01"  # int32, 2 of 4 bytes
    short_uuid = event_headers("messageStart") + b"\x01u\x09" + b"\x00" * 3  # 3 of 16 bytes
    twice = event_headers("messageStart") + header(":event-type", 7, "messageStart")
    cases: list[tuple[bytes, str, type[Exception] | None]] = [
        (short_int, "event stream: malformed headers", struct.error),
        (
            twice,
            "event stream: malformed headers (header ':event-type' appears twice)",
            DuplicateHeader,
        ),
        # botocore slices a uuid without a length check; the spec's uuid is 16 bytes
        (short_uuid, "event stream: malformed headers", None),
    ]
    for headers, text, boto_error in cases:
        data = message(headers, payload) + rest
        err = failure([data])
        assert (str(err), err.retry_safe) == (f"{text} ({HINT[False]})", False)
        if boto_error is not None:
            assert isinstance(botocore_read([data])[1], boto_error)
    # every well-formed value type is still read past
    all_kinds = event_headers("messageStart") + b"".join(
        [
            header("t", 0),
            header("f", 1),
            header("b", 2, -1),
            header("s", 3, 2),
            header("i", 4, 3),
            header("l", 5, 4),
            header("y", 6, b"\x00\x01"),
            header("ts", 8, 5),
            header("u", 9, range(16)),
        ]
    )
    data = message(all_kinds, payload) + rest
    assert read_stream([data]).text == "a"
    assert botocore_read([data])[1] is None


# -- 5: a tool input reads the same whole and streamed --------------------------------


def test_a_tool_input_of_depth_100_reads_the_same_whole_and_streamed() -> None:
    arguments = nested(100)
    whole = reader(PROVIDER).parse_response(whole_tool_body(arguments))
    streamed = read_stream([tool_stream(arguments)])
    assert whole.parts == streamed.parts == (ToolCallPart("tooluse_1", "f", arguments),)
    deeper = nested(101)
    inner = "$.a" + "[0]" * 99
    cases = [
        (
            lambda: reader(PROVIDER).parse_response(whole_tool_body(deeper)),
            "response: $.output.message.content[0].toolUse.input"
            f"{inner[1:]}: nesting deeper than 106 levels",
        ),
        (
            lambda: read_stream([tool_stream(deeper)]),
            f"block 0 ('f'): toolUse input: {inner}: nesting deeper than 100 levels",
        ),
    ]
    for call, text in cases:
        with pytest.raises(ResponseError) as err:
            call()
        assert (str(err.value), err.value.retry_safe) == (f"{text} ({HINT[False]})", False)
