"""What every response reader shares: the :class:`Reader` interface, stream readers over
SSE or AWS event-stream frames, and the helpers that build a
:class:`~prefixlock.core.output.ModelOutput`.

A reader maps the provider's response to parts in model order and never merges or
reorders them: opaque blocks stay whole (canonical JSON of the block as received), each
text block stays its own part, each tool call keeps its id and argument string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ...core import canonical
from ...core.errors import CanonicalJSONError, ResponseError, ResponseLimitError
from ...core.limits import MAX_RESPONSE_BYTES
from ...core.messages import OpaquePart, Part, TextPart, ToolCallPart
from ...core.output import ModelOutput, Usage
from .eventstream import Frame, FrameDecoder
from .sse import Event, SSEDecoder

__all__ = [
    "EventStreamReader",
    "Reader",
    "SSEStreamReader",
    "StreamReader",
    "count",
    "load_object",
    "one_output",
    "opaque",
    "pick",
    "text",
    "tool_call",
    "usage",
]

#: HTTP statuses a retry may cure: timeout, conflict, rate limit, any server error.
#: (The official OpenAI and Anthropic SDKs retry exactly these: ``_should_retry``.)
RETRY_STATUSES = frozenset({408, 409, 429})


class StreamReader:
    """Feed a streamed response in chunks of any size; :meth:`result` once it ended.

    A stream is held to :data:`~prefixlock.core.limits.MAX_RESPONSE_BYTES` in all
    (``max_bytes``): the chunk that passes it is refused with a
    :class:`~prefixlock.core.errors.ResponseLimitError`."""

    #: the most bytes one stream may bring (a test may lower it on an instance)
    max_bytes: int = MAX_RESPONSE_BYTES
    #: bytes fed so far
    fed: int = 0

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
    indexed = {
        item.get("index", i) if isinstance(item, dict) else i: item
        for i, item in enumerate(outputs)
    }
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
) -> ModelOutput:
    return ModelOutput(provider, tuple(parts), stop_reason, used, model)
