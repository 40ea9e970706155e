"""Checkpoints: an immutable root plus append-only, hash-chained records.

Encoding (format version :data:`FORMAT`), canonical JSON throughout:

* root: ``{"format", "kind": "root", "conversation", "bundle_digest", "instructions",
  "tools", "settings"}``; its digest starts the chain.
* record ``seq`` (1, 2, ...): ``{"format", "kind": "record", "conversation", "seq",
  "prev", "type", "event_id", "request_digest", "reset", "messages"}`` where ``prev`` is
  the digest of the previous record's bytes (the root's for seq 1).

A record with ``reset: true`` starts a new compaction epoch: the current history becomes
exactly its messages. Otherwise its messages are appended. Decoding verifies the format,
the conversation, the seq, the chain and every message's content digest, so a flipped bit
or a spliced record is an error, never a wrong history. Stores additionally keep the head
(last seq and digest) so that a truncated tail is detected too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

import attrs

from compiler import canonical
from compiler.errors import CheckpointError
from compiler.messages import CanonicalMessage
from compiler.model import ProviderSettings, ToolSpec

FORMAT = 1


class RecordType(StrEnum):
    USER = "user"  # a user turn: [context?] runtime (reset when auto-compacting)
    EVENT = "event"  # a background completion / injected runtime event
    ASSISTANT = "assistant"  # model output: text, tool calls, opaque parts
    TOOL_RESULTS = "tool_results"  # one batch of tool results
    COMPACT = "compact"  # manual compaction: reset to [summary]


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
        return canonical.dumpb(self.to_json())

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


@attrs.frozen
class Record:
    seq: int
    type: RecordType
    event_id: str
    messages: tuple[CanonicalMessage, ...]
    request_digest: str | None = None
    reset: bool = False

    def encode(self, conversation_id: str, prev: str) -> bytes:
        return canonical.dumpb(
            {
                "format": FORMAT,
                "kind": "record",
                "conversation": conversation_id,
                "seq": self.seq,
                "prev": prev,
                "type": str(self.type),
                "event_id": self.event_id,
                "request_digest": self.request_digest,
                "reset": self.reset,
                "messages": [m.to_json() for m in self.messages],
            }
        )


def _load_object(data: bytes, kind: str) -> Mapping[str, Any]:
    try:
        obj = canonical.loads(data)
    except (ValueError, canonical.CanonicalJSONError) as err:
        raise CheckpointError(f"{kind} is not valid JSON: {err}") from None
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        raise CheckpointError(f"expected a {kind}, got {str(obj)[:60]!r}")
    if obj.get("format") != FORMAT:
        raise CheckpointError(
            f"{kind} has format {obj.get('format')!r}; this prefixlock reads format {FORMAT}"
        )
    return obj


def decode_record(data: bytes, conversation_id: str, seq: int, prev: str) -> Record:
    """Decode record ``seq`` and verify it continues the chain after ``prev``."""
    obj = _load_object(data, "record")
    where = f"conversation {conversation_id!r} record {seq}"
    if obj.get("conversation") != conversation_id:
        raise CheckpointError(f"{where}: belongs to {obj.get('conversation')!r}")
    if obj.get("seq") != seq:
        raise CheckpointError(f"{where}: has seq {obj.get('seq')!r} (missing or reordered)")
    if obj.get("prev") != prev:
        raise CheckpointError(f"{where}: hash chain broken (prev does not match)")
    try:
        record = Record(
            seq=seq,
            type=RecordType(obj["type"]),
            event_id=obj["event_id"],
            messages=tuple(CanonicalMessage.from_json(m) for m in obj["messages"]),
            request_digest=obj["request_digest"],
            reset=obj["reset"],
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise CheckpointError(f"{where}: malformed: {err!r}") from None
    except CheckpointError as err:
        raise CheckpointError(f"{where}: {err}") from None
    if record.encode(conversation_id, prev) != data:
        raise CheckpointError(f"{where}: not in canonical form (corrupted?)")
    return record


def decode_chain(
    root_data: bytes, records: Iterable[bytes], conversation_id: str | None = None
) -> tuple[Root, list[Record], str]:
    """Decode a whole conversation; returns the root, the records and the head digest."""
    root = Root.decode(root_data, conversation_id)
    prev = canonical.sha256_hex(root_data)
    out: list[Record] = []
    for seq, data in enumerate(records, start=1):
        out.append(decode_record(data, root.conversation_id, seq, prev))
        prev = canonical.sha256_hex(data)
    return root, out, prev
