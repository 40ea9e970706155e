"""Anthropic Messages: canonical inputs -> exact bodies (sqlglot validate_all style)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from prefixlock.core import canonical
from prefixlock.core.messages import ImagePart, MessageKind, OpaquePart, TextPart, ToolResultPart
from prefixlock.core.model import CacheHint, CachePosition, ModelRequest, ProviderSettings
from prefixlock.providers import get
from prefixlock.providers.anthropic import wire_tool_use_id
from provider_cases import (
    ANTHROPIC_REDACTED,
    ANTHROPIC_THINKING,
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

NAME = "anthropic"
EPHEMERAL = {"type": "ephemeral"}

TOOLS_WIRE = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "type": "object",
        },
    },
    {
        "name": "grep",
        "description": "Search files.",
        "input_schema": {
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
            "type": "object",
        },
        "cache_control": EPHEMERAL,
    },
]
SYSTEM_WIRE = [{"type": "text", "text": INSTRUCTIONS, "cache_control": EPHEMERAL}]


def text(value: str, marked: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": value}
    if marked:
        block["cache_control"] = EPHEMERAL
    return block


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def said(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": list(blocks)}


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def tool_result(call_id: str, output: str, error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    if error:
        block["is_error"] = True
    return block


CTX_WIRE = user(text("<rules>use tabs</rules>", marked=True))
RT_WIRE = user(text("Fix the bug in app.py"))


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": SYSTEM_WIRE,
        "tools": TOOLS_WIRE,
        "messages": list(messages),
        "cache_control": EPHEMERAL,
    }


THINKING_WIRE = {
    "signature": "sig-EqQBCkYIBxgCKkA",
    "thinking": "Check the file first.",
    "type": "thinking",
}

CASES: dict[str, tuple[Callable[[], ModelRequest], dict[str, Any]]] = {
    "simple": (simple, body(CTX_WIRE, RT_WIRE)),
    "tool_loop_parallel": (
        tool_loop,
        body(
            CTX_WIRE,
            RT_WIRE,
            said(
                text("Let me look."),
                tool_use("call_a", "read_file", {"path": "app.py"}),
                tool_use("call_b", "grep", {"pattern": "TODO"}),
            ),
            user(
                tool_result("call_a", "print('hi')\n"),
                tool_result("call_b", "no such pattern", error=True),
            ),
            user(text("Background build finished.")),
            said(text("Done.")),
        ),
    ),
    "thinking_block_verbatim_first": (
        lambda: opaque(NAME, ANTHROPIC_THINKING),
        body(
            CTX_WIRE,
            RT_WIRE,
            said(
                THINKING_WIRE,
                text("Reading."),
                tool_use("call_a", "read_file", {"path": "app.py"}),
            ),
            user(tool_result("call_a", "x = 1\n")),
        ),
    ),
    "redacted_thinking_verbatim": (
        lambda: opaque(NAME, ANTHROPIC_REDACTED),
        body(
            CTX_WIRE,
            RT_WIRE,
            said(
                {"data": "EmwKAhgBEgy3va", "type": "redacted_thinking"},
                text("Reading."),
                tool_use("call_a", "read_file", {"path": "app.py"}),
            ),
            user(tool_result("call_a", "x = 1\n")),
        ),
    ),
    "unicode": (unicode, body(CTX_WIRE, user(text(UNICODE_TEXT)), said(text("ok 👍")))),
    "long_text": (long_text, body(CTX_WIRE, user(text(LONG_TEXT)))),
    "image": (
        image,
        body(
            CTX_WIRE,
            user(
                text("What is in this screenshot?"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                },
            ),
        ),
    ),
    "image_after_tool_results": (
        image_in_tool_result,
        body(
            CTX_WIRE,
            RT_WIRE,
            said(tool_use("call_a", "read_file", {"path": "shot.png"})),
            user(
                tool_result("call_a", "see image"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                },
            ),
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_all(case: str) -> None:
    build, expected = CASES[case]
    assert_wire(produce(NAME, build()), expected)


def test_exact_bytes_simple() -> None:
    req = request(CTX, RT, tools=(), instructions="Be brief.")
    assert get(NAME).serialize(req) == (
        b'{"model":"claude-sonnet-4-5","max_tokens":4096,'
        b'"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],'
        b'"messages":['
        b'{"role":"user","content":[{"type":"text","text":"<rules>use tabs</rules>",'
        b'"cache_control":{"type":"ephemeral"}}]},'
        b'{"role":"user","content":[{"type":"text","text":"Fix the bug in app.py"}]}],'
        b'"cache_control":{"type":"ephemeral"}}'
    )


def test_exact_bytes_without_hints() -> None:
    req = request(RT, tools=(), instructions="", hints=())
    assert get(NAME).serialize(req) == (
        b'{"model":"claude-sonnet-4-5","max_tokens":4096,"messages":['
        b'{"role":"user","content":[{"type":"text","text":"Fix the bug in app.py"}]}]}'
    )


def test_consecutive_same_role_messages_are_not_merged() -> None:
    req = request(
        CTX,
        RT,
        assistant(1, TextPart("a")),
        assistant(2, TextPart("b")),
        event("b1", "x"),
        event("b2", "y"),
    )
    roles = [m["role"] for m in produce(NAME, req)["messages"]]
    assert roles == ["user", "user", "assistant", "assistant", "user", "user"]


def test_tool_result_message_is_one_user_message_results_first() -> None:
    req = request(
        RT,
        assistant(1, call("c1", "grep", pattern="a"), call("c2", "grep", pattern="b")),
        results(ToolResultPart("c1", "one"), ToolResultPart("c2", "two"), TextPart("note")),
    )
    last = produce(NAME, req)["messages"][-1]
    assert last == user(tool_result("c1", "one"), tool_result("c2", "two"), text("note"))


def test_tool_result_after_other_content_refused() -> None:
    req = request(
        RT,
        assistant(1, call("c1", "grep", pattern="a")),
        results(TextPart("note"), ToolResultPart("c1", "one")),
    )
    refused(NAME, req, "'tool-results:c1'", "part 1", "first", "never reorders")


# ------------------------------------------------------------------------ cache rule


def markers(value: Any) -> list[str]:
    """JSON paths of every cache_control in a body."""
    found: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "cache_control":
                    found.append(path)
                walk(item, f"{path}.{key}")
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]")

    walk(value, "$")
    return found


def test_four_markers_tools_system_context_tail() -> None:
    assert markers(produce(NAME, tool_loop())) == [
        "$.system[0]",
        "$.tools[1]",
        "$.messages[0].content[0]",
        "$",
    ]


def test_context_marker_sits_on_latest_request_context_only() -> None:
    req = request(
        context("u1", "A"),
        runtime("u1", "q1"),
        assistant(1, TextPart("r1")),
        context("u2", "B"),
        runtime("u2", "q2"),
    )
    b = produce(NAME, req)
    assert markers(b) == ["$.system[0]", "$.tools[1]", "$.messages[3].content[0]", "$"]
    assert len(markers(b)) <= 4


def test_marker_moves_only_by_the_rule_and_strip_makes_prefix_exact() -> None:
    """Turn 1's body is a prefix of turn 2's once the markers are stripped; unstripped,
    only the context message whose marker moved differs."""
    provider = get(NAME)
    turn1 = [context("u1", "A"), runtime("u1", "q1"), assistant(1, TextPart("r1"))]
    turn2 = [*turn1, context("u2", "B"), runtime("u2", "q2")]
    b1 = provider.body(request(*turn1))
    b2 = provider.body(request(*turn2))
    s1, s2 = provider.strip_cache_markers(b1), provider.strip_cache_markers(b2)
    assert s2["messages"][: len(s1["messages"])] == s1["messages"]
    assert {k: v for k, v in s1.items() if k != "messages"} == {
        k: v for k, v in s2.items() if k != "messages"
    }
    changed = [i for i, m in enumerate(b1["messages"]) if b2["messages"][i] != m]
    assert changed == [0]
    assert markers(s1) == markers(s2) == []
    # stripping does not touch the original
    assert markers(b1) == ["$.system[0]", "$.tools[1]", "$.messages[0].content[0]", "$"]


def test_strip_keeps_everything_else_including_opaque_blocks() -> None:
    provider = get(NAME)
    b = provider.body(opaque(NAME, ANTHROPIC_THINKING))
    stripped = provider.strip_cache_markers(b)
    assert stripped["messages"][2]["content"][0] == THINKING_WIRE
    assert json.dumps(provider.strip_cache_markers(stripped)) == json.dumps(stripped)


def test_context_marker_never_on_thinking_blocks() -> None:
    req = request(
        RT,
        assistant(1, OpaquePart(NAME, ANTHROPIC_THINKING)),
        hints=(CacheHint(CachePosition.CONTEXT, 1),),
    )
    b = produce(NAME, req)
    assert markers(b) == []


def test_context_marker_skips_trailing_thinking_block() -> None:
    req = request(
        RT,
        assistant(1, TextPart("a"), OpaquePart(NAME, ANTHROPIC_THINKING)),
        hints=(CacheHint(CachePosition.CONTEXT, 1),),
    )
    assert markers(produce(NAME, req)) == ["$.messages[1].content[0]"]


def test_hint_outside_messages_refused() -> None:
    req = request(RT, hints=(CacheHint(CachePosition.CONTEXT, 5),))
    refused(NAME, req, "cache hint", "context", "5")


def test_no_markers_without_hints() -> None:
    assert markers(produce(NAME, request(CTX, RT, hints=()))) == []


def test_top_level_cache_control_in_installed_sdk() -> None:
    from anthropic.types.message_create_params import MessageCreateParamsBase

    assert "cache_control" in MessageCreateParamsBase.__annotations__


# --------------------------------------------------------------------------- refusals


def test_empty_text_refused() -> None:
    refused(NAME, empty_text(), "anthropic", "'runtime:u1'", "part 0", "empty")


def test_whitespace_only_text_refused() -> None:
    refused(NAME, request(runtime("u1", " \n\t")), "'runtime:u1'", "part 0", "whitespace")


def test_whitespace_around_text_kept() -> None:
    value = "\n  indented\n\n"
    assert produce(NAME, request(runtime("u1", value)))["messages"][0] == user(text(value))


def test_lone_surrogates_refused() -> None:
    refused(NAME, lone_surrogate(), NAME, "'runtime:u1'", "part 0", "surrogate")
    refused(NAME, lone_surrogate_instructions(), NAME, "instructions", "surrogate")


def test_foreign_opaque_refused() -> None:
    refused(NAME, opaque("openai-responses", RESPONSES_REASONING), "'assistant:1'", "part 0")
    refused(NAME, opaque("bedrock-converse", "{}"), "'bedrock-converse'", "anthropic")


def test_image_refusals() -> None:
    req = request(RT, assistant(1, ImagePart("image/png", PNG_B64)))
    refused(NAME, req, "'assistant:1'", "part 0", "image")
    req = request(msg(MessageKind.RUNTIME, "runtime:u1", ImagePart("image/tiff", "AAAA")))
    refused(NAME, req, "'runtime:u1'", "part 0", "image/tiff")


def test_tool_name_limits() -> None:
    refused(NAME, bad_tool_name_chars(), "'assistant:1'", "part 0", "'read.file'")
    produce(NAME, request(RT, assistant(1, call("c", "t" * 64))))
    refused(NAME, request(RT, assistant(1, call("c", "t" * 65))), "part 0", "1-64")


def test_tool_call_arguments_must_be_an_object() -> None:
    from prefixlock.core.messages import ToolCallPart

    req = request(RT, assistant(1, ToolCallPart("c", "grep", "[1,2]")))
    refused(NAME, req, "'assistant:1'", "part 0", "object")


def test_options_merge_and_reserved_refused() -> None:
    options = '{"thinking":{"type":"enabled","budget_tokens":2048},"stop_sequences":["END"]}'
    b = produce(NAME, request(RT, settings=(ProviderSettings(NAME, "m", 8192, options),)))
    assert list(b)[-3:] == ["cache_control", "stop_sequences", "thinking"]
    for key in ("system", "tools", "cache_control", "messages", "max_tokens", "model"):
        bad = (ProviderSettings(NAME, "m", 1, canonical.dumps({key: 1})),)
        refused(NAME, request(RT, settings=bad), "reserved", key)


def test_sdk_judge_rejects_wrong_bodies() -> None:
    from sdk_judge import judge

    good = get(NAME).body(tool_loop())
    assert judge(NAME, good) == []
    assert judge(NAME, {**good, "system": "x", "instructions": "y"})  # unknown key
    assert judge(NAME, {k: v for k, v in good.items() if k != "max_tokens"})  # required
    bad_marker = {**good, "cache_control": {"type": "persistent"}}
    assert judge(NAME, bad_marker)  # literal
    string_input = {
        **good,
        "messages": [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c", "name": "f", "input": "{}"}],
            }
        ],
    }
    assert judge(NAME, string_input)  # tool_use input must be an object


# ------------------------------------------------------------------- tool use ids


def test_tool_use_ids_the_api_refuses_are_mapped_the_same_on_call_and_result() -> None:
    # tool_use.id must match ^[a-zA-Z0-9_-]+$ (an API 400 otherwise); ids from other
    # providers such as "functions.read_file:0" are mapped by one documented rule.
    odd = ("functions.read_file:0", "c/1 x")
    req = request(
        RT,
        assistant(1, call(odd[0], "read_file", path="a"), call(odd[1], "grep", pattern="b")),
        results(ToolResultPart(odd[0], "one"), ToolResultPart(odd[1], "two")),
    )
    messages = produce(NAME, req)["messages"]
    mapped = [
        "functions_read_file_0_" + hashlib.sha256(odd[0].encode()).hexdigest()[:16],
        "c_1_x_" + hashlib.sha256(odd[1].encode()).hexdigest()[:16],
    ]
    assert mapped == ["functions_read_file_0_f9cc2c7822d54220", "c_1_x_8006b980c8c07ae9"]
    assert [b["id"] for b in messages[1]["content"]] == mapped
    assert [b["tool_use_id"] for b in messages[2]["content"]] == mapped
    assert all(wire_tool_use_id(m) == m for m in mapped)  # mapping a mapped id: unchanged


def test_tool_use_id_mapping_is_deterministic_and_keeps_distinct_ids_apart() -> None:
    # Ids that sanitize alike ("a.b", "a:b", "a/b", "a_b" is valid and kept) stay apart.
    ids = ["a.b", "a:b", "a/b", "a b", "a_b", "", "ü"]
    mapped = [wire_tool_use_id(i) for i in ids]
    assert len(set(mapped)) == len(ids)
    assert mapped[4] == "a_b"
    assert mapped == [wire_tool_use_id(i) for i in ids]
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", m) for m in mapped)
    assert wire_tool_use_id("toolu_01A-b") == "toolu_01A-b"  # accepted ids are sent as is
