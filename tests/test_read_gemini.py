"""Gemini responses: fixtures checked against google-genai's ``GenerateContentResponse``,
the whole body and the ``alt=sse`` stream in any chunking, errors, the record round trip
(thought parts and thought signatures back byte-identical) and an end-to-end tool loop
through the official client's HTTP layer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pydantic
import pytest
from conv_helpers import example_bundle, user
from google import genai
from google.genai import _api_client
from google.genai.types import GenerateContentResponse, HttpOptions
from prefixlock import Conversation, ResponseError, ToolResult, providers
from prefixlock.core import canonical
from prefixlock.core.messages import OpaquePart, TextPart, ToolCallPart
from prefixlock.core.output import Usage
from prefixlock.providers.readers import reader
from prefixlock.store.contract import MemoryStore
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

P = "gemini"
SIG_CALL = "CiQB0e2Kb7TqHqYqgV8sdVJ5Q2oYb0q1Zt3vN6hX9kTq1bOeY2E="
SIG_TEXT = "CmQB0e2Kb3nX1zT0bG9vcC10dXJuLXR3by1zaWduYXR1cmU="
SIG_BARE = "CiQB0e2Kb5lkZC1jYWxsLXdpdGhvdXQtaWQ="  # the id-less call's


def whole(name: str) -> Any:
    return reader(P).parse_response(fixture(P, f"{name}.json"))


# -- fixtures are the real format -------------------------------------------------------


@pytest.mark.parametrize("name", [*TURNS, "no_call_id"])
def test_fixture_is_a_valid_generate_content_response(name: str) -> None:
    strict(GenerateContentResponse, canonical.loads(fixture(P, f"{name}.json")))


@pytest.mark.parametrize("turn", TURNS)
def test_every_stream_chunk_is_a_valid_generate_content_response(turn: str) -> None:
    events = sse_events(fixture(P, f"{turn}.sse"))
    for name, data in events:
        assert name == "message"  # alt=sse sends data lines only
        strict(GenerateContentResponse, data)
    assert [("finishReason" in e[1]["candidates"][0]) for e in events][-1]


def test_a_fixture_with_an_unknown_key_is_refused() -> None:
    data = canonical.loads(fixture(P, "turn1.json"))
    data["candidates"][0]["content"]["parts"][0]["thinking"] = "x"
    with pytest.raises(pydantic.ValidationError, match="thinking"):
        strict(GenerateContentResponse, data)


# -- whole response ---------------------------------------------------------------------


def test_parse_maps_thoughts_text_and_parallel_calls_in_model_order() -> None:
    out = whole("turn1")
    parts = canonical.loads(fixture(P, "turn1.json"))["candidates"][0]["content"]["parts"]
    assert out.parts == (
        OpaquePart(P, canonical.dumps(parts[0])),
        TextPart("I'll read the module and its test."),
        ToolCallPart("call-8f2a1c", "read_file", '{"path":"src/app.py"}', SIG_CALL),
        ToolCallPart("call-3b7d90", "read_file", '{"lines":[1,40],"path":"tests/test_app.py"}'),
    )
    assert out.parts[0].value["thought"] is True  # type: ignore[union-attr]
    assert (out.stop_reason, out.model) == ("STOP", "gemini-2.5-flash")


def test_a_signed_final_text_keeps_its_signature() -> None:
    out = whole("turn2")
    assert out.parts[1] == TextPart(
        "The function strips the trailing newline the test expects. Fix: keep it.\n", SIG_TEXT
    )


def test_a_function_call_without_id_gets_a_local_id_that_is_never_sent() -> None:
    out = whole("no_call_id")
    local = "gemini-local-oWIbaLqdL8y3nvgP2cXJgAw-0"  # responseId and part index
    assert out.parts == (ToolCallPart(local, "read_file", '{"path":"README.md"}', SIG_BARE),)
    assert out.tool_calls == out.parts
    # the stream of the same response names the call alike
    streamed = read_stream(P, [_as_sse("no_call_id")])
    assert streamed.tool_calls == out.tool_calls


def _as_sse(name: str) -> bytes:
    return b"data: " + canonical.dumpb(canonical.loads(fixture(P, f"{name}.json"))) + b"\n\n"


def test_usage_prompt_count_includes_the_cache_and_output_includes_thoughts() -> None:
    used = whole("turn1").usage
    assert used == Usage(
        input_tokens=3636,
        cache_read_tokens=2048,
        cache_write_tokens=None,
        output_tokens=61 + 175,
        reasoning_tokens=175,
        raw=canonical.dumps(canonical.loads(fixture(P, "turn1.json"))["usageMetadata"]),
    )
    bare = whole("no_call_id").usage
    assert bare is not None
    assert (bare.input_tokens, bare.cache_read_tokens, bare.reasoning_tokens) == (120, None, None)
    assert bare.output_tokens == 12


def test_a_blocked_prompt_has_no_parts_and_says_why() -> None:
    out = reader(P).parse_response(b'{"promptFeedback":{"blockReason":"SAFETY"}}')
    assert (out.parts, out.stop_reason) == ((), "SAFETY")
    stream = reader(P).stream_reader()
    stream.feed(b'data: {"promptFeedback":{"blockReason":"SAFETY"}}\n\n')
    assert stream.result().stop_reason == "SAFETY"


# -- streams ----------------------------------------------------------------------------


@pytest.mark.parametrize("turn", TURNS)
def test_stream_in_any_chunking_equals_the_whole_response(turn: str) -> None:
    expected = whole(turn)
    for label, chunks in chunkings(fixture(P, f"{turn}.sse")):
        assert read_stream(P, chunks) == expected, label


def test_streamed_text_pieces_join_but_thought_and_answer_stay_apart() -> None:
    out = read_stream(P, [fixture(P, "turn1.sse")])
    assert [type(p).__name__ for p in out.parts] == [
        "OpaquePart",
        "TextPart",
        "ToolCallPart",
        "ToolCallPart",
    ]


def test_a_text_after_a_signed_text_is_a_new_part() -> None:
    chunks = [
        b'data: {"candidates":[{"content":{"parts":[{"text":"a","thoughtSignature":"c2ln"}]}}]}'
        b"\n\n",
        b'data: {"candidates":[{"content":{"parts":[{"text":"b"}]},"finishReason":"STOP"}]}\n\n',
    ]
    assert read_stream(P, chunks).parts == (TextPart("a", "c2ln"), TextPart("b"))


# -- failures ---------------------------------------------------------------------------


def _fail(body: bytes) -> ResponseError:
    with pytest.raises(ResponseError) as info:
        read_stream(P, [body])
    return info.value


def test_an_unavailable_error_chunk_is_retry_safe() -> None:
    err = _fail(fixture(P, "error_unavailable.sse"))
    assert err.retry_safe
    assert str(err) == (
        "gemini error 503 UNAVAILABLE: The model is overloaded. Please try again later. "
        "(a retry with the same event id is safe)"
    )


def test_an_invalid_argument_error_chunk_is_not_retry_safe() -> None:
    err = _fail(fixture(P, "error_invalid.sse"))
    assert not err.retry_safe
    assert str(err) == (
        "gemini error 400 INVALID_ARGUMENT: Request contains an invalid argument. "
        "(do not retry as is)"
    )


def test_a_stream_without_its_finish_reason_chunk_is_retry_safe() -> None:
    body = fixture(P, "turn1.sse")
    cut = body[: body.rindex(b"data: ")]
    err = _fail(cut)
    assert err.retry_safe
    assert str(err) == (
        "the stream ended before its final event (a retry with the same event id is safe)"
    )
    err = _fail(body[:-40])
    assert str(err) == (
        "the event stream ended inside an event (truncated) "
        "(a retry with the same event id is safe)"
    )


def test_malformed_json_in_a_chunk_is_not_retry_safe() -> None:
    err = _fail(b'data: {"candidates": [\n\n')
    assert not err.retry_safe
    assert str(err).startswith("event 'message': not JSON (")
    assert str(err).endswith(") (do not retry as is)")


def test_a_chunk_after_the_finish_reason_is_refused() -> None:
    body = fixture(P, "turn2.sse")
    err = _fail(body + body[: body.index(b"\n\n") + 2])
    assert str(err) == "event 'message' after the end (do not retry as is)"


def test_an_error_body_is_refused_with_its_status() -> None:
    body = b'{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}'
    with pytest.raises(ResponseError) as info:
        reader(P).parse_response(body)
    assert info.value.retry_safe
    assert str(info.value) == (
        "gemini error 429 RESOURCE_EXHAUSTED: Resource exhausted "
        "(a retry with the same event id is safe)"
    )


@pytest.mark.parametrize(
    ("status", "code", "retry"),
    [
        (400, "INVALID_ARGUMENT", False),
        (400, "FAILED_PRECONDITION", False),
        (403, "PERMISSION_DENIED", False),
        (404, "NOT_FOUND", False),
        (429, "RESOURCE_EXHAUSTED", True),
        (500, "INTERNAL", True),
        (503, "UNAVAILABLE", True),
        (504, "DEADLINE_EXCEEDED", True),
    ],
)
def test_is_retryable_follows_the_documented_error_codes(
    status: int, code: str, retry: bool
) -> None:
    body = canonical.dumpb({"error": {"code": status, "message": "m", "status": code}})
    assert reader(P).is_retryable(status, body) is retry


# -- round trip and end to end ----------------------------------------------------------


def _model_parts(body: bytes) -> list[list[Any]]:
    contents = canonical.loads(body)["contents"]
    return [c["parts"] for c in contents if c["role"] == "model"]


def test_round_trip_sends_thoughts_and_signatures_back_byte_identical() -> None:
    outputs = [whole(t) for t in TURNS]
    calls = round_trip(P, outputs)
    assert len(calls) == 3
    body = calls[1][1]
    thought = outputs[0].parts[0]
    assert isinstance(thought, OpaquePart)
    assert body.count(thought.data.encode()) == 1
    sent = _model_parts(body)[-1]
    assert sent[2] == {
        "functionCall": {"id": "call-8f2a1c", "name": "read_file", "args": {"path": "src/app.py"}},
        "thoughtSignature": SIG_CALL,
    }
    assert "thoughtSignature" not in sent[3]
    results = canonical.loads(body)["contents"][-1]["parts"]
    assert [r["functionResponse"]["id"] for r in results] == ["call-8f2a1c", "call-3b7d90"]
    assert [r["functionResponse"]["name"] for r in results] == ["read_file", "read_file"]


def test_an_id_less_call_is_answered_and_goes_back_without_any_id() -> None:
    wire = providers.get(P)
    conv = Conversation.open(MemoryStore(), example_bundle(), "conv-1")
    conv.handle(user("u1"))
    out = whole("no_call_id")
    conv.record(out)
    (call,) = out.tool_calls
    body = canonical.loads(wire.serialize(conv.tool_results([ToolResult(call.call_id, "# hi")])))
    made, answered = body["contents"][-2]["parts"][0], body["contents"][-1]["parts"][0]
    assert made == {
        "functionCall": {"name": "read_file", "args": {"path": "README.md"}},
        "thoughtSignature": SIG_BARE,
    }
    assert answered == {"functionResponse": {"name": "read_file", "response": {"output": "# hi"}}}
    assert b"gemini-local-" not in wire.serialize(conv.request())


@pytest.mark.parametrize("source", ["json", "sse"])
def test_every_opaque_part_and_signature_of_the_loop_is_in_the_last_request(
    source: str,
) -> None:
    if source == "json":
        outputs = [whole(t) for t in TURNS]
    else:
        outputs = [read_stream(P, [fixture(P, f"{t}.sse")]) for t in TURNS]
    outputs.append(whole("no_call_id"))
    calls = round_trip(P, outputs)
    body = calls[-1][1]
    assert opaque_in(body, outputs) == (2, 2)  # the two thought parts
    for signature in (SIG_CALL, SIG_TEXT, SIG_BARE):
        assert body.count(b'"thoughtSignature":"%s"' % signature.encode()) == 1


def _send(stub: Any, http: Any, stream: bool) -> list[bytes]:
    """google-genai's own HTTP layer POSTs http_request()'s exact bytes (a ``bytes``
    body is sent as is; a dict body would be re-encoded by json.dumps)."""
    client = genai.Client(api_key="test-key", http_options=HttpOptions(base_url=stub.url))
    api = client._api_client
    request = _api_client.HttpRequest(
        headers=dict(http.headers), url=stub.url + http.path, method="post", data=http.body
    )
    response = api._request_once(request, stream=stream)
    if stream:
        return list(response.response_stream.iter_bytes())  # type: ignore[union-attr]
    return [text.encode() for text in response.response_stream]  # type: ignore[union-attr]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_tool_loop_through_the_sdk_client_survives_a_restart(tmp_path: Path, stream: bool) -> None:
    with stub_server() as stub:
        plain = tool_loop(
            P,
            stub,
            tmp_path / "a.db",
            _send,
            stream=stream,
            restart_after=None,
            content_type="text/event-stream",
        )
        straight = [s.body for s in stub.seen]
        restarted = tool_loop(
            P,
            stub,
            tmp_path / "b.db",
            _send,
            stream=stream,
            restart_after=0,
            content_type="text/event-stream",
        )
        after = [s.body for s in stub.seen[len(straight) :]]
        paths = {s.path for s in stub.seen}
    assert plain == restarted == [whole(t) for t in TURNS]
    assert len(straight) == 2
    assert after == straight
    suffix = ":streamGenerateContent?alt=sse" if stream else ":generateContent"
    assert paths == {"/v1beta/models/gemini-4-argon" + suffix}


# -- several candidates (candidateCount > 1) -------------------------------------------
# The conversation records one: the caller names it (candidate=i); several candidates
# and no pick are refused, never read as candidate 0 silently (docs/agent-loop.md).

OTHER = "Keep the trailing newline; the test is right."
NOT_SAFE = " (do not retry as is)"


def _two_candidates() -> bytes:
    data = canonical.loads(fixture(P, "turn2.json"))
    other = {
        "content": {"parts": [{"text": OTHER}], "role": "model"},
        "finishReason": "STOP",
        "index": 1,
    }
    data["candidates"].append(other)
    strict(GenerateContentResponse, data)
    return canonical.dumpb(data)


def _two_candidate_stream() -> bytes:
    """turn2.sse with candidate 1 beside candidate 0; candidate 1 ends after 0 did."""
    chunks = [data for _, data in sse_events(fixture(P, "turn2.sse"))]
    words = OTHER.split(" ")
    lines = []
    for i, chunk in enumerate(chunks):
        piece = {"content": {"parts": [{"text": words[i] + " "}], "role": "model"}, "index": 1}
        chunk["candidates"].append(piece)
        lines.append(chunk)
    rest = " ".join(words[len(chunks) :])
    last = {"content": {"parts": [{"text": rest}], "role": "model"}, "index": 1}
    lines.append({**lines[-1], "candidates": [{**last, "finishReason": "STOP"}]})
    for data in lines:
        strict(GenerateContentResponse, data)
    return b"".join(b"data: " + canonical.dumpb(d) + b"\n\n" for d in lines)


def test_several_candidates_are_refused_without_a_pick() -> None:
    with pytest.raises(ResponseError) as info:
        whole_body(_two_candidates())
    assert str(info.value) == (
        "gemini response carries 2 candidates: pick the one to record with candidate=i "
        "(0 to 1)" + NOT_SAFE
    )
    with pytest.raises(ResponseError) as info:
        read_stream(P, _two_candidate_stream())
    assert str(info.value) == (
        "gemini stream carries more than one candidate: pick the one to record with "
        "candidate=i" + NOT_SAFE
    )


def test_the_picked_candidate_is_read_whole_and_streamed() -> None:
    wire = providers.get(P)
    assert wire.parse_response(_two_candidates(), candidate=0) == whole("turn2")
    assert wire.parse_response(_two_candidates(), candidate=1).text == OTHER
    for label, chunks in chunkings(_two_candidate_stream()):
        for pick in (0, 1):
            stream = wire.stream_reader(candidate=pick)
            for chunk in chunks:
                stream.feed(chunk)
            got = stream.result()
            assert got.parts == wire.parse_response(_two_candidates(), candidate=pick).parts
            assert got.usage == whole("turn2").usage, label
    with pytest.raises(ResponseError, match=r"^gemini response has no candidate 2 \(it"):
        wire.parse_response(_two_candidates(), candidate=2)


def test_a_chunk_of_the_picked_candidate_after_its_finish_is_refused() -> None:
    stream = providers.get(P).stream_reader(candidate=0)
    stream.feed(_two_candidate_stream())
    late = canonical.loads(fixture(P, "turn2.json"))
    with pytest.raises(ResponseError, match=r"^event 'message' after the end"):
        stream.feed(b"data: " + canonical.dumpb(late) + b"\n\n")


def whole_body(body: bytes) -> Any:
    return reader(P).parse_response(body)
