"""OpenAI Responses: a ``Response`` body or its SSE stream of ``ResponseStreamEvent``s.

Mapping (openai-python ``types/responses/response.py``, ``response_output_item.py``),
``output[]`` in order: a ``message`` item -> one text part per ``output_text`` content
part (a message holding anything else, such as a ``refusal`` part, is kept whole as an
opaque item); ``function_call`` -> a tool call (``call_id``, ``name``, ``arguments``
verbatim, but empty arguments read as ``{}``, as Chat Completions': see
:func:`~.openai_chat.call_arguments`); every other item -- ``reasoning`` with its
``encrypted_content`` and ``summary`` first of all -> an opaque part holding the item as
received, which the serializer sends back as that input item. Stop reason: ``status``, or
``incomplete_details.reason`` for an ``incomplete`` response; a ``failed`` response is a
:class:`~prefixlock.core.errors.ResponseError`. Usage: ``input_tokens`` (cached
included), ``input_tokens_details.cached_tokens``, ``output_tokens``,
``output_tokens_details.reasoning_tokens``;
``input_tokens_details.cache_write_tokens`` where reported.

Stream: the output is built from the terminal event's ``response``
(``response.completed`` or ``response.incomplete``), after checking that the streamed
pieces agree with it: each ``response.output_item.done`` item, the joined
``response.output_text.delta``s and ``response.function_call_arguments.delta``s.
``response.failed`` and ``error`` events fail the stream.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...core.errors import ResponseError
from ...core.messages import Part, TextPart
from ...core.output import ModelOutput, Usage
from .base import (
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
from .openai_chat import call_arguments, error_failure, openai_retryable
from .sse import Event

__all__ = ["OpenAIResponsesReader"]

NAME = "openai-responses"

#: Events that end a stream with a response to read.
TERMINAL = frozenset({"response.completed", "response.incomplete"})


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    details_in = raw.get("input_tokens_details") or {}
    details_out = raw.get("output_tokens_details") or {}
    return usage(
        raw,
        input_tokens=count(raw.get("input_tokens")),
        cache_read_tokens=count(details_in.get("cached_tokens")),
        cache_write_tokens=count(details_in.get("cache_write_tokens")),
        output_tokens=count(raw.get("output_tokens")),
        reasoning_tokens=count(details_out.get("reasoning_tokens")),
    )


def _item_parts(item: Any) -> list[Part]:
    if not isinstance(item, dict):
        raise ResponseError("openai-responses output item: expected an object", retry_safe=False)
    kind = item.get("type")
    if kind == "function_call":
        call_id, name, arguments = (item.get(k) for k in ("call_id", "name", "arguments"))
        if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
            raise ResponseError(
                "openai-responses function_call: call_id, name and arguments must be strings",
                retry_safe=False,
            )
        # "" for a tool without parameters (sources at call_arguments): no arguments
        return [tool_call(call_id, name, call_arguments(arguments))]
    content = item.get("content")
    if (
        kind == "message"
        and isinstance(content, list)
        and all(isinstance(c, dict) and c.get("type") == "output_text" for c in content)
    ):
        phase = item.get("phase")  # kept and sent back (see TextPart.phase)
        if isinstance(phase, str):
            return [TextPart(c["text"], phase=phase) for c in content]
        return [text(c["text"]) for c in content]
    return [opaque(NAME, item)]


def _response_output(response: dict[str, Any]) -> ModelOutput:
    status = response.get("status")
    if status == "failed":
        raise error_failure("openai-responses response failed", response.get("error"))
    stop = status
    if status == "incomplete":
        stop = (response.get("incomplete_details") or {}).get("reason", status)
    parts: list[Part] = []
    for item in response.get("output") or []:
        parts.extend(_item_parts(item))
    return output(NAME, parts, stop, _usage(response.get("usage")), response.get("model"))


class OpenAIResponsesReader(Reader):
    name: ClassVar[str] = NAME

    def parse_response(self, body: bytes, *, candidate: int | None = None) -> ModelOutput:
        one_output(self.name, candidate)
        data = load_object(body)
        if data.get("error") is not None and data.get("object") != "response":
            raise error_failure("openai-responses error", data["error"])
        return _response_output(data)

    def stream_reader(self, *, candidate: int | None = None) -> StreamReader:
        one_output(self.name, candidate)
        return OpenAIResponsesStream()

    def is_retryable(self, status: int, body: bytes) -> bool:
        return openai_retryable(status, body)


class OpenAIResponsesStream(SSEStreamReader):
    def __init__(self) -> None:
        super().__init__()
        self.items: dict[int, Any] = {}
        self.texts: dict[tuple[int, int], list[str]] = {}
        self.arguments: dict[int, list[str]] = {}
        self.final: dict[str, Any] = {}

    def on_event(self, event: Event) -> None:
        data = self.data(event)
        kind = data.get("type", event.event)
        if kind == "response.output_text.delta":
            self.texts.setdefault((data["output_index"], data["content_index"]), []).append(
                data["delta"]
            )
        elif kind == "response.function_call_arguments.delta":
            self.arguments.setdefault(data["output_index"], []).append(data["delta"])
        elif kind == "response.output_item.done":
            self.items[data["output_index"]] = data["item"]
        elif kind == "response.failed":
            error = (data.get("response") or {}).get("error")
            raise error_failure("openai-responses stream: response.failed", error)
        elif kind == "error":
            # Two shapes. The reference (ResponseErrorEvent) puts code/message/param at
            # the top level; the live API nests them, with a type, under "error":
            # {"type":"error","error":{"type":"tokens","code":"rate_limit_exceeded",
            # "message":...}} (captured streams: openai/openai-dotnet#881 and #528,
            # Effect-TS/effect#7262), which openai-python's _streaming.py reads
            # (data["error"]["message"]). The nested object first, whole; else the flat.
            error = data.get("error")
            if not isinstance(error, dict):
                error = {"code": data.get("code"), "message": data.get("message")}
            raise error_failure("openai-responses stream: error event", error)
        elif kind in TERMINAL:
            response = data.get("response")
            if not isinstance(response, dict):
                raise ResponseError(f"openai-responses {kind}: no response", retry_safe=False)
            self.final = response
            self.done = True

    def output(self) -> ModelOutput:
        final = self.final
        if final.get("output") is None:  # as the SDK does: the finished items stand in
            final = {**final, "output": [self.items[i] for i in sorted(self.items)]}
        items = final["output"]
        streamed = [self.items[i] for i in sorted(self.items)]
        if streamed and streamed != items:
            self._disagree("the output_item.done items differ from the final output")
        for (index, part), deltas in self.texts.items():
            try:
                whole = items[index]["content"][part]["text"]
            except (IndexError, KeyError, TypeError):
                whole = None
            if "".join(deltas) != whole:
                self._disagree(f"the text deltas of output {index} part {part} differ")
        for index, deltas in self.arguments.items():
            try:
                whole = items[index]["arguments"]
            except (IndexError, KeyError, TypeError):
                whole = None
            if "".join(deltas) != whole:
                self._disagree(f"the argument deltas of output {index} differ")
        return _response_output(final)

    def _disagree(self, what: str) -> None:
        raise ResponseError(
            f"openai-responses stream: {what} from the final response", retry_safe=False
        )
