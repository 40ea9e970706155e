"""Reader fixes: the OpenAI Responses stream ``error`` event in the shape the live API
sends (fields nested under ``error``), and Gemini's local call ids for a
``functionCall`` without ``id`` in a response without ``responseId``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conv_helpers import example_bundle, user
from prefixlock import Conversation, ResponseError, ToolResult
from prefixlock.core import canonical
from prefixlock.core.messages import ToolCallPart
from prefixlock.providers.readers import reader
from prefixlock.store.contract import MemoryStore
from read_support import chunkings, read_stream

SAFE = " (a retry with the same event id is safe)"
UNSAFE = " (do not retry as is)"

# -- openai-responses: the stream `error` event -----------------------------------------

CREATED = {
    "type": "response.created",
    "sequence_number": 0,
    "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []},
}


def _responses_stream(*events: dict[str, Any]) -> bytes:
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in (CREATED, *events)
    )


def _responses_fails(stream: bytes) -> ResponseError:
    with pytest.raises(ResponseError) as info:
        read_stream("openai-responses", stream)
    return info.value


#: The live API's shape (openai/openai-dotnet#881, a captured rate-limit stream): the
#: fields sit in a nested ``error`` object, not at the top level as the reference shows.
NESTED_RATE_LIMIT = {
    "type": "error",
    "sequence_number": 1,
    "error": {
        "type": "tokens",
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached",
        "param": None,
    },
}


def test_a_nested_error_event_keeps_code_type_and_message_and_is_retry_safe() -> None:
    stream = _responses_stream(NESTED_RATE_LIMIT)
    for _, chunks in chunkings(stream):
        err = _responses_fails(b"".join(chunks))
        assert str(err) == (
            "openai-responses stream: error event (rate_limit_exceeded / tokens): "
            "Rate limit reached" + SAFE
        )
        assert err.retry_safe


def test_the_documented_flat_error_event_still_reads() -> None:
    flat = {
        "type": "error",
        "sequence_number": 1,
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached",
        "param": None,
    }
    err = _responses_fails(_responses_stream(flat))
    assert str(err) == (
        "openai-responses stream: error event (rate_limit_exceeded): Rate limit reached" + SAFE
    )
    assert err.retry_safe


def test_a_nested_error_without_code_is_named_by_its_type_and_not_retry_safe() -> None:
    # openai/openai-dotnet#528: code null, the type says what went wrong
    mcp = {
        "type": "error",
        "sequence_number": 5,
        "error": {
            "type": "invalid_request_error",
            "code": None,
            "message": "MCP server must contain 'search' and 'fetch' tools.",
            "param": None,
        },
    }
    err = _responses_fails(_responses_stream(mcp))
    assert str(err) == (
        "openai-responses stream: error event (invalid_request_error): MCP server must "
        "contain 'search' and 'fetch' tools." + UNSAFE
    )
    assert not err.retry_safe


def test_a_nested_quota_error_is_not_retry_safe() -> None:
    # Effect-TS/effect#7262: a captured stream of an account out of credits
    quota = {
        "type": "error",
        "sequence_number": 2,
        "error": {
            "type": "insufficient_quota",
            "code": "credit_balance_exhausted",
            "message": "You have no credits remaining.",
            "param": None,
        },
    }
    err = _responses_fails(_responses_stream(quota))
    assert str(err) == (
        "openai-responses stream: error event (credit_balance_exhausted / insufficient_quota): "
        "You have no credits remaining." + UNSAFE
    )
    assert not err.retry_safe


def test_an_error_event_with_a_non_object_error_reads_the_flat_fields() -> None:
    odd = {"type": "error", "sequence_number": 1, "error": "boom", "code": "server_error"}
    err = _responses_fails(_responses_stream(odd))
    assert str(err) == "openai-responses stream: error event (server_error): None" + SAFE


# -- gemini: local call ids without responseId -------------------------------------------

CALL = {"functionCall": {"name": "read_file", "args": {"path": "a.py"}}}


def _gemini_body(prompt_tokens: int, *parts: dict[str, Any]) -> bytes:
    return canonical.dumpb(
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": list(parts or [CALL])},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": 3,
                "totalTokenCount": prompt_tokens + 3,
            },
            "modelVersion": "gemini-2.5-flash",
        }
    )


def _ids(body: bytes) -> list[str]:
    return [c.call_id for c in reader("gemini").parse_response(body).tool_calls]


def test_the_same_id_less_call_in_two_responses_gets_two_ids_and_both_record() -> None:
    first, second = _gemini_body(10), _gemini_body(40)  # the later prompt is longer
    out1 = reader("gemini").parse_response(first)
    out2 = reader("gemini").parse_response(second)
    (call1,), (call2,) = out1.tool_calls, out2.tool_calls
    assert call1.call_id != call2.call_id
    assert (call1.name, call1.arguments) == (call2.name, call2.arguments)
    conv = Conversation.open(MemoryStore(), example_bundle(), "conv-1")
    conv.handle(user("u1"))
    conv.record(out1)
    conv.tool_results([ToolResult(call1.call_id, "v1")])
    conv.record(out2)  # was: "tool call id ... was already used"
    conv.tool_results([ToolResult(call2.call_id, "v2")])


def test_a_local_id_is_a_digest_of_the_whole_response_and_the_part_index() -> None:
    body = _gemini_body(10, {"text": "reading"}, CALL, CALL)
    digest = canonical.sha256_hex(body + b"\n")[7:23]
    assert _ids(body) == [f"gemini-local-{digest}-1", f"gemini-local-{digest}-2"]
    assert _ids(body) == ["gemini-local-680cfc6db4722ba6-1", "gemini-local-680cfc6db4722ba6-2"]


def test_the_same_bytes_read_twice_give_the_same_ids() -> None:
    body = _gemini_body(10)
    assert _ids(body) == _ids(body)
    # the digest is of the parsed response: its JSON spelling does not matter
    assert _ids(json.dumps(json.loads(body), indent=2).encode()) == _ids(body)


def test_a_stream_names_id_less_calls_alike_in_every_chunking() -> None:
    first, second = _gemini_body(10), _gemini_body(40)
    stream = b"data: " + first + b"\n\n"
    one_chunk = {
        read_stream("gemini", chunks).tool_calls[0].call_id for _, chunks in chunkings(stream)
    }
    assert one_chunk == set(_ids(first))  # one chunk: the same response, the same id
    other = {
        read_stream("gemini", chunks).tool_calls[0].call_id
        for _, chunks in chunkings(b"data: " + second + b"\n\n")
    }
    assert len(other) == 1 and other != one_chunk


def test_a_stream_of_several_chunks_digests_every_chunk() -> None:
    def chunk(prompt_tokens: int, parts: list[Any], stop: bool) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if stop:
            candidate["finishReason"] = "STOP"
        usage = {"promptTokenCount": prompt_tokens, "totalTokenCount": prompt_tokens}
        return canonical.dumpb({"candidates": [candidate], "usageMetadata": usage})

    def chunks(prompt_tokens: int) -> list[bytes]:
        return [
            chunk(prompt_tokens, [{"text": "I'll read it."}], False),
            chunk(prompt_tokens, [CALL], True),
        ]

    def stream(prompt_tokens: int) -> bytes:
        return b"".join(b"data: " + c + b"\n\n" for c in chunks(prompt_tokens))

    ids = {read_stream("gemini", c).tool_calls[0].call_id for _, c in chunkings(stream(10))}
    assert len(ids) == 1
    (local,) = ids
    digest = canonical.sha256_hex(b"".join(c + b"\n" for c in chunks(10)))[7:23]
    assert local == f"gemini-local-{digest}-1"  # every chunk's JSON line; the part index
    later = read_stream("gemini", [stream(40)]).parts[1]
    assert isinstance(later, ToolCallPart) and later.call_id != local


def test_a_response_id_still_names_the_local_ids() -> None:
    body = canonical.loads(_gemini_body(10))
    assert isinstance(body, dict)
    body["responseId"] = "resp-A"
    assert _ids(canonical.dumpb(body)) == ["gemini-local-resp-A-0"]
