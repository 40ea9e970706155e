"""Anthropic Messages responses: fixtures checked against the SDK's response types, the
whole body and the stream in any chunking, the SDK's accumulator, errors, the record
round trip and an end-to-end tool loop through the official client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pydantic
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from prefixlock import ResponseError
from prefixlock.core import canonical
from prefixlock.core.messages import OpaquePart, TextPart, ToolCallPart
from prefixlock.core.output import Usage
from prefixlock.providers.readers import reader
from read_support import (
    TURNS,
    chunkings,
    fixture,
    opaque_in,
    read_stream,
    round_trip,
    sse_events,
    strict,
    tool_loop,
)
from stub_server import stub_server

P = "anthropic"
EVENTS: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(RawMessageStreamEvent)


def whole(turn: str) -> Any:
    return reader(P).parse_response(fixture(P, f"{turn}.json"))


# -- fixtures are the real format -------------------------------------------------------


@pytest.mark.parametrize("turn", TURNS)
def test_fixture_is_a_valid_message_and_its_stream_valid_events(turn: str) -> None:
    strict(Message, canonical.loads(fixture(P, f"{turn}.json")))
    events = sse_events(fixture(P, f"{turn}.sse"))
    for name, data in events:
        assert name == data["type"]  # the SSE event name repeats the data type
        if name != "ping":  # ping is not in RawMessageStreamEvent
            strict(EVENTS, data)
    assert events[-1][0] == "message_stop"


def test_a_fixture_with_an_unknown_key_is_refused() -> None:
    data = canonical.loads(fixture(P, "turn1.json"))
    data["content"][0]["thinking_tokens"] = 3
    with pytest.raises(AssertionError, match="keys the SDK type does not know"):
        strict(Message, data)


# -- whole response ---------------------------------------------------------------------


def test_parse_keeps_every_block_in_model_order() -> None:
    out = whole("turn1")
    body = canonical.loads(fixture(P, "turn1.json"))
    assert out.parts == (
        OpaquePart(P, canonical.dumps(body["content"][0])),
        OpaquePart(P, canonical.dumps(body["content"][1])),
        TextPart("I'll read the module and its test."),
        ToolCallPart("toolu_01A09q90qw90lq917835lq9", "read_file", '{"path":"src/app.py"}'),
        ToolCallPart(
            "toolu_01B2c3d4e5f6g7h8i9j0k1l2",
            "read_file",
            '{"lines":[1,40],"path":"tests/test_app.py"}',
        ),
    )
    assert '"signature":"EqQBCkgIARABGAIiQL2z' in out.parts[0].data  # type: ignore[union-attr]
    assert out.parts[1].value["type"] == "redacted_thinking"  # type: ignore[union-attr]
    assert (out.stop_reason, out.model) == ("tool_use", "claude-sonnet-4-5-20250929")


def test_two_text_blocks_stay_two_parts() -> None:
    out = whole("turn2")
    assert [type(p).__name__ for p in out.parts] == ["OpaquePart", "TextPart", "TextPart"]
    assert out.text == "The function strips the trailing newline the test expects.Fix: keep it.\n"


def test_usage_counts_every_prompt_token() -> None:
    # input_tokens 52 after the last breakpoint + 1536 written + 2048 read
    assert whole("turn1").usage == Usage(
        input_tokens=52 + 1536 + 2048,
        cache_read_tokens=2048,
        cache_write_tokens=1536,
        output_tokens=236,
        reasoning_tokens=None,
        raw=canonical.dumps(canonical.loads(fixture(P, "turn1.json"))["usage"]),
    )


def test_usage_without_cache_fields_reports_none_for_them() -> None:
    body = canonical.loads(fixture(P, "turn2.json"))
    body["usage"] = {"input_tokens": 9, "output_tokens": 4}
    used = reader(P).parse_response(canonical.dumpb(body)).usage
    assert used is not None
    assert (used.input_tokens, used.cache_read_tokens, used.cache_write_tokens) == (9, None, None)


# -- streams ----------------------------------------------------------------------------


@pytest.mark.parametrize("turn", TURNS)
def test_stream_in_any_chunking_equals_the_whole_response(turn: str) -> None:
    expected = whole(turn)
    for label, chunks in chunkings(fixture(P, f"{turn}.sse")):
        assert read_stream(P, chunks) == expected, label


@pytest.mark.parametrize("turn", TURNS)
def test_the_sdk_accumulator_agrees_with_the_stream_reader(turn: str) -> None:
    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for name, data in sse_events(fixture(P, f"{turn}.sse")):
        if name != "ping":
            snapshot = accumulate_event(
                event=EVENTS.validate_python(data), current_snapshot=snapshot, json_bufs=bufs
            )
    accumulated = canonical.dumpb(snapshot.to_dict(mode="json"))
    ours = read_stream(P, [fixture(P, f"{turn}.sse")])
    assert reader(P).parse_response(accumulated) == ours
    sent = Message.model_validate_json(fixture(P, f"{turn}.json"))
    assert snapshot.to_dict(exclude_none=True) == sent.to_dict(exclude_none=True)


# -- failures ---------------------------------------------------------------------------


def _fail(body: bytes) -> ResponseError:
    with pytest.raises(ResponseError) as info:
        read_stream(P, [body])
    return info.value


def test_an_overloaded_error_event_is_retry_safe() -> None:
    err = _fail(fixture(P, "error_overloaded.sse"))
    assert err.retry_safe
    assert str(err) == (
        "anthropic error overloaded_error: Overloaded (a retry with the same event id is safe)"
    )


def test_an_invalid_request_error_event_is_not_retry_safe() -> None:
    err = _fail(fixture(P, "error_invalid.sse"))
    assert not err.retry_safe
    assert str(err) == (
        "anthropic error invalid_request_error: messages: text content blocks must be "
        "non-empty (do not retry as is)"
    )


def test_a_stream_cut_before_message_stop_is_retry_safe() -> None:
    body = fixture(P, "turn1.sse")
    cut = body[: body.index(b"event: message_stop")]
    err = _fail(cut)
    assert err.retry_safe
    assert str(err) == (
        "the stream ended before its final event (a retry with the same event id is safe)"
    )
    err = _fail(body[:-30])  # inside the last event
    assert str(err) == (
        "the event stream ended inside an event (truncated) "
        "(a retry with the same event id is safe)"
    )


def test_malformed_json_in_an_event_is_not_retry_safe() -> None:
    err = _fail(b'event: message_start\ndata: {"type":"message_start",\n\n')
    assert not err.retry_safe
    assert str(err).startswith("event 'message_start': not JSON (")
    assert str(err).endswith(") (do not retry as is)")


def test_a_delta_for_an_unknown_block_is_refused() -> None:
    body = fixture(P, "turn2.sse").replace(b'"index":2,"delta"', b'"index":7,"delta"')
    err = _fail(body)
    assert str(err) == (
        "anthropic stream: content_block_delta for unknown block index 7 (do not retry as is)"
    )


def test_an_error_body_is_refused_with_its_type() -> None:
    body = b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}'
    with pytest.raises(ResponseError) as info:
        reader(P).parse_response(body)
    assert info.value.retry_safe
    assert str(info.value) == (
        "anthropic error rate_limit_error: slow down (a retry with the same event id is safe)"
    )
    with pytest.raises(ResponseError, match=r"^response: not JSON \(.*\(do not retry as is\)$"):
        reader(P).parse_response(b"{not json")


@pytest.mark.parametrize(
    ("status", "error_type", "retry"),
    [
        (400, "invalid_request_error", False),
        (401, "authentication_error", False),
        (403, "permission_error", False),
        (404, "not_found_error", False),
        (413, "request_too_large", False),
        (429, "rate_limit_error", True),
        (500, "api_error", True),
        (504, "timeout_error", True),
        (529, "overloaded_error", True),
    ],
)
def test_is_retryable_follows_the_documented_error_codes(
    status: int, error_type: str, retry: bool
) -> None:
    body = canonical.dumpb({"type": "error", "error": {"type": error_type, "message": "m"}})
    assert reader(P).is_retryable(status, body) is retry


# -- round trip and end to end ----------------------------------------------------------


def test_round_trip_sends_every_opaque_block_back_byte_identical() -> None:
    outputs = [whole(t) for t in TURNS]
    calls = round_trip(P, outputs)
    assert len(calls) == 3
    body = calls[1][1]
    opaque = [p for p in outputs[0].parts if isinstance(p, OpaquePart)]
    assert len(opaque) == 2
    for part in opaque:
        assert body.count(part.data.encode()) == 1
    sent = canonical.loads(body)["messages"]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert [b["type"] for b in assistant["content"]] == [
        "thinking",
        "redacted_thinking",
        "text",
        "tool_use",
        "tool_use",
    ]
    results = sent[-1]["content"]
    assert [r["tool_use_id"] for r in results] == [c.call_id for c in outputs[0].tool_calls]
    assert [b["id"] for b in assistant["content"][3:]] == [c.call_id for c in outputs[0].tool_calls]


@pytest.mark.parametrize("source", ["json", "sse"])
def test_every_opaque_block_of_the_loop_is_in_the_last_request_byte_identical(
    source: str,
) -> None:
    if source == "json":
        outputs = [whole(t) for t in TURNS]
    else:
        outputs = [read_stream(P, [fixture(P, f"{t}.sse")]) for t in TURNS]
    calls = round_trip(P, outputs)
    assert opaque_in(calls[-1][1], outputs) == (3, 3)


def _send(stub: Any, http: Any, stream: bool) -> list[bytes]:
    """The official client POSTs http_request()'s exact bytes (``content=``, not a
    re-encoded ``body=``) to the stub."""
    client = anthropic.Anthropic(api_key="test-key", base_url=stub.url, max_retries=0)
    options: Any = {"headers": dict(http.headers)}
    if not stream:
        response = client.post(
            http.path, cast_to=httpx2.Response, content=http.body, options=options
        )
        return [response.content]
    events = client.post(
        http.path,
        cast_to=Message,
        content=http.body,
        options=options,
        stream=True,
        stream_cls=anthropic.Stream[RawMessageStreamEvent],
    )
    return list(events.response.iter_bytes())


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_tool_loop_through_the_sdk_client_survives_a_restart(tmp_path: Path, stream: bool) -> None:
    content_type = "text/event-stream"
    with stub_server() as stub:
        plain = tool_loop(
            P,
            stub,
            tmp_path / "a.db",
            _send,
            stream=stream,
            restart_after=None,
            content_type=content_type,
        )
        straight = [s.body for s in stub.seen]
        restarted = tool_loop(
            P,
            stub,
            tmp_path / "b.db",
            _send,
            stream=stream,
            restart_after=0,
            content_type=content_type,
        )
        after = [s.body for s in stub.seen[len(straight) :]]
    assert plain == restarted == [whole(t) for t in TURNS]
    assert len(straight) == 2
    assert after == straight


# -- citations --------------------------------------------------------------------------
# docs.anthropic.com/en/docs/build-with-claude/citations: a cited answer is split into
# text blocks, the cited ones with a ``citations`` list (char_location, page_location,
# content_block_location ...); streamed, each arrives as ``citations_delta`` events on its
# text block (anthropic-sdk-python types/citations_delta.py, text_block.py). A cited
# block is kept whole, as an opaque part, so the next request echoes it byte for byte.


def test_the_cited_fixture_is_a_valid_message_with_text_block_citations() -> None:
    message = strict(Message, canonical.loads(fixture(P, "cited.json")))
    kinds = [[c.type for c in block.citations or ()] for block in message.content]
    assert kinds == [[], ["char_location"], [], ["page_location", "content_block_location"], []]
    events = sse_events(fixture(P, "cited.sse"))
    for name, data in events:
        if name != "ping":
            strict(EVENTS, data)
    deltas = [d["delta"]["type"] for n, d in events if n == "content_block_delta"]
    assert deltas.count("citations_delta") == 3


def test_a_cited_text_block_is_kept_whole_and_its_text_stays_visible() -> None:
    out = whole("cited")
    blocks = canonical.loads(fixture(P, "cited.json"))["content"]
    assert out.parts == (
        TextPart("According to the notes, "),
        OpaquePart(P, canonical.dumps(blocks[1])),
        TextPart(", and "),
        OpaquePart(P, canonical.dumps(blocks[3])),
        TextPart("."),
    )
    assert out.text == "According to the notes, the grass is green, and water is essential" + (
        " and the sky is blue."
    )


def test_a_cited_stream_in_any_chunking_equals_the_whole_response() -> None:
    expected = whole("cited")
    for label, chunks in chunkings(fixture(P, "cited.sse")):
        assert read_stream(P, chunks) == expected, label


def test_the_sdk_accumulator_builds_the_same_citations() -> None:
    snapshot: Any = None
    bufs: dict[int, bytes] = {}
    for name, data in sse_events(fixture(P, "cited.sse")):
        if name != "ping":
            snapshot = accumulate_event(
                event=EVENTS.validate_python(data), current_snapshot=snapshot, json_bufs=bufs
            )
    accumulated = canonical.dumpb(snapshot.to_dict(mode="json"))
    assert reader(P).parse_response(accumulated) == read_stream(P, fixture(P, "cited.sse"))
    sent = Message.model_validate_json(fixture(P, "cited.json"))
    assert snapshot.to_dict(exclude_none=True) == sent.to_dict(exclude_none=True)


@pytest.mark.parametrize("source", ["json", "sse"])
def test_cited_blocks_go_back_byte_identical_in_the_next_request(source: str) -> None:
    out = whole("cited") if source == "json" else read_stream(P, fixture(P, "cited.sse"))
    calls = round_trip(P, [out])
    body = calls[-1][1]
    assert opaque_in(body, [out]) == (2, 2)
    sent = canonical.loads(body)["messages"]
    assistant = [m for m in sent if m["role"] == "assistant"][-1]
    assert assistant["content"] == canonical.loads(fixture(P, "cited.json"))["content"]


def test_thinking_tokens_are_the_reasoning_count() -> None:
    """``usage.output_tokens_details.thinking_tokens`` (anthropic-sdk-python
    ``types/output_tokens_details.py``: the reasoning the model produced, always <=
    output_tokens) is the reasoning count; before, it was always None."""
    body = canonical.loads(fixture(P, "turn1.json"))
    body["usage"]["output_tokens_details"] = {"thinking_tokens": 200}
    strict(Message, body)
    used = reader(P).parse_response(canonical.dumps(body).encode()).usage
    assert used is not None
    assert (used.output_tokens, used.reasoning_tokens) == (236, 200)
    body["usage"]["output_tokens_details"] = {"thinking_tokens": "200"}
    used = reader(P).parse_response(canonical.dumps(body).encode()).usage
    assert used is not None and used.reasoning_tokens is None
