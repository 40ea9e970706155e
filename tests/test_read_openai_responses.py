"""Reading OpenAI Responses: whole bodies, SSE streams in any chunking, the SDK's own
stream state, encrypted reasoning round-tripped into the next request, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai._types import omit
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response, ResponseStreamEvent
from prefixlock import ResponseError, providers
from prefixlock.core.messages import OpaquePart, TextPart, ToolCallPart
from prefixlock.core.output import Usage
from pydantic import TypeAdapter
from read_support import (
    DATA,
    chunkings,
    fixture,
    messages_end,
    opaque_in_next_body,
    openai_sdk_tool_loop,
    read_stream,
    sse_data,
    unknown_keys,
)

NAME = "openai-responses"
P = providers.get(NAME)
#: the tool loop: tool calls, then the final answer
TURNS = ("tool_calls", "final")
WHOLE = ["tool_calls", "final", "incomplete"]
EVENT = TypeAdapter(ResponseStreamEvent)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("name", WHOLE)
def test_fixtures_are_sdk_responses_without_unknown_keys(name: str) -> None:
    assert unknown_keys(Response.model_validate_json(fixture(NAME, f"{name}.json"))) == []
    for event in sse_data(fixture(NAME, f"{name}.sse")):
        assert unknown_keys(EVENT.validate_python(event)) == []


@pytest.mark.parametrize("name", ["failed.sse", "error.sse"])
def test_failure_fixtures_are_sdk_stream_events(name: str) -> None:
    for event in sse_data(fixture(NAME, name)):
        assert unknown_keys(EVENT.validate_python(event)) == []


def test_items_map_in_model_order_with_reasoning_verbatim() -> None:
    body = json.loads(fixture(NAME, "tool_calls.json"))
    out = P.parse_response(fixture(NAME, "tool_calls.json"))
    assert out.parts == (
        OpaquePart(NAME, _canonical(body["output"][0])),
        TextPart("I'll read both files."),
        TextPart(" Then I'll run the test."),  # two output_text parts, never merged
        ToolCallPart("call_Qw12Er34Ty56", "read_file", '{"path": "a.py"}'),
        ToolCallPart("call_Ui78Op90As12", "read_file", '{"path":"tests/test_a.py","limit":200}'),
    )
    assert json.loads(out.parts[0].data)["encrypted_content"].startswith("gAAAAAB")  # type: ignore[union-attr]
    assert (out.stop_reason, out.model) == ("completed", "gpt-5-2025-08-07")
    assert out.usage == Usage(2480, 2304, 160, 312, 192, _canonical(body["usage"]))


def test_incomplete_response_stops_with_its_reason() -> None:
    out = P.parse_response(fixture(NAME, "incomplete.json"))
    assert out.stop_reason == "max_output_tokens"
    assert [type(p).__name__ for p in out.parts] == ["OpaquePart"]


def test_a_message_with_a_refusal_is_kept_whole() -> None:
    body = json.loads(fixture(NAME, "final.json"))
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    body["output"] = [message]
    assert unknown_keys(Response.model_validate(body)) == []
    out = P.parse_response(json.dumps(body).encode())
    assert out.parts == (OpaquePart(NAME, _canonical(message)),)


@pytest.mark.parametrize("name", WHOLE)
def test_streams_in_any_chunking_equal_the_whole_response(name: str) -> None:
    whole = P.parse_response(fixture(NAME, f"{name}.json"))
    for label, chunks in chunkings(fixture(NAME, f"{name}.sse")):
        assert read_stream(NAME, chunks) == whole, label


@pytest.mark.parametrize("name", ["tool_calls", "final"])
def test_the_sdk_stream_state_agrees(name: str) -> None:
    state: ResponseStreamState[None] = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in sse_data(fixture(NAME, f"{name}.sse")):
        state.handle_event(EVENT.validate_python(event))
    final = state._completed_response
    assert final is not None
    sdk = json.loads(final.model_dump_json(exclude_unset=True))
    ours = read_stream(NAME, fixture(NAME, f"{name}.sse"))
    expected = [
        (item["type"], item.get("call_id"), item.get("arguments"), item.get("encrypted_content"))
        for item in sdk["output"]
    ]
    got = [
        (
            "function_call" if isinstance(p, ToolCallPart) else json.loads(p.data)["type"],
            p.call_id if isinstance(p, ToolCallPart) else None,
            p.arguments if isinstance(p, ToolCallPart) else None,
            None if isinstance(p, ToolCallPart) else json.loads(p.data)["encrypted_content"],
        )
        for p in ours.parts
        if not isinstance(p, TextPart)
    ]
    assert got == [e for e in expected if e[0] != "message"]
    texts = [
        c["text"] for item in sdk["output"] if item["type"] == "message" for c in item["content"]
    ]
    assert [p.text for p in ours.parts if isinstance(p, TextPart)] == texts
    assert ours.stop_reason == sdk["status"]
    assert ours.usage is not None and json.loads(ours.usage.raw) == sdk["usage"]


@pytest.mark.parametrize("name", WHOLE)
def test_every_opaque_part_comes_back_byte_identical(name: str) -> None:
    out = P.parse_response(fixture(NAME, f"{name}.json"))
    found, total, _ = opaque_in_next_body(NAME, out)
    assert total >= 1 and found == total


def test_round_trip_ids_match_and_the_previous_body_is_a_prefix() -> None:
    out = P.parse_response(fixture(NAME, "tool_calls.json"))
    _, _, body = opaque_in_next_body(NAME, out)
    items = json.loads(body)["input"]
    calls = [i["call_id"] for i in items if i["type"] == "function_call"]
    outputs = [i["call_id"] for i in items if i["type"] == "function_call_output"]
    assert calls == outputs == ["call_Qw12Er34Ty56", "call_Ui78Op90As12"]
    reasoning = [i for i in items if i["type"] == "reasoning"]
    received = json.loads(fixture(NAME, "tool_calls.json"))["output"][0]
    # stateless (store: false, the default): the item as received, without its id
    assert received["id"].startswith("rs_")
    assert reasoning == [{k: v for k, v in received.items() if k != "id"}]
    assert json.loads(body)["store"] is False
    assert json.loads(body)["include"] == ["reasoning.encrypted_content"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_tool_loop_through_the_sdk_client_survives_a_restart(tmp_path: Path, stream: bool) -> None:
    bodies = openai_sdk_tool_loop(
        NAME,
        tmp_path,
        stream=stream,
        path="/v1/responses",
        turns=TURNS,
        cast_to=Response,
        event=ResponseStreamEvent,
    )
    assert bodies[1].startswith(messages_end(bodies[0]))
    encrypted = json.loads(fixture(NAME, "tool_calls.json"))["output"][0]["encrypted_content"]
    assert encrypted.encode() in bodies[1]
    if stream:
        assert bodies[0].endswith(b',"stream":true}')


# -- failures --------------------------------------------------------------------------

SAFE = " (a retry with the same event id is safe)"
UNSAFE = " (do not retry as is)"


def _fails(stream: bytes) -> ResponseError:
    with pytest.raises(ResponseError) as info:
        read_stream(NAME, stream)
    return info.value


def test_response_failed_with_a_server_error_is_retry_safe() -> None:
    err = _fails(fixture(NAME, "failed.sse"))
    assert str(err) == (
        "openai-responses stream: response.failed (server_error): The server had an error "
        "while processing your request." + SAFE
    )


def test_an_error_event_with_http_200_says_rate_limit_and_retry_safe() -> None:
    err = _fails(fixture(NAME, "error.sse"))
    assert str(err) == (
        "openai-responses stream: error event (rate_limit_exceeded): Rate limit reached for "
        "gpt-5 in organization org-x on tokens per min (TPM)." + SAFE
    )
    assert err.retry_safe


def test_an_invalid_prompt_failure_is_not_retry_safe() -> None:
    stream = fixture(NAME, "failed.sse").replace(b'"server_error"', b'"invalid_prompt"')
    err = _fails(stream)
    assert not err.retry_safe and str(err).endswith(UNSAFE)
    assert "(invalid_prompt)" in str(err)


def test_a_missing_terminal_event_is_truncated_and_retry_safe() -> None:
    stream = fixture(NAME, "tool_calls.sse")
    cut = stream[: stream.rindex(b"event: response.completed")]
    err = _fails(cut)
    assert (str(err), err.retry_safe) == ("the stream ended before its final event" + SAFE, True)


def test_malformed_json_is_not_retry_safe() -> None:
    err = _fails(b"event: response.created\ndata: {not json\n\n")
    assert str(err).startswith("event 'response.created': not JSON (")
    assert not err.retry_safe


def test_deltas_that_disagree_with_the_final_response_are_refused() -> None:
    stream = fixture(NAME, "tool_calls.sse").replace(b'"delta":"{\\"pat"', b'"delta":"{\\"PAT"')
    err = _fails(stream)
    assert str(err) == (
        "openai-responses stream: the argument deltas of output 2 differ from the final "
        "response" + UNSAFE
    )
    stream = fixture(NAME, "tool_calls.sse").replace(b'"delta":"I\'ll r"', b'"delta":"I\'LL r"')
    err = _fails(stream)
    assert str(err) == (
        "openai-responses stream: the text deltas of output 1 part 0 differ from the final "
        "response" + UNSAFE
    )


def test_a_failed_response_body_is_refused() -> None:
    body = json.loads(fixture(NAME, "final.json"))
    body.update(
        status="failed", output=[], error={"code": "rate_limit_exceeded", "message": "slow"}
    )
    with pytest.raises(ResponseError) as info:
        P.parse_response(json.dumps(body).encode())
    assert str(info.value) == "openai-responses response failed (rate_limit_exceeded): slow" + SAFE


@pytest.mark.parametrize(
    ("status", "retry"), [(408, True), (409, True), (429, True), (500, True), (400, False)]
)
def test_is_retryable_by_openai_status_codes(status: int, retry: bool) -> None:
    assert P.is_retryable(status, b"") is retry
    quota = b'{"error":{"code":"insufficient_quota","type":"insufficient_quota"}}'
    assert P.is_retryable(429, quota) is False


def test_fixture_files_are_all_exercised() -> None:
    names = sorted(p.name for p in (DATA / NAME).iterdir())
    expected = [*(f"{n}.json" for n in WHOLE), *(f"{n}.sse" for n in WHOLE)]
    assert names == sorted([*expected, "error.sse", "failed.sse"])


def test_a_message_phase_is_kept_through_the_store_and_sent_back(tmp_path: Path) -> None:
    """openai-python (``types/responses/easy_input_message_param.py``): "when sending
    follow-up requests, preserve and resend phase on all assistant messages -- dropping
    it can degrade performance". Before, the text kept no phase and it was never sent."""
    from conv_helpers import example_bundle, user
    from prefixlock import Conversation, SQLiteStore, ToolResult
    from sdk_judge import assert_valid

    body = json.loads(fixture(NAME, "tool_calls.json"))
    message = next(item for item in body["output"] if item["type"] == "message")
    message["phase"] = "commentary"
    body["output"] = [i for i in body["output"] if i["type"] != "reasoning"]  # any provider
    raw = json.dumps(body).encode()
    assert Response.model_validate_json(raw).output[0].phase == "commentary"  # type: ignore[union-attr]
    out = P.parse_response(raw)
    texts = [p for p in out.parts if isinstance(p, TextPart)]
    assert [(t.text, t.phase) for t in texts] == [
        ("I'll read both files.", "commentary"),
        (" Then I'll run the test.", "commentary"),
    ]
    with SQLiteStore(tmp_path / "c.db") as store:
        conv = Conversation.open(store, example_bundle(), "conv-1")
        conv.handle(user("u1"))
        conv.record(out)
        request = conv.tool_results([ToolResult(c.call_id, "ok") for c in out.tool_calls])
        reopened = Conversation.open(store, example_bundle(), "conv-1")
        assert reopened.request().same_as(request)
    sent = json.loads(P.serialize(request))
    assistant = [i for i in sent["input"] if i.get("role") == "assistant"]
    assert assistant == [
        {"type": "message", "role": "assistant", "content": t.text, "phase": "commentary"}
        for t in texts
    ]
    assert_valid(NAME, sent)
    # the other providers send the text as it is
    other = providers.get("anthropic").serialize(request)
    assert b"commentary" not in other and b"I'll read both files." in other
