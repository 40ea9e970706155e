"""Invariant 7: compaction is the only prefix reset, and it is explicit."""

from __future__ import annotations

import pytest
from conv_helpers import assert_prefix, context_b, context_ids, ids, open_conv, user
from prefixlock.core.errors import ConflictError, HistoryError
from prefixlock.core.messages import MessageKind
from prefixlock.runtime.tools import ToolCall, ToolResult

#: The seed's verification list holds under both context_updates modes.
pytestmark = pytest.mark.usefixtures("context_updates")


def _two_turns():  # type: ignore[no-untyped-def]
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {"path": "a.py"})])
    conv.tool_results([ToolResult("c1", "x = 1\n")])
    conv.assistant("done")
    conv.handle(user("u2", context=context_b()))
    conv.assistant("ok")
    return conv


def test_automatic_compaction_keeps_only_latest_context_then_summary_then_turn(
    context_updates: str,
) -> None:
    conv = _two_turns()
    latest = [m for m in conv.request().messages if m.kind is MessageKind.REQUEST_CONTEXT][-1]
    request = conv.handle(user("u3", context=context_b(), compact={"summary": "We fixed a.py."}))
    if context_updates == "whole":
        kept = "request-context:u2"
        assert request.messages[0] == latest  # same identity and content
    else:
        # The latest message carried the git section only: the new epoch keeps one
        # message holding the full current context, every section at its latest version,
        # exactly as a new conversation's first turn would send it.
        kept = "request-context:u3"
        fresh = open_conv(conversation="conv-1").handle(user("x1", context=context_b()))
        assert request.messages[0].text == fresh.messages[0].text
        assert "feature/x" in request.messages[0].text and latest.text != fresh.messages[0].text
    assert ids(request) == [kept, "summary:1", "runtime:u3"]
    assert request.messages[1].text == "We fixed a.py."
    assert request.epoch == 1
    conv.assistant("continuing")
    nxt = conv.handle(user("u4", context=context_b()))
    assert_prefix(request, nxt)
    assert context_ids(nxt) == [kept]


def test_automatic_compaction_keeps_the_full_latest_context_with_its_identity() -> None:
    """Unchanged context, and the latest context message is the full one: it is kept as
    it is, same identity (both modes)."""
    conv = open_conv()
    first = conv.handle(user("u1"))
    conv.assistant("ok")
    request = conv.handle(user("u2", compact={"summary": "S"}))
    assert ids(request) == ["request-context:u1", "summary:1", "runtime:u2"]
    assert request.messages[0] == first.messages[0]


def test_automatic_compaction_with_changed_context_keeps_the_new_context_only() -> None:
    conv = _two_turns()
    from conv_helpers import CONTEXT_A

    request = conv.handle(user("u3", context=CONTEXT_A, compact={"summary": "S"}))
    assert ids(request) == ["request-context:u3", "summary:1", "runtime:u3"]


def test_manual_compaction_then_turn_reprojects_context_once() -> None:
    conv = _two_turns()
    conv.compact("Summary of everything.")
    assert ids(conv.request()) == ["summary:1"]
    first = conv.handle(user("u3", context=context_b()))
    assert ids(first) == ["summary:1", "request-context:u3", "runtime:u3"]
    conv.assistant("ok")
    second = conv.handle(user("u4", context=context_b()))
    assert_prefix(first, second)
    assert context_ids(second) == ["request-context:u3"]


def test_manual_compaction_followed_by_changed_context() -> None:
    conv = _two_turns()
    conv.compact("S")
    conv.handle(user("u3"))
    conv.assistant("ok")
    request = conv.handle(user("u4", context=context_b()))
    assert context_ids(request) == ["request-context:u3", "request-context:u4"]


def test_compaction_with_pending_tool_calls_is_refused() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {})])
    with pytest.raises(HistoryError, match=r"^cannot compact while tool calls c1 have no results$"):
        conv.compact("S")


def test_retry_of_an_event_from_before_compaction_returns_its_original_request() -> None:
    conv = _two_turns()
    original = conv.handle(user("u2", context=context_b()))
    conv.handle(user("u3", context=context_b(), compact={"summary": "S"}))
    assert conv.handle(user("u2", context=context_b())).same_as(original)
    assert conv.request().epoch == 1


def test_late_tool_results_after_compaction_are_a_retry_or_a_conflict() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {"path": "a.py"})])
    original = conv.tool_results([ToolResult("c1", "x = 1\n")])
    conv.assistant("done")
    conv.compact("S")
    assert conv.tool_results([ToolResult("c1", "x = 1\n")]).same_as(original)
    with pytest.raises(ConflictError):
        conv.tool_results([ToolResult("c1", "late and different")])
    assert ids(conv.request()) == ["summary:1"]
