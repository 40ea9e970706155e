"""The append-only canonical history of one conversation.

:class:`History` is rebuilt from a checkpoint root and its records, and changes only by
:meth:`History.apply` of one more record. Live operations build a record, persist it, then
apply it; hydration applies the stored records. Both paths run the same code, so after a
restart the next request is byte-identical to the one an uninterrupted process sends.

Epochs: every compaction starts a new epoch whose first messages the compaction record
gives. Old epochs stay in memory (a retry of an old event returns the request it got).
Each epoch is a Python list that is only ever appended to; requests see it through a
:class:`~prefixlock.core.model.MessageView` of fixed length, so a projection is O(1) and
immutable to callers.
"""

from __future__ import annotations

import attrs

from ..core import canonical
from ..core.errors import CheckpointError
from ..core.messages import CanonicalMessage, MessageKind, ToolCallPart, ToolResultPart
from ..core.model import FRAME_HINTS, CacheHint, CachePosition, MessageView, ModelRequest
from ..store.contract import StoredConversation
from ..store.records import ContextSection, Record, RecordType, Root, read_chain


@attrs.frozen
class EventInfo:
    """What a delivered event left behind: enough to answer its retry identically."""

    record_type: RecordType
    request_digest: str | None
    epoch: int
    length: int  # messages in the epoch after the event's record
    context_index: int | None  # latest request-context in the epoch at that point


def cache_key(conversation_id: str) -> str:
    """Derived from the conversation id alone, so it is identical on every call."""
    return "prefixlock-" + canonical.sha256_hex(conversation_id)[7:39]


class History:
    """In-memory state of one conversation: root, epochs, dedupe and retry state."""

    def __init__(self, root: Root, head: str) -> None:
        self.root = root
        self.epochs: list[list[CanonicalMessage]] = [[]]
        self.seq = 0
        self.head = head  # digest of the last record's bytes (the root's at first)
        self.events: dict[str, EventInfo] = {}
        self.context_index: int | None = None  # latest request-context in the current epoch
        #: ``context_updates: sections``: the digest of each section's text in force in
        #: the current epoch (None: projected as empty or cleared); None until the epoch
        #: has a sectioned request-context message.
        self.sections: dict[str, str | None] | None = None
        #: request-context message id -> the sections it carries (sectioned ones only)
        self.context_sections: dict[str, tuple[ContextSection, ...]] = {}
        self.pending_calls: dict[str, str] = {}  # call id -> tool name, awaiting results
        self.call_ids: set[str] = set()  # every call id ever made (unique per conversation)
        self.assistant_count = 0
        #: provider response id -> the assistant message recorded from that response
        self.responses: dict[str, CanonicalMessage] = {}
        #: the response id of the latest assistant message (None: it was recorded from
        #: a response without one, or by hand)
        self.last_response_id: str | None = None
        self.user_turns = 0
        self.awaiting_output = False  # a model call was made and has no output yet
        #: The last model call's projection (:class:`EventInfo`; None before the first and
        #: after a manual compaction) and the latest call timestamp (RFC 3339) so far: a
        #: keep-alive re-sends that call (:meth:`Conversation.keepalive`).
        self.last_call: EventInfo | None = None
        self.last_call_at: str | None = None
        self._cache_key = cache_key(root.conversation_id)

    @classmethod
    def hydrate(
        cls, stored: StoredConversation, *, known_root: tuple[bytes, Root] | None = None
    ) -> History:
        """Rebuild the history and its dedupe/retry state from stored bytes alone.

        ``known_root``: a root and its encoding that the caller has at hand; when the
        stored root is exactly those bytes, they are not decoded again.
        """
        cid = stored.conversation_id
        if known_root is not None and known_root[0] == stored.root:
            root = known_root[1]
        else:
            root = Root.decode(stored.root, cid)
        history = cls(root, canonical.sha256_hex(stored.root))
        # Each record is hashed once, for the chain and the history's head -- by the
        # store, if it did while loading; the chain ends at the store's head.
        chain = read_chain(
            stored.records, cid, history.head, digests=stored.digests, head=stored.head
        )
        for record, digest in chain:
            history.apply(record, digest)
        return history

    @property
    def epoch(self) -> int:
        return len(self.epochs) - 1

    @property
    def messages(self) -> list[CanonicalMessage]:
        """The current epoch's messages (do not mutate: use :meth:`apply`)."""
        return self.epochs[-1]

    @property
    def latest_context(self) -> CanonicalMessage | None:
        if self.context_index is None:
            return None
        return self.epochs[-1][self.context_index]

    def apply(self, record: Record, record_digest: str) -> None:
        """Apply one more record; the only way the history changes."""
        if record.seq != self.seq + 1:
            raise CheckpointError(f"record {record.seq} applied after record {self.seq}")
        if record.reset:
            self.epochs.append([])
            self.context_index = None
            self.sections = None
            self.pending_calls.clear()
        current = self.epochs[-1]
        lineage = id(current)  # MessageView.lineage() of this epoch's views
        for message in record.messages:
            if message.wire is not None:  # stored templates: for this place only
                message.wire.bind(lineage, len(current))
            if message.kind is MessageKind.REQUEST_CONTEXT:
                self.context_index = len(current)
                if record.sections is None:  # a whole context: nothing known per section
                    self.sections = None
                else:
                    in_force = {} if self.sections is None else dict(self.sections)
                    in_force.update((s.name, s.digest) for s in record.sections)
                    self.sections = in_force
                    self.context_sections[message.id] = record.sections
            elif message.kind is MessageKind.ASSISTANT:
                self.assistant_count += 1
                self.last_response_id = record.response_id
                if record.response_id is not None:
                    self.responses[record.response_id] = message
                for part in message.parts:
                    if isinstance(part, ToolCallPart):
                        self.pending_calls[part.call_id] = part.name
                        self.call_ids.add(part.call_id)
            elif message.kind is MessageKind.TOOL_RESULT:
                for part in message.parts:
                    if isinstance(part, ToolResultPart):
                        self.pending_calls.pop(part.call_id, None)
            current.append(message)
        if record.type is RecordType.USER:
            self.user_turns += 1
        self.awaiting_output = record.type in (
            RecordType.USER,
            RecordType.EVENT,
            RecordType.TOOL_RESULTS,
        )
        info = EventInfo(
            record.type, record.request_digest, self.epoch, len(current), self.context_index
        )
        self.events[record.event_id] = info
        if self.awaiting_output:
            self.last_call = info
            if record.timestamp is not None:
                self.last_call_at = record.timestamp
        elif record.type is RecordType.COMPACT:
            self.last_call = None
        self.seq = record.seq
        self.head = record_digest

    def project_with(self, record: Record) -> tuple[ModelRequest, int]:
        """The request :meth:`project` would give once ``record`` is applied (its
        messages after the epoch's, or alone when it resets), and the index of its
        first message: what the writer stores wire templates for."""
        reset = record.reset
        earlier = () if reset else tuple(self.epochs[-1])
        context_index = None if reset else self.context_index
        for offset, message in enumerate(record.messages):
            if message.kind is MessageKind.REQUEST_CONTEXT:
                context_index = len(earlier) + offset
        messages = (*earlier, *record.messages)
        hints = list(FRAME_HINTS)
        if context_index is not None:
            hints.append(CacheHint(CachePosition.CONTEXT, context_index))
        if messages:
            hints.append(CacheHint(CachePosition.TAIL, len(messages) - 1))
        request = ModelRequest(
            conversation_id=self.root.conversation_id,
            instructions=self.root.instructions,
            tools=self.root.tools,
            settings=self.root.settings,
            messages=messages,
            cache_hints=tuple(hints),
            cache_key=self._cache_key,
            epoch=self.epoch + 1 if reset else self.epoch,
        )
        return request, len(earlier)

    def project(self, info: EventInfo | None = None) -> ModelRequest:
        """The provider-independent request for the current state (or an earlier event)."""
        if info is None:
            epoch, length, context_index = self.epoch, len(self.epochs[-1]), self.context_index
        else:
            epoch, length, context_index = info.epoch, info.length, info.context_index
        hints = list(FRAME_HINTS)
        if context_index is not None:
            hints.append(CacheHint(CachePosition.CONTEXT, context_index))
        if length:
            hints.append(CacheHint(CachePosition.TAIL, length - 1))
        return ModelRequest(
            conversation_id=self.root.conversation_id,
            instructions=self.root.instructions,
            tools=self.root.tools,
            settings=self.root.settings,
            messages=MessageView(self.epochs[epoch], length),
            cache_hints=tuple(hints),
            cache_key=self._cache_key,
            epoch=epoch,
        )
