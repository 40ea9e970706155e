"""Which template variables are conversation-level and which are turn-level.

The build proves with ``jinja2.meta`` that a runtime template uses only turn-level
variables and the request-context template only conversation-level ones (invariant 3).
"""

from __future__ import annotations

#: Compiled into the ``request-context:<event id>`` message.
CONVERSATION_VARIABLES: frozenset[str] = frozenset(
    {"rules", "skills", "subagents", "environment", "git", "mcp"}
)

#: Compiled into the per-turn ``runtime:<event id>`` message.
TURN_VARIABLES: frozenset[str] = frozenset(
    {"query", "selected_context", "open_files", "action_context", "timestamp", "mode"}
)
