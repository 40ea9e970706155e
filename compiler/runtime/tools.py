"""What a caller hands a :class:`~prefixlock.runtime.conversation.Conversation` about
tools: the calls in model output and their results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..core import canonical
from ..core.admit import tool_call_part
from ..core.errors import CanonicalJSONError, HistoryError
from ..core.messages import ToolCallPart

__all__ = ["ToolCall", "ToolResult"]


@attrs.frozen
class ToolCall:
    """A tool call in model output. ``arguments`` is an object or its JSON text."""

    id: str
    name: str
    arguments: Mapping[str, Any] | str = attrs.field(factory=dict)
    thought_signature: str | None = None

    def to_part(self) -> ToolCallPart:
        """The call as a message part, checked (:func:`prefixlock.core.admit.tool_call_part`:
        an argument string is kept verbatim and must parse as a JSON object; an object is
        stored as its canonical JSON text; NUL and lone surrogates are refused)."""
        return tool_call_part(self.id, self.name, self.arguments, self.thought_signature)


@attrs.frozen
class ToolResult:
    """The result of one tool call: its text output, and whether the tool failed."""

    call_id: str
    output: str
    is_error: bool = False

    def check(self) -> None:
        """Refuse what has no canonical form: a lone surrogate (NUL too, in the id)."""
        try:
            canonical.check(self.call_id, "$.call_id", strings_without_nul=True)
            canonical.check(self.output, "$.output")
        except CanonicalJSONError as err:
            raise HistoryError(f"tool result for call {self.call_id!r}: {err}") from None
