"""What a newcomer wiring an agent server meets first: ``conv.user_turn``, events that need
not repeat the conversation id, and a typed :class:`WrongTypeError` (an ``InputError``)
for a dict or a wrong type handed to the public API."""

from __future__ import annotations

from typing import Any

import prefixlock
import pytest
from conv_helpers import CONTEXT_A, CONV, example_bundle, open_conv, user
from prefixlock.core.errors import HistoryError, InputError, SpecErrors, WrongTypeError
from prefixlock.core.output import ModelOutput
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.runtime.tools import ToolResult
from prefixlock.store.contract import MemoryStore


def _bodies(request: prefixlock.ModelRequest) -> bytes:
    return prefixlock.providers.get("anthropic").serialize(request)


def test_user_turn_is_the_request_written_out() -> None:
    written = open_conv()
    expected = written.handle(
        user(
            "u1",
            "fix it",
            mode="ask",
            timestamp="2026-01-02T03:04:05Z",
            open_files=[{"path": "a.py", "cursor_line": 3}],
            selected_context=[{"path": "a.py", "start_line": 1, "end_line": 2, "text": "x = 1"}],
            action_context={"button": "fix"},
        )
    )
    conv = open_conv()
    got = conv.user_turn(
        "u1",
        "fix it",
        mode="ask",
        timestamp="2026-01-02T03:04:05Z",
        context=CONTEXT_A,
        open_files=[{"path": "a.py", "cursor_line": 3}],
        selected_context=[{"path": "a.py", "start_line": 1, "end_line": 2, "text": "x = 1"}],
        action_context={"button": "fix"},
    )
    assert _bodies(got) == _bodies(expected)
    # The same event, written as JSON with the id: a retry, not a conflict.
    assert conv.history.events["u1"].request_digest == written.history.events["u1"].request_digest
    retried = conv.handle(
        user(
            "u1",
            "fix it",
            mode="ask",
            timestamp="2026-01-02T03:04:05Z",
            open_files=[{"path": "a.py", "cursor_line": 3}],
            selected_context=[{"path": "a.py", "start_line": 1, "end_line": 2, "text": "x = 1"}],
            action_context={"button": "fix"},
        )
    )
    assert _bodies(retried) == _bodies(got)
    assert conv.history.seq == 1


def test_user_turn_values_are_checked_by_the_request_schema() -> None:
    conv = open_conv()
    with pytest.raises(SpecErrors) as caught:
        conv.user_turn("u1", "q", open_files=[{"cursor_line": 3}])
    assert str(caught.value) == "user_turn 'u1': $.open_files[0]: missing required key 'path'"
    assert conv.history.seq == 0


def test_an_event_without_the_conversation_id_is_this_conversations() -> None:
    conv = open_conv()
    value: dict[str, Any] = {"event_id": "u1", "kind": "user", "query": "q", "context": CONTEXT_A}
    request = AgentRunRequest.from_value(value)
    assert request.conversation_id is None
    first = conv.handle(request)
    assert first.conversation_id == CONV
    # The same event with the id given is the same delivery (same digest).
    again = conv.handle(AgentRunRequest.from_value({**value, "conversation_id": CONV}))
    assert _bodies(again) == _bodies(first) and conv.history.seq == 1


def test_an_event_for_another_conversation_is_refused() -> None:
    conv = open_conv()
    with pytest.raises(HistoryError) as caught:
        conv.handle(user("u1", conversation="conv-2"))
    assert str(caught.value) == "event 'u1' is for conversation 'conv-2', not 'conv-1'"


def test_handle_with_a_dict_is_a_typed_error() -> None:
    conv = open_conv()
    with pytest.raises(WrongTypeError) as caught:
        conv.handle({"event_id": "u1", "kind": "user", "query": "q"})  # type: ignore[arg-type]
    assert str(caught.value) == (
        "handle(request): expected an AgentRunRequest, got a dict (build it with "
        "AgentRunRequest.from_value({...}), or call conv.user_turn(...) for a user turn)"
    )
    assert isinstance(caught.value, InputError) and isinstance(caught.value, TypeError)
    assert conv.history.seq == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda c: c.record({"parts": []}),
            "record(output): expected a ModelOutput, got a dict",
        ),
        (
            lambda c: c.tool_results(ToolResult("c1", "x")),
            "tool_results(results): expected a list or tuple, got a ToolResult",
        ),
        (
            lambda c: c.tool_results("c1"),
            "tool_results(results): expected a list or tuple, got a string",
        ),
        (
            lambda c: c.assistant("hi", {"c1": "read_file"}),
            "assistant tool_calls: expected a list or tuple, got a dict",
        ),
        (
            lambda c: c.user_turn("u2", None),
            "user_turn query: expected a string, got None",
        ),
        (
            lambda c: c.user_turn(2, "q"),
            "user_turn event_id: expected a string, got an integer",
        ),
        (
            lambda c: c.user_turn("u2", "q", context=[1]),
            "user_turn context: expected a Mapping, got a list",
        ),
        (
            lambda c: c.user_turn("u2", "q", open_files="a.py"),
            "user_turn open_files: expected a list or tuple, got a string",
        ),
    ],
)
def test_a_wrong_type_in_the_public_api_is_a_typed_error(call: Any, message: str) -> None:
    conv = open_conv()
    conv.user_turn("u1", "q", context=CONTEXT_A)
    with pytest.raises(WrongTypeError) as caught:
        call(conv)
    assert str(caught.value) == message
    assert conv.history.seq == 1  # nothing changed


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ({"instructions": ""}, CONV),
            "Conversation.open bundle: expected a Bundle, got a dict "
            "(build_bundle(...) or Bundle.load(...))",
        ),
        ((None, 7), "Conversation.open conversation_id: expected a string, got an integer"),
    ],
)
def test_open_with_a_wrong_type_is_a_typed_error(args: tuple[Any, Any], message: str) -> None:
    bundle, cid = args
    with pytest.raises(WrongTypeError) as caught:
        prefixlock.Conversation.open(MemoryStore(), bundle or example_bundle(), cid)
    assert str(caught.value) == message


def test_a_model_output_is_still_recorded() -> None:
    conv = open_conv()
    conv.user_turn("u1", "q", context=CONTEXT_A)
    from prefixlock.core.messages import TextPart

    message = conv.record(ModelOutput("anthropic", (TextPart("done"),)))
    assert message.id == "assistant:1"
