"""Shared canonical inputs for the provider tests (not a test module).

Every case is a :class:`ModelRequest` built directly from ``compiler.model`` /
``compiler.messages`` values, so provider tests need no history machinery. Provider
test files pair these inputs with their exact expected bodies (sqlglot's
``validate_all``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from sdk_judge import assert_valid

from compiler import canonical
from compiler.errors import SerializationError
from compiler.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    Part,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from compiler.model import CacheHint, CachePosition, ModelRequest, ProviderSettings, ToolSpec
from providers import get

CONVERSATION = "conv-1"
CACHE_KEY = "prefixlock:conv-1"
INSTRUCTIONS = "You are a coding agent.\nBe brief."

_ROLES = {
    MessageKind.REQUEST_CONTEXT: Role.USER,
    MessageKind.RUNTIME: Role.USER,
    MessageKind.EVENT: Role.USER,
    MessageKind.SUMMARY: Role.USER,
    MessageKind.ASSISTANT: Role.ASSISTANT,
    MessageKind.TOOL_RESULT: Role.TOOL,
}

READ_FILE = ToolSpec(
    name="read_file",
    description="Read a file.",
    parameters=canonical.dumps(
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    ),
)
GREP = ToolSpec(
    name="grep",
    description="Search files.",
    parameters=canonical.dumps(
        {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]}
    ),
)
TOOLS = (READ_FILE, GREP)

SETTINGS = (
    ProviderSettings("anthropic", "claude-sonnet-4-5", 4096),
    ProviderSettings("bedrock-converse", "anthropic.claude-sonnet-4-5-v1:0", 4096),
    ProviderSettings("gemini", "gemini-2.5-pro", 4096),
    ProviderSettings("openai-chat", "gpt-4.1", 4096),
    ProviderSettings("openai-responses", "gpt-5", 4096),
)

#: A tiny valid PNG (1x1), base64.
PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9aw"
    "AAAABJRU5ErkJggg=="
)

# Opaque blocks, as each provider returned them (canonical JSON text).
ANTHROPIC_THINKING = canonical.dumps(
    {"type": "thinking", "thinking": "Check the file first.", "signature": "sig-EqQBCkYIBxgCKkA"}
)
ANTHROPIC_REDACTED = canonical.dumps({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"})
RESPONSES_REASONING = canonical.dumps(
    {
        "type": "reasoning",
        "id": "rs_0123",
        "summary": [],
        "encrypted_content": "gAAAAABo-encrypted",
    }
)


def msg(kind: MessageKind, id: str, *parts: Part) -> CanonicalMessage:
    return CanonicalMessage.create(id, kind, _ROLES[kind], tuple(parts))


def context(event: str, text: str) -> CanonicalMessage:
    return msg(MessageKind.REQUEST_CONTEXT, f"request-context:{event}", TextPart(text))


def runtime(event: str, text: str) -> CanonicalMessage:
    return msg(MessageKind.RUNTIME, f"runtime:{event}", TextPart(text))


def event(event: str, text: str) -> CanonicalMessage:
    return msg(MessageKind.EVENT, f"event:{event}", TextPart(text))


def assistant(n: int, *parts: Part) -> CanonicalMessage:
    return msg(MessageKind.ASSISTANT, f"assistant:{n}", *parts)


def results(*parts: ToolResultPart | Part) -> CanonicalMessage:
    first = next(p.call_id for p in parts if isinstance(p, ToolResultPart))
    return msg(MessageKind.TOOL_RESULT, f"tool-results:{first}", *parts)


def call(call_id: str, name: str, **arguments: object) -> ToolCallPart:
    return ToolCallPart(call_id, name, canonical.dumps(arguments))


def hints_for(messages: Sequence[CanonicalMessage]) -> tuple[CacheHint, ...]:
    """The fixed rule the projection follows: tools, instructions, latest context, tail."""
    out = [CacheHint(CachePosition.TOOLS), CacheHint(CachePosition.INSTRUCTIONS)]
    latest = [i for i, m in enumerate(messages) if m.kind == MessageKind.REQUEST_CONTEXT]
    if latest:
        out.append(CacheHint(CachePosition.CONTEXT, latest[-1]))
    if messages:
        out.append(CacheHint(CachePosition.TAIL, len(messages) - 1))
    return tuple(out)


def request(
    *messages: CanonicalMessage,
    instructions: str = INSTRUCTIONS,
    tools: tuple[ToolSpec, ...] = TOOLS,
    settings: tuple[ProviderSettings, ...] = SETTINGS,
    hints: tuple[CacheHint, ...] | None = None,
    epoch: int = 0,
) -> ModelRequest:
    return ModelRequest(
        conversation_id=CONVERSATION,
        instructions=instructions,
        tools=tools,
        settings=settings,
        messages=tuple(messages),
        cache_hints=hints_for(messages) if hints is None else hints,
        cache_key=CACHE_KEY,
        epoch=epoch,
    )


# ------------------------------------------------------------------------------ cases

CTX = context("u1", "<rules>use tabs</rules>")
RT = runtime("u1", "Fix the bug in app.py")


def simple() -> ModelRequest:
    """One user turn: request-context then runtime (two user messages, never merged)."""
    return request(CTX, RT)


def tool_loop() -> ModelRequest:
    """A tool loop with two parallel calls, one failing, then a background event."""
    return request(
        CTX,
        RT,
        assistant(
            1,
            TextPart("Let me look."),
            call("call_a", "read_file", path="app.py"),
            call("call_b", "grep", pattern="TODO"),
        ),
        results(
            ToolResultPart("call_a", "print('hi')\n"),
            ToolResultPart("call_b", "no such pattern", is_error=True),
        ),
        event("b1", "Background build finished."),
        assistant(2, TextPart("Done.")),
    )


def opaque(provider: str, data: str) -> ModelRequest:
    """An assistant turn carrying ``provider``'s opaque block before its tool call."""
    return request(
        CTX,
        RT,
        assistant(
            1,
            OpaquePart(provider, data),
            TextPart("Reading."),
            call("call_a", "read_file", path="app.py"),
        ),
        results(ToolResultPart("call_a", "x = 1\n")),
    )


UNICODE_TEXT = "emoji 🧪👩‍💻, CJK 漢字かなカナ, RTL שלום עליכם مرحبا, NUL \x00 end, tab\t, crlf\r\n"


def unicode() -> ModelRequest:
    return request(CTX, runtime("u1", UNICODE_TEXT), assistant(1, TextPart("ok 👍")))


LONG_TEXT = "".join(f"line {i}: {'x' * 60}\n" for i in range(20_000))


def long_text() -> ModelRequest:
    return request(CTX, runtime("u1", LONG_TEXT))


def lone_surrogate() -> ModelRequest:
    """A lone surrogate in a message. ``CanonicalMessage.create`` already refuses one (its
    digest is canonical JSON), so this message is built raw, as a corrupt store might."""
    bad = CanonicalMessage(
        "runtime:u1", MessageKind.RUNTIME, Role.USER, (TextPart("bad \ud800 text"),), RT.digest
    )
    return request(CTX, bad)


def lone_surrogate_instructions() -> ModelRequest:
    return request(CTX, RT, instructions="bad \udfff instructions")


def image() -> ModelRequest:
    return request(
        CTX,
        msg(
            MessageKind.RUNTIME,
            "runtime:u1",
            TextPart("What is in this screenshot?"),
            ImagePart("image/png", PNG_B64),
        ),
    )


def image_in_tool_result() -> ModelRequest:
    return request(
        CTX,
        RT,
        assistant(1, call("call_a", "read_file", path="shot.png")),
        results(ToolResultPart("call_a", "see image"), ImagePart("image/png", PNG_B64)),
    )


def empty_text() -> ModelRequest:
    return request(CTX, runtime("u1", ""))


def long_tool_name() -> ModelRequest:
    """A call whose name exceeds every provider's limit (129 characters)."""
    return request(CTX, RT, assistant(1, call("call_a", "t" * 129, path="a")))


def bad_tool_name_chars() -> ModelRequest:
    return request(CTX, RT, assistant(1, call("call_a", "read.file", path="a")))


# ---------------------------------------------------------------------------- checks


def produce(name: str, req: ModelRequest) -> dict[str, Any]:
    """Serialize ``req`` for ``name`` and check what every body must satisfy: the bytes are
    the canonical encoding of :meth:`body`, a second call (cached) gives the same bytes,
    and the strict SDK judge finds no problem. Returns the body."""
    provider = get(name)
    data = provider.serialize(req)
    body = provider.body(req)
    assert data == canonical.dumpb(body)
    assert provider.serialize(req) == data  # from the fragment cache
    assert canonical.loads(data) == body
    assert_valid(name, body)
    return body


def refused(name: str, req: ModelRequest, *fragments: str) -> str:
    """Assert both serialize() and body() refuse ``req`` with a SerializationError whose
    message contains every fragment; return the message."""
    with pytest.raises(SerializationError) as info:
        get(name).serialize(req)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    with pytest.raises(SerializationError) as again:
        get(name).body(req)
    assert str(again.value) == message
    return message


def assert_wire(body: dict[str, Any], expected: dict[str, Any]) -> None:
    """Equal values *and* equal key order at every level (expected literals are written
    in wire order; JSON-Schema objects in canonical, sorted order)."""
    assert body == expected
    assert json.dumps(body, ensure_ascii=False) == json.dumps(expected, ensure_ascii=False)
