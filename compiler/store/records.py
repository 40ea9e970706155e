"""Checkpoints: an immutable root plus append-only, hash-chained records.

Encoding (format version :data:`FORMAT`), canonical JSON throughout:

* root: ``{"format", "kind": "root", "conversation", "bundle_digest", "instructions",
  "tools", "settings"}``; its digest starts the chain.
* record ``seq`` (1, 2, ...): ``{"format", "kind": "record", "conversation", "seq",
  "prev", "type", "event_id", "request_digest", "reset", "messages"}`` where ``prev`` is
  the digest of the previous record's bytes (the root's for seq 1). An assistant record
  written by :meth:`Conversation.record` with the provider's token usage has format
  :data:`FORMAT_USAGE` and one more member, ``"usage"`` (:class:`~prefixlock.core.output.Usage`);
  every other record keeps format :data:`FORMAT`, so stores written before usage existed
  open unchanged.
* a user or background record whose request carried a ``timestamp`` (the RFC 3339 text
  the client sent: prefixlock reads no clock), or a tool-results record given one, has
  format :data:`FORMAT_TIMESTAMP` and one more member, ``"timestamp"``, as sent. It is
  what a reader of the store alone needs to expire cache entries between model calls
  (``prefixlock inspect --cache``).
* a user record whose request-context message was built by ``context_updates: sections``
  has format :data:`FORMAT_SECTIONS` and one more member, ``"sections"``: the sections
  that message carries, in order, each ``{"digest", "name"}`` (the digest of the
  section's text, or null for a section it states as cleared). Hydration rebuilds from
  it what is in force per section; the message itself stays one text.
* an assistant record of a provider response that carried an id (Anthropic ``msg_...``,
  OpenAI ``chatcmpl-...`` / ``resp_...``, Gemini ``responseId``) has format
  :data:`FORMAT_RESPONSE` and one more member, ``"response_id"``, as the provider sent
  it: :meth:`Conversation.record` is idempotent by it, after a restart too.
* a record whose writer stored its messages' provider fragments has format
  :data:`FORMAT_WIRE` and one more member, last, ``"wire"``: per provider of the root,
  ``[basis, template per message]`` (:mod:`prefixlock.core.wire`). Hydration hands the
  templates to the serializers (a cold serialize joins stored bytes); a record without
  them (every record written before) is serialized the slow way, to the same bytes.
* a record any of whose tool-result messages holds a result with images (a part
  ``{"call_id", "images": [{"data", "media_type"}, ...], "is_error", "output",
  "type": "tool_result"}``) has format :data:`FORMAT_TOOL_IMAGES`, with or without any
  of the members above, so a prefixlock that predates such parts refuses the record by
  its format ("this prefixlock reads format 1, ... and 6") instead of by a part it does
  not know. Records without such a result keep their formats: stores written before
  open unchanged, and their bytes are the same.

A record with ``reset: true`` starts a new compaction epoch: the current history becomes
exactly its messages. Otherwise its messages are appended. Decoding verifies the format,
the conversation, the seq, the chain and every message's content digest, so a flipped bit
or a spliced record is an error, never a wrong history. Stores additionally keep the head
(last seq and digest) so that a truncated tail is detected too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from enum import StrEnum
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import CanonicalJSONError, CheckpointError
from ..core.messages import (
    CanonicalMessage,
    MessageKind,
    Role,
    ToolResultPart,
    part_from_json,
)
from ..core.model import ProviderSettings, ToolSpec
from ..core.output import Usage
from ..core.timestamps import stamp_problem, timestamp_problem
from ..core.wire import StoredWire, well_formed

FORMAT = 1
#: The format of a record that carries usage (the root and other records stay at 1).
FORMAT_USAGE = 2
#: The format of a record that carries its request's timestamp (with or without usage).
FORMAT_TIMESTAMP = 3
#: The format of a record that carries the sections of its request-context message.
FORMAT_SECTIONS = 4
#: The format of a record that carries the provider's response id (with or without the
#: members of the formats before it).
FORMAT_RESPONSE = 5
#: The format of a record that carries its messages' stored wire templates (with or
#: without a response id, usage, a timestamp or sections).
FORMAT_WIRE = 6
#: The format of a record whose tool results carry images (with or without any of the
#: members of the formats before it).
FORMAT_TOOL_IMAGES = 7
#: Every record format this prefixlock reads.
RECORD_FORMATS = (
    FORMAT,
    FORMAT_USAGE,
    FORMAT_TIMESTAMP,
    FORMAT_SECTIONS,
    FORMAT_RESPONSE,
    FORMAT_WIRE,
    FORMAT_TOOL_IMAGES,
)


def has_tool_images(messages: Iterable[CanonicalMessage]) -> bool:
    """Whether a tool-result message of ``messages`` holds a result with images (the
    record is then of :data:`FORMAT_TOOL_IMAGES`)."""
    return any(
        type(part) is ToolResultPart and part.images
        for message in messages
        if message.kind is MessageKind.TOOL_RESULT
        for part in message.parts
    )


class RecordType(StrEnum):
    USER = "user"  # a user turn: [context?] runtime (reset when auto-compacting)
    EVENT = "event"  # a background completion / injected runtime event
    ASSISTANT = "assistant"  # model output: text, tool calls, opaque parts
    TOOL_RESULTS = "tool_results"  # one batch of tool results
    COMPACT = "compact"  # manual compaction: reset to [summary]


@functools.lru_cache(maxsize=32)
def _root_frame(
    bundle_digest: str,
    instructions: str,
    tools: tuple[ToolSpec, ...],
    settings: tuple[ProviderSettings, ...],
) -> tuple[bytes, bytes]:
    """A root's bytes before and after its conversation id (keys sorted: the id is the
    second member, after ``bundle_digest``)."""
    whole = canonical.dumpb(Root("", bundle_digest, instructions, tools, settings).to_json())
    marker = b',"conversation":'
    at = whole.index(marker) + len(marker)
    assert whole[at : at + 2] == b'""'
    return whole[:at], whole[at + 2 :]


@attrs.frozen
class Root:
    """What a conversation starts with and keeps, even across new bundle deploys."""

    conversation_id: str
    bundle_digest: str
    instructions: str
    tools: tuple[ToolSpec, ...]
    settings: tuple[ProviderSettings, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "kind": "root",
            "conversation": self.conversation_id,
            "bundle_digest": self.bundle_digest,
            "instructions": self.instructions,
            "tools": [t.to_json() for t in self.tools],
            "settings": [s.to_json() for s in self.settings],
        }

    def encode(self) -> bytes:
        """``canonical.dumpb(self.to_json())``. Everything but the conversation id comes
        from the bundle and is encoded once per bundle (:func:`_root_frame`):
        ``Conversation.open`` encodes the root on every open, and the tools' schemas are
        most of it."""
        head, tail = _root_frame(self.bundle_digest, self.instructions, self.tools, self.settings)
        return head + _json_string(self.conversation_id) + tail

    @classmethod
    def decode(cls, data: bytes, conversation_id: str | None = None) -> Root:
        obj = _load_object(data, "root")
        try:
            root = cls(
                conversation_id=obj["conversation"],
                bundle_digest=obj["bundle_digest"],
                instructions=obj["instructions"],
                tools=tuple(
                    ToolSpec(t["name"], t["description"], canonical.dumps(t["parameters"]))
                    for t in obj["tools"]
                ),
                settings=tuple(
                    ProviderSettings(
                        s["provider"], s["model"], s["max_tokens"], canonical.dumps(s["options"])
                    )
                    for s in obj["settings"]
                ),
            )
        except (KeyError, TypeError) as err:
            raise CheckpointError(f"malformed root: missing or bad field {err}") from None
        if root.encode() != data:
            raise CheckpointError("root is not in canonical form (corrupted?)")
        if conversation_id is not None and root.conversation_id != conversation_id:
            raise CheckpointError(
                f"root belongs to conversation {root.conversation_id!r}, not {conversation_id!r}"
            )
        return root


def _check_timestamp(_record: object, _attribute: object, value: str | None) -> None:
    problem = None if value is None else stamp_problem(value)
    if problem is not None:
        raise ValueError(f"timestamp: {problem}")


def _check_response_id(_record: object, _attribute: object, value: str | None) -> None:
    if value is not None and (type(value) is not str or not value):
        raise ValueError(f"response_id: expected a non-empty string or null, got {value!r}")


@attrs.frozen
class ContextSection:
    """One section a request-context message carries: its name and the ``sha256:``
    digest of its text, or None for a section the message states as cleared."""

    name: str
    digest: str | None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "digest": self.digest}


def _sections_from_json(value: Any) -> tuple[ContextSection, ...]:
    if not isinstance(value, list):
        raise TypeError(f"sections: expected a list, got {type(value).__name__}")
    out = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"name", "digest"}:
            raise TypeError(f"sections: bad item {item!r}")
        name, digest = item["name"], item["digest"]
        if not isinstance(name, str) or not (digest is None or isinstance(digest, str)):
            raise TypeError(f"sections: bad item {item!r}")
        out.append(ContextSection(name, digest))
    return tuple(out)


@attrs.frozen
class Record:
    seq: int
    type: RecordType
    event_id: str
    messages: tuple[CanonicalMessage, ...]
    request_digest: str | None = None
    reset: bool = False
    #: the provider's token usage of the model call this record answers (assistant only)
    usage: Usage | None = None
    #: the RFC 3339 ``timestamp`` of the call this record makes, as the client sent it
    #: (a user or background request's; tool results given one); None: not known
    timestamp: str | None = attrs.field(default=None, validator=_check_timestamp)
    #: the sections its request-context message carries (``context_updates: sections``)
    sections: tuple[ContextSection, ...] | None = None
    #: the provider's id of the response this record holds (assistant only; a non-empty
    #: string), None where the provider gave none or the output was not read from one
    response_id: str | None = attrs.field(default=None, validator=_check_response_id)
    #: per provider, ``[basis, template per message]`` (:mod:`prefixlock.core.wire`);
    #: None: none stored. Not part of equality: a cache of what the messages give.
    wire: dict[str, list[Any]] | None = attrs.field(default=None, eq=False)

    @property
    def format(self) -> int:
        """The record format these members are written in."""
        if has_tool_images(self.messages):
            return FORMAT_TOOL_IMAGES  # with or without any of the members below
        if self.wire is not None:
            return FORMAT_WIRE  # with or without any of the members below
        if self.response_id is not None:
            return FORMAT_RESPONSE  # with or without the members below
        if self.sections is not None:
            return FORMAT_SECTIONS  # with or without a timestamp
        if self.timestamp is not None:
            return FORMAT_TIMESTAMP
        return FORMAT if self.usage is None else FORMAT_USAGE

    def encode(self, conversation_id: str, prev: str) -> bytes:
        """The record's canonical bytes; each message's parts are spliced in as
        :meth:`CanonicalMessage.create` encoded them (no second encoding)."""
        if self.messages and all(m.parts_json is not None for m in self.messages):
            try:
                return self._spliced(conversation_id, prev)
            except CanonicalJSONError:
                pass  # the whole encoding below names the refusal and its path
        return canonical.dumpb(self._value(conversation_id, prev, self.messages))

    def _spliced(self, conversation_id: str, prev: str) -> bytes:
        halves = self._envelope(conversation_id, prev)
        if halves is None:
            envelope = canonical.dumpb(self._value(conversation_id, prev, ()))
            # Keys are sorted and every key before "messages" holds a JSON string, in
            # which a quote is escaped: the first '"messages":[]' is the member itself.
            at = envelope.index(b'"messages":[]') + len(b'"messages":[')
            halves = envelope[:at], envelope[at:]
        joined = b",".join(
            b'{"digest":%s,"id":%s,"kind":%s,"parts":%s,"role":%s}'
            % (
                _json_string(m.digest),
                _json_string(m.id),
                _json_string(str(m.kind)),
                m.parts_json,
                _json_string(str(m.role)),
            )
            for m in self.messages
        )
        return halves[0] + joined + halves[1]

    def _envelope(self, conversation_id: str, prev: str) -> tuple[bytes, bytes] | None:
        """The canonical envelope of a record, written directly around its messages list
        (keys in sorted order, exact types only; a usage member as :func:`_usage_text`
        writes it), or None for the encoder to write (and to refuse a lone surrogate,
        naming it)."""
        digest = self.request_digest
        usage = "" if self.usage is None else _usage_text(self.usage)
        stamp = self.timestamp
        response = self.response_id
        if not (
            self.sections is None  # rare (a changed context): the encoder writes them
            and usage is not None
            and (stamp is None or type(stamp) is str)
            and (response is None or type(response) is str)
            and type(conversation_id) is str
            and type(self.event_id) is str
            and type(prev) is str
            and (digest is None or type(digest) is str)
            and type(self.reset) is bool
            and type(self.seq) is int
            and -canonical.MAX_INT <= self.seq <= canonical.MAX_INT
            and isinstance(self.type, RecordType)
        ):
            return None
        text = canonical.string_text
        head = (
            '{"conversation":'
            + text(conversation_id)
            + ',"event_id":'
            + text(self.event_id)
            + ',"format":'
            + str(self.format)
            + ',"kind":"record","messages":['
        )
        tail = (
            '],"prev":'
            + text(prev)
            + ',"request_digest":'
            + ("null" if digest is None else text(digest))
            + (',"reset":true' if self.reset else ',"reset":false')
            + ("" if response is None else ',"response_id":' + text(response))
            + ',"seq":'
            + str(self.seq)
            + ("" if stamp is None else ',"timestamp":' + text(stamp))
            + ',"type":'
            + text(str(self.type))
            + usage
            + ("" if self.wire is None else ',"wire":' + _wire_text(self.wire))
            + "}"
        )
        try:
            return head.encode("utf-8"), tail.encode("utf-8")
        except UnicodeEncodeError:
            return None

    def _value(
        self, conversation_id: str, prev: str, messages: tuple[CanonicalMessage, ...]
    ) -> dict[str, Any]:
        value: dict[str, Any] = {
            "format": self.format,
            "kind": "record",
            "conversation": conversation_id,
            "seq": self.seq,
            "prev": prev,
            "type": str(self.type),
            "event_id": self.event_id,
            "request_digest": self.request_digest,
            "reset": self.reset,
            "messages": [m.to_json() for m in messages],
        }
        if self.usage is not None:
            value["usage"] = self.usage.to_json()
        if self.timestamp is not None:
            value["timestamp"] = self.timestamp
        if self.sections is not None:
            value["sections"] = [section.to_json() for section in self.sections]
        if self.response_id is not None:
            value["response_id"] = self.response_id
        if self.wire is not None:
            value["wire"] = self.wire
        return value


#: The canonical encoder of a value :func:`json.loads` made (plain dicts, lists, str,
#: int, float, bool, None): what :func:`canonical.dumps` writes for it, checks aside.
_SORTED_COMPACT = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
).encode
#: A run of digits as long as 2**64 (a number the encoder may refuse, or a string's).
_LONG_DIGITS = re.compile(r"[0-9]{20}")
#: How deep ``raw`` may nest for certain: it sits two levels into the record, and the
#: encoder refuses :data:`canonical.ENCODE_DEPTH` levels.
_RAW_NESTING = canonical.ENCODE_DEPTH // 2


def _count_text(value: object) -> str | None:
    if value is None:
        return "null"
    if type(value) is int and -canonical.MAX_INT <= value <= canonical.MAX_INT:
        return str(value)
    return None


def _usage_text(usage: Usage) -> str | None:
    """The ``"usage"`` member of a record as the encoder writes :meth:`Usage.to_json`
    (keys sorted), or None for the encoder to write or refuse.

    ``raw`` is spliced in as it stands when it is its own canonical encoding: the C
    parser and encoder give it back unchanged (another spacing, key order, number
    form, escape or a repeated key does not come back; NaN and the infinities are
    refused), and nothing in it lies beyond what the encoder checks on top of them
    (a run of 20 digits, which might be an integer beyond 64 bits, more brackets than
    can nest within the depth limit, or an escaped NUL, which a key may not hold, go to
    the encoder). A lone surrogate is refused by the caller's UTF-8 encoding, as for
    every text here. Before, every record with usage went through the encoder's checked
    walk: 54 us against 7 us for one without (most of what ``Conversation.record`` costs
    over ``Conversation.assistant``)."""
    raw = usage.raw
    if (
        type(raw) is not str
        or raw.count("[") + raw.count("{") > _RAW_NESTING
        or _LONG_DIGITS.search(raw) is not None
        or "\\u0000" in raw  # the encoder refuses NUL in a key
    ):
        return None
    try:
        if _SORTED_COMPACT(json.loads(raw)) != raw:
            return None
    except (ValueError, RecursionError):
        return None
    counts: list[str] = []
    for figure in (
        usage.cache_read_tokens,
        usage.cache_write_tokens,
        usage.input_tokens,
        usage.output_tokens,
        usage.reasoning_tokens,
    ):
        text = _count_text(figure)
        if text is None:
            return None
        counts.append(text)
    provider = usage.provider
    if not (provider is None or type(provider) is str):
        return None
    read, write, given, output, reasoning = counts
    name = "null" if provider is None else canonical.string_text(provider)
    return (
        f',"usage":{{"cache_read_tokens":{read},"cache_write_tokens":{write},'
        f'"input_tokens":{given},"output_tokens":{output},"provider":{name},'
        f'"raw":{raw},"reasoning_tokens":{reasoning}}}'
    )


def _wire_text(wire: Mapping[str, Any]) -> str:
    """The ``"wire"`` member's value as the encoder writes it: keys sorted, compact. Its
    lists hold only texts (decoded from UTF-8, so no lone surrogate) and integers, which
    the C encoder writes exactly as :func:`canonical.dumps` does, without its walk."""
    return _SORTED_COMPACT(wire)


def _json_string(value: str) -> bytes:
    """``canonical.dumpb(value)`` for a string; digests, kinds and plain ids directly."""
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return b'"%s"' % value.encode()
    return canonical.dumpb(value)


def _load_object(data: bytes, kind: str) -> Mapping[str, Any]:
    try:
        obj = canonical.loads(data)
    except (ValueError, CanonicalJSONError) as err:
        raise CheckpointError(f"{kind} is not valid JSON: {err}") from None
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        raise CheckpointError(f"expected a {kind}, got {str(obj)[:60]!r}")
    formats = RECORD_FORMATS if kind == "record" else (FORMAT,)
    if obj.get("format") not in formats:
        names = [str(f) for f in formats]
        readable = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        raise CheckpointError(
            f"{kind} has format {obj.get('format')!r}; this prefixlock reads format {readable}"
        )
    return obj


def decode_record(
    data: bytes,
    conversation_id: str,
    seq: int,
    prev: str,
    *,
    checked: bool = False,
    chained: bool = False,
) -> Record:
    """Decode record ``seq`` and verify it continues the chain after ``prev``.

    Fast path first (:func:`_scan_record`); whatever it cannot vouch for is decoded by
    :func:`_decode_record_checked`, which gives the precise error. ``checked`` skips the
    fast path: integrity checks use it, since only the checked path proves that a record
    is in canonical form (the fast path trusts digests a crafted record could recompute).
    ``chained``: the caller checks these bytes' SHA-256 against the chain (the next
    record's ``prev``, or the head), as :func:`read_chain` does, so the fast path takes
    the message digests as stored instead of hashing every message again.
    """
    record = None if checked else _scan_record(data, conversation_id, seq, prev, chained)
    if record is None:
        record = _decode_record_checked(data, conversation_id, seq, prev)
    return record


def read_chain(
    records: Sequence[bytes],
    conversation_id: str,
    prev: str,
    *,
    first: int = 1,
    digests: Sequence[str] | None = None,
    head: str | None = None,
) -> Iterator[tuple[Record, str]]:
    """Decode ``records`` (seq ``first``, ``first + 1``, ... after the digest ``prev``),
    yielding each record with the ``sha256:`` digest of its bytes (``digests``, when the
    store already verified them against the bytes, else computed here).

    Every byte is hashed once: each record's digest must be the next record's ``prev``
    (which is part of the next record's bytes), so the chain vouches for every record but
    the last, and their messages' content digests are taken as stored
    (:func:`decode_record` ``chained``). The last record's messages are hashed as usual:
    a store may derive its head from the records (:class:`~.contract.MemoryStore` does),
    so the head vouches for nothing. ``head``: the store's head, which the last digest
    must equal (a mismatch is a :class:`CheckpointError`: a truncated tail). Where the
    chain breaks, the record before the break is decoded the checked way first, so the
    error names what changed (``record 2: message event:b1: content digest mismatch``),
    as if every message had been hashed.
    """
    count = len(records)
    if digests is not None and len(digests) != count:
        digests = None
    before = prev
    # A record is handed out only once the next one has vouched for it (or, the last,
    # once its messages are hashed and the head matches): a caller applying records as
    # they come (catch-up, on a live history) never applies one the chain then refuses.
    pending: tuple[Record, str] | None = None
    for offset, data in enumerate(records):
        seq = first + offset
        chained = offset + 1 < count
        try:
            record = decode_record(data, conversation_id, seq, prev, chained=chained)
        except CheckpointError:
            if offset:  # the record before, the checked way: its own error, if it has one
                _decode_record_checked(records[offset - 1], conversation_id, seq - 1, before)
            raise
        if pending is not None:
            yield pending
        digest = digests[offset] if digests is not None else canonical.sha256_hex(data)
        pending = (record, digest)
        before, prev = prev, digest
    if head is not None and prev != head:
        raise CheckpointError(
            f"conversation {conversation_id!r}: records end at a different head "
            "than the store recorded (truncated?)"
        )
    if pending is not None:
        yield pending


def _decode_record_checked(data: bytes, conversation_id: str, seq: int, prev: str) -> Record:
    """The full decode: parse, rebuild every value, recompute every message digest and
    re-encode the record to check its canonical form."""
    obj = _load_object(data, "record")
    where = f"conversation {conversation_id!r} record {seq}"
    if obj.get("conversation") != conversation_id:
        raise CheckpointError(f"{where}: belongs to {obj.get('conversation')!r}")
    if obj.get("seq") != seq:
        raise CheckpointError(f"{where}: has seq {obj.get('seq')!r} (missing or reordered)")
    if obj.get("prev") != prev:
        raise CheckpointError(f"{where}: hash chain broken (prev does not match)")
    stamp = obj.get("timestamp")
    if "timestamp" in obj:
        problem = stamp_problem(stamp)
        if problem is not None:
            raise CheckpointError(f"{where}: timestamp: {problem}")
    wire = obj.get("wire")
    if "wire" in obj and not well_formed(wire, len(obj.get("messages") or ())):
        raise CheckpointError(f"{where}: malformed wire templates")
    try:
        record = Record(
            seq=seq,
            type=RecordType(obj["type"]),
            event_id=obj["event_id"],
            messages=tuple(CanonicalMessage.from_json(m) for m in obj["messages"]),
            request_digest=obj["request_digest"],
            reset=obj["reset"],
            usage=Usage.from_json(obj["usage"]) if "usage" in obj else None,
            timestamp=stamp,
            sections=_sections_from_json(obj["sections"]) if "sections" in obj else None,
            response_id=obj.get("response_id"),
            wire=wire,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise CheckpointError(f"{where}: malformed: {err!r}") from None
    except CheckpointError as err:
        raise CheckpointError(f"{where}: {err}") from None
    if record.encode(conversation_id, prev) != data:
        raise CheckpointError(f"{where}: not in canonical form (corrupted?)")
    if wire is not None:
        for index, message in enumerate(record.messages):
            parts = message.canonical_parts()
            message.attach_wire(StoredWire(wire, index, parts, 0, len(parts)))
    return record


def decode_chain(
    root_data: bytes,
    records: Iterable[bytes],
    conversation_id: str | None = None,
    *,
    checked: bool = False,
) -> tuple[Root, list[Record], str]:
    """Decode a whole conversation; returns the root, the records and the head digest.

    ``checked``: every record the checked way (see :func:`decode_record`)."""
    root = Root.decode(root_data, conversation_id)
    prev = canonical.sha256_hex(root_data)
    out: list[Record] = []
    if checked:
        for seq, data in enumerate(records, start=1):
            out.append(decode_record(data, root.conversation_id, seq, prev, checked=True))
            prev = canonical.sha256_hex(data)
        return root, out, prev
    head = prev
    for record, digest in read_chain(tuple(records), root.conversation_id, prev):
        out.append(record)
        head = digest
    return root, out, head


# -- the fast path ------------------------------------------------------------------------
#
# Hydration decodes every record of a conversation, so decoding must cost about what
# parsing does. Rebuilding every value, re-encoding it canonically and hashing each message
# again costs several times that. :func:`_scan_record` reads the same bytes in one pass:
#
# * the record envelope is matched exactly, key by key in canonical order, by literals
#   and regular expressions that admit only canonical values (strings without escapes,
#   digests, integers without leading zeros), so the envelope is canonical;
# * each message's ``parts`` are parsed by the C scanner of :mod:`json`, which also
#   reports where they end, and the stored content digest is checked against SHA-256 of
#   exactly those bytes (``{"kind":...,"parts":...,"role":...}``), which is what the
#   writer hashed: a changed byte in a message is a digest mismatch, and no message is
#   re-encoded. Inside :func:`read_chain` (hydration, catch-up) that check is left to
#   the chain instead: the SHA-256 of the whole record is checked against the next
#   record's ``prev`` or the head, so a changed byte is caught there, and hashing every
#   message as well would hash every stored byte twice (SHA-256 costs a third of
#   :func:`json.loads` of the same bytes on our CPUs). A break is explained by decoding
#   the record before it the checked way, which names the message;
# * the chain (``prev``), conversation and seq are checked as before;
# * a record of :data:`FORMAT_USAGE` (``Conversation.record``: every assistant record of
#   a server that reads provider responses) ends with its usage member, matched the same
#   way (counts without leading zeros, a provider without escapes); its ``raw`` object is
#   parsed by the C scanner and, outside a chain, must be its own canonical encoding.
#   Before, such a record took the checked path, and a conversation of them hydrated at
#   4.5x :func:`json.loads` instead of 2x;
# * a record of :data:`FORMAT_TIMESTAMP` (a turn, event or tool results with a timestamp)
#   holds a ``timestamp`` member between ``seq`` and ``type``, a string
#   without escapes that must pass the same RFC 3339 check as on the checked path; a
#   usage member may follow it. Any other format holds none;
# * a record of :data:`FORMAT_SECTIONS` (a turn whose request-context message was built
#   by ``context_updates: sections``) holds a ``sections`` member between ``reset`` and
#   ``seq``, each item matched exactly (a digest or null, a name without escapes), and
#   may hold a timestamp as above.
# * a record of :data:`FORMAT_WIRE` (the writer stored its messages' wire templates)
#   may hold any of the members above and ends with its ``wire`` member, parsed by the C
#   scanner (inside a chain the record's SHA-256 vouches for it; alone, it must be its
#   own canonical encoding); each message keeps its record's bytes and where its parts
#   lie in them (:class:`~prefixlock.core.wire.StoredWire`, no copy).
#
# Anything unexpected -- invalid UTF-8 or JSON, another key order, spacing, an escape in
# an id, a digest mismatch, an unknown kind -- returns None, and
# :func:`_decode_record_checked` decodes the record the slow way and reports the precise
# error. The fast path accepts exactly what the checked path accepts for every record a
# writer produced; bytes that only the checked path refuses would have to be crafted to
# match their own digests.


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} has no JSON form")


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different (a ValueError otherwise, which sends the
    record to the checked path, which names the key). Inside a chain nothing hashes a
    message's parts again, so a crafted record with a repeated key, its chain digests
    recomputed, was accepted by hydration while ``integrity`` refused it (issue 43)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("a repeated key")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_pairs)
#: ``(text, index) -> (value, end)``: the C scanner behind :func:`json.loads` (untyped).
_scan_value: Callable[[str, int], tuple[Any, int]] = _DECODER.scan_once  # type: ignore[attr-defined]
#: A JSON string that needs no escape (so it is canonical as it stands), and a digest.
_PLAIN = r'"([^"\\\x00-\x1f]*)"'
_DIGEST = r'"(sha256:[0-9a-f]{64})"'
_EVENT_ID = re.compile(
    _PLAIN
    + ',"format":('
    + "|".join(map(str, RECORD_FORMATS))
    + "),"
    + '"kind":"record","messages":\\['
)
_MESSAGE_HEAD = re.compile(
    r'\{"digest":' + _DIGEST + ',"id":' + _PLAIN + ',"kind":"([a-z_]+)","parts":'
)
_MESSAGE_TAIL = re.compile(r',"role":"([a-z]+)"\}([,\]])')
#: One section of a ``sections`` member as the writer encodes it (keys sorted).
_SECTION = r'\{"digest":(?:null|"sha256:[0-9a-f]{64}"),"name":"[^"\\\x00-\x1f]*"\}'
_SECTION_ITEM = re.compile(r'\{"digest":(null|"sha256:[0-9a-f]{64}"),"name":"([^"\\\x00-\x1f]*)"\}')
_RECORD_TAIL = re.compile(
    r',"request_digest":(?:null|' + _DIGEST + r'),"reset":(true|false),'
    r'(?:"response_id":' + _PLAIN + r",)?"
    r'(?:"sections":(\[(?:' + _SECTION + r"(?:," + _SECTION + r")*)?\]),)?"
    r'"seq":([1-9][0-9]*),(?:"timestamp":' + _PLAIN + r',)?"type":"([a-z_]+)"'
)
_USAGE_FORMAT = str(FORMAT_USAGE)
_TIMESTAMP_FORMAT = str(FORMAT_TIMESTAMP)
_SECTIONS_FORMAT = str(FORMAT_SECTIONS)
_RESPONSE_FORMAT = str(FORMAT_RESPONSE)
_WIRE_FORMAT = str(FORMAT_WIRE)
_TOOL_IMAGES_FORMAT = str(FORMAT_TOOL_IMAGES)
#: A usage member as the writer encodes it (:meth:`Usage.to_json`, keys sorted): counts
#: without leading zeros (up to 15 digits; a longer one, which no provider reports, goes
#: to the checked path), a provider without escapes; ``raw`` is scanned, then the rest.
_COUNT = r"(null|0|[1-9][0-9]{0,14})"
_USAGE_HEAD = re.compile(
    r',"usage":\{"cache_read_tokens":'
    + _COUNT
    + ',"cache_write_tokens":'
    + _COUNT
    + ',"input_tokens":'
    + _COUNT
    + ',"output_tokens":'
    + _COUNT
    + r',"provider":(?:null|'
    + _PLAIN
    + '),"raw":'
)
_USAGE_TAIL = re.compile(r',"reasoning_tokens":' + _COUNT + r"\}")


def _count(text: str) -> int | None:
    return None if text == "null" else int(text)


_TYPES = {t.value: t for t in RecordType}
_KINDS = {k.value: k for k in MessageKind}
_ROLES = {r.value: r for r in Role}


class _NotFast(Exception):
    """The fast path cannot vouch for these bytes; decode them the checked way."""


def _quoted(value: str) -> str:
    """The canonical JSON string for ``value`` (fast for digests and plain ids)."""
    if value.isascii() and value.isprintable() and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return json.dumps(value, ensure_ascii=False)


@functools.lru_cache(maxsize=256)
def _record_head(conversation_id: str) -> str:
    """How every record of the conversation starts (canonical: keys sorted)."""
    return '{"conversation":' + _quoted(conversation_id) + ',"event_id":'


def _scan_record(
    data: bytes, conversation_id: str, seq: int, prev: str, chained: bool = False
) -> Record | None:
    try:
        return _scan(data, conversation_id, seq, prev, chained)
    except (
        _NotFast,
        ValueError,  # invalid UTF-8 or JSON, NaN
        TypeError,
        KeyError,  # an unknown record type, message kind or role
        AttributeError,  # parts that are not objects
        StopIteration,  # no JSON value where parts should be
        RecursionError,
        CheckpointError,  # a part the checked path refuses, with its own message
        CanonicalJSONError,  # a usage member with no canonical form (a lone surrogate)
    ):
        return None


def _scanned_sections(sections_text: str) -> tuple[ContextSection, ...]:
    return tuple(
        ContextSection(name, None if digest == "null" else digest[1:-1])
        for digest, name in _SECTION_ITEM.findall(sections_text)
    )


def _scan(data: bytes, conversation_id: str, seq: int, prev: str, chained: bool) -> Record:
    text = data.decode("utf-8")
    # For ASCII, a position in the text is the same position in the bytes: hash those.
    view = memoryview(data) if len(text) == len(data) else None
    head = _record_head(conversation_id)
    if not text.startswith(head):
        raise _NotFast
    match = _EVENT_ID.match(text, len(head))
    if match is None:
        raise _NotFast
    event_id, record_format = match.groups()
    pos = match.end()
    messages: list[CanonicalMessage] = []
    spans: list[tuple[int, int]] = []  # each message's parts, in the text
    end = "," if text.startswith("{", pos) else "]"
    if end == "]":
        pos += 1
    while end == ",":
        match = _MESSAGE_HEAD.match(text, pos)
        if match is None:
            raise _NotFast
        digest, message_id, kind = match.groups()
        start = match.end(2) + 2  # content: "{" + text[start:stop], from "kind" to "}"
        parts_at = match.end()
        raw_parts, pos = _scan_value(text, parts_at)
        spans.append((parts_at, pos))
        match = _MESSAGE_TAIL.match(text, pos)
        if match is None:
            raise _NotFast
        role, end = match.groups()
        pos = match.end()
        if not chained:
            stop = match.end(1) + 2
            hasher = hashlib.sha256(b"{")
            hasher.update(view[start:stop] if view is not None else text[start:stop].encode())
            if "sha256:" + hasher.hexdigest() != digest:
                raise _NotFast
        for p in raw_parts:
            if None in p.values():
                raise _NotFast  # a null field: the checked path says what is wrong
        parts = tuple([part_from_json(p) for p in raw_parts])
        messages.append(CanonicalMessage(message_id, _KINDS[kind], _ROLES[role], parts, digest))
    tail = ',"prev":' + _quoted(prev)
    if not text.startswith(tail, pos):
        raise _NotFast
    match = _RECORD_TAIL.match(text, pos + len(tail))
    if match is None or match[5] != str(seq):
        raise _NotFast
    request_digest, reset, response_id, sections_text, _, stamp, record_type = match.groups()
    pos = match.end()
    sections = None
    tool_images = record_format == _TOOL_IMAGES_FORMAT
    if tool_images != has_tool_images(messages):  # then, and only then, such results
        raise _NotFast
    wired = record_format == _WIRE_FORMAT
    if wired or tool_images:  # wire templates last (maybe, with images); any of below
        if response_id == "" or (stamp is not None and timestamp_problem(stamp) is not None):
            raise _NotFast
        if sections_text is not None:
            sections = _scanned_sections(sections_text)
        with_usage = text.startswith(',"usage":', pos)
    elif record_format == _RESPONSE_FORMAT:  # then, and only then, a response id; maybe more
        if not response_id or (stamp is not None and timestamp_problem(stamp)):
            raise _NotFast
        if sections_text is not None:
            sections = _scanned_sections(sections_text)
        with_usage = text.startswith(',"usage":', pos)
    elif response_id is not None:
        raise _NotFast
    elif record_format == _SECTIONS_FORMAT:  # then, and only then, sections; maybe a stamp
        if sections_text is None or (stamp is not None and timestamp_problem(stamp)):
            raise _NotFast
        sections = _scanned_sections(sections_text)
        with_usage = text.startswith(',"usage":', pos)
    elif sections_text is not None:
        raise _NotFast
    elif record_format == _TIMESTAMP_FORMAT:  # then, and only then, a timestamp
        if stamp is None or timestamp_problem(stamp) is not None:
            raise _NotFast
        with_usage = text.startswith(',"usage":', pos)
    elif stamp is not None:
        raise _NotFast
    else:
        with_usage = record_format == _USAGE_FORMAT
    usage = None
    if with_usage:  # then, and only then, a usage member comes (last but the wire)
        match = _USAGE_HEAD.match(text, pos)
        if match is None:
            raise _NotFast
        start = match.end()
        raw, pos = _scan_value(text, start)
        raw_text = text[start:pos]
        # Inside a chain the record's SHA-256 vouches for these bytes, as for its parts;
        # alone, nothing does: the raw usage must be the canonical encoding of itself.
        if not chained and canonical.dumps(raw) != raw_text:
            raise _NotFast
        tail_match = _USAGE_TAIL.match(text, pos)
        if tail_match is None:
            raise _NotFast
        pos = tail_match.end()
        cache_read, cache_write, input_tokens, output_tokens, provider = match.groups()
        usage = Usage(
            _count(input_tokens),
            _count(cache_read),
            _count(cache_write),
            _count(output_tokens),
            _count(tail_match[1]),
            raw_text,
            provider,
        )
    wire = None
    if wired or (tool_images and text.startswith(_WIRE_KEY, pos)):
        if not text.startswith(_WIRE_KEY, pos):
            raise _NotFast
        start = pos + len(_WIRE_KEY)
        wire, pos = _scan_value(text, start)
        if type(wire) is not dict:
            raise _NotFast
        # As for usage: alone, nothing vouches for these bytes but their canonical form.
        if not chained and canonical.dumps(wire) != text[start:pos]:
            raise _NotFast
        _attach_wire(data, text, view is not None, messages, spans, wire)
    if pos != len(text) - 1 or text[pos] != "}":
        raise _NotFast
    return Record(
        seq,
        _TYPES[record_type],
        event_id,
        tuple(messages),
        request_digest,
        reset == "true",
        usage,
        stamp,
        sections,
        response_id,
        wire,
    )


_WIRE_KEY = ',"wire":'


def _attach_wire(
    data: bytes,
    text: str,
    ascii_text: bool,
    messages: Sequence[CanonicalMessage],
    spans: Sequence[tuple[int, int]],
    wire: dict[str, Any],
) -> None:
    """Leave on each message its record's templates and where its parts bytes lie in
    ``data`` (the record's bytes, kept: no copy per message). For a record that is not
    ASCII, text positions are turned into byte positions."""
    for index, (message, (start, stop)) in enumerate(zip(messages, spans, strict=True)):
        if ascii_text:
            offset, length = start, stop - start
        else:
            offset = len(text[:start].encode("utf-8"))
            length = len(text[start:stop].encode("utf-8"))
        message.attach_wire(StoredWire(wire, index, data, offset, length))
