"""What a caller hands a :class:`~prefixlock.runtime.conversation.Conversation` about
tools: the calls in model output and their results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import CanonicalJSONError, HistoryError
from ..core.messages import ToolCallPart
from ..core.secrets import redact_text

__all__ = ["ToolCall", "ToolResult"]


@attrs.frozen
class ToolCall:
    """A tool call in model output. ``arguments`` is an object or its JSON text."""

    id: str
    name: str
    arguments: Mapping[str, Any] | str = attrs.field(factory=dict)
    thought_signature: str | None = None

    def to_part(self) -> ToolCallPart:
        """The call as a message part. An argument *string* (the model's own text) is
        kept verbatim, byte for byte, so the wires that carry a string (OpenAI Chat
        ``function.arguments``, Responses ``arguments``) send back exactly what the model
        sent (key order, ``\\u`` escapes, ``1e2``); it must parse as a JSON object. An
        argument *object* is stored as its canonical JSON text. Id, name and arguments are
        held to :func:`prefixlock.core.canonical.check` (NUL refused)."""
        if not isinstance(self.id, str) or not isinstance(self.name, str):
            raise HistoryError(f"tool call {self.id!r}: id and name must be strings")
        for field, name in (("id", self.id), ("name", self.name)):
            try:
                canonical.check(name, f"$.{field}", strings_without_nul=True)
            except CanonicalJSONError as err:
                raise HistoryError(f"tool call {self.id!r}: {err}") from None
        where = f"tool call {self.id!r}: arguments"
        text: str | None = None
        if isinstance(self.arguments, str):
            try:
                value = canonical.parsed(self.arguments)  # shared: only checked here
            except RecursionError:
                raise HistoryError(
                    f"{where}: nesting deeper than {canonical.MAX_DEPTH} levels"
                ) from None
            except (CanonicalJSONError, ValueError) as err:  # JSONDecodeError: a ValueError
                raise HistoryError(
                    f"{where} are not JSON ({err}): {_preview(self.arguments)}"
                ) from None
            text = self.arguments
        else:
            value = self.arguments
        if not isinstance(value, Mapping):
            raise HistoryError(f"{where} must be a JSON object")
        try:
            canonical.check(value, strings_without_nul=True)
        except CanonicalJSONError as err:
            raise HistoryError(f"{where}: {err}") from None
        if text is None:
            text = canonical.dumps(value)
        return ToolCallPart(self.id, self.name, text, self.thought_signature)


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


def _preview(text: str, limit: int = 80) -> str:
    """The start of ``text`` for an error message, secrets redacted (redacted before it
    is cut, so a secret cut in two is still caught)."""
    shown = redact_text(text)
    if len(shown) <= limit:
        return repr(shown)
    return f"{shown[:limit]!r}... ({len(text)} characters)"
