"""Check before saving: what a :class:`~prefixlock.runtime.conversation.Conversation`
runs on every message before its record is written.

"Nothing is persisted that some configured provider would refuse" (DESIGN.md,
Providers). Every appending operation (a user turn, background or injected event,
assistant output, recorded model output, tool results, compaction) first validates the
types of what the caller gave, then normalizes by the fixed rules below, then asks
every provider the conversation's root is configured for (``root.settings``) whether it
would refuse the message (:meth:`Provider.check_message`, the serializer's own
refusals). Only then is the record written, so a stored conversation can always be
reopened and serialized by each of them. A refusal is a :class:`HistoryError` (a wrong
type or a blank value the caller must fix) or a :class:`SerializationError` (a provider
refusal), each naming the field.

Normalization rules (each applies where a refusal would block ordinary agent traffic;
pinned in ``tests/test_admission.py``):

1. A tool result whose output is empty or whitespace-only is stored as
   :data:`EMPTY_TOOL_OUTPUT` (``"(no output)"``) instead: a command that printed
   nothing is ordinary, and Anthropic and Bedrock refuse a blank tool result text.
2. An assistant text that is empty or whitespace-only is dropped when the output has
   other parts (an OpenAI-style turn ``assistant("", [ToolCall(...)])``, or a blank
   text block in a provider's model output beside tool calls): Anthropic and Bedrock
   refuse blank text blocks, and the text carries nothing. A blank text that carries a
   Gemini ``thought_signature`` is kept (the signature must go back to Gemini); the
   wires that refuse blank text leave such a part out (``signature_only`` in
   :mod:`prefixlock.providers.base`), as they leave out every thought signature.
3. Nothing else is rewritten. Refused with a clear error: output with no non-blank part,
   a blank background / injected event text, a blank compaction summary, a value of the
   wrong type (``ToolResult(id, None)``, ``compact(None)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import HistoryError, SerializationError
from ..core.messages import CanonicalMessage, Part, TextPart
from ..providers import Provider, get

__all__ = ["EMPTY_TOOL_OUTPUT", "Admission", "drop_blank_texts", "require_text", "tool_output"]

#: What a blank tool output is stored as (normalization rule 1).
EMPTY_TOOL_OUTPUT = "(no output)"


def blank(text: str) -> bool:
    """Empty or whitespace-only (``str.strip`` semantics, as the services judge it)."""
    return not text.strip()


def require_str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise HistoryError(f"{field}: expected a string, got {type(value).__name__} {value!r}")
    return value


def require_text(value: Any, field: str) -> str:
    """A string with non-whitespace text, else a :class:`HistoryError` naming ``field``."""
    text = require_str(value, field)
    if blank(text):
        raise HistoryError(
            f"{field}: empty or whitespace-only text ({text!r}) cannot be stored: "
            "Anthropic and Bedrock refuse blank text blocks"
        )
    return text


def tool_output(value: Any, field: str) -> str:
    """A tool output, with normalization rule 1 applied."""
    text = require_str(value, field)
    return EMPTY_TOOL_OUTPUT if blank(text) else text


def drop_blank_texts(parts: Sequence[Part], field: str) -> tuple[Part, ...]:
    """Assistant parts with normalization rule 2 applied; refuses output that would be
    left with no part."""
    kept = tuple(
        p
        for p in parts
        if not (isinstance(p, TextPart) and blank(p.text) and p.thought_signature is None)
    )
    if not kept:
        if parts:
            raise HistoryError(
                f"{field}: assistant output has only empty or whitespace-only text; "
                "Anthropic and Bedrock refuse blank text blocks"
            )
        raise HistoryError("assistant output has no parts")
    return kept


class Admission:
    """The refusals of every configured provider, asked before a record is written."""

    def __init__(self, names: Sequence[str]) -> None:
        self._providers: tuple[Provider, ...] = tuple(get(name) for name in names)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self._providers)

    def check(
        self,
        messages: Sequence[CanonicalMessage],
        earlier: Sequence[CanonicalMessage],
        field: str,
    ) -> None:
        """Raise :class:`SerializationError` naming ``field`` if a configured provider
        would refuse one of ``messages`` appended, in order, after ``earlier``."""
        for provider in self._providers:
            # The history itself for the first message (no copy of a long epoch per
            # provider and call); earlier + the messages before it for the others.
            before: Sequence[CanonicalMessage] = earlier
            for index, message in enumerate(messages):
                if index:
                    before = (*earlier, *messages[:index])
                try:
                    provider.check_message(message, before)
                except SerializationError as err:
                    raise SerializationError(
                        f"{field}: not stored, a configured provider would refuse it: {err}"
                    ) from None
