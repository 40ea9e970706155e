"""The shared machinery of every provider wire format (sqlglot's ``Generator``).

A provider module is a thin subclass of :class:`Provider`: class-level flags and tables
plus handlers found by name, never ``if provider == ...`` here.

Handlers (looked up by name on the subclass):

* ``<kind>_message(message, at) -> list[wire item]`` for a :class:`MessageKind`
  (``request_context_message``, ``tool_result_message`` ...); if absent,
  ``<role>_message`` for the canonical role (``user_message``, ``assistant_message``,
  ``tool_message``). One canonical message maps to one or more wire items, in order.
* ``<part>_part(part, at) -> wire block`` for a part type (``text_part``,
  ``tool_call_part``, ``tool_result_part``, ``opaque_part``, ``image_part``). A missing
  handler means "this provider cannot express that part here": a
  :class:`SerializationError` naming provider, message id and part index.

Body layout (fixed, canonical): ``{<head keys>, <MESSAGES_KEY>: [<preamble items>,
<message items>...], <trail keys>, <options sorted>}``. Head, preamble and trail form
the *frame*; it depends only on instructions, tools, settings, cache key and the
frame-level cache positions, and is encoded once per distinct frame.

Incremental encoding: each canonical message's wire bytes are cached by
``(message id, digest, cache positions on that message)``; :meth:`Provider.serialize`
joins cached fragments and encodes only messages it has not seen. The result is
byte-identical to ``canonical.dumpb(provider.body(request))`` (tested).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar, NoReturn

import attrs

from compiler import canonical
from compiler.canonical import CanonicalJSONError, Ordered
from compiler.errors import SerializationError
from compiler.messages import (
    CanonicalMessage,
    ImagePart,
    OpaquePart,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    part_to_json,
)
from compiler.model import CachePosition, ModelRequest, ProviderSettings, ToolSpec

#: Part class -> handler stem (``text`` -> ``text_part``).
PART_NAMES: Mapping[type[Any], str] = {
    TextPart: "text",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
    OpaquePart: "opaque",
    ImagePart: "image",
}

Markers = frozenset[CachePosition]
_NO_MARKERS: Markers = frozenset()

#: Drop the fragment cache when it grows beyond this many entries (correctness never
#: depends on the cache; this only bounds memory of a long-lived instance).
CACHE_LIMIT = 200_000


@attrs.frozen
class MessageAt:
    """Where a message sits: for handlers and error messages."""

    provider: str
    message: CanonicalMessage
    index: int
    #: Cache positions this provider expresses on this message (see MESSAGE_MARKERS).
    markers: Markers

    def fail(self, text: str) -> NoReturn:
        raise SerializationError(f"{self.provider}: message {self.message.id!r}: {text}")

    def part(self, part_index: int) -> PartAt:
        return PartAt(self, part_index)


@attrs.frozen
class PartAt:
    """Where a part sits inside its message."""

    at: MessageAt
    index: int

    @property
    def message(self) -> CanonicalMessage:
        return self.at.message

    def fail(self, text: str) -> NoReturn:
        raise SerializationError(
            f"{self.at.provider}: message {self.at.message.id!r} part {self.index}: {text}"
        )


def join_body(frame: Frame, fragments: list[bytes]) -> bytes:
    """``open + b",".join(fragments) + close``, copying the bulk of the bytes once.

    The concatenation of the joined fragments would copy the whole body twice more;
    bodies of long conversations are megabytes, so the copy is most of what
    :meth:`Provider.serialize` costs. ``fragments`` (built fresh by the caller) is
    modified.
    """
    if not fragments:
        return frame.open_bytes + frame.close_bytes
    fragments[0] = frame.open_bytes + fragments[0]
    fragments[-1] = fragments[-1] + frame.close_bytes
    return b",".join(fragments)


@attrs.frozen
class Frame:
    """Everything around the history list, encoded once per distinct frame."""

    head: Ordered
    preamble: tuple[Any, ...]
    trail: Ordered
    #: ``{<head>,"<messages key>":[`` and, when present, the preamble items.
    open_bytes: bytes
    preamble_bytes: bytes
    #: ``]<,trail>}``
    close_bytes: bytes


class Provider:
    """One wire format. Subclasses set the flags below and define handlers.

    Public API: :attr:`name`, :meth:`serialize`, :meth:`body`, :meth:`wire_body`,
    :meth:`strip_cache_markers`, :attr:`MESSAGES_KEY`.
    """

    #: Registry name (``openai-chat``); also the ``OpaquePart.provider`` it accepts.
    name: ClassVar[str]

    #: Key of the history list in the body (``messages``, ``input``, ``contents``).
    MESSAGES_KEY: ClassVar[str] = "messages"
    #: Key of the max-tokens setting in the default head.
    MAX_TOKENS_KEY: ClassVar[str] = "max_tokens"
    #: Key of the tool list in the default head.
    TOOLS_KEY: ClassVar[str] = "tools"
    #: Tool / function names this wire accepts, and how to say so in an error.
    TOOL_NAME_PATTERN: ClassVar[re.Pattern[str]] = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    TOOL_NAME_RULE: ClassVar[str] = "1-64 characters of a-z, A-Z, 0-9, '_' and '-'"
    #: Cache positions expressed *inside* a message (its bytes depend on them); all
    #: other positions are frame-level (head / trail).
    MESSAGE_MARKERS: ClassVar[Markers] = _NO_MARKERS
    #: Cache positions this provider expresses at all; hints for others are ignored.
    CACHE_POSITIONS: ClassVar[Markers] = _NO_MARKERS
    #: Option keys refused even when this call does not emit them (aliases, keys the
    #: frame emits only sometimes).
    RESERVED_OPTIONS: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self._fragments: dict[tuple[str, str, Markers], bytes] = {}
        self._frames: dict[tuple[Any, ...], Frame] = {}

    # ------------------------------------------------------------------ public API

    def serialize(self, request: ModelRequest) -> bytes:
        """The exact POST body: canonical UTF-8 JSON in this wire's key order.

        Equal to ``canonical.dumpb(self.wire_body(request))``; only new messages are encoded.
        """
        frame, message_markers = self._prepare(request)
        fragments: list[bytes] = []
        if frame.preamble_bytes:
            fragments.append(frame.preamble_bytes)
        cache = self._fragments
        if len(cache) > CACHE_LIMIT:
            cache.clear()
        for index, message in enumerate(request.messages):
            markers = message_markers.get(index, _NO_MARKERS)
            key = (message.id, message.digest, markers)
            fragment = cache.get(key)
            if fragment is None:
                items = self._message_items(message, index, markers)
                fragment = b",".join(self._encode_item(message, item) for item in items)
                cache[key] = fragment
            fragments.append(fragment)
        return join_body(frame, fragments)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The same body as a dict (``Ordered`` objects, so ``canonical.dumpb`` of it
        gives the :meth:`serialize` bytes). Built fresh, without the fragment cache."""
        frame, message_markers = self._prepare(request)
        # Copies: the frame is cached and shared; a caller may mutate what we return.
        history: list[Any] = copy.deepcopy(list(frame.preamble))
        for index, message in enumerate(request.messages):
            items = self._message_items(message, index, message_markers.get(index, _NO_MARKERS))
            for item in items:
                self._encode_item(message, item)  # same refusals as serialize()
            history.extend(items)
        out = copy.deepcopy(frame.head)
        out[self.MESSAGES_KEY] = history
        out.update(copy.deepcopy(frame.trail))
        return out

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body exactly as POSTed: ``canonical.dumpb(wire_body(r)) ==
        serialize(r)``. Equal to :meth:`body` unless a subclass's :meth:`body` adds
        members that travel elsewhere (Bedrock's ``modelId`` goes in the URI)."""
        return self.body(request)

    def strip_cache_markers(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``body`` without this provider's cache markers, and nothing else
        changed. The prefix verifier compares bodies through it. Default: no markers."""
        out = copy.deepcopy(body)
        return out if isinstance(out, dict) else dict(out)

    # ------------------------------------------------------------ frame (overridable)

    def head(self, request: ModelRequest, settings: ProviderSettings, markers: Markers) -> Ordered:
        """Keys before the history list. Default: model, max tokens, instructions, tools."""
        out = Ordered(model=settings.model)
        out[self.MAX_TOKENS_KEY] = settings.max_tokens
        out.update(self.instructions_fields(request.instructions, markers))
        if request.tools:
            last = len(request.tools) - 1
            out[self.TOOLS_KEY] = [
                self.tool(spec, self.check_tool_spec(spec, i), i == last, markers)
                for i, spec in enumerate(request.tools)
            ]
        return out

    def instructions_fields(self, instructions: str, markers: Markers) -> Ordered:
        """Head keys carrying the instructions (none by default)."""
        return Ordered()

    def preamble(
        self, request: ModelRequest, settings: ProviderSettings, markers: Markers
    ) -> list[Any]:
        """Wire items before the first canonical message (Chat's developer message)."""
        return []

    def trail(self, request: ModelRequest, settings: ProviderSettings, markers: Markers) -> Ordered:
        """Our own keys after the history list (options follow them, sorted)."""
        return Ordered()

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        """One tool definition of the head."""
        raise NotImplementedError(f"{self.name}: tool definitions")

    # ------------------------------------------------------------- helpers for handlers

    def check_tool_spec(self, spec: ToolSpec, index: int) -> str:
        if not self.TOOL_NAME_PATTERN.fullmatch(spec.name):
            raise SerializationError(
                f"{self.name}: tool {index} {spec.name!r}: name must be {self.TOOL_NAME_RULE}"
            )
        return spec.name

    def tool_name(self, name: str, at: PartAt) -> str:
        """``name`` if this wire accepts it as a function name, else refuse."""
        if not self.TOOL_NAME_PATTERN.fullmatch(name):
            at.fail(f"tool name {name!r} must be {self.TOOL_NAME_RULE}")
        return name

    def arguments_object(self, part: ToolCallPart, at: PartAt) -> Any:
        """The call's canonical arguments text parsed; it must be a JSON object."""
        try:
            value = canonical.loads(part.arguments)
        except (CanonicalJSONError, ValueError) as err:
            at.fail(f"tool call {part.call_id!r}: arguments are not JSON ({err})")
        if not isinstance(value, dict):
            at.fail(f"tool call {part.call_id!r}: arguments must be a JSON object")
        return value

    def own_opaque(self, part: OpaquePart, at: PartAt) -> Any:
        """The opaque block as received, if this provider produced it; else refuse.

        Fixed rule: opaque data of another provider (or another wire format of the same
        vendor) is never sent, never dropped silently: it is an error.
        """
        if part.provider != self.name:
            at.fail(
                f"opaque part of provider {part.provider!r} cannot be sent to {self.name!r} "
                "(provider-opaque data only goes back to the provider that produced it)"
            )
        try:
            return part.value
        except (CanonicalJSONError, ValueError) as err:
            at.fail(f"opaque part data is not JSON ({err})")

    def data_url(self, part: ImagePart) -> str:
        return f"data:{part.media_type};base64,{part.data}"

    def parts(
        self, message: CanonicalMessage, at: MessageAt, indexes: Iterable[int] | None = None
    ) -> list[Any]:
        """Dispatch each part (or those at ``indexes``) to its ``<part>_part`` handler."""
        out = []
        for i in range(len(message.parts)) if indexes is None else indexes:
            out.append(self.part(message.parts[i], at.part(i)))
        return out

    def part(self, part: Part, at: PartAt) -> Any:
        stem = PART_NAMES[type(part)]
        handler: Callable[[Any, PartAt], Any] | None = getattr(self, f"{stem}_part", None)
        if handler is None:
            at.fail(f"{self.name} cannot express a {stem} part in a {at.message.kind} message")
        return handler(part, at)

    # ----------------------------------------------------------------------- internals

    def _message_items(self, message: CanonicalMessage, index: int, markers: Markers) -> list[Any]:
        at = MessageAt(self.name, message, index, markers)
        if not message.parts:
            at.fail("message has no parts")
        handler: Callable[[CanonicalMessage, MessageAt], list[Any]] | None = getattr(
            self, f"{message.kind}_message", None
        ) or getattr(self, f"{message.role}_message", None)
        if handler is None:
            at.fail(f"{self.name} cannot express a {message.kind} message")
        items = handler(message, at)
        if not items:  # never drop a message
            at.fail("maps to no wire item")
        return items

    def _encode_item(self, message: CanonicalMessage, item: Any) -> bytes:
        try:
            return canonical.dumpb(item)
        except CanonicalJSONError as err:
            for i, part in enumerate(message.parts):
                try:
                    canonical.dumpb(part_to_json(part))
                except CanonicalJSONError as part_err:
                    raise SerializationError(
                        f"{self.name}: message {message.id!r} part {i}: {part_err}"
                    ) from None
            raise SerializationError(f"{self.name}: message {message.id!r}: {err}") from None

    def _settings(self, request: ModelRequest) -> ProviderSettings:
        try:
            return request.settings_for(self.name)
        except KeyError:
            raise SerializationError(
                f"{self.name}: the request has no settings for provider {self.name!r}"
            ) from None

    def _markers(self, request: ModelRequest) -> tuple[Markers, dict[int, Markers]]:
        frame: set[CachePosition] = set()
        per_message: dict[int, set[CachePosition]] = {}
        count = len(request.messages)
        for hint in request.cache_hints:
            if hint.position not in self.CACHE_POSITIONS:
                continue
            if hint.position in (CachePosition.CONTEXT, CachePosition.TAIL):
                index = hint.message_index
                if index is None or not 0 <= index < count:
                    raise SerializationError(
                        f"{self.name}: cache hint {hint.position} points at message "
                        f"{index!r}, outside the {count} messages"
                    )
                if hint.position in self.MESSAGE_MARKERS:
                    per_message.setdefault(index, set()).add(hint.position)
                    continue
            frame.add(hint.position)
        return frozenset(frame), {i: frozenset(p) for i, p in per_message.items()}

    def _prepare(self, request: ModelRequest) -> tuple[Frame, dict[int, Markers]]:
        settings = self._settings(request)
        frame_markers, message_markers = self._markers(request)
        key = (request.instructions, request.tools, settings, request.cache_key, frame_markers)
        frame = self._frames.get(key)
        if frame is None:
            if len(self._frames) > 64:
                self._frames.clear()
            frame = self._build_frame(request, settings, frame_markers)
            self._frames[key] = frame
        return frame, message_markers

    def _build_frame(
        self, request: ModelRequest, settings: ProviderSettings, markers: Markers
    ) -> Frame:
        head = self.head(request, settings, markers)
        preamble = tuple(self.preamble(request, settings, markers))
        trail = Ordered(self.trail(request, settings, markers))
        try:
            options = canonical.loads(settings.options)
        except (CanonicalJSONError, ValueError) as err:
            raise SerializationError(
                f"{self.name}: settings options are not JSON ({err})"
            ) from None
        if not isinstance(options, dict):
            raise SerializationError(f"{self.name}: settings options must be a JSON object")
        reserved = set(head) | set(trail) | {self.MESSAGES_KEY} | self.RESERVED_OPTIONS
        clash = sorted(set(options) & reserved)
        if clash:
            raise SerializationError(
                f"{self.name}: settings options may not set reserved key(s) {clash}"
            )
        for key in sorted(options):
            trail[key] = options[key]
        try:
            head_bytes = canonical.dumpb(head)
            trail_bytes = canonical.dumpb(trail)
            preamble_bytes = b",".join(canonical.dumpb(item) for item in preamble)
        except CanonicalJSONError as err:
            raise SerializationError(
                f"{self.name}: instructions, tools or settings: {err}"
            ) from None
        head_inner = head_bytes[1:-1]
        open_bytes = (
            b"{"
            + head_inner
            + (b"," if head_inner else b"")
            + canonical.dumpb(self.MESSAGES_KEY)
            + b":["
        )
        trail_inner = trail_bytes[1:-1]
        close_bytes = b"]" + (b"," + trail_inner if trail_inner else b"") + b"}"
        return Frame(head, preamble, trail, open_bytes, preamble_bytes, close_bytes)
