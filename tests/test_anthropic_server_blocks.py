"""Anthropic server tool blocks are held to their request schema (issue 43, finding 4).

A ``server_tool_use`` block and the results of the tools Anthropic runs
(``web_search_tool_result``, ...) are kept whole and sent back in the next request. The
reader checked only their type and id: a result whose ``content`` was mangled was
recorded, and every later request was refused. Now each block is held to the schema of
its type, generated from the SDK's request param types (``server_blocks_schema.py``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import server_blocks_schema
from prefixlock import ResponseError
from prefixlock.providers.readers import anthropic_server_blocks, reader
from response_fuzz import judge_output

SEARCH = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "web_search",
    "input": {"query": "prefix caching"},
}
RESULTS = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://example.com/caching",
            "title": "Prompt caching",
            "encrypted_content": "EqgfCioIARgBIiQ3",
            "page_age": None,
        }
    ],
}


def _message(*blocks: dict[str, Any]) -> bytes:
    body = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [*blocks, {"type": "text", "text": "Found it."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
    return json.dumps(body).encode()


def test_the_table_is_generated_from_the_installed_sdk() -> None:
    blocks, shapes = server_blocks_schema.table()
    assert blocks == anthropic_server_blocks.BLOCKS
    assert shapes == anthropic_server_blocks.SHAPES


def test_server_blocks_that_match_their_schema_are_kept_and_sent_back() -> None:
    output = reader("anthropic").parse_response(_message(SEARCH, RESULTS))
    assert [p.value for p in output.opaque] == [SEARCH, RESULTS]
    assert judge_output("anthropic", output) is None


def _results(**change: Any) -> dict[str, Any]:
    block = copy.deepcopy(RESULTS)
    block.update(change)
    return block


def _result_item(**change: Any) -> dict[str, Any]:
    item = dict(RESULTS["content"][0])  # type: ignore[index]
    item.update(change)
    return _results(content=[item])


W = "anthropic content block 1 'web_search_tool_result'"
U = "anthropic content block 0 'server_tool_use'"
CASES = {
    "result url not a string": (
        (SEARCH, _result_item(url=7)),
        f"{W}.content[0].url: expected a string",
    ),
    "result without encrypted content": (
        (
            SEARCH,
            _results(
                content=[
                    {k: v for k, v in RESULTS["content"][0].items() if k != "encrypted_content"}
                ]
            ),
        ),  # type: ignore[index]
        f"{W}.content[0]: 'encrypted_content' is missing",
    ),
    "content neither results nor an error": (
        (SEARCH, _results(content="nothing")),
        f"{W}.content: matches none of the forms the request schema allows",
    ),
    "an error with an unknown code": (
        (SEARCH, _results(content={"type": "web_search_tool_result_error", "error_code": "x"})),
        f"{W}.content.error_code: expected 'invalid_tool_input' or 'max_uses_exceeded'"
        " or 'query_too_long' or 'request_too_large' or 'too_many_requests' or 'unavailable'",
    ),
    "an unknown member": (
        (SEARCH, _results(extra=1)),
        f"{W}: unknown member 'extra' (it could not be sent back)",
    ),
    "a server tool the schema does not name": (
        ({**SEARCH, "name": "web_serach"}, RESULTS),
        f"{U}.name: expected 'bash_code_execution' or 'code_execution' or"
        " 'text_editor_code_execution' or 'tool_search_tool_bm25' or 'tool_search_tool_regex'"
        " or 'web_fetch' or 'web_search'",
    ),
    "input not an object": (
        ({**SEARCH, "input": "q"}, RESULTS),
        f"{U}.input: expected an object",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_server_block_off_its_schema_is_refused(case: str) -> None:
    blocks, message = CASES[case]
    with pytest.raises(ResponseError) as err:
        reader("anthropic").parse_response(_message(*blocks))
    assert str(err.value) == f"{message} (do not retry as is)"
    assert err.value.retry_safe is False
