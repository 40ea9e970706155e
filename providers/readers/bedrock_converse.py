"""Reading AWS Bedrock ``Converse`` responses and ``ConverseStream`` event streams.

Sources: the Bedrock Runtime API reference (``API_runtime_Converse``,
``API_runtime_ConverseStream``, ``API_runtime_ConverseStreamOutput``,
``API_runtime_ContentBlock``, ``API_runtime_ContentBlockDelta``,
``API_runtime_TokenUsage``; docs.aws.amazon.com/bedrock/latest/APIReference) and the
same shapes in botocore's ``bedrock-runtime`` service model, which the tests validate
every fixture against.

Mapping, block by block in ``output.message.content`` order (a stream's blocks in
``contentBlockIndex`` order), never merged:

==========================  ===================================================
``ContentBlock``            part
==========================  ===================================================
``text``                    :class:`TextPart`, one per block
``toolUse``                 :class:`ToolCallPart` (``toolUseId``, ``name``, the
                            canonical JSON text of ``input``)
``reasoningContent``        :class:`OpaquePart` of the whole block (``reasoningText``
                            with its ``signature``, or ``redactedContent``), which the
                            serializer sends back verbatim
==========================  ===================================================

A stream rebuilds the same blocks from ``contentBlockStart`` / ``contentBlockDelta``:
text deltas are joined per block, ``toolUse.input`` fragments are joined and parsed
(so the argument text is the same canonical JSON as a whole response's), reasoning text
and signature fragments are joined, ``redactedContent`` fragments (base64 blobs) are
concatenated as bytes. ``messageStop`` carries the stop reason and ``metadata`` the
usage; the stream is complete only after both.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ...core import canonical
from ...core.errors import CanonicalJSONError, ResponseError
from ...core.messages import Part
from ...core.output import ModelOutput, Usage
from .base import (
    EventStreamReader,
    Reader,
    base64_text,
    count,
    encodable,
    load_object,
    one_output,
    only,
    opaque,
    output,
    text,
    tool_call,
    usage,
)
from .eventstream import Frame

__all__ = ["BedrockConverseReader", "BedrockConverseStreamReader"]

PROVIDER = "bedrock-converse"

#: Documented error statuses of ``Converse`` / ``ConverseStream`` and whether a retry
#: may succeed (Bedrock Runtime API reference, "Errors" of API_runtime_Converse):
#: ThrottlingException 429 and ModelNotReadyException 429 ("the model is not ready to
#: serve inference requests ... retries the request"), ModelTimeoutException 408,
#: InternalServerException 500, ServiceUnavailableException 503 are transient;
#: ValidationException 400, AccessDeniedException 403, ResourceNotFoundException 404
#: and ModelErrorException 424 (the model failed on this input) are not. The error
#: type travels in the ``x-amzn-ErrorType`` header, not the body, so the status decides;
#: an undocumented status falls back to the shared rule (408/409/429/5xx).
RETRYABLE_STATUS: Mapping[int, bool] = {
    400: False,
    403: False,
    404: False,
    408: True,
    424: False,
    429: True,
    500: True,
    503: True,
}

#: ``:exception-type`` of a ConverseStream exception frame -> whether a retry is safe
#: (API_runtime_ConverseStreamOutput: internalServerException 500 "Retry your
#: request", modelStreamErrorException 424 "A streaming error occurred. Retry your
#: request", serviceUnavailableException 503, throttlingException 429;
#: validationException 400 "Input validation failed").
STREAM_EXCEPTIONS: Mapping[str, bool] = {
    "internalServerException": True,
    "modelStreamErrorException": True,
    "serviceUnavailableException": True,
    "throttlingException": True,
    "validationException": False,
}


class BedrockConverseReader(Reader):
    name: ClassVar[str] = PROVIDER

    def parse_response(self, body: bytes, *, candidate: int | None = None) -> ModelOutput:
        one_output(self.name, candidate)
        data = load_object(body, wrapper=_INPUT_WRAPPER)
        message = _member(data, "output", dict, "response")
        message = _member(message, "message", dict, "response.output")
        blocks = _member(message, "content", list, "response.output.message")
        parts = [
            _block(block, f"response.output.message.content[{i}]") for i, block in enumerate(blocks)
        ]
        stop = _member(data, "stopReason", str, "response")
        raw_usage = data.get("usage")
        used = _usage(raw_usage, "response.usage") if raw_usage is not None else None
        return output(PROVIDER, parts, stop, used, None)

    def stream_reader(self, *, candidate: int | None = None) -> BedrockConverseStreamReader:
        one_output(self.name, candidate)
        return BedrockConverseStreamReader()

    def is_retryable(self, status: int, body: bytes) -> bool:
        known = RETRYABLE_STATUS.get(status)
        return super().is_retryable(status, body) if known is None else known


# -- whole responses -------------------------------------------------------------------


_EXPECTED: Mapping[type[Any], str] = {dict: "an object", list: "an array", str: "a string"}

#: The levels of a ``Converse`` body around a ``toolUse.input`` (the body,
#: ``output``, ``message``, ``content``, the block, ``toolUse``): the body may nest that
#: much deeper than ``MAX_DEPTH``, which holds an input at its place to ``MAX_DEPTH`` on
#: its own, as a stream's input, which comes alone (a JSON text in its deltas), is.
_INPUT_WRAPPER = 6


def _member(data: Mapping[str, Any], key: str, kind: type[Any], where: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind):
        expected = _EXPECTED[kind]
        raise ResponseError(f"{where}.{key}: expected {expected}", retry_safe=False)
    return value


def _block(block: Any, where: str) -> Part:
    if not isinstance(block, dict) or len(block) != 1:
        raise ResponseError(f"{where}: expected a ContentBlock with one member", retry_safe=False)
    ((kind, value),) = block.items()
    if kind == "text":
        if not isinstance(value, str):
            raise ResponseError(f"{where}.text: expected a string", retry_safe=False)
        return text(value)
    if kind == "toolUse":
        if not isinstance(value, dict):
            raise ResponseError(f"{where}.toolUse: expected an object", retry_safe=False)
        call_id = _member(value, "toolUseId", str, f"{where}.toolUse")
        name = _member(value, "name", str, f"{where}.toolUse")
        arguments = _member(value, "input", dict, f"{where}.toolUse")
        return tool_call(call_id, name, canonical.dumps(arguments))
    if kind == "reasoningContent":
        _reasoning(value, f"{where}.reasoningContent")
        return opaque(PROVIDER, block)
    raise ResponseError(f"{where}: content block {kind!r} is not model output", retry_safe=False)


def _reasoning(value: Any, where: str) -> None:
    """A ``ReasoningContentBlock`` as the next request sends it back: ``reasoningText``
    (``text``, an optional ``signature``) or ``redactedContent``, base64 in JSON, as the
    signature is (the service refuses other text for them)."""
    if not isinstance(value, dict) or len(value) != 1:
        raise ResponseError(f"{where}: expected one member", retry_safe=False)
    ((kind, inner),) = value.items()
    if kind == "redactedContent":
        if not isinstance(inner, str):
            raise ResponseError(f"{where}.redactedContent: expected a string", retry_safe=False)
        base64_text(inner, f"{where}.redactedContent")
        return
    if kind != "reasoningText":
        raise ResponseError(
            f"{where}: {kind!r} is not reasoningText or redactedContent", retry_safe=False
        )
    at = f"{where}.reasoningText"
    if not isinstance(inner, dict):
        raise ResponseError(f"{at}: expected an object", retry_safe=False)
    only(inner, frozenset({"text", "signature"}), at)
    _member(inner, "text", str, at)
    if "signature" in inner:
        base64_text(_member(inner, "signature", str, at), f"{at}.signature")


def _usage(raw: Any, where: str) -> Usage:
    """``TokenUsage`` -> :class:`Usage`. ``inputTokens`` is "the number of tokens sent in
    the request to the model" (API_runtime_TokenUsage) but, as for Anthropic's
    ``input_tokens``, it excludes the prompt tokens read from or written to the cache:
    those are ``cacheReadInputTokens`` / ``cacheWriteInputTokens`` and ``totalTokens``
    is their sum with ``inputTokens`` and ``outputTokens`` (Bedrock user guide, "Prompt
    caching": the response ``usage`` reports the cache reads and writes beside the
    input tokens). So every prompt token is ``inputTokens + cacheRead + cacheWrite``."""
    if not isinstance(raw, dict):
        raise ResponseError(f"{where}: expected an object", retry_safe=False)
    uncached = count(raw.get("inputTokens"))
    read = count(raw.get("cacheReadInputTokens"))
    write = count(raw.get("cacheWriteInputTokens"))
    prompt = None if uncached is None else uncached + (read or 0) + (write or 0)
    return usage(
        raw,
        input_tokens=prompt,
        cache_read_tokens=read,
        cache_write_tokens=write,
        output_tokens=count(raw.get("outputTokens")),
        reasoning_tokens=None,  # Bedrock counts reasoning inside outputTokens
    )


# -- streams ---------------------------------------------------------------------------


@attrs.define
class _Block:
    """One content block being streamed: its kind and the fragments so far."""

    kind: str
    call_id: str = ""
    name: str = ""
    fragments: list[str] = attrs.Factory(list)
    signature: list[str] = attrs.Factory(list)
    redacted: bytearray | None = None
    #: begun by a contentBlockStart (a toolUse block), not by its first delta
    started: bool = False


def frame_event(frame: Frame, provider: str, exceptions: Mapping[str, bool]) -> str:
    """The ``:event-type`` of an ``event`` frame. An ``exception`` frame (the service's
    modeled errors: ``:exception-type``, a JSON ``{"message"}`` payload) is a typed
    :class:`ResponseError` (``error_type`` the exception's name, retry-safe as
    ``exceptions`` says); an ``error`` frame (``:error-code``, ``:error-message``) and any
    other message type are refused. (botocore's ``EventStream`` raises the same frames as
    the operation's modeled errors; the Smithy event-stream spec, "Message types".)"""
    kind = frame.headers.get(":message-type")
    if kind == "exception":
        name = frame.headers.get(":exception-type", "")
        message = _exception_message(frame.payload)
        raise ResponseError(
            f"{provider} stream: {name}: {message}",
            retry_safe=exceptions.get(name, False),
            error_type=name or None,
        )
    if kind == "error":
        code = frame.headers.get(":error-code", "")
        message = frame.headers.get(":error-message", "")
        raise ResponseError(f"{provider} stream: error {code}: {message}", retry_safe=False)
    if kind != "event":
        raise ResponseError(f"event stream: unknown message type {kind!r}", retry_safe=False)
    return frame.headers.get(":event-type", "")


class BedrockConverseStreamReader(EventStreamReader):
    """``ConverseStream`` frames -> the same :class:`ModelOutput` as ``Converse``."""

    def __init__(self) -> None:
        super().__init__()
        self._blocks: dict[int, _Block] = {}
        self._closed: set[int] = set()
        self._stop: str | None = None
        self._usage: Usage | None = None
        self._stopped = False

    def on_frame(self, frame: Frame) -> None:
        event = frame_event(frame, PROVIDER, STREAM_EXCEPTIONS)
        if self.done:
            raise ResponseError(f"event {event!r} after the end", retry_safe=False)
        data = load_object(frame.payload, f"event {event!r}")
        handler = _HANDLERS.get(event)
        if handler is None:
            raise ResponseError(f"event {event!r} is not a ConverseStream event", retry_safe=False)
        handler(self, data)

    def output(self) -> ModelOutput:
        parts = [self._part(index, block) for index, block in sorted(self._blocks.items())]
        return output(PROVIDER, parts, self._stop, self._usage, None)

    # -- events ------------------------------------------------------------------------

    def _message_start(self, data: dict[str, Any]) -> None:
        pass  # role: always "assistant"

    def _block_start(self, data: dict[str, Any]) -> None:
        index = _index(data, "contentBlockStart")
        start = _member(data, "start", dict, "event 'contentBlockStart'")
        tool = start.get("toolUse")
        if not isinstance(tool, dict):
            raise ResponseError(
                f"event 'contentBlockStart': block {index}: start {sorted(start)} is not a toolUse",
                retry_safe=False,
            )
        where = "event 'contentBlockStart'.start.toolUse"
        self._open(index, "toolUse", start=True).call_id = _member(tool, "toolUseId", str, where)
        self._blocks[index].name = _member(tool, "name", str, where)

    def _block_delta(self, data: dict[str, Any]) -> None:
        index = _index(data, "contentBlockDelta")
        delta = _member(data, "delta", dict, "event 'contentBlockDelta'")
        where = f"event 'contentBlockDelta' block {index}"
        if len(delta) != 1:
            raise ResponseError(f"{where}: expected a delta with one member", retry_safe=False)
        ((kind, value),) = delta.items()
        if kind == "text" and isinstance(value, str):
            self._open(index, "text").fragments.append(value)
        elif kind == "toolUse" and isinstance(value, dict):
            block = self._open(index, "toolUse")
            if not block.started:  # its id and name come in the start: a delta never
                raise ResponseError(  # started (an event is missing)
                    f"block {index}: toolUse deltas without a contentBlockStart",
                    retry_safe=False,
                )
            block.fragments.append(_member(value, "input", str, where))
        elif kind == "reasoningContent" and isinstance(value, dict) and len(value) == 1:
            block = self._open(index, "reasoningContent")
            ((field, fragment),) = value.items()
            if field == "text" and isinstance(fragment, str):
                block.fragments.append(fragment)
            elif field == "signature" and isinstance(fragment, str):
                block.signature.append(fragment)
            elif field == "redactedContent" and isinstance(fragment, str):
                if block.redacted is None:
                    block.redacted = bytearray()
                block.redacted += _blob(fragment, where)
            else:
                raise ResponseError(
                    f"{where}: reasoningContent delta {field!r} is not text, signature "
                    "or redactedContent",
                    retry_safe=False,
                )
        else:
            raise ResponseError(f"{where}: delta {kind!r} is not model output", retry_safe=False)

    def _block_stop(self, data: dict[str, Any]) -> None:
        index = _index(data, "contentBlockStop")
        if index not in self._blocks:
            raise ResponseError(
                f"event 'contentBlockStop': block {index} never started (an event is missing)",
                retry_safe=False,
            )
        if index in self._closed:
            raise ResponseError(
                f"event 'contentBlockStop': block {index} stopped twice (an event is repeated)",
                retry_safe=False,
            )
        self._closed.add(index)

    def _message_stop(self, data: dict[str, Any]) -> None:
        if self._stopped:
            raise ResponseError("event 'messageStop' repeated", retry_safe=False)
        # A block not stopped is not refused: contentBlockStop carries nothing, and a
        # block's content is joined from its deltas whether it came or not.
        self._stop = _member(data, "stopReason", str, "event 'messageStop'")
        self._stopped = True

    def _metadata(self, data: dict[str, Any]) -> None:
        if not self._stopped:
            raise ResponseError("event 'metadata' before 'messageStop'", retry_safe=True)
        self._usage = _usage(data.get("usage"), "event 'metadata'.usage")
        self.done = True

    # -- blocks ------------------------------------------------------------------------

    def _open(self, index: int, kind: str, *, start: bool = False) -> _Block:
        """The block at ``index``, started by this event if it is new. The events carry
        no sequence numbers; what a lost or repeated one shows is caught
        (docs/providers.md, "Stream integrity"): a new block takes the next index (0, 1,
        ...), a ``contentBlockStart`` comes before any delta of its block and once, no
        delta follows the block's ``contentBlockStop``."""
        block = self._blocks.get(index)
        if block is None:
            if index != len(self._blocks):
                raise ResponseError(
                    f"event 'contentBlock{'Start' if start else 'Delta'}': block {index} "
                    f"starts after block {len(self._blocks) - 1} (an event is missing)",
                    retry_safe=False,
                )
            block = self._blocks[index] = _Block(kind)
            block.started = start
        elif start:
            raise ResponseError(
                f"event 'contentBlockStart': block {index} started twice", retry_safe=False
            )
        if index in self._closed:
            raise ResponseError(
                f"event 'contentBlockDelta': block {index} has stopped", retry_safe=False
            )
        if block.kind != kind:
            raise ResponseError(
                f"event 'contentBlockDelta' block {index}: a {kind} delta in a {block.kind} block",
                retry_safe=False,
            )
        return block

    def _part(self, index: int, block: _Block) -> Part:
        joined = "".join(block.fragments)
        if block.kind == "text":
            return text(joined)
        if block.kind == "toolUse":
            if not block.call_id:
                raise ResponseError(
                    f"block {index}: toolUse deltas without a contentBlockStart", retry_safe=False
                )
            arguments = _arguments(joined or "{}", f"block {index} ({block.name!r})")
            return tool_call(block.call_id, block.name, canonical.dumps(arguments))
        if block.redacted is not None:
            if block.fragments or block.signature:
                raise ResponseError(
                    f"block {index}: reasoningContent mixes redactedContent with text",
                    retry_safe=False,
                )
            redacted = base64.b64encode(bytes(block.redacted)).decode("ascii")
            return opaque(PROVIDER, {"reasoningContent": {"redactedContent": redacted}})
        reasoning: dict[str, Any] = {"text": joined}
        if block.signature:
            reasoning["signature"] = "".join(block.signature)
        _reasoning({"reasoningText": reasoning}, f"block {index}: reasoningContent")
        return opaque(PROVIDER, {"reasoningContent": {"reasoningText": reasoning}})


_HANDLERS = {
    "messageStart": BedrockConverseStreamReader._message_start,
    "contentBlockStart": BedrockConverseStreamReader._block_start,
    "contentBlockDelta": BedrockConverseStreamReader._block_delta,
    "contentBlockStop": BedrockConverseStreamReader._block_stop,
    "messageStop": BedrockConverseStreamReader._message_stop,
    "metadata": BedrockConverseStreamReader._metadata,
}


def _index(data: Mapping[str, Any], event: str) -> int:
    index = data.get("contentBlockIndex")
    if type(index) is not int or index < 0:
        raise ResponseError(
            f"event {event!r}: contentBlockIndex: expected a count", retry_safe=False
        )
    return index


def _blob(value: str, where: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ResponseError(f"{where}: redactedContent is not base64", retry_safe=False) from None


def _arguments(joined: str, where: str) -> dict[str, Any]:
    try:
        value = canonical.loads(joined)
    except RecursionError:  # the parser's own stack, far beyond the limit
        raise ResponseError(
            f"{where}: toolUse input: nesting deeper than {canonical.MAX_DEPTH} levels",
            retry_safe=False,
        ) from None
    except (ValueError, CanonicalJSONError) as err:
        raise ResponseError(
            f"{where}: toolUse input is not JSON ({err})", retry_safe=False
        ) from None
    if not isinstance(value, dict):
        raise ResponseError(f"{where}: toolUse input is not a JSON object", retry_safe=False)
    encodable(value, f"{where}: toolUse input")
    return value


def _exception_message(payload: bytes) -> str:
    try:
        value = canonical.loads(payload)
    except (ValueError, CanonicalJSONError, RecursionError):
        return payload.decode("utf-8", "replace")
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return str(value["message"])
    return payload.decode("utf-8", "replace")
