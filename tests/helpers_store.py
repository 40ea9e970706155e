"""Builders for checkpoint tests, and a worker script for the multi-process store tests.

As a script (run with the project's Python)::

    helpers_store.py worker DB CONV TAG N GO      # append TAG-0..TAG-(N-1), retry on race
    helpers_store.py shared DB CONV N GO          # append shared-0..; skip ones already stored
    helpers_store.py loop DB CONV SIZE            # append forever (until killed)

Workers wait until the file GO exists, so that several start appending at the same time.
Every committed append prints ``<seq> <event id>`` on its own line, flushed, after
``append`` returned; ``worker`` and ``shared`` end with ``races <n>``.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointRaceError
from prefixlock.core.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from prefixlock.core.model import ProviderSettings, ToolSpec
from prefixlock.store import records as formats
from prefixlock.store.contract import Store
from prefixlock.store.records import Record, RecordType, Root


def make_root(conversation_id: str = "conv-1", instructions: str = "You are careful.") -> Root:
    return Root(
        conversation_id=conversation_id,
        bundle_digest=canonical.sha256_hex("bundle"),
        instructions=instructions,
        tools=(
            ToolSpec(
                "read_file",
                "Read a file.",
                canonical.dumps({"type": "object", "properties": {"path": {"type": "string"}}}),
            ),
        ),
        settings=(ProviderSettings("anthropic", "claude-x", 1024, canonical.dumps({"t": 0.5})),),
    )


def event_message(event_id: str, text: str) -> CanonicalMessage:
    return CanonicalMessage.create(
        f"event:{event_id}", MessageKind.EVENT, Role.USER, (TextPart(text),)
    )


def rich_messages(event_id: str) -> tuple[CanonicalMessage, ...]:
    """One message of every part type, opaque data and thought signatures included."""
    opaque = canonical.dumps({"type": "thinking", "thinking": "hm", "signature": "c2ln=="})
    return (
        CanonicalMessage.create(
            f"request-context:{event_id}",
            MessageKind.REQUEST_CONTEXT,
            Role.USER,
            (TextPart("rules: be terse\n  é ✓ \u2028 end"),),
        ),
        CanonicalMessage.create(
            f"runtime:{event_id}",
            MessageKind.RUNTIME,
            Role.USER,
            (TextPart("query"), ImagePart("image/png", "iVBORw0KGgo=")),
        ),
        CanonicalMessage.create(
            "assistant:1",
            MessageKind.ASSISTANT,
            Role.ASSISTANT,
            (
                OpaquePart("anthropic", opaque),
                TextPart("Reading.", thought_signature="sig-text"),
                ToolCallPart(
                    "call-1",
                    "read_file",
                    canonical.dumps({"path": "a.py"}),
                    thought_signature="sig-call",
                ),
            ),
        ),
        CanonicalMessage.create(
            "tool-results:call-1",
            MessageKind.TOOL_RESULT,
            Role.TOOL,
            (ToolResultPart("call-1", "print(1)\n", is_error=False),),
        ),
    )


def make_record(seq: int, event_id: str, text: str = "hello") -> Record:
    return Record(seq, RecordType.EVENT, event_id, (event_message(event_id, text),))


def record_value(record: Record, cid: str, prev: str) -> dict[str, object]:
    """A record as the canonical encoder writes it, member by member (written out here,
    not taken from :class:`Record`, so that the tests hold its encoding to it)."""
    if record.timestamp is not None:
        form = formats.FORMAT_TIMESTAMP
    else:
        form = formats.FORMAT if record.usage is None else formats.FORMAT_USAGE
    value: dict[str, object] = {
        "format": form,
        "kind": "record",
        "conversation": cid,
        "seq": record.seq,
        "prev": prev,
        "type": str(record.type),
        "event_id": record.event_id,
        "request_digest": record.request_digest,
        "reset": record.reset,
        "messages": [m.to_json() for m in record.messages],
    }
    if record.timestamp is not None:
        value["timestamp"] = record.timestamp
    if record.usage is not None:
        value["usage"] = record.usage.to_json()
    return value


def build_chain(
    conversation_id: str, records: list[Record], root: Root | None = None
) -> tuple[bytes, list[bytes]]:
    """Encode a root and records into a valid chain."""
    root = root or make_root(conversation_id)
    root_bytes = root.encode()
    prev = canonical.sha256_hex(root_bytes)
    out = []
    for record in records:
        data = record.encode(conversation_id, prev)
        out.append(data)
        prev = canonical.sha256_hex(data)
    return root_bytes, out


def fill(store: Store, conversation_id: str, n: int, text: str = "hello") -> list[bytes]:
    """Create the conversation and append ``n`` records e1..en; returns the record bytes."""
    root_bytes, records = build_chain(
        conversation_id, [make_record(i, f"e{i}", f"{text} {i}") for i in range(1, n + 1)]
    )
    store.create_root(conversation_id, root_bytes)
    for i, data in enumerate(records, start=1):
        store.append(conversation_id, i, f"e{i}", data)
    return records


def stored_event_ids(store: Store, conversation_id: str) -> list[str]:
    stored = store.load(conversation_id)
    assert stored is not None
    return [canonical.loads(r)["event_id"] for r in stored.records]


def append_with_retry(
    store: Store,
    conversation_id: str,
    event_id: str,
    text: str,
    *,
    skip_stored: bool = False,
    pause: float = 0.0,
) -> tuple[int | None, int]:
    """Append one event at the current head, retrying on a race.

    ``pause`` sleeps up to that many seconds between reading the head and appending (as
    a server does while the model answers), which gives other writers time to race.
    Returns the committed seq (None if ``skip_stored`` and the event was already there)
    and the number of races lost on the way.
    """
    races = 0
    while True:
        stored = store.load(conversation_id)
        assert stored is not None
        if skip_stored and event_id in stored_event_ids(store, conversation_id):
            return None, races
        seq = len(stored.records) + 1
        data = make_record(seq, event_id, text).encode(conversation_id, stored.head)
        if pause:
            time.sleep(random.uniform(0, pause))
        try:
            store.append(conversation_id, seq, event_id, data)
        except CheckpointRaceError:
            races += 1
            if races > 100_000:
                raise
            continue
        return seq, races


def _wait_for(go: Path) -> None:
    deadline = time.monotonic() + 60
    while not go.exists():
        if time.monotonic() > deadline:
            raise SystemExit("timed out waiting for the go file")
        time.sleep(0.001)


def main(argv: list[str]) -> None:
    from prefixlock.store.sqlite import SQLiteStore

    mode, db, cid = argv[0], argv[1], argv[2]
    if mode == "loop":
        size = int(argv[3])
        with SQLiteStore(db) as store:
            store.create_root(cid, make_root(cid).encode())
            i = 0
            while True:
                event_id = f"loop-{os.getpid()}-{i}"
                seq, _ = append_with_retry(store, cid, event_id, f"{i} " + "x" * size)
                print(seq, event_id, flush=True)
                i += 1
    if mode == "worker":
        tag, n, go = argv[3], int(argv[4]), Path(argv[5])
        events = [f"{tag}-{i}" for i in range(n)]
        skip = False
    elif mode == "shared":
        n, go = int(argv[3]), Path(argv[4])
        events = [f"shared-{i}" for i in range(n)]
        skip = True
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    _wait_for(go)
    total = 0
    with SQLiteStore(db) as store:  # opened concurrently: may create the schema
        store.create_root(cid, make_root(cid).encode())
        for event_id in events:
            seq, races = append_with_retry(
                store, cid, event_id, event_id, skip_stored=skip, pause=0.002
            )
            total += races
            if seq is not None:
                print(seq, event_id, flush=True)
    print("races", total, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
