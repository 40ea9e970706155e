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
    safe = code in RETRY_SAFE_CODES or kind in RETRY_SAFE_CODES
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


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, dict):
        return None
    prompt = raw.get("prompt_tokens_details") or {}
    completion = raw.get("completion_tokens_details") or {}
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
        message = choice.get("message") or {}
        calls = [
            (
                _string(call.get("id"), "tool call id"),
                _string(call["function"].get("name"), "tool call name"),
                call_arguments(_string(call["function"].get("arguments"), "tool call arguments")),
            )
            for call in message.get("tool_calls") or []
        ]
        return output(
            NAME,
            _parts(
                message.get("content"),
                message.get("refusal"),
                calls,
                _transcript(message.get("audio")),
            ),
            choice.get("finish_reason"),
            _usage(data.get("usage")),
            data.get("model"),
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

    def on_event(self, event: Event) -> None:
        if event.data == "[DONE]":
            self.done = True
            return
        chunk = self.data(event)
        if "error" in chunk:
            raise error_failure("openai-chat stream error", chunk["error"])
        self.model = chunk.get("model", self.model)
        if chunk.get("usage") is not None:
            self.used = _usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            if self.candidate is None and index != 0:
                raise ResponseError(
                    f"openai-chat stream carries choice {index!r} besides choice 0 (n > 1): "
                    "pick the one to record with candidate=i",
                    retry_safe=False,
                )
            if index != (self.candidate or 0):
                continue
            self.seen = True
            delta = choice.get("delta") or {}
            if delta.get("content"):
                self.content.append(delta["content"])
            if delta.get("refusal"):
                self.refusal.append(delta["refusal"])
            said = _transcript(delta.get("audio"))
            if said:
                self.transcript.append(said)
            for call in delta.get("tool_calls") or []:
                ids, names, arguments = self.calls.setdefault(call["index"], ([], [], []))
                if call.get("id"):
                    ids.append(call["id"])
                function = call.get("function") or {}
                if function.get("name"):
                    names.append(function["name"])
                if function.get("arguments"):
                    arguments.append(function["arguments"])
            if choice.get("finish_reason") is not None:
                self.finish = choice["finish_reason"]

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
        )
