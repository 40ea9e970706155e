"""Anthropic Messages responses: a whole ``Message`` and its SSE stream.

Block mapping (docs.anthropic.com/en/api/messages, "content"), in model order:

=============================  =======================================================
``text``                       :class:`TextPart` (one per block, never merged)
``text`` with ``citations``    :class:`OpaquePart` ``anthropic``: the block as received,
                               citations and all, so the next request echoes it byte for
                               byte (docs.anthropic.com/en/docs/build-with-claude/citations;
                               its text still counts in ``ModelOutput.text``)
``tool_use``                   :class:`ToolCallPart` (``id``, ``name``, canonical JSON
                               of ``input``)
anything else                  :class:`OpaquePart` ``anthropic``: the block as received
                               (``thinking`` with ``signature``, ``redacted_thinking``,
                               server tool blocks), sent back verbatim
=============================  =======================================================

Stream (docs.anthropic.com/en/api/messages-streaming): ``message_start`` carries the
message with empty content and the first usage; ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta``, ``thinking_delta``,
``signature_delta``, ``citations_delta``) / ``content_block_stop`` build each block at
its ``index``; ``message_delta`` sets ``stop_reason`` and updates usage (non-null fields
win, as the SDK's accumulator does); ``message_stop`` ends it; ``ping`` is ignored; an
``error`` event fails the stream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ...core import canonical
from ...core.errors import CanonicalJSONError, ResponseError
from ...core.messages import Part
from ...core.output import ModelOutput, Usage
from .base import (
    RETRY_STATUSES,
    Reader,
    SSEStreamReader,
    StreamReader,
    count,
    load_object,
    one_output,
    opaque,
    output,
    text,
    tool_call,
    usage,
)
from .sse import Event

NAME = "anthropic"

#: Error ``type``s a retry may cure (docs.anthropic.com/en/api/errors: 429
#: ``rate_limit_error``, 500 ``api_error``, 504 ``timeout_error``, 529
#: ``overloaded_error``); every other type refuses the request itself.
RETRY_ERROR_TYPES = frozenset(
    {"rate_limit_error", "api_error", "timeout_error", "overloaded_error"}
)

#: ``content_block_delta`` type -> (block field, delta field) it appends to.
DELTA_FIELDS: Mapping[str, tuple[str, str]] = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("signature", "signature"),
}


#: The levels of a Messages body around a ``tool_use.input`` (the body, ``content``, the
#: block): the body may nest that much deeper than ``MAX_DEPTH``, which holds an input at
#: its place to ``MAX_DEPTH`` on its own, as a stream's input (a JSON text in its
#: deltas) is.
_INPUT_WRAPPER = 3


def _part(block: Mapping[str, Any]) -> Part:
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str) and not block.get("citations"):
        return text(block["text"])  # no citations: an absent key, null or []
    if kind == "tool_use":
        call_id, name, args = block.get("id"), block.get("name"), block.get("input")
        if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(args, dict)):
            raise ResponseError(
                "anthropic tool_use block needs a string id and name and an input object",
                retry_safe=False,
            )
        return tool_call(call_id, name, canonical.dumps(args))
    if not isinstance(kind, str):
        raise ResponseError("anthropic content block without a type", retry_safe=False)
    return opaque(NAME, block)


def _usage(raw: Mapping[str, Any]) -> Usage:
    uncached = count(raw.get("input_tokens"))
    read = count(raw.get("cache_read_input_tokens"))
    written = count(raw.get("cache_creation_input_tokens"))
    details = raw.get("output_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    # "input_tokens" counts only the tokens after the last cache breakpoint; the whole
    # prompt is input_tokens + cache_creation_input_tokens + cache_read_input_tokens
    # (docs.anthropic.com/en/docs/build-with-claude/prompt-caching, "Tracking cache
    # performance").
    total = None if uncached is None else uncached + (read or 0) + (written or 0)
    return usage(
        raw,
        input_tokens=total,
        cache_read_tokens=read,
        cache_write_tokens=written,
        output_tokens=count(raw.get("output_tokens")),
        # inside output_tokens; output_tokens_details.thinking_tokens counts them
        # (anthropic-sdk-python types/output_tokens_details.py), where reported
        reasoning_tokens=count(details.get("thinking_tokens")),
    )


def _message(message: Mapping[str, Any], content: list[Any]) -> ModelOutput:
    raw_usage = message.get("usage")
    stop = message.get("stop_reason")
    model = message.get("model")
    return output(
        NAME,
        [_part(block) for block in content],
        stop if isinstance(stop, str) else None,
        _usage(raw_usage) if isinstance(raw_usage, dict) else None,
        model if isinstance(model, str) else None,
    )


def _error(body: Mapping[str, Any]) -> ResponseError:
    error = body.get("error")
    error = error if isinstance(error, dict) else {}
    kind = error.get("type")
    return ResponseError(
        f"anthropic error {kind}: {error.get('message', '')}",
        retry_safe=kind in RETRY_ERROR_TYPES,
        error_type=kind if isinstance(kind, str) else None,
    )


class AnthropicReader(Reader):
    name: ClassVar[str] = NAME

    def parse_response(self, body: bytes, *, candidate: int | None = None) -> ModelOutput:
        one_output(self.name, candidate)
        message = load_object(body, wrapper=_INPUT_WRAPPER)
        if message.get("type") == "error":
            raise _error(message)
        content = message.get("content")
        if message.get("type") != "message" or not isinstance(content, list):
            raise ResponseError(
                "anthropic response: expected a message with a content list", retry_safe=False
            )
        return _message(message, content)

    def stream_reader(self, *, candidate: int | None = None) -> StreamReader:
        one_output(self.name, candidate)
        return AnthropicStream()

    def is_retryable(self, status: int, body: bytes) -> bool:
        # docs.anthropic.com/en/api/errors: 429 rate limit, 500 api error, 504 timeout,
        # 529 overloaded may be retried; 4xx other than 408/409/429 refuse the request.
        if status in RETRY_STATUSES or status >= 500:
            return True
        try:
            value = canonical.loads(body)
        except (ValueError, CanonicalJSONError, RecursionError):
            return False
        error = value.get("error") if isinstance(value, dict) else None
        return isinstance(error, dict) and error.get("type") in RETRY_ERROR_TYPES


class AnthropicStream(SSEStreamReader):
    """Blocks rebuilt at their ``index`` from start, deltas and stop."""

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json: dict[int, list[str]] = {}
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "message_start": self.message_start,
            "content_block_start": self.block_start,
            "content_block_delta": self.block_delta,
            "content_block_stop": self.block_stop,
            "message_delta": self.message_delta,
            "message_stop": self.message_stop,
            "ping": lambda data: None,
        }

    def on_event(self, event: Event) -> None:
        data = self.data(event)
        kind = data.get("type", event.event)
        if kind == "error":
            raise _error(data)
        handler = self.handlers.get(kind)
        if handler is None:
            return  # new event types are ignored, as the API versioning policy asks
        if kind != "message_start" and kind != "ping" and self.message is None:
            raise ResponseError(f"anthropic stream: {kind} before message_start", retry_safe=False)
        handler(data)

    def message_start(self, data: dict[str, Any]) -> None:
        message = data.get("message")
        if not isinstance(message, dict):
            raise ResponseError("anthropic message_start without a message", retry_safe=False)
        self.message = dict(message)

    def _block(self, data: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        index = data.get("index")
        if type(index) is not int or index not in self.blocks:
            raise ResponseError(
                f"anthropic stream: {data.get('type')} for unknown block index {index!r}",
                retry_safe=False,
            )
        return index, self.blocks[index]

    def block_start(self, data: dict[str, Any]) -> None:
        index, block = data.get("index"), data.get("content_block")
        if type(index) is not int or index in self.blocks or not isinstance(block, dict):
            raise ResponseError(
                f"anthropic stream: bad content_block_start at index {index!r}", retry_safe=False
            )
        self.blocks[index] = dict(block)

    def block_delta(self, data: dict[str, Any]) -> None:
        index, block = self._block(data)
        delta = data.get("delta")
        delta = delta if isinstance(delta, dict) else {}
        kind = delta.get("type")
        if kind == "input_json_delta":
            self.json.setdefault(index, []).append(str(delta.get("partial_json", "")))
        elif kind == "citations_delta":
            block.setdefault("citations", None)
            block["citations"] = [*(block["citations"] or ()), delta.get("citation")]
        elif isinstance(kind, str) and kind in DELTA_FIELDS:
            field, source = DELTA_FIELDS[kind]
            block[field] = str(block.get(field) or "") + str(delta.get(source, ""))
        else:
            raise ResponseError(f"anthropic stream: unknown delta type {kind!r}", retry_safe=False)

    def block_stop(self, data: dict[str, Any]) -> None:
        index, block = self._block(data)
        pieces = self.json.pop(index, None)
        if pieces is not None and "".join(pieces):
            block["input"] = load_object("".join(pieces).encode(), "anthropic tool_use input")

    def message_delta(self, data: dict[str, Any]) -> None:
        assert self.message is not None
        delta = data.get("delta")
        if isinstance(delta, dict):
            self.message.update(delta)
        update = data.get("usage")
        if isinstance(update, dict):
            merged = dict(self.message.get("usage") or {})
            merged.update({k: v for k, v in update.items() if v is not None})
            self.message["usage"] = merged

    def message_stop(self, data: dict[str, Any]) -> None:
        self.done = True

    def output(self) -> ModelOutput:
        assert self.message is not None
        return _message(self.message, [self.blocks[i] for i in sorted(self.blocks)])
