"""OpenAI Responses: canonical inputs -> exact bodies (sqlglot validate_all style)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prefixlock.core import canonical
from prefixlock.core.messages import ImagePart, MessageKind, OpaquePart, TextPart, ToolResultPart
from prefixlock.core.model import ModelRequest, ProviderSettings
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

NAME = "openai-responses"

TOOLS_WIRE = [
    {
        "type": "function",
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
            "type": "object",
        },
        "strict": False,
    },
    {
        "type": "function",
        "name": "grep",
        "description": "Search files.",
        "parameters": {
            "properties": {"pattern": {"type": "string"}},
            "required": ["pattern"],
            "type": "object",
        },
        "strict": False,
    },
]


def user(content: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": content}


def said(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": text}


def fcall(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments}


def output(call_id: str, text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


CTX_WIRE = user("<rules>use tabs</rules>")
RT_WIRE = user("Fix the bug in app.py")


def body(*items: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "gpt-5",
        "max_output_tokens": 4096,
        "instructions": INSTRUCTIONS,
        "tools": TOOLS_WIRE,
        "input": list(items),
        "prompt_cache_key": CACHE_KEY,
        # the default store policy: stateless, encrypted reasoning asked back
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }


CASES: dict[str, tuple[Callable[[], ModelRequest], dict[str, Any]]] = {
    "simple": (simple, body(CTX_WIRE, RT_WIRE)),
    "tool_loop_parallel": (
        tool_loop,
        body(
            CTX_WIRE,
            RT_WIRE,
            said("Let me look."),
            fcall("call_a", "read_file", '{"path":"app.py"}'),
            fcall("call_b", "grep", '{"pattern":"TODO"}'),
            output("call_a", "print('hi')\n"),
            output("call_b", "no such pattern"),
            user("Background build finished."),
            said("Done."),
        ),
    ),
    "reasoning_item_verbatim_before_call": (
        lambda: opaque(NAME, RESPONSES_REASONING),
        body(
            CTX_WIRE,
            RT_WIRE,
            # store: false: sent without its id (the rest exactly as received)
            {
                "encrypted_content": "gAAAAABo-encrypted",
                "summary": [],
                "type": "reasoning",
            },
            said("Reading."),
            fcall("call_a", "read_file", '{"path":"app.py"}'),
            output("call_a", "x = 1\n"),
        ),
    ),
    "unicode": (unicode, body(CTX_WIRE, user(UNICODE_TEXT), said("ok 👍"))),
    "long_text": (long_text, body(CTX_WIRE, user(LONG_TEXT))),
    "image": (
        image,
        body(
            CTX_WIRE,
            user(
                [
                    {"type": "input_text", "text": "What is in this screenshot?"},
                    {
                        "type": "input_image",
                        "detail": "auto",
                        "image_url": f"data:image/png;base64,{PNG_B64}",
                    },
                ]
            ),
        ),
    ),
    "empty_text_is_fine": (empty_text, body(CTX_WIRE, user(""))),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_validate_all(case: str) -> None:
    build, expected = CASES[case]
    assert_wire(produce(NAME, build()), expected)


def test_exact_bytes_tool_loop_tail() -> None:
    req = request(
        RT,
        assistant(1, call("c1", "grep", pattern="é")),
        results(ToolResultPart("c1", "ok")),
        tools=(),
        instructions="Be brief.",
    )
    assert (
        get(NAME).serialize(req)
        == (
            '{"model":"gpt-5","max_output_tokens":4096,"instructions":"Be brief.","input":['
            '{"type":"message","role":"user","content":"Fix the bug in app.py"},'
            '{"type":"function_call","call_id":"c1","name":"grep","arguments":"{\\"pattern\\":\\"é\\"}"},'
            '{"type":"function_call_output","call_id":"c1","output":"ok"}],'
            '"prompt_cache_key":"prefixlock:conv-1","store":false,'
            '"include":["reasoning.encrypted_content"]}'
        ).encode()
    )


def test_consecutive_user_messages_are_not_merged() -> None:
    req = request(CTX, RT, event("b1", "x"), event("b2", "y"))
    assert produce(NAME, req)["input"] == [CTX_WIRE, RT_WIRE, user("x"), user("y")]


def test_assistant_parts_map_to_items_in_part_order() -> None:
    req = request(
        RT,
        assistant(
            1,
            TextPart("a"),
            call("c1", "grep", pattern="p"),
            TextPart("b"),
            OpaquePart(NAME, RESPONSES_REASONING),
            call("c2", "grep", pattern="q"),
        ),
    )
    kinds = [(i["type"], i.get("role")) for i in produce(NAME, req)["input"][1:]]
    assert kinds == [
        ("message", "assistant"),
        ("function_call", None),
        ("message", "assistant"),
        ("reasoning", None),
        ("function_call", None),
    ]


def test_instructions_top_level_and_omitted_when_empty() -> None:
    assert "instructions" not in produce(NAME, request(RT, instructions=""))
    assert produce(NAME, simple())["instructions"] == INSTRUCTIONS


def test_options_merge_and_reserved_refused() -> None:
    settings = (
        ProviderSettings(NAME, "gpt-5", 10, '{"store":false,"reasoning":{"effort":"low"}}'),
    )
    b = produce(NAME, request(RT, settings=settings))
    assert list(b)[-4:] == ["prompt_cache_key", "store", "include", "reasoning"]
    for key in ("instructions", "input", "max_output_tokens", "prompt_cache_key"):
        bad = (ProviderSettings(NAME, "gpt-5", 10, canonical.dumps({key: "x"})),)
        refused(NAME, request(RT, settings=bad), "reserved", key)


def test_prompt_cache_key_and_no_markers() -> None:
    provider = get(NAME)
    b = provider.body(tool_loop())
    assert b["prompt_cache_key"] == CACHE_KEY
    assert provider.strip_cache_markers(b) == b


# --------------------------------------------------------------------------- refusals


def test_lone_surrogates_refused() -> None:
    refused(NAME, lone_surrogate(), NAME, "'runtime:u1'", "part 0", "surrogate")
    refused(NAME, lone_surrogate_instructions(), NAME, "instructions", "surrogate")


def test_foreign_opaque_refused() -> None:
    refused(NAME, opaque("anthropic", ANTHROPIC_THINKING), NAME, "'assistant:1'", "part 0")
    refused(NAME, opaque("openai-chat", "{}"), NAME, "'openai-chat'")


def test_opaque_in_user_message_refused() -> None:

    req = request(msg(MessageKind.RUNTIME, "runtime:u1", OpaquePart(NAME, RESPONSES_REASONING)))
    refused(NAME, req, "'runtime:u1'", "part 0", "opaque")


def test_images_only_in_user_messages() -> None:
    refused(NAME, image_in_tool_result(), NAME, "'tool-results:call_a'", "part 1", "image")
    req = request(RT, assistant(1, ImagePart("image/png", PNG_B64)))
    refused(NAME, req, "'assistant:1'", "part 0", "image")


def test_text_in_tool_result_refused() -> None:
    req = request(
        RT,
        assistant(1, call("c", "grep", pattern="x")),
        results(ToolResultPart("c", "o"), TextPart("note")),
    )
    refused(NAME, req, "'tool-results:c'", "part 1", "text")


def test_tool_name_limits() -> None:
    refused(NAME, long_tool_name(), NAME, "'assistant:1'", "part 0", "1-64")
    refused(NAME, bad_tool_name_chars(), NAME, "'read.file'")


def test_runtime_first_request_without_context() -> None:
    assert produce(NAME, request(runtime("u9", "hi")))["input"] == [user("hi")]


def test_sdk_judge_rejects_wrong_bodies() -> None:
    from sdk_judge import judge

    good = get(NAME).body(tool_loop())
    assert judge(NAME, good) == []
    assert judge(NAME, {**good, "messages": []})  # Chat's key is unknown here
    output_text = {"type": "output_text", "text": "hi"}
    no_id = {**good, "input": [{"type": "message", "role": "assistant", "content": [output_text]}]}
    assert judge(NAME, no_id)  # output message without id/status/annotations
    missing_strict = {
        **good,
        "tools": [{k: v for k, v in good["tools"][0].items() if k != "strict"}],
    }
    assert judge(NAME, missing_strict)  # required key


# ----------------------------------------------------------------------- store policy


def _store(value: bool, include: list[str] | None = None) -> tuple[ProviderSettings, ...]:
    options: dict[str, Any] = {"store": value}
    if include is not None:
        options["include"] = include
    return (ProviderSettings(NAME, "gpt-5", 4096, canonical.dumps(options)),)


def test_store_false_is_the_default_and_sends_no_item_ids() -> None:
    # "Item 'rs_...' of type 'reasoning' was provided without its required following
    # item" (vercel/ai#7099, langchainjs#9082): stateless requests carry no ids.
    default = produce(NAME, opaque(NAME, RESPONSES_REASONING))
    explicit = produce(
        NAME, request(*opaque(NAME, RESPONSES_REASONING).messages, settings=_store(False))
    )
    assert default == explicit
    assert (default["store"], default["include"]) == (False, ["reasoning.encrypted_content"])
    assert all("id" not in item for item in default["input"])
    assert default["input"][2] == {
        "encrypted_content": "gAAAAABo-encrypted",
        "summary": [],
        "type": "reasoning",
    }


def test_store_true_sends_the_same_self_contained_items() -> None:
    """store: true asks for the encrypted reasoning too and sends no item ids: an rs_ id
    needs its following item by id, which a canonical tool call or text does not keep
    (vercel/ai#10827). Before, the id went out and was refused."""
    stateless = produce(NAME, opaque(NAME, RESPONSES_REASONING))
    b = produce(NAME, request(*opaque(NAME, RESPONSES_REASONING).messages, settings=_store(True)))
    assert b["store"] is True
    assert b["include"] == ["reasoning.encrypted_content"]
    assert {**b, "store": False} == stateless
    assert "id" not in b["input"][2]


def test_store_policy_keeps_an_include_the_options_give() -> None:
    for store in (False, True):
        b = produce(NAME, request(RT, settings=_store(store, ["message.output_text.logprobs"])))
        assert b["include"] == ["message.output_text.logprobs", "reasoning.encrypted_content"]


def test_one_instance_serves_both_store_policies() -> None:
    live = get(NAME)
    stateless = opaque(NAME, RESPONSES_REASONING)
    stored = request(*stateless.messages, settings=_store(True))
    for req in (stateless, stored, stateless):
        assert live.serialize(req) == canonical.dumpb(get(NAME).wire_body(req))
    assert b'"id":"rs_0123"' not in live.serialize(stored)
    assert live.serialize(stored).replace(b'"store":true', b'"store":false') == live.serialize(
        stateless
    )


def test_bad_store_or_include_refused() -> None:
    bad = (ProviderSettings(NAME, "gpt-5", 10, '{"store":"no"}'),)
    refused(NAME, request(RT, settings=bad), NAME, "'store' must be true or false")
    bad = (ProviderSettings(NAME, "gpt-5", 10, '{"include":"x"}'),)
    refused(NAME, request(RT, settings=bad), NAME, "'include' must be a list")
