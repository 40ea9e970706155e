"""Checkpoint encoding (root, records, hash chain) and the JSONL export/import."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from helpers_store import build_chain, fill, make_record, make_root, record_value, rich_messages
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixlock.core import canonical
from prefixlock.core.errors import CanonicalJSONError, CheckpointError
from prefixlock.core.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    part_from_json,
    part_to_json,
)
from prefixlock.core.output import Usage
from prefixlock.store.contract import MemoryStore, Store
from prefixlock.store.jsonl import export_jsonl, import_jsonl, read_jsonl
from prefixlock.store.records import (
    FORMAT,
    FORMAT_TOOL_IMAGES,
    FORMAT_USAGE,
    Record,
    RecordType,
    Root,
    decode_chain,
    decode_record,
)
from prefixlock.store.sqlite import SQLiteStore


def rich_chain(cid: str = "conv-1") -> tuple[Root, list[Record], bytes, list[bytes]]:
    root = make_root(cid)
    records = [
        Record(
            1,
            RecordType.USER,
            "u1",
            rich_messages("u1"),
            request_digest=canonical.sha256_hex("req-u1"),
        ),
        make_record(2, "b1", "background ✓"),
        Record(3, RecordType.COMPACT, "compact:1", (make_record(3, "s").messages[0],), reset=True),
    ]
    root_bytes, record_bytes = build_chain(cid, records, root)
    return root, records, root_bytes, record_bytes


def reencode(data: bytes, **changes: object) -> bytes:
    obj = canonical.loads(data)
    obj.update(changes)
    return canonical.dumpb(obj)


# -- round trip ----------------------------------------------------------------------


def test_root_round_trip() -> None:
    root = make_root("conv-1", "Instructions with ünïcode\nand lines")
    data = root.encode()
    assert Root.decode(data) == root
    assert Root.decode(data, "conv-1") == root
    assert Root.decode(data).encode() == data
    with pytest.raises(CheckpointError, match="belongs to conversation 'conv-1', not 'x'"):
        Root.decode(data, "x")


def test_record_chain_round_trip_keeps_identity_and_content() -> None:
    root, records, root_bytes, record_bytes = rich_chain()
    decoded_root, decoded, head = decode_chain(root_bytes, record_bytes, "conv-1")
    assert decoded_root == root
    assert decoded == records
    assert head == canonical.sha256_hex(record_bytes[-1])
    first = decoded[0]
    assert [m.id for m in first.messages] == [
        "request-context:u1",
        "runtime:u1",
        "assistant:1",
        "tool-results:call-1",
    ]
    assert [m.digest for m in first.messages] == [m.digest for m in records[0].messages]
    assistant = first.messages[2]
    opaque, text, call = assistant.parts
    assert isinstance(opaque, OpaquePart)
    assert opaque.value == {"type": "thinking", "thinking": "hm", "signature": "c2ln=="}
    assert isinstance(text, TextPart)
    assert text.thought_signature == "sig-text"
    assert isinstance(call, ToolCallPart)
    assert call.thought_signature == "sig-call"
    assert first.request_digest == canonical.sha256_hex("req-u1")
    assert decoded[2].reset is True
    assert decoded[2].type is RecordType.COMPACT
    # re-encoding the decoded values gives the same bytes (identity survives)
    prev = canonical.sha256_hex(root_bytes)
    for record, data in zip(decoded, record_bytes, strict=True):
        assert record.encode("conv-1", prev) == data
        prev = canonical.sha256_hex(data)


def test_empty_chain_head_is_the_root_digest() -> None:
    root_bytes = make_root("c").encode()
    _, records, head = decode_chain(root_bytes, [], "c")
    assert records == []
    assert head == canonical.sha256_hex(root_bytes)


# -- what decoding detects ------------------------------------------------------------


def test_wrong_format_version() -> None:
    _, _, root_bytes, record_bytes = rich_chain()
    with pytest.raises(CheckpointError, match="root has format 2; this prefixlock reads format 1"):
        Root.decode(reencode(root_bytes, format=FORMAT + 1))
    bad = reencode(record_bytes[0], format=FORMAT_TOOL_IMAGES + 1)
    with pytest.raises(
        CheckpointError,
        match="record has format 8; this prefixlock reads format 1, 2, 3, 4, 5, 6 and 7",
    ):
        decode_chain(root_bytes, [bad])
    # format 2 is the format of a record with usage: without usage it is not canonical
    bad = reencode(record_bytes[0], format=FORMAT_USAGE)
    with pytest.raises(CheckpointError, match="record 1: not in canonical form"):
        decode_chain(root_bytes, [bad])


def test_spliced_record_from_another_conversation() -> None:
    _, _, root_a, records_a = rich_chain("A")
    _, _, _, records_b = rich_chain("B")
    with pytest.raises(CheckpointError, match="conversation 'A' record 2: belongs to 'B'"):
        decode_chain(root_a, [records_a[0], records_b[1], records_a[2]])
    # relabelled to pass as A's: the chain still breaks
    relabelled = reencode(records_b[1], conversation="A")
    with pytest.raises(CheckpointError, match="record 2: hash chain broken"):
        decode_chain(root_a, [records_a[0], relabelled, records_a[2]])
    # a whole foreign chain under A's root breaks at record 1
    with pytest.raises(CheckpointError, match="record 1: belongs to 'B'"):
        decode_chain(root_a, records_b)


def test_reordered_and_missing_records() -> None:
    _, _, root_bytes, rb = rich_chain()
    with pytest.raises(CheckpointError, match=r"record 2: has seq 3 \(missing or reordered\)"):
        decode_chain(root_bytes, [rb[0], rb[2], rb[1]])
    with pytest.raises(CheckpointError, match="record 1: has seq 2"):
        decode_chain(root_bytes, rb[1:])


def test_non_canonical_bytes() -> None:
    _, _, root_bytes, rb = rich_chain()
    spaced = rb[0].replace(b'"seq":1', b'"seq": 1')
    with pytest.raises(CheckpointError, match="record 1: not in canonical form"):
        decode_chain(root_bytes, [spaced])
    escaped = rb[1].replace("✓".encode(), b"\\u2713")
    with pytest.raises(CheckpointError, match="record 2: not in canonical form"):
        decode_record(escaped, "conv-1", 2, canonical.sha256_hex(rb[0]))
    with pytest.raises(CheckpointError, match="root is not in canonical form"):
        Root.decode(root_bytes + b" ")
    with pytest.raises(CheckpointError, match="root is not valid JSON"):
        Root.decode(root_bytes[:-1])


def test_malformed_but_canonical_record_is_a_checkpoint_error() -> None:
    root_bytes = make_root("c").encode()
    prev = canonical.sha256_hex(root_bytes)
    good = make_record(1, "e1").encode("c", prev)
    obj = canonical.loads(good)
    obj["messages"][0]["parts"] = [5]  # canonical JSON, wrong shape
    with pytest.raises(CheckpointError, match="record 1: malformed"):
        decode_record(canonical.dumpb(obj), "c", 1, prev)
    with pytest.raises(CheckpointError, match="record 1: malformed"):
        decode_record(reencode(good, type="nonsense"), "c", 1, prev)


def test_flipped_byte_message_digest_and_chain() -> None:
    _, _, root_bytes, rb = rich_chain()
    text = rb[1].replace(b"background", b"backgrounD")
    with pytest.raises(
        CheckpointError, match="record 2: message event:b1: content digest mismatch"
    ):
        decode_chain(root_bytes, [rb[0], text, rb[2]])
    with pytest.raises(CheckpointError, match="record 1: hash chain broken"):
        decode_chain(root_bytes.replace(b"careful", b"carefuL"), rb)


def test_every_single_bit_flip_is_detected() -> None:
    """No one-bit change anywhere yields a valid chain ending at the same head."""
    cid = "c"
    root_bytes, rb = build_chain(cid, [make_record(1, "e1", "hi"), make_record(2, "e2", "ok")])
    _, _, head = decode_chain(root_bytes, rb, cid)
    blobs = [root_bytes, *rb]
    for which, blob in enumerate(blobs):
        for offset in range(len(blob)):
            for bit in range(8):
                flipped = bytearray(blob)
                flipped[offset] ^= 1 << bit
                trial = list(blobs)
                trial[which] = bytes(flipped)
                try:
                    _, _, got = decode_chain(trial[0], trial[1:], cid)
                except CheckpointError:
                    continue
                assert got != head, (which, offset, bit)


# -- JSONL ----------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s: Store = MemoryStore() if request.param == "memory" else SQLiteStore(tmp_path / "s.db")
    yield s
    s.close()


def rich_store(store: Store, cid: str = "conv-1") -> tuple[bytes, list[bytes]]:
    _, records, root_bytes, record_bytes = rich_chain(cid)
    store.create_root(cid, root_bytes)
    for record, data in zip(records, record_bytes, strict=True):
        store.append(cid, record.seq, record.event_id, data)
    return root_bytes, record_bytes


def export_lines(store: Store, cid: str, tmp_path: Path) -> tuple[Path, list[bytes]]:
    path = tmp_path / "conv.jsonl"
    export_jsonl(store, cid, path)
    return path, path.read_bytes().split(b"\n")


def test_jsonl_round_trip(store: Store, tmp_path: Path) -> None:
    root_bytes, record_bytes = rich_store(store)
    path, lines = export_lines(store, "conv-1", tmp_path)
    assert lines[-1] == b""  # every line ends with a newline
    assert lines[0] == root_bytes
    assert lines[1:4] == record_bytes  # exactly the stored bytes
    assert canonical.loads(lines[4]) == {
        "kind": "end",
        "format": FORMAT,
        "conversation": "conv-1",
        "count": 3,
        "head": canonical.sha256_hex(record_bytes[-1]),
    }
    root, records = read_jsonl(path)
    assert root == Root.decode(root_bytes)
    assert records == decode_chain(root_bytes, record_bytes)[1]
    for target in (MemoryStore(), SQLiteStore(tmp_path / "target.db")):
        assert import_jsonl(path, target) == "conv-1"
        assert target.load("conv-1") == store.load("conv-1")
        # importing again is a no-op (same root, same records)
        assert import_jsonl(str(path), target) == "conv-1"
        assert target.load("conv-1") == store.load("conv-1")
        target.close()


def test_jsonl_streams(tmp_path: Path) -> None:
    source = MemoryStore()
    rich_store(source)
    text = io.StringIO()
    export_jsonl(source, "conv-1", text)
    binary = io.BytesIO()
    export_jsonl(source, "conv-1", binary)
    assert text.getvalue().encode("utf-8") == binary.getvalue()
    target = MemoryStore()
    assert import_jsonl(io.StringIO(text.getvalue()), target) == "conv-1"
    assert target.load("conv-1") == source.load("conv-1")
    root, records = read_jsonl(io.BytesIO(binary.getvalue()))
    assert root.conversation_id == "conv-1"
    assert len(records) == 3


def test_jsonl_import_completes_an_interrupted_import(tmp_path: Path) -> None:
    source = MemoryStore()
    fill(source, "c", 4)
    path, _ = export_lines(source, "c", tmp_path)
    target = MemoryStore()
    fill(target, "c", 2)  # the same first two records, as if an import died midway
    assert import_jsonl(path, target) == "c"
    assert target.load("c") == source.load("c")


def test_jsonl_import_refuses_a_different_existing_conversation(tmp_path: Path) -> None:
    source = MemoryStore()
    fill(source, "c", 2)
    path, _ = export_lines(source, "c", tmp_path)
    other_root = MemoryStore()
    other_root.create_root("c", make_root("c", "other instructions").encode())
    with pytest.raises(CheckpointError, match="already exists in the store with a different root"):
        import_jsonl(path, other_root)
    other_records = MemoryStore()
    fill(other_records, "c", 2, text="different")
    with pytest.raises(CheckpointError, match="record 1 differs"):
        import_jsonl(path, other_records)
    longer = MemoryStore()
    fill(longer, "c", 3)
    with pytest.raises(CheckpointError, match="already has 3 records"):
        import_jsonl(path, longer)


def test_jsonl_export_of_unknown_conversation(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="'nope' is not in the store"):
        export_jsonl(MemoryStore(), "nope", tmp_path / "x.jsonl")
    assert not (tmp_path / "x.jsonl").exists()
    source = MemoryStore()
    fill(source, "c", 1)
    with pytest.raises(CheckpointError, match="cannot write"):
        export_jsonl(source, "c", tmp_path / "no-such-dir" / "x.jsonl")


def broken(tmp_path: Path, lines: list[bytes], name: str = "conv.jsonl") -> Path:
    path = tmp_path / "broken" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def assert_refused(path: Path, message: str) -> None:
    """Both readers refuse the file with ``message`` and nothing reaches the store."""
    with pytest.raises(CheckpointError) as info:
        read_jsonl(path)
    assert message in str(info.value)
    target = SQLiteStore(path.with_suffix(".db"))
    try:
        with pytest.raises(CheckpointError) as again:
            import_jsonl(path, target)
        assert str(again.value) == str(info.value)
        assert target.conversations() == []
    finally:
        target.close()


@pytest.fixture
def exported(tmp_path: Path) -> list[bytes]:
    source = MemoryStore()
    fill(source, "c", 5)
    _, lines = export_lines(source, "c", tmp_path)
    assert lines.pop() == b""
    return lines  # root, 5 records, trailer


def test_jsonl_missing_trailer_is_truncation(tmp_path: Path, exported: list[bytes]) -> None:
    path = broken(tmp_path, exported[:-1])
    assert_refused(path, f"{path}:6: truncated: the end trailer is missing")
    path = broken(tmp_path, exported[:1], "root-only.jsonl")
    assert_refused(
        path, f"{path}:1: truncated: the end trailer is missing (the file stops after the root)"
    )


def test_jsonl_missing_last_record_line(tmp_path: Path, exported: list[bytes]) -> None:
    path = broken(tmp_path, [*exported[:5], exported[6]])
    assert_refused(path, f"{path}:6: end trailer says 5 records but the file has 4")


def test_jsonl_missing_middle_line(tmp_path: Path, exported: list[bytes]) -> None:
    path = broken(tmp_path, [*exported[:3], *exported[4:]])
    assert_refused(path, f"{path}:4: conversation 'c' record 3: has seq 4 (missing or reordered)")


def test_jsonl_bytes_cut_mid_line(tmp_path: Path, exported: list[bytes]) -> None:
    data = b"".join(line + b"\n" for line in exported)
    cut = len(b"".join(line + b"\n" for line in exported[:4])) + 30
    path = tmp_path / "cut.jsonl"
    path.write_bytes(data[:cut])
    assert_refused(path, f"{path}:5: not valid JSON")


def test_jsonl_bit_flipped_line(tmp_path: Path, exported: list[bytes]) -> None:
    flipped = bytearray(exported[4])
    flipped[flipped.index(b"hello 4") + 1] ^= 0x20  # 'e' -> 'E'
    path = broken(tmp_path, [*exported[:4], bytes(flipped), *exported[5:]])
    assert_refused(
        path, f"{path}:5: conversation 'c' record 4: message event:e4: content digest mismatch"
    )
    chain = reencode(exported[4], prev=canonical.sha256_hex(b"elsewhere"))
    path = broken(tmp_path, [*exported[:4], chain, *exported[5:]], "chain.jsonl")
    assert_refused(
        path, f"{path}:5: conversation 'c' record 4: hash chain broken (prev does not match)"
    )


def test_jsonl_bad_trailer(tmp_path: Path, exported: list[bytes]) -> None:
    trailer = exported[-1]
    cases = {
        "head.jsonl": (
            reencode(trailer, head=canonical.sha256_hex(b"x")),
            "does not match the digest of the last record",
        ),
        "conv.jsonl": (reencode(trailer, conversation="d"), "names conversation 'd'"),
        "count.jsonl": (reencode(trailer, count=True), "count True is not an integer"),
        "keys.jsonl": (reencode(trailer, extra=1), "must have exactly the keys"),
        "spaced.jsonl": (trailer.replace(b",", b", "), "not in canonical form"),
    }
    for name, (line, message) in cases.items():
        path = broken(tmp_path, [*exported[:-1], line], name)
        assert_refused(path, f"{path}:7: end trailer")
        assert_refused(path, message)
    path = broken(tmp_path, [*exported, exported[1]], "after.jsonl")
    assert_refused(path, f"{path}:8: content after the end trailer (line 7)")


def test_jsonl_other_damage(tmp_path: Path, exported: list[bytes]) -> None:
    path = broken(tmp_path, [*exported[:3], b"", *exported[3:]], "blank.jsonl")
    assert_refused(path, f"{path}:4: blank line")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert_refused(empty, f"{empty}: empty file")
    path = broken(tmp_path, exported[1:], "noroot.jsonl")
    assert_refused(path, f"{path}:1: expected a root")
    with pytest.raises(CheckpointError, match="cannot read"):
        read_jsonl(tmp_path / "missing.jsonl")


def test_jsonl_duplicate_event_id_in_file(tmp_path: Path) -> None:
    root_bytes, rb = build_chain("c", [make_record(1, "e1"), make_record(2, "e1")])
    trailer = canonical.dumpb(
        {
            "kind": "end",
            "format": FORMAT,
            "conversation": "c",
            "count": 2,
            "head": canonical.sha256_hex(rb[-1]),
        }
    )
    path = broken(tmp_path, [root_bytes, *rb, trailer], "dup.jsonl")
    assert_refused(path, f"{path}:3: record 2: event id 'e1' is already used on line 2")


def test_jsonl_export_refuses_a_corrupt_store(tmp_path: Path) -> None:
    store = MemoryStore()
    root_bytes, rb = build_chain("c", [make_record(1, "e1")])
    store.create_root("c", root_bytes)
    store.append("c", 1, "e1", rb[0].replace(b"hello", b"hellO"))
    with pytest.raises(CheckpointError, match="content digest mismatch"):
        export_jsonl(store, "c", tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()


# -- encoding reuses each message's bytes ------------------------------------------------


@pytest.mark.parametrize(
    "event_id",
    ["u1", 'x","messages":[]', "é ✓ \u2028", 'tricky "messages":[] \\ end', "\x01"],
)
def test_record_bytes_are_the_canonical_encoding_of_the_record(event_id: str) -> None:
    """Record.encode splices each message's bytes, made once when the message was
    created: the result is exactly the canonical encoding of the whole record."""
    prev = canonical.sha256_hex("prev")
    for cid in ("conv-1", 'c"messages":[]'):
        messages = rich_messages(event_id)
        for record in (
            Record(1, RecordType.USER, event_id, messages, canonical.sha256_hex("r")),
            Record(2, RecordType.EVENT, event_id, messages[:1]),
            Record(3, RecordType.COMPACT, event_id, messages[-1:], reset=True),
            Record(4, RecordType.USER, event_id, ()),
        ):
            data = record.encode(cid, prev)
            assert data == canonical.dumpb(record_value(record, cid, prev))
            assert decode_record(data, cid, record.seq, prev) == record


def test_message_digest_is_over_the_bytes_the_record_holds() -> None:
    for message in rich_messages("u1"):
        content = canonical.dumpb(
            {
                "kind": str(message.kind),
                "role": str(message.role),
                "parts": message.to_json()["parts"],
            }
        )
        assert message.digest == canonical.sha256_hex(content)


@pytest.mark.parametrize(
    "text", ["sha256:0f", "a b", 'q"', "b\\s", "\x7f", "\x1f", "é", "\u2028", ""]
)
def test_record_strings_are_canonical_json_strings(text: str) -> None:
    from prefixlock.store.records import _json_string

    assert _json_string(text) == canonical.dumpb(text)


@pytest.mark.parametrize(
    "part",
    [
        TextPart("a"),
        TextPart("a", "sig"),
        ToolCallPart("c1", "read_file", '{"path":"a"}'),
        ToolCallPart("c1", "read_file", "{}", "sig"),
        ToolResultPart("c1", "out"),
        ToolResultPart("c1", "out", True),
        OpaquePart("anthropic", '{"type":"thinking"}'),
        ImagePart("image/png", "iVBO"),
    ],
)
def test_part_from_json_gives_back_every_part_shape(part: Part) -> None:
    """Every shape a writer produces, on the positional fast constructors or the keyword
    path, and in any key order (a key order other than the canonical one takes the
    keyword path)."""
    value = part_to_json(part)
    assert part_from_json(value) == part
    assert part_from_json(dict(reversed(list(value.items())))) == part


def test_part_from_json_refuses_a_wrong_type_for_a_known_shape() -> None:
    with pytest.raises(
        CheckpointError, match=r"unknown field\(s\) \['call_id', 'output'\] in text part"
    ):
        part_from_json({"call_id": "c1", "output": "o", "type": "text"})


@pytest.mark.parametrize(
    "conversation_id", ["c", 'quote"d', "back\\slash", "é✓", "line\nbreak", ""]
)
def test_root_bytes_are_the_canonical_encoding_of_the_root(conversation_id: str) -> None:
    """The root's bytes are spliced around the conversation id from a per-bundle cache:
    still the canonical encoding, for any id, and they decode to the same root."""
    root = attrs.evolve(make_root("c"), conversation_id=conversation_id)
    assert root.encode() == canonical.dumpb(root.to_json())
    assert Root.decode(root.encode(), conversation_id) == root


_record_text = st.text(max_size=12) | st.sampled_from(['"', "\\", "é\u2028", "\ud800", "\0"])


@settings(max_examples=300, deadline=None)
@given(
    conversation=_record_text,
    event_id=_record_text,
    prev=_record_text,
    digest=st.none() | _record_text,
    seq=st.integers(min_value=-(2**65), max_value=2**65),
    reset=st.booleans(),
    kind=st.sampled_from(list(RecordType)),
    texts=st.lists(_record_text, min_size=1, max_size=2),
    timestamp=st.none()
    | st.sampled_from(
        [
            "2026-12-02T10:00:00Z",
            "2026-12-02t10:00:00.5z",
            "2016-12-31T23:59:60+00:00",
            "2026-01-01T00:00:00-08:00",
        ]
    ),
    response_id=st.none() | _record_text.filter(bool),
)
def test_record_bytes_are_the_encoders_bytes_of_its_value(
    conversation: str,
    event_id: str,
    prev: str,
    digest: str | None,
    seq: int,
    reset: bool,
    kind: RecordType,
    texts: list[str],
    timestamp: str | None,
    response_id: str | None,
) -> None:
    """The envelope written around the spliced messages is what the encoder makes of
    the whole record (or the encoder's own refusal), and what decodes gives it back."""
    messages = []
    for i, text in enumerate(texts):
        try:
            messages.append(
                CanonicalMessage.create(f"m{i}", MessageKind.EVENT, Role.USER, (TextPart(text),))
            )
        except CanonicalJSONError:
            return
    record = Record(
        seq,
        kind,
        event_id,
        tuple(messages),
        digest,
        reset,
        timestamp=timestamp,
        response_id=response_id,
    )

    def outcome(encode: Any) -> tuple[str, Any]:
        try:
            return "ok", encode()
        except CanonicalJSONError as err:
            return "refused", str(err)

    whole = lambda: canonical.dumpb(record._value(conversation, prev, record.messages))  # noqa: E731
    result = outcome(lambda: record.encode(conversation, prev))
    assert result == outcome(whole)
    if result[0] == "ok" and seq > 0:
        assert decode_record(result[1], conversation, seq, prev) == record


# -- a record with usage is written directly, as one without ---------------------------

#: Raw usage texts as providers' parsers store them (canonical), and texts that are not
#: their own canonical encoding or have none: the direct path must write the first kind
#: exactly as the encoder does and leave the second to it (its bytes, or its refusal).
_RAW_USAGES = [
    "{}",
    '{"cache_creation_input_tokens":1130,"cache_read_input_tokens":51200,"input_tokens":80,'
    '"output_tokens":412,"service_tier":"standard"}',
    '{"a":[1,-2,3.5,-0.0,1e+300,true,false,null],"b":{"c":"é ✓ \\u2028 \\"q\\" \\\\"}}',
    '{"promptTokenCount":10,"promptTokensDetails":[{"modality":"TEXT","tokenCount":10}]}',
    '{"n":18446744073709551615}',  # 2**64 - 1: the largest integer the encoder writes
    '{"n":-18446744073709551615}',
    "[]",
    "7",
    '"text"',
    '{"é":1}',
    '{"nul":"\\u0000"}',
    # not canonical, or no canonical form:
    '{"b":1,"a":2}',
    '{"a": 1}',
    '{"a":1,"a":2}',
    '{"a":1E5}',
    '{"a":1.50}',
    '{"a":NaN}',
    '{"a":Infinity}',
    '{"n":18446744073709551616}',
    '{"n":-18446744073709551616}',
    '{"s":"\\ud800"}',
    '{"s":"\ud800"}',
    '{"s":"\\u00e9"}',
    '{"s":"\\/"}',
    '{"a\\u0000":1}',  # NUL in a key: the encoder refuses it (in a string it may stand)
    "[" * 150 + "]" * 150,
    "[" * 198 + "]" * 198,  # the deepest the encoder writes two levels into a record
    "[" * 199 + "]" * 199,
    "[" * 250 + "]" * 250,
    "{",
    "",
    '{"a":1} ',
]


def _outcomes(record: Record, cid: str, prev: str) -> tuple[tuple[str, Any], tuple[str, Any]]:
    """What record.encode gives, and what the encoder makes of the whole record: bytes,
    or the refusal's type and message."""

    def outcome(encode: Any) -> tuple[str, Any]:
        try:
            return "ok", encode()
        except (CanonicalJSONError, ValueError, RecursionError) as err:
            return type(err).__name__, str(err)

    return (
        outcome(lambda: record.encode(cid, prev)),
        outcome(lambda: canonical.dumpb(record_value(record, cid, prev))),
    )


@pytest.mark.parametrize("raw", _RAW_USAGES)
def test_record_with_usage_bytes_are_the_encoders_bytes(raw: str) -> None:
    """Every raw usage, and the figures and providers around it: the record's bytes are
    what the encoder makes of the whole record, or the encoder's own refusal."""
    prev = canonical.sha256_hex("prev")
    messages = rich_messages("a1")[:1]
    for usage in (
        Usage(52_410, 51_200, 1_130, 412, None, raw, "anthropic"),
        Usage(None, None, None, None, None, raw, None),
        Usage(0, 2**64 - 1, -(2**64 - 1), 1, 2, raw, 'quote"d é'),
        Usage(2**64, 1, 1, 1, 1, raw, "anthropic"),
        Usage(True, 1, 1, 1, 1, raw, "anthropic"),  # type: ignore[arg-type]
        Usage(1, 1, 1, 1, 1, raw, "\ud800"),
        Usage(1, 1, 1, 1, 1, raw, 5),  # type: ignore[arg-type]
    ):
        record = Record(7, RecordType.ASSISTANT, "assistant:3", messages, usage=usage)
        direct, whole = _outcomes(record, "c", prev)
        assert direct == whole, usage


def test_record_with_usage_is_written_without_the_encoder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A record Conversation.record stores (a writer's usage, a canonical raw) is
    written around its spliced messages as a record without usage is: before, its
    envelope went through the encoder's checked walk (54 us against 7 us here)."""
    prev = canonical.sha256_hex("prev")
    usage = Usage(52_410, 51_200, 1_130, 412, None, _RAW_USAGES[1], "anthropic")
    record = Record(7, RecordType.ASSISTANT, "assistant:3", rich_messages("a1")[:1], usage=usage)
    expected = canonical.dumpb(record_value(record, "c", prev))

    def refuse(value: object) -> bytes:
        raise AssertionError(f"the encoder was asked for {value!r}")

    monkeypatch.setattr(canonical, "dumpb", refuse)
    monkeypatch.setattr(canonical, "dumps", refuse)
    assert record.encode("c", prev) == expected


_json_leaf = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**66), max_value=2**66)
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["\0", "\ud800", "é", '"', "\\", "/"])
)
_json_values = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.just("\0"), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(
    value=_json_values,
    sort_keys=st.booleans(),
    ensure_ascii=st.booleans(),
    spaced=st.booleans(),
    figure=st.none() | st.integers(min_value=-(2**65), max_value=2**65),
)
def test_record_with_any_raw_usage_bytes_are_the_encoders_bytes(
    value: Any, sort_keys: bool, ensure_ascii: bool, spaced: bool, figure: int | None
) -> None:
    """Raw usage texts in every form json.dumps writes (canonical or not, NaN, big
    integers, lone surrogates, NUL in keys): the direct path's bytes or refusal are the
    encoder's."""
    separators = (", ", ": ") if spaced else (",", ":")
    raw = json.dumps(value, sort_keys=sort_keys, ensure_ascii=ensure_ascii, separators=separators)
    usage = Usage(figure, 1, None, 2, None, raw, "gemini")
    record = Record(3, RecordType.ASSISTANT, "assistant:1", rich_messages("a1")[:1], usage=usage)
    prev = canonical.sha256_hex("prev")
    direct, whole = _outcomes(record, "c", prev)
    assert direct == whole


def test_a_record_refuses_a_timestamp_it_could_not_store() -> None:
    with pytest.raises(ValueError) as caught:
        Record(1, RecordType.USER, "u1", (), timestamp="2026-12-02 10:00")
    assert str(caught.value) == (
        "timestamp: '2026-12-02 10:00' is not an RFC 3339 timestamp like 2026-12-02T10:00:00Z"
    )
