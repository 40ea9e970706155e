"""A user or background record keeps its request's timestamp (record format 3).

prefixlock never reads a clock: the time is the ``timestamp`` the client sent with the
request that made the model call. Stored beside the record, it lets a reader of the store
alone (``prefixlock inspect --cache``) expire cache entries between calls as verify does
from a scenario's timestamps.
"""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest
from conv_helpers import CONV, background, example_bundle, mode_bundle, user
from helpers_store import build_chain, make_root, record_value, rich_messages
from prefixlock import Conversation, SQLiteStore, ToolCall, ToolResult
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError, UsageError
from prefixlock.core.output import Usage
from prefixlock.store import records
from prefixlock.store.contract import MemoryStore
from prefixlock.store.records import (
    FORMAT,
    FORMAT_USAGE,
    Record,
    RecordType,
    decode_chain,
    decode_record,
)

STAMP = "2026-12-02T10:00:00Z"
PREV = canonical.sha256_hex("prev")


def _records() -> list[Record]:
    messages = rich_messages("u1")
    usage = Usage(10, 2, 3, 4, None, '{"a":1}', "anthropic")
    return [
        Record(1, RecordType.USER, "u1", messages, canonical.sha256_hex("r"), timestamp=STAMP),
        Record(2, RecordType.EVENT, "b1", messages[:1], timestamp="2026-12-02T10:00:00.125+01:00"),
        Record(
            3, RecordType.USER, "u2", messages[1:], reset=True, timestamp="2016-12-31T23:59:60Z"
        ),
        Record(4, RecordType.ASSISTANT, "assistant:1", messages[-1:], usage=usage, timestamp=STAMP),
        Record(5, RecordType.USER, "u3", messages),
    ]


@pytest.mark.parametrize("cid", ["conv-1", 'c"timestamp":"x"'])
def test_a_timestamped_record_is_the_canonical_encoding_of_its_members(cid: str) -> None:
    for record in _records():
        data = record.encode(cid, PREV)
        assert data == canonical.dumpb(record_value(record, cid, PREV))
        # the fast path, the checked path and a chain all give the record back
        assert decode_record(data, cid, record.seq, PREV) == record
        assert decode_record(data, cid, record.seq, PREV, checked=True) == record


def test_the_format_says_whether_a_timestamp_is_there() -> None:
    stamped, _, _, with_usage, plain = (r.encode("c", PREV) for r in _records())
    assert b'"format":3' in stamped and b',"timestamp":"2026-12-02T10:00:00Z","type":' in stamped
    assert b'"format":3' in with_usage
    assert b'"format":1' in plain and b"timestamp" not in plain


def test_a_chain_of_timestamped_records_hydrates_on_the_fast_path() -> None:
    root = make_root("c")
    root_bytes, data = build_chain("c", _records(), root)
    with mock.patch.object(records, "_decode_record_checked", side_effect=AssertionError):
        _, decoded, _ = decode_chain(root_bytes, data, "c")
    assert [r.timestamp for r in decoded] == [r.timestamp for r in _records()]


def _reencoded(data: bytes, **changes: object) -> bytes:
    value = canonical.loads(data)
    value.update(changes)
    return canonical.dumpb({k: v for k, v in value.items() if v is not _DROP})


_DROP = object()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"timestamp": _DROP}, "record 1: not in canonical form (corrupted?)"),
        ({"format": FORMAT}, "record 1: not in canonical form (corrupted?)"),
        ({"format": FORMAT_USAGE}, "record 1: not in canonical form (corrupted?)"),
        (
            {"timestamp": "yesterday"},
            "record 1: timestamp: 'yesterday' is not an RFC 3339 timestamp like "
            "2026-12-02T10:00:00Z",
        ),
        (
            {"timestamp": "2026-02-30T10:00:00Z"},
            "record 1: timestamp: '2026-02-30T10:00:00Z': day 30 is not 01 to 28 in 2026-02",
        ),
        (
            {"timestamp": 1764669600},
            "record 1: timestamp: expected an RFC 3339 string, got 1764669600",
        ),
        ({"timestamp": None}, "record 1: timestamp: expected an RFC 3339 string, got None"),
    ],
)
def test_a_damaged_timestamp_member_is_refused_by_name(
    changes: dict[str, object], message: str
) -> None:
    root_bytes, data = build_chain("c", _records()[:1])
    bad = _reencoded(data[0], **changes)
    with pytest.raises(CheckpointError) as caught:
        decode_chain(root_bytes, [bad], "c")
    assert str(caught.value) == f"conversation 'c' {message}"


def test_a_record_without_a_timestamp_keeps_its_old_bytes() -> None:
    """Stores written before timestamps open unchanged: format 1 bytes are as they were."""
    record = Record(1, RecordType.USER, "u1", rich_messages("u1"), canonical.sha256_hex("r"))
    assert record.encode("c", PREV) == canonical.dumpb(record_value(record, "c", PREV))
    assert record.timestamp is None


@pytest.mark.parametrize(
    ("mode", "formats"),
    # sections: the first turn's record carries its context sections too (format 4)
    [("whole", [3, 1, 1, 3]), ("sections", [4, 1, 1, 3])],
)
def test_a_conversation_stores_the_timestamp_of_each_request(
    tmp_path: Path, mode: str, formats: list[int]
) -> None:
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), mode_bundle(mode), CONV)
    conv.store_wire = False  # pins the formats without wire templates
    conv.handle(user("u1", timestamp=STAMP))
    conv.handle(background("b1"))
    conv.handle(user("u2"))
    conv.handle(user("u3", timestamp="2026-12-02T10:30:00+02:00"))
    with SQLiteStore(db) as store:
        stored = store.load(CONV)
        assert stored is not None
        _, decoded, _ = decode_chain(stored.root, stored.records, CONV)
    assert [r.timestamp for r in decoded] == [STAMP, None, None, "2026-12-02T10:30:00+02:00"]
    assert [canonical.loads(d)["format"] for d in stored.records] == formats
    # a reopened conversation sees the same history (the timestamp is not a message)
    again = Conversation.open(SQLiteStore(db), mode_bundle(mode), CONV)
    assert again.request().same_as(conv.request())


def test_a_retried_request_with_its_timestamp_is_the_same_request() -> None:
    store = MemoryStore()
    conv = Conversation.open(store, example_bundle(), CONV)
    first = conv.handle(user("u1", timestamp=STAMP))
    assert conv.handle(user("u1", timestamp=STAMP)).same_as(first)
    assert len(store.load(CONV).records) == 1  # type: ignore[union-attr]


def test_tool_results_keep_the_time_their_call_is_sent() -> None:
    """A tool can run for minutes: its results' call may come after the cache expired."""
    store = MemoryStore()
    conv = Conversation.open(store, example_bundle(), CONV)
    conv.handle(user("u1", timestamp=STAMP))
    conv.assistant("reading", [ToolCall("c1", "read_file", {"path": "a.py"})])
    first = conv.tool_results([ToolResult("c1", "x = 1")], timestamp="2026-12-02T10:06:00Z")
    conv.assistant("again", [ToolCall("c2", "read_file", {"path": "b.py"})])
    conv.tool_results([ToolResult("c2", "y = 2")])
    stored = store.load(CONV)
    assert stored is not None
    _, decoded, _ = decode_chain(stored.root, stored.records, CONV)
    assert [(r.type, r.timestamp) for r in decoded] == [
        (RecordType.USER, STAMP),
        (RecordType.ASSISTANT, None),
        (RecordType.TOOL_RESULTS, "2026-12-02T10:06:00Z"),
        (RecordType.ASSISTANT, None),
        (RecordType.TOOL_RESULTS, None),
    ]
    # the timestamp is not the batch's identity: a retry with another is the same delivery
    count = len(stored.records)
    again = conv.tool_results([ToolResult("c1", "x = 1")], timestamp="2026-12-02T10:09:00Z")
    assert again.same_as(first)
    assert len(store.load(CONV).records) == count  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("timestamp", "message"),
    [
        (
            "10:06",
            "tool results timestamp: '10:06' is not an RFC 3339 timestamp like "
            "2026-12-02T10:00:00Z",
        ),
        (1764669960, "tool results timestamp: expected an RFC 3339 string, got 1764669960"),
    ],
)
def test_a_bad_tool_results_timestamp_is_refused_before_anything_is_stored(
    timestamp: object, message: str
) -> None:
    store = MemoryStore()
    conv = Conversation.open(store, example_bundle(), CONV)
    conv.handle(user("u1"))
    conv.assistant("reading", [ToolCall("c1", "read_file", {"path": "a.py"})])
    head = conv.head
    with pytest.raises(UsageError) as caught:
        conv.tool_results([ToolResult("c1", "x = 1")], timestamp=timestamp)  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert conv.head == head
