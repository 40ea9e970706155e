"""Reading Claude Messages responses from AWS Bedrock ``InvokeModel`` and
``InvokeModelWithResponseStream``.

A whole response (``InvokeModel``) is the Anthropic Messages ``message`` JSON as the
Messages API answers it (AWS, "Anthropic Claude Messages API", "Response": ``id``,
``model``, ``type: "message"``, ``role``, ``content``, ``stop_reason``, ``usage``;
docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html),
read by :class:`~.anthropic.AnthropicReader` with the same checks and admission.

A stream (``InvokeModelWithResponseStream``) is AWS event-stream framing
(:mod:`.eventstream`, both CRCs checked), not SSE. botocore's ``bedrock-runtime``
service model names its members (``ResponseStream``): each ``event`` frame has
``:event-type`` ``chunk`` and the payload ``{"bytes": "<base64>"}`` (``PayloadPart``,
a blob, base64 in JSON); the decoded bytes are one Anthropic stream event as JSON
(``message_start``, ``content_block_start`` ... ``message_stop``; AWS, "Anthropic Claude
Messages API", streaming: "the same events as the Anthropic Messages API"), which
:class:`~.anthropic.AnthropicStream` handles with its grammar checks (block order, no
delta after a block's stop, ``message_stop`` last). Bedrock adds
``amazon-bedrock-invocationMetrics`` to ``message_stop``: not model output, ignored.
An ``exception`` frame (``internalServerException``, ``modelStreamErrorException``,
``validationException``, ``throttlingException``, ``modelTimeoutException``,
``serviceUnavailableException``: the service model's ``ResponseStream`` error members)
is a typed :class:`ResponseError`.

Opaque parts (thinking, redacted thinking, cited text, server tool blocks) carry the
provider name ``bedrock-anthropic``: they go back to this wire as received.

The Messages API on ``bedrock-mantle`` (``options: {endpoint: mantle}``,
:class:`BedrockMantleReader`) answers as the first-party Messages API: a ``message`` JSON,
or SSE with the same events ("Stream responses", AWS inference-messages-api.html; the
anthropic SDK's ``AnthropicBedrockMantle`` reads both with its first-party ``Stream``
and error handling, ``lib/bedrock/_mantle.py``). So it is :class:`~.anthropic.AnthropicReader`
throughout, the opaque parts named ``bedrock-anthropic`` all the same.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import ClassVar

from ...core.errors import ResponseError
from ...core.output import ModelOutput
from .anthropic import AnthropicReader, AnthropicStream
from .base import EventStreamReader, Reader, load_object, one_output
from .bedrock_converse import RETRYABLE_STATUS, frame_event
from .eventstream import Frame
from .sse import Event

__all__ = ["BedrockAnthropicReader", "BedrockAnthropicStreamReader", "BedrockMantleReader"]

PROVIDER = "bedrock-anthropic"

#: ``:exception-type`` of an InvokeModelWithResponseStream exception frame -> whether a
#: retry may succeed (botocore ``bedrock-runtime``, ``ResponseStream``: the HTTP status
#: each carries; API_runtime_InvokeModelWithResponseStream "Errors":
#: ModelStreamErrorException "An error occurred while streaming the response. Retry
#: your request", ModelTimeoutException "The request took too long to process",
#: ThrottlingException, InternalServerException, ServiceUnavailableException are
#: transient; ValidationException "Input validation failed" is not).
STREAM_EXCEPTIONS: Mapping[str, bool] = {
    "internalServerException": True,
    "modelStreamErrorException": True,
    "modelTimeoutException": True,
    "serviceUnavailableException": True,
    "throttlingException": True,
    "validationException": False,
}

#: The one event type of the stream's ``event`` frames (``ResponseStream.chunk``).
CHUNK = "chunk"


class BedrockAnthropicReader(AnthropicReader):
    name: ClassVar[str] = PROVIDER

    def stream_reader(self, *, candidate: int | None = None) -> BedrockAnthropicStreamReader:
        one_output(self.name, candidate)
        return BedrockAnthropicStreamReader()

    def is_retryable(self, status: int, body: bytes) -> bool:
        # InvokeModel documents the same error statuses as Converse (the error type
        # travels in x-amzn-ErrorType, the body is {"message"}): the same table.
        known = RETRYABLE_STATUS.get(status)
        return Reader.is_retryable(self, status, body) if known is None else known


class BedrockMantleReader(AnthropicReader):
    """The Messages API on bedrock-mantle: Anthropic's JSON, SSE and error bodies (and
    their retry rules), with ``bedrock-anthropic``'s opaque parts."""

    name: ClassVar[str] = PROVIDER

    def stream_reader(self, *, candidate: int | None = None) -> AnthropicStream:
        one_output(self.name, candidate)
        return AnthropicStream(PROVIDER)


class BedrockAnthropicStreamReader(EventStreamReader):
    """Event-stream frames -> ``chunk`` payloads -> Anthropic stream events."""

    def __init__(self) -> None:
        super().__init__()
        self._events = AnthropicStream(PROVIDER)

    def on_frame(self, frame: Frame) -> None:
        event = frame_event(frame, PROVIDER, STREAM_EXCEPTIONS)
        if event != CHUNK:
            raise ResponseError(
                f"{PROVIDER} stream: event {event!r} is not an InvokeModelWithResponseStream "
                f"event ({CHUNK!r})",
                retry_safe=False,
            )
        data = chunk_event(frame.payload)
        if self.done:
            raise ResponseError(f"{PROVIDER} stream: a chunk after message_stop", retry_safe=False)
        kind = load_object(data, f"{PROVIDER} chunk").get("type")
        self._events.on_event(Event(kind if isinstance(kind, str) else "message", data.decode()))
        self.done = self._events.done

    def output(self) -> ModelOutput:
        return self._events.output()


def chunk_event(payload: bytes) -> bytes:
    """The Anthropic event JSON inside one ``chunk`` payload (``{"bytes": base64}``).
    Other members are ignored, as botocore's parser ignores members the ``PayloadPart``
    shape lacks (Bedrock pads stream events with a random ``p`` member)."""
    where = f"{PROVIDER} chunk"
    value = load_object(payload, where)
    encoded = value.get("bytes")
    if not isinstance(encoded, str):
        raise ResponseError(f"{where}: 'bytes' is not a base64 string", retry_safe=False)
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ResponseError(f"{where}: 'bytes' is not base64", retry_safe=False) from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise ResponseError(f"{where}: the event is not UTF-8", retry_safe=False) from None
    return data
