"""Every boundary input is refused with a typed error naming its JSON path (issue 14).

Nothing here may surface as RecursionError, TypeError, UnicodeEncodeError or ValueError:
nesting past the limit, non-string keys, lone surrogates, NUL, huge integers and
oversized turns or tool outputs each get a PrefixlockError with an exact message.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import CONTEXT_A, CONV, example_bundle, open_conv, user
from prefixlock.core import canonical
from prefixlock.core.errors import HistoryError, LimitError, SpecErrors
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.limits import Limits
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.spec.loader import load_yaml_file
from prefixlock.store.contract import MemoryStore


def nested(depth: int) -> dict[str, Any]:
    """``{"a": {"a": ... {}}}`` with ``depth`` objects."""
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def request_value(**fields: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "conversation_id": CONV,
        "event_id": "u1",
        "kind": "user",
        "query": "q",
    }
    value.update(fields)
    return value


def refused(value: dict[str, Any]) -> str:
    with pytest.raises(SpecErrors) as err:
        AgentRunRequest.from_value(value)
    return str(err.value)


DEEP_PATH = "$.action_context" + ".a" * 99


def test_action_context_nested_2000_levels_is_refused_at_its_path() -> None:
    assert refused(request_value(action_context=nested(2000))) == (
        f"<request>: {DEEP_PATH}: nesting deeper than 100 levels"
    )


def test_nesting_limit_is_exactly_100_levels() -> None:
    AgentRunRequest.from_value(request_value(action_context=nested(99)))  # 100 with the root
    assert refused(request_value(action_context=nested(100))) == (
        f"<request>: {DEEP_PATH}: nesting deeper than 100 levels"
    )


def test_mcp_input_schema_nested_2000_levels_is_refused() -> None:
    context = copy.deepcopy(CONTEXT_A)
    context["mcp"]["servers"][0]["tools"][0]["input_schema"] = nested(2000)
    message = refused(request_value(context=context))
    prefix = "$.context.mcp.servers[0].tools[0].input_schema"
    assert message == f"<request>: {prefix}{'.a' * 93}: nesting deeper than 100 levels"


def test_non_string_and_mixed_keys_are_refused() -> None:
    assert refused(request_value(action_context={1: "x", "b": "y"})) == (
        "<request>: $.action_context: object key 1 is not a string"
    )


def test_lone_surrogate_in_a_key_is_refused() -> None:
    assert refused(request_value(action_context={"k\ud800": 1})) == (
        "<request>: $.action_context: object key 'k\\ud800' contains a lone surrogate "
        "U+D800 at index 1"
    )


def test_lone_surrogate_in_a_string_is_refused() -> None:
    assert refused(request_value(query="ab\udc00")) == (
        "<request>: $.query: string contains a lone surrogate U+DC00 at index 2"
    )


def test_nul_in_a_key_and_in_a_string_is_refused() -> None:
    assert refused(request_value(action_context={"a\0b": 1})) == (
        "<request>: $.action_context: object key 'a\\x00b' contains a NUL character at index 1"
    )
    assert refused(request_value(query="x\0")) == (
        "<request>: $.query: string contains a NUL character at index 1"
    )


def test_integer_beyond_64_bits_is_refused() -> None:
    assert refused(request_value(action_context={"n": 10**30})) == (
        "<request>: $.action_context.n: integer of 100 bits is beyond 64 bits"
    )
    AgentRunRequest.from_value(request_value(action_context={"n": 2**64 - 1}))


def test_request_file_errors_carry_the_file_location(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        "conversation_id: c\nevent_id: u1\nkind: user\naction_context:\n  n: 1" + "0" * 30 + "\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecErrors) as err:
        AgentRunRequest.load(path)
    assert str(err.value) == (
        f"{path}:5:6: $.action_context.n: integer 1{'0' * 30} is beyond 64 bits"
    )


def test_yaml_integer_of_100k_digits_is_a_clean_spec_error(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules: " + "9" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(SpecErrors) as err:
        load_yaml_file(path, "rules/rules.yaml")
    assert str(err.value) == (
        "rules/rules.yaml:1:8: $.rules: integer of 100000 characters is beyond 64 bits"
    )


def test_canonical_encoder_refuses_mixed_keys_without_type_error() -> None:
    with pytest.raises(canonical.CanonicalJSONError) as err:
        canonical.dumps({"a": {2: 1, "b": 2}})
    assert str(err.value) == "$.a: object key 2 is not a string"
    assert err.value.path == "$.a"


def _call_conversation() -> Conversation:
    conv = open_conv()
    conv.handle(user("u1"))
    return conv


def test_tool_call_arguments_nested_2000_levels_are_refused() -> None:
    conv = _call_conversation()
    with pytest.raises(HistoryError) as err:
        conv.assistant(tool_calls=[ToolCall("c1", "read_file", nested(2000))])
    assert str(err.value) == (
        f"tool call 'c1': arguments: ${'.a' * 100}: nesting deeper than 100 levels"
    )
    text = "[" * 2000 + "]" * 2000
    with pytest.raises(HistoryError) as err:
        conv.assistant(tool_calls=[ToolCall("c1", "read_file", '{"a":' + text + "}")])
    assert str(err.value) == "tool call 'c1': arguments: nesting deeper than 100 levels"
    deep_text = '{"a":' * 150 + "{}" + "}" * 150
    with pytest.raises(HistoryError) as err:
        conv.assistant(tool_calls=[ToolCall("c1", "read_file", deep_text)])
    assert str(err.value) == (
        f"tool call 'c1': arguments: ${'.a' * 100}: nesting deeper than 100 levels"
    )


def test_tool_call_arguments_that_are_not_json_are_refused() -> None:
    conv = _call_conversation()
    with pytest.raises(HistoryError) as err:
        conv.assistant(tool_calls=[ToolCall("c1", "read_file", "{not json")])
    assert str(err.value) == (
        "tool call 'c1': arguments are not JSON (Expecting property name enclosed in double "
        "quotes: line 1 column 2 (char 1)): '{not json'"
    )
    with pytest.raises(HistoryError) as err:
        conv.assistant(tool_calls=[ToolCall("c1", "read_file", {"p\0": 1})])
    assert str(err.value) == (
        "tool call 'c1': arguments: $: object key 'p\\x00' contains a NUL character at index 1"
    )


def test_turn_text_over_the_limit_is_refused_before_saving() -> None:
    store = MemoryStore()
    conv = Conversation.open(store, example_bundle(), CONV, limits=Limits(max_turn_bytes=1000))
    with pytest.raises(LimitError) as err:
        conv.handle(user("u1", "x" * 1001))
    assert str(err.value) == (
        "event 'u1': the turn's text is 1001 bytes, over the limit of 1000 bytes "
        "(Limits.max_turn_bytes)"
    )
    stored = store.load(CONV)
    assert stored is not None and stored.records == ()
    conv.handle(user("u1", "x" * 1000))


def test_default_turn_limit_refuses_a_5_mib_query() -> None:
    conv = open_conv()
    with pytest.raises(LimitError) as err:
        conv.handle(user("u1", "é" * (5 * 1024 * 1024 // 2)))
    assert str(err.value) == (
        "event 'u1': the turn's text is 5242880 bytes, over the limit of 4194304 bytes "
        "(Limits.max_turn_bytes)"
    )


def test_tool_output_over_the_limit_is_refused_before_saving() -> None:
    store = MemoryStore()
    limits = Limits(max_tool_output_bytes=10)
    conv = Conversation.open(store, example_bundle(), CONV, limits=limits)
    conv.handle(user("u1"))
    conv.assistant(tool_calls=[ToolCall("c1", "read_file", {"path": "a.py"})])
    seq = conv.history.seq
    with pytest.raises(LimitError) as err:
        conv.tool_results([ToolResult("c1", "0123456789A")])
    assert str(err.value) == (
        "tool result for call 'c1': output is 11 bytes, over the limit of 10 bytes "
        "(Limits.max_tool_output_bytes)"
    )
    assert conv.history.seq == seq
    conv.tool_results([ToolResult("c1", "0123456789")])


def test_tool_call_id_and_name_are_checked() -> None:
    conv = _call_conversation()
    with pytest.raises(HistoryError) as err:
        conv.assistant(tool_calls=[ToolCall("c\ud800", "read_file", {})])
    assert str(err.value) == (
        "tool call 'c\\ud800': $.id: string contains a lone surrogate U+D800 at index 1"
    )
    with pytest.raises(HistoryError) as err:
        conv.assistant(tool_calls=[ToolCall("c1", "read\0file", {})])
    assert str(err.value) == "tool call 'c1': $.name: string contains a NUL character at index 4"


def test_tool_output_with_a_lone_surrogate_is_refused_before_saving() -> None:
    conv = _call_conversation()
    conv.assistant(tool_calls=[ToolCall("c1", "read_file", {"path": "a.py"})])
    seq = conv.history.seq
    with pytest.raises(HistoryError) as err:
        conv.tool_results([ToolResult("c1", "ok\udfff")])
    assert str(err.value) == (
        "tool result for call 'c1': $.output: string contains a lone surrogate U+DFFF at index 2"
    )
    assert conv.history.seq == seq
    conv.tool_results([ToolResult("c1", "binary \0 is kept")])
