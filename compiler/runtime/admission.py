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
   wrong type (``ToolResult(id, None)``, ``compact(None)``), and, under a root that
   defines no tools, a tool call or result where a configured provider's service refuses
   tool blocks without tools (:attr:`Provider.TOOL_BLOCKS_NEED_TOOLS`: Anthropic,
   Bedrock).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

from ..core.admit import blank, drop_blank_texts
from ..core.errors import HistoryError, SerializationError
from ..core.messages import CanonicalMessage
from ..core.secrets import quoted
from ..providers import Provider, get

__all__ = ["EMPTY_TOOL_OUTPUT", "Admission", "drop_blank_texts", "require_text", "tool_output"]

#: What a blank tool output is stored as (normalization rule 1).
EMPTY_TOOL_OUTPUT = "(no output)"


def require_str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise HistoryError(
            f"{field}: expected a string, got {type(value).__name__} {quoted(value)}"
        )
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


class _Joined(Sequence[CanonicalMessage]):
    """``earlier`` followed by ``more``, without copying ``earlier``."""

    __slots__ = ("_earlier", "_more")

    def __init__(self, earlier: Sequence[CanonicalMessage], more: Sequence[CanonicalMessage]):
        self._earlier = earlier
        self._more = more

    def __len__(self) -> int:
        return len(self._earlier) + len(self._more)

    @overload
    def __getitem__(self, index: int) -> CanonicalMessage: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[CanonicalMessage]: ...
    def __getitem__(self, index: int | slice) -> CanonicalMessage | Sequence[CanonicalMessage]:
        if isinstance(index, slice):
            return (*self._earlier, *self._more)[index]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        n = len(self._earlier)
        return self._earlier[index] if index < n else self._more[index - n]


class _Fold:
    """One keyed provider's :meth:`~Provider.fragment_key` notes after the first
    ``count`` messages of the epoch list ``epoch``, the last of which, ``unconfirmed``,
    were folded while checked and are only known to be stored once the next check finds
    them in the list (a refused or lost record's notes are then dropped by a new fold)."""

    __slots__ = ("count", "epoch", "notes", "unconfirmed")

    def __init__(self) -> None:
        self.epoch: Sequence[CanonicalMessage] | None = None
        self.count = 0
        self.unconfirmed: tuple[CanonicalMessage, ...] = ()
        self.notes: dict[str, Any] = {}

    def after(self, provider: Provider, earlier: Sequence[CanonicalMessage]) -> dict[str, Any]:
        """The notes after all of ``earlier``; reads only the messages stored since the
        last check when ``earlier`` is the same append-only list, else folds afresh."""
        start = self.count - len(self.unconfirmed)
        same = (
            earlier is self.epoch
            and len(earlier) >= self.count
            and all(earlier[start + i] is m for i, m in enumerate(self.unconfirmed))
        )
        if not same:
            self.notes, self.count = {}, 0
        self.epoch = None  # invalid until the check that uses the notes succeeds
        for index in range(self.count, len(earlier)):
            provider.fragment_key(earlier[index], self.notes)
        return self.notes

    def checked(
        self, earlier: Sequence[CanonicalMessage], messages: Sequence[CanonicalMessage]
    ) -> None:
        self.epoch = earlier
        self.count = len(earlier) + len(messages)
        self.unconfirmed = tuple(messages)


class Admission:
    """The refusals of every configured provider, asked before a record is written.

    One instance serves one conversation: for a provider whose message bytes depend on
    earlier messages (:meth:`Provider.fragment_key`), it keeps that fold's notes, so a
    check after the history's own append-only epoch list reads only the messages stored
    since the previous check; per-call work does not grow with the history."""

    def __init__(
        self,
        names: Sequence[str],
        *,
        tools: bool = True,
        models: Sequence[str | None] | None = None,
    ) -> None:
        #: Whether the conversation's requests define tools (its root's tools).
        self.tools = tools
        #: Per provider (same order as ``names``), the model its requests go to: a wire
        #: whose refusals depend on the model asks by it (None: not known).
        self._models: tuple[str | None, ...] = (
            tuple(models) if models is not None else (None,) * len(names)
        )
        self._providers: tuple[Provider, ...] = tuple(get(name) for name in names)
        self._folds: dict[str, _Fold] = {
            p.name: _Fold()
            for p in self._providers
            if type(p).fragment_key is not Provider.fragment_key
        }

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
        would refuse one of ``messages`` appended, in order, after ``earlier`` (best: the
        history's epoch list itself, which only ever grows)."""
        for provider, model in zip(self._providers, self._models, strict=True):
            fold = self._folds.get(provider.name)
            notes = None if fold is None else fold.after(provider, earlier)
            for index, message in enumerate(messages):
                before = _Joined(earlier, messages[:index]) if index else earlier
                try:
                    provider.check_message(
                        message, before, notes=notes, tools=self.tools, model=model
                    )
                except SerializationError as err:
                    raise SerializationError(
                        f"{field}: not stored, a configured provider would refuse it: {err}"
                    ) from None
            if fold is not None:
                fold.checked(earlier, messages)
