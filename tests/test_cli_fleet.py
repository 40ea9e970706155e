"""`prefixlock store init URL` and `prefixlock bench --soak` on SQLite and PostgreSQL."""

from __future__ import annotations

import json
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


def _soak(url: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    args = ["bench", "--soak", "--store", url, "--workers", "3", "--conversations", "3"]
    assert main([*args, "--events", "40", "--json"]) == 0
    report: dict[str, object] = json.loads(capsys.readouterr().out)
    assert report["format"] == "prefixlock.bench-soak/1"
    assert report["store"] == redact_url(url)
    assert report["events"] == 3 * 40
    assert (report["lost"], report["duplicated"], report["errors_surfaced"]) == (0, 0, 0)
    assert report["identical"] == 3 and report["differ"] == []
    assert report["integrity_problems"] == [] and report["worker_exit_codes"] == [0, 0, 0]
    assert isinstance(report["duplicate_deliveries"], int) and report["duplicate_deliveries"] > 0
    assert isinstance(report["events_per_second"], float) and report["events_per_second"] > 0
    return report


def test_soak_through_the_cli_on_sqlite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _soak(f"sqlite://{tmp_path}/soak.db", capsys)


def test_soak_through_the_cli_on_postgres(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report = _soak(_with_password(postgres_url), capsys)
    assert "hunter2" not in json.dumps(report)


def test_soak_prints_its_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite://{tmp_path}/soak.db"
    assert main(["bench", "--soak", "--store", url, "--workers", "2", "--events", "6"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"soak on {url}: 2 workers x 8 conversations x 6 events"
    assert lines[1].startswith("  events           48 in ") and lines[1].endswith(" events/s)")
    assert lines[3:7] == [
        "  lost             0",
        "  duplicated       0",
        "  errors surfaced  0",
        "  byte-identical   8 of 8 conversations (records and next request body, vs a "
        "single-process replay)",
    ]


def test_soak_refuses_bad_sizes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--soak", "--workers", "0"]) == 2
    assert capsys.readouterr().err.endswith(
        "prefixlock bench: --workers must be at least 1, not 0\n"
    )


def test_store_bench_compares_history_lengths_next_to_sqlite(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = _with_password(postgres_url)
    assert main(["bench", "--store", url, "--calls", "40,60", "--json"]) == 0
    captured = capsys.readouterr()
    assert "hunter2" not in captured.out + captured.err
    report = json.loads(captured.out)
    assert report["format"] == "prefixlock.bench-store/1"
    assert report["lengths"] == [40, 60]
    assert [s["store"] for s in report["stores"]] == ["temporary SQLite file", redact_url(url)]
    for store in report["stores"]:
        short, long = store["rows"]
        assert (short["calls"], long["calls"]) == (40, 60)
        # a warm worker reads what the other appended, at any length; a cold open all
        assert abs(short["warm_bytes_per_call"] - long["warm_bytes_per_call"]) < 100
        assert long["cold_bytes_per_call"] > short["cold_bytes_per_call"]
        assert short["warm_median_ms"] > 0 and store["warm_ratio"] > 0
        # the store's appends of a warm call, and the bare durable append of the same
        # records on the same kind of store (a one-table SQLite file; a table of its own
        # in the database, dropped after)
        for row in (short, long):
            assert 0 < row["warm_appends_median_ms"] < row["warm_median_ms"]
            assert row["floor_median_ms"] > 0
            assert row["appends_vs_floor"] == round(
                row["warm_appends_median_ms"] / row["floor_median_ms"], 2
            )
        worst = max(row["appends_vs_floor"] for row in store["rows"])
        assert store["appends_vs_floor"] == worst
    import psycopg  # the postgres_url fixture has skipped the test without it

    with psycopg.connect(postgres_url) as conn:
        left = conn.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_name LIKE 'prefixlock_bench%'"
        ).fetchall()
    assert left == []
    # every figure with its target; the tested store's are the ones all_met judges
    names = [t["name"] for t in report["targets"]]
    assert names == [
        f"{s}_{n}"
        for s in ("sqlite", "store")
        for n in ("warm_flat", "warm_bytes_flat", "appends_vs_floor")
    ]
    for target in report["targets"]:
        assert {"what", "value", "op", "limit", "met"} <= set(target)
    judged = [t["met"] for t in report["targets"] if t["name"].startswith("store_")]
    assert report["all_met"] == all(judged)


def test_store_bench_refuses_short_histories(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--store", "sqlite:///unused.db", "--calls", "10"]) == 2
    assert capsys.readouterr().err == (
        "prefixlock bench: bench --store: every history length must be at least 37 calls, not 10\n"
    )


def test_the_store_bench_floor_is_primed_past_its_wal_growth(tmp_path: Path) -> None:
    # As the bench's warm-up (test_bench): a floor whose WAL file still grows would
    # make the bare append slower than it is, and the store's appends look cheap.
    from prefixlock.bench import fleet
    from prefixlock.store.sqlite import DurableFloor

    path = tmp_path / "floor.db"
    floor = fleet._primed(DurableFloor(path))
    try:
        with sqlite3.connect(path) as conn:
            pages = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
            size = conn.execute("PRAGMA page_size").fetchone()[0]
        assert Path(f"{path}-wal").stat().st_size >= pages * size
    finally:
        floor.close()
