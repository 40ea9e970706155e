"""The checks on model output that hold wherever it enters: what a reader returns
(:mod:`prefixlock.providers.readers`) and what a conversation records
(:mod:`prefixlock.runtime.admission`) pass the same ones, so an output a reader accepts
is one a conversation stores (issue 43: "a provider-refused part is a ResponseError,
never recorded"). They raise :class:`HistoryError`; a reader turns it into a
:class:`~prefixlock.core.errors.ResponseError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import canonical
from .errors import CanonicalJSONError, HistoryError
from .messages import Part, TextPart, ToolCallPart
from .secrets import redact_text

__all__ = ["blank", "drop_blank_texts", "tool_call_part"]


def blank(text: str) -> bool:
    """Empty or whitespace-only (``str.strip`` semantics, as the services judge it)."""
    return not text.strip()


def drop_blank_texts(parts: Sequence[Part], field: str) -> tuple[Part, ...]:
    """Assistant parts with normalization rule 2 of :mod:`prefixlock.runtime.admission`
    applied; refuses output that would be left with no part."""
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


def tool_call_part(
    call_id: Any, name: Any, arguments: Any, thought_signature: Any = None
) -> ToolCallPart:
    """A tool call as a message part, checked. An argument *string* (the model's own
    text) is kept verbatim, byte for byte, so the wires that carry a string (OpenAI Chat
    ``function.arguments``, Responses ``arguments``) send back exactly what the model
    sent (key order, ``\\u`` escapes, ``1e2``); it must parse as a JSON object. An
    argument *object* is stored as its canonical JSON text. Id, name and arguments are
    held to :func:`prefixlock.core.canonical.check` (NUL refused)."""
    if not isinstance(call_id, str) or not isinstance(name, str):
        raise HistoryError(f"tool call {call_id!r}: id and name must be strings")
    if thought_signature is not None and not isinstance(thought_signature, str):
        raise HistoryError(f"tool call {call_id!r}: a thought signature must be a string")
    for field, value in (("id", call_id), ("name", name)):
        try:
            canonical.check(value, f"$.{field}", strings_without_nul=True)
        except CanonicalJSONError as err:
            raise HistoryError(f"tool call {call_id!r}: {err}") from None
    where = f"tool call {call_id!r}: arguments"
    text: str | None = None
    if isinstance(arguments, str):
        try:
            value = canonical.parsed(arguments)  # shared: only checked here
        except RecursionError:
            raise HistoryError(
                f"{where}: nesting deeper than {canonical.MAX_DEPTH} levels"
            ) from None
        except (CanonicalJSONError, ValueError) as err:  # JSONDecodeError: a ValueError
            raise HistoryError(f"{where} are not JSON ({err}): {_preview(arguments)}") from None
        text = arguments
    else:
        value = arguments
    if not isinstance(value, Mapping):
        raise HistoryError(f"{where} must be a JSON object")
    try:
        canonical.check(value, strings_without_nul=True)
    except CanonicalJSONError as err:
        raise HistoryError(f"{where}: {err}") from None
    if text is None:
        text = canonical.dumps(value)
    return ToolCallPart(call_id, name, text, thought_signature)


def _preview(text: str, limit: int = 80) -> str:
    """The start of ``text`` for an error message, secrets redacted (redacted before it
    is cut, so a secret cut in two is still caught)."""
    shown = redact_text(text)
    if len(shown) <= limit:
        return repr(shown)
    return f"{shown[:limit]!r}... ({len(text)} characters)"
