"""OpenAI Chat Completions responses: a ``ChatCompletion`` body or its SSE stream.

Mapping (openai-python ``types/chat/chat_completion.py``, ``chat_completion_chunk.py``),
of one choice (with ``n > 1`` the caller picks it, ``candidate=i``; see
:func:`~.base.pick`): ``message.content`` -> one text part; ``message.refusal`` -> an
opaque ``{"refusal": ..., "type": "refusal"}`` part, which the serializer sends back as
the assistant content part of that shape (``ChatCompletionContentPartRefusalParam``);
``message.tool_calls[]`` -> tool calls (``id``, ``function.name``, ``function.arguments``
verbatim, except that empty arguments read as ``{}``: see :func:`call_arguments`); an
audio reply (``modalities: ["text", "audio"]``: no ``content``, ``message.audio``) -> its
``transcript`` as the text part: the audio ``id`` expires (``expires_at``), so a history
that every later call repeats cannot hold it, and the serializer sends the text back as
the assistant's content. Stop reason: ``finish_reason``. Usage: ``prompt_tokens``
(cached included), ``prompt_tokens_details.cached_tokens``, ``completion_tokens``,
``completion_tokens_details.reasoning_tokens``;
``prompt_tokens_details.cache_write_tokens`` where reported (newer API versions), else
``None``.

Stream: ``data: {chunk}`` lines ending with ``data: [DONE]``. Content, refusal and each
tool call's ``arguments`` arrive as string deltas (tool calls by ``index``) that are
concatenated exactly; with ``stream_options.include_usage`` the last chunk has empty
``choices`` and the usage. A ``data: {"error": ...}`` line (sent with HTTP 200) fails the
stream, as the official SDK does.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ...core.errors import ResponseError
from ...core.messages import Part
from ...core.output import ModelOutput, Usage
from .base import (
    Reader,
    SSEStreamReader,
    StreamReader,
    count,
    load_object,
    member,
    opaque,
    output,
    pick,
    text,
    tool_call,
    usage,
)
from .sse import Event

__all__ = ["OpenAIChatReader", "call_arguments", "error_failure", "openai_retryable"]

NAME = "openai-chat"

#: Error codes and types that a later identical request may get past
#: (platform.openai.com/docs/guides/error-codes: 429 "Rate limit reached" -- "pace your
#: requests"; 500 "The server had an error" / 503 "overloaded" -- "retry after a brief
#: wait"; ``vector_store_timeout`` of the Responses ``ResponseError`` codes).
RETRY_SAFE_CODES = frozenset({"rate_limit_exceeded", "server_error", "vector_store_timeout"})


def error_failure(where: str, error: Any) -> ResponseError:
    """A :class:`ResponseError` for an OpenAI error object (``code``, ``type``,
    ``message``); retry-safe when its code or type is a rate limit or a server error."""
    if not isinstance(error, dict):
        return ResponseError(f"{where}: {error!r}", retry_safe=False)
    code = error.get("code")
    kind = error.get("type")
    label = " / ".join(str(v) for v in (code, kind) if v is not None) or "no code"
    safe = any(isinstance(v, str) and v in RETRY_SAFE_CODES for v in (code, kind))
    named = code if isinstance(code, str) else kind if isinstance(kind, str) else None
    return ResponseError(
        f"{where} ({label}): {error.get('message')}", retry_safe=safe, error_type=named
    )


def openai_retryable(status: int, body: bytes) -> bool:
    """408, 409, 429 and 5xx are what the official SDK retries (openai-python
    ``_base_client._should_retry``); a 429 whose code is ``insufficient_quota`` ("You
    exceeded your current quota", platform.openai.com/docs/guides/error-codes) is not
    cured by waiting."""
    if not (status in (408, 409, 429) or status >= 500):
        return False
    if status == 429:
        try:
            error = load_object(body).get("error")
        except ResponseError:
            return True
        if isinstance(error, dict) and "insufficient_quota" in (
            error.get("code"),
            error.get("type"),
        ):
            return False
    return True


def _details(value: Any) -> dict[str, Any]:
    """A usage details object (counts only: a value of another shape counts nothing)."""
    return value if isinstance(value, dict) else {}


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    prompt = _details(raw.get("prompt_tokens_details"))
    completion = _details(raw.get("completion_tokens_details"))
    return usage(
        raw,
        input_tokens=count(raw.get("prompt_tokens")),
        cache_read_tokens=count(prompt.get("cached_tokens")),
        cache_write_tokens=count(prompt.get("cache_write_tokens")),
        output_tokens=count(raw.get("completion_tokens")),
        reasoning_tokens=count(completion.get("reasoning_tokens")),
    )


def _parts(
    content: str | None,
    refusal: str | None,
    calls: list[tuple[str, str, str]],
    transcript: str | None = None,
) -> list[Part]:
    parts: list[Part] = []
    if content or transcript:
        parts.append(text(content or transcript or ""))
    if refusal:
        parts.append(opaque(NAME, {"refusal": refusal, "type": "refusal"}))
    parts.extend(tool_call(*call) for call in calls)
    return parts


def _transcript(audio: Any) -> str | None:
    """The transcript of an audio reply's ``audio`` object (or delta), if any."""
    if isinstance(audio, dict) and isinstance(audio.get("transcript"), str):
        return str(audio["transcript"])
    return None


def call_arguments(arguments: str) -> str:
    """A tool call's argument string as recorded: verbatim, but ``"{}"`` when it is empty
    or whitespace-only. The API sends ``arguments: ""`` for a call of a tool without
    parameters (openai/openai-python#3502, langchain-ai/langchain#13467; OpenAI-compatible
    servers too, vllm-project/vllm#19419), which is no JSON object and so could not be
    recorded; it means no arguments, as the Anthropic and Bedrock readers read an empty
    input. Used by the Responses reader as well."""
    return arguments if arguments.strip() else "{}"


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ResponseError(f"openai-chat {what}: expected a string", retry_safe=False)
    return value


class OpenAIChatReader(Reader):
    name: ClassVar[str] = NAME

    def parse_response(self, body: bytes, *, candidate: int | None = None) -> ModelOutput:
        data = load_object(body)
        if "error" in data:
            raise error_failure("openai-chat error", data["error"])
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ResponseError("openai-chat response: no choices", retry_safe=False)
        if not all(isinstance(c, dict) for c in choices):
            raise ResponseError("openai-chat response: a choice is not an object", retry_safe=False)
        choice = pick(NAME, choices, candidate, "choices")
        where = "openai-chat response: choice"
        message = member(choice, "message", (dict, type(None)), where, required=False) or {}
        where += ".message"
        calls = []
        for i, call in enumerate(
            member(message, "tool_calls", (list, type(None)), where, required=False) or ()
        ):
            at = f"{where}.tool_calls[{i}]"
            if not isinstance(call, dict):
                raise ResponseError(f"{at}: expected an object", retry_safe=False)
            function = member(call, "function", dict, at)
            calls.append(
                (
                    member(call, "id", str, at),
                    member(function, "name", str, f"{at}.function"),
                    call_arguments(member(function, "arguments", str, f"{at}.function")),
                )
            )
        return output(
            NAME,
            _parts(
                member(message, "content", (str, type(None)), where, required=False),
                member(message, "refusal", (str, type(None)), where, required=False),
                calls,
                _transcript(message.get("audio")),
            ),
            member(choice, "finish_reason", (str, type(None)), where[:-8], required=False),
            _usage(data.get("usage")),
            member(data, "model", (str, type(None)), "openai-chat response", required=False),
            data.get("id"),  # "chatcmpl-..."
        )

    def stream_reader(self, *, candidate: int | None = None) -> StreamReader:
        return OpenAIChatStream(candidate)

    def is_retryable(self, status: int, body: bytes) -> bool:
        return openai_retryable(status, body)


class OpenAIChatStream(SSEStreamReader):
    def __init__(self, candidate: int | None = None) -> None:
        super().__init__()
        #: the choice to read; ``None``: the only one (a second one fails the stream)
        self.candidate = candidate
        self.seen = False
        self.content: list[str] = []
        self.refusal: list[str] = []
        self.transcript: list[str] = []
        #: tool call index -> [id, name, argument deltas]
        self.calls: dict[int, tuple[list[str], list[str], list[str]]] = {}
        self.finish: str | None = None
        self.used: Usage | None = None
        self.model: str | None = None
        #: the ``id`` every chunk repeats ("chatcmpl-..."); a chunk with another is refused
        self.response_id: str | None = None

    def on_event(self, event: Event) -> None:
        if event.data == "[DONE]":
            self.done = True
            return
        chunk = self.data(event)
        if "error" in chunk:
            raise error_failure("openai-chat stream error", chunk["error"])
        where = "openai-chat stream chunk"
        self.model = member(chunk, "model", (str, type(None)), where, required=False) or self.model
        chunk_id = member(chunk, "id", (str, type(None)), where, required=False)
        if chunk_id:
            if self.response_id is not None and chunk_id != self.response_id:
                raise ResponseError(
                    f"{where}: id {chunk_id!r} after {self.response_id!r} (chunks of another "
                    "response)",
                    retry_safe=False,
                )
            self.response_id = chunk_id
        if chunk.get("usage") is not None:
            self.used = _usage(chunk["usage"])
        choices = member(chunk, "choices", (list, type(None)), where, required=False) or ()
        for choice in choices:
            if not isinstance(choice, dict):
                raise ResponseError(f"{where}: a choice is not an object", retry_safe=False)
            index = choice.get("index", 0)
            if type(index) is not int:
                raise ResponseError(f"{where}: a choice index is not an integer", retry_safe=False)
            if self.candidate is None and index != 0:
                raise ResponseError(
                    f"openai-chat stream carries choice {index!r} besides choice 0 (n > 1): "
                    "pick the one to record with candidate=i",
                    retry_safe=False,
                )
            if index != (self.candidate or 0):
                continue
            self.seen = True
            self.choice(choice, f"{where}: choice {index}")

    def choice(self, choice: dict[str, Any], where: str) -> None:
        delta = member(choice, "delta", (dict, type(None)), where, required=False) or {}
        where += " delta"
        content = member(delta, "content", (str, type(None)), where, required=False)
        if content:
            self.content.append(content)
        refusal = member(delta, "refusal", (str, type(None)), where, required=False)
        if refusal:
            self.refusal.append(refusal)
        said = _transcript(delta.get("audio"))
        if said:
            self.transcript.append(said)
        for call in member(delta, "tool_calls", (list, type(None)), where, required=False) or ():
            if not isinstance(call, dict):
                raise ResponseError(f"{where}: a tool call is not an object", retry_safe=False)
            self.call(call, where)
        finish = member(choice, "finish_reason", (str, type(None)), where, required=False)
        if finish is not None:
            self.finish = finish

    def call(self, call: dict[str, Any], where: str) -> None:
        """One tool call delta. The deltas carry no sequence numbers; what a lost or
        repeated one shows is caught (docs/providers.md, "Stream integrity"): a call's
        first delta carries its id and name and its index is the next one (0, 1, ...);
        a later delta of it carries neither again."""
        index = member(call, "index", int, where + " tool call")
        at = f"{where} tool call {index}"
        call_id = member(call, "id", (str, type(None)), at, required=False)
        function = member(call, "function", (dict, type(None)), at, required=False) or {}
        name = member(function, "name", (str, type(None)), at, required=False)
        arguments = member(function, "arguments", (str, type(None)), at, required=False)
        if index not in self.calls:
            if index != len(self.calls):
                raise ResponseError(
                    f"{at}: starts after call {len(self.calls) - 1} (an event is missing)",
                    retry_safe=False,
                )
            if not call_id or not name:
                raise ResponseError(
                    f"{at}: its first delta has no id or name (an event is missing)",
                    retry_safe=False,
                )
            self.calls[index] = ([], [], [])
        elif call_id or name:
            raise ResponseError(f"{at}: started twice (an event is repeated)", retry_safe=False)
        ids, names, parts = self.calls[index]
        if call_id:
            ids.append(call_id)
        if name:
            names.append(name)
        if arguments:
            parts.append(arguments)

    def output(self) -> ModelOutput:
        if not self.seen and self.candidate:
            raise ResponseError(
                f"openai-chat stream has no choice {self.candidate}", retry_safe=False
            )
        calls = [
            ("".join(ids), "".join(names), call_arguments("".join(arguments)))
            for _, (ids, names, arguments) in sorted(self.calls.items())
        ]
        return output(
            NAME,
            _parts("".join(self.content), "".join(self.refusal), calls, "".join(self.transcript)),
            self.finish,
            self.used,
            self.model,
            self.response_id,
        )
