"""The strict SDK judge itself: it accepts known-good bodies and catches each kind of
mistake, for every provider (so a green provider test means something)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from sdk_judge import PROVIDERS, assert_valid, judge

Body = dict[str, Any]

#: What the Anthropic and Bedrock Messages bodies below share: the system, the tools and
#: a turn that calls a tool (each test deep-copies a body before it changes it).
MESSAGES_SYSTEM = [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
MESSAGES_TOOLS = [{"name": "grep", "description": "Search.", "input_schema": {"type": "object"}}]
MESSAGES_TURN = [
    {"role": "user", "content": [{"type": "text", "text": "hi"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "t", "signature": "sig"},
            {"type": "tool_use", "id": "c1", "name": "grep", "input": {}},
        ],
    },
]

GOOD: dict[str, Body] = {
    "openai-chat": {
        "model": "gpt-4.1",
        "max_completion_tokens": 100,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "grep",
                    "description": "Search.",
                    "parameters": {"type": "object", "properties": {}},
                },
            }
        ],
        "messages": [
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": "Looking.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "grep", "arguments": '{"pattern":"x"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "none"},
            {"role": "user", "content": [{"type": "text", "text": "and?"}]},
        ],
        "prompt_cache_key": "k",
        "temperature": 0.5,
    },
    "openai-responses": {
        "model": "gpt-5",
        "max_output_tokens": 100,
        "instructions": "Be brief.",
        "tools": [
            {
                "type": "function",
                "name": "grep",
                "description": "Search.",
                "parameters": {"type": "object"},
                "strict": False,
            }
        ],
        "input": [
            {"type": "message", "role": "user", "content": "hi"},
            {"type": "reasoning", "summary": [], "encrypted_content": "gAAA"},
            {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "none"},
        ],
        "prompt_cache_key": "k",
    },
    "anthropic": {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "system": MESSAGES_SYSTEM,
        "tools": MESSAGES_TOOLS,
        "messages": [
            *MESSAGES_TURN,
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": "x", "is_error": True}
                ],
            },
        ],
        "cache_control": {"type": "ephemeral"},
    },
    # InvokeModel params: modelId (the path), then the JSON body.
    "bedrock-anthropic": {
        "modelId": "us.anthropic.claude-sonnet-5-5",
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 100,
        "system": MESSAGES_SYSTEM,
        "tools": MESSAGES_TOOLS,
        "messages": [
            *MESSAGES_TURN,
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}],
            },
        ],
        "cache_control": {"type": "ephemeral", "ttl": "1h"},
        "anthropic_beta": ["context-1m-2025-08-07"],
    },
    "gemini": {
        "generationConfig": {"maxOutputTokens": 100, "temperature": 0.5},
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "grep",
                        "description": "Search.",
                        "parametersJsonSchema": {"type": "object"},
                    }
                ]
            }
        ],
        "contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Looking.", "thoughtSignature": "c2lnbmF0dXJl"},
                    {"functionCall": {"id": "c1", "name": "grep", "args": {"pattern": "x"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"id": "c1", "name": "grep", "response": {"output": "x"}}}
                ],
            },
        ],
    },
    "bedrock-converse": {
        "modelId": "anthropic.claude-sonnet-4-5-v1:0",
        "inferenceConfig": {"maxTokens": 100},
        "system": [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}],
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "grep",
                        "description": "Search.",
                        "inputSchema": {"json": {"type": "object"}},
                    }
                },
                {"cachePoint": {"type": "default"}},
            ]
        },
        "messages": [
            {"role": "user", "content": [{"text": "hi"}, {"cachePoint": {"type": "default"}}]},
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "t", "signature": "s"}}},
                    {"toolUse": {"toolUseId": "c1", "name": "grep", "input": {"pattern": "x"}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "c1",
                            "content": [{"text": "x"}],
                            "status": "error",
                        }
                    }
                ],
            },
        ],
    },
}


def mutated(provider: str, change: Callable[[Body], None]) -> Body:
    body = copy.deepcopy(GOOD[provider])
    change(body)
    return body


def _set(path: tuple[Any, ...], value: Any) -> Callable[[Body], None]:
    def change(body: Body) -> None:
        target: Any = body
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return change


def _delete(path: tuple[Any, ...]) -> Callable[[Body], None]:
    def change(body: Body) -> None:
        target: Any = body
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return change


# provider -> mistake -> (change, fragments the problem must contain)
MISTAKES: dict[str, dict[str, tuple[Callable[[Body], None], tuple[str, ...]]]] = {
    "openai-chat": {
        "unknown_top_key": (_set(("max_output_tokens",), 5), ("$.max_output_tokens", "unknown")),
        "unknown_nested_key": (
            _set(("messages", 3, "name"), "x"),
            ("$.messages[3].name", "unknown", "ChatCompletionToolMessageParam"),
        ),
        "missing_required": (
            _delete(("messages", 3, "tool_call_id")),
            ("$.messages[3]", "missing required key 'tool_call_id'"),
        ),
        "missing_top_required": (_delete(("model",)), ("$", "'model'")),
        "wrong_literal": (
            _set(("tools", 0, "type"), "fn"),
            ("$.tools[0].type", "'function'", "'fn'"),
        ),
        "bad_nested_list_element": (
            _set(("messages", 4, "content", 0), {"type": "text", "text": 3}),
            ("$.messages[4].content[0].text", "expected string"),
        ),
        "bool_is_not_int": (
            _set(("max_completion_tokens",), True),
            ("$.max_completion_tokens", "expected integer", "boolean"),
        ),
        "int_is_not_str": (_set(("prompt_cache_key",), 1), ("$.prompt_cache_key", "string")),
        "list_not_array": (_set(("tools",), {"x": 1}), ("$.tools", "array")),
    },
    "openai-responses": {
        "unknown_top_key": (_set(("messages",), []), ("$.messages", "unknown")),
        "unknown_nested_key": (
            _set(("input", 3, "outpt"), "x"),
            ("$.input[3].outpt", "unknown"),
        ),
        "missing_required": (
            _delete(("input", 2, "call_id")),
            ("$.input[2]", "missing required key 'call_id'"),
        ),
        "wrong_literal": (
            _set(("input", 0, "role"), "robot"),
            ("$.input[0].role", "'robot'"),
        ),
        "bad_nested_list_element": (
            _set(("tools", 0, "strict"), "no"),
            ("$.tools[0].strict", "boolean"),
        ),
        "bool_is_not_int": (_set(("max_output_tokens",), False), ("$.max_output_tokens",)),
    },
    "anthropic": {
        "unknown_top_key": (_set(("max_output_tokens",), 5), ("$.max_output_tokens", "unknown")),
        "unknown_nested_key": (
            _set(("messages", 0, "content", 0, "cache"), {}),
            ("$.messages[0].content[0].cache", "unknown", "TextBlockParam"),
        ),
        "missing_required": (_delete(("max_tokens",)), ("$", "'max_tokens'")),
        "missing_nested_required": (
            _delete(("messages", 1, "content", 0, "signature")),
            ("$.messages[1].content[0]", "'signature'", "ThinkingBlockParam"),
        ),
        "wrong_literal": (
            _set(("system", 0, "cache_control", "type"), "ephemeal"),
            ("$.system[0].cache_control.type", "'ephemeral'"),
        ),
        "bad_nested_list_element": (
            _set(("messages", 2, "content", 0, "content"), [{"type": "text", "text": None}]),
            ("$.messages[2].content[0].content[0].text", "expected string"),
        ),
        "role_literal": (_set(("messages", 0, "role"), "robot"), ("$.messages[0].role",)),
    },
    "bedrock-anthropic": {
        "unknown_top_key": (_set(("max_output_tokens",), 5), ("$.max_output_tokens", "unknown")),
        "missing_required": (_delete(("anthropic_version",)), ("$", "'anthropic_version'")),
        "missing_max_tokens": (_delete(("max_tokens",)), ("$", "'max_tokens'")),
        "missing_model_id": (_delete(("modelId",)), ("modelId",)),
        "model_id_pattern": (_set(("modelId",), "claude sonnet"), ("$.modelId", "pattern")),
        "wrong_literal": (
            _set(("anthropic_version",), "2023-06-01"),
            ("$.anthropic_version", "'bedrock-2023-05-31'"),
        ),
        "model_in_body": (_set(("model",), "claude-sonnet-5-5"), ("$.model", "path")),
        "stream_in_body": (_set(("stream",), True), ("$.stream", "path")),
        "betas_are_strings": (_set(("anthropic_beta",), "x"), ("$.anthropic_beta", "array")),
        "bad_nested_list_element": (
            _set(("messages", 2, "content", 0, "content"), [{"type": "text", "text": None}]),
            ("$.messages[2].content[0].content[0].text", "expected string"),
        ),
        "wrong_ttl": (
            _set(("cache_control", "ttl"), "2h"),
            ("$.cache_control.ttl", "'1h'"),
        ),
    },
    "gemini": {
        "unknown_top_key": (_set(("model",), "gemini-2.5-pro"), ("$.model", "unknown")),
        "snake_case_is_unknown": (
            _set(("system_instruction",), {"parts": []}),
            ("$.system_instruction", "unknown"),
        ),
        "unknown_nested_key": (
            _set(("contents", 1, "parts", 1, "functionCall", "arguments"), "{}"),
            ("$.contents[1].parts[1].functionCall.arguments", "unknown", "FunctionCall"),
        ),
        "vertex_only_key_is_unknown": (
            _set(("generationConfig", "routingConfig"), {}),
            ("$.generationConfig.routingConfig", "unknown"),
        ),
        "missing_required": (
            _delete(("contents", 2, "parts", 0, "functionResponse", "name")),
            ("$.contents[2].parts[0].functionResponse", "'name'", "FunctionResponse"),
        ),
        "missing_contents": (_delete(("contents",)), ("$", "'contents'")),
        "wrong_literal": (
            _set(("contents", 1, "role"), "assistant"),
            ("$.contents[1].role", "'model'", "'assistant'"),
        ),
        "bad_nested_list_element": (
            _set(("contents", 0, "parts", 0), {"text": 7}),
            ("$.contents[0].parts[0].text", "expected string"),
        ),
        "bool_is_not_int": (
            _set(("generationConfig", "maxOutputTokens"), True),
            ("$.generationConfig.maxOutputTokens", "integer"),
        ),
        "part_oneof": (
            _set(("contents", 0, "parts", 0, "inlineData"), {"mimeType": "x", "data": "AA=="}),
            ("$.contents[0].parts[0]", "exactly one"),
        ),
        "bytes_are_base64": (
            _set(("contents", 1, "parts", 0, "thoughtSignature"), "not base64!"),
            ("$.contents[1].parts[0].thoughtSignature", "base64"),
        ),
    },
    "bedrock-converse": {
        "unknown_top_key": (_set(("maxTokens",), 5), ("maxTokens", "Unknown parameter")),
        "unknown_nested_key": (
            _set(("messages", 2, "content", 0, "toolResult", "isError"), True),
            ("$.messages[2].content[0].toolResult", "isError"),
        ),
        "missing_required": (
            _delete(("messages", 1, "content", 1, "toolUse", "input")),
            ("$.messages[1].content[1].toolUse", "input"),
        ),
        "missing_model_id": (_delete(("modelId",)), ("modelId",)),
        "wrong_literal": (
            _set(("system", 1, "cachePoint", "type"), "ephemeral"),
            ("$.system[1].cachePoint.type", "'default'", "'ephemeral'"),
        ),
        "wrong_role": (_set(("messages", 0, "role"), "model"), ("$.messages[0].role",)),
        "bad_nested_list_element": (
            _set(("messages", 0, "content", 0), {"text": 5}),
            ("messages[0].content[0].text", "Invalid type"),
        ),
        "union_two_members": (
            _set(("messages", 0, "content", 0, "cachePoint"), {"type": "default"}),
            ("messages[0].content[0]", "tagged union"),
        ),
        "bool_is_not_int": (
            _set(("inferenceConfig", "maxTokens"), True),
            ("$.inferenceConfig.maxTokens", "boolean"),
        ),
        "tool_name_pattern": (
            _set(("toolConfig", "tools", 0, "toolSpec", "name"), "read.file"),
            ("$.toolConfig.tools[0].toolSpec.name", "pattern"),
        ),
        "tool_name_too_long": (
            _set(("toolConfig", "tools", 0, "toolSpec", "name"), "t" * 65),
            ("$.toolConfig.tools[0].toolSpec.name", "maximum 64"),
        ),
        "blob_is_base64": (
            _set(("messages", 1, "content", 0), {"reasoningContent": {"redactedContent": "@@"}}),
            ("$.messages[1].content[0].reasoningContent.redactedContent", "base64"),
        ),
    },
}

CASES = [(p, m) for p in PROVIDERS for m in sorted(MISTAKES[p])]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_accepts_known_good_body(provider: str) -> None:
    assert judge(provider, GOOD[provider]) == []
    assert_valid(provider, GOOD[provider])


@pytest.mark.parametrize(("provider", "mistake"), CASES)
def test_catches_mistake(provider: str, mistake: str) -> None:
    change, fragments = MISTAKES[provider][mistake]
    problems = judge(provider, mutated(provider, change))
    assert problems, f"{provider}/{mistake}: the judge accepted a wrong body"
    text = "\n".join(problems)
    for fragment in fragments:
        assert fragment in text, text
    with pytest.raises(AssertionError, match=provider):
        assert_valid(provider, mutated(provider, change))


def test_every_provider_has_the_four_basic_mistakes() -> None:
    for provider in PROVIDERS:
        names = set(MISTAKES[provider])
        assert {"unknown_top_key", "missing_required", "wrong_literal"} <= names, provider
        assert "bad_nested_list_element" in names, provider


def test_problems_are_dollar_paths() -> None:
    for provider in PROVIDERS:
        change, _ = MISTAKES[provider]["wrong_literal"]
        for problem in judge(provider, mutated(provider, change)):
            assert problem.startswith("$"), problem
            assert ": " in problem, problem


def test_iterables_are_checked_eagerly_every_element() -> None:
    """Every bad element is reported, not only the first (Iterable is walked eagerly)."""
    body = copy.deepcopy(GOOD["openai-chat"])
    body["messages"] += [{"role": "user", "content": 1}, {"role": "user", "content": 2}]
    problems = judge("openai-chat", body)
    assert any("$.messages[5]" in p for p in problems)
    assert any("$.messages[6]" in p for p in problems)


def test_union_reports_the_closest_alternative() -> None:
    body = copy.deepcopy(GOOD["openai-chat"])
    body["messages"][3] = {"role": "tool", "tool_call_id": "c1", "content": 5}
    problems = judge("openai-chat", body)
    assert problems
    assert all("ChatCompletionToolMessageParam" in p for p in problems), problems


def test_literal_true_is_not_one() -> None:
    body = copy.deepcopy(GOOD["openai-responses"])
    body["tools"][0]["strict"] = 0
    assert judge("openai-responses", body)


def test_nan_is_not_json() -> None:
    body = copy.deepcopy(GOOD["openai-chat"])
    body["temperature"] = float("nan")
    assert judge("openai-chat", body)


def test_object_values_accept_any_json() -> None:
    body = copy.deepcopy(GOOD["gemini"])
    args = {"n": 1, "f": 0.5, "b": True, "z": None, "l": [1, "x"], "o": {"k": []}}
    body["contents"][1]["parts"][1]["functionCall"]["args"] = args
    assert judge("gemini", body) == []


def test_unknown_provider() -> None:
    with pytest.raises(KeyError, match="known"):
        judge("gemini-pro", {})


@pytest.mark.parametrize("store", [None, True, False])
def test_a_reasoning_id_needs_its_following_item_by_id(store: bool | None) -> None:
    """Whatever store is, "Item 'rs_...' of type 'reasoning' was provided without its
    required following item" when the item after a reasoning id has none
    (vercel/ai#10827). The service's own default is store: true."""
    from service_rules import violations

    body = copy.deepcopy(GOOD["openai-responses"])
    body["input"][1]["id"] = "rs_1"
    if store is not None:
        body["store"] = store
    problems = violations("openai-responses", body)
    assert problems[0] == (
        "$.input[1].id: reasoning item 'rs_1' is followed by an item without an id"
        " (its required following item)"
    )
    body["input"][2]["id"] = "fc_1"
    assert (violations("openai-responses", body) == []) is (store is not False)
