"""Reading OpenAI Chat Completions responses: whole bodies, SSE streams in any chunking,
the SDK's own accumulator, the round trip into the next request, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
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

NAME = "openai-chat"
P = providers.get(NAME)
#: the tool loop: tool calls, then the final answer
TURNS = ("tool_calls", "final")
WHOLE = ["tool_calls", "final", "refusal"]


@pytest.mark.parametrize("name", WHOLE)
def test_fixtures_are_sdk_chat_completions_without_unknown_keys(name: str) -> None:
    value = TypeAdapter(ChatCompletion).validate_json(fixture(NAME, f"{name}.json"))
    assert unknown_keys(value) == []
    for chunk in sse_data(fixture(NAME, f"{name}.sse")):
        assert unknown_keys(ChatCompletionChunk.model_validate(chunk)) == []


def test_tool_calls_keep_ids_names_and_argument_strings_verbatim() -> None:
    out = P.parse_response(fixture(NAME, "tool_calls.json"))
    assert out.parts == (
        TextPart("I'll read both files first."),
        ToolCallPart("call_Ab12Cd34", "read_file", '{"path": "a.py"}'),
        ToolCallPart("call_Ef56Gh78", "read_file", '{"path":"tests/test_a.py","limit":200}'),
    )
    assert (out.stop_reason, out.model) == ("tool_calls", "gpt-4.1-2025-04-14")
    raw = json.loads(fixture(NAME, "tool_calls.json"))["usage"]
    assert out.usage == Usage(
        2431, 2304, 127, 61, 0, json.dumps(raw, sort_keys=True, separators=(",", ":"))
    )


def test_usage_without_cache_writes_reports_none() -> None:
    used = P.parse_response(fixture(NAME, "final.json")).usage
    assert used is not None
    assert (used.input_tokens, used.cache_read_tokens, used.cache_write_tokens) == (
        2590,
        2432,
        None,
    )


def test_refusal_is_an_opaque_refusal_part_sent_back_as_a_content_part() -> None:
    out = P.parse_response(fixture(NAME, "refusal.json"))
    refusal = OpaquePart(NAME, '{"refusal":"I can\'t help with that request.","type":"refusal"}')
    assert out.parts == (refusal,)
    found, total, body = opaque_in_next_body(NAME, out)
    assert (found, total) == (1, 1)
    sent = json.loads(body)["messages"]
    assert sent[-2] == {"role": "assistant", "content": [json.loads(refusal.data)]}


@pytest.mark.parametrize("name", WHOLE)
def test_streams_in_any_chunking_equal_the_whole_response(name: str) -> None:
    whole = P.parse_response(fixture(NAME, f"{name}.json"))
    for label, chunks in chunkings(fixture(NAME, f"{name}.sse")):
        assert read_stream(NAME, chunks) == whole, label


@pytest.mark.parametrize("name", WHOLE)
def test_the_sdk_accumulator_agrees(name: str) -> None:
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in sse_data(fixture(NAME, f"{name}.sse")):
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    final = state.get_final_completion()
    ours = read_stream(NAME, fixture(NAME, f"{name}.sse"))
    message = final.choices[0].message
    assert ours.text == (message.content or "")
    assert [(c.call_id, c.name, c.arguments) for c in ours.tool_calls] == [
        (c.id, c.function.name, c.function.arguments)  # type: ignore[union-attr]
        for c in message.tool_calls or []
    ]
    assert [json.loads(o.data)["refusal"] for o in ours.opaque] == (
        [message.refusal] if message.refusal else []
    )
    assert ours.stop_reason == final.choices[0].finish_reason
    assert final.usage is not None and ours.usage is not None
    assert json.loads(ours.usage.raw) == final.usage.model_dump(mode="json", exclude_unset=True)


def test_round_trip_ids_match_and_the_previous_body_is_a_prefix() -> None:
    out = P.parse_response(fixture(NAME, "tool_calls.json"))
    _, _, body = opaque_in_next_body(NAME, out)
    sent = json.loads(body)["messages"]
    assert [c["id"] for c in sent[-3]["tool_calls"]] == ["call_Ab12Cd34", "call_Ef56Gh78"]
    # Conversation.record keeps the model's argument strings verbatim (issue 10, item 7):
    # the next body sends back exactly what the model sent, unsorted, spaces kept.
    assert [c["function"]["arguments"] for c in sent[-3]["tool_calls"]] == [
        '{"path": "a.py"}',
        '{"path":"tests/test_a.py","limit":200}',
    ]
    assert [m["tool_call_id"] for m in sent[-2:]] == ["call_Ab12Cd34", "call_Ef56Gh78"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_tool_loop_through_the_sdk_client_survives_a_restart(tmp_path: Path, stream: bool) -> None:
    bodies = openai_sdk_tool_loop(
        NAME,
        tmp_path,
        stream=stream,
        path="/v1/chat/completions",
        turns=TURNS,
        cast_to=ChatCompletion,
        event=ChatCompletionChunk,
    )
    assert bodies[1].startswith(messages_end(bodies[0]))
    if stream:
        assert bodies[0].endswith(b',"stream":true,"stream_options":{"include_usage":true}}')


# -- failures --------------------------------------------------------------------------

SAFE = " (a retry with the same event id is safe)"
UNSAFE = " (do not retry as is)"


def _fails(stream: bytes) -> ResponseError:
    with pytest.raises(ResponseError) as info:
        read_stream(NAME, stream)
    return info.value


def test_an_error_line_with_http_200_fails_the_stream_retry_safe() -> None:
    err = _fails(fixture(NAME, "error.sse"))
    assert str(err) == (
        "openai-chat stream error (server_error): The server had an error while processing "
        "your request. Sorry about that!" + SAFE
    )
    assert err.retry_safe


def test_a_stream_without_done_is_truncated_and_retry_safe() -> None:
    stream = fixture(NAME, "tool_calls.sse")
    err = _fails(stream[: stream.rindex(b"data: [DONE]")])
    assert (str(err), err.retry_safe) == ("the stream ended before its final event" + SAFE, True)
    err = _fails(stream[:-30])
    assert str(err) == "the event stream ended inside an event (truncated)" + SAFE


def test_malformed_json_is_not_retry_safe() -> None:
    err = _fails(b'data: {"id": \n\ndata: [DONE]\n\n')
    assert str(err).startswith("event 'message': not JSON (")
    assert str(err).endswith(UNSAFE) and not err.retry_safe


def test_an_error_body_and_an_empty_choice_list_are_refused() -> None:
    body = (
        b'{"error":{"message":"Invalid value for \'model\'.","type":"invalid_request_error",'
        b'"param":"model","code":"invalid_value"}}'
    )
    with pytest.raises(ResponseError) as info:
        P.parse_response(body)
    assert str(info.value) == (
        "openai-chat error (invalid_value / invalid_request_error): Invalid value for 'model'."
        + UNSAFE
    )
    with pytest.raises(ResponseError, match=r"^openai-chat response: no choices \(do not"):
        P.parse_response(b'{"choices":[]}')


def test_an_event_after_done_is_refused() -> None:
    err = _fails(fixture(NAME, "final.sse") + b'data: {"choices":[]}\n\n')
    assert str(err) == "event 'message' after the end" + UNSAFE


@pytest.mark.parametrize(
    ("status", "body", "retry"),
    [
        (408, b"", True),
        (409, b"", True),
        (429, b'{"error":{"code":"rate_limit_exceeded","type":"requests"}}', True),
        (429, b'{"error":{"code":"insufficient_quota","type":"insufficient_quota"}}', False),
        (500, b"", True),
        (503, b'{"error":{"type":"server_error"}}', True),
        (400, b"", False),
        (401, b"", False),
        (404, b"", False),
    ],
)
def test_is_retryable_by_openai_status_codes(status: int, body: bytes, retry: bool) -> None:
    assert P.is_retryable(status, body) is retry


def test_fixture_files_are_all_exercised() -> None:
    names = sorted(p.name for p in (DATA / NAME).iterdir())
    assert names == sorted(
        [*(f"{n}.json" for n in WHOLE), *(f"{n}.sse" for n in WHOLE), "error.sse"]
    )


# -- several choices (n > 1) -----------------------------------------------------------
# A conversation records one answer: with n > 1 the caller names the choice to record
# (candidate=i); a response with several choices and no pick is refused, never read as
# choice 0 silently (docs/agent-loop.md, "Several candidates").

SECOND = "Fixed it: `a.py` was off by one."


def _two_choices() -> bytes:
    data = json.loads(fixture(NAME, "final.json"))
    second = json.loads(json.dumps(data["choices"][0]))
    second["index"], second["message"]["content"] = 1, SECOND
    data["choices"].append(second)
    assert unknown_keys(ChatCompletion.model_validate(data)) == []
    return json.dumps(data).encode()


def _two_choice_stream() -> bytes:
    """final.sse with a second choice interleaved, as the API streams n = 2."""
    out = []
    for chunk in sse_data(fixture(NAME, "final.sse")):
        if chunk["choices"]:
            twin = json.loads(json.dumps(chunk))
            delta = twin["choices"][0]["delta"]
            if delta.get("content"):  # the second answer whole in the first delta
                delta["content"] = SECOND if delta["content"] == "Fixed: " else ""
            twin["choices"][0]["index"] = 1
            chunks = [chunk, twin]
        else:
            chunks = [chunk]
        for item in chunks:
            assert unknown_keys(ChatCompletionChunk.model_validate(item)) == []
            out.append(b"data: " + json.dumps(item).encode() + b"\n\n")
    return b"".join(out) + b"data: [DONE]\n\n"


def test_several_choices_are_refused_without_a_pick() -> None:
    with pytest.raises(ResponseError) as info:
        P.parse_response(_two_choices())
    assert str(info.value) == (
        "openai-chat response carries 2 choices: pick the one to record with candidate=i "
        "(0 to 1)" + UNSAFE
    )
    err = _fails(_two_choice_stream())
    assert str(err) == (
        "openai-chat stream carries choice 1 besides choice 0 (n > 1): pick the one to "
        "record with candidate=i" + UNSAFE
    )


def test_the_picked_choice_is_read_whole_and_streamed() -> None:
    single = P.parse_response(fixture(NAME, "final.json"))
    assert P.parse_response(_two_choices(), candidate=0) == single
    assert P.parse_response(_two_choices(), candidate=1).text == SECOND
    for label, chunks in chunkings(_two_choice_stream()):
        for pick in (0, 1):
            stream = P.stream_reader(candidate=pick)
            for chunk in chunks:
                stream.feed(chunk)
            assert stream.result() == P.parse_response(_two_choices(), candidate=pick), label
    assert P.parse_response(fixture(NAME, "final.json"), candidate=0) == single


def test_a_choice_that_is_not_there_is_refused() -> None:
    with pytest.raises(ResponseError, match=r"^openai-chat response has no choice 2 \(it"):
        P.parse_response(_two_choices(), candidate=2)
    stream = P.stream_reader(candidate=2)
    stream.feed(_two_choice_stream())
    with pytest.raises(ResponseError, match=r"^openai-chat stream has no choice 2 "):
        stream.result()


@pytest.mark.parametrize("provider", ["anthropic", "openai-responses", "bedrock-converse"])
def test_providers_with_one_output_know_only_candidate_0(provider: str) -> None:
    with pytest.raises(ResponseError) as info:
        providers.get(provider).parse_response(b"{}", candidate=1)
    assert str(info.value) == (
        f"{provider} responses carry one output: there is no candidate 1" + UNSAFE
    )
    with pytest.raises(ResponseError):
        providers.get(provider).stream_reader(candidate=1)
    providers.get(provider).stream_reader(candidate=0)


def _audio_reply() -> bytes:
    """final.json answered with audio (``modalities: ["text", "audio"]``): no content,
    ``message.audio`` with the spoken text's transcript (openai-python
    ``types/chat/chat_completion_audio.py``)."""
    body = json.loads(fixture(NAME, "final.json"))
    message = body["choices"][0]["message"]
    message["content"] = None
    message["audio"] = {
        "id": "audio_abc",
        "data": "UklGRg==",
        "expires_at": 1700000000,
        "transcript": "Hello there.",
    }
    return json.dumps(body).encode()


def test_an_audio_reply_is_recorded_as_its_transcript() -> None:
    """The transcript is the reply's text; the audio id expires (``expires_at``), so a
    history that every later call repeats cannot hold it, and the text goes back as the
    assistant's content. Before, the reply read as no parts at all and could not be
    recorded ("assistant output has no parts")."""
    value = TypeAdapter(ChatCompletion).validate_json(_audio_reply())
    assert value.choices[0].message.audio is not None
    out = P.parse_response(_audio_reply())
    assert out.parts == (TextPart("Hello there."),)
    body = json.loads(_audio_reply())
    base = {k: v for k, v in body.items() if k != "choices"}
    chunks = [
        {**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
        for delta in (
            {"role": "assistant", "audio": {"id": "audio_abc", "transcript": "Hello "}},
            {"audio": {"transcript": "there.", "data": "UklGRg=="}},
            {"audio": {"expires_at": 1700000000}},
        )
    ]
    chunks[-1]["choices"][0]["finish_reason"] = "stop"
    stream = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    assert read_stream(NAME, stream.encode()).parts == (TextPart("Hello there."),)
