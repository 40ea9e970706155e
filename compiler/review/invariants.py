"""The invariants of a replay, checked on canonical requests and on provider bodies.

:func:`check_history` (provider-independent, on each call's ModelRequest):

* **root** -- instructions, tools and settings are identical on every call;
* **context** -- every request-context message is immediately followed by its turn's
  runtime message (or, first in an automatically compacted epoch, by the summary), and
  none repeats the content of the request-context before it. Under ``context_updates:
  sections``, per section: no message carries a section unchanged from the version in
  force, what the epoch's messages leave in force is each section's latest version (the
  turn's own, when ``expected`` gives it), and the first message of an automatically
  compacted epoch carries every section;
* **duplicate** -- no message id appears twice in a request; each call ends with the
  message its event appended;
* **retry** -- a retried event's request equals the original call's;
* **compaction** -- an automatic compaction starts its epoch with the latest request
  context (same identity and content unless it changed), the summary, then the turn's
  runtime message; a manual one with the summary, and the next user turn reprojects
  the request context.

:func:`check_bodies` (one provider's exact bodies): **prefix** -- invariant 1 on the
wire, stated over (role, content block) pairs: without compaction, for every provider,
the sequence of (role, content block) pairs of call N's history
(:func:`~prefixlock.review.compare.block_pairs`, cache markers removed) is a prefix of
call N+1's, and the frame (every other key) is equal. A wire that demands alternating
roles (Bedrock) carries consecutive same-role canonical messages as blocks of one
message, so a later call may add blocks to the last wire message, never change or drop
an earlier block; on the other wires each history item is moreover an exact prefix
item. Across a compaction only the frame must stay (**root**); a retry's bytes equal
the original call's (**retry**).
:func:`same_bytes` compares two replays of the same scenario (restart, hash seed).

Every failure names the call, the first divergent JSON path with old and new values,
and the spec ``file:line`` that produced the text when :class:`SourceIndex` finds it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import attrs

from ..core import canonical
from ..core.bodyscan import HistoryScanner, Scan
from ..core.fragments import Body
from ..core.messages import CanonicalMessage, MessageKind
from ..core.model import MessageView, ModelRequest
from ..providers import get
from .compare import PREFIX_BREAK, block_pairs, compare_bodies, grown_blocks, history_key
from .jsondiff import Difference, describe, first_difference, first_differing_char
from .replay import Call
from .sources import SourceIndex

__all__ = [
    "BodyChecker",
    "Failure",
    "HistoryChecker",
    "check_bodies",
    "check_history",
    "same_bytes",
]


@attrs.frozen
class Failure:
    """One broken invariant."""

    scenario: str
    check: str
    message: str
    provider: str | None = None
    call: int | None = None
    path: str | None = None
    old: str | None = None
    new: str | None = None
    source: str | None = None
    #: the scenario step that made the call (``s.yaml:12:5 $.steps[3].user``)
    step: str | None = None
    #: the bundle the scenario ran against (``bundle: /spec/root, sha256:...``)
    bundle: str | None = None

    def lines(self) -> list[str]:
        where = " · ".join(
            part
            for part in (
                self.scenario,
                self.provider,
                f"call {self.call}" if self.call is not None else None,
                self.check,
            )
            if part
        )
        out = [f"FAIL {where}: {self.message}"]
        if self.path is not None:
            out.append(f"  at {self.path}")
        if self.old is not None or self.new is not None:
            out.append(f"  old: {self.old}")
            out.append(f"  new: {self.new}")
        if self.source is not None:
            out.append(f"  source: {self.source}")
        if self.step is not None:
            out.append(f"  step: {self.step}")
        if self.bundle is not None:
            out.append(f"  {self.bundle}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


# --- canonical checks ------------------------------------------------------------------


def _event_of(message: CanonicalMessage) -> str:
    return message.id.partition(":")[2]


def _latest_context(request: ModelRequest) -> CanonicalMessage | None:
    found = None
    for message in request.messages:
        if message.kind is MessageKind.REQUEST_CONTEXT:
            found = message
    return found


def check_history(
    scenario: str, calls: Iterable[Call], sources: SourceIndex | None = None
) -> list[Failure]:
    """The invariants visible in the canonical requests (provider-independent)."""
    checker = HistoryChecker(scenario, sources)
    for call in calls:
        checker.add(call)
    return checker.failures


class HistoryChecker:
    """:func:`check_history` one call at a time, keeping the first call, the previous
    one and the originals of retried events (all of them, or those in ``retried``)."""

    def __init__(
        self,
        scenario: str,
        sources: SourceIndex | None = None,
        retried: Collection[str] | None = None,
        expected: Mapping[str, Mapping[str, str | None]] | None = None,
    ) -> None:
        self.scenario = scenario
        #: user event -> each section's digest its turn's context has (sections mode)
        self.expected = expected
        self.sources = sources
        self.retried = retried
        self.failures: list[Failure] = []
        self.first: Call | None = None
        self.previous: Call | None = None  # the previous call that is not a retry
        self.originals: dict[str, Call] = {}
        self._tally = _Tally()

    def _fail(self, check: str, call: Call, message: str) -> None:
        self.failures.append(Failure(self.scenario, check, message, call=call.index))

    def add(self, call: Call) -> None:
        scenario, fail = self.scenario, self._fail
        request = call.request
        messages = request.messages
        if self.first is None:
            self.first = call
        else:
            self.failures.extend(_root_changes(scenario, self.first, call, self.sources))
        tally = self._tally
        tally.read(messages)
        for mid in sorted(tally.repeated, key=tally.positions.__getitem__):
            n = tally.repeated[mid]
            fail("duplicate", call, f"message {mid!r} appears {n} times in the request")
        if call.kind == "retry":
            original = self.originals.get(call.event)
            if original is not None and not original.request.same_as(request):
                fail("retry", call, f"retry of {call.event!r} differs from call {original.index}")
            return
        if call.event not in self.originals and (
            self.retried is None or call.event in self.retried
        ):
            self.originals[call.event] = call
        if not messages:
            fail("duplicate", call, "the request has no messages")
            return
        appended = {"user": "runtime:", "background": "event:", "injected": "event:"}
        expected = appended.get(call.kind, "") + call.event
        if messages[-1].id != expected:
            fail(
                "duplicate",
                call,
                f"the request ends with {messages[-1].id!r}, not the message its event "
                f"appended ({expected!r})",
            )
        self.failures.extend(_context_placement(scenario, call, messages, tally.contexts))
        if call.sections:
            want = None if self.expected is None else self.expected.get(call.event)
            self.failures.extend(_sections_in_force(scenario, call, messages, tally.contexts, want))
        previous = self.previous
        if previous is not None and request.epoch != previous.request.epoch:
            self.failures.extend(_compaction(scenario, previous, call, messages))
        self.previous = call


class _Tally:
    """What :class:`HistoryChecker` reads of a request's messages -- each id's count,
    the ids that repeat, where the request-context messages are -- kept for the next
    request: a view that extends the previous one (a
    :class:`~prefixlock.core.model.MessageView` of the same append-only list, as the
    replay makes them) is read from where that one ended, any other whole."""

    def __init__(self) -> None:
        self.view: Sequence[CanonicalMessage] = ()
        #: id -> its place in the order ids first appear (the order failures are named in)
        self.positions: dict[str, int] = {}
        #: id -> its count, for the ids that appear more than once (a map of every id's
        #: count would be a second entry per message)
        self.repeated: dict[str, int] = {}
        self.contexts: list[int] = []

    def read(self, messages: Sequence[CanonicalMessage]) -> None:
        view, start = self.view, len(self.view)
        if not (isinstance(view, MessageView) and view.shared_with(messages) == start):
            self.positions, self.repeated, self.contexts = {}, {}, []
            start = 0
        positions, repeated, contexts = self.positions, self.repeated, self.contexts
        for index in range(start, len(messages)):
            message = messages[index]
            mid = message.id
            if mid not in positions:
                positions[mid] = len(positions)
            else:
                repeated[mid] = repeated.get(mid, 1) + 1
            if message.kind is MessageKind.REQUEST_CONTEXT:
                contexts.append(index)
        self.view = messages


def _context_placement(
    scenario: str, call: Call, messages: Sequence[CanonicalMessage], contexts: Sequence[int]
) -> list[Failure]:
    """The context invariant; ``contexts``: the indexes of the request-context messages."""
    failures = []
    before: CanonicalMessage | None = None
    for i in contexts:
        message = messages[i]
        following = messages[i + 1] if i + 1 < len(messages) else None
        own_runtime = (
            following is not None
            and following.kind is MessageKind.RUNTIME
            and _event_of(following) == _event_of(message)
        )
        after_compaction = (
            i == 0 and following is not None and following.kind is MessageKind.SUMMARY
        )
        if not (own_runtime or after_compaction):
            what = "nothing" if following is None else repr(following.id)
            failures.append(
                Failure(
                    scenario,
                    "context",
                    f"{message.id!r} at message {i} is followed by {what}, not its turn's "
                    "runtime message",
                    call=call.index,
                )
            )
        if before is not None and before.digest == message.digest:
            failures.append(
                Failure(
                    scenario,
                    "context",
                    f"{message.id!r} repeats the content of {before.id!r} (an unchanged "
                    "context must not be appended again)",
                    call=call.index,
                )
            )
        before = message
    return failures


def _sections_in_force(
    scenario: str,
    call: Call,
    messages: Sequence[CanonicalMessage],
    contexts: Sequence[int],
    expected: Mapping[str, str | None] | None,
) -> list[Failure]:
    """The context invariant per section (``context_updates: sections``); ``expected``:
    each section's digest in the context of this call's user turn, if it is one."""
    failures = []

    def fail(message: str) -> None:
        failures.append(Failure(scenario, "context", message, call=call.index))

    in_force: dict[str, tuple[str | None, str]] = {}  # name -> (digest, message id)
    for n, i in enumerate(contexts):
        message = messages[i]
        carried = call.sections.get(message.id)
        if carried is None:  # a whole context: nothing in force per section
            in_force = {}
            continue
        for section in carried:
            before = in_force.get(section.name)
            if n and before is not None and before[0] == section.digest:
                fail(
                    f"{message.id!r} carries section {section.name!r} unchanged from "
                    f"{before[1]!r} (an unchanged section must not be sent again)"
                )
            in_force[section.name] = (section.digest, message.id)
        automatic = i == 0 and len(messages) > 1 and messages[1].kind is MessageKind.SUMMARY
        if automatic and expected is not None and [s.name for s in carried] != list(expected):
            fail(
                f"automatic compaction kept {message.id!r}, which carries the sections "
                f"{', '.join(s.name for s in carried)}, not the full context "
                f"({', '.join(expected)})"
            )
    if expected is not None and call.kind == "user":
        for name, digest in expected.items():
            have, where = in_force.get(name, (None, None))
            if have != digest:
                fail(
                    f"section {name!r} in force after user turn {call.event!r} is "
                    f"{'none' if where is None else 'the version of ' + repr(where)}, not the "
                    "turn's own"
                )
    return failures


def _compaction(
    scenario: str, previous: Call, call: Call, messages: Sequence[CanonicalMessage]
) -> list[Failure]:
    def fail(message: str) -> list[Failure]:
        return [Failure(scenario, "compaction", message, call=call.index)]

    kinds = [m.kind for m in messages[:3]]
    epoch = call.request.epoch
    if kinds[:1] == [MessageKind.SUMMARY]:
        # Events recorded after the compaction without a call of their own (a note, an
        # injected runtime event: invariant 8, they compile no context) come before the
        # user turn that reprojects the context.
        end = 1
        while end < len(messages) and messages[end].kind is MessageKind.EVENT:
            end += 1
        if call.kind == "user" and (
            end == len(messages) or messages[end].kind is not MessageKind.REQUEST_CONTEXT
        ):
            found = [str(m.kind) for m in messages[: end + 1]]
            return fail(
                f"epoch {epoch} (manual compaction): the next user turn must reproject the "
                f"request context after the summary, found {found}"
            )
        return []
    automatic = [MessageKind.REQUEST_CONTEXT, MessageKind.SUMMARY, MessageKind.RUNTIME]
    if kinds != automatic or call.kind != "user":
        return fail(
            f"epoch {epoch} starts with {[str(k) for k in kinds]}; expected [summary] "
            "(manual) or [request_context, summary, runtime] (automatic)"
        )
    latest = _latest_context(previous.request)
    context = messages[0]
    if context.id != f"request-context:{call.event}":
        if latest is None or (latest.id, latest.digest) != (context.id, context.digest):
            return fail(
                f"automatic compaction kept {context.id!r}, which is not the latest "
                "request context of the previous epoch (same identity and content)"
            )
    elif latest is not None and latest.digest == context.digest:
        return fail(
            f"automatic compaction appended {context.id!r} although the context did not "
            f"change (keep {latest.id!r})"
        )
    return []


def _root_changes(
    scenario: str, first: Call, call: Call, sources: SourceIndex | None
) -> list[Failure]:
    a, b = first.request, call.request
    failures = []
    if a.instructions != b.instructions:
        offset = first_differing_char(a.instructions, b.instructions)
        source = None
        if sources is not None:
            source = sources.instructions_location(b.instructions, offset)
        old, new = describe(Difference((), a.instructions, b.instructions))
        failures.append(
            Failure(
                scenario,
                "root",
                "instructions changed",
                call=call.index,
                old=old,
                new=new,
                source=source,
            )
        )
    if a.tools != b.tools:
        old_tools = [t.to_json() for t in a.tools]
        new_tools = [t.to_json() for t in b.tools]
        found = first_difference(old_tools, new_tools, ("tools",))
        assert found is not None
        source = None
        index = found.parts[1] if len(found.parts) > 1 else None
        if sources is not None and isinstance(index, int):
            tools = new_tools if index < len(new_tools) else old_tools
            located = sources.tool_location(tools[index]["name"], found.parts[2:])
            source = None if located is None else f"{located.file}:{located.line}"
        old, new = describe(found)
        failures.append(
            Failure(
                scenario,
                "root",
                "tools changed",
                call=call.index,
                path=found.path,
                old=old,
                new=new,
                source=source,
            )
        )
    if a.settings != b.settings:
        failures.append(Failure(scenario, "root", "provider settings changed", call=call.index))
    return failures


# --- body checks -----------------------------------------------------------------------


def check_bodies(
    scenario: str,
    provider: str,
    bodies: Iterable[bytes],
    *,
    epochs: Sequence[int] | None = None,
    retries: Mapping[int, int] | None = None,
    sources: SourceIndex | None = None,
) -> list[Failure]:
    """Prefix stability of one provider's bodies, in call order (call numbers from 1).

    ``epochs[k]`` is call k+1's compaction epoch (default: all 0); ``retries`` maps a
    retry's call number to the original call's, whose bytes it must repeat (a retry is
    not part of the prefix chain).
    """
    checker = BodyChecker(scenario, provider, retries=retries, sources=sources)
    for number, body in enumerate(bodies, start=1):
        checker.add(body, epochs[number - 1] if epochs is not None else 0)
    return checker.failures


class BodyChecker:
    """:func:`check_bodies` one body at a time: each body is compared with the one
    before only; kept are the previous body (its fragments: a provider's cached bytes)
    and the bodies of retried calls.

    Fast path: the history items after those byte-identical to the previous body's are
    parsed (:class:`~prefixlock.core.bodyscan.HistoryScanner`); when the frame (every
    member but the history list) has the previous body's bytes, the previous body's
    items after the identical ones and the new body's, cache markers removed, decide: a
    tail append when the previous ones are equal (the last of them, or grown by blocks)
    and something was added. Everything else -- a changed frame, a body the scanner
    does not read, a compaction -- goes through the whole-body comparison, markers
    removed, and then :func:`compare_bodies` and the block-by-block check, which name
    the failure. The work per body so follows what changed, not the length of the
    history.
    """

    def __init__(
        self,
        scenario: str,
        provider: str,
        *,
        retries: Mapping[int, int] | None = None,
        sources: SourceIndex | None = None,
    ) -> None:
        self.scenario = scenario
        self.provider = provider
        self.retries = dict(retries or {})
        self.sources = sources
        self.failures: list[Failure] = []
        self.number = 0
        #: the provider whose bodies are checked (``provider``'s, until a switch)
        self.wire_name = provider
        self.wire = get(provider)
        #: call numbers whose bodies a later retry must repeat
        self.keep = set(self.retries.values())
        #: retries sent after a switch (to another model or provider than the original):
        #: neither the original's bytes nor a step of the prefix chain
        self.moved: set[int] = set()
        self._kept: dict[int, Body] = {}
        #: the previous call's number, body, epoch and (members, frame) if it scanned
        self._previous: (
            tuple[int, Body, int, tuple[tuple[str, ...], Mapping[str, Any]] | None] | None
        ) = None
        self._scanner = HistoryScanner(self.wire.MESSAGES_KEY)

    def new_namespace(self, wire: str | None = None) -> None:
        """The next call goes to another model (a scenario's ``switch``): a new cache
        namespace, whose first body extends nothing, as a first call. ``wire``: the
        provider whose bodies come from now on (a provider switch), if another."""
        self._previous = None
        if wire is not None and wire != self.wire_name:
            self.wire_name, self.wire = wire, get(wire)
            self._scanner = HistoryScanner(self.wire.MESSAGES_KEY)

    def add(self, body: bytes | Body | Iterable[bytes], epoch: int = 0) -> None:
        """The next call's body: its bytes, or its fragments."""
        body = body if isinstance(body, Body) else Body.of(body)
        self.number += 1
        number, scenario, provider, sources = (
            self.number,
            self.scenario,
            self.provider,
            self.sources,
        )
        if number in self.keep:
            self._kept[number] = body
        if number in self.moved:
            return
        if number in self.retries:
            original = self.retries[number]
            kept = self._kept.get(original)
            expected = kept.join() if kept is not None else b""
            data = body.join()
            if data != expected:
                self.failures.append(
                    _break(
                        scenario,
                        provider,
                        number,
                        "retry",
                        f"retry is not byte-identical to call {original}",
                        expected,
                        data,
                        sources,
                    )
                )
            return
        previous = self._previous
        scan = self._scanner.scan(body)
        frame = None if scan is None else (scan.members, scan.frame)
        self._previous = (number, body, epoch, frame)
        if previous is None:
            return
        prev_number, prev_body, prev_epoch, prev_frame = previous
        scanned = scan if scan is not None and scan.old_body is prev_body else None
        if scanned is not None:
            if scanned.common_bytes == prev_body.size == body.size:
                return  # the same bytes
            frame_same = scanned.head_same and scanned.trail_same
        else:
            if prev_body.size == body.size and prev_body.join() == body.join():
                return
            frame_same = False
        if epoch == prev_epoch:
            if scanned is not None and frame_same:
                if self._items_append(scanned):
                    return
            elif scanned is not None and prev_frame is not None:
                # Another frame (a mode's tools, a moved marker): what the whole bodies
                # would show, from the two frames and the items the scan read.
                if self._frame_alike(prev_frame, scanned) and self._items_append(scanned):
                    return
            elif self._tail_append(self._stripped(prev_body.join()), self._stripped(body.join())):
                return
        self.failures.extend(
            _body_failures(
                scenario,
                self.wire_name,
                number,
                prev_number,
                prev_body.join(),
                body.join(),
                epoch,
                prev_epoch,
                sources,
            )
        )

    def _stripped(self, body: bytes) -> dict[str, Any]:
        value = canonical.loads(body)
        if not isinstance(value, dict):
            return {}
        return self.wire.strip_cache_markers(value)

    def _items_append(self, scan: Scan) -> bool:
        """:meth:`_tail_append` of two bodies with the same frame bytes, from the items
        after the ``scan.common`` byte-identical ones (markers are removed item by item:
        every wire's markers sit inside the item that carries them)."""
        key = self.wire.MESSAGES_KEY
        strip = self.wire.strip_cache_markers
        old = strip({key: scan.old_items()})[key]
        new = strip({key: list(scan.items)})[key]
        # nothing before, or every earlier item unchanged: something must be added
        return _history_appended(old, new)

    def _frame_alike(self, before: tuple[tuple[str, ...], Mapping[str, Any]], scan: Scan) -> bool:
        """:meth:`_tail_append`'s test of the members around the history: the same
        members in the same order, each equal once its markers are stripped (every
        wire strips a member by itself)."""
        members, frame = before
        strip = self.wire.strip_cache_markers
        return members == scan.members and strip(frame) == strip(scan.frame)

    def _tail_append(self, a: dict[str, Any], b: dict[str, Any]) -> bool:
        key = self.wire.MESSAGES_KEY
        if list(a) != list(b) or any(a[k] != b[k] for k in a if k != key):
            return False
        old, new = a.get(key), b.get(key)
        if not isinstance(old, list) or not isinstance(new, list):
            return False
        return _history_appended(old, new)


def _history_appended(old: list[Any], new: list[Any]) -> bool:
    """Whether the history items ``new`` (markers stripped) extend ``old``: every item
    of ``old`` unchanged but the last, which may only have grown blocks at its end
    (merged same-role messages), and something added."""
    if len(new) < len(old):
        return False
    if not old:
        return bool(new)
    last = len(old) - 1
    if old[:last] != new[:last]:
        return False
    if old[last] == new[last]:
        return len(new) > len(old)
    return bool(grown_blocks(old[last], new[last]))


def _body_failures(
    scenario: str,
    provider: str,
    number: int,
    prev_number: int,
    prev_body: bytes,
    body: bytes,
    epoch: int,
    prev_epoch: int,
    sources: SourceIndex | None,
) -> list[Failure]:
    """The exact comparison of two consecutive bodies (the slow path of BodyChecker)."""
    comparison = compare_bodies(provider, prev_body, body)
    if comparison.kind == PREFIX_BREAK:
        assert comparison.difference is not None
        in_history = comparison.difference.parts[:1] == (history_key(provider),)
        if epoch == prev_epoch:
            return [
                _break(
                    scenario,
                    provider,
                    number,
                    "prefix",
                    f"not a tail append of call {prev_number}",
                    prev_body,
                    body,
                    sources,
                    comparison,
                )
            ]
        if not in_history:
            return [
                _break(
                    scenario,
                    provider,
                    number,
                    "root",
                    f"the frame changed across the compaction after call {prev_number}",
                    prev_body,
                    body,
                    sources,
                    comparison,
                )
            ]
        return []
    if epoch == prev_epoch:
        return _block_prefix(scenario, provider, number, prev_number, prev_body, body)
    return []


def _block_prefix(
    scenario: str, provider: str, number: int, prev_number: int, old: bytes, new: bytes
) -> list[Failure]:
    """Invariant 1 block by block: the (role, content block) pairs of ``old``'s history,
    cache markers removed, are a prefix of ``new``'s (a check independent of how
    :func:`compare_bodies` walks the items)."""
    wire = get(provider)
    key = wire.MESSAGES_KEY
    a = block_pairs(wire.strip_cache_markers(canonical.loads(old)).get(key))
    b = block_pairs(wire.strip_cache_markers(canonical.loads(new)).get(key))
    for index, (pair, other) in enumerate(zip(a, b, strict=False)):
        if pair[0] != other[0] or first_difference(pair[1], other[1]) is not None:
            return [
                Failure(
                    scenario,
                    "prefix",
                    f"(role, content block) pair {index} of call {prev_number} changed",
                    provider=provider,
                    call=number,
                    old=canonical.dumps(list(pair)),
                    new=canonical.dumps(list(other)),
                )
            ]
    if len(b) < len(a):
        return [
            Failure(
                scenario,
                "prefix",
                f"call {prev_number}'s {len(a)} (role, content block) pairs shrank to {len(b)}",
                provider=provider,
                call=number,
            )
        ]
    return []


def _break(
    scenario: str,
    provider: str,
    call: int,
    check: str,
    message: str,
    old: bytes,
    new: bytes,
    sources: SourceIndex | None,
    comparison: Any = None,
) -> Failure:
    if comparison is None:
        comparison = compare_bodies(provider, old, new)
    difference = comparison.difference
    if difference is None:
        return Failure(scenario, check, message, provider=provider, call=call)
    if comparison.note:
        return Failure(
            scenario,
            check,
            f"{message}: {comparison.note}",
            provider=provider,
            call=call,
            path=difference.path,
        )
    old_text, new_text = describe(difference)
    source = None
    if sources is not None:
        source = sources.attribute(provider, difference, canonical.loads(new), canonical.loads(old))
    return Failure(
        scenario,
        check,
        message,
        provider=provider,
        call=call,
        path=difference.path,
        old=old_text,
        new=new_text,
        source=source,
    )


def same_bytes(
    scenario: str,
    provider: str,
    check: str,
    what: str,
    expected: Sequence[bytes],
    got: Sequence[bytes],
    sources: SourceIndex | None,
) -> list[Failure]:
    if len(expected) != len(got):
        return [
            Failure(
                scenario,
                check,
                f"{what}: {len(got)} calls instead of {len(expected)}",
                provider=provider,
            )
        ]
    for number, (a, b) in enumerate(zip(expected, got, strict=True), start=1):
        if a != b:
            found = first_difference(canonical.loads(a), canonical.loads(b))
            if found is None:
                return [
                    Failure(
                        scenario,
                        check,
                        f"{what}: same JSON, different bytes",
                        provider=provider,
                        call=number,
                    )
                ]
            old, new = describe(found)
            source = None
            if sources is not None:
                source = sources.attribute(provider, found, canonical.loads(b), canonical.loads(a))
            return [
                Failure(
                    scenario,
                    check,
                    f"{what}: bytes differ",
                    provider=provider,
                    call=number,
                    path=found.path,
                    old=old,
                    new=new,
                    source=source,
                )
            ]
    return []
