"""The fleet checkpoint store: PostgreSQL through psycopg 3 (``prefixlock[postgres]``).

The same contract as :class:`~prefixlock.store.sqlite.SQLiteStore`, for many agent-server
processes on many machines sharing one database. It needs only transactions, row locks
and unique constraints, so a PostgreSQL-compatible database can hold it too.

Schema (version :data:`SCHEMA_VERSION`, in the connection's current schema; the table
``prefixlock_meta`` marks the database as prefixlock's, so that another program's tables of
the same names are refused rather than written into)::

    prefixlock_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)
        -- ('application', 'prefixlock'), ('schema_version', '1')
    prefixlock_roots(conversation TEXT PRIMARY KEY, body BYTEA NOT NULL, digest TEXT NOT NULL)
    prefixlock_records(conversation TEXT NOT NULL REFERENCES prefixlock_roots,
                       seq BIGINT NOT NULL, event_id TEXT NOT NULL, body BYTEA NOT NULL,
                       digest TEXT NOT NULL,
                       PRIMARY KEY (conversation, seq), UNIQUE (conversation, event_id))
    prefixlock_heads(conversation TEXT PRIMARY KEY REFERENCES prefixlock_roots,
                     seq BIGINT NOT NULL, digest TEXT NOT NULL)

The schema is created on first use, under a transaction-scoped advisory lock so that
workers starting together create it once.

Concurrency: ``append`` is one statement, so one round trip and one implicit
transaction: it moves the conversation's head from ``seq - 1`` to ``seq`` and inserts
the record from that move (``WITH moved AS (UPDATE ... RETURNING ...) INSERT ...
SELECT ... FROM moved``). A head elsewhere matches nothing, so nothing is inserted; a
writer racing for the same seq waits on the head row's lock, then finds the head moved
(READ COMMITTED re-reads the locked row); a taken event id violates its key and rolls
the move back. Only a refused append does more: the checks again, in a transaction that
locks the head row (``SELECT ... FOR UPDATE``), to name the refusal. A writer that loses
gets :class:`~prefixlock.core.errors.CheckpointRaceError` and nothing of its attempt is
visible. ``load`` reads in one ``REPEATABLE READ READ ONLY`` transaction, so head and
rows come from one snapshot. ``load(after=seq)`` reads only the rows after ``seq`` (plus
the root and head rows), so a warm worker's catch-up costs the same at any history length.

The session: whatever the server, database or role sets by default, the store's
connection reads and writes at ``READ COMMITTED`` (``SET SESSION CHARACTERISTICS`` on
connect; the concurrency above relies on it, and under a stricter default the schema
creation and create_root would race) and uses the client encoding ``UTF8`` (overriding a
URL's ``client_encoding``; an ``SQL_ASCII`` database would otherwise return TEXT as bytes).
A serialization failure or a deadlock (SQLSTATE 40001, 40P01) during an append or
create_root, which a session that stayed ``READ COMMITTED`` does not meet (a pooler may hand
over a reset one), is a :class:`~prefixlock.core.errors.CheckpointRaceError`. Opening waits
``connect_timeout`` seconds for the server: the caller's keyword, else the URL's
``connect_timeout=``, else ``PGCONNECT_TIMEOUT``, else 10.

Errors: every :class:`psycopg.Error` becomes a
:class:`~prefixlock.core.errors.CheckpointError` naming the store by its URL with the
password replaced by ``***``; the password never appears in a message.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

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
from .urls import redact_url, url_password

__all__ = ["APPLICATION", "SCHEMA_VERSION", "TABLES", "PostgresFloor", "PostgresStore"]

#: ``prefixlock_meta.schema_version`` of the schema this module reads and writes.
SCHEMA_VERSION = 1
#: ``prefixlock_meta.application``: marks the tables as a prefixlock store's.
APPLICATION = "prefixlock"
#: The tables of the schema, the marker first.
TABLES = ("prefixlock_meta", "prefixlock_roots", "prefixlock_records", "prefixlock_heads")

#: ``pg_advisory_xact_lock`` key taken while creating the schema ("PFLK").
_CREATE_LOCK = 0x50464C4B
#: Seconds opening waits for the server when neither the caller, the URL nor
#: ``PGCONNECT_TIMEOUT`` says.
_DEFAULT_CONNECT_TIMEOUT = 10
#: SQLSTATEs of a transaction the server aborted for a concurrent one: serialization
#: failure, deadlock. During an append or create_root they are a race the caller retries.
_RACE_STATES = frozenset({"40001", "40P01"})

_SCHEMA = (
    "CREATE TABLE prefixlock_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE prefixlock_roots ("
    " conversation TEXT PRIMARY KEY, body BYTEA NOT NULL, digest TEXT NOT NULL)",
    "CREATE TABLE prefixlock_records ("
    " conversation TEXT NOT NULL REFERENCES prefixlock_roots (conversation),"
    " seq BIGINT NOT NULL CHECK (seq >= 1), event_id TEXT NOT NULL,"
    " body BYTEA NOT NULL, digest TEXT NOT NULL,"
    " PRIMARY KEY (conversation, seq), UNIQUE (conversation, event_id))",
    "CREATE TABLE prefixlock_heads ("
    " conversation TEXT PRIMARY KEY REFERENCES prefixlock_roots (conversation),"
    " seq BIGINT NOT NULL CHECK (seq >= 0), digest TEXT NOT NULL)",
)

T = TypeVar("T")
Conn = psycopg.Connection[tuple[Any, ...]]


#: The largest seq a BIGINT column holds.
_MAX_SEQ = 2**63 - 1
#: The append: the head moved from seq - 1, the record inserted from that move (nothing
#: is inserted if nothing moved), in one statement. Parameters: seq, digest,
#: conversation, seq - 1, event id, body. Returns the new seq, or no row.
_APPEND = (
    "WITH moved AS (UPDATE prefixlock_heads SET seq = %s, digest = %s"
    " WHERE conversation = %s AND seq = %s RETURNING conversation, seq, digest)"
    " INSERT INTO prefixlock_records (conversation, seq, event_id, body, digest)"
    " SELECT conversation, seq, %s, %s, digest FROM moved RETURNING seq"
)


class PostgresStore:
    """A :class:`~prefixlock.store.contract.Store` in a PostgreSQL database.

    One connection per store object, guarded by a lock, so a store may be shared by
    threads (not across ``fork``: open the store in the child). Use it as a context
    manager or call :meth:`close`.

    ``connect_timeout`` (seconds), when given, wins over the URL's ``connect_timeout=``, as
    psycopg's keywords do; without it the URL's, else ``PGCONNECT_TIMEOUT``, else 10.
    """

    def __init__(self, url: str, *, connect_timeout: int | None = None) -> None:
        self._url = url
        self._secrets = url_password(url)
        #: the URL with its password replaced by ``***``: safe to print
        self.name = redact_url(url)
        self._lock = threading.RLock()
        self._conn: Conn | None = None
        #: the schema version this store holds (:data:`SCHEMA_VERSION`)
        self.schema_version = SCHEMA_VERSION
        #: True if this open created the schema (the database held none of its tables)
        self.created_schema = False
        #: root and record body bytes read from the database so far (a figure)
        self.bytes_read = 0
        try:
            conn = _connect(url, connect_timeout)
        except psycopg.Error as err:
            raise self._error(err, "opening the store") from None
        except ValueError as err:  # psycopg rejects a malformed URL with ProgrammingError
            raise self._error(err, "opening the store") from None
        try:
            self._conn = conn
            if not self._run("reading the schema version", self._check_schema):
                self._run("creating the schema", self._create_schema)
        except BaseException:
            self._conn = None
            conn.close()
            raise

    # -- connection and transactions ------------------------------------------------

    def _scrub(self, text: str) -> str:
        """The server's ``text`` with the URL shown as :attr:`name` and every password as
        ``***`` (only the server's text: a short password may be part of any other)."""
        parts = text.split(self._url)
        for secret in self._secrets:
            parts = [part.replace(secret, "***") for part in parts]
        return self.name.join(parts)

    def _error(self, err: Exception, doing: str) -> CheckpointError:
        message = " ".join(str(err).split()) or type(err).__name__
        return CheckpointError(
            f"{self.name}: postgresql error while {doing}: {self._scrub(message)}"
        )

    def _raced(self, err: psycopg.Error, lost: str) -> CheckpointRaceError | None:
        """The race error for ``err`` if the server aborted the transaction for a concurrent
        one (:data:`_RACE_STATES`): ``lost`` names what lost, and the server says why."""
        if err.sqlstate not in _RACE_STATES:
            return None
        why = err.diag.message_primary or type(err).__name__
        return CheckpointRaceError(f"{lost} lost a race with another writer ({why})")

    def _run(
        self,
        doing: str,
        work: Callable[[Conn], T],
        *,
        snapshot: bool = False,
        race: str | None = None,
    ) -> T:
        """Run ``work`` in one transaction: committed if it returns, rolled back if not.

        ``snapshot`` reads in one ``REPEATABLE READ READ ONLY`` snapshot. ``race`` names
        what loses when the server aborts the transaction for a concurrent one: that is a
        :class:`CheckpointRaceError`.
        """
        with self._lock:
            conn = self._conn
            if conn is None:
                raise CheckpointError(f"{self.name}: store is closed")
            try:
                with conn.transaction():
                    if snapshot:
                        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    return work(conn)
            except psycopg.Error as err:
                raced = self._raced(err, race) if race is not None else None
                raise (raced or self._error(err, doing)) from None

    def _query(self, doing: str, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """One statement outside any transaction block: one round trip to the server,
        and one snapshot (a single statement sees one under READ COMMITTED)."""
        with self._lock:
            conn = self._conn
            if conn is None:
                raise CheckpointError(f"{self.name}: store is closed")
            try:
                return conn.execute(sql, params).fetchall()
            except psycopg.Error as err:
                raise self._error(err, doing) from None

    def _check_schema(self, conn: Conn) -> bool:
        """True if the database holds our schema; False if it holds none of its tables."""
        found = [
            str(r[0])
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_name = ANY(%s)",
                (list(TABLES),),
            )
        ]
        if not found:
            return False
        if "prefixlock_meta" not in found:
            raise CheckpointError(
                f"{self.name} is not a prefixlock store: it holds another program's tables "
                f"named {', '.join(sorted(found))} (no prefixlock_meta table)"
            )
        columns = {
            str(r[0])
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name = 'prefixlock_meta'"
            )
        }
        meta: dict[str, str] = {}
        if columns == {"key", "value"}:
            meta = {
                str(k): str(v) for k, v in conn.execute("SELECT key, value FROM prefixlock_meta")
            }
        if meta.get("application") != APPLICATION:
            raise CheckpointError(
                f"{self.name} is not a prefixlock store: table prefixlock_meta belongs to "
                "another program (no application 'prefixlock' row)"
            )
        version = meta.get("schema_version")
        if version != str(SCHEMA_VERSION):
            raise CheckpointError(
                f"{self.name}: store schema version {version} is not supported; this "
                f"prefixlock reads schema version {SCHEMA_VERSION}"
            )
        missing = sorted(set(TABLES) - set(found))
        if missing:
            raise CheckpointError(
                f"{self.name}: store is damaged: table(s) {', '.join(missing)} are missing"
            )
        return True

    def _create_schema(self, conn: Conn) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_CREATE_LOCK,))
        if self._check_schema(conn):  # another worker created it meanwhile
            return
        self.created_schema = True
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO prefixlock_meta (key, value) VALUES "
            "('application', %s), ('schema_version', %s)",
            (APPLICATION, str(SCHEMA_VERSION)),
        )

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                conn.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({self.name!r})"

    # -- the Store protocol -----------------------------------------------------------

    def create_root(self, conversation_id: str, root: bytes) -> bytes:
        """Store ``root`` unless the conversation exists; return the stored root."""
        data = bytes(root)
        digest = canonical.sha256_hex(data)

        def work(conn: Conn) -> bytes:
            inserted = conn.execute(
                "INSERT INTO prefixlock_roots (conversation, body, digest) VALUES (%s, %s, %s) "
                "ON CONFLICT (conversation) DO NOTHING RETURNING conversation",
                (conversation_id, data, digest),
            ).fetchone()
            if inserted is not None:
                conn.execute(
                    "INSERT INTO prefixlock_heads (conversation, seq, digest) VALUES (%s, 0, %s)",
                    (conversation_id, digest),
                )
                return data
            row = conn.execute(
                "SELECT body, digest FROM prefixlock_roots WHERE conversation = %s",
                (conversation_id,),
            ).fetchone()
            if row is None:  # pragma: no cover - a conflict means the row exists
                raise CheckpointError(f"conversation {conversation_id!r}: root vanished")
            return _verified_root(conversation_id, row[0], row[1])

        return self._run(
            f"creating conversation {conversation_id!r}",
            work,
            race=f"conversation {conversation_id!r}: creating it",
        )

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> Head:
        """Append record ``seq`` (which must be head + 1): one statement, one round trip.

        The statement moves the head from ``seq - 1`` and inserts the record from that
        move, as one implicit transaction: a head elsewhere moves nothing and inserts
        nothing, and a taken event id (a unique violation) rolls the move back. Only
        then, to name the refusal, the checks run again in a transaction of their own
        that locks the head row (:meth:`_append_checked`); it appends if the head has
        since come to ``seq - 1``, as any later append would.
        """
        data = bytes(record)
        digest = canonical.sha256_hex(data)
        if not 1 <= seq <= _MAX_SEQ:  # a seq no BIGINT holds: the checks name it
            return self._append_checked(conversation_id, seq, event_id, data, digest)
        doing = f"appending record {seq} to conversation {conversation_id!r}"
        with self._lock:
            conn = self._conn
            if conn is None:
                raise CheckpointError(f"{self.name}: store is closed")
            try:
                moved = conn.execute(
                    _APPEND, (seq, digest, conversation_id, seq - 1, event_id, data)
                )
                if moved.fetchone() is not None:
                    return Head(seq, digest)
            except pg_errors.UniqueViolation:
                pass  # rolled back: the checks below name it
            except psycopg.Error as err:
                lost = f"conversation {conversation_id!r}: record {seq}"
                raise (self._raced(err, lost) or self._error(err, doing)) from None
        return self._append_checked(conversation_id, seq, event_id, data, digest)

    def _append_checked(
        self, conversation_id: str, seq: int, event_id: str, data: bytes, digest: str
    ) -> Head:
        """The append as checks in one transaction: the head row locked, then the seq and
        the event id checked (each refusal named), then the insert and the head moved."""
        where = f"conversation {conversation_id!r}"

        def work(conn: Conn) -> None:
            # The row lock orders writers of one conversation; the loser then sees the
            # winner's head (READ COMMITTED re-reads the locked row).
            row = conn.execute(
                "SELECT seq FROM prefixlock_heads WHERE conversation = %s FOR UPDATE",
                (conversation_id,),
            ).fetchone()
            if row is None:
                root = conn.execute(
                    "SELECT 1 FROM prefixlock_roots WHERE conversation = %s", (conversation_id,)
                ).fetchone()
                raise missing_head(conversation_id, has_root=root is not None)
            head = int(row[0])
            if seq != head + 1:
                raise seq_conflict(conversation_id, seq, head)
            taken = conn.execute(
                "SELECT seq FROM prefixlock_records WHERE conversation = %s AND event_id = %s",
                (conversation_id, event_id),
            ).fetchone()
            if taken is not None:
                raise event_taken(conversation_id, event_id, taken[0])
            try:
                conn.execute(
                    "INSERT INTO prefixlock_records (conversation, seq, event_id, body, digest) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (conversation_id, seq, event_id, data, digest),
                )
            except pg_errors.UniqueViolation as err:
                # The checks above make this unreachable unless the head lags the rows.
                message = " ".join(str(err).split())
                raise CheckpointRaceError(
                    f"{where}: record {seq} / event {event_id!r} is already stored ({message})"
                ) from None
            conn.execute(
                "UPDATE prefixlock_heads SET seq = %s, digest = %s WHERE conversation = %s",
                (seq, digest, conversation_id),
            )

        self._run(f"appending record {seq} to {where}", work, race=f"{where}: record {seq}")
        return Head(seq, digest)

    def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
        """The root and the records with seq > ``after``, verified against the head.

        Checks: every returned row's body matches its stored digest, the root's too; the
        seqs after ``after`` are contiguous; the last row is the head (seq and digest).
        Any mismatch is a :class:`CheckpointError` naming the conversation and the seq.
        """
        if after < 0:
            raise ValueError(f"after must be >= 0, not {after}")
        where = f"conversation {conversation_id!r}"

        def work(conn: Conn) -> StoredConversation | None:
            row = conn.execute(
                "SELECT r.body, r.digest, h.seq, h.digest,"
                " (SELECT max(seq) FROM prefixlock_records WHERE conversation = %(c)s),"
                " (SELECT count(*) FROM prefixlock_records"
                "  WHERE conversation = %(c)s AND seq > %(a)s)"
                " FROM prefixlock_roots r LEFT JOIN prefixlock_heads h"
                " ON h.conversation = r.conversation WHERE r.conversation = %(c)s",
                {"c": conversation_id, "a": after},
            ).fetchone()
            if row is None:
                orphan = conn.execute(
                    "SELECT 1 FROM prefixlock_heads WHERE conversation = %(c)s UNION ALL "
                    "SELECT 1 FROM prefixlock_records WHERE conversation = %(c)s LIMIT 1",
                    {"c": conversation_id},
                ).fetchone()
                if orphan is not None:
                    raise CheckpointError(f"{where}: has records or a head but no root")
                return None
            root_body, root_digest, head_seq, head_digest, last, count = row
            root = _verified_root(conversation_id, root_body, root_digest)
            if head_seq is None:
                raise CheckpointError(f"{where}: has no head row (store is damaged)")
            last = int(last or 0)
            if count != max(0, last - after):
                missing = self._first_missing(conn, conversation_id, after)
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
            if last > after:
                rows = conn.execute(
                    "SELECT seq, body, digest FROM prefixlock_records "
                    "WHERE conversation = %s AND seq > %s ORDER BY seq",
                    (conversation_id, after),
                )
                for seq, body, digest in rows:
                    if seq != expected:  # unreachable after the count check; a guard
                        raise CheckpointError(f"{where}: record {expected} is missing")
                    records.append(_verified(where, seq, body, digest))
                    digests.append(digest)  # verified: the body's own digest
                    expected += 1
            if last == 0:
                last_digest = canonical.sha256_hex(root)
            elif records:
                last_digest = digests[-1]
            else:  # after >= head: still verify the head row against its record
                body, digest = conn.execute(
                    "SELECT body, digest FROM prefixlock_records "
                    "WHERE conversation = %s AND seq = %s",
                    (conversation_id, last),
                ).fetchone() or (None, None)
                last_digest = canonical.sha256_hex(_verified(where, last, body, digest))
            if head_digest != last_digest:
                raise CheckpointError(
                    f"{where}: the head digest does not match record {last} "
                    f"(head {head_digest}, record {last_digest})"
                )
            self.bytes_read += len(root) + sum(map(len, records))
            return StoredConversation(
                conversation_id, root, tuple(records), head_digest, tuple(digests)
            )

        return self._run(f"loading {where}", work, snapshot=True)

    def load_after(self, conversation_id: str, seq: int) -> CatchUp | None:
        """The head and the records after ``seq`` (no root): one SELECT joining the head
        row to the new records, sent outside a transaction block, so a warm worker's
        catch-up is one round trip and reads only what it lacks. Verified by
        :func:`~.contract.verified_catch_up`."""
        if seq < 0:
            raise ValueError(f"seq must be >= 0, not {seq}")
        where = f"conversation {conversation_id!r}"
        rows = self._query(
            f"catching up {where}",
            "SELECT h.seq, h.digest, r.seq, r.body, r.digest FROM prefixlock_heads h"
            " LEFT JOIN prefixlock_records r"
            " ON r.conversation = h.conversation AND r.seq > %(a)s"
            " WHERE h.conversation = %(c)s ORDER BY r.seq",
            {"c": conversation_id, "a": seq},
        )
        if not rows:
            root = self._query(
                f"catching up {where}",
                "SELECT 1 FROM prefixlock_roots WHERE conversation = %(c)s",
                {"c": conversation_id},
            )
            if root:
                raise CheckpointError(f"{where}: has no head row (store is damaged)")
            return None
        found = [(int(r[2]), r[3], r[4]) for r in rows if r[2] is not None]
        self.bytes_read += sum(len(r[1]) for r in found if isinstance(r[1], bytes))
        return verified_catch_up(conversation_id, seq, int(rows[0][0]), str(rows[0][1]), found)

    def conversations(self) -> list[str]:
        """Stored conversation ids, sorted by code point."""
        rows = self._run(
            "listing conversations",
            lambda conn: conn.execute("SELECT conversation FROM prefixlock_roots").fetchall(),
            snapshot=True,
        )
        return sorted(str(r[0]) for r in rows)

    # -- checks -----------------------------------------------------------------------

    def integrity_check(self) -> list[str]:
        """Every problem found in the store, one line each; empty when it is sound.

        Loads and fully decodes every conversation (format, hash chain, message digests,
        head) and compares the event id column with each record's event id.
        """
        try:
            ids = self._run(
                "listing conversations",
                lambda conn: conn.execute(
                    "SELECT conversation FROM prefixlock_roots UNION "
                    "SELECT conversation FROM prefixlock_heads UNION "
                    "SELECT conversation FROM prefixlock_records"
                ).fetchall(),
                snapshot=True,
            )
        except CheckpointError as err:
            return [str(err)]
        problems: list[str] = []
        for cid in sorted(str(r[0]) for r in ids):
            try:
                columns = self._run(
                    f"reading event ids of {cid!r}", _event_id_reader(cid), snapshot=True
                )
                check_conversation(self, cid, columns)
            except CheckpointError as err:
                message = str(err)
                if not message.startswith(f"conversation {cid!r}"):
                    message = f"conversation {cid!r}: {message}"
                problems.append(message)
        return problems

    @staticmethod
    def _first_missing(conn: Conn, cid: str, after: int) -> int:
        expected = after + 1
        for (seq,) in conn.execute(
            "SELECT seq FROM prefixlock_records WHERE conversation = %s AND seq > %s ORDER BY seq",
            (cid, after),
        ):
            if seq != expected:
                return expected
            expected += 1
        return expected


def _connect(url: str, connect_timeout: int | None) -> Conn:
    """A connection for a store: autocommit, UTF8, READ COMMITTED, and the timeout the
    caller, the URL or ``PGCONNECT_TIMEOUT`` gives (else :data:`_DEFAULT_CONNECT_TIMEOUT`)."""
    configured = "connect_timeout" in conninfo_to_dict(url) or os.environ.get("PGCONNECT_TIMEOUT")
    if connect_timeout is None and not configured:
        connect_timeout = _DEFAULT_CONNECT_TIMEOUT
    conn = psycopg.connect(
        url, autocommit=True, client_encoding="UTF8", connect_timeout=connect_timeout
    )
    try:
        conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED")
    except BaseException:
        conn.close()
        raise
    return conn


def _event_id_reader(cid: str) -> Callable[[Conn], list[tuple[int, str]]]:
    def read(conn: Conn) -> list[tuple[int, str]]:
        rows = conn.execute(
            "SELECT seq, event_id FROM prefixlock_records WHERE conversation = %s ORDER BY seq",
            (cid,),
        )
        return [(int(seq), str(event_id)) for seq, event_id in rows]

    return read


def _verified(where: str, seq: int, body: object, digest: object) -> bytes:
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
    return body


def _verified_root(cid: str, body: object, digest: object) -> bytes:
    if not isinstance(body, bytes):
        raise CheckpointError(
            f"conversation {cid!r}: root is stored as {type(body).__name__}, not bytes"
        )
    actual = canonical.sha256_hex(body)
    if actual != digest:
        raise CheckpointError(
            f"conversation {cid!r}: root does not match its stored digest "
            f"(stored {digest}, computed {actual}): corrupted (bit flip?)"
        )
    return body


class PostgresFloor:
    """The bare durable append a checkpoint stands for on PostgreSQL, for ``prefixlock
    bench --store``: the same record bytes, one ``INSERT`` per record into a one-column
    table of its own (a name no store uses, dropped by :meth:`close`), each statement its
    own transaction, as :meth:`PostgresStore.append` is on the way that succeeds. No
    digest, no head, no keys: what no checkpoint store can go below on this server and
    connection. Not a store."""

    def __init__(self, url: str) -> None:
        self.name = redact_url(url)
        self.table = f"prefixlock_bench_floor_{secrets.token_hex(4)}"
        try:
            self._conn: Conn = psycopg.connect(url, autocommit=True)
            self._conn.execute(f"CREATE TABLE {self.table} (body BYTEA NOT NULL)")
        except psycopg.Error as err:
            message = " ".join(str(err).split())
            for secret in url_password(url):
                message = message.replace(secret, "***")
            raise CheckpointError(
                f"{self.name}: postgresql error while making the floor: {message}"
            ) from None
        self._insert = f"INSERT INTO {self.table} (body) VALUES (%s)"

    def append(self, records: Sequence[bytes]) -> None:
        execute = self._conn.execute
        for record in records:
            execute(self._insert, (record,))

    def close(self) -> None:
        """Drop the table and close the connection. Idempotent."""
        if not self._conn.closed:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute(f"DROP TABLE IF EXISTS {self.table}")
            self._conn.close()
