"""Secret redaction of user content (the rules themselves: :mod:`prefixlock.core.secrets`,
where every stage can reach them: the runtime here, validation errors that quote a value,
store URLs).
"""

from __future__ import annotations

import attrs

from ..core import canonical
from ..core.secrets import (
    REDACTED,
    is_sensitive_name,
    redact_mapping,
    redact_text,
    redact_url,
    redact_value,
)
from .request import AgentRunRequest

__all__ = [
    "REDACTED",
    "is_sensitive_name",
    "redact_mapping",
    "redact_text",
    "redact_url",
    "redact_user_content",
    "redact_value",
]


def redact_user_content(request: AgentRunRequest) -> AgentRunRequest:
    """The opt-in policy ``secrets.user_content: redact``: :func:`redact_text` over every
    string of the event's own content (query, event text, compaction summary,
    selections, open files, action context). Ids, kind, mode and timestamp are not
    content; the conversation-level ``context`` is redacted when it is compiled."""

    def text(value: str | None) -> str | None:
        return None if value is None else redact_text(value)

    def nested(value: str) -> str:
        return canonical.dumps(redact_value(canonical.loads(value)))

    return attrs.evolve(
        request,
        query=text(request.query),
        text=text(request.text),
        compact_summary=text(request.compact_summary),
        selected_context=nested(request.selected_context),
        open_files=nested(request.open_files),
        action_context=nested(request.action_context),
    )
