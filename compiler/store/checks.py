"""The per-conversation part of ``integrity_check``, shared by the durable stores."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.errors import CheckpointError
from .contract import Store
from .records import decode_chain

__all__ = ["check_conversation"]


def check_conversation(store: Store, cid: str, columns: Iterable[tuple[int, str]]) -> None:
    """Load and fully decode ``cid`` (format, hash chain, message digests, canonical form
    of every record, head) and compare the store's event id column (``(seq, event_id)``
    rows) with each record. Always the checked decoder, never the hydration fast path.

    The hash chain is unkeyed: it detects corruption and truncation, not tampering (whoever
    can write the store can recompute every digest)."""
    stored = store.load(cid)
    if stored is None:
        raise CheckpointError(f"conversation {cid!r}: has records or a head but no root")
    _, records, head = decode_chain(stored.root, stored.records, cid, checked=True)
    if head != stored.head:
        raise CheckpointError(f"conversation {cid!r}: decoded chain does not end at the head")
    for record, (seq, event_id) in zip(records, columns, strict=False):
        if record.event_id != event_id:
            raise CheckpointError(
                f"conversation {cid!r} record {seq}: event id column {event_id!r} does not "
                f"match the record's event id {record.event_id!r}"
            )
