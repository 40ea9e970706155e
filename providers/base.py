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
<message items>...], <trail keys>, <top-level options sorted>}``. The head is
``<MODEL_KEY>, <max tokens>, <instructions_fields>, <tools_fields>``; max tokens is a
top-level key, or the first member of the ``CONFIG_KEY`` object that also holds the
options :meth:`Provider.split_options` nests, sorted. Head, preamble and trail form the
*frame*; it depends only on instructions, tools, settings, cache key and the
frame-level cache positions, and is encoded once per distinct frame.

Incremental encoding: each canonical message's wire bytes are cached by
``(message id, digest, cache positions on that message, fragment key, message
variant)`` (the variant: what every message's bytes depend on from the settings,
:meth:`Provider.message_variant`, ``()`` by default);
:meth:`Provider.serialize` joins cached fragments and encodes only messages it has not
seen. The fragment key is ``()`` unless the wire writes into a message something only
an earlier message holds (:meth:`Provider.fragment_key`, :mod:`prefixlock.providers.scan`). The
result is byte-identical to ``canonical.dumpb(provider.wire_body(request))`` (tested).

Alternating roles (:attr:`Provider.MERGE_SAME_ROLE`, Bedrock Converse): a service that
demands alternating roles gets consecutive same-role canonical messages as consecutive
blocks of ONE wire message ``{"role": r, <BLOCKS_KEY>: [blocks...]}``, in canonical
order. Each canonical message still maps (and is cached) on its own, as its encoded
blocks; :meth:`Provider.serialize` only opens and closes a wire message where the role
changes. So the append-only property holds over (role, content block) pairs: a later
call may add blocks to the last wire message, never change or drop an earlier block.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import itertools
import re
import threading
from array import array
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import attrs

from ..core import canonical, wire
from ..core.canonical import Ordered
from ..core.errors import CanonicalJSONError, SerializationError
from ..core.limits import settings_problems
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
from ..core.model import CachePosition, MessageView, ModelRequest, ProviderSettings, ToolSpec
from .frame import BodyFragments, Frame
from .scan import KeyScan
from .transport import Transport

#: Part class -> handler stem (``text`` -> ``text_part``).
PART_NAMES: Mapping[type[Any], str] = {
    TextPart: "text",
    ToolCallPart: "tool_call",
    ToolResultPart: "tool_result",
    OpaquePart: "opaque",
    ImagePart: "image",
}

#: Image media types of OpenAI image inputs, Chat Completions and Responses alike
#: (:meth:`Provider.data_url`). "Image input requirements", "Supported file types":
#: "PNG (.png), JPEG (.jpeg and .jpg), WEBP (.webp), Non-animated GIF (.gif)"
#: (https://platform.openai.com/docs/guides/images-vision); another type is answered
#: 400 "Invalid MIME type. Only image types are supported." (``invalid_image_format``,
#: langgenius/dify#11527). An animated GIF is refused too, but telling it apart means
#: decoding the image: it is not checked here.
OPENAI_IMAGE_TYPES: frozenset[str] = frozenset(
    {"image/png", "image/jpeg", "image/webp", "image/gif"}
)

#: Part class -> its handler's name; message kind / role -> theirs (no string built
#: per part or message).
_PART_HANDLERS: Mapping[type[Any], str] = {cls: f"{stem}_part" for cls, stem in PART_NAMES.items()}
_KIND_HANDLERS: Mapping[str, str] = {kind: f"{kind}_message" for kind in MessageKind}
_ROLE_HANDLERS: Mapping[str, str] = {role: f"{role}_message" for role in Role}

Markers = frozenset[CachePosition]
_NO_MARKERS: Markers = frozenset()
#: One object per set of cache positions (at most 2^5): the fragment caches' keys of
#: every message hold one, and a new frozenset per message per call would stay in them.
_MARKER_SETS: dict[Markers, Markers] = {_NO_MARKERS: _NO_MARKERS}


def _marker_set(positions: set[CachePosition]) -> Markers:
    made = frozenset(positions)
    return _MARKER_SETS.setdefault(made, made)


#: Drop the fragment cache when it grows beyond this many entries (correctness never
#: depends on the cache; this only bounds memory of a long-lived instance).
CACHE_LIMIT = 200_000
#: Keep the fragments of this many conversation epochs' last requests (least recently
#: used dropped first); a dropped one is rebuilt from the fragment cache.
CHAIN_LIMIT = 1024
#: Keep this many frames (instructions, tools, settings and cache key, encoded; least
#: recently used dropped first), unless an instance is given its own
#: :attr:`Provider.frame_limit`.
FRAME_LIMIT = 64


@attrs.frozen
class _Chain:
    """What :meth:`Provider.fragments` made of the last request of one history list:
    the next request of that list takes over the fragments it shares with it.

    ``base`` is only ever appended to while bodies hand out its first items (a
    :class:`~.frame.BodyFragments` keeps its own count), so a call settles its fragments
    into it without copying the history's; a change inside it (a cache position that
    moved far back, a shorter request) starts a new list.
    """

    messages: MessageView
    frame: Frame
    markers: Mapping[int, Markers]
    #: The opening, then message ``i``'s fragment at ``i + 1``; ``settled`` of them
    #: belong to this request.
    base: list[bytes]
    settled: int
    #: Bytes up to the end of each ``base`` item (an ``array``: 8 bytes each, not an int
    #: object and a list slot).
    ends: array[int]
    #: With :attr:`Provider.MERGE_SAME_ROLE`: each message's wire role; else empty.
    roles: list[str]
    #: The fragments of the messages after the settled ones (the last message: its
    #: cache marker may move on the next call), and their roles.
    tail: tuple[bytes, ...]
    tail_roles: tuple[str, ...]
    #: The fragment keys of ``messages`` (None: no :meth:`Provider.fragment_key`), and
    #: the fold's notes after the last of them (None: unknown).
    keys: list[Hashable] | None
    notes: dict[str, Any] | None


@attrs.frozen
class MessageAt:
    """Where a message sits: for handlers and error messages."""

    provider: str
    message: CanonicalMessage
    index: int
    #: Cache positions this provider expresses on this message (see MESSAGE_MARKERS).
    markers: Markers
    #: This message's :meth:`Provider.fragment_key` (``()`` by default): what else its
    #: bytes may depend on. Handlers read earlier messages' data from here only, so the
    #: bytes never depend on anything the fragment cache key does not hold.
    key: Any = ()
    #: This request's :meth:`Provider.message_variant` (``()`` by default): what every
    #: message's bytes depend on from the settings; also part of the fragment-cache key.
    variant: Any = ()

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


#: Hex digits of the SHA-256 that end a tool call id a wire maps (64 bits):
#: :func:`~.anthropic.wire_tool_use_id`, :func:`~.openai_chat.capped_id`.
ID_DIGEST_LENGTH = 16


def id_digest(call_id: str) -> str:
    """The first :data:`ID_DIGEST_LENGTH` hex digits of ``call_id``'s SHA-256 (UTF-8):
    what a mapped tool call id ends in, so that distinct ids stay distinct."""
    # surrogatepass: a lone surrogate (refused elsewhere) must not crash the digest
    data = call_id.encode("utf-8", "surrogatepass")
    return canonical.sha256_hex(data).removeprefix("sha256:")[:ID_DIGEST_LENGTH]


def _fresh(value: Any) -> Any:
    """A copy of a parsed JSON value (dicts and lists; the rest is immutable)."""
    kind = type(value)
    if kind is dict:
        return {key: _fresh(item) for key, item in value.items()}
    if kind is list:
        return [_fresh(item) for item in value]
    return value


#: The last message :func:`_encoded_texts` was asked about, and its answer: admission
#: asks once per configured provider about the same message.
_last_texts: tuple[CanonicalMessage | None, frozenset[str]] = (None, frozenset())


def _encoded_texts(message: CanonicalMessage) -> frozenset[str]:
    """The non-ASCII texts and outputs of a message that
    :meth:`CanonicalMessage.create` encoded (``parts_json`` set): known to be UTF-8,
    so a wire item that carries them needs no second check of them."""
    global _last_texts
    last, texts_of_last = _last_texts
    if last is message:
        return texts_of_last
    if message.parts_json is None:
        return frozenset()
    texts = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            text = part.output
        elif isinstance(part, TextPart):
            text = part.text
        else:
            continue
        if type(text) is str and not text.isascii():
            texts.append(text)
    known = frozenset(texts)
    _last_texts = (message, known)  # one tuple: a reader sees a pair, never a mix
    return known


def _arguments_value(text: str) -> Any:
    """``canonical.loads(text)``: a value of its own, the parse shared."""
    if type(text) is not str:
        return canonical.loads(text)  # the parser's own refusal of a non-text
    try:
        return _fresh(canonical.parsed(text))
    except RecursionError:  # deeper than a copy can go: parse afresh, as before
        return canonical.loads(text)


@functools.cache
def code_fingerprint() -> str:
    """The SHA-256 of the source of every module that decides a fragment's bytes: the
    provider modules (this package) and the core modules they encode with. It joins each
    stored template's basis, so a template written by another prefixlock (another
    mapping, another encoder) is never used: those messages are encoded afresh."""
    here = Path(__file__).parent  # not resolved: compiler/providers may be a link
    core = Path(canonical.__file__).parent
    files = sorted(here.rglob("*.py")) + [
        core / name for name in ("canonical.py", "messages.py", "model.py", "wire.py")
    ]
    hasher = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        hasher.update(b"%d:" % len(data))
        hasher.update(data)
    return hasher.hexdigest()


class Provider(Transport):
    """One wire format. Subclasses set the flags below and define handlers.

    Public API: :attr:`name`, :meth:`serialize`, :meth:`body`, :meth:`wire_body`,
    :meth:`strip_cache_markers`, :meth:`check_message`, :attr:`MESSAGES_KEY`; from
    :class:`~.transport.Transport`:
    :meth:`http_request`, :meth:`parse_response`, :meth:`stream_reader`,
    :meth:`is_retryable`.
    """

    #: Registry name (``openai-chat``); also the ``OpaquePart.provider`` it accepts.
    name: ClassVar[str]

    #: Key of the history list in the body (``messages``, ``input``, ``contents``).
    MESSAGES_KEY: ClassVar[str] = "messages"
    #: Key of the model in the head; None when the model travels in the URL instead.
    MODEL_KEY: ClassVar[str | None] = "model"
    #: Key of the max-tokens setting (in the head, or first in the ``CONFIG_KEY`` object).
    MAX_TOKENS_KEY: ClassVar[str] = "max_tokens"
    #: Head key of an object holding max tokens and the options :meth:`split_options`
    #: nests (Gemini's ``generationConfig``); None: max tokens is a head key, no nesting.
    CONFIG_KEY: ClassVar[str | None] = None
    #: Key of the tool list in the default :meth:`tools_fields`.
    TOOLS_KEY: ClassVar[str] = "tools"
    #: Members of :meth:`body` that travel in the URL, not in the POSTed JSON
    #: (:meth:`wire_body` and :meth:`serialize` leave them out).
    URI_MEMBERS: ClassVar[tuple[str, ...]] = ()
    #: Tool / function names this wire accepts, and how to say so in an error.
    TOOL_NAME_PATTERN: ClassVar[re.Pattern[str]] = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    TOOL_NAME_RULE: ClassVar[str] = "1-64 characters of a-z, A-Z, 0-9, '_' and '-'"
    #: Cache positions expressed *inside* a message (its bytes depend on them); all
    #: other positions are frame-level (head / trail).
    MESSAGE_MARKERS: ClassVar[Markers] = _NO_MARKERS
    #: Cache positions this provider expresses at all; hints for others are ignored.
    CACHE_POSITIONS: ClassVar[Markers] = _NO_MARKERS
    #: Top-level option keys refused even when this call does not emit them (aliases,
    #: keys the frame emits only sometimes).
    RESERVED_OPTIONS: ClassVar[frozenset[str]] = frozenset()
    #: The service demands alternating roles: each canonical message maps to exactly one
    #: item ``{"role": r, <BLOCKS_KEY>: [...]}`` and consecutive items of one role are
    #: sent as one wire message holding their blocks in canonical order (never reordered).
    MERGE_SAME_ROLE: ClassVar[bool] = False
    #: Key of a wire message's block list (with :attr:`MERGE_SAME_ROLE`).
    BLOCKS_KEY: ClassVar[str] = "content"
    #: The role the first wire message must have (None: any); a request whose first
    #: message maps to another role is refused.
    FIRST_ROLE: ClassVar[str | None] = None
    #: The service's refusal, quoted, of a request whose history holds tool calls or
    #: results while it defines no tools (None: no such documented rule). Admission
    #: refuses such a message under a root without tools (:meth:`check_message`).
    TOOL_BLOCKS_NEED_TOOLS: ClassVar[str | None] = None

    def __init__(self) -> None:
        #: Per message (and the separator before it): its fragment.
        self._fragments: dict[tuple[str, str, Markers, Hashable, Hashable, bytes], bytes] = {}
        #: With :attr:`MERGE_SAME_ROLE`: per message (and what goes before it), its wire
        #: role and fragment.
        self._blocks: dict[
            tuple[str, str, Markers, Hashable, Hashable, Hashable], tuple[str, bytes]
        ] = {}
        self._runs: dict[str, tuple[bytes, bytes]] = {}
        #: Per history list (:meth:`MessageView.lineage`), the fragments of its last request.
        self._chains: dict[int, _Chain] = {}
        self._lock = threading.Lock()
        self._frames: dict[tuple[Any, ...], Frame] = {}  # least recently used first
        self._recent: Frame | None = None  # the frame of the last request
        #: How many frames this instance keeps (:data:`FRAME_LIMIT`); one serving a single
        #: conversation needs only those of its modes.
        self.frame_limit = FRAME_LIMIT
        #: Only a wire that defines :meth:`fragment_key` pays for the key scan.
        self._keyed = type(self).fragment_key is not Provider.fragment_key
        self._scan = KeyScan()
        #: :meth:`check_message`'s own scan: admission checks each new message after
        #: the history, so its keys extend the previous check's (no rescan per call).
        self._check_scan = KeyScan()
        #: The history list of the request being serialized (:meth:`MessageView.lineage`).
        self._lineage: int | None = None

    # ------------------------------------------------------------------ public API

    def serialize(self, request: ModelRequest) -> bytes:
        """The exact POST body: canonical UTF-8 JSON in this wire's key order.

        Equal to ``canonical.dumpb(self.wire_body(request))`` and to
        ``b"".join(self.fragments(request))``; only new messages are encoded.
        """
        return self.fragments(request).join()

    def fragments(self, request: ModelRequest) -> BodyFragments:
        """The exact POST body as byte fragments (:class:`~.frame.BodyFragments`): the
        frame's opening, one fragment per canonical message, the closing.

        ``b"".join(self.fragments(r)) == self.serialize(r)``. Each message's fragment is
        encoded once and cached; when ``request.messages`` extends the messages of this
        instance's previous request of the same conversation epoch (a
        :class:`~prefixlock.core.model.MessageView` of the same history list, known in
        O(1)), the shared fragments are taken over as they are and only the new
        messages, and those whose cache positions moved, are visited: the work per call
        follows what is new, not the length of the history.
        """
        with self._lock:  # a chain's lists grow in place: one call at a time
            return self._fragments_of(request)

    def _fragments_of(self, request: ModelRequest) -> BodyFragments:
        frame, message_markers = self._frame_and_markers(request)
        messages = request.messages
        count = len(messages)
        view = messages if isinstance(messages, MessageView) else None
        # Stored templates serve only the list and place they were written for.
        self._lineage = view.lineage() if view is not None else None
        chain = self._chains.get(view.lineage()) if view is not None else None
        shared = 0
        keys: list[Hashable] | None = None
        notes: dict[str, Any] | None = None
        if chain is not None:
            shared = chain.messages.shared_with(messages)
            if chain.keys is not None and chain.notes is not None and shared == len(chain.keys):
                # This lineage's own list and notes: extended in place (a copy of the
                # notes per call would grow with the history). The fold only adds what
                # later messages read (Gemini: call id -> name, ids unique per
                # conversation), so a key computed before is never changed by it; a fold
                # that fails part-way leaves keys longer than the messages, which the
                # check above refuses next time.
                keys, notes = chain.keys, chain.notes
                keys.extend(self.fragment_key(messages[i], notes) for i in range(shared, count))
            if chain.frame is not frame:
                shared = 0
        if self._keyed and keys is None:
            self._scan, scanned = self._scan.keys_for(messages, self.fragment_key)
            keys = list(scanned)
            # A copy: a scan never changes, the chain's notes grow in place.
            notes = dict(self._scan.notes) if len(self._scan.messages) == count else None
        merge = self.MERGE_SAME_ROLE
        fragment_at = self._merged_fragment if merge else self._plain_fragment

        def fragment(index: int, last_role: str | None) -> tuple[str, bytes]:
            markers = message_markers.get(index, _NO_MARKERS)
            extra = () if keys is None else keys[index]
            return fragment_at(messages[index], index, markers, extra, frame, last_role)

        # Message i's fragment is base[i + 1] for i < in_base, else pending[i - in_base].
        pending: list[bytes] = []
        pending_roles: list[str] = []
        if shared:
            assert chain is not None
            base, ends, roles = chain.base, chain.ends, chain.roles
            in_base = chain.settled - 1
            moved = [
                index
                for index in chain.markers.keys() | message_markers.keys()
                if index < shared and chain.markers.get(index) != message_markers.get(index)
            ]
            first = min([shared, *(i for i in moved if i >= in_base)])
            inner = sorted(i for i in moved if i < in_base)
            if inner or first < in_base or len(base) != chain.settled:
                # A cache position moved inside the settled fragments, or this request
                # is shorter than the settled ones: a new list (rare: a context change,
                # a retry).
                in_base = min(in_base, first)
                base, ends, roles = base[: in_base + 1], ends[: in_base + 1], roles[:in_base]
                for index in inner:
                    if index < in_base:
                        last = roles[index - 1] if merge and index else None
                        base[index + 1] = fragment(index, last)[1]
                if inner:
                    ends = array("q", itertools.accumulate(map(len, base)))
            kept = first - in_base
            pending.extend(chain.tail[:kept])
            pending_roles.extend(chain.tail_roles[:kept])
        else:
            base, ends, roles = [frame.opening], array("q", [len(frame.opening)]), []
            in_base = 0
            first = 0
        if len(self._fragments) > CACHE_LIMIT:
            self._fragments.clear()
        if len(self._blocks) > CACHE_LIMIT:
            self._blocks.clear()
        last_role = (
            pending_roles[-1]
            if pending_roles
            else roles[in_base - 1]
            if merge and in_base
            else None
        )
        for index in range(first, count):
            role, piece = fragment(index, last_role)
            pending.append(piece)
            if merge:
                pending_roles.append(role)
                last_role = role
        # Settle all but the last message into the base list: its cache marker is the
        # one that moves on the next call.
        settle = max(len(pending) - 1, 0)
        total = ends[-1]
        for piece in pending[:settle]:
            base.append(piece)
            total += len(piece)
            ends.append(total)
        roles.extend(pending_roles[:settle])
        tail = tuple(pending[settle:])
        tail_roles = tuple(pending_roles[settle:])
        close = frame.close_bytes
        if merge and last_role is not None:
            close = self._run_bytes(last_role)[1] + close  # the last wire message's end
        settled = in_base + 1 + settle
        if view is not None:
            chains = self._chains
            lineage = view.lineage()
            chains.pop(lineage, None)
            if len(chains) >= CHAIN_LIMIT:
                del chains[next(iter(chains))]  # the least recently used
            chains[lineage] = _Chain(
                view,
                frame,
                message_markers,
                base,
                settled,
                ends,
                roles,
                tail,
                tail_roles,
                keys,
                notes,
            )
        size = ends[settled - 1] + sum(map(len, tail)) + len(close)
        return BodyFragments(base, settled, tail, close, size)

    def _plain_fragment(
        self,
        message: CanonicalMessage,
        index: int,
        markers: Markers,
        extra: Hashable,
        frame: Frame,
        last_role: str | None,
    ) -> tuple[str, bytes]:
        """A canonical message's fragment: its wire items after the separator (none
        before the first item of the history list). Cached; the role is not used."""
        separator = b"," if index or frame.has_preamble else b""
        key = (message.id, message.digest, markers, extra, frame.variant, separator)
        cached = self._fragments.get(key)
        if cached is None and not markers and message.wire is not None:
            stored = message.wire.fragment(self.name, frame.basis, self._lineage, index)
            if stored is not None:
                cached = stored[1]
                self._fragments[key] = cached
        if cached is None:
            items = self._message_items(message, index, markers, extra, frame.variant)
            cached = separator + b",".join(self._encode_item(message, item) for item in items)
            self._fragments[key] = cached
        return "", cached

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The same body as a dict (``Ordered`` objects), plus the :attr:`URI_MEMBERS` a
        subclass adds. Built fresh, without the fragment cache."""
        frame, message_markers, keys = self._prepare(request)
        # Copies: the frame is cached and shared; a caller may mutate what we return.
        history: list[Any] = copy.deepcopy(list(frame.preamble))
        for index, message in enumerate(request.messages):
            extra = () if keys is None else keys[index]
            markers = message_markers.get(index, _NO_MARKERS)
            items = self._message_items(message, index, markers, extra, frame.variant)
            for item in items:
                self._encode_item(message, item)  # same refusals as serialize()
            if self.MERGE_SAME_ROLE:
                at = MessageAt(self.name, message, index, markers, extra, frame.variant)
                role, blocks = self._role_blocks(items, at)
                if index == 0:
                    self._check_first_role(role, message)
                last = history[-1] if history else None
                if last is not None and last["role"] == role:
                    last[self.BLOCKS_KEY].extend(blocks)
                else:
                    history.append(Ordered([("role", role), (self.BLOCKS_KEY, list(blocks))]))
            else:
                history.extend(items)
        out = copy.deepcopy(frame.head)
        out[self.MESSAGES_KEY] = history
        out.update(copy.deepcopy(frame.trail))
        return out

    def wire_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body exactly as POSTed: :meth:`body` without the :attr:`URI_MEMBERS`;
        ``canonical.dumpb(wire_body(r)) == serialize(r)``."""
        out = self.body(request)
        for member in self.URI_MEMBERS:
            out.pop(member, None)
        return out

    def strip_cache_markers(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A copy of ``body`` without this provider's cache markers, and nothing else
        changed. The prefix verifier compares bodies through it. Default: no markers."""
        out = copy.deepcopy(body)
        return out if isinstance(out, dict) else dict(out)

    def check_message(
        self,
        message: CanonicalMessage,
        earlier: Sequence[CanonicalMessage] = (),
        *,
        notes: dict[str, Any] | None = None,
        tools: bool = True,
        model: str | None = None,
    ) -> None:
        """Raise :class:`SerializationError` if this wire would refuse ``message`` (the
        messages before it in its history are ``earlier``; ``tools``: whether the
        requests it goes into define tools); return None otherwise.

        The runtime asks every configured provider before it writes a record ("nothing
        is persisted that some configured provider would refuse"). Default: map the
        message alone and run the encoder's checks on its items (no bytes are made),
        through the same handlers and refusals as :meth:`serialize` (no cache markers,
        default variant). Opaque parts of another
        provider are left out: they are only ever sent back to the provider that made
        them (:meth:`own_opaque`), so a history holding them is bound to that provider.

        ``model``: the model the requests go to (the root's settings), for a wire whose
        refusals depend on it (:meth:`model_variant`); None: the default variant.

        ``notes``: for a caller that keeps the :meth:`fragment_key` fold's notes after
        ``earlier`` itself (admission, one stored message after another): the key comes
        from them instead of a scan of ``earlier`` (only its length is read), and the
        message is folded into them, as stored.
        """
        kept = tuple(
            p for p in message.parts if not (isinstance(p, OpaquePart) and p.provider != self.name)
        )
        stored = message
        if len(kept) != len(message.parts):
            message = CanonicalMessage.create(message.id, message.kind, message.role, kept)
        key: Hashable = ()
        if notes is not None:
            if self._keyed and kept:
                key = self.fragment_key(message, notes)
            if self._keyed and message is not stored:
                self.fragment_key(stored, notes)  # later messages see the stored one
        if not kept:
            return
        if not tools and self.TOOL_BLOCKS_NEED_TOOLS is not None:
            for index, part in enumerate(kept):
                if isinstance(part, ToolCallPart | ToolResultPart):
                    what = "call" if isinstance(part, ToolCallPart) else "result"
                    at = MessageAt(self.name, message, len(earlier), _NO_MARKERS)
                    at.part(index).fail(
                        f"a tool {what} cannot be sent under a root that defines no tools "
                        f"(the service: {self.TOOL_BLOCKS_NEED_TOOLS!r})"
                    )
        if notes is None and self._keyed:
            # The same fold as a scan from scratch over earlier + message, extending the
            # previous check's scan where earlier extends its messages.
            self._check_scan, keys = self._check_scan.keys_for(
                (*earlier, message), self.fragment_key
            )
            key = keys[-1]
        index = len(earlier)
        by_model = None if model is None else self.model_variant(model)
        variant: Any = () if by_model is None else ((), by_model)
        items = self._message_items(message, index, _NO_MARKERS, key, variant)
        known = _encoded_texts(message)
        for item in items:
            # The encoder's refusals without its work; the encoder names a refusal.
            try:
                canonical.check_encodable(item, known=known)
            except CanonicalJSONError:
                self._encode_item(message, item)
                raise
        if self.MERGE_SAME_ROLE:
            at = MessageAt(self.name, message, index, _NO_MARKERS, key, variant)
            self._role_blocks(items, at)

    # ------------------------------------------------------------ frame (overridable)

    def head(
        self,
        request: ModelRequest,
        settings: ProviderSettings,
        markers: Markers,
        nested: Mapping[str, Any],
    ) -> Ordered:
        """Keys before the history list: the model (``MODEL_KEY``), max tokens (alone, or
        in the ``CONFIG_KEY`` object followed by the ``nested`` options, sorted), then
        :meth:`instructions_fields` and :meth:`tools_fields`."""
        out = Ordered()
        if self.MODEL_KEY is not None:
            out[self.MODEL_KEY] = settings.model
        if self.CONFIG_KEY is None:
            out[self.MAX_TOKENS_KEY] = settings.max_tokens
        else:
            config = Ordered()
            config[self.MAX_TOKENS_KEY] = settings.max_tokens
            for key in sorted(nested):
                config[key] = nested[key]
            out[self.CONFIG_KEY] = config
        out.update(self.instructions_fields(request.instructions, markers))
        if request.tools:
            last = len(request.tools) - 1
            tools = [
                self.tool(spec, self.check_tool_spec(spec, i), i == last, markers)
                for i, spec in enumerate(request.tools)
            ]
            out.update(self.tools_fields(tools, markers))
        return out

    def split_options(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The settings options as ``(nested, top_level)``. Nested ones go into the
        ``CONFIG_KEY`` object after max tokens; top-level ones after the trail. Each
        part is sorted on the wire. Default: every option is top-level."""
        return {}, options

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

    def tools_fields(self, tools: list[Any], markers: Markers) -> Ordered:
        """Head keys carrying the (non-empty) list of :meth:`tool` definitions."""
        out = Ordered()
        out[self.TOOLS_KEY] = tools
        return out

    # ------------------------------------------------------------ messages (overridable)

    def place_markers(
        self,
        request: ModelRequest,
        settings: ProviderSettings,
        frame: Markers,
        per_message: dict[int, Markers],
    ) -> tuple[Markers, dict[int, Markers]]:
        """The cache positions this wire marks: the frame's and those per message index,
        from the request's hints (given). A wire whose settings choose another placement
        (:mod:`prefixlock.providers.cache_ttl`) changes them here, by a fixed rule.
        Default: the hints' places."""
        return frame, per_message

    def frame_variant(self, options: Mapping[str, Any], markers: Markers) -> Hashable:
        """The message variant of a frame with these cache positions. Default:
        :meth:`message_variant`. What it adds to :meth:`message_variant` may change only
        the bytes of messages that carry a cache marker: a stored wire template
        (:mod:`prefixlock.core.wire`), made for an unmarked message, is used under any
        frame variant of the same message variant."""
        return self.message_variant(options)

    def message_variant(self, options: Mapping[str, Any]) -> Hashable:
        """What every message's bytes depend on from the settings options (parsed), e.g.
        Responses' ``store`` policy. It joins each message's fragment-cache key and
        reaches the handlers as :attr:`MessageAt.variant`. Default: ``()``."""
        return ()

    def model_variant(self, model: str) -> Hashable:
        """What every message's bytes depend on from the settings' model, or None (the
        default: nothing). Otherwise the frame's variant is ``(frame_variant,
        model_variant)``, so it joins each message's fragment-cache key and reaches the
        handlers as the last item of :attr:`MessageAt.variant` (a stored template's basis
        holds the model already: the settings). Gemini: whether the model wants every
        step's first call signed and whether it takes images inside a
        ``functionResponse``. Admission checks messages under the default variant ``()``."""
        return None

    def fragment_key(self, message: CanonicalMessage, earlier: dict[str, Any]) -> Hashable:
        """What ``message``'s bytes depend on besides its own content and cache markers:
        for a wire that writes into a message something only an earlier message holds.

        ``earlier`` holds what this hook noted about the request's messages before this
        one (empty at the first); note there what later messages will need from this
        one (set keys; never mutate a value). The key joins the message's fragment-cache
        key and reaches its handlers as :attr:`MessageAt.key`: handlers take what they
        need of earlier messages from it, never from the messages themselves.

        It must depend only on ``message`` and ``earlier``: it runs once per message of
        a history, in order, and a request whose messages extend an earlier request's
        reuses that request's keys (:class:`~prefixlock.providers.scan.KeyScan`). Not overridden
        (the default): every key is ``()`` and nothing is scanned.
        """
        return ()

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
        """The call's canonical arguments text parsed; it must be a JSON object. A fresh
        value on every call (the caller may keep or change it), parsed once for all the
        providers that map the same call (admission asks each of them)."""
        try:
            value = _arguments_value(part.arguments)
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

    def image_media_type(self, part: ImagePart, at: PartAt, allowed: frozenset[str]) -> str:
        """``part.media_type`` if it is one of ``allowed``, the image types this wire's
        service documents (each wire names its own, with its source); else refused, in
        Anthropic's words. The SDK types take any string here; the services refuse
        other types. Checked before the type goes into a ``data:`` URL or a
        ``mimeType``: only an exact allowed type gets there, never a malformed one
        (``image/png;base64,AAAA`` once made a second ``;base64,`` in the URL)."""
        if part.media_type not in allowed:
            at.fail(
                f"{self.name} accepts image media types {sorted(allowed)}, not {part.media_type!r}"
            )
        return part.media_type

    def data_url(self, part: ImagePart, at: PartAt) -> str:
        """The ``data:`` URL of an OpenAI image input (Chat ``image_url.url``, Responses
        ``input_image.image_url``, the only wires that send data URLs), its media type
        one of :data:`OPENAI_IMAGE_TYPES`."""
        media_type = self.image_media_type(part, at, OPENAI_IMAGE_TYPES)
        return f"data:{media_type};base64,{part.data}"

    def parts(
        self, message: CanonicalMessage, at: MessageAt, indexes: Iterable[int] | None = None
    ) -> list[Any]:
        """Dispatch each part (or those at ``indexes``) to its ``<part>_part`` handler."""
        out = []
        for i in range(len(message.parts)) if indexes is None else indexes:
            out.append(self.part(message.parts[i], at.part(i)))
        return out

    def part(self, part: Part, at: PartAt) -> Any:
        handler: Callable[[Any, PartAt], Any] | None = getattr(
            self, _PART_HANDLERS[type(part)], None
        )
        if handler is None:
            stem = PART_NAMES[type(part)]
            at.fail(f"{self.name} cannot express a {stem} part in a {at.message.kind} message")
        return handler(part, at)

    # ----------------------------------------------------------------------- internals

    def _message_items(
        self, message: CanonicalMessage, index: int, markers: Markers, key: Any, variant: Any
    ) -> list[Any]:
        at = MessageAt(self.name, message, index, markers, key, variant)
        if not message.parts:
            at.fail("message has no parts")
        kind, role = message.kind, message.role
        handler: Callable[[CanonicalMessage, MessageAt], list[Any]] | None = getattr(
            self, _KIND_HANDLERS.get(kind) or f"{kind}_message", None
        ) or getattr(self, _ROLE_HANDLERS.get(role) or f"{role}_message", None)
        if handler is None:
            at.fail(f"{self.name} cannot express a {message.kind} message")
        items = handler(message, at)
        if not items:  # never drop a message
            at.fail("maps to no wire item")
        return items

    def _role_blocks(self, items: list[Any], at: MessageAt) -> tuple[str, list[Any]]:
        """With :attr:`MERGE_SAME_ROLE`: the role and blocks of a message's one wire item
        (``{"role": r, <BLOCKS_KEY>: [...]}``, in that key order)."""
        if len(items) != 1:
            raise TypeError(f"{self.name}: MERGE_SAME_ROLE needs one wire item per message")
        item = items[0]
        if not isinstance(item, Mapping) or list(item) != ["role", self.BLOCKS_KEY]:
            raise TypeError(
                f"{self.name}: MERGE_SAME_ROLE needs items {{'role', {self.BLOCKS_KEY!r}}}"
            )
        role, blocks = item["role"], item[self.BLOCKS_KEY]
        if not blocks:
            at.fail("maps to no content block")
        return str(role), list(blocks)

    def _check_first_role(self, role: str, message: CanonicalMessage) -> None:
        if self.FIRST_ROLE is not None and role != self.FIRST_ROLE:
            raise SerializationError(
                f"{self.name}: message {message.id!r}: the first message must have role "
                f"{self.FIRST_ROLE!r}, not {role!r} (kind {message.kind})"
            )

    def _merged_fragment(
        self,
        message: CanonicalMessage,
        index: int,
        markers: Markers,
        extra: Hashable,
        frame: Frame,
        last_role: str | None,
    ) -> tuple[str, bytes]:
        """With :attr:`MERGE_SAME_ROLE`: a canonical message's wire role and fragment:
        its encoded blocks, after a ``,`` when the previous message has the same role
        (one wire message holds both), else after the previous wire message's end and
        the opening of a new one. Cached like a fragment, with the previous role."""
        cache = self._blocks
        lead: Hashable = last_role if index else frame.has_preamble
        key = (message.id, message.digest, markers, extra, frame.variant, lead)
        cached = cache.get(key)
        if cached is None and not markers and message.wire is not None:
            cached = message.wire.fragment(self.name, frame.basis, self._lineage, index)
            if cached is not None:
                cache[key] = cached
        if cached is None:
            items = self._message_items(message, index, markers, extra, frame.variant)
            at = MessageAt(self.name, message, index, markers, extra, frame.variant)
            role, blocks = self._role_blocks(items, at)
            if index == 0:
                self._check_first_role(role, message)
            encoded = b",".join(self._encode_item(message, block) for block in blocks)
            if index and last_role == role:
                fragment = b"," + encoded
            else:
                opening = self._run_bytes(role)[0]
                if index:
                    assert last_role is not None
                    before = self._run_bytes(last_role)[1] + b","
                else:
                    before = b"," if frame.has_preamble else b""
                fragment = before + opening + encoded
            cached = (role, fragment)
            cache[key] = cached
        return cached

    def _run_bytes(self, role: str) -> tuple[bytes, bytes]:
        """With :attr:`MERGE_SAME_ROLE`: the bytes that open a wire message of ``role``
        before its blocks, and those that end it (``]}``); encoded once per role."""
        runs = self._runs.get(role)
        if runs is None:
            empty = canonical.dumpb(Ordered([("role", role), (self.BLOCKS_KEY, [])]))
            runs = (empty[:-2], empty[-2:])
            self._runs[role] = runs
        return runs

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
        return _marker_set(frame), {i: _marker_set(p) for i, p in per_message.items()}

    def _frame_and_markers(self, request: ModelRequest) -> tuple[Frame, dict[int, Markers]]:
        """The frame and the cache positions per message index."""
        settings = self._settings(request)
        frame_markers, message_markers = self.place_markers(
            request, settings, *self._markers(request)
        )
        key = (request.instructions, request.tools, settings, request.cache_key, frame_markers)
        frames = self._frames
        frame = frames.get(key)
        if frame is None:
            frame = self._build_frame(request, settings, frame_markers)
            # Tolerant of another thread (body() runs without the lock): list() of a
            # dict is one step, and pop with a default never raises.
            for old in list(frames)[: max(len(frames) - self.frame_limit + 1, 0)]:
                frames.pop(old, None)
            frames[key] = frame
        elif frame is not self._recent:  # now the most recently used
            frames.pop(key, None)
            frames[key] = frame
        self._recent = frame
        return frame, message_markers

    def _prepare(
        self, request: ModelRequest
    ) -> tuple[Frame, dict[int, Markers], tuple[Hashable, ...] | None]:
        """The frame, the cache positions per message index, and the fragment keys (None
        when this wire has no :meth:`fragment_key`)."""
        frame, message_markers = self._frame_and_markers(request)
        if not self._keyed:
            return frame, message_markers, None
        self._scan, keys = self._scan.keys_for(request.messages, self.fragment_key)
        return frame, message_markers, keys

    def _options(self, settings: ProviderSettings) -> dict[str, Any]:
        try:
            options = canonical.loads(settings.options)
        except (CanonicalJSONError, ValueError) as err:
            raise SerializationError(
                f"{self.name}: settings options are not JSON ({err})"
            ) from None
        if not isinstance(options, dict):
            raise SerializationError(f"{self.name}: settings options must be a JSON object")
        return options

    def _build_frame(
        self, request: ModelRequest, settings: ProviderSettings, markers: Markers
    ) -> Frame:
        options = self._options(settings)
        # What the service refuses in the settings as a whole (core.limits; the build
        # reports the same with the option's file and line): the first such problem.
        problems = settings_problems(self.name, settings.model, options)
        if problems:
            field, why = problems[0]
            raise SerializationError(f"{self.name}: settings {'.'.join(field)}: {why}")
        variant = self.frame_variant(options, markers)
        by_model = self.model_variant(settings.model)
        if by_model is not None:  # only a wire whose message bytes depend on the model
            variant = (variant, by_model)
        nested, top_level = self.split_options(options)
        if nested and self.CONFIG_KEY is None:
            raise TypeError(f"{self.name}: split_options nests options but CONFIG_KEY is None")
        if self.MAX_TOKENS_KEY in nested:
            raise SerializationError(
                f"{self.name}: settings options may not set reserved key(s) "
                f"[{self.MAX_TOKENS_KEY!r}] (max tokens come from the settings)"
            )
        head = self.head(request, settings, markers, nested)
        preamble = tuple(self.preamble(request, settings, markers))
        trail = Ordered(self.trail(request, settings, markers))
        reserved = set(head) | set(trail) | {self.MESSAGES_KEY} | self.RESERVED_OPTIONS
        clash = sorted(set(top_level) & reserved)
        if clash:
            raise SerializationError(
                f"{self.name}: settings options may not set reserved key(s) {clash}"
            )
        for key in sorted(top_level):
            trail[key] = top_level[key]
        frame = Frame.encode(self.name, self.MESSAGES_KEY, head, preamble, trail)
        # What an unmarked message's bytes depend on besides itself and its place: the
        # code, the settings, the message variant (not the frame's: what frame_variant
        # adds only reaches messages with a cache marker, which are never taken from a
        # template; a value of tuples, strings, numbers and None, whose repr is the same
        # in every process: another kind of value only makes the stored templates
        # unusable, never wrong) and the preamble.
        stored_basis = wire.basis(
            code_fingerprint(),
            self.name,
            canonical.dumps(settings.to_json()),
            repr(self.message_variant(options)) + ("" if by_model is None else repr(by_model)),
            "preamble" if frame.has_preamble else "",
        )
        return attrs.evolve(frame, variant=variant, basis=stored_basis)

    def settled_fragments(
        self, request: ModelRequest, first: int
    ) -> tuple[str, list[tuple[str, bytes]]]:
        """The basis of ``request``'s frame and, for each message from index ``first``
        on, its wire role (``""`` unless roles merge) and fragment as a later request of
        the same history holds it once no cache marker sits on it: what the writer
        stores (:mod:`prefixlock.core.wire`). Raises :class:`SerializationError` where
        :meth:`serialize` would."""
        with self._lock:
            self._lineage = None  # nothing stored is read here
            frame, _ = self._frame_and_markers(request)
            messages = request.messages
            keys: Sequence[Hashable] | None = None
            if self._keyed:
                self._scan, keys = self._scan.keys_for(messages, self.fragment_key)
            merge = self.MERGE_SAME_ROLE
            last_role: str | None = None
            if merge and first:
                before = first - 1
                items = self._message_items(
                    messages[before],
                    before,
                    _NO_MARKERS,
                    () if keys is None else keys[before],
                    frame.variant,
                )
                at = MessageAt(self.name, messages[before], before, _NO_MARKERS)
                last_role = self._role_blocks(items, at)[0]
            fragment_at = self._merged_fragment if merge else self._plain_fragment
            out: list[tuple[str, bytes]] = []
            for index in range(first, len(messages)):
                extra = () if keys is None else keys[index]
                role, piece = fragment_at(
                    messages[index], index, _NO_MARKERS, extra, frame, last_role
                )
                out.append((role if merge else "", piece))
                last_role = role
            return frame.basis, out


def signature_only(part: Part) -> bool:
    """A blank text part that only carries a Gemini ``thought_signature``: Gemini's data
    (the signature may arrive on an empty text part, "Thought signatures",
    ai.google.dev/gemini-api/docs/thought-signatures), sent back to Gemini as received;
    wires that refuse blank text (Anthropic, Bedrock) leave it out, as they leave out
    every thought signature."""
    return (
        isinstance(part, TextPart) and part.thought_signature is not None and not part.text.strip()
    )


def sent_indexes(message: CanonicalMessage) -> list[int]:
    """The indexes of ``message``'s parts but the :func:`signature_only` ones."""
    return [i for i, part in enumerate(message.parts) if not signature_only(part)]
