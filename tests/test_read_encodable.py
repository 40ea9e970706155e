"""What a reader returns is recorded and sent again, so it must have a canonical form: a
value the encoder refuses is a ResponseError naming its path, as the readers promise
(``load_object``: "a JSON object, or a ResponseError"), not a CanonicalJSONError out of
the middle of a reader that a caller deciding on a retry does not catch."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prefixlock import ResponseError
from prefixlock.core import canonical
from prefixlock.providers.readers import reader
from read_support import fixture, read_stream

BIG = 2**70  # 71 bits: beyond the encoder's 64


def _with_arguments(value: Any, key: str) -> bool:
    """Set the first ``key`` member (tool arguments) below ``value`` to ``{"n": BIG}``."""
    if isinstance(value, dict):
        if key in value and isinstance(value[key], dict):
            value[key] = {"n": BIG}
            return True
        return any(_with_arguments(v, key) for v in value.values())
    if isinstance(value, list):
        return any(_with_arguments(v, key) for v in value)
    return False


@pytest.mark.parametrize(
    ("provider", "name", "key", "path"),
    [
        ("anthropic", "turn1.json", "input", "$.content[3].input.n"),
        ("gemini", "turn1.json", "args", "$.candidates[0].content.parts[2].functionCall.args.n"),
        (
            "bedrock-converse",
            "turn1_reasoning_parallel_tools.json",
            "input",
            "$.output.message.content[2].toolUse.input.n",
        ),
    ],
)
def test_tool_arguments_beyond_64_bits_are_a_response_error(
    provider: str, name: str, key: str, path: str
) -> None:
    body = canonical.loads(fixture(provider, name))
    assert _with_arguments(body, key)
    with pytest.raises(ResponseError) as caught:
        reader(provider).parse_response(json.dumps(body).encode())  # canonical refuses BIG
    assert str(caught.value) == (
        f"response: {path}: integer of 71 bits is beyond 64 bits (do not retry as is)"
    )
    assert caught.value.retry_safe is False


def test_a_streamed_tool_input_beyond_64_bits_is_a_response_error() -> None:
    stream = fixture("anthropic", "turn1.sse").decode()
    opening = '"partial_json":"{'  # the first fragment that opens the input object
    assert opening in stream
    stream = stream.replace(opening, opening + '\\"n\\":' + str(BIG) + ",", 1)
    with pytest.raises(ResponseError) as caught:
        read_stream("anthropic", stream.encode())
    assert str(caught.value) == (
        "anthropic tool_use input: $.n: integer of 71 bits is beyond 64 bits (do not retry as is)"
    )


def test_a_lone_surrogate_in_text_is_a_response_error() -> None:
    body = fixture("openai-chat", "final.json").replace(b'"content": "', b'"content": "\\ud800', 1)
    with pytest.raises(ResponseError) as caught:
        reader("openai-chat").parse_response(body)
    assert str(caught.value) == (
        "response: $.choices[0].message.content: string contains a lone surrogate U+D800"
        " at index 0 (do not retry as is)"
    )
