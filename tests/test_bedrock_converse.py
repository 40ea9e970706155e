"""Bedrock Converse: canonical inputs -> exact params (sqlglot validate_all style)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prefixlock.core import canonical
from prefixlock.core.messages import ImagePart, MessageKind, OpaquePart, TextPart, ToolResultPart
from prefixlock.core.model import CacheHint, CachePosition, ModelRequest, ProviderSettings, ToolSpec
from prefixlock.providers import get
from prefixlock.providers.bedrock_converse import BedrockConverse
from provider_cases import (
    ANTHROPIC_THINKING,
    BEDROCK_REASONING,
    BEDROCK_REDACTED,
    CTX,
    GEMINI_THOUGHT,
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
    random_history,
    refused,
    replay_prefixes,
    request,
    results,
    runtime,
    simple,
    tool_loop,
    unicode,
)

NAME = "bedrock-converse"
MODEL = "anthropic.claude-sonnet-4-5-v1:0"
CP = {"cachePoint": {"type": "default"}}

TOOLS_WIRE: dict[str, Any] = {
    "tools": [
        {
            "toolSpec": {
                "name": "read_file",
                "description": "Read a file.",
                "inputSchema": {
                    "json": {
                        "properties": {"path": {"type": "string"}},
                        "required": ["path"],
                        "type": "object",
                    }
                },
            }
        },
        {
            "toolSpec": {
                "name": "grep",
                "description": "Search files.",
                "inputSchema": {
                    "json": {
                        "properties": {"pattern": {"type": "string"}},
                        "required": ["pattern"],
                        "type": "object",
                    }
                },
            }
        },
        CP,
    ]
}
SYSTEM_WIRE = [{"text": INSTRUCTIONS}, CP]
#: The request-context message's blocks (its CONTEXT cachePoint last) and the runtime
#: message's block: one user wire message, since Converse needs alternating roles.
CTX_BLOCKS = [{"text": "<rules>use tabs</rules>"}, CP]
RT_BLOCK = {"text": "Fix the bug in app.py"}
CTX_RT_WIRE = {"role": "user", "content": [*CTX_BLOCKS, RT_BLOCK]}


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "modelId": MODEL,
        "inferenceConfig": {"maxTokens": 4096},
        "system": SYSTEM_WIRE,
        "toolConfig": TOOLS_WIRE,
        "messages": [*messages],
    }


def tail(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` with the tail cachePoint appended to its content."""
    return {**message, "content": [*message["content"], CP]}


def user(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [*blocks]}


def bot(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": [*blocks]}


def tool_use(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}


def tool_result(call_id: str, text: str, error: bool = False) -> dict[str, Any]:
    result: dict[str, Any] = {"toolUseId": call_id, "content": [{"text": text}]}
    if error:
        result["status"] = "error"
    return {"toolResult": result}


def params(req: ModelRequest) -> dict[str, Any]:
    """:func:`produce` (bytes == ``wire_body``, ``body`` == ``modelId`` + that, cached
    call == first, strict judge) plus Bedrock's limit of 4 cachePoints per request.
    Returns the full params."""
    full = produce(NAME, req)
    assert count_cache_points(full) <= 4
    return full


def count_cache_points(value: Any) -> int:
    if isinstance(value, dict):
        own = 1 if set(value) == {"cachePoint"} else 0
        return own + sum(count_cache_points(v) for v in value.values())
    if isinstance(value, list):
        return sum(count_cache_points(v) for v in value)
    return 0


def signed() -> ModelRequest:
    """Gemini thought signatures are not Bedrock data: silently absent on this wire."""
    return request(
        CTX,
        RT,
        assistant(
            1, TextPart("Reading.", thought_signature="c2ln"), call("c1", "grep", pattern="x")
        ),
        results(ToolResultPart("c1", "none")),
    )


CASES: dict[str, tuple[Callable[[], ModelRequest], dict[str, Any]]] = {
    "simple": (simple, body(tail(CTX_RT_WIRE))),
    "tool_loop_parallel": (
        tool_loop,
        body(
            CTX_RT_WIRE,
            bot(
                {"text": "Let me look."},
                tool_use("call_a", "read_file", path="app.py"),
                tool_use("call_b", "grep", pattern="TODO"),
            ),
            # tool results, then the background event: one user message, results first
            user(
                tool_result("call_a", "print('hi')\n"),
                tool_result("call_b", "no such pattern", error=True),
                {"text": "Background build finished."},
            ),
            tail(bot({"text": "Done."})),
        ),
    ),
    "reasoning_verbatim": (
        lambda: opaque(NAME, BEDROCK_REASONING),
        body(
            CTX_RT_WIRE,
            bot(
                # an opaque block keeps its canonical (sorted) key order
                {
                    "reasoningContent": {
                        "reasoningText": {"signature": "EqQBCkYI", "text": "Check app.py."}
                    }
                },
                {"text": "Reading."},
                tool_use("call_a", "read_file", path="app.py"),
            ),
            tail(user(tool_result("call_a", "x = 1\n"))),
        ),
    ),
    "redacted_reasoning_verbatim": (
        lambda: opaque(NAME, BEDROCK_REDACTED),
        body(
            CTX_RT_WIRE,
            bot(
                {"reasoningContent": {"redactedContent": "ZW5jcnlwdGVk"}},
                {"text": "Reading."},
                tool_use("call_a", "read_file", path="app.py"),
            ),
            tail(user(tool_result("call_a", "x = 1\n"))),
        ),
    ),
    "thought_signature_not_sent": (
        signed,
        body(
            CTX_RT_WIRE,
            bot({"text": "Reading."}, tool_use("c1", "grep", pattern="x")),
            tail(user(tool_result("c1", "none"))),
        ),
    ),
    "unicode": (
        unicode,
        body(user(*CTX_BLOCKS, {"text": UNICODE_TEXT}), tail(bot({"text": "ok 👍"}))),
    ),
    "long_text": (long_text, body(tail(user(*CTX_BLOCKS, {"text": LONG_TEXT})))),
    "image": (
        image,
        body(
            tail(
                user(
                    *CTX_BLOCKS,
                    {"text": "What is in this screenshot?"},
                    {"image": {"format": "png", "source": {"bytes": PNG_B64}}},
                )
            ),
        ),
    ),
    "refusal": (
        lambda: request(CTX, RT, assistant(1, TextPart("I can't help with that."))),
        body(CTX_RT_WIRE, tail(bot({"text": "I can't help with that."}))),
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_all(case: str) -> None:
    build, expected = CASES[case]
    assert_wire(params(build()), expected)


def test_exact_bytes_simple_without_model_id() -> None:
    req = request(CTX, RT, tools=())
    assert get(NAME).serialize(req) == (
        b'{"inferenceConfig":{"maxTokens":4096},'
        b'"system":[{"text":"You are a coding agent.\\nBe brief."},'
        b'{"cachePoint":{"type":"default"}}],'
        b'"messages":[{"role":"user","content":[{"text":"<rules>use tabs</rules>"},'
        b'{"cachePoint":{"type":"default"}},{"text":"Fix the bug in app.py"},'
        b'{"cachePoint":{"type":"default"}}]}]}'
    )


def test_exact_bytes_unicode_is_utf8_not_escaped() -> None:
    req = request(runtime("u1", "漢字 🧪 שלום \x00"), tools=(), instructions="", hints=())
    assert (
        get(NAME).serialize(req)
        == (
            '{"inferenceConfig":{"maxTokens":4096},'
            '"messages":[{"role":"user","content":[{"text":"漢字 🧪 שלום \\u0000"}]}]}'
        ).encode()
    )


def test_same_role_neighbours_become_blocks_of_one_message_in_order() -> None:
    # Converse: "A conversation must alternate between user and assistant roles".
    req = request(
        CTX, RT, event("b1", "x"), assistant(1, TextPart("a")), assistant(2, TextPart("b"))
    )
    messages = params(req)["messages"]
    assert messages == [
        user(*CTX_BLOCKS, RT_BLOCK, {"text": "x"}),
        bot({"text": "a"}, {"text": "b"}, CP),
    ]


def test_first_message_must_be_a_user_message() -> None:
    req = request(assistant(1, TextPart("hi")), RT)
    refused(NAME, req, NAME, "'assistant:1'", "first message", "'user'", "'assistant'")


def test_merged_body_equals_fresh_encode_across_a_growing_last_message() -> None:
    # The last wire message gains blocks from one call to the next; earlier blocks stay.
    live = get(NAME)
    history = [CTX, RT, event("b1", "one"), event("b2", "two")]
    previous: list[Any] | None = None
    for k in range(1, len(history) + 1):
        req = request(*history[:k])
        assert (
            live.serialize(req)
            == get(NAME).serialize(req)
            == canonical.dumpb(get(NAME).wire_body(req))
        )
        stripped = live.strip_cache_markers(live.body(req))["messages"]
        assert len(stripped) == 1
        blocks = stripped[0]["content"]
        if previous is not None:
            assert blocks[: len(previous)] == previous
        previous = blocks


def test_results_keep_their_order_in_one_user_message() -> None:
    req = request(
        RT,
        assistant(1, call("c2", "grep", pattern="a"), call("c1", "grep", pattern="b")),
        results(ToolResultPart("c2", "two"), ToolResultPart("c1", "one")),
    )
    last = params(req)["messages"][-1]
    assert last == tail(user(tool_result("c2", "two"), tool_result("c1", "one")))


def test_whitespace_kept_byte_for_byte() -> None:
    text = "  leading\n\n\ttrailing  \n"
    first = params(request(runtime("u1", text)))["messages"][0]
    assert first["content"][0]["text"] == text


def test_no_instructions_no_tools_no_keys() -> None:
    b = params(request(RT, instructions="", tools=()))
    assert list(b) == ["modelId", "inferenceConfig", "messages"]


def test_empty_tool_description_omitted() -> None:
    spec = ToolSpec("grep", "", '{"type":"object"}')
    b = params(request(RT, tools=(spec,)))
    assert b["toolConfig"]["tools"][0] == {
        "toolSpec": {"name": "grep", "inputSchema": {"json": {"type": "object"}}}
    }


def test_options_split_into_inference_config_and_top_level() -> None:
    options = canonical.dumps(
        {
            "temperature": 0.2,
            "stopSequences": ["END"],
            "additionalModelRequestFields": {
                "thinking": {"type": "enabled", "budget_tokens": 1024}
            },
            "topP": 0.9,
        }
    )
    settings = (ProviderSettings(NAME, MODEL, 100, options),)
    b = params(request(RT, settings=settings))
    assert list(b) == [
        "modelId",
        "inferenceConfig",
        "system",
        "toolConfig",
        "messages",
        "additionalModelRequestFields",
    ]
    assert list(b["inferenceConfig"].items()) == [
        ("maxTokens", 100),
        ("stopSequences", ["END"]),
        ("temperature", 0.2),
        ("topP", 0.9),
    ]


@pytest.mark.parametrize(
    "key", ["maxTokens", "modelId", "messages", "system", "toolConfig", "inferenceConfig"]
)
def test_options_may_not_set_reserved_keys(key: str) -> None:
    settings = (ProviderSettings(NAME, MODEL, 100, canonical.dumps({key: 1})),)
    refused(NAME, request(RT, settings=settings), "bedrock-converse", "reserved", key)


def test_tables_match_the_botocore_service_model() -> None:
    import botocore.session

    service = botocore.session.get_session().get_service_model("bedrock-runtime")
    inference = service.shape_for("InferenceConfiguration")
    assert set(inference.members) == BedrockConverse.INFERENCE_KEYS
    assert sorted(service.shape_for("ImageFormat").enum) == sorted(
        BedrockConverse.IMAGE_FORMATS.values()
    )
    assert service.shape_for("ConverseRequest").members["modelId"].serialization == {
        "location": "uri",
        "name": "modelId",
    }
    assert BedrockConverse.URI_MEMBERS == ("modelId",)
    name = service.shape_for("ToolName").metadata
    assert (name["min"], name["max"], name["pattern"]) == (1, 64, "[a-zA-Z0-9_-]+")
    use_id = service.shape_for("ToolUseId").metadata
    assert (use_id["min"], use_id["max"], use_id["pattern"]) == (1, 64, "[a-zA-Z0-9_.:-]+")


# ------------------------------------------------------------------------ cache rule


def test_four_cache_points_tools_system_context_tail() -> None:
    b = params(tool_loop())
    assert b["toolConfig"]["tools"][-1] == CP
    assert b["system"][-1] == CP
    # CONTEXT: right after the request-context block, inside the first (merged) message;
    # TAIL: the last block of the body.
    assert b["messages"][0]["content"] == [*CTX_BLOCKS, RT_BLOCK]
    assert b["messages"][-1]["content"][-1] == CP
    assert count_cache_points(b) == 4


def test_context_and_tail_on_one_message_get_one_cache_point() -> None:
    b = params(request(RT, context("u2", "ctx")))
    assert b["messages"][-1]["content"] == [RT_BLOCK, {"text": "ctx"}, CP]
    assert count_cache_points(b) == 3


def test_context_point_sits_on_the_latest_request_context_only() -> None:
    req = request(context("u1", "A"), runtime("u1", "q"), context("u2", "B"), runtime("u2", "r"))
    (message,) = params(req)["messages"]
    assert message["content"] == [
        {"text": "A"},
        {"text": "q"},
        {"text": "B"},
        CP,
        {"text": "r"},
        CP,
    ]


def test_no_hints_no_cache_points() -> None:
    b = params(request(*tool_loop().messages, hints=()))
    assert count_cache_points(b) == 0


def test_positions_that_do_not_exist_get_no_cache_point() -> None:
    b = params(request(RT, instructions="", tools=()))
    assert count_cache_points(b) == 1  # the tail only


def test_hint_outside_messages_refused() -> None:
    req = request(RT, hints=(CacheHint(CachePosition.TAIL, 5),))
    refused(NAME, req, "bedrock-converse", "cache hint", "5")


def test_tail_point_moves_and_strip_makes_the_prefix_exact() -> None:
    provider = get(NAME)
    first = request(CTX, RT)
    second = request(*tool_loop().messages)
    a, b = provider.body(first), provider.body(second)
    assert a["messages"][0]["content"][-1] == CP  # the tail point on runtime:u1 ...
    assert b["messages"][0]["content"][-1] != CP  # ... moved on
    sa, sb = provider.strip_cache_markers(a), provider.strip_cache_markers(b)
    assert sb["messages"][: len(sa["messages"])] == sa["messages"]
    assert {k: v for k, v in sa.items() if k != "messages"} == {
        k: v for k, v in sb.items() if k != "messages"
    }
    assert count_cache_points(sb) == 0


def test_strip_removes_only_cache_points() -> None:
    provider = get(NAME)
    b = provider.body(opaque(NAME, BEDROCK_REASONING))
    stripped = provider.strip_cache_markers(b)
    assert count_cache_points(stripped) == 0
    assert stripped["messages"][1]["content"][0] == canonical.loads(BEDROCK_REASONING)
    assert stripped["system"] == [{"text": INSTRUCTIONS}]
    assert stripped["toolConfig"]["tools"] == TOOLS_WIRE["tools"][:-1]
    assert list(stripped) == list(b)
    assert count_cache_points(b) == 4  # the input is left alone


# --------------------------------------------------------------------------- refusals


def test_lone_surrogate_refused_naming_message_and_part() -> None:
    refused(NAME, lone_surrogate(), "bedrock-converse", "'runtime:u1'", "part 0", "surrogate")


def test_lone_surrogate_in_instructions_refused() -> None:
    refused(NAME, lone_surrogate_instructions(), "bedrock-converse", "instructions", "surrogate")


def test_foreign_opaque_refused() -> None:
    for data, provider in [
        (ANTHROPIC_THINKING, "anthropic"),
        (RESPONSES_REASONING, "openai-responses"),
        (GEMINI_THOUGHT, "gemini"),
    ]:
        refused(NAME, opaque(provider, data), NAME, "'assistant:1'", "part 0", provider)


def test_opaque_must_be_one_content_block() -> None:
    refused(NAME, opaque(NAME, '{"a":1,"b":2}'), NAME, "'assistant:1'", "part 0", "ContentBlock")
    refused(NAME, opaque(NAME, '"text"'), NAME, "ContentBlock")


def test_image_refusals() -> None:
    refused(NAME, image_in_tool_result(), NAME, "'tool-results:call_a'", "part 1", "image")
    in_assistant = request(RT, assistant(1, ImagePart("image/png", PNG_B64)))
    refused(NAME, in_assistant, NAME, "'assistant:1'", "part 0", "image")
    svg = request(msg(MessageKind.RUNTIME, "runtime:u1", ImagePart("image/svg+xml", "PHN2Zz4=")))
    refused(NAME, svg, NAME, "'runtime:u1'", "part 0", "image/svg+xml")


def test_blank_text_and_blank_tool_output_are_refused() -> None:
    # Converse answers "text content blocks must contain non-whitespace text".
    refused(NAME, empty_text(), NAME, "'runtime:u1'", "part 0", "empty or whitespace-only")
    refused(NAME, request(runtime("u1", " \n\t")), NAME, "whitespace-only", "' \\n\\t'")
    req = request(
        RT, assistant(1, call("c", "grep", pattern="x")), results(ToolResultPart("c", "", True))
    )
    refused(NAME, req, NAME, "'tool-results:c'", "part 0", "tool result whose text is empty")


def test_text_in_tool_result_refused() -> None:
    req = request(
        RT,
        assistant(1, call("c", "grep", pattern="x")),
        results(ToolResultPart("c", "o"), TextPart("note")),
    )
    refused(NAME, req, NAME, "'tool-results:c'", "part 1", "text")


def test_tool_name_limits() -> None:
    refused(NAME, long_tool_name(), NAME, "'assistant:1'", "part 0", "1-64")
    refused(NAME, bad_tool_name_chars(), NAME, "'read.file'")
    params(request(RT, assistant(1, call("c", "t" * 64))))
    spec = ToolSpec("x" * 65, "d", '{"type":"object"}')
    refused(NAME, request(RT, tools=(spec,)), NAME, "tool 0", "1-64")


def test_tool_use_id_limits() -> None:
    refused(NAME, request(RT, assistant(1, call("c" * 65, "grep"))), NAME, "part 0", "tool use id")
    bad = request(
        RT,
        assistant(1, call("call a", "grep")),
    )
    refused(NAME, bad, NAME, "'assistant:1'", "'call a'")
    params(request(RT, assistant(1, call("toolu_01.A:b-c", "grep"))))


def test_parts_in_the_wrong_message_refused() -> None:
    call_in_user = request(msg(MessageKind.RUNTIME, "runtime:u1", call("c", "grep")))
    refused(NAME, call_in_user, NAME, "'runtime:u1'", "part 0", "tool call")
    result_in_assistant = request(RT, assistant(1, ToolResultPart("c", "o")))
    refused(NAME, result_in_assistant, NAME, "'assistant:1'", "part 0", "tool result")


def test_settings_missing_refused() -> None:
    settings = (ProviderSettings("anthropic", "m", 1),)
    refused(NAME, request(RT, settings=settings), "no settings", NAME)


def test_opaque_part_may_sit_among_parts_in_order() -> None:
    req = request(
        RT,
        assistant(1, TextPart("a"), OpaquePart(NAME, BEDROCK_REASONING), TextPart("b")),
    )
    content = params(req)["messages"][-1]["content"]
    assert content[:3] == [{"text": "a"}, canonical.loads(BEDROCK_REASONING), {"text": "b"}]


# ------------------------------------------------------------- random histories


@given(seed=st.integers(0, 2**32 - 1), length=st.integers(1, 40))
def test_random_histories_assembled_equals_fresh_and_judge_accepts(seed: int, length: int) -> None:
    bodies = replay_prefixes(NAME, random_history(seed, length, NAME))
    assert all(count_cache_points(full) <= 4 for full in bodies)
