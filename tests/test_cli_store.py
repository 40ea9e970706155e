"""`prefixlock inspect / integrity / export / import` on a real SQLite store."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conv_helpers import background, context_b, example_bundle, user
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.store.sqlite import SQLiteStore


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "state.db"
    with SQLiteStore(path) as store:
        conv = Conversation.open(store, example_bundle(), "conv-1")
        conv.handle(user("u1"))
        conv.assistant("reading", [ToolCall("c1", "read_file", {"path": "a.py"})])
        conv.tool_results([ToolResult("c1", "x = 1\n")])
        conv.assistant("done")
        conv.handle(background("b1", "subagent finished"))
        conv.assistant("noted")
        conv.handle(
            user(
                "u2",
                context=context_b(),
                compact={"summary": "All of it."},
                timestamp="2026-12-02T10:00:00Z",
            )
        )
    return path


def test_inspect_prints_root_records_epochs_and_current_request(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(db), "conv-1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("conversation conv-1\nroot:\n  bundle digest  sha256:")
    assert "records: 7 (head sha256:" in out
    assert (
        "      1  user         u1                           request-context:u1 runtime:u1\n" in out
    )
    assert (
        "      7  user         u2                           "
        "request-context:u2 summary:1 runtime:u2  RESET  at 2026-12-02T10:00:00Z\n" in out
    )
    assert "  epoch 0 from record 1\n  epoch 1 from record 7\n" in out
    assert main(["inspect", str(db), "conv-1", "--json"]) == 0
    records = canonical.loads(capsys.readouterr().out)["records"]
    assert [r["timestamp"] for r in records] == [None] * 6 + ["2026-12-02T10:00:00Z"]
    assert main(["inspect", str(db), "conv-1"]) == 0
    out = capsys.readouterr().out
    assert "current request: epoch 1, 3 messages, cache key prefixlock-" in out
    assert "cache hints: tools, instructions, context@0, tail@2\n" in out


def test_inspect_lists_conversations_and_refuses_unknown(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["inspect", str(db)]) == 0
    assert capsys.readouterr().out == "conv-1\n"
    assert main(["inspect", str(db), "nope"]) == 2
    assert capsys.readouterr().err == (
        "prefixlock inspect: no conversation 'nope' in the store (stored: conv-1)\n"
    )


def test_integrity_passes_then_detects_a_flipped_byte(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["integrity", str(db)]) == 0
    assert capsys.readouterr().out == f"{db}: ok (1 conversation)\n"
    with sqlite3.connect(db) as conn:
        body = conn.execute("SELECT body FROM records WHERE seq = 2").fetchone()[0]
        conn.execute(
            "UPDATE records SET body = ? WHERE seq = 2", (body.replace(b"reading", b"readinG"),)
        )
    assert main(["integrity", str(db)]) == 1
    err = capsys.readouterr().err
    assert "record 2" in err
    assert err.endswith(f"prefixlock integrity: 1 problem(s) in {db}\n")


def test_export_then_import_round_trips(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "conv.jsonl"
    assert main(["export", str(db), "conv-1", "--out", str(out)]) == 0
    other = tmp_path / "other.db"
    assert main(["import", str(other), str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(db), "conv-1", "--json"]) == 0
    original = capsys.readouterr().out
    assert main(["inspect", str(other), "conv-1", "--json"]) == 0
    assert capsys.readouterr().out == original


def test_import_of_a_truncated_file_creates_no_store(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "conv.jsonl"
    assert main(["export", str(db), "conv-1", "--out", str(out)]) == 0
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:-1]))  # drop the trailer
    target = tmp_path / "new.db"
    assert main(["import", str(target), str(out)]) == 2
    assert "prefixlock import: " in capsys.readouterr().err
    assert not target.exists()


def test_inspect_escapes_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "esc.db"
    conversation = "conv-\x1b]0;pwned\x07"
    with SQLiteStore(path) as store:
        conv = Conversation.open(store, example_bundle(), conversation)
        conv.handle(user("u\x1b[2J\u202e1", "look", conversation=conversation))
    assert main(["inspect", str(path), conversation]) == 0
    text = capsys.readouterr().out
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "conversation conv-\\u001b]0;pwned\\u0007\n" in text
    assert "u\\u001b[2J\\u202e1" in text
    assert main(["inspect", str(path)]) == 0
    assert "\x1b" not in capsys.readouterr().out
    assert main(["inspect", str(path), "conv-\x1b[31m"]) == 2
    assert "\x1b" not in capsys.readouterr().err
