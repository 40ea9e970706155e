"""A tool input reads the same whole and streamed at the nesting limit, and an error body
nested past what the JSON parser can follow is not retryable rather than an exception."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prefixlock import ResponseError
from prefixlock.core import canonical
from prefixlock.core.messages import ToolCallPart
from prefixlock.providers.readers import reader
from read_support import read_stream


def _nested(depth: int) -> dict[str, Any]:
    """An object ``depth`` levels deep: ``{"a": [[...[1]...]]}``."""
    value: Any = 1
    for _ in range(depth - 1):
        value = [value]
    return {"a": value}


def _anthropic_whole(arguments: dict[str, Any]) -> bytes:
    return json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": arguments}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 5, "output_tokens": 3},
        }
    ).encode()


def _anthropic_stream(arguments: dict[str, Any]) -> bytes:
    events: list[tuple[str, dict[str, Any]]] = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": [],
                    "stop_reason": None,
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
            },
        ),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": json.dumps(arguments)},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 3},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def test_an_anthropic_tool_input_at_the_limit_reads_the_same_whole_and_streamed() -> None:
    arguments = _nested(canonical.MAX_DEPTH)
    whole = reader("anthropic").parse_response(_anthropic_whole(arguments))
    streamed = read_stream("anthropic", _anthropic_stream(arguments))
    expected = (ToolCallPart("toolu_1", "f", canonical.dumps(arguments)),)
    assert whole.parts == streamed.parts == expected
    deeper = _nested(canonical.MAX_DEPTH + 1)
    with pytest.raises(ResponseError) as raised:
        reader("anthropic").parse_response(_anthropic_whole(deeper))
    assert raised.value.retry_safe is False
    assert "nesting deeper than" in str(raised.value)
    with pytest.raises(ResponseError):
        read_stream("anthropic", _anthropic_stream(deeper))


@pytest.mark.parametrize("name", ["anthropic", "gemini"])
def test_an_error_body_nested_past_the_parser_is_not_retryable(name: str) -> None:
    body = b'{"error": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(RecursionError):
        json.loads(body)
    assert reader(name).is_retryable(400, body) is False
