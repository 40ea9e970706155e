"""PostgreSQL store: the session it sets up, whatever the server's defaults say.

* Isolation: the store relies on READ COMMITTED (a writer that waited on the head row
  re-reads it), and sets it for its session. On a database whose
  ``default_transaction_isolation`` is serializable or repeatable read (ALTER DATABASE ...
  SET), a lost append is a CheckpointRaceError, workers handling one conversation never
  see an error, and create_root and the schema creation race as they do on the default.
  Should the session still serialize (a pooler that hands over a reset session), a
  serialization failure or a deadlock during an append or create_root is a race too.
* Encoding: the client encoding is UTF8, so an SQL_ASCII database holds a store.
* connect_timeout: the caller's keyword, else the URL's, else PGCONNECT_TIMEOUT, else 10 s.

Real server, no mocks; the databases are made for these tests and dropped after
(tests/conftest.py skips when no server is reachable).
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from conv_helpers import example_bundle, user
from helpers_store import fill, make_record, make_root
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError
from prefixlock.runtime.conversation import Conversation
from prefixlock.store import postgres
from prefixlock.store.contract import Head
from prefixlock.store.postgres import PostgresStore
from prefixlock.store.urls import open_store

# -- databases made for these tests ---------------------------------------------------------


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


def _with_query(url: str, query: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))


def _fresh_schema(url: str) -> str:
    """``url`` with a search_path of a new schema of its own: every test starts empty."""
    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")  # type: ignore[arg-type]
    return _with_query(url, "options=" + quote(f"-csearch_path={schema}", safe=""))


@pytest.fixture(scope="module")
def new_database(postgres_database: str) -> Iterator[Callable[..., str]]:
    """``new_database(create_options, **settings)``: the URL of a database made by
    ``CREATE DATABASE name create_options``, then ``ALTER DATABASE name SET key = 'value'``
    for each setting; all are dropped after the module's tests."""
    names: list[str] = []
    session = urlsplit(postgres_database).path.lstrip("/")

    def make(create_options: str = "", **settings: str) -> str:
        name = f"{session}_{len(names)}"
        with psycopg.connect(postgres_database, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name} {create_options}")  # type: ignore[arg-type]
            names.append(name)
            for key, value in settings.items():
                conn.execute(f"ALTER DATABASE {name} SET {key} = '{value}'")  # type: ignore[arg-type]
        return _with_database(postgres_database, name)

    yield make
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        for name in names:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]


@pytest.fixture(scope="module", params=["serializable", "repeatable read"])
def strict_database(request: pytest.FixtureRequest, new_database: Callable[..., str]) -> str:
    """A database whose default_transaction_isolation is stricter than READ COMMITTED."""
    return new_database(default_transaction_isolation=request.param)


@pytest.fixture
def strict_url(strict_database: str) -> str:
    return _fresh_schema(strict_database)


# -- helpers --------------------------------------------------------------------------------


def _conn(store: PostgresStore) -> psycopg.Connection[tuple[object, ...]]:
    conn = store._conn
    assert conn is not None
    return conn


def _serialize(*stores: PostgresStore) -> None:
    """Put each store's session back to SERIALIZABLE, as a pooler's reset would."""
    for store in stores:
        _conn(store).execute(
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"
        )


def _wait_until_waiting(url: str, count: int, on: str = "Lock") -> None:
    """Return once ``count`` other sessions of the database wait on a lock (10 s at most);
    ``on`` is the wait_event_type, or the wait_event 'advisory'."""
    column = "wait_event" if on == "advisory" else "wait_event_type"
    query = (
        f"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        f"AND pid <> pg_backend_pid() AND {column} = %s"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        deadline = time.monotonic() + 10
        while conn.execute(query, (on,)).fetchone() != (count,):  # type: ignore[arg-type]
            assert time.monotonic() < deadline, f"{count} session(s) never waited on {on}"
            time.sleep(0.01)


def _outcome(future: Future[object]) -> object:
    """What the call returned, or its error as (type name, message)."""
    try:
        return future.result(timeout=30)
    except CheckpointError as err:
        return (type(err).__name__, str(err))


def _race_for_record_2(
    url: str, first: PostgresStore, second: PostgresStore, before: Callable[[], object]
) -> tuple[Head, object, object]:
    """Both stores append record 2 of conversation 'c' (head at 1), with events 'a' and
    'b': a third session holds the head row until both wait, ``first`` in front. The
    head 'a' would make, and what each append came to."""
    records = fill(first, "c", 1)
    before()
    previous = canonical.sha256_hex(records[0])
    data = {tag: make_record(2, tag).encode("c", previous) for tag in "ab"}
    with psycopg.connect(url) as blocker, ThreadPoolExecutor(2) as pool:
        blocker.execute("SELECT seq FROM prefixlock_heads WHERE conversation = 'c' FOR UPDATE")
        won = pool.submit(first.append, "c", 2, "a", data["a"])
        _wait_until_waiting(url, 1)
        lost = pool.submit(second.append, "c", 2, "b", data["b"])
        _wait_until_waiting(url, 2)
        blocker.commit()
        return Head(2, canonical.sha256_hex(data["a"])), _outcome(won), _outcome(lost)


# -- isolation ------------------------------------------------------------------------------


def test_the_store_reads_committed_whatever_the_database_default(strict_url: str) -> None:
    with psycopg.connect(strict_url) as raw:
        default = raw.execute("SHOW default_transaction_isolation").fetchone()
    assert default in {("serializable",), ("repeatable read",)}
    with PostgresStore(strict_url) as store:
        shown = _conn(store).execute("SHOW default_transaction_isolation").fetchone()
        assert shown == ("read committed",)


def test_an_append_that_loses_the_race_is_a_race_error(strict_url: str) -> None:
    with PostgresStore(strict_url) as first, PostgresStore(strict_url) as second:
        head, won, lost = _race_for_record_2(strict_url, first, second, lambda: None)
        assert won == head
        assert lost == ("CheckpointRaceError", "conversation 'c': seq 2 is taken (head is 2)")
        assert first.integrity_check() == []


def test_a_serialization_failure_in_an_append_is_a_race_error(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as first, PostgresStore(postgres_url) as second:
        head, won, lost = _race_for_record_2(
            postgres_url, first, second, lambda: _serialize(first, second)
        )
        assert won == head
        assert lost == (
            "CheckpointRaceError",
            "conversation 'c': record 2 lost a race with another writer "
            "(could not serialize access due to concurrent update)",
        )
        stored = second.load("c")
        assert stored is not None
        assert stored.head == head.digest  # nothing of the loser's attempt is visible


def test_a_deadlock_in_an_append_is_a_race_error(postgres_url: str) -> None:
    # Another session holds the key of record 2 and then wants the head row the append
    # holds: the append, the first to wait, is the one the server aborts.
    with PostgresStore(postgres_url) as store, psycopg.connect(postgres_url) as other:
        records = fill(store, "c", 1)
        data = make_record(2, "a").encode("c", canonical.sha256_hex(records[0]))
        other.execute(
            "INSERT INTO prefixlock_records (conversation, seq, event_id, body, digest) "
            "VALUES ('c', 2, 'x', 'x', 'x')"
        )
        with ThreadPoolExecutor(1) as pool:
            append = pool.submit(store.append, "c", 2, "a", data)
            _wait_until_waiting(postgres_url, 1)
            other.execute("UPDATE prefixlock_heads SET seq = seq WHERE conversation = 'c'")
            assert _outcome(append) == (
                "CheckpointRaceError",
                "conversation 'c': record 2 lost a race with another writer (deadlock detected)",
            )
        other.rollback()
        assert store.append("c", 2, "a", data) == Head(2, canonical.sha256_hex(data))


def test_workers_of_one_conversation_never_see_an_error(strict_url: str) -> None:
    with PostgresStore(strict_url) as store:
        Conversation.open(store, example_bundle(), "c")
    events, workers = 25, 2
    barrier = threading.Barrier(workers)
    errors: list[str] = []

    def work(worker: int) -> None:
        with PostgresStore(strict_url) as store:
            conv = Conversation.open(store, example_bundle(), "c")
            for i in range(events):
                barrier.wait(timeout=30)
                try:
                    conv.handle(user(f"w{worker}-{i}", f"hi {i}", conversation="c"))
                except CheckpointError as err:
                    errors.append(str(err))
                    conv.catch_up()

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    with PostgresStore(strict_url) as store:
        assert store.integrity_check() == []
        stored = store.load("c")
        assert stored is not None
        got = sorted(canonical.loads(r)["event_id"] for r in stored.records)
        assert got == sorted(f"w{w}-{i}" for w in range(workers) for i in range(events))


def _root_race(url: str, store: PostgresStore) -> tuple[bytes, object]:
    """Another session creates conversation 'c' and commits while ``store.create_root``
    waits on it; the root that session stored, and what create_root came to."""
    theirs = make_root("c").encode()
    digest = canonical.sha256_hex(theirs)
    with psycopg.connect(url) as other, ThreadPoolExecutor(1) as pool:
        other.execute(
            "INSERT INTO prefixlock_roots (conversation, body, digest) VALUES ('c', %s, %s)",
            (theirs, digest),
        )
        other.execute(
            "INSERT INTO prefixlock_heads (conversation, seq, digest) VALUES ('c', 0, %s)",
            (digest,),
        )
        created = pool.submit(store.create_root, "c", make_root("c", "Mine.").encode())
        _wait_until_waiting(url, 1)
        other.commit()
        return theirs, _outcome(created)


def test_a_create_root_that_waited_returns_the_stored_root(strict_url: str) -> None:
    with PostgresStore(strict_url) as store:
        theirs, got = _root_race(strict_url, store)
        assert got == theirs


def test_a_serialization_failure_in_create_root_is_a_race_error(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as store:
        _serialize(store)
        theirs, got = _root_race(postgres_url, store)
        assert got == (
            "CheckpointRaceError",
            "conversation 'c': creating it lost a race with another writer "
            "(could not serialize access due to concurrent update)",
        )
        assert store.create_root("c", make_root("c", "Mine.").encode()) == theirs


def test_a_store_opened_while_another_creates_the_schema_finds_it(strict_url: str) -> None:
    with psycopg.connect(strict_url) as other, ThreadPoolExecutor(1) as pool:
        other.execute("SELECT pg_advisory_xact_lock(%s)", (postgres._CREATE_LOCK,))
        for statement in postgres._SCHEMA:
            other.execute(statement)  # type: ignore[arg-type]
        other.execute(
            "INSERT INTO prefixlock_meta (key, value) VALUES "
            "('application', 'prefixlock'), ('schema_version', %s)",
            (str(postgres.SCHEMA_VERSION),),
        )
        opened = pool.submit(PostgresStore, strict_url)
        _wait_until_waiting(strict_url, 1, on="advisory")
        other.commit()
        store = opened.result(timeout=30)
    with store:
        assert store.created_schema is False
        fill(store, "c", 2)
        assert store.integrity_check() == []


# -- encoding -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ascii_database(new_database: Callable[..., str]) -> str:
    return new_database("ENCODING 'SQL_ASCII' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'")


def test_an_sql_ascii_database_holds_a_store(ascii_database: str) -> None:
    url = _fresh_schema(ascii_database)
    with PostgresStore(url) as store:
        records = fill(store, "c", 3)
        assert store.conversations() == ["c"]
        stored = store.load("c")
        assert stored is not None
        assert stored.records == tuple(records)
        caught = store.load_after("c", 1)
        assert caught is not None
        assert caught.records == tuple(records[1:])
        root = make_root("é✓").encode()
        assert store.create_root("é✓", root) == root
        assert store.conversations() == ["c", "é✓"]
        assert store.integrity_check() == []
        octets = _conn(store).execute(
            "SELECT octet_length(conversation) FROM prefixlock_roots WHERE conversation <> 'c'"
        )
        assert octets.fetchall() == [(5,)]  # stored as UTF-8


def test_a_client_encoding_in_the_url_gives_way_to_utf8(postgres_url: str) -> None:
    with PostgresStore(_with_query(postgres_url, "client_encoding=LATIN1")) as store:
        root = make_root("é✓").encode()
        assert store.create_root("é✓", root) == root
        assert store.conversations() == ["é✓"]
        assert _conn(store).execute("SHOW client_encoding").fetchone() == ("UTF8",)


# -- connect_timeout ------------------------------------------------------------------------


def _timeout(store: object) -> str:
    assert isinstance(store, PostgresStore)
    return _conn(store).info.get_parameters()["connect_timeout"]


def test_the_connect_timeout_is_the_callers_then_the_urls_then_10_s(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    url = _with_query(postgres_url, "connect_timeout=3")
    with PostgresStore(postgres_url) as store:
        assert _timeout(store) == "10"
    with PostgresStore(url) as store:
        assert _timeout(store) == "3"
    with open_store(url) as store:
        assert _timeout(store) == "3"
    with PostgresStore(url, connect_timeout=4) as store:
        assert _timeout(store) == "4"
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "5")
    with PostgresStore(postgres_url) as store:
        assert _timeout(store) == "5"
    with PostgresStore(url) as store:
        assert _timeout(store) == "3"


def test_a_server_that_never_answers_is_given_up_after_the_urls_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = (
            f"postgresql://postgres@127.0.0.1:{port}/x"
            "?connect_timeout=2&sslmode=disable&gssencmode=disable"
        )
        started = time.monotonic()
        with pytest.raises(CheckpointError) as info:
            open_store(url)
        waited = time.monotonic() - started
    assert str(info.value) == (
        f"{url}: postgresql error while opening the store: connection timeout expired"
    )
    assert waited < 6  # the URL's 2 s, not the default's 10 s
