"""Shared canonical inputs and checks for the provider tests (not a test module).

Every case is a :class:`ModelRequest` built directly from ``prefixlock.core.model`` /
``prefixlock.core.messages`` values, so provider tests need no history machinery. Provider
test files pair these inputs with their exact expected bodies (sqlglot's
``validate_all``). Also here: each provider's own opaque block (:data:`OWN_OPAQUE`),
seeded random histories (:func:`random_history`) and the checks every body must pass
(:func:`produce`, :func:`refused`, :func:`replay_prefixes`).
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from prefixlock.core import canonical
from prefixlock.core.errors import SerializationError, SpecErrors
from prefixlock.core.messages import (
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
from prefixlock.core.model import CacheHint, CachePosition, ModelRequest, ProviderSettings, ToolSpec
from prefixlock.providers import get
from prefixlock.review.compare import block_pairs
from prefixlock.spec.build import build_bundle
from sdk_judge import assert_valid

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
    ProviderSettings("bedrock-anthropic", "anthropic.claude-sonnet-4-5-v1:0", 4096),
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
#: A Gemini thought-summary part, exactly as the model sent it.
GEMINI_THOUGHT = canonical.dumps(
    {"text": "Considering app.py first.", "thought": True, "thoughtSignature": "CiQBcsjafA=="}
)
#: Bedrock Converse reasoning ContentBlocks, as the model returned them.
BEDROCK_REASONING = canonical.dumps(
    {"reasoningContent": {"reasoningText": {"text": "Check app.py.", "signature": "EqQBCkYI"}}}
)
BEDROCK_REDACTED = canonical.dumps({"reasoningContent": {"redactedContent": "ZW5jcnlwdGVk"}})

#: Each provider's own opaque block, for the providers that take one back as an
#: ``OpaquePart`` in an assistant message.
OWN_OPAQUE = {
    "anthropic": ANTHROPIC_THINKING,
    "bedrock-anthropic": ANTHROPIC_THINKING,
    "bedrock-converse": BEDROCK_REASONING,
    "gemini": GEMINI_THOUGHT,
    "openai-responses": RESPONSES_REASONING,
}


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


def with_options(req: ModelRequest, provider: str, **options: Any) -> ModelRequest:
    """``req`` with ``provider``'s settings carrying exactly ``options`` (canonical JSON);
    the other providers' settings unchanged."""
    settings = tuple(
        attrs.evolve(s, options=canonical.dumps(options)) if s.provider == provider else s
        for s in req.settings
    )
    return attrs.evolve(req, settings=settings)


def spec_with_providers(tmp_path: Path, providers_yaml: str) -> Path:
    """A copy of ``tests/data/specs/minimal`` under ``tmp_path`` whose
    ``rules/providers.yaml`` is ``providers_yaml``; returns its root."""
    root = tmp_path / "root"
    shutil.copytree(Path(__file__).parent / "data" / "specs" / "minimal", root)
    (root / "rules" / "providers.yaml").write_text(providers_yaml, encoding="utf-8")
    return root


def providers_yaml_errors(tmp_path: Path, providers_yaml: str) -> list[str]:
    """The build's errors for the minimal spec with ``providers_yaml``, each as printed
    (fails the test when the build succeeds)."""
    with pytest.raises(SpecErrors) as info:
        build_bundle(spec_with_providers(tmp_path, providers_yaml))
    return [str(e) for e in info.value.errors]


def produce(name: str, req: ModelRequest) -> dict[str, Any]:
    """Serialize ``req`` for ``name`` and check what every body must satisfy: the bytes are
    the canonical encoding of :meth:`wire_body` (the POSTed JSON), :meth:`body` is that
    plus the provider's ``URI_MEMBERS`` first (Bedrock's ``modelId``; none elsewhere), a
    second call (cached) gives the same bytes, and the strict SDK judge accepts
    :meth:`body` (the params as an SDK call takes them). Returns :meth:`body`."""
    provider = get(name)
    data = provider.serialize(req)
    wire = provider.wire_body(req)
    full = provider.body(req)
    assert data == canonical.dumpb(wire)
    assert provider.serialize(req) == data  # from the fragment cache
    assert canonical.loads(data) == wire
    uri = type(provider).URI_MEMBERS
    assert list(full) == [*uri, *wire]
    assert {k: v for k, v in full.items() if k not in uri} == wire
    assert_valid(name, full)
    return full


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


# ------------------------------------------------------------------- random histories

#: Texts the random histories draw from (unicode, NUL, whitespace, empty, long).
TEXTS = ("ok", "", "  spaced\n", UNICODE_TEXT, "漢字かな", "שלום", "🧪👩‍💻", "nul \x00", "x" * 5000)
#: Providers whose API rejects blank text blocks: their random histories never hold one.
REFUSE_BLANK_TEXT = frozenset({"anthropic", "bedrock-anthropic", "bedrock-converse"})


def random_history(seed: int, length: int, provider: str) -> list[CanonicalMessage]:
    """A valid canonical history of ``length`` messages: user turns (with or without a new
    request context, sometimes an image), background events, assistant turns with text,
    thought signatures, ``provider``'s own opaque parts and parallel tool calls, each call
    answered by the next message (results in a random order, some errors)."""
    rng = random.Random(seed)
    texts = tuple(t for t in TEXTS if t.strip()) if provider in REFUSE_BLANK_TEXT else TEXTS
    # A wire that needs a user message first (Bedrock) gets a history starting with one.
    first_role = type(get(provider)).FIRST_ROLE
    out: list[CanonicalMessage] = []
    pending: list[tuple[str, str]] = []
    n = 0
    while len(out) < length:
        n += 1
        if pending:
            rng.shuffle(pending)
            parts = [ToolResultPart(c, rng.choice(texts), rng.random() < 0.2) for c, _ in pending]
            out.append(results(*parts))
            pending = []
            continue
        kind = rng.choice(("user", "user", "event", "assistant", "assistant"))
        if not out and first_role == "user" and kind == "assistant":
            kind = "user"
        if kind == "user":
            if rng.random() < 0.4 or not out:
                out.append(context(f"u{n}", f"<rules>{rng.choice(texts)}</rules>"))
            user_parts: list[Part] = [TextPart(rng.choice(texts))]
            if rng.random() < 0.1:
                user_parts.append(ImagePart("image/png", PNG_B64))
            out.append(msg(MessageKind.RUNTIME, f"runtime:u{n}", *user_parts))
        elif kind == "event":
            out.append(event(f"b{n}", rng.choice(texts)))
        else:
            turn: list[Part] = []
            if rng.random() < 0.3:
                turn.append(OpaquePart(provider, OWN_OPAQUE[provider]))
            if rng.random() < 0.8:
                signature = "c2ln" if rng.random() < 0.3 else None
                turn.append(TextPart(rng.choice(texts), thought_signature=signature))
            for i in range(rng.choice((0, 0, 1, 2, 3))):
                call_id = f"call_{n}_{i}"
                name = rng.choice(("grep", "read_file"))
                signature = "Y2FsbA==" if rng.random() < 0.3 else None
                arguments = canonical.dumps({"q": rng.choice(texts), "n": i, "f": 0.5})
                turn.append(ToolCallPart(call_id, name, arguments, thought_signature=signature))
                pending.append((call_id, name))
            out.append(assistant(n, *(turn or [TextPart("ok")])))
    return out[:length]


def replay_prefixes(name: str, history: Sequence[CanonicalMessage]) -> list[dict[str, Any]]:
    """Serialize ``request(*history[:k])`` for every k through one long-lived instance and
    check each call: the bytes equal a fresh full encode (a new instance, and
    ``canonical.dumpb(wire_body)``); with cache markers stripped, every other field is
    equal and each history's (role, content block) pairs are a prefix of the next's;
    for a wire that does not merge same-role neighbours, each history list is moreover a
    structural prefix of the next with one wire item per message, and for one that does
    (Bedrock), the wire roles alternate; the strict SDK judge and the service rules
    accept the last body. Returns every :meth:`body`."""
    live = get(name)
    key = type(live).MESSAGES_KEY
    merged = type(live).MERGE_SAME_ROLE
    bodies: list[dict[str, Any]] = []
    previous: dict[str, Any] | None = None
    for k in range(1, len(history) + 1):
        req = request(*history[:k])
        data = live.serialize(req)
        fresh = get(name)
        assert data == canonical.dumpb(fresh.wire_body(req)) == fresh.serialize(req)
        full = fresh.body(req)
        stripped = fresh.strip_cache_markers(full)
        if previous is not None:
            old_pairs = block_pairs(previous[key])
            assert block_pairs(stripped[key])[: len(old_pairs)] == old_pairs
            if not merged:
                assert stripped[key][: len(previous[key])] == previous[key]
            assert {k: v for k, v in stripped.items() if k != key} == {
                k: v for k, v in previous.items() if k != key
            }
        if merged:
            roles = [item["role"] for item in full[key]]
            assert all(a != b for a, b in itertools.pairwise(roles))
        else:
            assert len(full[key]) == k  # 1:1
        bodies.append(full)
        previous = stripped
    if bodies:
        assert_valid(name, bodies[-1])
    return bodies
