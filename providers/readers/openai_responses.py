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
    member,
    one_output,
    only,
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
    details_in = raw.get("input_tokens_details")
    details_in = details_in if isinstance(details_in, dict) else {}
    details_out = raw.get("output_tokens_details")
    details_out = details_out if isinstance(details_out, dict) else {}
    return usage(
        raw,
        input_tokens=count(raw.get("input_tokens")),
        cache_read_tokens=count(details_in.get("cached_tokens")),
        cache_write_tokens=count(details_in.get("cache_write_tokens")),
        output_tokens=count(raw.get("output_tokens")),
        reasoning_tokens=count(details_out.get("reasoning_tokens")),
    )


#: The statuses of an output item (``status``: ``in_progress``, ``completed``,
#: ``incomplete`` in ``ResponseReasoningItemParam`` and ``ResponseOutputMessageParam``).
STATUSES = frozenset({"in_progress", "completed", "incomplete"})

#: Items run by the service (its own tools), kept whole and sent back: checked for their
#: ``id`` only (their content is the service's own).
SERVICE_ITEMS = frozenset(
    {
        "file_search_call",
        "web_search_call",
        "computer_call",
        "image_generation_call",
        "code_interpreter_call",
        "local_shell_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
        "custom_tool_call",
    }
)


def _status(item: dict[str, Any], where: str, *, required: bool) -> None:
    status = member(item, "status", str, where, required=required)
    if status is not None and status not in STATUSES:
        raise ResponseError(f"{where}.status: unknown status {status!r}", retry_safe=False)


def _texts(item: dict[str, Any], key: str, kind: str, where: str, *, required: bool) -> None:
    """``item[key]``: a list of ``{"type": kind, "text": str}`` objects."""
    for i, piece in enumerate(member(item, key, list, where, required=required) or ()):
        at = f"{where}.{key}[{i}]"
        if not isinstance(piece, dict) or piece.get("type") != kind:
            raise ResponseError(f"{at}: expected a {kind} object", retry_safe=False)
        member(piece, "text", str, at)
        only(piece, frozenset({"type", "text"}), at)


REASONING_KEYS = frozenset({"type", "id", "summary", "content", "encrypted_content", "status"})


def _reasoning(item: dict[str, Any], where: str) -> None:
    """A reasoning item as ``ResponseReasoningItemParam`` takes it back (openai-python
    ``types/responses/response_reasoning_item_param.py``)."""
    member(item, "id", str, where)
    _texts(item, "summary", "summary_text", where, required=True)
    _texts(item, "content", "reasoning_text", where, required=False)
    member(item, "encrypted_content", (str, type(None)), where, required=False)
    _status(item, where, required=False)
    only(
        item, frozenset({"type", "id", "summary", "content", "encrypted_content", "status"}), where
    )


def _message_item(item: dict[str, Any], where: str) -> None:
    """A message kept whole (one holding a refusal) as ``ResponseOutputMessageParam``
    takes it back."""
    member(item, "id", str, where)
    if member(item, "role", str, where) != "assistant":
        raise ResponseError(f"{where}.role: expected 'assistant'", retry_safe=False)
    _status(item, where, required=True)
    member(item, "phase", (str, type(None)), where, required=False)
    for i, part in enumerate(member(item, "content", list, where)):
        at = f"{where}.content[{i}]"
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "refusal":
            member(part, "refusal", str, at)
            only(part, frozenset({"type", "refusal"}), at)
        elif kind == "output_text":
            member(part, "text", str, at)
            member(part, "annotations", list, at)
            member(part, "logprobs", list, at, required=False)
            only(part, frozenset({"type", "text", "annotations", "logprobs"}), at)
        else:
            raise ResponseError(f"{at}: expected an output_text or refusal", retry_safe=False)
    only(item, frozenset({"type", "id", "role", "status", "phase", "content"}), where)


def _item_parts(item: Any, index: int = 0) -> list[Part]:
    where = f"openai-responses output[{index}]"
    if not isinstance(item, dict):
        raise ResponseError(f"{where}: expected an object", retry_safe=False)
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
        texts = [member(c, "text", str, f"{where}.content[{i}]") for i, c in enumerate(content)]
        phase = item.get("phase")  # kept and sent back (see TextPart.phase)
        if isinstance(phase, str):
            return [TextPart(t, phase=phase) for t in texts]
        return [text(t) for t in texts]
    where = f"{where} {kind!r}"
    if kind == "reasoning":
        _reasoning(item, where)
    elif kind == "message":
        _message_item(item, where)
    elif isinstance(kind, str) and kind in SERVICE_ITEMS:
        member(item, "id", str, where)
    else:
        # an unknown item could be anything, a mangled function_call among them
        raise ResponseError(f"{where}: unknown output item type", retry_safe=False)
    return [opaque(NAME, item)]


def _response_output(response: dict[str, Any]) -> ModelOutput:
    where = "openai-responses response"
    status = member(response, "status", (str, type(None)), where, required=False)
    if status == "failed":
        raise error_failure("openai-responses response failed", response.get("error"))
    stop = status
    if status == "incomplete":
        details = member(response, "incomplete_details", (dict, type(None)), where, required=False)
        stop = member(details or {}, "reason", (str, type(None)), where, required=False) or status
    parts: list[Part] = []
    for index, item in enumerate(
        member(response, "output", (list, type(None)), where, required=False) or ()
    ):
        parts.extend(_item_parts(item, index))
    model = member(response, "model", (str, type(None)), where, required=False)
    return output(NAME, parts, stop, _usage(response.get("usage")), model, response.get("id"))


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
        if not isinstance(kind, str):
            raise ResponseError(
                "openai-responses stream: an event type is not a string", retry_safe=False
            )
        where = f"openai-responses stream: {kind!r} event"
        if kind == "response.output_text.delta":
            at = (
                member(data, "output_index", int, where),
                member(data, "content_index", int, where),
            )
            self.texts.setdefault(at, []).append(member(data, "delta", str, where))
        elif kind == "response.function_call_arguments.delta":
            index = member(data, "output_index", int, where)
            self.arguments.setdefault(index, []).append(member(data, "delta", str, where))
        elif kind == "response.output_item.done":
            index = member(data, "output_index", int, where)
            if index in self.items:
                raise ResponseError(f"{where}: output {index} is done twice", retry_safe=False)
            self.items[index] = member(data, "item", dict, where)
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
        items = member(final, "output", list, "openai-responses final response")
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
