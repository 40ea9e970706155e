"""Invariants 1, 2, 4, 5 and 8: the history only grows at the tail."""

from __future__ import annotations

import copy
import itertools
import random

import pytest
from conv_helpers import (
    CONTEXT_A,
    assert_prefix,
    background,
    context_b,
    context_ids,
    ids,
    open_conv,
    user,
)
from prefixlock.core.errors import ConflictError, HistoryError, UnknownCallError
from prefixlock.core.messages import MessageKind
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.store.contract import MemoryStore

#: The seed's verification list holds under both context_updates modes.
pytestmark = pytest.mark.usefixtures("context_updates")


def test_identical_context_two_turns_is_prefix_with_one_context_message() -> None:
    conv = open_conv()
    first = conv.handle(user("u1"))
    conv.assistant("done")
    second = conv.handle(user("u2", "and now the docs"))
    assert_prefix(first, second)
    assert second.instructions == first.instructions
    assert context_ids(second) == ["request-context:u1"]
    assert ids(second) == [
        "request-context:u1",
        "runtime:u1",
        "assistant:1",
        "runtime:u2",
    ]


def test_changed_context_appends_one_message_at_tail_before_runtime() -> None:
    conv = open_conv()
    first = conv.handle(user("u1"))
    conv.assistant("done")
    before = conv.request()
    second = conv.handle(user("u2", context=context_b()))
    assert_prefix(before, second)
    assert_prefix(first, second)
    assert ids(second)[len(before.messages) :] == ["request-context:u2", "runtime:u2"]
    assert "feature/x" in second.messages[-2].text
    assert "feature/x" not in second.messages[0].text


def test_context_revert_appends_again(context_updates: str) -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant("a")
    conv.handle(user("u2", context=context_b()))
    conv.assistant("b")
    third = conv.handle(user("u3", context=CONTEXT_A))
    assert context_ids(third) == [
        "request-context:u1",
        "request-context:u2",
        "request-context:u3",
    ]
    contexts = [m for m in third.messages if m.kind is MessageKind.REQUEST_CONTEXT]
    if context_updates == "whole":
        assert contexts[0].text == contexts[2].text != contexts[1].text
    else:
        # Per section: the git section goes back to main; only it is sent again.
        git_a = "<git>\nBranch: main\nHEAD: abc1234\nWorking tree: clean\n</git>"
        assert git_a in contexts[0].text and git_a in contexts[2].text
        assert git_a not in contexts[1].text and "Branch: feature/x" in contexts[1].text
        assert "It replaces these sections: git." in contexts[1].text
        assert "It replaces these sections: git." in contexts[2].text
        assert "<rules>" not in contexts[1].text + contexts[2].text


def test_same_context_in_other_order_appends_nothing() -> None:
    conv = open_conv()
    first = conv.handle(user("u1"))
    conv.assistant("a")
    shuffled = copy.deepcopy(CONTEXT_A)
    rng = random.Random(7)
    for key in ("rules", "skills", "subagents"):
        rng.shuffle(shuffled[key])
    shuffled["mcp"]["servers"].reverse()
    props = shuffled["mcp"]["servers"][1]["tools"][0]["input_schema"]["properties"]
    shuffled["mcp"]["servers"][1]["tools"][0]["input_schema"]["properties"] = dict(
        reversed(list(props.items()))
    )
    shuffled["rules"][0]["globs"] = list(reversed(shuffled["rules"][0].get("globs", [])))
    shuffled["environment"]["workspace_roots"].reverse()
    second = conv.handle(user("u2", context=shuffled))
    assert_prefix(first, second)
    assert context_ids(second) == ["request-context:u1"]


def test_tool_loop_every_call_is_a_prefix_of_the_next() -> None:
    conv = open_conv()
    calls = [conv.handle(user("u1"))]
    conv.assistant(
        "reading", [ToolCall("c1", "read_file", {"path": "a.py"}), ToolCall("c2", "list_dir", {})]
    )
    calls.append(conv.tool_results([ToolResult("c1", "print(1)\n"), ToolResult("c2", "a.py")]))
    conv.assistant(None, [ToolCall("c3", "read_file", {"path": "b.py"})])
    calls.append(conv.tool_results([ToolResult("c3", "", is_error=True)]))
    conv.assistant("all done")
    calls.append(conv.handle(user("u2")))
    for earlier, later in itertools.pairwise(calls):
        assert_prefix(earlier, later)
    assert context_ids(calls[-1]) == ["request-context:u1"]


def test_retried_runtime_event_appends_nothing_and_returns_same_request() -> None:
    conv = open_conv()
    first = conv.handle(user("u1"))
    again = conv.handle(user("u1"))
    assert again.same_as(first)
    assert ids(conv.request()) == ["request-context:u1", "runtime:u1"]
    conv.assistant("ok")
    later = conv.handle(user("u1"))  # a late retry still gets the original request
    assert later.same_as(first)
    assert context_ids(conv.request()) == ["request-context:u1"]


def test_conflicting_retry_is_refused_and_changes_nothing() -> None:
    store = MemoryStore()
    conv = open_conv(store)
    conv.handle(user("u1", "one"))
    before = conv.request()
    with pytest.raises(ConflictError) as err:
        conv.handle(user("u1", "two", context=context_b()))
    assert str(err.value).startswith(
        "event 'u1' was already delivered with different content (sha256:"
    )
    assert str(err.value).endswith("a retry must resend the same request")
    assert conv.request().same_as(before)
    assert len(store.load("conv-1").records) == 1  # type: ignore[union-attr]


def test_background_event_appends_no_context() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant("started a subagent")
    before = conv.request()
    after = conv.handle(background("b1", "explorer: found 3 call sites"))
    assert_prefix(before, after)
    assert ids(after)[len(before.messages) :] == ["event:b1"]
    assert context_ids(after) == ["request-context:u1"]
    assert conv.handle(background("b1", "explorer: found 3 call sites")).same_as(after)


def test_background_event_before_first_turn_is_refused() -> None:
    conv = open_conv()
    with pytest.raises(HistoryError, match=r"^background event 'b1' arrived before the first"):
        conv.handle(background("b1"))


def test_tool_result_for_unknown_call_id_is_refused() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {"path": "a.py"})])
    before = conv.request()
    with pytest.raises(UnknownCallError) as err:
        conv.tool_results([ToolResult("nope", "x")])
    assert str(err.value) == "tool result for unknown call id 'nope' (pending calls: c1)"
    assert conv.request().same_as(before)


def test_tool_results_must_answer_every_pending_call() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {}), ToolCall("c2", "list_dir", {})])
    with pytest.raises(
        HistoryError, match=r"^tool results must answer every pending call; missing: c2$"
    ):
        conv.tool_results([ToolResult("c1", "x")])


def test_user_turn_with_unanswered_calls_is_refused() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {})])
    with pytest.raises(HistoryError, match="tool calls c1 have no results yet"):
        conv.handle(user("u2"))


def test_assistant_output_needs_a_pending_model_call() -> None:
    conv = open_conv()
    with pytest.raises(HistoryError, match=r"^assistant output without a pending model call$"):
        conv.assistant("hello")


def test_reused_tool_call_id_is_refused() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {})])
    conv.tool_results([ToolResult("c1", "x")])
    with pytest.raises(HistoryError, match=r"^tool call id 'c1' was already used$"):
        conv.assistant(None, [ToolCall("c1", "read_file", {})])


def test_instructions_and_tools_come_from_the_bundle_and_never_change() -> None:
    conv = open_conv()
    first = conv.handle(user("u1", mode="agent"))
    conv.assistant("a")
    second = conv.handle(user("u2", mode="ask", context=context_b()))
    assert second.instructions == first.instructions
    assert second.tools == first.tools
    assert [t.name for t in first.tools] == sorted(t.name for t in first.tools)
    assert any(t.name == "mcp_call" for t in first.tools)


def test_cache_hints_mark_tools_instructions_latest_context_and_tail() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant("a")
    request = conv.handle(user("u2", context=context_b()))
    hints = {h.position.value: h.message_index for h in request.cache_hints}
    assert hints == {"tools": None, "instructions": None, "context": 3, "tail": 4}
    assert request.messages[3].id == "request-context:u2"
    assert request.cache_key == conv.handle(user("u1")).cache_key


def test_request_for_another_conversation_is_refused() -> None:
    conv = open_conv()
    with pytest.raises(HistoryError, match="is for conversation 'other', not 'conv-1'"):
        conv.handle(user("u1", conversation="other"))


def test_client_event_ids_cannot_take_prefixlock_record_ids() -> None:
    conv = open_conv()
    with pytest.raises(HistoryError) as err:
        conv.handle(user("assistant:1"))
    assert str(err.value) == (
        "event id 'assistant:1' is reserved: ids starting with assistant:, tool-results:, "
        "compact: name prefixlock's own records"
    )
    assert len(conv.request().messages) == 0
