"""Shared builders for the conversation-core tests (not a test module)."""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from prefixlock.core.messages import MessageKind
from prefixlock.core.model import ModelRequest
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.spec.build import build_bundle
from prefixlock.spec.bundle import Bundle
from prefixlock.store.contract import MemoryStore, Store

REPO = Path(__file__).resolve().parents[1]
CONV = "conv-1"

MCP_DB_TOOL = {
    "name": "query",
    "description": "Run a read-only SQL query.",
    "input_schema": {
        "type": "object",
        "properties": {"sql": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["sql"],
    },
}

CONTEXT_A: dict[str, Any] = {
    "rules": [
        {"name": "house-style", "kind": "always", "body": "ALWAYS-RULE-BODY: use tabs."},
        {
            "name": "py-tests",
            "kind": "auto",
            "globs": ["tests/**/*.py", "*_test.py"],
            "body": "AUTO-RULE-BODY: use pytest.",
        },
        {
            "name": "migrations",
            "kind": "agent",
            "description": "How to write database migrations",
            "body": "AGENT-RULE-BODY-SECRET-STEPS",
        },
        {"name": "release", "kind": "manual", "body": "MANUAL-RULE-BODY: bump version."},
    ],
    "skills": [
        {"name": "pdf", "description": "Read PDF files", "path": ".cursor/skills/pdf/SKILL.md"}
    ],
    "subagents": [{"name": "explorer", "description": "Explores the codebase read-only"}],
    "environment": {
        "os": "linux",
        "shell": "bash",
        "cwd": "/home/dev/app",
        "workspace_roots": ["/home/dev/app", "/home/dev/lib"],
    },
    "git": {"branch": "main", "head": "abc1234", "dirty": False},
    "mcp": {
        "servers": [
            {"name": "warehouse-db", "transport": "stdio", "tools": [MCP_DB_TOOL]},
            {
                "name": "tickets",
                "transport": "http",
                "url": "https://tickets.example.com/mcp",
                "tools": [
                    {
                        "name": "get_ticket",
                        "description": "Fetch a ticket",
                        "input_schema": {
                            "type": "object",
                            "properties": {"id": {"type": "string"}},
                        },
                    }
                ],
            },
        ]
    },
}


def context_b() -> dict[str, Any]:
    """CONTEXT_A with the branch changed (a conversation-level change)."""
    ctx = copy.deepcopy(CONTEXT_A)
    ctx["git"]["branch"] = "feature/x"
    return ctx


@functools.cache
def example_bundle() -> Bundle:
    return build_bundle(REPO)


def user(
    event: str,
    query: str = "fix the bug",
    *,
    context: dict[str, Any] | None = None,
    conversation: str = CONV,
    **fields: Any,
) -> AgentRunRequest:
    value: dict[str, Any] = {
        "conversation_id": conversation,
        "event_id": event,
        "kind": "user",
        "query": query,
        "context": CONTEXT_A if context is None else context,
    }
    value.update(fields)
    return AgentRunRequest.from_value(value)


def background(event: str, text: str = "subagent finished", conversation: str = CONV) -> Any:
    return AgentRunRequest.from_value(
        {"conversation_id": conversation, "event_id": event, "kind": "background", "text": text}
    )


def open_conv(store: Store | None = None, conversation: str = CONV) -> Conversation:
    return Conversation.open(store or MemoryStore(), example_bundle(), conversation)


def ids(request: ModelRequest) -> list[str]:
    return [m.id for m in request.messages]


def context_ids(request: ModelRequest) -> list[str]:
    return [m.id for m in request.messages if m.kind is MessageKind.REQUEST_CONTEXT]


def assert_prefix(earlier: ModelRequest, later: ModelRequest) -> None:
    """``earlier`` is an exact structural prefix of ``later`` (invariant 1)."""
    assert later.instructions == earlier.instructions
    assert later.tools == earlier.tools
    assert later.settings == earlier.settings
    n = len(earlier.messages)
    assert len(later.messages) >= n
    assert list(later.messages[:n]) == list(earlier.messages)
