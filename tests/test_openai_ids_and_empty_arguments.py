"""OpenAI tool call ids and empty arguments.

* Chat Completions refuses a ``tool_calls[].id`` / ``tool_call_id`` over 40 characters,
  Responses a ``call_id`` over 64 (the 400s quoted in ``tests/service_rules.py``): a
  longer id, as other providers and gateways produce, is mapped by one documented rule
  (``providers/openai_chat.py``, "Tool call ids") the same on the call and its result.
* Both APIs send ``arguments: ""`` for a tool without parameters: the readers read it as
  ``{}``, so the output can be recorded (``providers/readers/openai_chat.py``,
  ``call_arguments``).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import CONV, REPO, example_bundle, user
from prefixlock import Conversation, SQLiteStore, ToolCall, ToolResult, build_bundle, providers
from prefixlock.core.messages import ToolCallPart
from prefixlock.core.model import ModelRequest
from prefixlock.core.output import ModelOutput
from prefixlock.providers.openai_chat import wire_tool_call_id
from prefixlock.providers.openai_responses import wire_call_id
from prefixlock.store.contract import MemoryStore
from read_support import read_stream
from sdk_judge import assert_valid

CHAT = providers.get("openai-chat")
RESPONSES = providers.get("openai-responses")

#: ``call_`` + a UUID: 41 characters, one over Chat Completions' limit.
ID41 = "call_0b9f1c1e-8a3e-4c53-9d7f-6f2b1f0f5a11"
#: Bedrock's longest (64): over Chat's limit, at Responses'.
ID64 = "tooluse_Ab3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5kL7nP9rS1uV3xY5aB7cD"
#: One over Responses' limit.
ID65 = ID64 + "z"
#: Two ids over 40 characters that share their first 40 (and so any shorter head).
SAME_HEAD = ("call_" + "x" * 35 + "-first", "call_" + "x" * 35 + "-second")
#: An id every wire sends as is.
SHORT = "call_Ab12Cd34"


def _digest(call_id: str) -> str:
    return hashlib.sha256(call_id.encode()).hexdigest()[:16]


def _conversation(conv: Conversation, ids: tuple[str, ...]) -> ModelRequest:
    """One assistant message calling ``read_file`` under each id, then their results."""
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall(i, "read_file", {"path": f"{n}.py"}) for n, i in enumerate(ids)])
    return conv.tool_results([ToolResult(i, f"output {n}") for n, i in enumerate(ids)])


def _chat_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the assistant's tool_calls[].id, the tool messages' tool_call_id), in order."""
    calls = [c["id"] for m in body["messages"] for c in m.get("tool_calls", ())]
    results = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    return calls, results


def _responses_ids(body: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(function_call call_ids, function_call_output call_ids), in order."""
    items = body["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    results = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    return calls, results


def _check_ids(request: ModelRequest, ids: tuple[str, ...]) -> None:
    """Each OpenAI wire's ids fit its limit, pair up, keep fitting ids as they are, map
    apart, and follow the documented rule."""
    for name, read, limit in (
        ("openai-chat", _chat_ids, 40),
        ("openai-responses", _responses_ids, 64),
    ):
        calls, results = read(providers.get(name).body(request))
        assert calls == results  # every result still names its call
        assert len(set(calls)) == len(ids)  # distinct ids stay distinct
        for original, sent in zip(ids, calls, strict=True):
            assert len(sent) <= limit
            if len(original) <= limit:
                assert sent == original
            else:
                assert sent == f"{original[: limit - 17]}_{_digest(original)}"
                assert len(sent) == limit


def test_long_ids_are_mapped_and_pair_up_in_a_conversation_every_provider_sends() -> None:
    ids = (SHORT, ID41, ID64, *SAME_HEAD)
    conv = Conversation.open(MemoryStore(), example_bundle(), CONV)
    assert sorted(s.provider for s in conv.history.root.settings) == sorted(providers.NAMES)
    request = _conversation(conv, ids)
    _check_ids(request, ids)
    chat, _ = _chat_ids(CHAT.body(request))
    assert chat[0] == SHORT and chat[3][:23] == chat[4][:23] and chat[3] != chat[4]
    for name in providers.NAMES:
        assert_valid(name, providers.get(name).body(request))


def _root_without_bedrock(tmp_path: Path) -> Conversation:
    """The minimal spec with every provider but Bedrock, whose ``ToolUseId`` is at most
    64 characters (providers/bedrock_converse.py), so admission refuses a longer id."""
    root = tmp_path / "spec"
    shutil.copytree(REPO / "tests" / "data" / "specs" / "minimal", root)
    (root / "rules" / "providers.yaml").write_text(
        "providers:\n"
        "  anthropic: {model: claude-sonnet-4-5, max_tokens: 4096}\n"
        "  openai-chat: {model: gpt-4.1, max_tokens: 4096}\n"
        "  openai-responses: {model: gpt-5, max_tokens: 4096}\n"
        "  gemini: {model: gemini-2.5-pro, max_tokens: 4096}\n",
        encoding="utf-8",
    )
    return Conversation.open(SQLiteStore(tmp_path / "s.db"), build_bundle(root), CONV)


def test_an_id_over_64_is_mapped_for_responses_too(tmp_path: Path) -> None:
    ids = (ID41, ID64, ID65)
    conv = _root_without_bedrock(tmp_path)
    request = _conversation(conv, ids)
    _check_ids(request, ids)
    calls, _ = _responses_ids(RESPONSES.body(request))
    assert calls[:2] == [ID41, ID64] and calls[2] != ID65
    for setting in conv.history.root.settings:
        assert_valid(setting.provider, providers.get(setting.provider).body(request))


def test_the_mapping_is_pinned() -> None:
    assert [len(i) for i in (ID41, ID64, ID65, *SAME_HEAD)] == [41, 64, 65, 46, 47]
    # the documented rule: the head, "_", 16 hex digits of the id's SHA-256
    assert wire_tool_call_id(ID41) == "call_0b9f1c1e-8a3e-4c53_e98596c2f6ce6161"
    assert wire_tool_call_id(ID41) == ID41[:23] + "_" + _digest(ID41)
    assert wire_call_id(ID65) == "tooluse_Ab3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1dF3hJ5kL7_c7a6ff71d73eb152"
    assert wire_tool_call_id(wire_tool_call_id(ID41)) == wire_tool_call_id(ID41)
    assert (wire_tool_call_id(SHORT), wire_call_id(ID64)) == (SHORT, ID64)


def test_the_service_rules_refuse_the_ids_as_they_were_sent_before() -> None:
    request = _conversation(Conversation.open(MemoryStore(), example_bundle(), CONV), (ID41,))
    chat = CHAT.body(request)
    assistant, tool = (m for m in chat["messages"] if "tool_calls" in m or m["role"] == "tool")
    assistant["tool_calls"][0]["id"] = tool["tool_call_id"] = ID41
    with pytest.raises(AssertionError, match="string too long") as raised:
        assert_valid("openai-chat", chat)
    assert "$.messages[4].tool_call_id: string too long (41): at most 40" in str(raised.value)
    assert "$.messages[3].tool_calls[0].id: string too long (41)" in str(raised.value)
    responses = RESPONSES.body(request)
    for item in responses["input"]:
        if item.get("type") in ("function_call", "function_call_output"):
            item["call_id"] = ID65
    with pytest.raises(AssertionError, match=r"call_id: string too long \(65\): at most 64"):
        assert_valid("openai-responses", responses)


# ------------------------------------------------------------------ empty arguments

#: What the APIs send as the arguments of a call without any (and whitespace around it).
EMPTY = ("", " \n")


def _chat_body(arguments: str) -> bytes:
    """A Chat completion calling ``read_lints`` (no required parameter) with
    ``arguments``, as openai/openai-python#3502 shows."""
    function = {"name": "read_lints", "arguments": arguments}
    call = {"id": "call_1", "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "finish_reason": "tool_calls", "message": message}
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4.1",
            "choices": [choice],
        }
    ).encode()


def _chat_stream(arguments: str) -> bytes:
    """The same call streamed: the id and name first, then ``arguments`` (if any)."""
    head = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "read_lints", "arguments": ""},
    }
    deltas: list[dict[str, Any]] = [{"role": "assistant", "tool_calls": [head]}]
    if arguments:
        deltas.append({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]})
    chunks: list[dict[str, Any]] = [{"index": 0, "delta": d, "finish_reason": None} for d in deltas]
    chunks.append({"index": 0, "delta": {}, "finish_reason": "tool_calls"})
    lines = [
        json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "gpt-4.1",
                "choices": [c],
            }
        )
        for c in chunks
    ]
    return "".join(f"data: {line}\n\n" for line in [*lines, "[DONE]"]).encode()


def _function_call(arguments: str) -> dict[str, Any]:
    return {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "read_lints",
        "arguments": arguments,
    }


def _response(arguments: str) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "gpt-5",
        "output": [_function_call(arguments)],
    }


def _responses_stream(arguments: str) -> bytes:
    """The same call as a Responses stream: item added, argument deltas (none for
    ``""``), arguments done, item done, the completed response."""
    events: list[dict[str, Any]] = [
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**_function_call(""), "status": "in_progress"},
        },
    ]
    if arguments:
        events.append(
            {
                "type": "response.function_call_arguments.delta",
                "output_index": 0,
                "item_id": "fc_1",
                "delta": arguments,
            }
        )
    events += [
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "item_id": "fc_1",
            "arguments": arguments,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": _function_call(arguments)},
        {"type": "response.completed", "response": _response(arguments)},
    ]
    return "".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n"
        for n, e in enumerate(events)
    ).encode()


#: Each way an OpenAI output is read: (provider, read(arguments) -> output).
READS: dict[str, tuple[str, Callable[[str], ModelOutput]]] = {
    "chat-response": ("openai-chat", lambda a: CHAT.parse_response(_chat_body(a))),
    "chat-stream": ("openai-chat", lambda a: read_stream("openai-chat", _chat_stream(a))),
    "responses-response": (
        "openai-responses",
        lambda a: RESPONSES.parse_response(json.dumps(_response(a)).encode()),
    ),
    "responses-stream": (
        "openai-responses",
        lambda a: read_stream("openai-responses", _responses_stream(a)),
    ),
}


@pytest.mark.parametrize("arguments", EMPTY, ids=["empty", "blank"])
@pytest.mark.parametrize("how", sorted(READS))
def test_empty_arguments_read_as_an_empty_object_and_are_recorded(how: str, arguments: str) -> None:
    # openai/openai-python#3502, langchain-ai/langchain#13467, vllm-project/vllm#19419:
    # "" for a tool without parameters; before, record refused it ("are not JSON")
    name, read = READS[how]
    output = read(arguments)
    conv = Conversation.open(MemoryStore(), example_bundle(), CONV)
    conv.handle(user("u1"))
    recorded = conv.record(output)  # before: HistoryError "arguments are not JSON"
    assert output.provider == name
    assert output.parts == recorded.parts == (ToolCallPart("call_1", "read_lints", "{}"),)
    request = conv.tool_results([ToolResult("call_1", "no diagnostics")])
    for provider in providers.NAMES:
        assert_valid(provider, providers.get(provider).body(request))
    # arguments that are not empty stay verbatim, spaces and all
    assert read('{ "paths": ["a.py"] }').tool_calls[0].arguments == '{ "paths": ["a.py"] }'
