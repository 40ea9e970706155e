"""Shared builders for the conversation-core tests (not a test module)."""

from __future__ import annotations

import copy
import functools
import re
import shutil
import tempfile
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


#: The two ``context_updates`` choices; tests of the seed's list run under both.
MODES = ("whole", "sections")
#: The mode :func:`example_bundle` builds (the ``context_updates`` fixture sets it).
CURRENT_MODE: list[str] = []


def example_bundle() -> Bundle:
    """The bundled example, under the mode a ``context_updates`` fixture chose (else as
    shipped)."""
    return mode_bundle(CURRENT_MODE[-1]) if CURRENT_MODE else _shipped_bundle()


@functools.cache
def _shipped_bundle() -> Bundle:
    return build_bundle(REPO)


@functools.cache
def mode_root(mode: str) -> Path:
    """A copy of the example spec root with ``context_updates: <mode>``."""
    root = Path(tempfile.mkdtemp(prefix=f"prefixlock-{mode}-"))
    for folder in ("rules", "prompt"):
        shutil.copytree(REPO / folder, root / folder)
    agent = root / "rules" / "agent.yaml"
    text = re.sub(r"(?m)^context_updates:.*\n", "", agent.read_text())
    text = text.replace("\ndefault_mode:", f"\ncontext_updates: {mode}\ndefault_mode:", 1)
    agent.write_text(text)
    return root


@functools.cache
def mode_bundle(mode: str) -> Bundle:
    """The example bundle under ``context_updates: <mode>``."""
    return build_bundle(mode_root(mode))


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
