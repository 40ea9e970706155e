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
``thinking``, ``redacted_thinking``, :class:`OpaquePart` ``anthropic``: the block as received,
server tool blocks             sent back verbatim (checked against the request schema:
                               a thinking block needs its signature; a server tool
                               block is held to its SDK param type, member by member)
anything else                  refused (:class:`ResponseError`): a type this reader does
                               not know is never kept nor dropped
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
from .anthropic_server_blocks import BLOCKS, SHAPES
from .base import (
    RETRY_STATUSES,
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


#: Each citation type a cited text block may carry, and its members: exactly those of
#: the request's ``TextCitationParam`` (anthropic-sdk-python ``types/citation_*_param.py``),
#: since the block is sent back as received. (str, int or None-able str per member.)
CITATIONS: Mapping[str, Mapping[str, tuple[type[Any], ...]]] = {
    "char_location": {
        "cited_text": (str,),
        "document_index": (int,),
        "document_title": (str, type(None)),
        "start_char_index": (int,),
        "end_char_index": (int,),
    },
    "page_location": {
        "cited_text": (str,),
        "document_index": (int,),
        "document_title": (str, type(None)),
        "start_page_number": (int,),
        "end_page_number": (int,),
    },
    "content_block_location": {
        "cited_text": (str,),
        "document_index": (int,),
        "document_title": (str, type(None)),
        "start_block_index": (int,),
        "end_block_index": (int,),
    },
    "web_search_result_location": {
        "cited_text": (str,),
        "encrypted_index": (str,),
        "title": (str, type(None)),
        "url": (str,),
    },
    "search_result_location": {
        "cited_text": (str,),
        "search_result_index": (int,),
        "source": (str,),
        "start_block_index": (int,),
        "end_block_index": (int,),
        "title": (str, type(None)),
    },
}

# Server tool blocks (``server_tool_use`` and the results of Anthropic-run tools) are
# kept whole and sent back: each is held to the request schema of its type (generated
# from the SDK's param types: ``anthropic_server_blocks.BLOCKS``), so a block the next
# request could not carry is a ResponseError, never recorded.

#: What a schema leaf takes (``bool`` is no number), and its name in an error.
_LEAVES: Mapping[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str), "a string"),
    "int": (lambda v: type(v) is int, "an integer"),
    "number": (lambda v: type(v) in (int, float), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "null": (lambda v: v is None, "null"),
    "any": (lambda v: True, "any value"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "never": (lambda v: False, "no JSON value (a file upload)"),
}


def _conform(value: Any, spec: Any, where: str) -> None:
    """Raise :class:`ResponseError` naming the first member of ``value`` (at ``where``)
    that the schema value ``spec`` (see :mod:`.anthropic_server_blocks`) refuses."""
    if isinstance(spec, str):
        test, words = _LEAVES[spec]
        if not test(value):
            raise ResponseError(f"{where}: expected {words}", retry_safe=False)
        return
    kind, *args = spec
    if kind == "literal":
        if isinstance(value, bool) or value not in args:
            shown = " or ".join(repr(a) for a in args)
            raise ResponseError(f"{where}: expected {shown}", retry_safe=False)
    elif kind == "list":
        if not isinstance(value, list):
            raise ResponseError(f"{where}: expected a list", retry_safe=False)
        for i, item in enumerate(value):
            _conform(item, args[0], f"{where}[{i}]")
    elif kind == "shape":
        if not isinstance(value, dict):
            raise ResponseError(f"{where}: expected an object", retry_safe=False)
        members = SHAPES[args[0]]
        only(value, frozenset(members), where)
        for key, (required, member_spec) in members.items():
            if key in value:
                _conform(value[key], member_spec, f"{where}.{key}")
            elif required:
                raise ResponseError(f"{where}: {key!r} is missing", retry_safe=False)
    else:  # a union: the form its ``type`` names, else the first that takes it
        problems: list[ResponseError] = []
        for option in args:
            try:
                _conform(value, option, where)
            except ResponseError as err:
                problems.append(err)
                continue
            return
        # the form the value is meant as: the one list form for a list, the shape whose
        # ``type`` it names for an object; its error is the one worth reading
        meant = [p for o, p in zip(args, problems, strict=True) if _meant(o, value)]
        if len(meant) == 1:
            raise meant[0]
        raise ResponseError(
            f"{where}: matches none of the forms the request schema allows", retry_safe=False
        )


def _meant(spec: Any, value: Any) -> bool:
    """Whether ``value`` is meant as ``spec``: a list as a list form, an object as the
    shape whose ``type`` literal is the object's ``type``."""
    if isinstance(spec, list) and spec[0] == "list":
        return isinstance(value, list)
    if not (isinstance(spec, list) and spec[0] == "shape" and isinstance(value, dict)):
        return False
    kind = SHAPES[spec[1]].get("type")
    return kind is not None and isinstance(kind[1], list) and value.get("type") in kind[1][1:]


_TEXT_KEYS = frozenset({"type", "text", "citations"})


def _citation(value: Any, where: str) -> None:
    if not isinstance(value, dict):
        raise ResponseError(f"{where}: expected a citation object", retry_safe=False)
    kind = value.get("type")
    fields = CITATIONS.get(kind) if isinstance(kind, str) else None
    if fields is None:
        raise ResponseError(f"{where}: unknown citation type {kind!r}", retry_safe=False)
    only(value, frozenset({"type", *fields}), where)
    for key, kinds in fields.items():
        member(value, key, kinds, where)


def _part(
    block: Mapping[str, Any], where: str = "anthropic content block", provider: str = NAME
) -> Part:
    """The part of one content block, its members checked against the wire schema (the
    request's, for a block sent back as received) first: a block the Messages API would
    refuse in the next request is a :class:`ResponseError`, never a part."""
    kind = block.get("type")
    if not isinstance(kind, str):
        raise ResponseError(f"{where}: a content block without a type", retry_safe=False)
    where = f"{where} {kind!r}"
    if kind == "text":
        value = member(block, "text", str, where)
        citations = member(block, "citations", (list, type(None)), where, required=False)
        only(block, _TEXT_KEYS, where)
        if not citations:
            return text(value)  # no citations: an absent key, null or []
        if not value.strip():  # blank text blocks are refused (DESIGN, Providers)
            raise ResponseError(f"{where}: a cited text is blank", retry_safe=False)
        for i, citation in enumerate(citations):
            _citation(citation, f"{where}.citations[{i}]")
        return opaque(provider, block)
    if kind == "tool_use":
        call_id, name, args = block.get("id"), block.get("name"), block.get("input")
        if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(args, dict)):
            raise ResponseError(
                "anthropic tool_use block needs a string id and name and an input object",
                retry_safe=False,
            )
        return tool_call(call_id, name, canonical.dumps(args))
    if kind == "thinking":
        # ThinkingBlockParam: thinking and signature required; a thinking block without
        # its signature is refused when it is sent back
        member(block, "thinking", str, where)
        if not member(block, "signature", str, where):
            raise ResponseError(f"{where}: the signature is empty", retry_safe=False)
        only(block, frozenset({"type", "thinking", "signature"}), where)
        return opaque(provider, block)
    if kind == "redacted_thinking":
        if not member(block, "data", str, where):
            raise ResponseError(f"{where}: the data is empty", retry_safe=False)
        only(block, frozenset({"type", "data"}), where)
        return opaque(provider, block)
    server = BLOCKS.get(kind)
    if server is None:
        # A type this reader does not know could be anything, a mangled tool_use among
        # them: dropping it would lose a call, keeping it would send the service a block
        # it may refuse.
        raise ResponseError(f"{where}: unknown content block type", retry_safe=False)
    _conform(block, ["shape", server[1]], where)
    return opaque(provider, block)


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


def _block(block: Any, index: int, provider: str = NAME) -> Part:
    if not isinstance(block, dict):
        raise ResponseError(
            f"anthropic content block {index}: expected an object", retry_safe=False
        )
    return _part(block, f"anthropic content block {index}", provider)


def message_output(
    message: Mapping[str, Any], content: list[Any], provider: str = NAME
) -> ModelOutput:
    """The output of a Messages API ``message`` (its ``content`` given apart: a stream
    builds it) as ``provider``'s (its opaque parts carry that name)."""
    raw_usage = message.get("usage")
    stop = message.get("stop_reason")
    model = message.get("model")
    return output(
        provider,
        [_block(block, i, provider) for i, block in enumerate(content)],
        stop if isinstance(stop, str) else None,
        _usage(raw_usage) if isinstance(raw_usage, dict) else None,
        model if isinstance(model, str) else None,
        message.get("id"),  # "msg_...": the message's id, in message_start when streamed
    )


def _error(body: Mapping[str, Any]) -> ResponseError:
    error = body.get("error")
    error = error if isinstance(error, dict) else {}
    kind = error.get("type")
    return ResponseError(
        f"anthropic error {kind}: {error.get('message', '')}",
        retry_safe=isinstance(kind, str) and kind in RETRY_ERROR_TYPES,
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
        return message_output(message, content, self.name)

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
        kind = error.get("type") if isinstance(error, dict) else None
        return isinstance(kind, str) and kind in RETRY_ERROR_TYPES


class AnthropicStream(SSEStreamReader):
    """Blocks rebuilt at their ``index`` from start, deltas and stop.

    The deltas carry no sequence numbers, so a lost or repeated event is caught only
    where the stream's grammar shows it (docs/providers.md, "Stream integrity"): a block
    must start at the next index (0, 1, 2, ...), once; a delta or stop must name a
    started block that has not stopped; every block must stop before ``message_stop``;
    ``message_start`` comes once. A lost or repeated text delta inside a block cannot be
    told from the model's own text."""

    def __init__(self, provider: str = NAME) -> None:
        super().__init__()
        #: the provider whose output this is (its opaque parts carry the name)
        self.provider = provider
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stopped: set[int] = set()
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
        if not isinstance(kind, str):
            raise ResponseError("anthropic stream: an event type is not a string", retry_safe=False)
        handler = self.handlers.get(kind)
        if handler is None:
            return  # new event types are ignored, as the API versioning policy asks
        if kind != "message_start" and kind != "ping" and self.message is None:
            raise ResponseError(f"anthropic stream: {kind} before message_start", retry_safe=False)
        handler(data)

    def message_start(self, data: dict[str, Any]) -> None:
        if self.message is not None:
            raise ResponseError("anthropic stream: a second message_start", retry_safe=False)
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
        if index in self.stopped:
            raise ResponseError(
                f"anthropic stream: {data.get('type')} for block {index}, which has stopped",
                retry_safe=False,
            )
        return index, self.blocks[index]

    def block_start(self, data: dict[str, Any]) -> None:
        index, block = data.get("index"), data.get("content_block")
        if type(index) is not int or index in self.blocks or not isinstance(block, dict):
            raise ResponseError(
                f"anthropic stream: bad content_block_start at index {index!r}", retry_safe=False
            )
        if index != len(self.blocks):
            raise ResponseError(
                f"anthropic stream: content_block_start at index {index}, expected "
                f"{len(self.blocks)} (an event is missing)",
                retry_safe=False,
            )
        self.blocks[index] = dict(block)

    def block_delta(self, data: dict[str, Any]) -> None:
        index, block = self._block(data)
        delta = data.get("delta")
        if not isinstance(delta, dict):
            raise ResponseError(
                f"anthropic stream: content_block_delta {index} without a delta", retry_safe=False
            )
        kind = delta.get("type")
        where = f"anthropic stream: block {index} {kind!r} delta"
        if kind == "input_json_delta":
            self.json.setdefault(index, []).append(member(delta, "partial_json", str, where))
        elif kind == "citations_delta":
            citation = member(delta, "citation", dict, where)
            citations = block.get("citations")
            block["citations"] = [*(citations if isinstance(citations, list) else ()), citation]
        elif isinstance(kind, str) and kind in DELTA_FIELDS:
            field, source = DELTA_FIELDS[kind]
            before = block.get(field) or ""
            if not isinstance(before, str):
                raise ResponseError(
                    f"{where}: the block's {field} is not a string", retry_safe=False
                )
            block[field] = before + member(delta, source, str, where)
        else:
            raise ResponseError(f"anthropic stream: unknown delta type {kind!r}", retry_safe=False)

    def block_stop(self, data: dict[str, Any]) -> None:
        index, block = self._block(data)
        self.stopped.add(index)
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
            before = self.message.get("usage")
            merged = dict(before) if isinstance(before, dict) else {}
            merged.update({k: v for k, v in update.items() if v is not None})
            self.message["usage"] = merged

    def message_stop(self, data: dict[str, Any]) -> None:
        assert self.message is not None
        if self.message.get("stop_reason") is None:  # message_delta carries it, always
            raise ResponseError(
                "anthropic stream: message_stop without a stop reason (the message_delta "
                "is missing)",
                retry_safe=False,
            )
        open_blocks = sorted(set(self.blocks) - self.stopped)
        if open_blocks:
            raise ResponseError(
                f"anthropic stream: message_stop before block {open_blocks[0]} stopped "
                "(an event is missing)",
                retry_safe=False,
            )
        self.done = True

    def output(self) -> ModelOutput:
        assert self.message is not None
        blocks = [self.blocks[i] for i in sorted(self.blocks)]
        return message_output(self.message, blocks, self.provider)
