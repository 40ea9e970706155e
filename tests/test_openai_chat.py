"""OpenAI Chat Completions: canonical inputs -> exact bodies (sqlglot validate_all style)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prefixlock.core import canonical
from prefixlock.core.messages import ImagePart, MessageKind, OpaquePart, TextPart, ToolResultPart
from prefixlock.core.model import ModelRequest, ProviderSettings, ToolSpec
from prefixlock.providers import get
from provider_cases import (
    ANTHROPIC_THINKING,
    CACHE_KEY,
    CTX,
    INSTRUCTIONS,
    LONG_TEXT,
    PNG_B64,
    RESPONSES_REASONING,
    RT,
    UNICODE_TEXT,
    assert_wire,
    assistant,
    bad_tool_name_chars,
    call,
    context,
    empty_text,
    event,
    image,
    image_in_tool_result,
    lone_surrogate,
    lone_surrogate_instructions,
    long_text,
    long_tool_name,
    msg,
    opaque,
    produce,
    refused,
    request,
    results,
    runtime,
    simple,
    tool_loop,
    unicode,
)

NAME = "openai-chat"

TOOLS_WIRE = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "type": "object",
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "grep",
            "description": "Search files.",
            "parameters": {
                "properties": {"pattern": {"type": "string"}},
                "required": ["pattern"],
                "type": "object",
            },
        },
    },
]
DEVELOPER = {"role": "developer", "content": INSTRUCTIONS}
CTX_WIRE = {"role": "user", "content": "<rules>use tabs</rules>"}
RT_WIRE = {"role": "user", "content": "Fix the bug in app.py"}


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "gpt-4.1",
        "max_completion_tokens": 4096,
        "tools": TOOLS_WIRE,
        "messages": [DEVELOPER, *messages],
        "prompt_cache_key": CACHE_KEY,
    }


CASES: dict[str, tuple[Callable[[], ModelRequest], dict[str, Any]]] = {
    "simple": (simple, body(CTX_WIRE, RT_WIRE)),
    "tool_loop_parallel": (
        tool_loop,
        body(
            CTX_WIRE,
            RT_WIRE,
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path":"app.py"}'},
                    },
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"pattern":"TODO"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "print('hi')\n"},
            {"role": "tool", "tool_call_id": "call_b", "content": "no such pattern"},
            {"role": "user", "content": "Background build finished."},
            {"role": "assistant", "content": "Done."},
        ),
    ),
    "unicode": (
        unicode,
        body(
            CTX_WIRE,
            {"role": "user", "content": UNICODE_TEXT},
            {"role": "assistant", "content": "ok 👍"},
        ),
    ),
    "long_text": (long_text, body(CTX_WIRE, {"role": "user", "content": LONG_TEXT})),
    "image": (
        image,
        body(
            CTX_WIRE,
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this screenshot?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                ],
            },
        ),
    ),
    "empty_text_is_fine": (empty_text, body(CTX_WIRE, {"role": "user", "content": ""})),
    "own_opaque_verbatim": (
        lambda: opaque(NAME, canonical.dumps({"type": "refusal", "refusal": "no"})),
        body(
            CTX_WIRE,
            RT_WIRE,
            {
                "role": "assistant",
                "content": [
                    {"refusal": "no", "type": "refusal"},
                    {"type": "text", "text": "Reading."},
                ],
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path":"app.py"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "x = 1\n"},
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_all(case: str) -> None:
    build, expected = CASES[case]
    assert_wire(produce(NAME, build()), expected)


def test_exact_bytes_simple() -> None:
    req = request(CTX, RT, tools=())
    assert get(NAME).serialize(req) == (
        b'{"model":"gpt-4.1","max_completion_tokens":4096,"messages":['
        b'{"role":"developer","content":"You are a coding agent.\\nBe brief."},'
        b'{"role":"user","content":"<rules>use tabs</rules>"},'
        b'{"role":"user","content":"Fix the bug in app.py"}],'
        b'"prompt_cache_key":"prefixlock:conv-1"}'
    )


def test_exact_bytes_unicode_is_utf8_not_escaped() -> None:
    req = request(runtime("u1", "漢字 🧪 שלום \x00"), tools=(), instructions="")
    assert (
        get(NAME).serialize(req)
        == (
            '{"model":"gpt-4.1","max_completion_tokens":4096,"messages":['
            '{"role":"user","content":"漢字 🧪 שלום \\u0000"}],'
            '"prompt_cache_key":"prefixlock:conv-1"}'
        ).encode()
    )


def test_consecutive_user_messages_are_not_merged() -> None:
    req = request(CTX, RT, event("b1", "x"), event("b2", "y"))
    messages = produce(NAME, req)["messages"]
    assert [m["role"] for m in messages] == ["developer", "user", "user", "user", "user"]


def test_one_tool_message_per_result_in_order() -> None:
    req = request(
        CTX,
        RT,
        assistant(1, call("c2", "grep", pattern="a"), call("c1", "grep", pattern="b")),
        results(ToolResultPart("c2", "two"), ToolResultPart("c1", "one")),
    )
    tools = [m for m in produce(NAME, req)["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [("c2", "two"), ("c1", "one")]


def test_whitespace_kept_byte_for_byte() -> None:
    text = "  leading\n\n\ttrailing  \n"
    assert produce(NAME, request(runtime("u1", text)))["messages"][1]["content"] == text


def test_several_text_parts_become_a_content_array() -> None:
    req = request(msg(MessageKind.RUNTIME, "runtime:u1", TextPart("a"), TextPart("b")))
    assert produce(NAME, req)["messages"][1]["content"] == [
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
    ]


def test_no_instructions_no_developer_message() -> None:
    assert produce(NAME, request(RT, instructions=""))["messages"] == [RT_WIRE]


def test_prompt_cache_key_identical_on_every_call() -> None:
    first = produce(NAME, simple())
    later = produce(NAME, tool_loop())
    assert first["prompt_cache_key"] == later["prompt_cache_key"] == CACHE_KEY


def test_no_cache_markers_to_strip() -> None:
    provider = get(NAME)
    b = provider.body(tool_loop())
    assert provider.strip_cache_markers(b) == b


def test_options_merge_after_our_keys_sorted() -> None:
    settings = (ProviderSettings(NAME, "gpt-4.1", 100, '{"temperature":0.2,"seed":7}'),)
    b = produce(NAME, request(RT, settings=settings))
    assert list(b) == [
        "model",
        "max_completion_tokens",
        "tools",
        "messages",
        "prompt_cache_key",
        "seed",
        "temperature",
    ]


@pytest.mark.parametrize("key", ["model", "messages", "max_tokens", "prompt_cache_key", "tools"])
def test_options_may_not_override_reserved_keys(key: str) -> None:
    settings = (ProviderSettings(NAME, "gpt-4.1", 100, canonical.dumps({key: 1})),)
    refused(NAME, request(RT, settings=settings), "openai-chat", "reserved", key)


# --------------------------------------------------------------------------- refusals


def test_lone_surrogate_refused_naming_message_and_part() -> None:
    refused(NAME, lone_surrogate(), "openai-chat", "'runtime:u1'", "part 0", "surrogate")


def test_foreign_opaque_refused() -> None:
    for data, provider in [
        (ANTHROPIC_THINKING, "anthropic"),
        (RESPONSES_REASONING, "openai-responses"),
    ]:
        refused(NAME, opaque(provider, data), "openai-chat", "'assistant:1'", "part 0", provider)


def test_image_in_tool_result_refused() -> None:
    refused(NAME, image_in_tool_result(), "openai-chat", "'tool-results:call_a'", "part 1", "image")


def test_image_in_assistant_refused() -> None:
    req = request(RT, assistant(1, ImagePart("image/png", PNG_B64)))
    refused(NAME, req, "openai-chat", "'assistant:1'", "part 0", "image")


def test_tool_name_limits() -> None:
    refused(NAME, long_tool_name(), "openai-chat", "'assistant:1'", "part 0", "1-64")
    refused(NAME, bad_tool_name_chars(), "openai-chat", "'read.file'")
    produce(NAME, request(RT, assistant(1, call("c", "t" * 64))))


def test_tool_spec_name_limit() -> None:
    spec = ToolSpec("x" * 65, "d", '{"type":"object"}')
    refused(NAME, request(RT, tools=(spec,)), "openai-chat", "tool 0", "1-64")


def test_settings_missing_refused() -> None:
    settings = (ProviderSettings("anthropic", "m", 1),)
    refused(NAME, request(RT, settings=settings), "no settings", NAME)


def test_opaque_part_in_tool_result_refused() -> None:
    req = request(
        RT,
        assistant(1, call("c", "grep", pattern="x")),
        results(ToolResultPart("c", "o"), OpaquePart(NAME, "{}")),
    )
    refused(NAME, req, "part 1", "opaque")


def test_context_marker_does_not_change_bytes() -> None:
    a = request(context("u1", "A"), RT)
    b = request(context("u1", "A"), RT, hints=())
    assert get(NAME).serialize(a) == get(NAME).serialize(b)


def test_lone_surrogate_in_instructions_refused() -> None:
    refused(NAME, lone_surrogate_instructions(), "openai-chat", "instructions", "surrogate")


def test_sdk_judge_rejects_wrong_bodies() -> None:
    from sdk_judge import judge

    good = get(NAME).body(tool_loop())
    assert judge(NAME, good) == []
    assert judge(NAME, {**good, "surprise": 1})  # unknown key
    assert judge(NAME, {k: v for k, v in good.items() if k != "model"})  # required key
    wrong_role = {**good, "messages": [{"role": "robot", "content": "x"}]}
    assert judge(NAME, wrong_role)  # literal
    args_object = {
        **good,
        "messages": [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
                ],
            }
        ],
    }
    assert judge(NAME, args_object)  # arguments must be a JSON string
