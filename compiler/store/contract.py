"""The checkpoint store interface and the in-memory store.

A store holds, per conversation, the root bytes and the record bytes in seq order, plus
the head (last seq and its digest). It stores bytes; :mod:`prefixlock.store.records` encodes
and verifies them. Guarantees every store gives:

* ``append`` is atomic: the record and the new head are written together or not at all;
* (conversation, seq) and (conversation, event id) are unique: a second writer at the
  same seq gets :class:`CheckpointRaceError`; an event id already stored too;
* ``append`` returns the new :class:`Head` (seq and digest): a caller that keeps it can
  later prove the store is not behind what it was told (:func:`check_head`), which is the
  only way to see commits that a store lost as a whole (an SQLite ``-wal`` file deleted,
  truncated or damaged rolls the database back to a consistent, older state);
* ``load`` detects a truncated tail (head mismatch) with :class:`CheckpointError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from types import TracebackType
from typing import Protocol, Self

import attrs

from ..core import canonical
from ..core.errors import CheckpointError, CheckpointRaceError, UsageError


@attrs.frozen
class Head:
    """A conversation's head: the last record's seq and the ``sha256:`` digest of its bytes
    (seq 0 and the root's digest before the first record). Prints as ``SEQ:DIGEST``."""

    seq: int
    digest: str

    def __str__(self) -> str:
        return f"{self.seq}:{self.digest}"

    @classmethod
    def parse(cls, text: str) -> Head:
        """Read ``SEQ:DIGEST`` (``3:sha256:<64 hex>``)."""
        seq, sep, digest = text.partition(":")
        if not (sep and seq.isdigit() and re.fullmatch(r"sha256:[0-9a-f]{64}", digest)):
            raise UsageError(f"head {text!r} is not SEQ:sha256:<64 hex digits>")
        return cls(int(seq), digest)


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


@attrs.frozen
class CatchUp:
    """What a warm reader gets from :meth:`Store.load_after`: the head, and the records
    after the seq it already holds (never the root), each body checked against its
    stored digest."""

    conversation_id: str
    head: Head
    records: tuple[bytes, ...]
    #: ``sha256:`` of each record (verified against its bytes)
    digests: tuple[str, ...]


def verified_catch_up(
    conversation_id: str,
    after: int,
    head_seq: int,
    head_digest: str,
    rows: Iterable[tuple[int, object, object]],
) -> CatchUp:
    """Check the rows ``(seq, body, digest)`` with seq > ``after`` read with the head.

    Refuses (:class:`CheckpointError`): a head behind ``after`` (the store lost records
    the reader holds), a gap, a row past the head, a truncated tail, a body that does
    not match its digest, a head digest that is not the last record's. With no new
    rows the head digest cannot be checked here: the reader compares it with its own.
    """
    where = f"conversation {conversation_id!r}"
    if head_seq < after:
        raise CheckpointError(
            f"{where} is behind: its head is record {head_seq}, but the reader holds record "
            f"{after}: the store lost committed records"
        )
    records: list[bytes] = []
    digests: list[str] = []
    expected = after + 1
    for seq, body, digest in rows:
        if seq > head_seq:
            raise CheckpointError(
                f"{where}: record {seq} is past the head (record {head_seq}); it was not "
                "written by a prefixlock append"
            )
        if seq != expected:
            raise CheckpointError(f"{where}: record {expected} is missing (gap in seq)")
        if not isinstance(body, bytes):
            raise CheckpointError(
                f"{where} record {seq}: body is stored as {type(body).__name__}, not bytes"
            )
        actual = canonical.sha256_hex(body)
        if actual != digest:
            raise CheckpointError(
                f"{where} record {seq}: body does not match its stored digest "
                f"(stored {digest}, computed {actual}): corrupted (bit flip?)"
            )
        records.append(body)
        digests.append(actual)
        expected += 1
    last = expected - 1
    if last < head_seq:
        raise CheckpointError(
            f"{where}: truncated: the head is record {head_seq} but the last stored "
            f"record is {last}"
        )
    if digests and digests[-1] != head_digest:
        raise CheckpointError(
            f"{where}: the head digest does not match record {last} "
            f"(head {head_digest}, record {digests[-1]})"
        )
    return CatchUp(conversation_id, Head(head_seq, head_digest), tuple(records), tuple(digests))


class Store(Protocol):
    def create_root(self, conversation_id: str, root: bytes) -> bytes:
        """Store ``root`` unless the conversation exists; return the stored root."""
        ...

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> Head:
        """Append record ``seq`` (which must be head + 1) atomically; the new head."""
        ...

    def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
        """The root and the records with seq > ``after`` (all by default)."""
        ...

    def load_after(self, conversation_id: str, seq: int) -> CatchUp | None:
        """The head and the records after ``seq``, without the root (a warm reader's
        catch-up); None if the conversation is unknown."""
        ...

    def conversations(self) -> list[str]:
        """Stored conversation ids, sorted."""
        ...

    def close(self) -> None: ...


class DurableStore(Store, Protocol):
    """A store that outlives the process (SQLite, PostgreSQL): checkable and closable."""

    #: the schema version the store holds
    schema_version: int
    #: True if opening this store created its schema (it was empty)
    created_schema: bool
    #: root and record body bytes this handle has read from the database (a figure)
    bytes_read: int

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


def missing_head(conversation_id: str, *, has_root: bool) -> CheckpointError:
    """The error for appending to a conversation without a head row."""
    if has_root:
        return CheckpointError(
            f"conversation {conversation_id!r}: the store has its root but no head"
        )
    return CheckpointError(f"conversation {conversation_id!r} has no root")


def event_taken(conversation_id: str, event_id: str, seq: int) -> CheckpointRaceError:
    """The error for appending event ``event_id`` when record ``seq`` already holds it."""
    return CheckpointRaceError(
        f"conversation {conversation_id!r}: event {event_id!r} is already stored (record {seq})"
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

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> Head:
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
        return Head(seq, canonical.sha256_hex(record))

    def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
        if after < 0:
            raise ValueError(f"after must be >= 0, not {after}")
        if conversation_id not in self._roots:
            return None
        root = self._roots[conversation_id]
        records = [data for _, data in self._records[conversation_id]]
        head = canonical.sha256_hex(records[-1] if records else root)
        return StoredConversation(conversation_id, root, tuple(records[after:]), head)

    def load_after(self, conversation_id: str, seq: int) -> CatchUp | None:
        if seq < 0:
            raise ValueError(f"seq must be >= 0, not {seq}")
        if conversation_id not in self._roots:
            return None
        records = self._records[conversation_id]
        head = Head(
            len(records),
            canonical.sha256_hex(records[-1][1] if records else self._roots[conversation_id]),
        )
        rows = [(i, data, canonical.sha256_hex(data)) for i, (_, data) in enumerate(records, 1)]
        return verified_catch_up(conversation_id, seq, head.seq, head.digest, rows[seq:])

    def conversations(self) -> list[str]:
        return sorted(self._roots)

    def close(self) -> None:
        pass


def check_head(stored: StoredConversation | None, conversation_id: str, expected: Head) -> None:
    """Refuse a store that is behind ``expected``, the head a caller was once given.

    The store must hold record ``expected.seq`` with that digest (the root's digest for
    seq 0); it may have moved on since. Raises :class:`CheckpointError` otherwise.
    """
    where = f"conversation {conversation_id!r}"
    lost = "the store lost committed records (a deleted, truncated or damaged -wal file?)"
    if stored is None:
        raise CheckpointError(f"{where} is missing, but its head was {expected}: {lost}")
    if stored.digests is not None and len(stored.digests) == len(stored.records):
        digests = stored.digests
    else:
        digests = tuple(canonical.sha256_hex(r) for r in stored.records)
    if expected.seq > len(digests):
        raise CheckpointError(
            f"{where} is behind: it ends at record {len(digests)}, but its head was "
            f"{expected}: {lost}"
        )
    found = digests[expected.seq - 1] if expected.seq else canonical.sha256_hex(stored.root)
    if found != expected.digest:
        raise CheckpointError(
            f"{where}: record {expected.seq} has digest {found}, but its head was "
            f"{expected}: the store holds another history"
        )


def head_problems(store: Store, conversation_id: str, expected: Head) -> list[str]:
    """:func:`check_head` as a report: ``[]`` when the store is not behind ``expected``."""
    try:
        check_head(store.load(conversation_id), conversation_id, expected)
    except CheckpointError as err:
        return [str(err)]
    return []
