"""The library entry point: one :class:`Conversation` per conversation id.

::

    bundle = build_bundle("path/to/specs")
    store = SQLiteStore("conversations.db")
    conv = Conversation.open(store, bundle, "conv-1")
    request = conv.handle(AgentRunRequest.from_value({...}))   # a user turn -> ModelRequest
    body = providers.get("anthropic").serialize(request)        # the exact bytes to POST
    conv.assistant(text="...", tool_calls=[ToolCall("c1", "read_file", {"path": "a.py"})])
    request = conv.tool_results([ToolResult("c1", "...")])      # the next model call

Every operation validates first, then persists one record (one transaction), then applies
it in memory: an operation that fails changes nothing. Validation includes the refusals
of every provider the conversation's root is configured for, and the documented
normalizations (:mod:`prefixlock.runtime.admission`): nothing is stored that a
configured provider would refuse. Two processes racing on one
conversation cannot both append; the loser catches up from the store and retries, so a
retried event stays idempotent even across processes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from ..cache.policy import DEFAULT_RETURN_MODEL, ReturnModel, plan_for
from ..core import canonical
from ..core.errors import (
    CheckpointError,
    CheckpointRaceError,
    ConflictError,
    HistoryError,
    LimitError,
    SerializationError,
    UnknownCallError,
    UnknownNameError,
    UsageError,
    require_type,
)
from ..core.limits import MAX_INSTRUCTIONS_BYTES, keepalive_output_limit
from ..core.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    part_to_json,
)
from ..core.model import ModelRequest
from ..core.names import hint
from ..core.output import ModelOutput, Usage
from ..core.timestamps import seconds as _seconds
from ..core.timestamps import stamp_problem
from ..core.wire import assemble, derive, quoted_runs
from ..providers import NAMES as PROVIDER_NAMES
from ..providers import Provider
from ..providers import get as get_provider
from ..providers.readers.base import Listener
from ..providers.transport import HttpRequest
from ..spec.bundle import Bundle
from ..store.contract import Head, Store, check_head
from ..store.records import ContextSection, Record, RecordType, Root, read_chain
from .admission import Admission, drop_blank_texts, require_str, require_text, tool_output
from .calling import AsyncModelClient, ModelClient
from .context import (
    digests_of,
    full_update,
    render_request_context,
    render_runtime,
    render_sections,
    request_sections,
)
from .failover import opaque_providers, retarget
from .history import EventInfo, History
from .limits import Limits, utf8_size
from .redact import redact_text, redact_user_content
from .request import AgentRunRequest, RequestKind
from .tools import ToolCall, ToolResult
from .turn import Turn

T = TypeVar("T")

#: A keep-alive schedule whose entries expired (more slots than any plan has).
_EXPIRED = 1 << 30

#: Event ids prefixlock gives its own records; a client's event id may not start so.
RESERVED_EVENT_PREFIXES = ("assistant:", "tool-results:", "compact:")


class Conversation:
    """An open conversation: its history, bound to a store and a bundle."""

    def __init__(
        self, store: Store, bundle: Bundle, history: History, limits: Limits | None = None
    ) -> None:
        self.store = store
        self.bundle = bundle
        self.history = history
        self.limits = limits if limits is not None else Limits()
        self._admission: Admission | None = None
        #: one provider instance per name, so its encoding cache lasts the conversation
        self._wires: dict[str, Provider] = {}
        #: (epoch list, messages read, providers of their opaque parts): :meth:`_opaque`
        self._opaque_scan: tuple[list[CanonicalMessage] | None, int, set[str]] = (None, 0, set())
        #: the event id of the last record this instance appended (:meth:`deliver`)
        self._last_appended: str | None = None
        #: When the user comes back after a call (:meth:`next_keepalive_at`); a server
        #: sets its own (:class:`~prefixlock.cache.policy.ReturnModel`).
        self.return_model: ReturnModel = DEFAULT_RETURN_MODEL
        #: (provider, history seq) -> keep-alives handed out after that call (in memory).
        self._keepalives_sent: dict[tuple[str, int], int] = {}
        #: Which of the root's providers each record stores its messages' wire templates
        #: for (:mod:`prefixlock.core.wire`): a worker that opens this conversation cold
        #: then serializes it for them from stored bytes. True: every one; False: none
        #: (the records of format 4 and before); a set of names: those. Each costs the
        #: writer one mapping and encoding of every new message, and the record the
        #: provider's structure bytes of it.
        self.store_wire: bool | frozenset[str] = True

    # -- opening -------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: Store,
        bundle: Bundle,
        conversation_id: str,
        *,
        limits: Limits | None = None,
        expect_head: Head | str | None = None,
    ) -> Conversation:
        """Open (or start) a conversation; hydrates everything from the store alone.

        A new conversation's root takes the bundle's instructions, tools and settings;
        an existing conversation keeps the root it started with. ``limits`` bounds what
        each later event may add (:class:`~prefixlock.runtime.limits.Limits`).

        ``expect_head`` is the :attr:`head` (or its ``SEQ:DIGEST`` text) this caller was
        last given: a store that is behind it -- that lost acknowledged records, as an
        SQLite store does silently when its ``-wal`` file is lost or damaged -- is refused
        with :class:`CheckpointError`, and a missing conversation is not started afresh.
        """
        bundle_hint = " (build_bundle(...) or Bundle.load(...))"
        require_type(bundle, Bundle, "Conversation.open bundle", bundle_hint)
        require_type(conversation_id, str, "Conversation.open conversation_id")
        if limits is not None:
            require_type(limits, Limits, "Conversation.open limits")
        size = utf8_size(bundle.instructions)
        if size > MAX_INSTRUCTIONS_BYTES:  # a bundle built elsewhere: the build refuses it
            raise LimitError(
                f"bundle {bundle.digest}: the instructions are {size} bytes, over the limit "
                f"of {MAX_INSTRUCTIONS_BYTES} bytes"
            )
        root = Root(
            conversation_id=conversation_id,
            bundle_digest=bundle.digest,
            instructions=bundle.instructions,
            tools=bundle.tools,
            settings=bundle.settings,
        )
        encoded = root.encode()
        stored = None
        if expect_head is not None:
            expected = Head.parse(expect_head) if isinstance(expect_head, str) else expect_head
            # One load: the conversation the check passed is the one hydrated (it exists,
            # so there is no root to create).
            stored = store.load(conversation_id)
            check_head(stored, conversation_id, expected)
        if stored is None:
            store.create_root(conversation_id, encoded)
            stored = store.load(conversation_id)
        if stored is None:
            raise CheckpointError(f"conversation {conversation_id!r}: root was not stored")
        history = History.hydrate(stored, known_root=(encoded, root))
        return cls(store, bundle, history, limits)

    @property
    def id(self) -> str:
        return self.history.root.conversation_id

    @property
    def head(self) -> Head:
        """The head after the last append (seq 0: the root): keep it, and pass it as
        ``expect_head`` when reopening, to detect a store that lost records."""
        return Head(self.history.seq, self.history.head)

    # -- operations ----------------------------------------------------------------

    def request(self, *, provider: str | None = None, model: str | None = None) -> ModelRequest:
        """The current projected request (no model call is recorded).

        ``provider`` / ``model``: the request for one call on that (configured) provider
        and model instead, e.g. a failover from Anthropic to Claude on Bedrock; parts the
        target did not produce follow the rules of :mod:`prefixlock.runtime.failover`
        (Claude thinking signatures stay between Claude platforms; other opaque parts are
        left out of that call's body, never out of the history)."""
        request = self.history.project()
        if provider is None and model is None:
            return request
        if provider is None:
            names = [s.provider for s in request.settings]
            if len(names) != 1:
                raise UsageError(
                    f"request(model={model!r}): name the provider too, this conversation "
                    f"is configured for {', '.join(names)}"
                )
            provider = names[0]
        require_type(provider, str, "request provider")
        if model is not None:
            require_type(model, str, "request model")
        return retarget(request, provider, model)

    def handle(self, request: AgentRunRequest) -> ModelRequest:
        """A user turn, background completion or injected event -> the model call.

        The request's ``conversation_id`` may be left out (the conversation knows it);
        given, it must be this conversation's. A re-delivered event appends nothing and
        returns the request it got the first time (:meth:`deliver` says, besides, whether
        the model already answered it)."""
        require_type(request, AgentRunRequest, "handle(request)", _REQUEST_HINT)
        return self._with_race_retry(lambda: self._handle(request))

    def deliver(self, request: AgentRunRequest) -> Turn:
        """:meth:`handle`, returning where the event's turn stands (:class:`Turn`).

        A first delivery appends the event; ``turn.request`` is the model call. A
        re-delivery (after a crash, a queue's redelivery) appends nothing and says what
        the store already holds: while the model has not answered, ``turn.request`` is
        the same request, byte for byte; once it has, ``turn.outputs`` are its recorded
        answers and ``turn.pending_calls`` the tool calls still without results, and
        ``turn.request`` is the continuation only if one is due (results were stored).
        A re-delivery with different content is a :class:`ConflictError`.
        """
        require_type(request, AgentRunRequest, "deliver(request)", _REQUEST_HINT)
        self._last_appended = None
        model_request = self.handle(request)
        if self._last_appended == request.event_id:
            return Turn(request.event_id, False, model_request)
        return self._turn(request.event_id)

    def _turn(self, event_id: str) -> Turn:
        """The :class:`Turn` of an event already in the history."""
        h = self.history
        info = h.events[event_id]
        outputs: list[CanonicalMessage] = []
        superseded = info.epoch != h.epoch
        for message in h.epochs[info.epoch][info.length :]:
            if message.kind in _TURN_STARTS:
                superseded = True  # the next event's messages: this turn is over
                break
            if message.kind is MessageKind.ASSISTANT:
                outputs.append(message)
        if superseded:
            return Turn(event_id, True, None, tuple(outputs), superseded=True)
        request = None
        if h.awaiting_output:
            request = h.project() if outputs else h.project(info)
        return Turn(event_id, True, request, tuple(outputs), self.pending_calls)

    def user_turn(
        self,
        event_id: str,
        query: str,
        *,
        mode: str | None = None,
        timestamp: str | None = None,
        context: Mapping[str, Any] | None = None,
        selected_context: Sequence[Mapping[str, Any]] = (),
        open_files: Sequence[Mapping[str, Any]] = (),
        action_context: Mapping[str, Any] | None = None,
    ) -> ModelRequest:
        """A user turn without building its :class:`AgentRunRequest`: the same as
        ``handle(AgentRunRequest.from_value({...}))`` with ``kind: user`` and this
        conversation's id; the values are validated by the same JSON Schema (a problem is
        a :class:`SpecErrors` naming its JSON path)."""
        return self.handle(
            user_request(
                self.id,
                event_id,
                query,
                mode=mode,
                timestamp=timestamp,
                context=context,
                selected_context=selected_context,
                open_files=open_files,
                action_context=action_context,
                context_fields=self.bundle.context_schemas(),
            )
        )

    def assistant(
        self,
        text: str | None = None,
        tool_calls: Sequence[ToolCall] = (),
        *,
        parts: Sequence[Part] = (),
    ) -> CanonicalMessage:
        """Record model output: ``parts`` (e.g. opaque reasoning) then text, then calls."""
        require_type(tool_calls, (list, tuple), "assistant tool_calls")
        require_type(parts, (list, tuple), "assistant parts")
        return self._with_race_retry(lambda: self._assistant(text, tool_calls, parts))

    def record(self, output: ModelOutput) -> CanonicalMessage:
        """Record a provider's :class:`ModelOutput` as the assistant message, parts in
        model order, and store its usage beside the record.

        Idempotent by the provider's response id (:attr:`ModelOutput.response_id`, kept
        with the record): the same response recorded again (a server that crashed before
        it knew the record was stored) is a no-op returning the message recorded the
        first time, its usage kept; the same id with other content, or another response
        for a call already answered, is a :class:`ConflictError` naming both ids. A
        response without an id (Bedrock Converse gives none) is known by its content
        instead: the same parts again are the same answer."""
        require_type(output, ModelOutput, "record(output)")
        if output.response_id is not None:
            require_type(output.response_id, str, "record(output) response_id")
        return self._with_race_retry(lambda: self._record(output))

    def tool_results(
        self, results: Sequence[ToolResult], *, timestamp: str | None = None
    ) -> ModelRequest:
        """Results for every pending tool call, in one batch -> the next model call.

        ``timestamp``: when that call is sent (RFC 3339, as a request's), kept with the
        record for ``prefixlock inspect --cache``: a tool that ran longer than the cache's
        lifetime lets its entries expire. Without it, the call counts as sent right after
        the one before. It is not part of the batch's identity: a retry of the same
        results with another timestamp is the same delivery, and keeps the first one."""
        require_type(results, (list, tuple), "tool_results(results)")
        problem = None if timestamp is None else stamp_problem(timestamp)
        if problem is not None:
            raise UsageError(f"tool results timestamp: {problem}")
        return self._with_race_retry(lambda: self._tool_results(results, timestamp))

    @property
    def awaiting_output(self) -> bool:
        """Whether a model call is due: the last record asks for the model's answer."""
        return self.history.awaiting_output

    @property
    def pending_calls(self) -> tuple[ToolCallPart, ...]:
        """The recorded tool calls that have no results yet, in model order (each with
        its ``call_id``, ``name`` and raw ``arguments``): after a restart, the calls to
        run before :meth:`tool_results`. Empty when none is waiting."""
        pending = self.history.pending_calls
        if not pending:
            return ()
        for message in reversed(self.history.messages):
            if message.kind is MessageKind.ASSISTANT:
                return tuple(
                    p for p in message.parts if isinstance(p, ToolCallPart) and p.call_id in pending
                )
        return ()

    def call(
        self,
        client: ModelClient,
        *,
        stream: bool = False,
        on_event: Listener | None = None,
        model: str | None = None,
    ) -> ModelOutput:
        """One model call: build the current request for ``client.provider`` (and
        ``model``, for this call only: see :meth:`request`), send it
        (``prefixlock.http.Client`` retries what is safe to retry, with the same bytes),
        record the output and return it. ``stream=True`` reads a stream, ``on_event``
        sees its events as they arrive. Nothing is recorded when the call fails."""
        call = self._http_call(client.provider, stream, model)
        output = client.stream(call, on_event) if stream else client.send(call)
        self.record(output)
        return output

    async def acall(
        self,
        client: AsyncModelClient,
        *,
        stream: bool = False,
        on_event: Listener | None = None,
        model: str | None = None,
    ) -> ModelOutput:
        """:meth:`call` on an asynchronous client (``prefixlock.http.AsyncClient``).

        Recording writes to the store synchronously, as every other operation does."""
        call = self._http_call(client.provider, stream, model)
        output = await (client.stream(call, on_event) if stream else client.send(call))
        self.record(output)
        return output

    def _http_call(self, provider: str, stream: bool, model: str | None = None) -> HttpRequest:
        if not self.history.awaiting_output:
            pending = ", ".join(self.history.pending_calls)
            raise HistoryError(
                f"conversation {self.id!r}: no model call is due "
                + (
                    f"(tool calls {pending} have no results yet)"
                    if pending
                    else "(the last model output is recorded; handle the next event first)"
                )
            )
        wire = self._wires.get(provider)
        if wire is None:
            wire = self._wires[provider] = get_provider(provider)
        # Another provider's answers, or another model: this call's own request (failover).
        request = retarget(self.history.project(), provider, model, opaque=self._opaque())
        return wire.http_request(request, stream=stream)

    def _opaque(self) -> set[str]:
        """The providers of the opaque parts in the current epoch, read incrementally
        (each message once), so a call's failover check does not grow with history."""
        messages = self.history.messages
        if self._opaque_scan[0] is not messages:
            self._opaque_scan = (messages, 0, set())
        _, count, seen = self._opaque_scan
        seen.update(opaque_providers(messages[count:]))
        self._opaque_scan = (messages, len(messages), seen)
        return seen

    # -- keep-alive (issue 45) ------------------------------------------------------

    def keepalive_request(self) -> ModelRequest | None:
        """The last model call's request with every provider's output limit set to the
        smallest its service accepts (:func:`~prefixlock.core.limits.keepalive_output_limit`):
        serialized, the previous body's bytes with only that number changed, so the call
        re-reads the whole cached prefix. None before the first call (or after a manual
        compaction). Nothing is recorded: the history does not change."""
        last = self.history.last_call
        if last is None:
            return None
        request = self.history.project(last)
        settings = tuple(
            attrs.evolve(s, max_tokens=keepalive_output_limit(s.provider, s.options_value))
            for s in request.settings
        )
        return attrs.evolve(request, settings=settings)

    def next_keepalive_at(
        self, provider: str | None = None, *, model: ReturnModel | None = None
    ) -> float | None:
        """When (seconds since the epoch) the next keep-alive to ``provider`` would pay, or
        None: no call with a timestamp yet, or no (further) keep-alive pays. From the last
        call's cached prefix (its size, what an expiry would lose), the provider's read
        and write prices and TTL, and the return-time ``model`` (default
        :attr:`return_model`): :func:`~prefixlock.cache.policy.keepalive_plan`."""
        slot = self._keepalive_slot(provider, model)
        return None if slot is None else slot[0]

    def keepalive(
        self, now: float | str, provider: str | None = None, *, model: ReturnModel | None = None
    ) -> ModelRequest | None:
        """The keep-alive request to send to ``provider`` at ``now`` (seconds since the
        epoch, or an RFC 3339 timestamp), or None when none is due: before
        :meth:`next_keepalive_at`, or once the entries it would refresh have expired (a
        late keep-alive would write, not read). A request handed out counts as sent (in
        memory only: nothing is recorded, and the history does not change)."""
        at = now if isinstance(now, float | int) else _seconds(now)
        slot = self._keepalive_slot(provider, model)
        if slot is None or at < slot[0]:
            return None
        _, alive_until, key, number = slot
        if at >= alive_until:  # the entries are gone: no keep-alive pays after this call
            self._keepalives_sent[key] = _EXPIRED
            return None
        self._keepalives_sent[key] = number
        return self.keepalive_request()

    def _keepalive_slot(
        self, provider: str | None, model: ReturnModel | None
    ) -> tuple[float, float, tuple[str, int], int] | None:
        """(when, entries alive until, key, slot number) of the next planned keep-alive."""
        h = self.history
        request = self.keepalive_request()
        if request is None or h.last_call_at is None:
            return None
        name = self._keepalive_provider(request, provider)
        settings = request.settings_for(name)
        body = get_provider(name).serialize(request)
        plan, ttl = plan_for(name, settings.model, body, model or self.return_model)
        key = (name, h.seq)
        number = self._keepalives_sent.get(key, 0)
        if number >= len(plan):
            return None
        start = _seconds(h.last_call_at)
        previous = plan[number - 1] if number else 0.0
        return start + plan[number], start + previous + ttl, key, number + 1

    def _keepalive_provider(self, request: ModelRequest, provider: str | None) -> str:
        names = [s.provider for s in request.settings]
        if provider is None:
            if len(names) == 1:
                return names[0]
            raise UsageError(
                f"keep-alive: name the provider, one of {names} (the conversation's root is "
                "configured for more than one)"
            )
        if provider not in names:
            raise UnknownNameError(
                f"keep-alive: provider {provider!r} is not configured for this conversation "
                f"(configured: {', '.join(names)})"
            )
        return provider

    def compact(self, summary: str) -> None:
        """Manual compaction: the history becomes the summary alone (non-blank text).

        The next user turn reprojects the current request context.
        """
        self._with_race_retry(lambda: self._compact(summary))

    # -- implementation ------------------------------------------------------------

    def _handle(self, request: AgentRunRequest) -> ModelRequest:
        h = self.history
        if request.conversation_id is None:  # the conversation knows its id
            request = attrs.evolve(request, conversation_id=self.id)
        if request.conversation_id != self.id:
            raise HistoryError(
                f"event {request.event_id!r} is for conversation "
                f"{request.conversation_id!r}, not {self.id!r}"
            )
        if request.event_id.startswith(RESERVED_EVENT_PREFIXES):
            raise HistoryError(
                f"event id {request.event_id!r} is reserved: ids starting with "
                f"{', '.join(RESERVED_EVENT_PREFIXES)} name prefixlock's own records"
            )
        self.limits.check_turn(request.event_id, request.turn_bytes)
        if self.bundle.redact_user_content:  # the spec's opt-in: before anything is saved
            request = redact_user_content(request)
        retried = self._retried(request.event_id, request.digest)
        if retried is not None:
            return retried
        if h.pending_calls:
            raise HistoryError(
                f"event {request.event_id!r}: tool calls {', '.join(sorted(h.pending_calls))} "
                "have no results yet; deliver their results first (is_error for cancelled)"
            )
        eid = request.event_id
        if request.kind is RequestKind.USER:
            record = self._user_record(request)
        else:
            if h.user_turns == 0:
                raise HistoryError(
                    f"{request.kind} event {eid!r} arrived before the first user turn"
                )
            text = require_text(request.text, f"{request.kind} event {eid!r}: text")
            message = CanonicalMessage.create(
                f"event:{eid}", MessageKind.EVENT, Role.USER, (TextPart(text),)
            )
            admitted = self._admit((message,), f"{request.kind} event {eid!r}")
            record = Record(
                h.seq + 1,
                RecordType.EVENT,
                eid,
                admitted,
                request.digest,
                timestamp=request.timestamp,
            )
        self._append(record)
        return h.project()

    def _sectioned_context(
        self, request: AgentRunRequest
    ) -> tuple[CanonicalMessage | None, tuple[ContextSection, ...] | None]:
        """``context_updates: sections``: this turn's request-context message, if any, and
        the sections it carries.

        The full context (every non-empty section) when the epoch has none in force per
        section yet, or when this turn compacts automatically (the one context message
        the new epoch keeps: the latest one if it is the same, identity and all); else
        only the sections whose text differs from the version in force, one message, a
        section now empty stated as cleared; none if nothing differs (DESIGN.md
        invariants 4 and 7, per section).
        """
        h, bundle, eid = self.history, self.bundle, request.event_id
        texts = request_sections(bundle, request)
        digests = digests_of(texts)
        compacting = request.compact_summary is not None
        if h.sections is None or compacting:
            names = list(texts)
            update = full_update({name: texts[name] for name in names if texts[name]})
        else:
            in_force = h.sections
            names = [name for name in texts if digests[name] != in_force.get(name)]
            if not names:
                return None, None
            cleared = [name for name in names if not texts[name]]
            update = {"full": False, "sections": names, "cleared": cleared}
        carried = {name: texts[name] for name in names if texts[name]}
        message = CanonicalMessage.create(
            f"request-context:{eid}",
            MessageKind.REQUEST_CONTEXT,
            Role.USER,
            (TextPart(render_sections(bundle, carried, update)),),
        )
        latest = h.latest_context
        if compacting and latest is not None and latest.digest == message.digest:
            message = latest  # the full context already in force: same identity
        return message, tuple(ContextSection(name, digests[name]) for name in names)

    def _user_record(self, request: AgentRunRequest) -> Record:
        h = self.history
        eid = request.event_id
        # Compile both texts before anything changes: a template error changes nothing.
        sections: tuple[ContextSection, ...] | None = None
        if self.bundle.sections:
            context, sections = self._sectioned_context(request)
        else:
            context = CanonicalMessage.create(
                f"request-context:{eid}",
                MessageKind.REQUEST_CONTEXT,
                Role.USER,
                (TextPart(render_request_context(self.bundle, request)),),
            )
        runtime = CanonicalMessage.create(
            f"runtime:{eid}",
            MessageKind.RUNTIME,
            Role.USER,
            (TextPart(render_runtime(self.bundle, request)), *request.image_parts),
        )
        latest = h.latest_context
        if context is None:  # sections: nothing changed
            changed = False
        elif sections is not None:
            changed = True
        elif latest is not None and latest.digest == context.digest:
            context = latest  # same content: dedupe (same identity when kept)
            changed = False
        else:
            changed = True
        if request.compact_summary is not None:
            self.limits.check_summary(
                f"event {eid!r}: compact.summary", utf8_size(request.compact_summary)
            )
            assert context is not None  # sections: a compacting turn has the full context
            # Automatic compaction: latest context (same identity and content), then the
            # summary, then this turn's initial messages -- in that fixed order.
            summary = CanonicalMessage.create(
                f"summary:{h.epoch + 1}",
                MessageKind.SUMMARY,
                Role.USER,
                (
                    TextPart(
                        require_text(request.compact_summary, f"event {eid!r}: compact.summary")
                    ),
                ),
            )
            admitted = self._admit((context, summary, runtime), f"user event {eid!r}", reset=True)
            return Record(
                h.seq + 1,
                RecordType.USER,
                eid,
                admitted,
                request.digest,
                True,
                timestamp=request.timestamp,
                sections=sections,
            )
        messages = (context, runtime) if changed and context is not None else (runtime,)
        admitted = self._admit(messages, f"user event {eid!r}")
        return Record(
            h.seq + 1,
            RecordType.USER,
            eid,
            admitted,
            request.digest,
            timestamp=request.timestamp,
            sections=sections,
        )

    def _assistant(
        self, text: str | None, tool_calls: Sequence[ToolCall], parts: Sequence[Part]
    ) -> CanonicalMessage:
        all_parts: list[Part] = []
        for i, part in enumerate(parts):
            if not isinstance(part, PART_TYPES):
                raise HistoryError(
                    f"assistant parts[{i}]: expected a message part, got {type(part).__name__}"
                )
            all_parts.append(part)
        if text is not None:
            all_parts.append(TextPart(require_str(text, "assistant text")))
        for i, call in enumerate(tool_calls):
            if not isinstance(call, ToolCall):
                raise HistoryError(
                    f"assistant tool_calls[{i}]: expected a ToolCall, got {type(call).__name__}"
                )
            all_parts.append(call.to_part())
        return self._append_output(all_parts, None)

    def _record(self, output: ModelOutput) -> CanonicalMessage:
        # The usage is priced by simulating the provider that answered (inspect --cache)
        # and an opaque part goes back to it only: both need a provider prefixlock knows.
        for field, name in (
            ("assistant output", output.provider),
            ("assistant output usage", None if output.usage is None else output.usage.provider),
        ):
            if name is not None and name not in PROVIDER_NAMES:
                raise UnknownNameError(
                    f"{field}: unknown provider {name!r} "
                    f"({hint(name, PROVIDER_NAMES, 'providers')})"
                )
        parts = [
            ToolCall(p.call_id, p.name, p.arguments, p.thought_signature).to_part()
            if isinstance(p, ToolCallPart)
            else p
            for p in output.parts
        ]
        used = output.usage
        if used is not None and used.provider is None:
            used = attrs.evolve(used, provider=output.provider)
        return self._append_output(parts, used, output.response_id or None)

    def _append_output(
        self, parts: Sequence[Part], usage: Usage | None, response_id: str | None = None
    ) -> CanonicalMessage:
        h = self.history
        if response_id is not None and response_id in h.responses:
            return self._same_response(response_id, parts)
        if not h.awaiting_output:
            repeated = self._repeated_output(parts, response_id)
            if repeated is not None:
                return repeated
            raise HistoryError("assistant output without a pending model call")
        parts = drop_blank_texts(parts, "assistant output")
        self.limits.check_assistant_text(
            sum(utf8_size(p.text) for p in parts if isinstance(p, TextPart))
        )
        seen: set[str] = set()
        for part in parts:
            if isinstance(part, ToolCallPart):
                self.limits.check_tool_arguments(part.call_id, utf8_size(part.arguments))
                if part.call_id in h.call_ids or part.call_id in seen:
                    raise HistoryError(f"tool call id {part.call_id!r} was already used")
                seen.add(part.call_id)
        n = h.assistant_count + 1
        message = CanonicalMessage.create(
            f"assistant:{n}", MessageKind.ASSISTANT, Role.ASSISTANT, tuple(parts)
        )
        self._admit((message,), f"assistant output {message.id!r}")
        record = Record(
            h.seq + 1,
            RecordType.ASSISTANT,
            f"assistant:{n}",
            (message,),
            usage=usage,
            response_id=response_id,
        )
        self._append(record)
        return message

    @staticmethod
    def _digest_as(message: CanonicalMessage, parts: Sequence[Part]) -> str:
        """The digest ``parts`` would have as ``message`` (blank texts dropped as when
        recorded): equal to ``message.digest`` exactly when they are its content."""
        try:
            kept = drop_blank_texts(parts, "assistant output")
        except HistoryError:
            kept = tuple(parts)
        return CanonicalMessage.create(message.id, message.kind, message.role, kept).digest

    def _same_response(self, response_id: str, parts: Sequence[Part]) -> CanonicalMessage:
        """The message recorded from response ``response_id``, which is being recorded
        again: a no-op if ``parts`` are its content, else a :class:`ConflictError`."""
        known = self.history.responses[response_id]
        digest = self._digest_as(known, parts)
        if digest == known.digest:
            return known
        raise ConflictError(
            f"model response {response_id!r} was already recorded as {known.id!r} with "
            f"different content ({known.digest} != {digest}); a response is recorded once, "
            "as it came"
        )

    def _repeated_output(
        self, parts: Sequence[Part], response_id: str | None = None
    ) -> CanonicalMessage | None:
        """The answer already recorded for the last model call, when ``parts`` are that
        answer again (a server that recorded it, crashed before it knew, and records it
        once more): the same message, nothing appended, the first usage kept. Another
        answer for the same call is a :class:`ConflictError`: a call has one answer.

        An answer is known by the provider's response id where both it and the recorded
        one have an id (:meth:`_append_output` has handled the same id): another id is
        another response, a :class:`ConflictError` naming both. Otherwise it is known by
        its content (the message digest over its parts, tool call ids and opaque
        signatures included): two reads of one response (a stream, the whole body) give
        the same parts but may differ in usage."""
        messages = self.history.messages
        if not messages or messages[-1].kind is not MessageKind.ASSISTANT:
            return None
        latest = messages[-1]
        recorded = self.history.last_response_id
        if response_id is not None and recorded is not None:
            raise ConflictError(
                f"model response {response_id!r} answers a call already answered by response "
                f"{recorded!r} (recorded as {latest.id!r}); a model call has one answer: "
                "deliver the event again to see the recorded one"
            )
        digest = self._digest_as(latest, parts)
        if digest == latest.digest:
            return latest
        raise ConflictError(
            f"model output for the call answered by {latest.id!r} was already recorded with "
            f"different content ({latest.digest} != {digest}); a model call has one "
            "answer: deliver the event again to see the recorded one"
        )

    def _tool_results(self, results: Sequence[ToolResult], timestamp: str | None) -> ModelRequest:
        h = self.history
        if not results:
            raise HistoryError("an empty batch of tool results")
        parts = tuple(_result_part(r, i) for i, r in enumerate(results))
        for part in parts:  # types checked and blanks normalized: now their content
            ToolResult(part.call_id, part.output, part.is_error, part.images).check()
            self.limits.check_tool_output(part.call_id, utf8_size(part.output))
        if self.bundle.redact_user_content:  # the spec's opt-in: before anything is saved
            parts = tuple(attrs.evolve(p, output=redact_text(p.output)) for p in parts)
        eid = f"tool-results:{parts[0].call_id}"
        message = CanonicalMessage.create(eid, MessageKind.TOOL_RESULT, Role.TOOL, parts)
        digest = results_digest(message)
        retried = self._retried(eid, digest)
        if retried is not None:
            return retried
        ids = [p.call_id for p in parts]
        for call_id in ids:
            if call_id not in h.pending_calls:
                if call_id in h.call_ids:
                    raise HistoryError(f"tool call {call_id!r} already has a result")
                pending = ", ".join(sorted(h.pending_calls)) or "none"
                raise UnknownCallError(
                    f"tool result for unknown call id {call_id!r} (pending calls: {pending})"
                )
        if len(set(ids)) != len(ids):
            raise HistoryError(f"tool results repeat a call id: {', '.join(ids)}")
        missing = sorted(set(h.pending_calls) - set(ids))
        if missing:
            raise HistoryError(
                f"tool results must answer every pending call; missing: {', '.join(missing)}"
            )
        admitted = self._admit((message,), f"tool results {eid!r}")
        self._append(
            Record(h.seq + 1, RecordType.TOOL_RESULTS, eid, admitted, digest, timestamp=timestamp)
        )
        return h.project()

    def _compact(self, summary: str) -> None:
        h = self.history
        if h.pending_calls:
            raise HistoryError(
                "cannot compact while tool calls "
                f"{', '.join(sorted(h.pending_calls))} have no results"
            )
        text = require_text(summary, "compact summary")
        self.limits.check_summary("compact summary", utf8_size(text))
        epoch = h.epoch + 1
        message = CanonicalMessage.create(
            f"summary:{epoch}", MessageKind.SUMMARY, Role.USER, (TextPart(text),)
        )
        admitted = self._admit((message,), f"compaction {message.id!r}", reset=True)
        self._append(
            Record(h.seq + 1, RecordType.COMPACT, f"compact:{epoch}", admitted, reset=True)
        )

    def _admit(
        self, messages: Sequence[CanonicalMessage], field: str, *, reset: bool = False
    ) -> tuple[CanonicalMessage, ...]:
        """The messages to store: the user-content funnel applied (:meth:`_user_content`),
        then refused (before any record is written) if a provider of the root's settings
        would refuse them appended to the current epoch (or, with ``reset``, starting a
        new one). Every record's messages come from here, so no appending operation can
        skip redaction or admission."""
        admitted = tuple(self._user_content(m) for m in messages)
        if self._admission is None:
            root = self.history.root
            self._admission = Admission(
                [s.provider for s in root.settings],
                tools=bool(root.tools),
                models=[s.model for s in root.settings],
            )
        earlier = () if reset else self.history.messages
        self._admission.check(admitted, earlier, field)
        return admitted

    def _user_content(self, message: CanonicalMessage) -> CanonicalMessage:
        """The one funnel of ``secrets: {user_content: redact}`` for stored messages:
        under the policy, every text of a message whose content is the caller's own
        (:data:`USER_CONTENT_KINDS`: events, compaction summaries, tool results) is
        redacted, whichever operation made it. (A request's fields are redacted as the
        request arrives, :func:`redact_user_content`, since the runtime message is
        rendered from them and a retry is matched by their digest; redaction is
        idempotent, so a text redacted there passes here unchanged.)"""
        if not self.bundle.redact_user_content or message.kind not in USER_CONTENT_KINDS:
            return message
        parts = tuple(_redacted_part(p) for p in message.parts)
        if parts == message.parts:
            return message
        return CanonicalMessage.create(message.id, message.kind, message.role, parts)

    def _retried(self, event_id: str, digest: str) -> ModelRequest | None:
        """The original request of an already delivered event, or None if it is new."""
        info: EventInfo | None = self.history.events.get(event_id)
        if info is None:
            return None
        if info.request_digest != digest:
            raise ConflictError(
                f"event {event_id!r} was already delivered with different content "
                f"({info.request_digest} != {digest}); a retry must resend the same request"
            )
        return self.history.project(info)

    def _append(self, record: Record) -> None:
        if self.store_wire:  # True or a non-empty set of names
            record = self._with_wire(record)
        data = record.encode(self.id, self.history.head)
        head = self.store.append(self.id, record.seq, record.event_id, data)
        self.history.apply(record, head.digest)
        self._last_appended = record.event_id

    def _with_wire(self, record: Record) -> Record:
        """``record`` with its messages' wire templates for every provider of the root
        (:mod:`prefixlock.core.wire`): each message's fragment as a later request of
        this history holds it, cut into the runs its parts bytes already hold and the
        rest. A provider that cannot express the history (another provider's opaque
        parts) stores none; so does a template that would not give the fragment back."""
        if not record.messages:
            return record
        request, first = self.history.project_with(record)
        parts = [message.canonical_parts() for message in record.messages]
        runs = [quoted_runs(p) for p in parts]  # one scan per message for every provider
        stored: dict[str, list[Any]] = {}
        wanted = self.store_wire
        for settings in self.history.root.settings:
            name = settings.provider
            if not isinstance(wanted, bool) and name not in wanted:
                continue
            provider = self._wires.get(name)
            if provider is None:
                provider = self._wires[name] = get_provider(name)
            try:
                basis, made = provider.settled_fragments(request, first)
            except SerializationError:
                continue
            entry: list[Any] = [basis]
            for index, (role, fragment) in enumerate(made):
                data = parts[index]
                template = derive(role, fragment, data, runs[index])
                if assemble(template, data, 0, len(data)) != fragment:
                    template = [role, fragment.decode("utf-8")]
                entry.append(template)
            stored[name] = entry
        return attrs.evolve(record, wire=stored) if stored else record

    def catch_up(self) -> int:
        """Apply the records other writers appended since our head; returns how many.

        Reads only the head and the records after ours (:meth:`Store.load_after`: one
        round trip on PostgreSQL, never the root), so it costs the same at any history
        length. A worker of a fleet that keeps conversations open calls it before
        handling an event that another worker may have preceded; the operations call it
        themselves after losing a race. A store whose head is behind ours, or that holds
        another history, is refused with :class:`CheckpointError`.
        """
        h = self.history
        caught = self.store.load_after(self.id, h.seq)
        if caught is None:
            raise CheckpointError(f"conversation {self.id!r} disappeared from the store")
        if not caught.records:
            if caught.head.digest != h.head:
                raise CheckpointError(
                    f"conversation {self.id!r}: record {h.seq} has digest "
                    f"{caught.head.digest} in the store, but {h.head} here: the store holds "
                    "another history"
                )
            return 0
        chain = read_chain(
            caught.records,
            self.id,
            h.head,
            first=h.seq + 1,
            digests=caught.digests,
            head=caught.head.digest,
        )
        for record, digest in chain:
            h.apply(record, digest)
        return len(caught.records)

    def _with_race_retry(self, operation: Callable[[], T]) -> T:
        """Run ``operation``; after each lost race catch up and run it again.

        Every lost race means another writer appended, so catching up always makes
        progress and the loop ends when this writer wins or finds its event already
        stored (a retry). A race with nothing new to catch up is no race but a store
        that disagrees with itself; that error is raised.
        """
        while True:
            try:
                return operation()
            except CheckpointRaceError:
                if self.catch_up() == 0:
                    raise


_REQUEST_HINT = (
    " (build it with AgentRunRequest.from_value({...}), or call conv.user_turn(...) "
    "for a user turn)"
)


def user_request(
    conversation_id: str,
    event_id: str,
    query: str,
    *,
    mode: str | None = None,
    timestamp: str | None = None,
    context: Mapping[str, Any] | None = None,
    selected_context: Sequence[Mapping[str, Any]] = (),
    open_files: Sequence[Mapping[str, Any]] = (),
    action_context: Mapping[str, Any] | None = None,
    context_fields: Mapping[str, Any] | None = None,
) -> AgentRunRequest:
    """The :class:`AgentRunRequest` of a user turn, from keyword values (absent ones left
    out, so the request's digest is that of the same event written as JSON)."""
    require_type(event_id, str, "user_turn event_id")
    require_type(query, str, "user_turn query")
    for field, given in (("context", context), ("action_context", action_context)):
        if given is not None:
            require_type(given, Mapping, f"user_turn {field}")
    for field, items in (("selected_context", selected_context), ("open_files", open_files)):
        require_type(items, (list, tuple), f"user_turn {field}")
    value: dict[str, Any] = {
        "conversation_id": conversation_id,
        "event_id": event_id,
        "kind": "user",
        "query": query,
    }
    optional: dict[str, Any] = {
        "mode": mode,
        "timestamp": timestamp,
        "context": None if context is None else dict(context),
        "selected_context": list(selected_context) or None,
        "open_files": list(open_files) or None,
        "action_context": None if action_context is None else dict(action_context),
    }
    value.update({k: v for k, v in optional.items() if v is not None})
    return AgentRunRequest.from_value(
        value, file=f"user_turn {event_id!r}", context_fields=context_fields
    )


#: Message kinds that begin a new event's messages in an epoch (the end of a turn).
_TURN_STARTS = frozenset(
    {MessageKind.REQUEST_CONTEXT, MessageKind.RUNTIME, MessageKind.EVENT, MessageKind.SUMMARY}
)

#: Message kinds whose texts are the caller's own content (redacted under
#: ``secrets: {user_content: redact}``, :meth:`Conversation._user_content`).
USER_CONTENT_KINDS = frozenset({MessageKind.EVENT, MessageKind.SUMMARY, MessageKind.TOOL_RESULT})


def _redacted_part(part: Part) -> Part:
    if isinstance(part, TextPart):
        return attrs.evolve(part, text=redact_text(part.text))
    if isinstance(part, ToolResultPart):
        return attrs.evolve(part, output=redact_text(part.output))
    return part


#: The message part classes a caller may hand :meth:`Conversation.assistant`.
PART_TYPES = (TextPart, ToolCallPart, OpaquePart, ImagePart)


#: How a tool result part's canonical encoding ends (keys sorted: "type" is last).
_RESULT_TYPE_MEMBER = b',"type":"tool_result"}'


def results_digest(message: CanonicalMessage) -> str:
    """The request digest of a batch of tool results: the digest of the canonical list of
    each part's fields (``call_id``, ``is_error``, ``output``).

    Taken from the bytes the message's parts were encoded to (no second encoding of the
    outputs): each part's object is those fields plus ``"type":"tool_result"``, the
    last member in sorted order; a quote inside a JSON string is always escaped, so the
    member's bytes occur nowhere else."""
    data = message.parts_json
    if data is None or not all(isinstance(p, ToolResultPart) for p in message.parts):
        # the same fields as the bytes below hold: images only when there are some
        return canonical.digest([_result_fields(p) for p in message.parts])
    return canonical.sha256_hex(data.replace(_RESULT_TYPE_MEMBER, b"}"))


def _result_fields(part: Part) -> dict[str, Any]:
    """A part's fields as :func:`results_digest` hashes them (a tool result's
    ``images`` only when it has some, as its canonical encoding)."""
    fields = part_to_json(part)
    if isinstance(part, ToolResultPart):
        del fields["type"]
        return fields
    return attrs.asdict(part)


def _result_part(result: ToolResult, index: int) -> ToolResultPart:
    """One result's part: types checked, a blank output normalized (rule 1 of
    :mod:`prefixlock.runtime.admission`)."""
    field = f"tool_results[{index}]"
    if not isinstance(result, ToolResult):
        raise HistoryError(f"{field}: expected a ToolResult, got {type(result).__name__}")
    call_id = require_str(result.call_id, f"{field}.call_id")
    output = tool_output(result.output, f"{field} (call {call_id!r}).output")
    if not isinstance(result.is_error, bool):
        raise HistoryError(f"{field}.is_error: expected true or false, got {result.is_error!r}")
    images = result.image_parts(f"{field} (call {call_id!r}).images")
    return ToolResultPart(call_id, output, result.is_error, images)
