"""The store contract, one suite over MemoryStore, SQLite and PostgreSQL.

Every store appends atomically, keeps (conversation, seq) and (conversation, event id)
unique, refuses a writer that lost a race with the same typed error, serves catch-up reads
after a known seq and round-trips JSONL export/import. The durable stores also detect a
truncated tail, a gap, a flipped bit and a forged head. PostgreSQL runs against a database
of its own (tests/conftest.py); without a server those cases skip.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from helpers_store import append_with_retry, fill, make_record, make_root, stored_event_ids
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError, CheckpointRaceError
from prefixlock.store.contract import Head, MemoryStore, Store
from prefixlock.store.jsonl import export_jsonl, import_jsonl
from prefixlock.store.records import decode_chain
from prefixlock.store.urls import open_store

KINDS = ["memory", "sqlite", "postgres"]
DURABLE = ["sqlite", "postgres"]


@attrs.frozen
class Backend:
    """One store kind: how to open another handle on the same data, and raw SQL."""

    kind: str
    url: str  # "" for memory
    opened: list[Store]

    def open(self) -> Store:
        if self.kind == "memory":
            if not self.opened:
                self.opened.append(MemoryStore())
            return self.opened[0]  # one process: every handle is the same dict
        store = open_store(self.url)
        self.opened.append(store)
        return store

    def table(self, name: str) -> str:
        return f"prefixlock_{name}" if self.kind == "postgres" else name

    def sql(self, statement: str) -> None:
        """Run ``statement`` behind the store's back, as a disk fault or a person would."""
        if self.kind == "sqlite":
            import sqlite3

            conn = sqlite3.connect(self.url, isolation_level=None)
            conn.execute(statement)
            conn.close()
        elif self.kind == "postgres":
            import psycopg

            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute(statement)  # type: ignore[arg-type]
        else:  # pragma: no cover - the durable-only tests never ask
            raise AssertionError("the memory store has no SQL")


def _backend(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if kind == "memory":
        url = ""
    elif kind == "sqlite":
        url = str(tmp_path / "s.db")
    else:
        url = request.getfixturevalue("postgres_url")
    backend = Backend(kind, url, [])
    yield backend
    for store in backend.opened:
        store.close()


@pytest.fixture(params=KINDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from _backend(request.param, request, tmp_path)


@pytest.fixture(params=DURABLE)
def durable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from _backend(request.param, request, tmp_path)


def verify(store: Store, cid: str) -> list[str]:
    """Decode the whole conversation; returns its event ids."""
    stored = store.load(cid)
    assert stored is not None
    _, records, head = decode_chain(stored.root, stored.records, cid)
    assert head == stored.head
    return [r.event_id for r in records]


# -- appends, duplicates, races --------------------------------------------------------


def test_unknown_conversation_loads_as_none(backend: Backend) -> None:
    store = backend.open()
    assert store.load("nope") is None
    assert store.conversations() == []


def test_create_root_keeps_the_first_root(backend: Backend) -> None:
    store = backend.open()
    first = make_root("c", "first").encode()
    assert store.create_root("c", first) == first
    assert store.create_root("c", make_root("c", "second").encode()) == first
    stored = store.load("c")
    assert stored is not None
    assert (stored.root, stored.records, stored.head) == (first, (), canonical.sha256_hex(first))


def test_appends_load_in_order_and_after_any_seq(backend: Backend) -> None:
    store = backend.open()
    records = fill(store, "c", 5)
    assert verify(store, "c") == ["e1", "e2", "e3", "e4", "e5"]
    for after in range(7):
        stored = store.load("c", after=after)
        assert stored is not None
        assert stored.records == tuple(records[after:])
        assert stored.head == canonical.sha256_hex(records[-1])
    with pytest.raises(ValueError, match="after must be >= 0, not -1"):
        store.load("c", after=-1)


def test_seq_conflicts_are_races_and_change_nothing(backend: Backend) -> None:
    store = backend.open()
    records = fill(store, "c", 2)
    before = store.load("c")
    rival = make_record(2, "other").encode("c", canonical.sha256_hex(records[0]))
    with pytest.raises(CheckpointRaceError) as info:
        store.append("c", 2, "other", rival)
    assert str(info.value) == "conversation 'c': seq 2 is taken (head is 2)"
    with pytest.raises(CheckpointRaceError) as info:
        store.append("c", 4, "gap", rival)
    assert str(info.value) == ("conversation 'c': seq 4 does not follow the head 2 (expected 3)")
    assert store.load("c") == before


def test_duplicate_event_id_is_a_race_per_conversation(backend: Backend) -> None:
    store = backend.open()
    records = fill(store, "c", 2)
    again = make_record(3, "e1").encode("c", canonical.sha256_hex(records[1]))
    with pytest.raises(CheckpointRaceError, match=r"^conversation 'c': event 'e1' is already"):
        store.append("c", 3, "e1", again)
    assert verify(store, "c") == ["e1", "e2"]
    fill(store, "d", 1)  # the same event id in another conversation is fine
    assert verify(store, "d") == ["e1"]


def test_append_without_root_is_an_error_not_a_race(backend: Backend) -> None:
    store = backend.open()
    with pytest.raises(CheckpointError) as info:
        store.append("ghost", 1, "e1", b"{}")
    assert str(info.value) == "conversation 'ghost' has no root"
    assert not isinstance(info.value, CheckpointRaceError)


def test_conversations_are_sorted_by_code_point(backend: Backend) -> None:
    store = backend.open()
    ids = ["b", "a", "é", "Z", "a-2", "ä"]
    for cid in ids:
        store.create_root(cid, make_root(cid).encode())
    assert store.conversations() == sorted(ids)


def test_loser_of_a_race_catches_up_after_its_head_and_wins(backend: Backend) -> None:
    a, b = backend.open(), backend.open()
    records = fill(a, "c", 2)
    seen_by_b = b.load("c")
    assert seen_by_b is not None and len(seen_by_b.records) == 2
    head = canonical.sha256_hex(records[1])
    a.append("c", 3, "from-a", make_record(3, "from-a").encode("c", head))
    mine = make_record(3, "from-b").encode("c", head)
    with pytest.raises(CheckpointRaceError, match=r"seq 3 is taken \(head is 3\)"):
        b.append("c", 3, "from-b", mine)
    caught_up = b.load("c", after=2)  # only what b has not seen
    assert caught_up is not None and len(caught_up.records) == 1
    retry = make_record(4, "from-b").encode("c", canonical.sha256_hex(caught_up.records[0]))
    b.append("c", 4, "from-b", retry)
    assert verify(a, "c") == ["e1", "e2", "from-a", "from-b"]


def test_two_writer_threads_lose_and_duplicate_nothing(durable: Backend) -> None:
    setup = durable.open()
    setup.create_root("c", make_root("c").encode())
    errors: list[BaseException] = []

    def work(tag: str) -> None:
        store = durable.open()  # a connection of its own, as another server has
        try:
            for i in range(20):
                append_with_retry(store, "c", f"{tag}-{i}", "t")
                append_with_retry(store, "c", f"shared-{i}", "s", skip_stored=True)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(t,)) for t in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    events = verify(setup, "c")
    expected = [f"{t}-{i}" for t in "AB" for i in range(20)] + [f"shared-{i}" for i in range(20)]
    assert sorted(events) == sorted(expected)
    for tag in ("A-", "B-", "shared-"):
        mine = [e for e in events if e.startswith(tag)]
        assert mine == sorted(mine, key=lambda e: int(e.rpartition("-")[2]))


# -- durability, truncation, corruption ---------------------------------------------------


def test_records_persist_across_reopen(durable: Backend) -> None:
    store = durable.open()
    records = fill(store, "c", 3)
    store.close()
    again = durable.open()
    stored = again.load("c")
    assert stored is not None and stored.records == tuple(records)
    assert again.integrity_check() == []  # type: ignore[attr-defined]


def test_deleted_tail_row_is_truncation(durable: Backend) -> None:
    store = durable.open()
    fill(store, "c", 5)
    durable.sql(f"DELETE FROM {durable.table('records')} WHERE seq = 5")
    message = "conversation 'c': truncated: the head is record 5 but the last stored record is 4"
    for after in (0, 4):
        with pytest.raises(CheckpointError) as info:
            store.load("c", after=after)
        assert str(info.value) == message
    assert store.integrity_check() == [message]  # type: ignore[attr-defined]


def test_head_digest_mismatch_is_detected(durable: Backend) -> None:
    store = durable.open()
    records = fill(store, "c", 3)
    durable.sql(f"UPDATE {durable.table('heads')} SET digest = 'sha256:00'")
    for after in (0, 3):
        with pytest.raises(CheckpointError) as info:
            store.load("c", after=after)
        assert str(info.value) == (
            "conversation 'c': the head digest does not match record 3 "
            f"(head sha256:00, record {canonical.sha256_hex(records[2])})"
        )


def test_gap_in_seq_is_detected(durable: Backend) -> None:
    store = durable.open()
    fill(store, "c", 4)
    durable.sql(f"DELETE FROM {durable.table('records')} WHERE seq = 2")
    with pytest.raises(CheckpointError) as info:
        store.load("c")
    assert str(info.value) == (
        "conversation 'c': record 2 is missing (gap in seq; 3 records stored, last is 4)"
    )


def test_flipped_bit_in_a_record_is_detected(durable: Backend) -> None:
    store = durable.open()
    fill(store, "c", 4)
    records = durable.table("records")
    flip = (
        f"UPDATE {records} SET body = overlay(body placing 'X' from 41 for 1) WHERE seq = 3"
        if durable.kind == "postgres"
        else f"UPDATE {records} SET body = CAST(substr(body, 1, 40) || 'X' || "
        f"substr(body, 42) AS BLOB) WHERE seq = 3"
    )
    durable.sql(flip)
    with pytest.raises(CheckpointError, match=r"^conversation 'c' record 3: body does not match"):
        store.load("c")
    assert store.load("c", after=3) is not None  # rows after the damage still load
    (problem,) = store.integrity_check()  # type: ignore[attr-defined]
    assert problem.startswith("conversation 'c' record 3: body does not match its stored digest")


def test_event_id_column_must_match_the_record(durable: Backend) -> None:
    store = durable.open()
    fill(store, "c", 2)
    durable.sql(f"UPDATE {durable.table('records')} SET event_id = 'forged' WHERE seq = 2")
    assert store.integrity_check() == [  # type: ignore[attr-defined]
        "conversation 'c' record 2: event id column 'forged' does not match the "
        "record's event id 'e2'"
    ]


# -- export / import -------------------------------------------------------------------


def _exported(store: Store, cid: str) -> bytes:
    out = io.BytesIO()
    export_jsonl(store, cid, out)
    return out.getvalue()


def test_export_import_round_trip_between_every_pair(backend: Backend) -> None:
    source = MemoryStore()
    fill(source, "c", 6, text="round trip é ✓")
    data = _exported(source, "c")
    store = backend.open()
    assert import_jsonl(io.BytesIO(data), store) == "c"
    assert _exported(store, "c") == data
    assert import_jsonl(io.BytesIO(data), store) == "c"  # again: nothing to add
    assert stored_event_ids(store, "c") == [f"e{i}" for i in range(1, 7)]


def test_interrupted_import_resumes_and_a_different_history_is_refused(
    backend: Backend,
) -> None:
    source = MemoryStore()
    records = fill(source, "c", 4)
    data = _exported(source, "c")
    store = backend.open()
    stored_root = source.load("c")
    assert stored_root is not None
    store.create_root("c", stored_root.root)
    store.append("c", 1, "e1", records[0])  # an import cut after record 1
    import_jsonl(io.BytesIO(data), store)
    assert _exported(store, "c") == data
    other = MemoryStore()
    fill(other, "c", 5, text="other")
    with pytest.raises(CheckpointError, match="its record 1 differs from the file's"):
        import_jsonl(io.BytesIO(_exported(other, "c")), store)


# -- warm readers: load_after ------------------------------------------------------------


def test_load_after_returns_the_head_and_only_the_new_records(backend: Backend) -> None:
    store = backend.open()
    assert store.load_after("nope", 0) is None
    records = fill(store, "c", 5)
    digests = [canonical.sha256_hex(r) for r in records]
    for seq in range(6):
        caught = store.load_after("c", seq)
        assert caught is not None
        assert caught.head == Head(5, digests[-1])
        assert caught.records == tuple(records[seq:])
        assert caught.digests == tuple(digests[seq:])
    with pytest.raises(CheckpointError) as info:
        store.load_after("c", 6)
    assert str(info.value) == (
        "conversation 'c' is behind: its head is record 5, but the reader holds record 6: "
        "the store lost committed records"
    )
    with pytest.raises(ValueError, match="seq must be >= 0, not -1"):
        store.load_after("c", -1)
    store.create_root("empty", make_root("empty").encode())
    caught = store.load_after("empty", 0)
    assert caught is not None and caught.records == () and caught.head.seq == 0


def test_load_after_detects_truncation_gaps_and_flipped_bits(durable: Backend) -> None:
    store = durable.open()
    fill(store, "c", 5)
    records = durable.table("records")
    durable.sql(f"DELETE FROM {records} WHERE seq = 5")
    with pytest.raises(CheckpointError) as info:
        store.load_after("c", 3)
    assert str(info.value) == (
        "conversation 'c': truncated: the head is record 5 but the last stored record is 4"
    )
    durable.sql(f"DELETE FROM {records} WHERE seq = 3")
    with pytest.raises(CheckpointError) as info:
        store.load_after("c", 1)
    assert str(info.value) == "conversation 'c': record 3 is missing (gap in seq)"
    fill(store, "d", 3)
    flip = (
        f"UPDATE {records} SET body = overlay(body placing 'X' from 41 for 1) "
        "WHERE conversation = 'd' AND seq = 3"
        if durable.kind == "postgres"
        else f"UPDATE {records} SET body = CAST(substr(body, 1, 40) || 'X' || "
        "substr(body, 42) AS BLOB) WHERE conversation = 'd' AND seq = 3"
    )
    durable.sql(flip)
    with pytest.raises(CheckpointError, match=r"^conversation 'd' record 3: body does not match"):
        store.load_after("d", 2)


def test_catch_up_reads_the_same_bytes_at_any_history_length(durable: Backend) -> None:
    """A warm reader's catch-up reads only the new records: not the root, not the past."""
    writer, reader = durable.open(), durable.open()
    read: list[int] = []
    for cid, length in (("short", 10), ("long", 300)):
        records = fill(writer, cid, length)
        before = reader.bytes_read  # type: ignore[attr-defined]
        caught = reader.load_after(cid, length - 1)
        assert caught is not None and caught.records == (records[-1],)
        read.append(reader.bytes_read - before)  # type: ignore[attr-defined]
        assert read[-1] == len(records[-1])
        before = reader.bytes_read  # type: ignore[attr-defined]
        assert reader.load_after(cid, length) is not None  # nothing new: nothing read
        assert reader.bytes_read == before  # type: ignore[attr-defined]
    assert abs(read[0] - read[1]) <= 4  # the same record size, a few digits longer
