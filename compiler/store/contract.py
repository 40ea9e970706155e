"""The checkpoint store interface and the in-memory store.

A store holds, per conversation, the root bytes and the record bytes in seq order, plus
the head (last seq and its digest). It stores bytes; :mod:`prefixlock.store.records` encodes
and verifies them. Guarantees every store gives:

* ``append`` is atomic: the record and the new head are written together or not at all;
* (conversation, seq) and (conversation, event id) are unique: a second writer at the
  same seq gets :class:`CheckpointRaceError`; an event id already stored too;
* ``load`` detects a truncated tail (head mismatch) with :class:`CheckpointError`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self

import attrs

from ..core import canonical
from ..core.errors import CheckpointError, CheckpointRaceError


@attrs.frozen
class StoredConversation:
    conversation_id: str
    root: bytes
    records: tuple[bytes, ...]
    #: digest of the last record's bytes (the root's when there are none)
    head: str
    #: ``sha256:`` of each record's bytes, when the store computed them while loading
    #: (hydration then need not hash the records again); None if it did not. Derived
    #: from ``records``, so not part of equality.
    digests: tuple[str, ...] | None = attrs.field(default=None, eq=False)


class Store(Protocol):
    def create_root(self, conversation_id: str, root: bytes) -> bytes:
        """Store ``root`` unless the conversation exists; return the stored root."""
        ...

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> None:
        """Append record ``seq`` (which must be head + 1) atomically."""
        ...

    def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
        """The root and the records with seq > ``after`` (all by default)."""
        ...

    def conversations(self) -> list[str]:
        """Stored conversation ids, sorted."""
        ...

    def close(self) -> None: ...


class DurableStore(Store, Protocol):
    """A store that outlives the process (SQLite, PostgreSQL): checkable and closable."""

    def integrity_check(self) -> list[str]:
        """Every problem found in the store, one line each; empty when it is sound."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def seq_conflict(conversation_id: str, seq: int, head: int) -> CheckpointRaceError:
    """The error for appending ``seq`` when the head is ``head`` (``seq != head + 1``)."""
    if seq <= head:
        return CheckpointRaceError(
            f"conversation {conversation_id!r}: seq {seq} is taken (head is {head})"
        )
    return CheckpointRaceError(
        f"conversation {conversation_id!r}: seq {seq} does not follow the head {head} "
        f"(expected {head + 1})"
    )


class MemoryStore:
    """A store in a dict, for tests and for throwaway conversations."""

    def __init__(self) -> None:
        self._roots: dict[str, bytes] = {}
        self._records: dict[str, list[tuple[str, bytes]]] = {}
        self._events: dict[str, set[str]] = {}  # uniqueness of event ids, in O(1)

    def create_root(self, conversation_id: str, root: bytes) -> bytes:
        if conversation_id not in self._roots:
            self._roots[conversation_id] = root
            self._records[conversation_id] = []
            self._events[conversation_id] = set()
        return self._roots[conversation_id]

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> None:
        records = self._records.get(conversation_id)
        if records is None:
            raise CheckpointError(f"conversation {conversation_id!r} has no root")
        if seq != len(records) + 1:
            raise seq_conflict(conversation_id, seq, len(records))
        if event_id in self._events[conversation_id]:
            raise CheckpointRaceError(
                f"conversation {conversation_id!r}: event {event_id!r} is already stored"
            )
        records.append((event_id, record))
        self._events[conversation_id].add(event_id)

    def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
        if after < 0:
            raise ValueError(f"after must be >= 0, not {after}")
        if conversation_id not in self._roots:
            return None
        root = self._roots[conversation_id]
        records = [data for _, data in self._records[conversation_id]]
        head = canonical.sha256_hex(records[-1] if records else root)
        return StoredConversation(conversation_id, root, tuple(records[after:]), head)

    def conversations(self) -> list[str]:
        return sorted(self._roots)

    def close(self) -> None:
        pass
