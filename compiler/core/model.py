"""The provider-independent request model: what every provider module serializes.

``providers`` import from the rest of the package only ``core``: this module,
:mod:`~prefixlock.core.messages`, :mod:`~prefixlock.core.canonical` and
:mod:`~prefixlock.core.errors`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from enum import StrEnum
from typing import Any, overload

import attrs

from . import canonical
from .messages import CanonicalMessage


@attrs.frozen(cache_hash=True)  # a frame key hashes the tools on every call
class ToolSpec:
    """A built-in tool of the stable prefix. ``parameters`` is canonical JSON-Schema text."""

    name: str
    description: str
    parameters: str

    @property
    def parameters_value(self) -> Any:
        return canonical.loads(self.parameters)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": canonical.loads(self.parameters),
        }


@attrs.frozen(cache_hash=True)
class ProviderSettings:
    """Stable per-provider options from the bundle: identical on every call.

    ``options`` is the canonical JSON text of any further provider options
    (``temperature``, ``thinking``, ``reasoning`` ...), sent as given.
    """

    provider: str
    model: str
    max_tokens: int
    options: str = "{}"

    @property
    def options_value(self) -> dict[str, Any]:
        value = canonical.loads(self.options)
        assert isinstance(value, dict)
        return value

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "max_tokens": self.max_tokens,
            "options": canonical.loads(self.options),
        }


class CachePosition(StrEnum):
    """Stable places where a provider may put a cache marker, by a fixed rule."""

    TOOLS = "tools"  # end of the tool list
    INSTRUCTIONS = "instructions"  # end of the system instructions
    CONTEXT = "context"  # the latest request-context message
    TAIL = "tail"  # the last message (moves every call)
    #: The latest user-role message, the one that opens the current turn: placed by the
    #: marker wires themselves with ``cache_ttl: turn`` (providers/cache_ttl.py), never
    #: a runtime hint.
    TURN = "turn"


@attrs.frozen
class CacheHint:
    position: CachePosition
    #: index into ``ModelRequest.messages`` for CONTEXT and TAIL; None otherwise.
    message_index: int | None = None


#: The two hints of every request that do not point at a message (end of the tools, end
#: of the instructions), made once: a conversation's requests share them.
FRAME_HINTS = (CacheHint(CachePosition.TOOLS), CacheHint(CachePosition.INSTRUCTIONS))


class MessageView(Sequence[CanonicalMessage]):
    """An immutable view of the first ``length`` messages of an append-only list.

    The list is only ever appended to (:class:`~prefixlock.runtime.history.History`
    keeps one per epoch), so two views of one list share their first
    ``min(len(a), len(b))`` messages: :meth:`shared_with` knows it in O(1), and a
    provider encoding call N+1 after call N visits only the new messages.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[CanonicalMessage], length: int) -> None:
        self._items = items
        self._length = length

    def shared_with(self, other: Sequence[CanonicalMessage]) -> int:
        """How many leading messages ``other`` is known to share with this view without
        comparing them: ``min(len(self), len(other))`` for a view of the same list, else 0."""
        if isinstance(other, MessageView) and other._items is self._items:
            return min(self._length, other._length)
        return 0

    def lineage(self) -> int:
        """Equal for views of one list (while they live): a key for caches that follow
        one history list from request to request."""
        return id(self._items)

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> CanonicalMessage: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[CanonicalMessage]: ...
    def __getitem__(self, index: int | slice) -> CanonicalMessage | Sequence[CanonicalMessage]:
        if isinstance(index, slice):
            return tuple(self._items[: self._length][index])
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._items[index]

    def __iter__(self) -> Iterator[CanonicalMessage]:
        items = self._items
        for i in range(self._length):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"MessageView({[m.id for m in self]!r})"


@attrs.frozen(eq=False)
class ModelRequest:
    """One model call, provider-independent.

    ``messages`` is an immutable sequence (a view onto the append-only history); compare
    requests with :meth:`same_as` or by their provider bytes.
    """

    conversation_id: str
    instructions: str
    tools: tuple[ToolSpec, ...]
    settings: tuple[ProviderSettings, ...]
    messages: Sequence[CanonicalMessage]
    cache_hints: tuple[CacheHint, ...]
    #: Derived from the conversation id only, so it is identical on every call.
    cache_key: str
    #: Compaction epoch (0 until the first compaction).
    epoch: int = 0

    def settings_for(self, provider: str) -> ProviderSettings:
        for item in self.settings:
            if item.provider == provider:
                return item
        raise KeyError(provider)

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "epoch": self.epoch,
            "instructions": self.instructions,
            "tools": [t.to_json() for t in self.tools],
            "settings": [s.to_json() for s in self.settings],
            "messages": [m.to_json() for m in self.messages],
            "cache_hints": [
                {"position": str(h.position), "message_index": h.message_index}
                for h in self.cache_hints
            ],
            "cache_key": self.cache_key,
        }

    def same_as(self, other: ModelRequest) -> bool:
        return self.to_json() == other.to_json()
