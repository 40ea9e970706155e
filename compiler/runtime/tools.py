"""What a caller hands a :class:`~prefixlock.runtime.conversation.Conversation` about
tools: the calls in model output and their results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..core import canonical
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
        """The canonical part; id, name and arguments held to
        :func:`prefixlock.core.canonical.check` (NUL refused)."""
        for field, text in (("id", self.id), ("name", self.name)):
            try:
                canonical.check(text, f"$.{field}", strings_without_nul=True)
            except CanonicalJSONError as err:
                raise HistoryError(f"tool call {self.id!r}: {err}") from None
        where = f"tool call {self.id!r}: arguments"
        try:
            value = (
                canonical.loads(self.arguments)
                if isinstance(self.arguments, str)
                else self.arguments
            )
        except RecursionError:
            raise HistoryError(
                f"{where}: nesting deeper than {canonical.MAX_DEPTH} levels"
            ) from None
        except (ValueError, CanonicalJSONError) as err:
            raise HistoryError(f"{where}: not valid JSON: {err}") from None
        if not isinstance(value, Mapping):
            raise HistoryError(f"{where} must be a JSON object")
        try:
            canonical.check(value, strings_without_nul=True)
        except CanonicalJSONError as err:
            raise HistoryError(f"{where}: {err}") from None
        return ToolCallPart(self.id, self.name, canonical.dumps(value), self.thought_signature)


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
