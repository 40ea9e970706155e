"""`prefixlock store init URL` and `prefixlock bench --soak` on SQLite and PostgreSQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.store.urls import redact_url


def test_store_init_creates_a_sqlite_store_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite://{tmp_path}/fleet.db"
    assert main(["store", "init", url]) == 0
    assert capsys.readouterr().out == f"{url}: created the prefixlock store schema (version 1)\n"
    assert main(["store", "init", url]) == 0
    assert capsys.readouterr().out == (
        f"{url}: already a prefixlock store (schema version 1); nothing changed\n"
    )


def test_store_init_refuses_another_programs_sqlite_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE accounts (id INTEGER)")
    assert main(["store", "init", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"prefixlock store: {path} is not a prefixlock store: it is another program's "
        "SQLite database (application_id=0, 1 schema objects)\n"
    )


def _with_password(url: str) -> str:
    return url.replace("postgresql://postgres@", "postgresql://postgres:hunter2@", 1)


def test_store_init_creates_the_postgres_schema_and_redacts_the_password(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _with_password(postgres_url)  # trust authentication ignores the password
    shown = redact_url(url)
    assert "hunter2" not in shown and ":***@" in shown
    assert main(["store", "init", url]) == 0
    assert capsys.readouterr().out == (
        f"{shown}: created the prefixlock store schema (version 1)\n"
    )
    assert main(["store", "init", url]) == 0
    captured = capsys.readouterr()
    assert captured.out == (
        f"{shown}: already a prefixlock store (schema version 1); nothing changed\n"
    )
    assert "hunter2" not in captured.out + captured.err


def test_store_init_refuses_another_programs_postgres_tables(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg  # the postgres_url fixture skipped if it is missing

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE prefixlock_roots (id int)")
    url = _with_password(postgres_url)
    assert main(["store", "init", url]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"prefixlock store: {redact_url(url)} is not a prefixlock store: it holds another "
        "program's tables named prefixlock_roots (no prefixlock_meta table)\n"
    )


def test_store_without_an_action_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store"]) == 2
    assert "ACTION" in capsys.readouterr().err
