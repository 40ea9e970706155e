"""JSONL export and import of one conversation, for debugging and moving between stores.

File format (UTF-8, one canonical JSON value per line, each line ended by ``\\n``):

1. the root, exactly its stored bytes (``{"format":1,"kind":"root",...}``);
2. records 1..N, exactly their stored bytes, so their digests and the hash chain still
   verify;
3. a trailer ``{"conversation":...,"count":N,"format":1,"head":"sha256:...","kind":"end"}``
   (canonical, keys sorted) naming the record count and the digest of the last line before
   it, so a file cut anywhere is detected as truncated.

Canonical JSON escapes control characters, so a ``\\n`` byte only ever ends a line.

:func:`import_jsonl` and :func:`read_jsonl` verify the whole file (format, chain, message
digests, unique event ids, trailer) before anything is written; every error names the file
and line: ``conv.jsonl:5: conversation 'c' record 4: hash chain broken (prev does not
match)``. Importing into a store that already holds the conversation is allowed when the
store holds the same root and a prefix of the file's records: the missing tail is appended
(so an interrupted import can simply be run again); anything else is refused.
"""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, cast

import attrs

from ..core import canonical
from ..core.atomic import replace_file
from ..core.errors import CanonicalJSONError, CheckpointError
from .contract import Store
from .records import FORMAT, Record, Root, decode_chain, decode_record

__all__ = ["export_jsonl", "import_jsonl", "read_jsonl"]

#: A file path, or an open text or binary stream.
Source = str | os.PathLike[str] | IO[str] | IO[bytes]

_TRAILER_KEYS = frozenset({"kind", "format", "conversation", "count", "head"})


@attrs.frozen
class _Parsed:
    root: Root
    root_bytes: bytes
    records: tuple[Record, ...]
    record_bytes: tuple[bytes, ...]
    head: str


def export_jsonl(store: Store, conversation_id: str, out: Source) -> None:
    """Write ``conversation_id`` from ``store`` as JSONL to a path or an open stream.

    The conversation is verified (chain and head) first, so a corrupt store is never
    exported as if it were sound. A path is written atomically (temporary file, rename).
    """
    stored = store.load(conversation_id)
    if stored is None:
        raise CheckpointError(f"conversation {conversation_id!r} is not in the store")
    _, _, head = decode_chain(stored.root, stored.records, conversation_id)
    if head != stored.head:
        raise CheckpointError(
            f"conversation {conversation_id!r}: records do not end at the stored head"
        )
    trailer = canonical.dumpb(
        {
            "kind": "end",
            "format": FORMAT,
            "conversation": conversation_id,
            "count": len(stored.records),
            "head": head,
        }
    )
    data = b"".join(line + b"\n" for line in (stored.root, *stored.records, trailer))
    if isinstance(out, str | os.PathLike):
        path = Path(out)
        try:
            if not path.parent.is_dir():  # an export creates no folder
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            # Only over a regular file or at a new path (a device or a link is refused).
            replace_file(path, data)
        except OSError as err:
            raise CheckpointError(f"{out}: cannot write: {err.strerror or err}") from None
    elif _is_binary(out):
        cast(IO[bytes], out).write(data)
    else:
        cast(IO[str], out).write(data.decode("utf-8"))


def read_jsonl(source: Source) -> tuple[Root, list[Record]]:
    """Decode and verify a JSONL export without touching any store."""
    parsed = _parse(*_read(source))
    return parsed.root, list(parsed.records)


def import_jsonl(source: Source, store: Store) -> str:
    """Verify a JSONL export completely, then write it to ``store``; returns its id."""
    data, name = _read(source)
    parsed = _parse(data, name)
    cid = parsed.root.conversation_id
    existing = store.load(cid)
    if existing is None:
        stored_root = store.create_root(cid, parsed.root_bytes)
        have = 0
    else:
        stored_root = existing.root
        have = len(existing.records)
    if stored_root != parsed.root_bytes:
        raise CheckpointError(
            f"{name}: conversation {cid!r} already exists in the store with a different root"
        )
    if existing is not None:
        if have > len(parsed.records):
            raise CheckpointError(
                f"{name}: conversation {cid!r} already has {have} records in the store, "
                f"more than the file's {len(parsed.records)}"
            )
        for seq, (mine, theirs) in enumerate(
            zip(parsed.record_bytes, existing.records, strict=False), start=1
        ):
            if mine != theirs:
                raise CheckpointError(
                    f"{name}: conversation {cid!r} already exists in the store and its "
                    f"record {seq} differs from the file's"
                )
    for record, body in zip(parsed.records[have:], parsed.record_bytes[have:], strict=True):
        store.append(cid, record.seq, record.event_id, body)
    return cid


# -- parsing --------------------------------------------------------------------------


def _is_binary(stream: IO[Any]) -> bool:
    if isinstance(stream, io.TextIOBase):
        return False
    if isinstance(stream, io.RawIOBase | io.BufferedIOBase):
        return True
    return "b" in str(getattr(stream, "mode", ""))


def _read(source: Source) -> tuple[bytes, str]:
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            return path.read_bytes(), str(source)
        except OSError as err:
            raise CheckpointError(f"{source}: cannot read: {err.strerror or err}") from None
    name = str(getattr(source, "name", "<stream>"))
    content = source.read()
    if isinstance(content, str):
        try:
            return content.encode("utf-8"), name
        except UnicodeEncodeError as err:
            raise CheckpointError(f"{name}: not valid UTF-8 text: {err}") from None
    return bytes(content), name


def _lines(data: bytes) -> Sequence[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    return lines


def _layout(data: bytes, name: str) -> None:
    """Name the two ways an editor or a checkout breaks an export without touching its
    content, rather than calling the file corrupted."""
    if data.startswith(b"\xef\xbb\xbf"):
        raise CheckpointError(
            f"{name}:1: starts with a UTF-8 byte order mark (BOM); a JSONL export has "
            "none (an editor added it? remove the first 3 bytes)"
        )
    crlf = data.find(b"\r\n")
    if crlf >= 0:
        line = data.count(b"\n", 0, crlf) + 1
        raise CheckpointError(
            f"{name}:{line}: line ends with CRLF (\\r\\n); a JSONL export uses LF only "
            "(converted by an editor or git core.autocrlf? convert it back to LF)"
        )


def _parse(data: bytes, name: str) -> _Parsed:
    _layout(data, name)
    lines = _lines(data)
    if not lines:
        raise CheckpointError(f"{name}: empty file (expected a root on line 1)")
    try:
        root = Root.decode(lines[0])
    except CheckpointError as err:
        raise CheckpointError(f"{name}:1: {err}") from None
    cid = root.conversation_id
    prev = canonical.sha256_hex(lines[0])
    records: list[Record] = []
    seen: dict[str, int] = {}  # event id -> line
    trailer_line = 0
    for lineno, line in enumerate(lines[1:], start=2):
        where = f"{name}:{lineno}"
        if trailer_line:
            raise CheckpointError(f"{where}: content after the end trailer (line {trailer_line})")
        if not line.strip():
            raise CheckpointError(f"{where}: blank line")
        try:
            obj = canonical.loads(line)
        except (ValueError, CanonicalJSONError) as err:
            raise CheckpointError(f"{where}: not valid JSON: {err}") from None
        if isinstance(obj, dict) and obj.get("kind") == "end":
            _check_trailer(where, line, obj, cid, len(records), prev)
            trailer_line = lineno
            continue
        seq = len(records) + 1
        try:
            record = decode_record(line, cid, seq, prev)
        except CheckpointError as err:
            raise CheckpointError(f"{where}: {err}") from None
        if record.event_id in seen:
            raise CheckpointError(
                f"{where}: record {seq}: event id {record.event_id!r} is already used on "
                f"line {seen[record.event_id]}"
            )
        seen[record.event_id] = lineno
        records.append(record)
        prev = canonical.sha256_hex(line)
    if not trailer_line:
        raise CheckpointError(
            f"{name}:{len(lines)}: truncated: the end trailer is missing (the file stops "
            f"after {'record ' + str(len(records)) if records else 'the root'})"
        )
    return _Parsed(
        root,
        lines[0],
        tuple(records),
        tuple(lines[1 : 1 + len(records)]),
        prev,
    )


def _check_trailer(
    where: str, line: bytes, obj: dict[str, Any], cid: str, count: int, head: str
) -> None:
    if set(obj) != _TRAILER_KEYS:
        raise CheckpointError(
            f"{where}: end trailer must have exactly the keys {sorted(_TRAILER_KEYS)}"
        )
    if obj["format"] != FORMAT:
        raise CheckpointError(
            f"{where}: end trailer has format {obj['format']!r}; this prefixlock reads "
            f"format {FORMAT}"
        )
    if obj["conversation"] != cid:
        raise CheckpointError(
            f"{where}: end trailer names conversation {obj['conversation']!r}, the root {cid!r}"
        )
    if type(obj["count"]) is not int:
        raise CheckpointError(f"{where}: end trailer count {obj['count']!r} is not an integer")
    if obj["count"] != count:
        what = "records are missing (truncated)" if obj["count"] > count else "extra records"
        raise CheckpointError(
            f"{where}: end trailer says {obj['count']!r} records but the file has {count}: {what}"
        )
    if obj["head"] != head:
        raise CheckpointError(
            f"{where}: end trailer head {obj['head']!r} does not match the digest of the last "
            f"record ({head})"
        )
    if canonical.dumpb(obj) != line:
        raise CheckpointError(f"{where}: end trailer is not in canonical form (corrupted?)")
