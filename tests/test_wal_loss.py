"""WAL loss is detected, never silent (issue 14).

SQLite's ``-wal`` file is part of the database: the last commits live only there until a
checkpoint. A copy of the database taken without it, or with it truncated or damaged,
opens cleanly at an *older* state -- ``integrity`` alone cannot tell. Every append returns
the new head; a caller that keeps it and reopens with ``expect_head`` (or runs
``prefixlock integrity --expect-head``) is refused a store that is behind it.

The damaged stores are copies of the db and its -wal taken while a connection is open
(exactly what a backup tool or a crash-time snapshot sees), then the copy's -wal is
deleted, truncated or has one bit flipped.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conv_helpers import CONV, example_bundle, user
from prefixlock.cli.commands import main
from prefixlock.core.errors import CheckpointError, UsageError
from prefixlock.runtime.conversation import Conversation
from prefixlock.store.contract import Head, MemoryStore, StoredConversation
from prefixlock.store.sqlite import SQLiteStore

Damage = Callable[[Path], None]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Head]]:
    """A pristine copy of db + -wal (3 records, none checkpointed) and the last head."""
    folder = tmp_path_factory.mktemp("wal")
    store = SQLiteStore(folder / "live.db")
    try:
        conv = Conversation.open(store, example_bundle(), CONV)
        conv.handle(user("u1"))
        conv.assistant("a1")
        conv.handle(user("u2", "and now?"))
        head = conv.head
        pristine = folder / "pristine"
        pristine.mkdir()
        for suffix in ("", "-wal"):
            shutil.copyfile(folder / f"live.db{suffix}", pristine / f"copy.db{suffix}")
    finally:
        store.close()
    assert (pristine / "copy.db-wal").stat().st_size > 0
    yield pristine / "copy.db", head


def damaged(tmp_path: Path, pristine: Path, damage: Damage) -> Path:
    target = tmp_path / "copy.db"
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{pristine}{suffix}", f"{target}{suffix}")
    damage(Path(f"{target}-wal"))
    return target


def delete(wal: Path) -> None:
    wal.unlink()


def truncate_to(keep: float | int) -> Damage:
    """Keep a share of the file (float), so many bytes (int >= 0), or all but -n bytes."""

    def damage(wal: Path) -> None:
        data = wal.read_bytes()
        if isinstance(keep, float):
            size = int(len(data) * keep)
        else:
            size = keep if keep >= 0 else len(data) + keep
        wal.write_bytes(data[:size])

    return damage


def flip(fraction: float) -> Damage:
    def damage(wal: Path) -> None:
        data = bytearray(wal.read_bytes())
        data[min(int(len(data) * fraction), len(data) - 1)] ^= 0x10
        wal.write_bytes(bytes(data))

    return damage


TRUNCATIONS = {"to 0 bytes": 0, "to the header": 32, "to half": 0.5, "by 1 byte": -1}
FLIPS = [i / 20 for i in range(20)] + [0.999]
CASES: dict[str, Damage] = {"deleted": delete}
CASES.update({f"truncated {name}": truncate_to(keep) for name, keep in TRUNCATIONS.items()})
CASES.update({f"bit flip at {f:.3f}": flip(f) for f in FLIPS})


def open_checked(path: Path, head: Head) -> None:
    store = SQLiteStore(path)
    try:
        Conversation.open(store, example_bundle(), CONV, expect_head=head)
    finally:
        store.close()


def test_pristine_copy_opens_at_the_expected_head(live: tuple[Path, Head], tmp_path: Path) -> None:
    pristine, head = live
    open_checked(damaged(tmp_path, pristine, lambda wal: None), head)
    open_checked(damaged(tmp_path, pristine, lambda wal: None), Head.parse(str(head)))


@pytest.mark.parametrize("case", CASES)
def test_wal_damage_is_detected_with_the_expected_head(
    case: str, live: tuple[Path, Head], tmp_path: Path
) -> None:
    pristine, head = live
    path = damaged(tmp_path, pristine, CASES[case])
    with pytest.raises(CheckpointError) as err:
        open_checked(path, head)
    message = str(err.value)
    assert (
        "lost committed records" in message
        or "is not a database" in message
        or ("corrupt" in message)
    ), message


def test_a_deleted_wal_names_the_missing_records(live: tuple[Path, Head], tmp_path: Path) -> None:
    pristine, head = live
    path = damaged(tmp_path, pristine, delete)
    with pytest.raises(CheckpointError) as err:
        open_checked(path, head)
    assert str(err.value) == (
        f"conversation {CONV!r} is missing, but its head was {head}: the store lost "
        "committed records (a deleted, truncated or damaged -wal file?)"
    )
    # Without the expected head the same store looks fine: that is why it exists.
    with SQLiteStore(path) as store:
        assert store.integrity_check() == []


def test_a_store_behind_is_refused_and_not_restarted() -> None:
    store = MemoryStore()
    conv = Conversation.open(store, example_bundle(), CONV)
    root_head = conv.head
    assert root_head.seq == 0
    conv.handle(user("u1"))
    conv.assistant("a1")
    head = conv.head
    assert head.seq == 2
    behind = MemoryStore()
    Conversation.open(behind, example_bundle(), CONV).handle(user("u1"))
    with pytest.raises(CheckpointError) as err:
        Conversation.open(behind, example_bundle(), CONV, expect_head=head)
    assert str(err.value) == (
        f"conversation {CONV!r} is behind: it ends at record 1, but its head was {head}: "
        "the store lost committed records (a deleted, truncated or damaged -wal file?)"
    )
    with pytest.raises(CheckpointError) as err:
        Conversation.open(MemoryStore(), example_bundle(), CONV, expect_head=head)
    assert "is missing" in str(err.value)
    Conversation.open(store, example_bundle(), CONV, expect_head=root_head)  # moved on: ok


def test_every_append_returns_the_new_head(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "s.db") as store:
        conv = Conversation.open(store, example_bundle(), CONV)
        conv.handle(user("u1"))
        stored = store.load(CONV)
        assert stored is not None
        assert conv.head == Head(1, stored.head)


def test_head_text_is_checked() -> None:
    with pytest.raises(UsageError) as err:
        Head.parse("3:md5:abc")
    assert str(err.value) == "head '3:md5:abc' is not SEQ:sha256:<64 hex digits>"


def test_integrity_expect_head_reports_a_store_behind(
    live: tuple[Path, Head], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pristine, head = live
    (tmp_path / "a").mkdir()
    good = damaged(tmp_path / "a", pristine, lambda wal: None)
    assert main(["integrity", str(good), "--expect-head", str(head)]) == 0
    assert capsys.readouterr().out == f"{good}: ok (1 conversation)\n"
    (tmp_path / "b").mkdir()
    bad = damaged(tmp_path / "b", pristine, truncate_to(0.5))
    assert main(["integrity", str(bad), "--expect-head", str(head)]) == 1
    err = capsys.readouterr().err
    assert "lost committed records" in err
    assert err.endswith(f"prefixlock integrity: 1 problem(s) in {bad}\n")
    assert main(["integrity", str(bad), "--expect-head", "x"]) == 2
    assert "head 'x' is not SEQ:sha256:<64 hex digits>" in capsys.readouterr().err


def recanonicalized(body: bytes) -> bytes:
    """The record with a space in its first message's parts and every digest recomputed:
    what a crafted record looks like, which the hydration fast path accepts."""
    text = body.decode("utf-8")
    match = re.search(
        r'\{"digest":"(sha256:[0-9a-f]{64})","id":"[^"]*",("kind":.*?,"role":"[a-z]+")\}', text
    )
    assert match is not None
    content = match[2].replace('"type":"text"', '"type": "text"', 1)
    assert content != match[2]
    digest = "sha256:" + hashlib.sha256(("{" + content + "}").encode()).hexdigest()
    text = (
        text[: match.start(1)]
        + digest
        + text[match.end(1) : match.start(2)]
        + content
        + text[match.end(2) :]
    )
    return text.encode("utf-8")


def test_integrity_uses_the_checked_decoder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.db"
    with SQLiteStore(path) as store:
        Conversation.open(store, example_bundle(), CONV).handle(user("u1"))
    with sqlite3.connect(path) as conn:
        (body,) = conn.execute("SELECT body FROM records WHERE seq = 1").fetchone()
        crafted = recanonicalized(body)
        digest = "sha256:" + hashlib.sha256(crafted).hexdigest()
        conn.execute("UPDATE records SET body = ?, digest = ? WHERE seq = 1", (crafted, digest))
        conn.execute("UPDATE heads SET digest = ?", (digest,))
    with SQLiteStore(path) as store:
        Conversation.open(store, example_bundle(), CONV)  # the fast path hydrates it
    assert main(["integrity", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        f"conversation {CONV!r} record 1: message request-context:u1: content digest "
        "mismatch (stored sha256:"
    )
    assert err.endswith(f"prefixlock integrity: 1 problem(s) in {path}\n")


def test_open_with_expect_head_loads_the_conversation_once() -> None:
    # The load the head check reads is the one hydrated: a cold open of a long
    # conversation used to read and verify every record twice.
    loads: list[str] = []

    class Counting(MemoryStore):
        def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
            loads.append(conversation_id)
            return super().load(conversation_id, after)

    store = Counting()
    conv = Conversation.open(store, example_bundle(), CONV)
    conv.handle(user("u1"))
    conv.assistant("a1")
    head = conv.head
    loads.clear()
    again = Conversation.open(store, example_bundle(), CONV, expect_head=head)
    assert loads == [CONV]
    assert again.head == head
    assert again.request().same_as(conv.request())
