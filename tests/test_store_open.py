"""Opening a store: what hydration refuses, and read-only copies (issue 43 #10)."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conv_helpers import example_bundle, user
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError
from prefixlock.runtime.conversation import Conversation
from prefixlock.store.sqlite import SQLiteStore


def _store(path: Path) -> None:
    with SQLiteStore(path) as store:
        conv = Conversation.open(store, example_bundle(), "conv-1")
        conv.handle(user("u1"))
        conv.assistant("hello")


def _craft_repeated_key(path: Path) -> None:
    """Record 1 with a part's key written twice, every digest of the chain recomputed
    (what whoever can write the store can do): the content read is unchanged."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT seq, body, digest FROM records ORDER BY seq").fetchall()
        first = rows[0][1].replace(b'"type":"text"', b'"type":"text","type":"text"', 1)
        assert first != rows[0][1]
        first_digest = canonical.sha256_hex(first)
        second = rows[1][1].replace(rows[0][2].encode(), first_digest.encode())
        second_digest = canonical.sha256_hex(second)
        conn.execute("UPDATE records SET body = ?, digest = ? WHERE seq = 1", (first, first_digest))
        conn.execute(
            "UPDATE records SET body = ?, digest = ? WHERE seq = 2", (second, second_digest)
        )
        conn.execute("UPDATE heads SET digest = ?", (second_digest,))
    conn.close()


def test_open_refuses_a_record_with_a_repeated_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hydration took the parts of a record inside the chain as the C parser read them
    (the last of a repeated key winning), while ``integrity`` refused them."""
    db = tmp_path / "state.db"
    _store(db)
    _craft_repeated_key(db)
    with SQLiteStore(db) as store, pytest.raises(CheckpointError) as err:
        Conversation.open(store, example_bundle(), "conv-1")
    assert str(err.value) == "record is not valid JSON: duplicate key 'type'"
    assert main(["integrity", str(db)]) == 1
    assert capsys.readouterr().err == (
        "conversation 'conv-1': record is not valid JSON: duplicate key 'type'\n"
        f"prefixlock integrity: 1 problem(s) in {db}\n"
    )


@contextlib.contextmanager
def _read_only_copy(source: Path) -> Iterator[Path]:
    """A copy of the store in a folder nobody may write to (the file too)."""
    folder = Path(tempfile.mkdtemp(prefix="prefixlock-ro-"))
    try:
        copy = folder / "copy.db"
        shutil.copyfile(source, copy)
        copy.chmod(0o444)
        folder.chmod(0o555)
        yield copy
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


def _as_reader(run: Callable[[], str]) -> str:
    """``run()`` by a process that cannot write: this one, or as root (whom file modes
    do not bind) a forked child that became ``nobody`` first."""
    if os.geteuid() != 0:
        return run()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, run().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        text = stream.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    return text


def _cli(*argv: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return f"{code}|{out.getvalue()}|{err.getvalue()}"


def test_inspect_and_integrity_read_a_read_only_copy(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _store(db)
    with _read_only_copy(db) as copy:
        assert _as_reader(lambda: _cli("integrity", str(copy))) == (
            f"0|{copy}: ok (1 conversation)\n|"
        )
        listed = _as_reader(lambda: _cli("inspect", str(copy)))
        assert listed == "0|conv-1\n|"
        assert sorted(p.name for p in copy.parent.iterdir()) == ["copy.db"]


def test_a_read_only_open_writes_nothing(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    _store(db)
    before = db.read_bytes()
    with SQLiteStore(db, read_only=True) as store:
        assert store.conversations() == ["conv-1"]
        with pytest.raises(CheckpointError) as err:
            Conversation.open(store, example_bundle(), "conv-2")
        assert "attempt to write a readonly database" in str(err.value)
    assert db.read_bytes() == before
    empty = tmp_path / "empty.db"
    empty.touch()
    with pytest.raises(CheckpointError) as err:
        SQLiteStore(empty, read_only=True)
    assert str(err.value) == f"{empty} is not a prefixlock store: it is empty"
