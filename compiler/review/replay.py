"""Replay a scenario: every model call's ModelRequest, and its exact bytes per provider.

This is the CLI / replay edge: the one ``compiler`` module that imports ``providers``
(the registry wires them in here; nothing upstream knows a wire format).

:func:`replay` drives a :class:`~prefixlock.runtime.conversation.Conversation` backed by a
:class:`~prefixlock.store.sqlite.SQLiteStore` in a temporary folder, step by step:

* ``user`` / ``background`` -> :meth:`Conversation.handle` (one model call);
* ``assistant`` -> :meth:`Conversation.assistant`;
* ``tool_results`` -> :meth:`Conversation.tool_results` (one model call);
* ``retry`` -> :meth:`Conversation.handle` of the recorded request, unchanged (one model
  call, whose request equals the original's);
* ``restart`` -> the store is closed and every in-memory object dropped; the
  conversation is hydrated again by :meth:`Conversation.open` from the SQLite file;
* ``compact`` -> :meth:`Conversation.compact`;
* ``switch`` -> nothing in the history: the calls after it carry the model their
  provider's body names (:attr:`Call.models`), set by :func:`call_request` as
  :meth:`Conversation.request(provider=..., model=...) <Conversation.request>` does;
  in a scenario that declares the providers it starts on, every replay's later calls
  go to the switch's provider and model (:attr:`Call.route`), serialized by that
  provider (:func:`wire_for`).

``restart_everywhere=True`` restarts before every step; the bytes must not change (the
verifier checks that). :func:`replay_bodies` serializes the calls with one provider
instance per provider, so its incremental encoding is what produces the bytes.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .. import providers as registry
from ..core import canonical
from ..core.atomic import staging_dir, swap_in
from ..core.errors import InputError, PrefixlockError, SpecError, SpecErrors, UsageError
from ..core.fragments import RunningDigest
from ..core.jsonpath import json_path
from ..core.memory import release_freed_memory
from ..core.messages import CanonicalMessage, OpaquePart
from ..core.model import MessageView, ModelRequest
from ..providers.frame import BodyFragments
from ..runtime.conversation import Conversation
from ..runtime.failover import retarget
from ..store.records import ContextSection
from ..store.sqlite import SQLiteStore
from .scenario import (
    AssistantStep,
    BackgroundStep,
    CompactStep,
    NoteStep,
    RestartStep,
    RetryStep,
    Scenario,
    Step,
    SwitchStep,
    ToolResultsStep,
    UserStep,
)

__all__ = [
    "STORE_FILE",
    "Call",
    "Carrier",
    "call_request",
    "divergence",
    "forget_encodings",
    "fragments_at",
    "history_blocks",
    "history_length",
    "iter_replay",
    "provider_digests",
    "provider_names",
    "refuse_provider_switch",
    "replay",
    "replay_bodies",
    "replay_digests",
    "serialize_at",
    "serialize_calls",
    "sparse_restarts",
    "wire_for",
    "write_bodies",
    "write_replay",
]

#: The checkpoint store's file name inside the replay's folder.
STORE_FILE = "checkpoints.sqlite"


@attrs.frozen
class Call:
    """One model call of a replay; ``request.messages`` is frozen when made (a view of
    a list of the replay's own that is only ever appended to: :class:`_Snapshots`)."""

    index: int  # 1-based model-call number
    step: int  # index into scenario.steps
    kind: str  # "user" | "tool_results" | "background" | "injected" | "retry"
    event: str  # event id / "tool-results:<first call id>"
    request: ModelRequest
    #: ``context_updates: sections``: request-context message id -> the sections it
    #: carries (the conversation's map, only ever added to); empty under ``whole``
    sections: Mapping[str, tuple[ContextSection, ...]] = attrs.field(factory=dict, eq=False)
    #: Shared by the calls of one replay: their messages as each provider takes them
    #: (:func:`request_for`).
    carrier: Carrier = attrs.field(factory=lambda: Carrier(), eq=False, repr=False)

    def request_for(self, provider: str) -> ModelRequest:
        """The request as sent to ``provider`` (:class:`Carrier`): the same object
        unless the history holds another provider's opaque parts."""
        return self.carrier.request(self.request, provider)

    #: provider -> the model its body names for this call, where a ``switch`` step set
    #: one other than the bundle's (empty: every provider's configured model)
    models: Mapping[str, str] = attrs.field(factory=dict)
    #: (provider, model) every replay sends this call to, after a ``switch`` of a
    #: scenario that declares the providers it starts on (None: each replay's own)
    route: tuple[str, str] | None = None

    def wire(self, provider: str) -> str:
        """The provider the replay that started on ``provider`` sends this call to."""
        return provider if self.route is None else self.route[0]

    def target(self, provider: str) -> str:
        """The model of the body the replay that started on ``provider`` sends."""
        if self.route is not None:
            return self.route[1]
        model = self.models.get(provider)
        return model if model is not None else self.request.settings_for(provider).model

    def namespace(self, provider: str) -> tuple[str, str]:
        """(provider, model) of the replay that started on ``provider``: its cache
        namespace (a new one after a switch)."""
        return self.wire(provider), self.target(provider)


class Carrier:
    """The replay's requests as one provider takes them: a provider-opaque part (a
    scenario's ``thinking``) that another provider made is carried or dropped by the
    failover rule (:func:`~prefixlock.runtime.failover.retarget`) -- in that provider's
    body only, never in the history. Claude thinking goes to Claude on Bedrock as well;
    the rest only back to the wire that made it.

    Per provider, the messages so carried are kept as an append-only list beside the
    replay's own (one per history list), so successive calls stay views of one list and
    a provider encodes only what is new; a request whose messages hold nothing foreign
    is returned as it is."""

    def __init__(self) -> None:
        self._lines: dict[str, _Carried] = {}

    def request(self, request: ModelRequest, provider: str) -> ModelRequest:
        messages = request.messages
        if not isinstance(messages, MessageView):
            return retarget(request, provider)
        line = self._lines.get(provider)
        if line is None or line.lineage != messages.lineage():
            line = self._lines[provider] = _Carried(messages)
        line.extend(request, provider)
        count = len(messages)
        if line.first_change is None or count <= line.first_change:
            return request
        hints = []
        for item in request.cache_hints:
            index = item.message_index
            if index is None:
                hints.append(item)
            elif line.counts[index + 1] > 0:  # the message kept at or before it
                hints.append(attrs.evolve(item, message_index=line.counts[index + 1] - 1))
        view = MessageView(line.out, line.counts[count])
        return attrs.evolve(request, messages=view, cache_hints=tuple(hints))


class _Carried:
    """One provider's carried messages of one history list."""

    def __init__(self, source: MessageView) -> None:
        self.source = source  # kept: its list's id is the lineage
        self.lineage = source.lineage()
        self.out: list[CanonicalMessage] = []
        #: counts[i]: how many carried messages the first i source messages make
        self.counts = [0]
        #: the index of the first source message the provider takes otherwise
        self.first_change: int | None = None

    def extend(self, request: ModelRequest, provider: str) -> None:
        messages = request.messages
        done = len(self.counts) - 1
        if len(messages) <= done:
            return
        self.source = messages  # type: ignore[assignment]
        for index in range(done, len(messages)):
            message = messages[index]
            carried: CanonicalMessage | None = message
            if any(isinstance(p, OpaquePart) and p.provider != provider for p in message.parts):
                alone = attrs.evolve(request, messages=(message,), cache_hints=())
                moved = retarget(alone, provider).messages
                carried = moved[0] if moved else None
                if self.first_change is None and carried is not message:
                    self.first_change = index
            if carried is not None:
                self.out.append(carried)
            self.counts.append(len(self.out))


def call_request(call: Call, provider: str) -> ModelRequest:
    """``call``'s request as the replay that started on ``provider`` sends it: with the
    model a ``switch`` step set (:func:`~prefixlock.runtime.failover.retarget`), else
    the call's own; after a provider switch (:attr:`Call.route`), the request for that
    provider and model, as :meth:`Conversation.request(provider=..., model=...)
    <prefixlock.runtime.conversation.Conversation.request>` builds it (the parts that
    provider did not make carried or dropped by the failover rule)."""
    if call.route is not None:
        wire, routed = call.route
        return retarget(call.request_for(wire), wire, routed, opaque=set())
    request = call.request_for(provider)
    model = call.models.get(provider)
    if model is None:
        return request
    # The model only: the parts are carried as without a switch (request_for).
    return retarget(request, provider, model, opaque=set())


def refuse_provider_switch(scenario: Scenario, calls: Sequence[Call], name: str, what: str) -> None:
    """Raise :class:`UsageError` if the replay that started on ``name`` sends a call to
    another provider (a provider switch): ``what`` does not price one yet."""
    for call in calls:
        if call.wire(name) != name:
            raise UsageError(
                f"{scenario.file}: {what} does not price a provider switch yet (call "
                f"{call.index}: {name} → {call.wire(name)}; verify and calls.md do)"
            )


def provider_names(selected: Sequence[str]) -> tuple[str, ...]:
    """The providers a selection names, in registry order; ``all`` names every one.

    Raises :class:`~prefixlock.core.errors.SerializationError` for an unknown name.
    """
    chosen = set(selected)
    if "all" in chosen:
        return registry.NAMES
    for name in selected:
        registry.get(name)  # refuses an unknown name, with a suggestion
    return tuple(name for name in registry.NAMES if name in chosen)


class _Session:
    """The live objects of one process: a store and the open conversation."""

    def __init__(self, scenario: Scenario, db: Path) -> None:
        self.scenario = scenario
        self.db = db
        self.store: SQLiteStore | None = None
        self.conversation: Conversation | None = None
        self.start()

    def start(self) -> None:
        self.store = SQLiteStore(self.db)
        self.conversation = Conversation.open(
            self.store, self.scenario.bundle, self.scenario.conversation
        )

    def stop(self) -> None:
        if self.store is not None:
            self.store.close()
        self.store = None
        self.conversation = None

    def restart(self) -> Conversation:
        """Drop every in-memory object; hydrate from the SQLite file alone."""
        self.stop()
        self.start()
        assert self.conversation is not None
        return self.conversation


def replay(
    scenario: Scenario, *, restart_everywhere: bool = False, workdir: Path | None = None
) -> list[Call]:
    """The model calls of ``scenario``, in order.

    The checkpoint store lives in a temporary folder, or in ``workdir`` (kept; it must
    not hold a store yet). An operation the history refuses raises :class:`SpecErrors`
    located at its step.
    """
    if workdir is not None:
        db = Path(workdir) / STORE_FILE
        if db.exists():
            raise UsageError(f"{db} exists: a replay needs a new checkpoint store")
        Path(workdir).mkdir(parents=True, exist_ok=True)
        return _replay(scenario, db, restart_everywhere)
    with tempfile.TemporaryDirectory(prefix="prefixlock-replay-") as folder:
        return _replay(scenario, Path(folder) / STORE_FILE, restart_everywhere)


def _replay(scenario: Scenario, db: Path, restart_everywhere: bool) -> list[Call]:
    return list(_iter_replay(scenario, db, lambda _: restart_everywhere))


#: :func:`sparse_restarts` restarts before every one of this many first steps.
RESTART_EVERY_STEP = 256


def sparse_restarts() -> Callable[[int], bool]:
    """A restart schedule whose hydrations cost O(steps) in all: before each of the
    first :data:`RESTART_EVERY_STEP` steps, then whenever the steps since the last
    restart reach an eighth of the steps so far (a geometric schedule: a hydration
    reads the whole history, so restarting before every step of a long scenario
    costs quadratic time). Up to :data:`RESTART_EVERY_STEP` steps it is "everywhere"."""
    last = 0

    def due(index: int) -> bool:
        nonlocal last
        if index < RESTART_EVERY_STEP or index - last >= index // 8:
            last = index
            return True
        return False

    return due


def iter_replay(
    scenario: Scenario, *, restart: Callable[[int], bool] | None = None
) -> Iterator[Call]:
    """The model calls of ``scenario`` one at a time, as they are made (a temporary
    store). ``restart(step index)``: whether to restart before that step as well (the
    scenario's own ``restart`` steps always do)."""
    with tempfile.TemporaryDirectory(prefix="prefixlock-replay-") as folder:
        yield from _iter_replay(scenario, Path(folder) / STORE_FILE, restart or (lambda _: False))


def _iter_replay(scenario: Scenario, db: Path, restart: Callable[[int], bool]) -> Iterator[Call]:
    session = _Session(scenario, db)
    snapshots = _Snapshots()
    carrier = Carrier()
    made = 0
    models: dict[str, str] = {}  # the switches in force (provider -> model)
    route: tuple[str, str] | None = None  # a switch of a scenario with `providers:`
    configured = {s.provider: s.model for s in scenario.bundle.settings}
    try:
        for index, step in enumerate(scenario.steps):
            if isinstance(step, SwitchStep) and scenario.providers:
                route = (step.provider, step.model)  # absolute: every replay goes there
                continue
            if isinstance(step, SwitchStep):
                models = {**models, step.provider: step.model}
                if step.model == configured.get(step.provider):
                    del models[step.provider]  # a switch back
                continue
            if restart(index) or isinstance(step, RestartStep):
                conversation = session.restart()
            else:
                assert session.conversation is not None
                conversation = session.conversation
            try:
                result = _run(scenario, conversation, step)
            except SpecErrors:
                raise
            except PrefixlockError as err:
                path = scenario.step_path(index)
                message = f"{err} ({scenario.bundle_note})"
                raise SpecErrors([SpecError(step.location, path, message)]) from err
            if result is not None:
                kind, event, request = result
                made += 1
                frozen = attrs.evolve(request, messages=snapshots.freeze(request.messages))
                sections = conversation.history.context_sections
                yield Call(made, index, kind, event, frozen, sections, carrier, models, route)
    finally:
        session.stop()


class _Snapshots:
    """Each call's messages frozen when the call is made.

    A request's messages are a view onto the append-only history list; if a bug rewrote
    an earlier message in place, every earlier call's view would change with it and the
    rewrite would look like a clean tail append. So each call gets a view of a list of
    the replay's own instead, which only ever grows: a request whose messages start
    with this list's (compared every call: the same objects at pointer speed, a
    restart's hydrated copies once by value) extends it with its new messages; any other
    (a rewrite, a compaction's new epoch) starts a new list. A retry's earlier
    projection is a view of the list's first messages. Calls so keep what was sent, and
    a provider still sees successive views of one list, so it encodes only the new
    messages (:meth:`~prefixlock.providers.base.Provider.fragments`).

    After a restart the list takes over the hydrated objects in place of the equal ones
    it held (equal values are the same bytes, so no view sees a different message): the
    replay keeps one copy of the history, not the list's and the live conversation's,
    and the next restart hydrates beside that one copy alone.
    """

    def __init__(self) -> None:
        #: Handed out in views: only ever appended to, and its items only ever replaced
        #: by equal ones.
        self._list: list[CanonicalMessage] = []

    def freeze(self, messages: Sequence[CanonicalMessage]) -> MessageView:
        count, known = len(messages), len(self._list)
        shared = min(count, known)
        source = list(messages[:shared])
        if source == self._list[:shared]:  # equal values are the same bytes
            self._list[:shared] = source  # next time: the same objects, pointer speed
        else:
            self._list, known = [], 0
        if count > known:
            self._list.extend(messages[known:])
        return MessageView(self._list, count)


def _run(
    scenario: Scenario, conversation: Conversation, step: Step
) -> tuple[str, str, ModelRequest] | None:
    """Apply one step; the model call it makes, if any."""
    if isinstance(step, NoteStep):
        conversation.handle(step.request)  # recorded; sent with the next call
        return None
    if isinstance(step, UserStep) and step.results:
        # results first, then the query: one model call (the results' own request is
        # never sent)
        conversation.tool_results(step.results, timestamp=step.results_timestamp)
        return step.kind, step.event, conversation.handle(step.request)
    if isinstance(step, UserStep | BackgroundStep):
        return step.kind, step.event, conversation.handle(step.request)
    if isinstance(step, ToolResultsStep):
        return (
            step.kind,
            step.event,
            conversation.tool_results(step.results, timestamp=step.timestamp),
        )
    if isinstance(step, RetryStep):
        original = scenario.steps[scenario.delivered_by(step.event)]
        assert isinstance(original, UserStep | BackgroundStep)
        return step.kind, step.event, conversation.handle(original.request)
    if isinstance(step, AssistantStep):
        conversation.assistant(step.text, step.tool_calls, parts=step.parts)
    elif isinstance(step, CompactStep):
        conversation.compact(step.summary)
    return None


#: A replay's provider instance -> the instances of the providers its calls were
#: switched to (one each, so their encodings are reused from call to call).
_SIBLINGS: weakref.WeakKeyDictionary[registry.Provider, dict[str, registry.Provider]] = (
    weakref.WeakKeyDictionary()
)


def wire_for(call: Call, provider: registry.Provider) -> registry.Provider:
    """The provider instance that serializes ``call`` in the replay that started on
    ``provider``: itself, or after a provider switch an instance of that provider's
    (kept beside ``provider``)."""
    name = call.wire(provider.name)
    if name == provider.name:
        return provider
    siblings = _SIBLINGS.setdefault(provider, {})
    found = siblings.get(name)
    if found is None:
        found = siblings[name] = registry.get(name)
    return found


def fragments_at(scenario: Scenario, call: Call, provider: registry.Provider) -> BodyFragments:
    """``call``'s body as fragments; a request the provider cannot express is a
    :class:`SpecErrors` at the step that made the call, naming the bundle (its
    settings, its tools)."""
    try:
        return wire_for(call, provider).fragments(call_request(call, provider.name))
    except PrefixlockError as err:
        message = f"call {call.index}: {err} ({scenario.bundle_note})"
        step = scenario.steps[call.step]
        error = SpecError(step.location, scenario.step_path(call.step), message)
        raise SpecErrors([error]) from err


def serialize_at(scenario: Scenario, call: Call, provider: registry.Provider) -> bytes:
    """``call``'s body (:func:`fragments_at`, joined)."""
    return fragments_at(scenario, call, provider).join()


def serialize_calls(calls: Sequence[Call], providers: Sequence[str]) -> dict[str, list[bytes]]:
    """Provider name -> the body of every call, from one provider instance each."""
    out: dict[str, list[bytes]] = {}
    for name in providers:
        provider = registry.get(name)
        out[name] = [wire_for(call, provider).serialize(call_request(call, name)) for call in calls]
    return out


def replay_bodies(
    scenario: Scenario, providers: Sequence[str], **kw: Any
) -> dict[str, list[bytes]]:
    """Provider name -> the exact body of every model call (``kw``: of :func:`replay`)."""
    calls = replay(scenario, **kw)
    out: dict[str, list[bytes]] = {}
    for name in providers:
        provider = registry.get(name)
        out[name] = [serialize_at(scenario, call, provider) for call in calls]
    return out


def forget_encodings(calls: Sequence[Call]) -> None:
    """Once their replay is done, drop the parts' encodings of every message ``calls``
    hold (:meth:`CanonicalMessage.drop_parts_json`): a caller that keeps the calls to
    serialize them keeps the messages, not what their records were made of. Each history
    list is read once, through its last call."""
    seen: set[int] = set()
    for call in reversed(calls):
        messages = call.request.messages
        lineage = messages.lineage() if isinstance(messages, MessageView) else id(messages)
        if lineage not in seen:
            seen.add(lineage)
            for message in messages:
                message.drop_parts_json()


def replay_digests(
    scenario: Scenario,
    providers: Sequence[str],
    *,
    restart: Callable[[int], bool] | None = None,
) -> dict[str, list[str]]:
    """Provider name -> the SHA-256 (hex) of every call's body. The calls are made once
    (they share the replay's messages: a list per epoch that only grows) and serialized
    by one provider after the other, so one provider's fragments are alive at a time;
    no body outlives its call, and each is hashed from its fragments, from the state
    after those it shares with the body before (:class:`RunningDigest`), so the work
    per call follows what is new."""
    calls = list(iter_replay(scenario, restart=restart))
    forget_encodings(calls)
    out = {}
    for name in providers:
        release_freed_memory()
        out[name] = provider_digests(scenario, calls, name)
    return out


def provider_digests(scenario: Scenario, calls: Sequence[Call], name: str) -> list[str]:
    """The SHA-256 (hex) of every call's body for provider ``name``, from a provider
    instance of its own (gone when this returns)."""
    provider, running = registry.get(name), RunningDigest()
    return [running.hexdigest(fragments_at(scenario, call, provider).as_body()) for call in calls]


@attrs.frozen
class Written:
    """What :func:`write_replay` wrote: provider name -> the paths of its calls' bodies
    (``out/NAME/0001.json`` ...) and -> their total size in bytes."""

    paths: dict[str, list[Path]]
    sizes: dict[str, int]


def _staged_folders(
    out: Path,
    names: Sequence[str],
    fill: Callable[[dict[str, Path]], Mapping[str, int]],
) -> dict[str, list[Path]]:
    """Make a staging folder next to ``out/NAME`` for each name, let ``fill`` write the
    numbered bodies into them (it returns how many per name), then rename each into
    place, replacing the old folder whole (a reader never sees a mix of old and new
    calls). If ``fill`` raises, nothing under ``out`` changes. Returns the final paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    staged: dict[str, Path] = {}
    try:
        for name in names:
            staged[name] = staging_dir(out, f".{name}.replay-")
        counts = fill(staged)
        written = {
            name: [_body_file(out / name, n) for n in range(1, counts[name] + 1)] for name in staged
        }
        for name, staging in staged.items():
            swap_in(staging, out / name)
    finally:
        for staging in staged.values():
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return written


def _body_file(folder: Path, number: int) -> Path:
    return folder / f"{number:04d}.json"


def write_bodies(bodies: Mapping[str, Sequence[bytes]], out: Path) -> dict[str, list[Path]]:
    """Write ``out/NAME/0001.json`` ... for every provider; returns the paths.

    Each ``out/NAME`` folder is built in a temporary folder next to it and renamed into
    place, replacing the old one whole, so a reader never sees a mix of old and new
    calls. Nothing else under ``out`` is touched.
    """

    def fill(staged: dict[str, Path]) -> dict[str, int]:
        for name, items in bodies.items():
            for number, data in enumerate(items, start=1):
                _body_file(staged[name], number).write_bytes(data)
        return {name: len(items) for name, items in bodies.items()}

    return _staged_folders(out, list(bodies), fill)


def write_replay(
    scenario: Scenario,
    providers: Sequence[str],
    out: Path,
    *,
    restart_everywhere: bool = False,
) -> Written:
    """Replay and write ``out/NAME/0001.json`` ... (the bytes exactly as POSTed).

    Each body is written, fragment by fragment, into ``NAME``'s staging folder as its
    call is made, so no body outlives its call; the folders are swapped in once every
    call is written: a failure writes nothing (as :func:`write_bodies`).
    """
    live = {name: registry.get(name) for name in providers}
    sizes = dict.fromkeys(live, 0)
    counts = dict.fromkeys(live, 0)

    def fill(staged: dict[str, Path]) -> dict[str, int]:
        for call in iter_replay(scenario, restart=lambda _: restart_everywhere):
            for name, provider in live.items():
                fragments = fragments_at(scenario, call, provider)
                with _body_file(staged[name], call.index).open("wb") as file:
                    file.writelines(fragments)
                sizes[name] += sum(map(len, fragments))
                counts[name] += 1
        return counts

    return Written(_staged_folders(out, list(live), fill), sizes)


# --------------------------------------------------------------------------- prefixes


def divergence(name: str, old: bytes, new: bytes) -> str | None:
    """Where provider ``name``'s body ``new`` stops extending ``old``; None if it does.

    Both bodies are compared without the provider's cache markers. ``new`` extends
    ``old`` when everything is equal except the history list (the provider's
    ``MESSAGES_KEY``), of which ``old``'s must be an exact prefix, except that the last
    old wire message ``{"role", "content" | "parts": [...]}`` may have gained blocks
    (Bedrock carries same-role neighbours as blocks of one message): the (role, content
    block) pairs of ``old`` are a prefix of ``new``'s. The answer is the JSON path of
    the first difference, e.g. ``$.messages[3].content[0].text``.
    """
    provider = registry.get(name)
    a = provider.strip_cache_markers(_object(old))
    b = provider.strip_cache_markers(_object(new))
    return _first_difference(a, b, (), history=provider.MESSAGES_KEY)


def history_length(name: str, body: bytes) -> int:
    """The number of wire items in provider ``name``'s history list of ``body``."""
    items = _object(body).get(registry.get(name).MESSAGES_KEY)
    return len(items) if isinstance(items, list) else 0


def history_blocks(name: str, body: bytes) -> int:
    """The number of (role, content block) pairs in provider ``name``'s history list of
    ``body``, cache markers removed (:func:`prefixlock.review.compare.block_pairs`)."""
    provider = registry.get(name)
    items = provider.strip_cache_markers(_object(body)).get(provider.MESSAGES_KEY)
    count = 0
    for item in items if isinstance(items, list) else ():
        blocks = _message_blocks(item)
        count += 1 if blocks is None else len(blocks)
    return count


def _message_blocks(item: Any) -> list[Any] | None:
    """The block list of a ``{"role", "content" | "parts": [...]}`` message, else None."""
    if isinstance(item, dict) and len(item) == 2 and "role" in item:
        (key,) = (k for k in item if k != "role")
        if key in _BLOCK_LISTS and isinstance(item[key], list):
            return list(item[key])
    return None


def _object(data: bytes) -> dict[str, Any]:
    value = canonical.loads(data)
    if not isinstance(value, dict):
        raise InputError("a request body is not a JSON object")
    return value


_Parts = tuple[str | int, ...]
#: Keys of a wire message's content-block list.
_BLOCK_LISTS = ("content", "parts")


def _first_difference(a: Any, b: Any, parts: _Parts, history: str | None = None) -> str | None:
    """The path of the first difference; at the top level, list ``history`` may grow."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys_b = list(b)
        # the last old message's block list may grow ("last": see divergence)
        blocks = history == "last" and len(a) == 2 and "role" in a
        for i, key in enumerate(a):
            if i >= len(keys_b) or keys_b[i] != key:
                return json_path((*parts, key))
            grows = (not parts and key == history) or (blocks and key in _BLOCK_LISTS)
            found = _first_difference(a[key], b[key], (*parts, key), "*" if grows else None)
            if found is not None:
                return found
        if len(keys_b) > len(a):
            return json_path((*parts, keys_b[len(a)]))
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, item in enumerate(a):
            if i >= len(b):
                return json_path((*parts, i))
            last = history == "*" and len(parts) == 1 and i == len(a) - 1
            found = _first_difference(item, b[i], (*parts, i), "last" if last else None)
            if found is not None:
                return found
        if len(b) > len(a) and history != "*":
            return json_path((*parts, len(a)))
        return None
    if type(a) is not type(b) or a != b:
        return json_path(parts)
    return None
