"""Checkpoint stores: the Store protocol (memory and SQLite alike) and SQLite durability.

No mocks: real SQLite files under tmp_path, real subprocesses (tests/helpers_store.py).
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import example_bundle, user
from helpers_store import (
    append_with_retry,
    build_chain,
    fill,
    make_record,
    make_root,
    stored_event_ids,
)
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError, CheckpointRaceError
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.history import History
from prefixlock.store.contract import MemoryStore, Store
from prefixlock.store.records import decode_chain
from prefixlock.store.sqlite import APPLICATION_ID, SCHEMA_VERSION, SQLiteStore

HELPER = Path(__file__).with_name("helpers_store.py")


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    yield s
    s.close()


def raw(path: Path) -> sqlite3.Connection:
    """A plain connection that bypasses the store (to corrupt it as a disk or person would)."""
    return sqlite3.connect(path, isolation_level=None)


def verify(store: Store, cid: str) -> list[str]:
    """Decode the whole conversation; returns its event ids."""
    stored = store.load(cid)
    assert stored is not None
    _, records, head = decode_chain(stored.root, stored.records, cid)
    assert head == stored.head
    return [r.event_id for r in records]


# -- the protocol, for every store ---------------------------------------------------


def test_load_of_unknown_conversation_is_none(store: Store) -> None:
    assert store.load("nope") is None
    assert store.conversations() == []


def test_create_root_is_idempotent_and_keeps_the_first_root(store: Store) -> None:
    first = make_root("c", "first instructions").encode()
    second = make_root("c", "a new bundle's instructions").encode()
    assert store.create_root("c", first) == first
    assert store.create_root("c", second) == first
    stored = store.load("c")
    assert stored is not None
    assert stored.root == first
    assert stored.records == ()
    assert stored.head == canonical.sha256_hex(first)


def test_append_in_order_and_load(store: Store) -> None:
    records = fill(store, "c", 5)
    stored = store.load("c")
    assert stored is not None
    assert stored.records == tuple(records)
    assert stored.head == canonical.sha256_hex(records[-1])
    assert verify(store, "c") == ["e1", "e2", "e3", "e4", "e5"]


def test_load_after(store: Store) -> None:
    records = fill(store, "c", 5)
    for after in range(7):
        stored = store.load("c", after=after)
        assert stored is not None
        assert stored.records == tuple(records[after:])
        assert stored.head == canonical.sha256_hex(records[-1])
    with pytest.raises(ValueError):
        store.load("c", after=-1)


def test_seq_race_is_refused_and_changes_nothing(store: Store) -> None:
    records = fill(store, "c", 2)
    root = store.load("c")
    assert root is not None
    # a second writer that also computed seq 2 from the same head
    rival = make_record(2, "other", "rival").encode("c", canonical.sha256_hex(records[0]))
    with pytest.raises(CheckpointRaceError, match=r"seq 2 is taken \(head is 2\)"):
        store.append("c", 2, "other", rival)
    gap = make_record(4, "gap").encode("c", canonical.sha256_hex(records[1]))
    with pytest.raises(CheckpointRaceError, match="seq 4 does not follow the head 2"):
        store.append("c", 4, "gap", gap)
    with pytest.raises(CheckpointRaceError, match="seq 0 is taken"):
        store.append("c", 0, "zero", gap)
    assert store.load("c") == root
    assert verify(store, "c") == ["e1", "e2"]


def test_duplicate_event_id_is_refused(store: Store) -> None:
    records = fill(store, "c", 2)
    again = make_record(3, "e1").encode("c", canonical.sha256_hex(records[1]))
    with pytest.raises(CheckpointRaceError, match="event 'e1' is already stored"):
        store.append("c", 3, "e1", again)
    assert verify(store, "c") == ["e1", "e2"]
    # the same event id in another conversation is fine
    fill(store, "d", 1)
    assert verify(store, "d") == ["e1"]


def test_refused_append_leaves_the_head_where_it_was(store: Store) -> None:
    # A refused append (a taken event id, a wrong seq) moves nothing: the head, its
    # digest and the rows are as before, and the right next record then goes in.
    records = fill(store, "c", 2)
    head = canonical.sha256_hex(records[1])
    again = make_record(3, "e1").encode("c", head)
    with pytest.raises(CheckpointRaceError) as info:
        store.append("c", 3, "e1", again)
    assert str(info.value).startswith("conversation 'c': event 'e1' is already stored")
    with pytest.raises(CheckpointRaceError) as info:
        store.append("c", 4, "e4", make_record(4, "e4").encode("c", head))
    assert str(info.value) == "conversation 'c': seq 4 does not follow the head 2 (expected 3)"
    stored = store.load("c")
    assert stored is not None and stored.head == head and len(stored.records) == 2
    third = make_record(3, "e3").encode("c", head)
    assert store.append("c", 3, "e3", third).seq == 3
    assert verify(store, "c") == ["e1", "e2", "e3"]


def test_append_without_root_is_an_error_not_a_race(store: Store) -> None:
    with pytest.raises(CheckpointError, match="has no root") as info:
        store.append("ghost", 1, "e1", b"{}")
    assert not isinstance(info.value, CheckpointRaceError)


def test_conversations_sorted(store: Store) -> None:
    for cid in ["b", "a", "é", "Z", "a-2", "ä"]:
        store.create_root(cid, make_root(cid).encode())
    assert store.conversations() == sorted(["b", "a", "é", "Z", "a-2", "ä"])


def test_retry_with_right_prev_after_race(store: Store) -> None:
    fill(store, "c", 1)
    # two writers interleave: each reloads the head after losing
    for i in range(10):
        seq, _ = append_with_retry(store, "c", f"w-{i}", "t")
        assert seq == i + 2
    assert len(verify(store, "c")) == 11


# -- SQLite: schema, settings, persistence -------------------------------------------


def test_sqlite_settings_and_schema(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        assert s.pragmas() == {
            "journal_mode": "wal",
            "synchronous": 2,  # FULL
            "foreign_keys": 1,
            "user_version": SCHEMA_VERSION,
            "application_id": APPLICATION_ID,
        }
        fill(s, "c", 1)
    conn = raw(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # persistent
    unique = {
        tuple(r[2] for r in conn.execute(f"PRAGMA index_info({idx[1]!r})"))
        for idx in conn.execute("PRAGMA index_list(records)")
        if idx[2]  # unique
    }
    assert unique == {("conversation", "seq"), ("conversation", "event_id")}
    body = b"{}"
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute("INSERT INTO records VALUES ('c', 1, 'other', ?, 'x')", (body,))
    with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):
        conn.execute("INSERT INTO records VALUES ('c', 2, 'e1', ?, 'x')", (body,))
    conn.close()


def test_sqlite_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        records = fill(s, "c", 3)
    with SQLiteStore(path) as s:
        stored = s.load("c")
        assert stored is not None
        assert stored.records == tuple(records)
        assert s.integrity_check() == []


def test_sqlite_closed_store_refuses(tmp_path: Path) -> None:
    s = SQLiteStore(tmp_path / "s.db")
    s.close()
    s.close()  # idempotent
    with pytest.raises(CheckpointError, match="store is closed"):
        s.load("c")


def test_sqlite_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="unable to open"):
        SQLiteStore(tmp_path / "no" / "such" / "dir.db")


def test_sqlite_refuses_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not sqlite at all\n" * 200)
    with pytest.raises(CheckpointError, match="is not a prefixlock store: file is not a database"):
        SQLiteStore(path)


def test_sqlite_refuses_another_programs_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = raw(path)
    conn.execute("CREATE TABLE users(name TEXT)")
    conn.close()
    with pytest.raises(CheckpointError, match="is not a prefixlock store: it is another program"):
        SQLiteStore(path)


def test_sqlite_refuses_unknown_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    conn = raw(path)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    with pytest.raises(CheckpointError, match="schema version 99 is not supported"):
        SQLiteStore(path)


# -- SQLite: corruption and truncation -----------------------------------------------


def test_sqlite_truncated_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 60, text="y" * 3000)  # many pages
    assert not Path(f"{path}-wal").exists()  # close checkpointed the WAL into the file
    data = path.read_bytes()
    for cut in (len(data) // 2, len(data) - 4096, 4096 + 17, 60):
        path.write_bytes(data[:cut])
        with (
            pytest.raises(CheckpointError, match=r"store is corrupt \(database disk image is"),
            SQLiteStore(path) as s,
        ):
            s.load("c")


def test_sqlite_damaged_page_is_reported_by_integrity_check(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 60, text="y" * 3000)
    data = bytearray(path.read_bytes())
    page = len(data) // 4096 // 3
    data[4096 * page : 4096 * (page + 1)] = bytes(4096)  # a zeroed page, file size intact
    path.write_bytes(bytes(data))
    with SQLiteStore(path) as s:
        problems = s.integrity_check()
        assert problems
        assert any("corrupt" in p or "integrity_check" in p for p in problems), problems
        with pytest.raises(CheckpointError, match="store is corrupt"):
            s.load("c")


def test_sqlite_bit_flip_in_record_body_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 5)
    conn = raw(path)
    (body,) = conn.execute("SELECT body FROM records WHERE seq = 3").fetchone()
    flipped = bytearray(body)
    flipped[40] ^= 0x04
    conn.execute("UPDATE records SET body = ? WHERE seq = 3", (bytes(flipped),))
    conn.close()
    with SQLiteStore(path) as s:
        with pytest.raises(
            CheckpointError,
            match=r"conversation 'c' record 3: body does not match its stored digest",
        ):
            s.load("c")
        assert s.load("c", after=3) is not None  # rows after the damage still load
        problems = s.integrity_check()
        assert len(problems) == 1
        assert "conversation 'c' record 3: body does not match" in problems[0]


def test_sqlite_bit_flip_in_the_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 4, text="needle-in-the-file")
    data = bytearray(path.read_bytes())
    offset = data.index(b"needle-in-the-file 2")
    data[offset + 3] ^= 0x01  # 'd' -> 'e' inside record 2's message text
    path.write_bytes(bytes(data))
    with (
        SQLiteStore(path) as s,
        pytest.raises(CheckpointError, match="conversation 'c' record 2: body does not match"),
    ):
        s.load("c")


def forged_store(tmp_path: Path) -> Path:
    """A store of records e1..e4 whose record 2 has a changed byte and, beside it, the
    digest of the changed bytes: the row is consistent, only the chain tells."""
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 4)
    conn = raw(path)
    (body,) = conn.execute("SELECT body FROM records WHERE seq = 2").fetchone()
    forged = body.replace(b"hello 2", b"hellO 2")
    conn.execute(
        "UPDATE records SET body = ?, digest = ? WHERE seq = 2",
        (forged, canonical.sha256_hex(forged)),
    )
    conn.close()
    return path


def test_sqlite_flip_with_a_forged_digest_is_caught_by_the_chain(tmp_path: Path) -> None:
    path = forged_store(tmp_path)
    with SQLiteStore(path) as s:
        stored = s.load("c")  # row digests agree; the decoded chain does not
        assert stored is not None
        with pytest.raises(CheckpointError, match="record 2: message event:e2: content digest"):
            decode_chain(stored.root, stored.records, "c")
        (problem,) = s.integrity_check()
        assert problem.startswith("conversation 'c' record 2:")


def test_hydration_forged_middle_record_names_its_message(tmp_path: Path) -> None:
    """The chain vouches for record 2 (its digest is record 3's prev), so its messages
    are not hashed on the way; the break at record 3 is explained by record 2 itself."""
    path = forged_store(tmp_path)
    with SQLiteStore(path) as s:
        stored = s.load("c")
        assert stored is not None
        history_error = "conversation 'c' record 2: message event:e2: content digest mismatch"
        with pytest.raises(CheckpointError, match=history_error):
            History.hydrate(stored)


def test_catch_up_applies_no_record_the_chain_then_refuses(tmp_path: Path) -> None:
    """A warm reader catching up over a forged middle record (its row digest matches its
    changed bytes) is refused naming that record, and its history stays where it was:
    records are applied only once the chain has vouched for them."""
    path = tmp_path / "s.db"
    bundle = example_bundle()
    with SQLiteStore(path) as store:
        reader = Conversation.open(store, bundle, "conv-1")
        reader.handle(user("u1"))
        writer = Conversation.open(store, bundle, "conv-1")
        writer.assistant("first answer")
        writer.handle(user("u2"))
        writer.assistant("second answer")
        conn = raw(path)
        (body,) = conn.execute("SELECT body FROM records WHERE seq = 2").fetchone()
        forged = body.replace(b"first answer", b"first ANSWER")
        assert forged != body
        conn.execute(
            "UPDATE records SET body = ?, digest = ? WHERE seq = 2",
            (forged, canonical.sha256_hex(forged)),
        )
        conn.close()
        with pytest.raises(CheckpointError, match="record 2: message assistant:1: content digest"):
            reader.catch_up()
        assert reader.history.seq == 1
        assert [m.text for m in reader.request().messages][-1].endswith("</user_query>\n")


def test_hydration_forged_last_record_is_caught_by_its_own_digests(tmp_path: Path) -> None:
    """The last record has no next record to vouch for it, and a store may derive its
    head from the records (MemoryStore does): its messages are hashed."""
    store = MemoryStore()
    records = fill(store, "c", 3)
    store._records["c"][2] = ("e3", records[2].replace(b"hello 3", b"hellO 3"))
    stored = store.load("c")
    assert stored is not None
    with pytest.raises(CheckpointError, match="record 3: message event:e3: content digest"):
        History.hydrate(stored)


def test_hydration_hashes_each_stored_byte_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each record is hashed once, by the store (its row digest: the chain's link);
    hydration hashes message contents again only in the last record."""
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        records = fill(s, "c", 6)
    hashed: list[int] = []
    real = hashlib.sha256

    def counting(data: bytes = b"") -> Any:
        hashed.append(len(data))
        hasher = real(data)
        update = hasher.update

        class Counting:
            def update(self, more: Any) -> None:
                hashed.append(len(more))
                update(more)

            def hexdigest(self) -> str:
                return hasher.hexdigest()

        return Counting()

    with SQLiteStore(path) as s:
        stored = s.load("c")
        assert stored is not None
        monkeypatch.setattr(hashlib, "sha256", counting)
        history = History.hydrate(stored)
    assert history.seq == 6
    # The root (the chain's start), the conversation id (the cache key) and the last
    # record's message; the store already hashed every record while loading. Hashing
    # every message again would be more than the records but the first.
    assert hashed[0] == len(stored.root)
    assert 0 < sum(hashed[1:]) < len(records[-1])
    assert sum(len(r) for r in records[1:]) > len(records[-1]) * 4


def test_sqlite_deleted_tail_row_is_truncation(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 5)
    conn = raw(path)
    conn.execute("DELETE FROM records WHERE seq = 5")
    conn.close()
    with SQLiteStore(path) as s:
        message = (
            r"conversation 'c': truncated: the head is record 5 but the last stored record is 4"
        )
        with pytest.raises(CheckpointError, match=message):
            s.load("c")
        with pytest.raises(CheckpointError, match="truncated"):
            s.load("c", after=4)
        assert len(s.integrity_check()) == 1


def test_sqlite_append_to_a_root_without_head_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        records = fill(s, "c", 1)
    conn = raw(path)
    conn.execute("DELETE FROM heads WHERE conversation = 'c'")
    conn.close()
    with SQLiteStore(path) as s:
        record = make_record(2, "e2").encode("c", canonical.sha256_hex(records[0]))
        with pytest.raises(CheckpointError) as info:
            s.append("c", 2, "e2", record)
        assert str(info.value) == "conversation 'c': the store has its root but no head"
        assert not isinstance(info.value, CheckpointRaceError)
        assert s._conn is not None
        assert s._conn.execute("SELECT count(*) FROM records").fetchone()[0] == 1


def test_sqlite_head_past_last_row_is_truncation(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 3)
    conn = raw(path)
    conn.execute("UPDATE heads SET seq = 4")
    conn.close()
    with (
        SQLiteStore(path) as s,
        pytest.raises(CheckpointError, match="truncated: the head is record 4 but"),
    ):
        s.load("c")


def test_sqlite_head_digest_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 3)
    conn = raw(path)
    conn.execute("UPDATE heads SET digest = 'sha256:00'")
    conn.close()
    with SQLiteStore(path) as s:
        for after in (0, 3):
            with pytest.raises(CheckpointError, match="head digest does not match record 3"):
                s.load("c", after=after)


def test_sqlite_gap_and_orphans(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 4)
        fill(s, "d", 1)
    conn = raw(path)  # foreign keys are off on a plain connection
    conn.execute("DELETE FROM records WHERE conversation = 'c' AND seq = 2")
    conn.execute("DELETE FROM roots WHERE conversation = 'd'")
    conn.close()
    with SQLiteStore(path) as s:
        with pytest.raises(CheckpointError, match="conversation 'c': record 2 is missing"):
            s.load("c")
        with pytest.raises(
            CheckpointError, match="conversation 'd': has records or a head but no root"
        ):
            s.load("d")
        problems = s.integrity_check()
    assert any(p.startswith("records row") and "missing roots row" in p for p in problems)
    assert any(p.startswith("heads row") and "missing roots row" in p for p in problems)
    assert any(p.startswith("conversation 'c': record 2 is missing") for p in problems)
    assert any(p.startswith("conversation 'd': has records") for p in problems)


def test_sqlite_event_id_column_must_match_the_record(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        fill(s, "c", 2)
    conn = raw(path)
    conn.execute("UPDATE records SET event_id = 'forged' WHERE seq = 2")
    conn.close()
    with SQLiteStore(path) as s:
        assert s.integrity_check() == [
            "conversation 'c' record 2: event id column 'forged' does not match the "
            "record's event id 'e2'"
        ]


def test_sqlite_integrity_check_good_store(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as s:
        assert s.integrity_check() == []
        fill(s, "a", 3)
        fill(s, "b", 0)
        assert s.integrity_check() == []


# -- SQLite: concurrency and crashes --------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HELPER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str]) -> list[str]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return out.splitlines()


def test_sqlite_two_processes_appending_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    db, go, n = tmp_path / "s.db", tmp_path / "go", 40
    # both processes open a store file that does not exist yet: schema creation races too
    procs = [_spawn("worker", str(db), "c", tag, str(n), str(go)) for tag in ("A", "B", "C")]
    go.touch()
    outputs = [_finish(p) for p in procs]
    with SQLiteStore(db) as s:
        events = verify(s, "c")
        assert s.integrity_check() == []
    assert len(events) == 3 * n
    assert sorted(events) == sorted(f"{t}-{i}" for t in "ABC" for i in range(n))
    races = sum(int(line.split()[1]) for out in outputs for line in out if line.startswith("races"))
    assert races > 0  # the writers really did race (each pauses between head and append)
    for tag, lines in zip("ABC", outputs, strict=True):
        assert [e for e in events if e.startswith(tag)] == [f"{tag}-{i}" for i in range(n)]
        committed = [line.split() for line in lines if not line.startswith("races")]
        for seq, event_id in committed:  # what each process saw committed is stored there
            assert events[int(seq) - 1] == event_id


def test_sqlite_same_events_from_two_processes_stored_once(tmp_path: Path) -> None:
    db, go, n = tmp_path / "s.db", tmp_path / "go", 30
    with SQLiteStore(db) as s:
        s.create_root("c", make_root("c").encode())
    procs = [_spawn("shared", str(db), "c", str(n), str(go)) for _ in range(2)]
    go.touch()
    outputs = [_finish(p) for p in procs]
    with SQLiteStore(db) as s:
        events = verify(s, "c")
    assert events == [f"shared-{i}" for i in range(n)]
    appended = [line.split()[1] for lines in outputs for line in lines if line[0].isdigit()]
    assert sorted(appended) == sorted(events)  # each event appended by exactly one process


def test_sqlite_cross_process_duplicate_event_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as s:
        records = fill(s, "c", 1)
    script = (
        "import sys\n"
        "from prefixlock.store.sqlite import SQLiteStore\n"
        "from prefixlock.core.errors import CheckpointRaceError\n"
        "s = SQLiteStore(sys.argv[1])\n"
        "try:\n"
        "    s.append('c', 2, 'e1', sys.stdin.buffer.read())\n"
        "except CheckpointRaceError as err:\n"
        "    print('race:', err)\n"
    )
    again = make_record(2, "e1").encode("c", canonical.sha256_hex(records[0]))
    out = subprocess.run(
        [sys.executable, "-c", script, str(db)], input=again, capture_output=True, check=True
    )
    assert (
        out.stdout.decode().strip()
        == "race: conversation 'c': event 'e1' is already stored (record 1)"
    )


def test_sqlite_kill_mid_append_loses_no_committed_record(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    printed: list[tuple[int, str]] = []
    for round_ in range(3):
        proc = _spawn("loop", str(db), "c", str(20_000 + 1000 * round_))
        assert proc.stdout is not None
        target = len(printed) + 15 + 7 * round_
        while len(printed) < target:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            number, event_id = line.split()
            printed.append((int(number), event_id))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()
    with SQLiteStore(db) as s:
        events = verify(s, "c")  # hot WAL recovered; the chain verifies
        assert s.integrity_check() == []
    for seq, event_id in printed:
        assert events[seq - 1] == event_id
    seqs = [seq for seq, _ in printed]
    assert seqs == sorted(set(seqs))
    assert len(events) >= len(printed)


def test_sqlite_threads_share_one_store(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with SQLiteStore(tmp_path / "s.db") as s:
        s.create_root("c", make_root("c").encode())

        def work(tag: str) -> None:
            try:
                for i in range(15):
                    append_with_retry(s, "c", f"{tag}-{i}", "t")
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        threads = [threading.Thread(target=work, args=(t,)) for t in "WXYZ"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert sorted(stored_event_ids(s, "c")) == sorted(
            f"{t}-{i}" for t in "WXYZ" for i in range(15)
        )
        assert verify(s, "c")


def test_build_chain_helper_is_consistent() -> None:
    root, records = build_chain("c", [make_record(1, "a"), make_record(2, "b")])
    _, decoded, _ = decode_chain(root, records, "c")
    assert [r.event_id for r in decoded] == ["a", "b"]
