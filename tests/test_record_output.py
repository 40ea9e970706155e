"""``Conversation.record(output)``: model output appended in model order, usage stored
beside the record, and the record format that carries it."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from conv_helpers import example_bundle, user
from prefixlock import Conversation, HistoryError, SQLiteStore, ToolResult, providers
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError
from prefixlock.core.messages import OpaquePart, TextPart, ToolCallPart
from prefixlock.core.output import ModelOutput, Usage
from prefixlock.store.contract import MemoryStore
from prefixlock.store.records import (
    FORMAT_SECTIONS,
    FORMAT_USAGE,
    _decode_record_checked,
    _scan_record,
    decode_chain,
)

THINKING = OpaquePart("anthropic", '{"signature":"c2ln","thinking":"plan","type":"thinking"}')
USAGE = Usage(
    input_tokens=1200,
    cache_read_tokens=1000,
    cache_write_tokens=150,
    output_tokens=40,
    reasoning_tokens=None,
    raw='{"cache_creation_input_tokens":150,"cache_read_input_tokens":1000,'
    '"input_tokens":50,"output_tokens":40}',
)
OUTPUT = ModelOutput(
    "anthropic",
    (
        THINKING,
        TextPart("First I read the file."),
        ToolCallPart("toolu_01", "read_file", '{"path": "a.py"}'),
        TextPart("Then the test."),
        ToolCallPart("toolu_02", "read_file", '{"path":"test_a.py"}'),
    ),
    "tool_use",
    USAGE,
    "claude-sonnet-4-5",
)


def _records(db: Path) -> list[bytes]:
    with SQLiteStore(db) as store:
        stored = store.load("conv-1")
    assert stored is not None
    return list(stored.records)


def test_record_keeps_model_order_and_stores_usage_beside_the_record(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "conv-1")
    conv.store_wire = False  # pins the formats without wire templates
    conv.handle(user("u1"))
    message = conv.record(OUTPUT)
    assert [type(p).__name__ for p in message.parts] == [
        "OpaquePart",
        "TextPart",
        "ToolCallPart",
        "TextPart",
        "ToolCallPart",
    ]
    assert message.parts[0] == THINKING
    assert message.parts[3] == TextPart("Then the test.")  # two texts, never merged
    assert [p.call_id for p in OUTPUT.tool_calls] == ["toolu_01", "toolu_02"]
    with SQLiteStore(db) as store:
        stored = store.load("conv-1")
        assert stored is not None
        _, records, _ = decode_chain(stored.root, stored.records)
    assert [r.usage for r in records] == [None, attrs.evolve(USAGE, provider="anthropic")]
    assert b'"format":%d' % FORMAT_USAGE in stored.records[1]
    # the user turn's record: format 4, it carries the sections of its context message
    assert b'"format":%d' % FORMAT_SECTIONS in stored.records[0]


def test_recorded_output_survives_a_restart_and_the_next_request_is_identical(
    tmp_path: Path,
) -> None:
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "conv-1")
    conv.handle(user("u1"))
    conv.record(OUTPUT)
    results = [ToolResult("toolu_01", "print(1)"), ToolResult("toolu_02", "def test(): ...")]
    uninterrupted = conv.tool_results(results)
    db2 = tmp_path / "s2.db"
    conv2 = Conversation.open(SQLiteStore(db2), example_bundle(), "conv-1")
    conv2.handle(user("u1"))
    conv2.record(OUTPUT)
    reopened = Conversation.open(SQLiteStore(db2), example_bundle(), "conv-1")
    after_restart = reopened.tool_results(results)
    assert after_restart.same_as(uninterrupted)
    anthropic = providers.get("anthropic")
    body = anthropic.serialize(after_restart)
    assert body == providers.get("anthropic").serialize(uninterrupted)
    assert b'"signature":"c2ln"' in body


def test_a_retry_of_the_model_call_is_not_recorded_twice(tmp_path: Path) -> None:
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    conv.handle(user("u1"))
    first = conv.record(OUTPUT)
    # The same answer again (issue 47: record is idempotent) is that record, not another.
    assert conv.record(OUTPUT) is first
    assert len(_records(tmp_path / "s.db")) == 2


def test_record_refuses_reused_call_ids_and_empty_output(tmp_path: Path) -> None:
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    conv.handle(user("u1"))
    with pytest.raises(HistoryError, match="assistant output has no parts"):
        conv.record(ModelOutput("anthropic", ()))
    twice = ModelOutput("anthropic", (OUTPUT.parts[2], OUTPUT.parts[2]))
    with pytest.raises(HistoryError, match="tool call id 'toolu_01' was already used"):
        conv.record(twice)
    assert len(_records(tmp_path / "s.db")) == 1


def test_usage_json_round_trip_and_refusals() -> None:
    assert Usage.from_json(USAGE.to_json()) == USAGE
    bad = {**USAGE.to_json(), "output_tokens": -1}
    with pytest.raises(ValueError, match="usage output_tokens: expected a count or null"):
        Usage.from_json(bad)


# -- the fast path reads usage records ---------------------------------------------------

USAGES = [
    USAGE,
    attrs.evolve(USAGE, provider="anthropic"),
    Usage(None, None, None, None, None, "{}", None),
    Usage(0, 0, 0, 0, 0, '{"a":[1,{"b":null}],"tier":"ünïcode \\" \\n"}', "gemini"),
]


def _usage_chain(usage: Usage) -> tuple[bytes, list[bytes]]:
    store = MemoryStore()
    conv = Conversation.open(store, example_bundle(), "conv-1")
    conv.store_wire = False  # pins the formats without wire templates
    conv.handle(user("u1"))
    conv.record(attrs.evolve(OUTPUT, usage=usage))
    stored = store.load("conv-1")
    assert stored is not None
    return stored.root, list(stored.records)


@pytest.mark.parametrize("usage", USAGES, ids=range(len(USAGES)))
def test_a_record_with_usage_decodes_on_the_fast_path(usage: Usage) -> None:
    """``Conversation.record`` stores usage in every assistant record of a server that
    reads provider responses: hydration and catch-up must not fall back to the checked
    decode (parse, rebuild, re-encode, hash every message again) for each of them."""
    root, records = _usage_chain(usage)
    prev = canonical.sha256_hex(root)
    for seq, data in enumerate(records, start=1):
        fast = _scan_record(data, "conv-1", seq, prev)
        assert fast is not None, seq
        assert fast == _decode_record_checked(data, "conv-1", seq, prev)
        prev = canonical.sha256_hex(data)
    assert b'"format":%d' % FORMAT_USAGE in records[1]
    assert _scan_record(records[1], "conv-1", 2, canonical.sha256_hex(records[0])).usage == (
        attrs.evolve(usage, provider=usage.provider or "anthropic")
    )


def test_the_fast_path_leaves_a_usage_member_it_cannot_vouch_for_to_the_checked_path() -> None:
    """Whatever is not exactly the writer's bytes goes to the checked decode, which
    names it: the fast path never accepts what the checked path refuses."""
    _, records = _usage_chain(USAGE)
    prev = canonical.sha256_hex(records[0])
    data = records[1]
    assert data.endswith(b"}}")
    variants = {
        "spaced": data.replace(b'"usage":{', b'"usage": {'),
        "float figure": data.replace(b'"output_tokens":40', b'"output_tokens":40.0'),
        "bool figure": data.replace(b'"reasoning_tokens":null', b'"reasoning_tokens":false'),
        "extra key": data.replace(b'"usage":{', b'"usage":{"extra":1,'),
        "no usage, format 2": data[: data.index(b',"usage":')] + b"}",
        "usage, format 1": data.replace(b'"format":2', b'"format":1'),
        "trailing": data + b" ",
        "usage not an object": data[: data.index(b',"usage":')] + b',"usage":[]}',
        "raw with a lone surrogate": data.replace(b'"raw":{', b'"raw":{"a":"\\ud800",'),
        "raw too large a number": data.replace(b'"raw":{', b'"raw":{"a":1' + b"0" * 30 + b","),
    }
    for name, bad in variants.items():
        assert _scan_record(bad, "conv-1", 2, prev) is None, name
        with pytest.raises(CheckpointError):
            _decode_record_checked(bad, "conv-1", 2, prev)
    with pytest.raises(CheckpointError) as err:
        _decode_record_checked(variants["raw with a lone surrogate"], "conv-1", 2, prev)
    assert str(err.value) == (
        "conversation 'conv-1' record 2: malformed: ValueError('usage raw: $.a: string "
        "contains a lone surrogate U+D800 at index 0')"
    )


def test_every_bit_flip_of_a_usage_record_is_detected() -> None:
    """No one-bit change of the record with usage decodes to the same head."""
    root, records = _usage_chain(USAGE)
    _, _, head = decode_chain(root, records, "conv-1")
    data = records[1]
    start = data.index(b',"type":')  # the envelope's end and the usage member
    for offset in range(start, len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[offset] ^= 1 << bit
            try:
                _, _, got = decode_chain(root, [records[0], bytes(flipped)], "conv-1")
            except CheckpointError:
                continue
            assert got != head, (offset, bit)
