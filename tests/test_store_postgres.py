"""PostgreSQL store specifics (schema marker and version, credentials) and store URLs.

The contract every store shares is in test_store_contract.py; this file holds what only
the PostgreSQL store or the URL handling does. Real server, no mocks (tests/conftest.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from conv_helpers import example_bundle, user
from helpers_store import fill, make_record
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.errors import (
    CheckpointError,
    CheckpointRaceError,
    PrefixlockError,
    UsageError,
)
from prefixlock.runtime.conversation import Conversation
from prefixlock.store.postgres import SCHEMA_VERSION, TABLES, PostgresStore
from prefixlock.store.sqlite import SQLiteStore
from prefixlock.store.urls import open_store, redact_url, sqlite_path, url_password

# -- redaction ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://app:s3cret@db:5432/x", "postgresql://app:***@db:5432/x"),
        ("postgres://app:p@ss@db/x?sslmode=require", "postgres://app:***@db/x?sslmode=require"),
        ("postgresql://app@db/x", "postgresql://app@db/x"),
        (
            "postgresql://db/x?user=a&password=hunter2&x=1",
            "postgresql://db/x?user=a&password=***&x=1",
        ),
        ("postgresql://:tok@db", "postgresql://:***@db"),
        ("sqlite:///var/lib/a.db", "sqlite:///var/lib/a.db"),
        ("state/conversations.db", "state/conversations.db"),
    ],
)
def test_redact_url_hides_every_password(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_url_password_lists_raw_and_decoded_forms() -> None:
    assert url_password("postgresql://u:p%40ss@h/x?password=q") == ["p%40ss", "p@ss", "q"]
    assert url_password("postgresql://u@h/x") == []


def test_connection_error_names_the_store_without_its_password() -> None:
    url = "postgresql://postgres:s3cr%40t-pw@127.0.0.1:1/x?connect_timeout=2"
    with pytest.raises(CheckpointError) as info:
        open_store(url)
    message = str(info.value)
    assert message.startswith(
        "postgresql://postgres:***@127.0.0.1:1/x?connect_timeout=2: postgresql error while "
        'opening the store: connection failed: connection to server at "127.0.0.1", port 1 '
        "failed: Connection refused"
    )
    assert "s3cr" not in message


def test_malformed_url_error_keeps_the_password_out(postgres_database: str) -> None:
    url = postgres_database.replace("://postgres@", "://postgres:hunter2%zz@")
    with pytest.raises(CheckpointError) as info:
        open_store(url)
    assert "hunter2" not in str(info.value)
    assert str(info.value).startswith(redact_url(url) + ": postgresql error while opening")


# -- URLs --------------------------------------------------------------------------------


def test_sqlite_urls_and_plain_paths_name_files() -> None:
    assert sqlite_path("sqlite:///var/lib/a.db") == Path("/var/lib/a.db")
    assert sqlite_path("sqlite://state/a.db") == Path("state/a.db")
    assert sqlite_path("state/a.db") == Path("state/a.db")
    with pytest.raises(UsageError) as info:
        sqlite_path("mysql://u:pw@h/x")
    assert str(info.value) == (
        "mysql://u:***@h/x: unknown store URL scheme 'mysql' (use sqlite:///path/to.db, "
        "postgresql://... or a file path)"
    )


def test_open_store_opens_sqlite_by_url_and_by_path(tmp_path: Path) -> None:
    with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SQLiteStore)
        fill(store, "c", 2)
    with open_store(str(tmp_path / "a.db")) as store:
        assert store.conversations() == ["c"]


def test_open_store_opens_postgres_by_either_scheme(postgres_url: str) -> None:
    with open_store(postgres_url) as store:
        assert isinstance(store, PostgresStore)
        fill(store, "c", 2)
    other = postgres_url.replace("postgresql://", "postgres://", 1)
    with open_store(other) as store:
        assert store.conversations() == ["c"]


def test_a_postgres_url_without_psycopg_says_how_to_install_it() -> None:
    script = (
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if it were not installed\n"
        "import prefixlock\n"
        "try:\n"
        "    prefixlock.open_store('postgresql://u:pw@db/x')\n"
        "except prefixlock.PrefixlockError as err:\n"
        "    print(type(err).__name__, err)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "UsageError postgresql://u:***@db/x: a PostgreSQL store needs psycopg 3, which is not "
        "installed: pip install 'prefixlock[postgres]'\n"
    )
    assert issubclass(UsageError, PrefixlockError)


# -- schema --------------------------------------------------------------------------------


def _sql(url: str, *statements: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def test_schema_is_created_once_with_its_marker_and_constraints(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()
    with PostgresStore(postgres_url) as store:  # a second open finds it
        fill(store, "c", 1)
    with psycopg.connect(postgres_url) as conn:
        meta = dict(conn.execute("SELECT key, value FROM prefixlock_meta").fetchall())
        assert meta == {"application": "prefixlock", "schema_version": str(SCHEMA_VERSION)}
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        }
        assert tables == set(TABLES)
        unique = {
            r[0]
            for r in conn.execute(
                "SELECT pg_get_indexdef(indexrelid) FROM pg_index "
                "WHERE indrelid = 'prefixlock_records'::regclass AND indisunique"
            )
        }
        assert {u.rpartition(" USING btree ")[2] for u in unique} == {
            "(conversation, seq)",
            "(conversation, event_id)",
        }


def _round_trips(store: PostgresStore, action: Callable[[], object]) -> list[str]:
    """The queries ``action`` sends, one per round trip: libpq's protocol trace of the
    store's connection, cut at each ReadyForQuery (the server's end of one exchange)."""
    conn = store._conn
    assert conn is not None
    fd, path = tempfile.mkstemp()
    try:
        conn.pgconn.trace(fd)
        try:
            action()
        finally:
            conn.pgconn.untrace()
        trace = Path(path).read_text(encoding="utf-8", errors="replace")
    finally:
        os.close(fd)
        os.unlink(path)
    sent: list[str] = []
    exchange: list[str] = []
    for line in trace.splitlines():
        fields = line.split("\t")
        if fields[1] == "F" and fields[3] in {"Query", "Parse"}:
            exchange.append(fields[4].strip())
        if fields[1] == "B" and fields[3] == "ReadyForQuery":
            sent.append(" ".join(exchange))
            exchange = []
    return sent


def test_an_append_that_goes_in_is_one_round_trip(postgres_url: str) -> None:
    # A fleet worker's store is across a network: each round trip is latency per record.
    # The head moves from seq - 1 and the record goes in within one statement.
    with PostgresStore(postgres_url) as store:
        records = fill(store, "c", 1)
        second = make_record(2, "e2").encode("c", canonical.sha256_hex(records[0]))
        sent = _round_trips(store, lambda: store.append("c", 2, "e2", second))
        assert len(sent) == 1, sent
        assert sent[0].startswith('"" "WITH moved AS (UPDATE prefixlock_heads SET seq')
        stored = store.load("c")
        assert stored is not None
        assert stored.head == canonical.sha256_hex(second)
        assert stored.records == (records[0], second)


def test_a_refused_append_still_says_why_and_moves_nothing(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as store:
        records = fill(store, "c", 2)
        head = canonical.sha256_hex(records[1])
        before = store.load("c")
        again = make_record(3, "e1").encode("c", head)
        with pytest.raises(CheckpointRaceError) as info:
            store.append("c", 3, "e1", again)
        assert str(info.value) == "conversation 'c': event 'e1' is already stored (record 1)"
        with pytest.raises(CheckpointRaceError) as info:
            store.append("c", 2, "e3", again)
        assert str(info.value) == "conversation 'c': seq 2 is taken (head is 2)"
        with pytest.raises(CheckpointRaceError) as info:  # past BIGINT: never sent
            store.append("c", 2**63, "e3", again)
        assert str(info.value) == (
            f"conversation 'c': seq {2**63} does not follow the head 2 (expected 3)"
        )
        assert store.load("c") == before
        # A head that lags its rows (a damaged store): the row at seq is already there.
        _sql(postgres_url, "UPDATE prefixlock_heads SET seq = 1 WHERE conversation = 'c'")
        with pytest.raises(CheckpointRaceError) as info:
            store.append("c", 2, "e9", again)
        assert str(info.value).startswith(
            "conversation 'c': record 2 / event 'e9' is already stored (duplicate key value "
            'violates unique constraint "prefixlock_records_pkey"'
        )


def test_another_programs_tables_are_refused(postgres_url: str) -> None:
    _sql(postgres_url, "CREATE TABLE prefixlock_records (id int)")
    with pytest.raises(CheckpointError) as info:
        PostgresStore(postgres_url)
    assert str(info.value) == (
        f"{redact_url(postgres_url)} is not a prefixlock store: it holds another program's "
        "tables named prefixlock_records (no prefixlock_meta table)"
    )


def test_another_programs_meta_table_is_refused(postgres_url: str) -> None:
    _sql(postgres_url, "CREATE TABLE prefixlock_meta (name text, setting text)")
    with pytest.raises(CheckpointError) as info:
        PostgresStore(postgres_url)
    assert str(info.value) == (
        f"{redact_url(postgres_url)} is not a prefixlock store: table prefixlock_meta belongs "
        "to another program (no application 'prefixlock' row)"
    )


def test_unknown_schema_version_is_refused(postgres_url: str) -> None:
    PostgresStore(postgres_url).close()
    _sql(postgres_url, "UPDATE prefixlock_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(CheckpointError) as info:
        PostgresStore(postgres_url)
    assert str(info.value) == (
        f"{redact_url(postgres_url)}: store schema version 99 is not supported; this "
        "prefixlock reads schema version 1"
    )


def test_closed_store_refuses_and_close_is_idempotent(postgres_url: str) -> None:
    store = PostgresStore(postgres_url)
    store.close()
    store.close()
    with pytest.raises(CheckpointError, match=r": store is closed$"):
        store.load("c")


def test_database_errors_become_checkpoint_errors(postgres_url: str) -> None:
    with PostgresStore(postgres_url) as store:
        with pytest.raises(CheckpointError) as info:
            store.create_root("nul\x00byte", b"{}")
        assert "postgresql error while creating conversation 'nul\\x00byte'" in str(info.value)
        assert store.conversations() == []  # the store stays usable after an error


# -- the CLI takes URLs --------------------------------------------------------------------


def test_cli_store_commands_take_a_postgres_url(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with PostgresStore(postgres_url) as store:
        conv = Conversation.open(store, example_bundle(), "conv-1")
        conv.handle(user("u1"))
        conv.assistant("done")
    shown = redact_url(postgres_url)
    assert main(["integrity", postgres_url]) == 0
    assert capsys.readouterr().out == f"{shown}: ok (1 conversation)\n"
    out = tmp_path / "conv.jsonl"
    assert main(["export", postgres_url, "conv-1", "--out", str(out)]) == 0
    target = f"sqlite://{tmp_path}/copy.db"
    assert main(["import", target, str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\nimported conv-1 into {target}\n"
    assert main(["inspect", postgres_url, "conv-1", "--json"]) == 0
    original = capsys.readouterr().out
    assert main(["inspect", target, "conv-1", "--json"]) == 0
    assert capsys.readouterr().out == original
    assert main(["inspect", f"sqlite://{tmp_path}/none.db"]) == 2
    assert (
        capsys.readouterr().err
        == f"prefixlock inspect: sqlite://{tmp_path}/none.db: no such store\n"
    )


def test_timestamped_records_and_inspect_cache_on_postgres(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fleet's store: records with their calls' timestamps (format 3, 4 with context
    sections) and usage go in
    and come out byte for byte, and inspect --cache prices the calls at those times."""
    from prefixlock.core.messages import TextPart
    from prefixlock.core.output import ModelOutput, Usage

    used = Usage(20_000, 0, 20_000, 30, None, "{}")
    with PostgresStore(postgres_url) as store:
        conv = Conversation.open(store, example_bundle(), "fleet")
        conv.store_wire = False  # pins the formats without wire templates
        conv.handle(user("u1", conversation="fleet", timestamp="2026-12-02T10:00:00Z"))
        conv.record(ModelOutput("anthropic", (TextPart("a"),), "end_turn", used))
        conv.handle(user("u2", conversation="fleet", timestamp="2026-12-02T10:20:00Z"))
        conv.record(ModelOutput("anthropic", (TextPart("b"),), "end_turn", used))
        stored = store.load("fleet")
        assert stored is not None
        # the first turn's record also carries its context sections (format 4)
        assert [canonical.loads(r)["format"] for r in stored.records] == [4, 2, 3, 2]
        again = Conversation.open(store, example_bundle(), "fleet")
        assert again.head == conv.head
    assert main(["inspect", postgres_url, "fleet", "--cache", "--json"]) == 0
    calls = canonical.loads(capsys.readouterr().out)["calls"]
    assert [c["timestamp"] for c in calls] == ["2026-12-02T10:00:00Z", "2026-12-02T10:20:00Z"]
    assert [c["predicted_cached_tokens"] for c in calls] == [0, 0]  # 20 min: expired
