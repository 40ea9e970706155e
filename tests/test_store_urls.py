"""Store URLs: where a password is, read as libpq reads it, and never shown.

libpq ends a URL's userinfo at the first ``@`` met before any ``/`` (a ``?`` or ``#``
does not end it), and reads the query's parameter names percent-decoded; redaction
follows the same rule. The libpq checks ask psycopg's own parser
(:func:`psycopg.conninfo.conninfo_to_dict`); the store checks need the server
(tests/conftest.py: skipped when none is reachable).
"""

from __future__ import annotations

import pytest
from prefixlock.core.errors import CheckpointError
from prefixlock.store.postgres import PostgresStore
from prefixlock.store.urls import open_store, redact_url, url_password
from psycopg.conninfo import conninfo_to_dict

#: Each URL, its redacted form, and the passwords to scrub from messages.
CASES = [
    # a '?' or '#' in the password: libpq's userinfo runs to the '@'
    (
        "postgresql://postgres:hun?ter2@127.0.0.1:1/x",
        "postgresql://postgres:***@127.0.0.1:1/x",
        ["hun?ter2"],
    ),
    (
        "postgresql://postgres:hun#ter2@127.0.0.1:1/x",
        "postgresql://postgres:***@127.0.0.1:1/x",
        ["hun#ter2"],
    ),
    (
        "postgresql://u:p?w@h?password=a#b",
        "postgresql://u:***@h?password=***",
        ["a#b", "p?w"],
    ),
    # a percent-encoded parameter name is the parameter it decodes to
    (
        "postgresql://postgres:hunter2@127.0.0.1:1/x?pass%77ord=sekrit",
        "postgresql://postgres:***@127.0.0.1:1/x?pass%77ord=***",
        ["hunter2", "sekrit"],
    ),
    (
        "postgresql://h/x?%70assword=s%41&sslpass%77ord=k&user=q",
        "postgresql://h/x?%70assword=***&sslpass%77ord=***&user=q",
        ["s%41", "sA", "k"],
    ),
    # a value runs to the next '&': libpq gives '#' no meaning
    ("postgresql://h/x?password=a#b&user=q", "postgresql://h/x?password=***&user=q", ["a#b"]),
    # libpq's password ends at the first '@' ("p"), its database is "x@h/y"; the author's
    # password, up to the last '@' before the query, is hidden whole (issue 43, finding 6)
    ("postgresql://u:p@w/x@h/y", "postgresql://u:***@h/y", ["p@w/x", "p", "w", "x"]),
    # a '/' in the password: libpq reads host "u", port "pa", database "ss@h/db"
    ("postgresql://u:pa/ss@h/db", "postgresql://u:***@h/db", ["pa/ss", "pa", "ss"]),
    ("postgresql://u:a/b@c@h:5432/db", "postgresql://u:***@h:5432/db", ["a/b@c", "a", "b", "c"]),
    ("postgresql://u:pw@h/x#frag", "postgresql://u:***@h/x#frag", ["pw"]),
    ("postgresql://u:p:w@h/x", "postgresql://u:***@h/x", ["p:w"]),
    # an unencoded '@' in the password: libpq's password ends at the first one, the host
    # name then holds the rest; both are hidden
    (
        "postgres://app:p@ss@db/x?sslmode=require",
        "postgres://app:***@db/x?sslmode=require",
        ["p@ss", "ss", "p"],
    ),
    # libpq refuses the upper-case name, but it is masked all the same
    (
        "postgresql://127.0.0.1:1/x?PASSWORD=sekrit&user=postgres",
        "postgresql://127.0.0.1:1/x?PASSWORD=***&user=postgres",
        ["sekrit"],
    ),
    ("postgresql://h?password=z", "postgresql://h?password=***", ["z"]),
]


@pytest.mark.parametrize(("url", "redacted", "passwords"), CASES)
def test_redaction_reads_the_url_as_libpq_does(
    url: str, redacted: str, passwords: list[str]
) -> None:
    assert redact_url(url) == redacted
    assert url_password(url) == passwords


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://postgres:Sek?r1t@h/x",
        "postgresql://postgres:Sek#r1t@h:5/x?sslmode=disable",
        "postgresql://Sek:r1t?x@h/x",
        "postgresql://u:Sek%3Fr1t@h/x",
        "postgresql://h/x?pass%77ord=Sekr1t&user=u",
        "postgresql://h/x?password=Sek#r1t&user=u",
        "postgresql://h?sslpassword=Sekr1t",
        "postgresql://u:Sekr1t@h1:1,h2:2/x",
        "postgresql://u:Sekr1t@[::1]/x",
        "postgresql://:Sekr1t@/x?host=/tmp",
        "postgresql://h:5432?password=Sek@r1t",
    ],
)
def test_every_password_libpq_reads_is_found_and_hidden(url: str) -> None:
    read = conninfo_to_dict(url)
    secrets = [str(read[k]) for k in ("password", "sslpassword") if k in read]
    assert secrets
    for secret in secrets:
        assert secret in url_password(url)
        assert secret not in redact_url(url)


def test_an_error_names_the_store_without_a_password_libpq_reads() -> None:
    for password in ("hun?ter2", "hun#ter2"):
        with pytest.raises(CheckpointError) as info:
            open_store(f"postgresql://postgres:{password}@127.0.0.1:1/x?connect_timeout=2")
        assert str(info.value) == (
            "postgresql://postgres:***@127.0.0.1:1/x?connect_timeout=2: postgresql error while "
            'opening the store: connection failed: connection to server at "127.0.0.1", '
            "port 1 failed: Connection refused Is the server running on that host and "
            "accepting TCP/IP connections?"
        )


@pytest.mark.parametrize("password", ["hun/ter2", "hu@n/ter2", "h@un@ter2"])
def test_an_error_never_shows_a_password_holding_a_slash_or_an_at(password: str) -> None:
    # libpq reads such a password as pieces of the host, port and database names, and
    # quotes them in its errors (issue 43, finding 6)
    with pytest.raises(CheckpointError) as info:
        open_store(f"postgresql://postgres:{password}@127.0.0.1:1/x?connect_timeout=2")
    message = str(info.value)
    assert message.startswith(
        "postgresql://postgres:***@127.0.0.1:1/x?connect_timeout=2: postgresql error while "
        "opening the store: "
    )
    for piece in ("hun", "ter2", password):
        assert piece not in message


def test_a_password_found_in_the_name_does_not_mangle_it() -> None:
    # Scrubbing replaces the password in the server's message, not in the store's name.
    with pytest.raises(CheckpointError) as info:
        open_store("postgresql://postgres:postgres@127.0.0.1:1/x?connect_timeout=2")
    assert str(info.value) == (
        "postgresql://postgres:***@127.0.0.1:1/x?connect_timeout=2: postgresql error while "
        'opening the store: connection failed: connection to server at "127.0.0.1", port 1 '
        "failed: Connection refused Is the server running on that host and accepting TCP/IP "
        "connections?"
    )


def test_an_open_store_names_itself_without_the_password(postgres_database: str) -> None:
    url = postgres_database.replace("://postgres@", "://postgres:hun?ter2@")
    shown = postgres_database.replace("://postgres@", "://postgres:***@")
    with open_store(url) as store:  # trust authentication ignores the password
        assert isinstance(store, PostgresStore)
        assert store.name == shown
        assert repr(store) == f"PostgresStore({shown!r})"
