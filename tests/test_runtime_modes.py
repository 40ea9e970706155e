"""Invariant 3: turn-level data in the runtime message, conversation-level in context."""

from __future__ import annotations

import itertools

import pytest
from conv_helpers import CONTEXT_A, assert_prefix, context_ids, example_bundle, open_conv, user
from prefixlock.core.errors import PrefixlockError
from prefixlock.core.messages import MessageKind

CONVERSATION_MARKERS = (
    "ALWAYS-RULE-BODY",
    "AUTO-RULE-BODY",
    "MANUAL-RULE-BODY",
    "house-style",
    "warehouse-db",
    "get_ticket",
    "explorer",
    "Read PDF files",
    "/home/dev/lib",
    "abc1234",
)

#: The seed's verification list holds under both context_updates modes.
pytestmark = pytest.mark.usefixtures("context_updates")


@pytest.mark.parametrize("mode", ["agent", "ask", "plan", "debug"])
def test_runtime_templates_never_contain_rules_or_mcp_metadata(mode: str) -> None:
    conv = open_conv()
    request = conv.handle(user("u1", "QUERY-TEXT", mode=mode, timestamp="2026-12-02T10:00:00Z"))
    context, runtime = request.messages
    assert context.kind is MessageKind.REQUEST_CONTEXT
    assert runtime.kind is MessageKind.RUNTIME
    for marker in CONVERSATION_MARKERS:
        assert marker in context.text, marker
        assert marker not in runtime.text, marker
    assert "QUERY-TEXT" in runtime.text
    assert "QUERY-TEXT" not in context.text
    assert example_bundle().mode(mode).reminder.strip() in runtime.text
    assert "2026-12-02T10:00:00Z" in runtime.text
    assert "2026-12-02" not in context.text


def test_rules_render_body_except_agent_requested_which_render_name_and_description() -> None:
    request = open_conv().handle(user("u1"))
    context = request.messages[0].text
    for body in ("ALWAYS-RULE-BODY", "AUTO-RULE-BODY", "MANUAL-RULE-BODY"):
        assert body in context
    assert "migrations" in context
    assert "How to write database migrations" in context
    assert "AGENT-RULE-BODY-SECRET-STEPS" not in context


def test_turn_level_data_lands_in_runtime_message() -> None:
    request = open_conv().handle(
        user(
            "u1",
            "explain this",
            open_files=[{"path": "src/OPEN-FILE.py", "cursor_line": 3}],
            selected_context=[{"path": "src/x.py", "start_line": 1, "end_line": 2, "text": "SEL"}],
            action_context={"action": "ACTION-MARK"},
        )
    )
    runtime = request.messages[-1].text
    for marker in ("OPEN-FILE", "SEL", "ACTION-MARK", "explain this"):
        assert marker in runtime
        assert marker not in request.messages[0].text


def test_mode_switch_keeps_tools_and_context() -> None:
    conv = open_conv()
    requests = []
    for i, mode in enumerate(["agent", "ask", "plan", "debug", "agent"]):
        requests.append(conv.handle(user(f"u{i}", mode=mode)))
        conv.assistant("ok")
    for earlier, later in itertools.pairwise(requests):
        assert_prefix(earlier, later)
        assert later.tools == earlier.tools
    assert context_ids(requests[-1]) == ["request-context:u0"]


def test_every_mode_of_the_bundle_has_the_same_tool_prefix() -> None:
    bundle = example_bundle()
    assert {m.name for m in bundle.modes} >= {"agent", "ask", "plan", "debug"}
    tools = [
        open_conv(conversation=f"c-{m.name}")
        .handle(user("u1", mode=m.name, conversation=f"c-{m.name}"))
        .tools
        for m in bundle.modes
    ]
    assert all(t == tools[0] for t in tools)


def test_unknown_mode_is_refused_and_changes_nothing() -> None:
    conv = open_conv()
    with pytest.raises(PrefixlockError, match="unknown mode 'yolo'"):
        conv.handle(user("u1", mode="yolo"))
    assert len(conv.request().messages) == 0


def test_secrets_are_redacted_from_the_request_context() -> None:
    ctx = {
        **CONTEXT_A,
        "git": {
            "branch": "main",
            "head": "abc",
            "dirty": True,
            "remote": "https://oauth2:ghp_SECRETTOKEN@github.com/acme/app.git",
        },
        "mcp": {
            "servers": [
                {
                    "name": "gh",
                    "transport": "http",
                    "url": "https://api.example.com/mcp?api_key=SECRETKEY&org=acme",
                    "headers": {"Authorization": "Bearer SECRETBEARER", "X-Org": "acme"},
                    "env": {"GITHUB_TOKEN": "SECRETENV", "DB_PASSWORD": "SECRETPW", "LOG": "1"},
                    "tools": [],
                }
            ]
        },
    }
    text = open_conv().handle(user("u1", context=ctx)).messages[0].text
    assert "SECRET" not in text.replace("[REDACTED]", "")
    assert "github.com/acme/app.git" in text
    assert "acme" in text
