"""What every response reader shares: the :class:`Reader` interface, stream readers over
SSE or AWS event-stream frames, and the helpers that build a
:class:`~prefixlock.core.output.ModelOutput`.

A reader maps the provider's response to parts in model order and never merges or
reorders them: opaque blocks stay whole (canonical JSON of the block as received), each
text block stays its own part, each tool call keeps its id and argument string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ...core import canonical
from ...core.admit import drop_blank_texts, tool_call_part
from ...core.errors import (
    CanonicalJSONError,
    HistoryError,
    ResponseError,
    ResponseLimitError,
    SerializationError,
)
from ...core.limits import MAX_RESPONSE_BYTES
from ...core.messages import (
    CanonicalMessage,
    MessageKind,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ToolCallPart,
)
from ...core.output import ModelOutput, Usage
from .eventstream import Frame, FrameDecoder
from .sse import Event, SSEDecoder

__all__ = [
    "EventStreamReader",
    "Listener",
    "Reader",
    "SSEStreamReader",
    "StreamReader",
    "admit",
    "base64_text",
    "count",
    "load_object",
    "member",
    "one_output",
    "only",
    "opaque",
    "pick",
    "text",
    "tool_call",
    "usage",
]

#: HTTP statuses a retry may cure: timeout, conflict, rate limit, any server error.
#: (The official OpenAI and Anthropic SDKs retry exactly these: ``_should_retry``.)
RETRY_STATUSES = frozenset({408, 409, 429})


#: A stream's events as they arrive: the SSE event type (or the event-stream frame's
#: ``:event-type``, ``:exception-type``) and its data.
Listener = Callable[[str, bytes], None]


class StreamReader:
    """Feed a streamed response in chunks of any size; :meth:`result` once it ended.

    A stream is held to :data:`~prefixlock.core.limits.MAX_RESPONSE_BYTES` in all
    (``max_bytes``): the chunk that passes it is refused with a
    :class:`~prefixlock.core.errors.ResponseLimitError`."""

    #: the most bytes one stream may bring (a test may lower it on an instance)
    max_bytes: int = MAX_RESPONSE_BYTES
    #: bytes fed so far
    fed: int = 0

    #: called with every event before it is handled (a UI showing text as it arrives;
    #: ``prefixlock.http`` sets it from its ``on_event`` argument)
    listener: Listener | None = None

    def feed(self, chunk: bytes) -> None:
        raise NotImplementedError

    def _count(self, chunk: bytes) -> None:
        self.fed += len(chunk)
        if self.fed > self.max_bytes:
            raise ResponseLimitError(
                f"the stream is over {self.max_bytes} bytes (the limit of a response)",
                retry_safe=False,
            )

    def result(self) -> ModelOutput:
        raise NotImplementedError


class Reader:
    """One provider's responses: a whole JSON body, a stream, an error status."""

    #: the provider registry name (``anthropic``)
    name: ClassVar[str]

    def parse_response(self, body: bytes, *, candidate: int | None = None) -> ModelOutput:
        """The output of a whole (non-streamed) JSON response body. ``candidate`` picks
        one of several outputs (Gemini ``candidates``, Chat ``choices`` with ``n > 1``);
        without it a response with more than one is refused (see :func:`pick`)."""
        raise NotImplementedError

    def stream_reader(self, *, candidate: int | None = None) -> StreamReader:
        """A new reader for one streamed response (``candidate`` as above)."""
        raise NotImplementedError

    def is_retryable(self, status: int, body: bytes) -> bool:
        """Whether sending the same request again may succeed after this HTTP error."""
        return status in RETRY_STATUSES or status >= 500


class SSEStreamReader(StreamReader):
    """A stream of server-sent events; subclasses handle each event and say when the
    terminal event arrived (``self.done``)."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder()
        self.done = False

    def feed(self, chunk: bytes) -> None:
        self._count(chunk)
        self._deliver(self._decoder.feed(chunk))

    def _deliver(self, events: list[Event]) -> None:
        for event in events:
            if self.listener is not None:
                self.listener(event.event, event.data.encode("utf-8"))
            if self.done:
                self.late(event)
            else:
                self.on_event(event)

    def result(self) -> ModelOutput:
        self._deliver(self._decoder.close())
        if not self.done:
            raise ResponseError("the stream ended before its final event", retry_safe=True)
        return self.output()

    def on_event(self, event: Event) -> None:
        raise NotImplementedError

    def late(self, event: Event) -> None:
        """An event after the terminal one: refused (Gemini overrides it for the other
        candidates of a multi-candidate stream)."""
        raise ResponseError(f"event {event.event!r} after the end", retry_safe=False)

    def output(self) -> ModelOutput:
        raise NotImplementedError

    def data(self, event: Event) -> dict[str, Any]:
        return load_object(event.data.encode("utf-8"), f"event {event.event!r}")


class EventStreamReader(StreamReader):
    """A stream of AWS event-stream frames (Bedrock ``ConverseStream``), handled frame by
    frame in order: a frame the decoder refuses is reported only after every frame
    before it was handled (by the next :meth:`feed` or by :meth:`result`), as botocore
    does, so an exception frame ahead of a corrupt one is what fails the stream."""

    def __init__(self) -> None:
        self._decoder = FrameDecoder()
        self.done = False

    def feed(self, chunk: bytes) -> None:
        self._count(chunk)
        for frame in self._decoder.feed(chunk):
            if self.listener is not None:
                headers = frame.headers
                name = headers.get(":event-type") or headers.get(":exception-type", "")
                self.listener(name, frame.payload)
            self.on_frame(frame)

    def result(self) -> ModelOutput:
        self._decoder.close()
        if not self.done:
            raise ResponseError("the stream ended before its final event", retry_safe=True)
        return self.output()

    def on_frame(self, frame: Frame) -> None:
        raise NotImplementedError

    def output(self) -> ModelOutput:
        raise NotImplementedError


# -- several outputs in one response ---------------------------------------------------
#
# Gemini may answer with several ``candidates`` (``candidateCount``) and Chat with several
# ``choices`` (``n``); a conversation records one. Reading index 0 silently would record
# one of several alternatives the caller asked for without saying so, so: a response with
# one output is read as is; with more than one, the caller names the one to record
# (``candidate=i``), else the response is refused. Anthropic, OpenAI Responses and
# Bedrock return one output per response.


def pick(name: str, outputs: list[Any], candidate: int | None, what: str) -> Any:
    """The output at index ``candidate`` (an item's own ``index`` field, else its
    position), or the only one when ``candidate`` is ``None``."""
    indexed: dict[int, Any] = {}
    for i, item in enumerate(outputs):
        index = item.get("index", i) if isinstance(item, dict) else i
        if type(index) is not int:
            raise ResponseError(
                f"{name} response: the index of {what[:-1]} {i} is not an integer",
                retry_safe=False,
            )
        indexed[index] = item
    if candidate is None:
        if len(outputs) > 1:
            raise ResponseError(
                f"{name} response carries {len(outputs)} {what}: pick the one to record "
                f"with candidate=i (0 to {len(outputs) - 1})",
                retry_safe=False,
            )
        candidate = 0
    if candidate not in indexed:
        raise ResponseError(
            f"{name} response has no {what[:-1]} {candidate} (it carries {len(outputs)})",
            retry_safe=False,
        )
    return indexed[candidate]


def one_output(name: str, candidate: int | None) -> None:
    """Providers with one output per response: only candidate 0 (or none) exists."""
    if candidate not in (None, 0):
        raise ResponseError(
            f"{name} responses carry one output: there is no candidate {candidate}",
            retry_safe=False,
        )


# -- building outputs ------------------------------------------------------------------


def load_object(body: bytes, what: str = "response", *, wrapper: int = 0) -> dict[str, Any]:
    """A JSON object, or a :class:`ResponseError` that is not retry-safe (a
    :class:`ResponseLimitError` past :data:`MAX_RESPONSE_BYTES`, before it is parsed).

    It may nest :data:`~prefixlock.core.canonical.MAX_DEPTH` levels, plus ``wrapper``:
    the levels of the provider's own shape around a value held to ``MAX_DEPTH`` on its
    own (a tool input of a whole response, which the reader checks with
    :func:`encodable`), so that a tool input reads the same in a whole response as in a
    stream, where it is parsed alone. Deeper than the parser can go is the same refusal
    (never a ``RecursionError``)."""
    if len(body) > MAX_RESPONSE_BYTES:  # before it is parsed: the parse takes ~15x
        raise ResponseLimitError(
            f"{what}: {len(body)} bytes, over {MAX_RESPONSE_BYTES} (the limit of a response)",
            retry_safe=False,
        )
    limit = canonical.MAX_DEPTH + wrapper
    try:
        value = canonical.loads(body)
    except RecursionError:  # the parser's own stack, far beyond the limit
        raise ResponseError(
            f"{what}: nesting deeper than {limit} levels", retry_safe=False
        ) from None
    except (ValueError, CanonicalJSONError) as err:
        raise ResponseError(f"{what}: not JSON ({err})", retry_safe=False) from None
    if not isinstance(value, dict):
        raise ResponseError(f"{what}: expected a JSON object", retry_safe=False)
    encodable(value, what, wrapper=wrapper)
    return value


def encodable(value: Any, what: str, *, wrapper: int = 0) -> None:
    """A :class:`ResponseError` (not retry-safe) naming the path of anything in ``value``
    the canonical encoder refuses (an integer beyond 64 bits, a lone surrogate, nesting
    beyond ``MAX_DEPTH + wrapper`` levels, see :func:`load_object`): what is read is
    recorded and sent again, so it must encode."""
    try:
        canonical.check(value, max_depth=canonical.MAX_DEPTH + wrapper)
    except CanonicalJSONError as err:
        raise ResponseError(f"{what}: {err}", retry_safe=False) from None


def opaque(provider: str, block: Mapping[str, Any]) -> OpaquePart:
    """A provider's own block, kept whole."""
    return OpaquePart(provider, canonical.dumps(block))


def text(value: str) -> TextPart:
    return TextPart(value)


def tool_call(call_id: str, name: str, arguments: str) -> ToolCallPart:
    """A tool call with the argument string as the model sent it."""
    return ToolCallPart(call_id, name, arguments)


def count(value: Any) -> int | None:
    """A token count from a usage object, or ``None`` when absent."""
    return value if type(value) is int and value >= 0 else None


def usage(
    raw: Mapping[str, Any],
    *,
    input_tokens: int | None = None,
    cache_read_tokens: int | None = None,
    cache_write_tokens: int | None = None,
    output_tokens: int | None = None,
    reasoning_tokens: int | None = None,
) -> Usage:
    """A :class:`Usage` with the provider's own usage object kept as ``raw``."""
    return Usage(
        input_tokens,
        cache_read_tokens,
        cache_write_tokens,
        output_tokens,
        reasoning_tokens,
        raw=canonical.dumps(dict(raw)),
    )


def output(
    provider: str,
    parts: list[Part],
    stop_reason: str | None,
    used: Usage | None,
    model: str | None,
    response_id: Any = None,
) -> ModelOutput:
    """The output every reader returns, after :func:`admit`: built here only, so no
    reader can return an output that skipped the checks. ``response_id``: the
    provider's id of the response, as it came (an empty one counts as none; a value
    that is not a string is refused: it is what a recorded answer is known by)."""
    for field, value in (("stop reason", stop_reason), ("model", model)):
        if value is not None and not isinstance(value, str):
            raise ResponseError(
                f"{provider} response: the {field} is not a string", retry_safe=False
            )
    if response_id is not None and not isinstance(response_id, str):
        raise ResponseError(
            f"{provider} response: the response id is not a string ({response_id!r})",
            retry_safe=False,
        )
    admitted = admit(provider, parts)
    return ModelOutput(provider, admitted, stop_reason, used, model, response_id or None)


#: The user message an output is checked after (a provider may refuse a history that
#: starts with the assistant, which a recorded output never does).
_ASKED = CanonicalMessage.create("runtime:asked", MessageKind.RUNTIME, Role.USER, (TextPart("?"),))


def admit(provider: str, parts: list[Part]) -> tuple[Part, ...]:
    """The checks a conversation runs before it records an output
    (:mod:`prefixlock.runtime.admission`: the part types, each tool call's id, name and
    argument text, the blank-text rule, call ids unique in the output, and the answering
    provider's own refusals, :meth:`Provider.check_message`), run before the reader
    returns it: a part the provider would refuse when it is sent back is a
    :class:`ResponseError` (not retry-safe) here, never recorded. An output with no part
    to record (a blocked prompt, only blank text) is returned as it is: its stop reason
    says why, and ``record()`` refuses it."""
    from .. import get  # the registry imports this package's readers lazily

    checked: list[Part] = []
    seen: set[str] = set()
    try:
        for part in parts:
            if isinstance(part, TextPart):
                if not isinstance(part.text, str):
                    raise HistoryError("a text part's text is not a string")
                if part.thought_signature is not None and not isinstance(
                    part.thought_signature, str
                ):
                    raise HistoryError("a text part's thought signature is not a string")
                canonical.check(part.text, "$.text")
            elif isinstance(part, ToolCallPart):
                part = tool_call_part(
                    part.call_id, part.name, part.arguments, part.thought_signature
                )
                if part.call_id in seen:
                    raise HistoryError(f"tool call id {part.call_id!r} is used twice")
                seen.add(part.call_id)
            checked.append(part)
        try:
            kept = drop_blank_texts(checked, "assistant output")
        except HistoryError:
            return tuple(checked)  # nothing to record: record() says so
        message = CanonicalMessage.create(
            "assistant:read", MessageKind.ASSISTANT, Role.ASSISTANT, kept
        )
        get(provider).check_message(message, (_ASKED,))
    except (HistoryError, SerializationError, CanonicalJSONError) as err:
        raise ResponseError(
            f"{provider} response: {err}: it could not be sent back", retry_safe=False
        ) from None
    return tuple(checked)


# -- the wire schema of what is read ----------------------------------------------------
#
# A reader checks each value it builds a part from against the wire schema first, so a
# value of the wrong type is a ResponseError naming its place, never an AttributeError
# or a part that the provider then refuses when it is sent back.

_WORDS: Mapping[type[Any], str] = {
    str: "a string",
    int: "an integer",
    float: "a number",
    bool: "true or false",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


def member(
    obj: Mapping[str, Any],
    key: str,
    kinds: type[Any] | tuple[type[Any], ...],
    where: str,
    *,
    required: bool = True,
) -> Any:
    """``obj[key]`` if it is of one of ``kinds`` (``bool`` is no integer; absent: None,
    unless ``required``), else a :class:`ResponseError` naming ``where.key``."""
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if key not in obj:
        if required:
            raise ResponseError(f"{where}: {key!r} is missing", retry_safe=False)
        return None
    value = obj[key]
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        words = " or ".join(_WORDS[k] for k in kinds)
        raise ResponseError(f"{where}.{key}: expected {words}", retry_safe=False)
    return value


def only(obj: Mapping[str, Any], keys: frozenset[str], where: str) -> None:
    """Refuse members outside ``keys``: a block sent back as received may carry nothing
    the request schema does not know (the service refuses an unknown member)."""
    unknown = sorted(k for k in obj if k not in keys)
    if unknown:
        raise ResponseError(
            f"{where}: unknown member {', '.join(map(repr, unknown))} (it could not be sent back)",
            retry_safe=False,
        )


def base64_text(value: str, where: str) -> None:
    """A non-empty base64 string (standard or URL-safe alphabet, padded or not: what
    proto JSON takes for ``bytes``), else a :class:`ResponseError`."""
    if not _BASE64.fullmatch(value) or len(value.rstrip("=")) % 4 == 1:
        raise ResponseError(f"{where}: expected base64 text", retry_safe=False)


_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
