"""The embedded default checkpoint store: one SQLite file, stdlib :mod:`sqlite3` only.

Schema (version :data:`SCHEMA_VERSION`, kept in ``PRAGMA user_version``; the file is marked
with ``PRAGMA application_id`` = :data:`APPLICATION_ID` so that another program's database
is refused rather than written into)::

    roots(conversation TEXT PRIMARY KEY, body BLOB NOT NULL, digest TEXT NOT NULL)
    records(conversation TEXT NOT NULL REFERENCES roots, seq INTEGER NOT NULL,
            event_id TEXT NOT NULL, body BLOB NOT NULL, digest TEXT NOT NULL,
            PRIMARY KEY (conversation, seq), UNIQUE (conversation, event_id))
    heads(conversation TEXT PRIMARY KEY REFERENCES roots, seq INTEGER NOT NULL,
          digest TEXT NOT NULL)

``digest`` is ``sha256:<hex>`` of ``body``. ``heads`` holds the last seq and its digest
(seq 0 and the root's digest before the first record); it is written in the same
transaction as the record, so a deleted tail row or a head pointing past the last row is
detected as truncation.

Concurrency: every ``append`` is one ``BEGIN IMMEDIATE`` transaction that moves the head
from ``seq - 1`` to ``seq`` (nothing matches unless ``seq == head + 1``) and inserts the
record (the keys refuse a taken seq or event id); a refusal rolls both back. Two writers
(threads, processes) racing on one conversation cannot both append the same seq or the
same event id; the loser gets :class:`~prefixlock.core.errors.CheckpointRaceError` and nothing of
its attempt is visible. Reads run in one (deferred) transaction, so a reader sees a
consistent snapshot of head and rows while writers carry on (WAL).

Durability: ``journal_mode=WAL`` with ``synchronous=FULL``. Under WAL, ``NORMAL`` already
survives a killed *process* (a commit is in the WAL file in the OS page cache), but a
power loss or kernel crash can roll back the last commits, because the WAL is only fsynced
at checkpoints. ``FULL`` fsyncs the WAL on every commit, so once :meth:`SQLiteStore.append`
returns the record survives a power loss too (as far as the disk honours fsync). The cost
is one fsync per record, negligible next to the model call each record stands for; the
promise "a checkpoint store never loses a committed record" is worth it.

Checkpoint policy, and the ``-wal`` file: a commit lives in ``<db>-wal`` until SQLite's
automatic checkpoint (``wal_autocheckpoint``, 1000 pages) or :meth:`SQLiteStore.close`
copies it into the main file; prefixlock does not force a checkpoint per append (that
would double the fsyncs for no durability gain). So **the -wal file is part of the
database**: back up or copy the two together (or use SQLite's backup API / ``VACUUM
INTO``), never delete it, never copy the main file alone while a connection is open.
Without it -- or with it truncated or damaged, which SQLite's frame checksums turn into
"ignore the frames from there on" -- the database opens cleanly at an *older* state, and
no check of the file alone can notice. Hence :meth:`SQLiteStore.append` returns the new
:class:`~prefixlock.store.contract.Head`, and ``Conversation.open(..., expect_head=...)``
and ``prefixlock integrity --expect-head SEQ:DIGEST`` refuse a store that is behind what
the caller was told.

The hash chain (each record names its predecessor's digest; ``heads`` names the last)
detects corruption and truncation, not tampering: it is unkeyed, so whoever can write the
file can also recompute every digest.

Errors: every :class:`sqlite3.Error` becomes a :class:`~prefixlock.core.errors.CheckpointError`
naming the file and what was being done; a file that is not a database says so.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ..core import canonical
from ..core.errors import CheckpointError, CheckpointRaceError
from .checks import check_conversation
from .contract import (
    CatchUp,
    Head,
    StoredConversation,
    event_taken,
    missing_head,
    seq_conflict,
    verified_catch_up,
)

#: The SQLite library this Python links (``sqlite3.sqlite_version``).
SQLITE_VERSION = sqlite3.sqlite_version

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "SQLITE_VERSION",
    "DurableFloor",
    "SQLiteStore",
    "SchemaFloor",
]

#: ``PRAGMA user_version`` of the schema this module reads and writes.
SCHEMA_VERSION = 1
#: ``PRAGMA application_id``: "PFLK", marks a file as a prefixlock store.
APPLICATION_ID = 0x50464C4B

_SCHEMA = """
CREATE TABLE roots (
    conversation TEXT PRIMARY KEY,
    body BLOB NOT NULL,
    digest TEXT NOT NULL
);
CREATE TABLE records (
    conversation TEXT NOT NULL REFERENCES roots (conversation),
    seq INTEGER NOT NULL CHECK (seq >= 1),
    event_id TEXT NOT NULL,
    body BLOB NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (conversation, seq),
    UNIQUE (conversation, event_id)
);
CREATE TABLE heads (
    conversation TEXT PRIMARY KEY REFERENCES roots (conversation),
    seq INTEGER NOT NULL CHECK (seq >= 0),
    digest TEXT NOT NULL
);
"""

#: The two statements of an append (:meth:`SQLiteStore.append`, and
#: :class:`SchemaFloor`, which times them bare): the head moves from ``seq - 1`` only...
_MOVE_HEAD = "UPDATE heads SET seq = ?, digest = ? WHERE conversation = ? AND seq = ?"
#: ...and the record goes in under its two keys (a taken seq or event id fails).
_INSERT_RECORD = (
    "INSERT INTO records (conversation, seq, event_id, body, digest) VALUES (?, ?, ?, ?, ?)"
)

T = TypeVar("T")


class SQLiteStore:
    """A :class:`~prefixlock.store.contract.Store` in one SQLite file (created if missing).

    One connection per store object, guarded by a lock, so a store may be shared by
    threads (not across ``fork``: open the store in the child). Use it as a context
    manager or call :meth:`close`.
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0, read_only: bool = False) -> None:
        self.path = Path(path)
        self.timeout = timeout
        #: Opened with ``mode=ro`` (:meth:`_connect`): never writes, creates nothing.
        self.read_only = read_only
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        #: the schema version this store holds (:data:`SCHEMA_VERSION`)
        self.schema_version = SCHEMA_VERSION
        #: True if this open created the schema (the file was empty)
        self.created_schema = False
        #: root and record body bytes read from the file so far (a figure)
        self.bytes_read = 0
        if read_only:
            self._conn = self._open_read_only()
            return
        try:
            conn = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as err:
            raise self._error(err, "opening the store") from None
        try:
            self._conn = conn
            self._setup(conn)
        except BaseException:
            self._conn = None
            conn.close()
            raise

    def _connect(self, query: str) -> sqlite3.Connection:
        uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}?{query}"
        return sqlite3.connect(
            uri, uri=True, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )

    def _open_read_only(self) -> sqlite3.Connection:
        """A connection that cannot write (``inspect``, ``integrity``, ``export``), so a
        read-only copy of a store opens (issue 43).

        A WAL database needs its ``-shm`` file even to be read: SQLite creates it, or
        cannot in a read-only folder ("attempt to write a readonly database"; see
        https://www.sqlite.org/wal.html#readonly). Then no writer can be at work either
        (a writer needs that file too), so the file is read as ``immutable`` -- unless
        a ``-wal`` file holds records not yet in the database, which that would skip.
        """
        conn: sqlite3.Connection | None = None
        try:
            conn = self._connect("mode=ro")
            try:
                self._conn = conn
                if self._run("DEFERRED", "reading the schema version", self._check_schema):
                    return conn
                raise CheckpointError(f"{self.path} is not a prefixlock store: it is empty")
            except CheckpointError as err:
                if "readonly database" not in str(err) and "unable to open" not in str(err):
                    raise
                conn.close()
                wal = Path(f"{self.path}-wal")
                if wal.exists() and wal.stat().st_size > 0:
                    raise CheckpointError(
                        f"{self.path}: cannot read a read-only store whose {wal.name} holds "
                        "records not yet checkpointed (open it once where it is writable)"
                    ) from None
                conn = self._connect("mode=ro&immutable=1")
                self._conn = conn
                if self._run("DEFERRED", "reading the schema version", self._check_schema):
                    return conn
                raise CheckpointError(
                    f"{self.path} is not a prefixlock store: it is empty"
                ) from None
        except sqlite3.Error as err:
            raise self._error(err, "opening the store") from None
        except BaseException:
            self._conn = None
            if conn is not None:
                conn.close()
            raise

    # -- connection and transactions ------------------------------------------------

    def _setup(self, conn: sqlite3.Connection) -> None:
        try:
            mode = self._enable_wal(conn)
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as err:
            raise self._error(err, "opening the store") from None
        if mode != "wal":
            raise CheckpointError(f"{self.path}: could not enable WAL mode (journal_mode={mode})")
        if self._run("DEFERRED", "reading the schema version", self._check_schema):
            return
        self._run("IMMEDIATE", "creating the schema", self._create_schema)

    def _enable_wal(self, conn: sqlite3.Connection) -> str:
        """Switch the file to WAL (persistent), retrying while another opener holds it.

        Changing the journal mode needs an exclusive lock and SQLite reports a competing
        opener as SQLITE_BUSY at once, without the busy timeout, so two processes opening
        a new store together would fail; retry until ``timeout`` instead.
        """
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
                if mode == "wal":
                    return mode
                return str(conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
            except sqlite3.OperationalError as err:
                busy = getattr(err, "sqlite_errorname", "").startswith("SQLITE_BUSY")
                if not busy or time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _check_schema(self, conn: sqlite3.Connection) -> bool:
        """True if the file holds our schema; False if it is empty (to be created)."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if version == 0 and app == 0 and tables == 0:
            return False
        if app != APPLICATION_ID:
            raise CheckpointError(
                f"{self.path} is not a prefixlock store: it is another program's SQLite "
                f"database (application_id={app}, {tables} schema objects)"
            )
        if version != SCHEMA_VERSION:
            raise CheckpointError(
                f"{self.path}: store schema version {version} is not supported; this "
                f"prefixlock reads schema version {SCHEMA_VERSION}"
            )
        return True

    def _create_schema(self, conn: sqlite3.Connection) -> None:
        if self._check_schema(conn):  # another process created it meanwhile
            return
        self.created_schema = True
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _error(self, err: sqlite3.Error, doing: str) -> CheckpointError:
        name = getattr(err, "sqlite_errorname", "")
        if name == "SQLITE_NOTADB" or "file is not a database" in str(err):
            return CheckpointError(f"{self.path} is not a prefixlock store: file is not a database")
        if name.startswith("SQLITE_CORRUPT") or "malformed" in str(err):
            return CheckpointError(
                f"{self.path}: store is corrupt ({err}) while {doing}; the file may be "
                "truncated or damaged"
            )
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return CheckpointError(
                f"{self.path}: store is busy ({err}; timeout {self.timeout}s) while {doing}"
            )
        return CheckpointError(f"{self.path}: sqlite error while {doing}: {err}")

    def _run(self, mode: str, doing: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one transaction: committed if it returns, rolled back if not."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise CheckpointError(f"{self.path}: store is closed")
            try:
                conn.execute(f"BEGIN {mode}")
            except sqlite3.Error as err:
                raise self._error(err, doing) from None
            try:
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):  # the original error matters
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._error(exc, doing) from None
                raise
            return result

    def close(self) -> None:
        """Close the connection (checkpointing the WAL). Idempotent."""
        with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                conn.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- the Store protocol -----------------------------------------------------------

    def create_root(self, conversation_id: str, root: bytes) -> bytes:
        """Store ``root`` unless the conversation exists; return the stored root."""
        data = bytes(root)
        digest = canonical.sha256_hex(data)

        def work(conn: sqlite3.Connection) -> bytes:
            row = conn.execute(
                "SELECT body, digest FROM roots WHERE conversation = ?", (conversation_id,)
            ).fetchone()
            if row is not None:
                return self._verified_root(conversation_id, row[0], row[1])
            conn.execute(
                "INSERT INTO roots (conversation, body, digest) VALUES (?, ?, ?)",
                (conversation_id, data, digest),
            )
            conn.execute(
                "INSERT INTO heads (conversation, seq, digest) VALUES (?, 0, ?)",
                (conversation_id, digest),
            )
            return data

        return self._run("IMMEDIATE", f"creating conversation {conversation_id!r}", work)

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> Head:
        """Append record ``seq`` (which must be head + 1) in one transaction."""
        data = bytes(record)
        digest = canonical.sha256_hex(data)
        where = f"conversation {conversation_id!r}"

        def work(conn: sqlite3.Connection) -> None:
            # Two statements on the way that succeeds: the head moves only from seq - 1
            # (else nothing matched), and the insert fails on a taken seq or event id.
            # Only a refusal reads more, to say why; the transaction then rolls back.
            moved = conn.execute(_MOVE_HEAD, (seq, digest, conversation_id, seq - 1)).rowcount
            if moved != 1:
                row = conn.execute(
                    "SELECT seq FROM heads WHERE conversation = ?", (conversation_id,)
                ).fetchone()
                if row is None:
                    raise missing_head(
                        conversation_id, has_root=self._has_root(conn, conversation_id)
                    )
                raise seq_conflict(conversation_id, seq, row[0])
            try:
                conn.execute(_INSERT_RECORD, (conversation_id, seq, event_id, data, digest))
            except sqlite3.IntegrityError as err:
                taken = conn.execute(
                    "SELECT seq FROM records WHERE conversation = ? AND event_id = ?",
                    (conversation_id, event_id),
                ).fetchone()
                if taken is not None:
                    raise event_taken(conversation_id, event_id, taken[0]) from None
                # A row at seq itself: the head lags the rows (a damaged store).
                raise CheckpointRaceError(
                    f"{where}: record {seq} / event {event_id!r} is already stored ({err})"
                ) from None

        self._run("IMMEDIATE", f"appending record {seq} to {where}", work)
        return Head(seq, digest)

    def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
        """The root and the records with seq > ``after``, verified against the head.

        Checks: every returned row's body matches its stored digest, the root's too; the
        seqs are contiguous from 1; the last row is the head (seq and digest). Any
        mismatch is a :class:`CheckpointError` naming the conversation and the seq.
        """
        if after < 0:
            raise ValueError(f"after must be >= 0, not {after}")
        where = f"conversation {conversation_id!r}"

        def work(conn: sqlite3.Connection) -> StoredConversation | None:
            row = conn.execute(
                "SELECT body, digest FROM roots WHERE conversation = ?", (conversation_id,)
            ).fetchone()
            if row is None:
                if self._has_rows(conn, conversation_id):
                    raise CheckpointError(f"{where}: has records or a head but no root")
                return None
            root = self._verified_root(conversation_id, row[0], row[1])
            head_row = conn.execute(
                "SELECT seq, digest FROM heads WHERE conversation = ?", (conversation_id,)
            ).fetchone()
            if head_row is None:
                raise CheckpointError(f"{where}: has no head row (store is damaged)")
            head_seq, head_digest = head_row
            count, first, last = conn.execute(
                "SELECT count(*), min(seq), max(seq) FROM records WHERE conversation = ?",
                (conversation_id,),
            ).fetchone()
            last = last or 0
            if count != last or (count and first != 1):
                missing = self._first_missing(conn, conversation_id)
                raise CheckpointError(
                    f"{where}: record {missing} is missing (gap in seq; "
                    f"{count} records stored, last is {last})"
                )
            if head_seq > last:
                raise CheckpointError(
                    f"{where}: truncated: the head is record {head_seq} but the last stored "
                    f"record is {last}"
                )
            if head_seq < last:
                raise CheckpointError(
                    f"{where}: record {last} is past the head (record {head_seq}); it was not "
                    "written by a prefixlock append"
                )
            records: list[bytes] = []
            digests: list[str] = []
            expected = after + 1
            rows = conn.execute(
                "SELECT seq, body, digest FROM records WHERE conversation = ? AND seq > ? "
                "ORDER BY seq",
                (conversation_id, after),
            )
            for seq, body, digest in rows:
                if seq != expected:  # unreachable after the count check; kept as a guard
                    raise CheckpointError(f"{where}: record {expected} is missing")
                records.append(self._verified(where, seq, body, digest))
                digests.append(digest)  # verified: the body's own digest
                expected += 1
            if last == 0:
                last_digest = canonical.sha256_hex(root)
            elif records:
                last_digest = digests[-1]
            else:  # after >= head: still verify the head row against its record
                body, digest = conn.execute(
                    "SELECT body, digest FROM records WHERE conversation = ? AND seq = ?",
                    (conversation_id, last),
                ).fetchone()
                last_digest = canonical.sha256_hex(self._verified(where, last, body, digest))
            if head_digest != last_digest:
                raise CheckpointError(
                    f"{where}: the head digest does not match record {last} "
                    f"(head {head_digest}, record {last_digest})"
                )
            self.bytes_read += len(root) + sum(map(len, records))
            return StoredConversation(
                conversation_id, root, tuple(records), head_digest, tuple(digests)
            )

        return self._run("DEFERRED", f"loading {where}", work)

    def load_after(self, conversation_id: str, seq: int) -> CatchUp | None:
        """The head and the records after ``seq`` (no root), in one SELECT joining the
        head row to the new records; verified by :func:`~.contract.verified_catch_up`."""
        if seq < 0:
            raise ValueError(f"seq must be >= 0, not {seq}")

        def work(conn: sqlite3.Connection) -> CatchUp | None:
            rows = conn.execute(
                "SELECT h.seq, h.digest, r.seq, r.body, r.digest FROM heads h "
                "LEFT JOIN records r ON r.conversation = h.conversation AND r.seq > ? "
                "WHERE h.conversation = ? ORDER BY r.seq",
                (seq, conversation_id),
            ).fetchall()
            if not rows:
                if self._has_root(conn, conversation_id):
                    raise CheckpointError(
                        f"conversation {conversation_id!r}: has no head row (store is damaged)"
                    )
                return None
            found = [(r[2], r[3], r[4]) for r in rows if r[2] is not None]
            self.bytes_read += sum(len(r[1]) for r in found if isinstance(r[1], bytes))
            return verified_catch_up(conversation_id, seq, rows[0][0], rows[0][1], found)

        return self._run("DEFERRED", f"catching up conversation {conversation_id!r}", work)

    def conversations(self) -> list[str]:
        """Stored conversation ids, sorted by code point."""
        rows = self._run(
            "DEFERRED",
            "listing conversations",
            lambda conn: conn.execute("SELECT conversation FROM roots").fetchall(),
        )
        return sorted(str(r[0]) for r in rows)

    # -- checks -----------------------------------------------------------------------

    def integrity_check(self) -> list[str]:
        """Every problem found in the store, one line each; empty when it is sound.

        Runs ``PRAGMA integrity_check`` and ``PRAGMA foreign_key_check``, then loads and
        fully decodes every conversation (format, hash chain, message digests, head) and
        compares the event id column with each record's event id.
        """
        problems: list[str] = []

        def sqlite_checks(conn: sqlite3.Connection) -> list[str]:
            out: list[str] = []
            rows = [str(r[0]) for r in conn.execute("PRAGMA integrity_check").fetchall()]
            if rows != ["ok"]:
                out.extend(f"sqlite integrity_check: {r}" for r in rows)
            for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check"):
                out.append(f"{table} row {rowid} refers to a missing {parent} row")
            return out

        try:
            problems.extend(self._run("DEFERRED", "checking integrity", sqlite_checks))
            ids = self._run(
                "DEFERRED",
                "listing conversations",
                lambda conn: conn.execute(
                    "SELECT conversation FROM roots UNION SELECT conversation FROM heads "
                    "UNION SELECT conversation FROM records"
                ).fetchall(),
            )
        except CheckpointError as err:
            return [*problems, str(err)]
        for cid in sorted(str(r[0]) for r in ids):
            try:
                self._check_conversation(cid)
            except CheckpointError as err:
                message = str(err)
                if not message.startswith(f"conversation {cid!r}"):
                    message = f"conversation {cid!r}: {message}"
                problems.append(message)
        return problems

    def _check_conversation(self, cid: str) -> None:
        columns = self._run(
            "DEFERRED",
            f"reading event ids of {cid!r}",
            lambda conn: conn.execute(
                "SELECT seq, event_id FROM records WHERE conversation = ? ORDER BY seq", (cid,)
            ).fetchall(),
        )
        check_conversation(self, cid, columns)

    def pragmas(self) -> dict[str, Any]:
        """The connection settings that matter, for ``inspect`` and tests."""
        names = (
            "journal_mode",
            "synchronous",
            "foreign_keys",
            "user_version",
            "application_id",
        )
        return self._run(
            "DEFERRED",
            "reading pragmas",
            lambda conn: {n: conn.execute(f"PRAGMA {n}").fetchone()[0] for n in names},
        )

    # -- helpers ----------------------------------------------------------------------

    @staticmethod
    def _has_root(conn: sqlite3.Connection, cid: str) -> bool:
        row = conn.execute("SELECT 1 FROM roots WHERE conversation = ?", (cid,)).fetchone()
        return row is not None

    @staticmethod
    def _has_rows(conn: sqlite3.Connection, cid: str) -> bool:
        row = conn.execute(
            "SELECT 1 FROM heads WHERE conversation = ? "
            "UNION ALL SELECT 1 FROM records WHERE conversation = ? LIMIT 1",
            (cid, cid),
        ).fetchone()
        return row is not None

    @staticmethod
    def _first_missing(conn: sqlite3.Connection, cid: str) -> int:
        expected = 1
        for (seq,) in conn.execute(
            "SELECT seq FROM records WHERE conversation = ? ORDER BY seq", (cid,)
        ):
            if seq != expected:
                return expected
            expected += 1
        return expected

    @staticmethod
    def _verified(where: str, seq: int, body: object, digest: object) -> bytes:
        if not isinstance(body, bytes):
            raise CheckpointError(
                f"{where} record {seq}: body is stored as {type(body).__name__}, not a blob"
            )
        actual = canonical.sha256_hex(body)
        if actual != digest:
            raise CheckpointError(
                f"{where} record {seq}: body does not match its stored digest "
                f"(stored {digest}, computed {actual}): corrupted (bit flip?)"
            )
        return body

    @staticmethod
    def _verified_root(cid: str, body: object, digest: object) -> bytes:
        if not isinstance(body, bytes):
            raise CheckpointError(
                f"conversation {cid!r}: root is stored as {type(body).__name__}, not a blob"
            )
        actual = canonical.sha256_hex(body)
        if actual != digest:
            raise CheckpointError(
                f"conversation {cid!r}: root does not match its stored digest "
                f"(stored {digest}, computed {actual}): corrupted (bit flip?)"
            )
        return body


class DurableFloor:
    """The bare durable append a checkpoint stands for, for ``prefixlock bench``: the
    same record bytes, one ``INSERT`` + ``COMMIT`` per record into a one-table SQLite
    file with :class:`SQLiteStore`'s pragmas (``journal_mode=WAL``,
    ``synchronous=FULL``). No digest, no head, no checks, no lock: what no checkpoint
    store can go below on this machine and file system. Not a store."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = sqlite3.connect(path, isolation_level=None)
        mode = str(self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
        if mode != "wal":
            self._conn.close()
            raise CheckpointError(f"{path}: could not enable WAL mode (journal_mode={mode})")
        self._conn.execute("PRAGMA synchronous=FULL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS records (body BLOB NOT NULL)")

    def append(self, records: Sequence[bytes]) -> None:
        execute = self._conn.execute
        for record in records:
            execute("BEGIN IMMEDIATE")
            execute("INSERT INTO records (body) VALUES (?)", (record,))
            execute("COMMIT")

    def close(self) -> None:
        self._conn.close()


class SchemaFloor:
    """The store's own statements, bare, for ``prefixlock bench``: per record, what
    :meth:`SQLiteStore.append` sends SQLite (``BEGIN IMMEDIATE``, the head moved, the
    record inserted under its two keys with the SHA-256 its row stores, ``COMMIT``), on
    a file with the store's schema and pragmas, and none of the store's Python around
    it: no lock, no closure, no refusal reading why, no error mapping. Beside
    :class:`DurableFloor` it says what the schema costs (a head row and two keys per
    record) and what the store's Python does. Not a store: it refuses nothing it need
    not, though what it wrote opens as one.

    Each conversation's records must come in order from seq 1, as a store was given
    them; a head that does not move (a record out of order) raises
    :class:`CheckpointError`, so a wrong replay cannot pass for a cheap one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._store = SQLiteStore(path)  # the schema and the pragmas, as a store has them
        conn = self._store._conn
        assert conn is not None
        self._conn = conn
        self._roots: set[str] = set()

    def prepare(self, conversation_id: str, root: bytes) -> None:
        """Create the conversation's root (and its head at seq 0) unless it exists:
        outside the timed appends, as a store's root comes before its records."""
        if conversation_id not in self._roots:
            self._store.create_root(conversation_id, root)
            self._roots.add(conversation_id)

    def append(self, records: Sequence[tuple[str, int, str, bytes]]) -> None:
        """Append each ``(conversation, seq, event_id, record)`` in a transaction of its
        own, each conversation prepared first (:meth:`prepare`)."""
        execute = self._conn.execute
        for conversation_id, seq, event_id, record in records:
            digest = canonical.sha256_hex(record)
            execute("BEGIN IMMEDIATE")
            if execute(_MOVE_HEAD, (seq, digest, conversation_id, seq - 1)).rowcount != 1:
                execute("ROLLBACK")
                raise CheckpointError(
                    f"{self.path}: record {seq} of conversation {conversation_id!r} does not "
                    "follow its head"
                )
            execute(_INSERT_RECORD, (conversation_id, seq, event_id, record, digest))
            execute("COMMIT")

    def close(self) -> None:
        self._store.close()
