"""Tool-call arguments (issue 10, item 7): the model's own argument string goes back
verbatim where the wire carries a string (OpenAI Chat, Responses); providers that take
an object get it parsed, canonically encoded; unparseable arguments are a typed error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import CONV, example_bundle, user
from prefixlock import Conversation, HistoryError, SQLiteStore, ToolCall, ToolResult, providers
from prefixlock.core.messages import ToolCallPart
from prefixlock.core.output import ModelOutput
from sdk_judge import assert_valid

#: As a model might send it: unsorted keys, spaces, a \u escape, an exponent.
RAW = '{"path": "caf\\u00e9.py", "offset":1, "scale":1e2}'
PARSED = {"path": "café.py", "offset": 1, "scale": 100.0}


def _body(tmp_path: Path, provider: str, *, record: bool) -> dict[str, Any]:
    tmp_path.mkdir(exist_ok=True)
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), example_bundle(), CONV)
    conv.handle(user("u1"))
    if record:
        conv.record(ModelOutput("openai-chat", (ToolCallPart("c1", "read_file", RAW),)))
    else:
        conv.assistant(None, [ToolCall("c1", "read_file", RAW)])
    conv.tool_results([ToolResult("c1", "text")])
    # through a restart: the string survives the store byte for byte
    reopened = Conversation.open(SQLiteStore(db), example_bundle(), CONV)
    request = reopened.request()
    wire = providers.get(provider)
    assert_valid(provider, wire.body(request))
    body = json.loads(wire.serialize(request))
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("record", [False, True], ids=["assistant", "record"])
def test_openai_wires_send_the_models_argument_string_verbatim(
    tmp_path: Path, record: bool
) -> None:
    chat = _body(tmp_path / "chat", "openai-chat", record=record)
    assert chat["messages"][-2]["tool_calls"][0]["function"]["arguments"] == RAW
    responses = _body(tmp_path / "responses", "openai-responses", record=record)
    call = next(i for i in responses["input"] if i.get("type") == "function_call")
    assert call["arguments"] == RAW


def test_object_wires_get_the_parsed_object_canonically_encoded(tmp_path: Path) -> None:
    anthropic = _body(tmp_path / "a", "anthropic", record=False)
    assert anthropic["messages"][-2]["content"][0]["input"] == PARSED
    bedrock = _body(tmp_path / "b", "bedrock-converse", record=False)
    assert bedrock["messages"][-2]["content"][0]["toolUse"]["input"] == PARSED
    gemini = _body(tmp_path / "g", "gemini", record=False)
    assert gemini["contents"][-2]["parts"][0]["functionCall"]["args"] == PARSED
    raw = providers.get("anthropic")
    db = tmp_path / "a" / "s.db"
    request = Conversation.open(SQLiteStore(db), example_bundle(), CONV).request()
    assert b'"input":{"offset":1,"path":"caf\xc3\xa9.py","scale":100.0}' in raw.serialize(request)


def test_argument_objects_are_stored_as_canonical_json() -> None:
    part = ToolCall("c1", "f", {"b": 1, "a": "é"}).to_part()
    assert part.arguments == '{"a":"é","b":1}'
    assert ToolCall("c1", "f", RAW).to_part().arguments == RAW


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"path": "a.p', "tool call 'c1': arguments are not JSON"),
        ("", "tool call 'c1': arguments are not JSON"),
        ('{"a":1,"a":2}', "tool call 'c1': arguments are not JSON (duplicate key 'a')"),
        ("[1, 2]", "tool call 'c1': arguments must be a JSON object"),
        ("null", "tool call 'c1': arguments must be a JSON object"),
    ],
)
def test_unparseable_arguments_are_a_typed_error_naming_the_call(
    arguments: str, message: str
) -> None:
    with pytest.raises(HistoryError) as raised:
        ToolCall("c1", "read_file", arguments).to_part()
    assert str(raised.value).startswith(message)
    assert not isinstance(raised.value, ValueError)  # never a bare json.JSONDecodeError


@pytest.mark.parametrize("provider", ["anthropic", "bedrock-converse", "gemini"])
def test_each_body_gets_arguments_of_its_own(tmp_path: Path, provider: str) -> None:
    """The arguments are parsed once for every provider that maps the same call; each
    body still holds a value of its own, so changing one changes no other."""
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), CONV)
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", '{"path":"a.py","lines":[1,2]}')])
    request = conv.tool_results([ToolResult("c1", "text")])
    wire = providers.get(provider)
    first, second = wire.body(request), wire.body(request)

    def arguments(body: dict[str, Any]) -> Any:
        text = json.dumps(body)
        assert '"a.py"' in text
        if provider == "gemini":
            return body["contents"][-2]["parts"][0]["functionCall"]["args"]
        block = body["messages"][-2]["content"][0]
        return block["input"] if provider == "anthropic" else block["toolUse"]["input"]

    arguments(first)["lines"].append(3)
    arguments(first)["path"] = "changed.py"
    assert arguments(second) == {"path": "a.py", "lines": [1, 2]}
    assert arguments(wire.body(request)) == {"path": "a.py", "lines": [1, 2]}
    assert wire.serialize(request) == wire.serialize(request)
