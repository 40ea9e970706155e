"""Service rules: what the real APIs refuse although the SDK request types allow it
(test-only; beside :mod:`sdk_judge`).

The SDK judge checks a body against the official request *types*; the services enforce
more. Each rule here is one function ``rule(body) -> list[str]`` (violations as
``"$.path: message"``, empty when the body keeps the rule), with its source in a comment:
the API documentation, or a public issue quoting the service's error. The body is the
one :func:`sdk_judge.judge` takes (Bedrock: the full Converse params, ``modelId``
included).

``violations(provider, body)`` runs every rule of ``provider``; ``assert_accepted``
raises ``AssertionError`` listing them. :func:`sdk_judge.assert_valid` runs both the SDK
judge and these rules, so every body a test produces and every golden body is checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = ["MODEL_RULES", "RULES", "assert_accepted", "violations"]

Rule = Callable[[Mapping[str, Any]], list[str]]


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _blocks(message: Any) -> list[Any]:
    return _list(message.get("content")) if isinstance(message, Mapping) else []


def _messages(body: Mapping[str, Any]) -> list[Any]:
    return _list(body.get("messages"))


def _turns(messages: Sequence[Any]) -> Iterator[tuple[str, list[tuple[str, Any]]]]:
    """Consecutive same-role messages combined into one turn, as Anthropic's API does:
    ``(role, [(json path, block)...])``."""
    role: str | None = None
    blocks: list[tuple[str, Any]] = []
    for i, message in enumerate(messages):
        this = message.get("role") if isinstance(message, Mapping) else None
        if blocks and this != role:
            yield str(role), blocks
            blocks = []
        role = this
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            blocks.append((f"$.messages[{i}].content", {"type": "text", "text": content}))
        else:
            blocks.extend(
                (f"$.messages[{i}].content[{j}]", b) for j, b in enumerate(_list(content))
            )
    if blocks:
        yield str(role), blocks


# ------------------------------------------------------------------ Bedrock Converse


def bedrock_roles_alternate(body: Mapping[str, Any]) -> list[str]:
    # Converse answers ValidationException "A conversation must alternate between user
    # and assistant roles" (langchain-aws#130, Portkey gateway#748, semantic-kernel#10281,
    # where a maintainer calls it "a limitation of the Bedrock service"). The service does
    # not merge consecutive same-role messages.
    out = []
    messages = _messages(body)
    for i in range(1, len(messages)):
        before, this = messages[i - 1].get("role"), messages[i].get("role")
        if before == this:
            out.append(
                f"$.messages[{i}].role: {this!r} follows {before!r}: a conversation must "
                "alternate between user and assistant roles"
            )
    return out


def bedrock_first_message_is_user(body: Mapping[str, Any]) -> list[str]:
    # The same alternation rule starts with the user: "A conversation must start with a
    # user message" (the ValidationException the issues above report next to it).
    messages = _messages(body)
    if messages and messages[0].get("role") != "user":
        return [
            f"$.messages[0].role: {messages[0].get('role')!r}: a conversation must start "
            "with a user message"
        ]
    return []


def bedrock_no_blank_text(body: Mapping[str, Any]) -> list[str]:
    # ValidationException "text content blocks must contain non-whitespace text" (Bedrock
    # Converse; the same check applies to a toolResult's text content).
    out = []

    def check(blocks: list[Any], path: str) -> None:
        for j, block in enumerate(blocks):
            if not isinstance(block, Mapping):
                continue
            if "text" in block and isinstance(block["text"], str) and not block["text"].strip():
                out.append(
                    f"{path}[{j}].text: text content blocks must contain non-whitespace text"
                )
            result = block.get("toolResult")
            if isinstance(result, Mapping):
                check(_list(result.get("content")), f"{path}[{j}].toolResult.content")

    check(_list(body.get("system")), "$.system")
    for i, message in enumerate(_messages(body)):
        check(_blocks(message), f"$.messages[{i}].content")
    return out


def bedrock_at_most_four_cache_points(body: Mapping[str, Any]) -> list[str]:
    # "You can define up to 4 cache checkpoints" per request (Amazon Bedrock user guide,
    # prompt caching: https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html).
    count = _count(body, lambda value: set(value) == {"cachePoint"})
    return [] if count <= 4 else [f"$: {count} cachePoint blocks; at most 4 per request"]


# ------------------------------------------------------------------------- Anthropic

#: "tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'" (Anthropic Messages API
#: 400 invalid_request_error; the SDK type is a plain ``str``).
TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")


def anthropic_tool_use_ids(body: Mapping[str, Any]) -> list[str]:
    # Anthropic API: tool_use.id must match ^[a-zA-Z0-9_-]+$ (a 400 otherwise), and a
    # tool_result's tool_use_id names such an id.
    out = []
    for i, message in enumerate(_messages(body)):
        for j, block in enumerate(_blocks(message)):
            if not isinstance(block, Mapping):
                continue
            key = {"tool_use": "id", "tool_result": "tool_use_id"}.get(str(block.get("type")))
            if key is not None and not TOOL_USE_ID.fullmatch(str(block.get(key))):
                out.append(
                    f"$.messages[{i}].content[{j}].{key}: {block.get(key)!r} does not match "
                    "^[a-zA-Z0-9_-]+$"
                )
    return out


def anthropic_tool_results_first(body: Mapping[str, Any]) -> list[str]:
    # Anthropic tool-use guide: "tool_result blocks must come first in the user message
    # content" (a 400 otherwise). Checked on the turn the API sees: "Consecutive user or
    # assistant turns in your request will be combined into a single turn" (Messages API
    # reference, ``messages``).
    out = []
    for role, blocks in _turns(_messages(body)):
        if role != "user":
            continue
        seen_other: str | None = None
        for path, block in blocks:
            is_result = isinstance(block, Mapping) and block.get("type") == "tool_result"
            if not is_result:
                seen_other = seen_other or path
            elif seen_other is not None:
                out.append(
                    f"{path}: tool_result blocks must come first in the user message content "
                    f"(after {seen_other})"
                )
    return out


def anthropic_roles(body: Mapping[str, Any]) -> list[str]:
    # Messages API reference, ``messages``: roles are "user" and "assistant";
    # "Consecutive user or assistant turns in your request will be combined into a single
    # turn", so the turns alternate once combined (which :func:`_turns` models; the rules
    # above judge the combined turns).
    return [
        f"$.messages[{i}].role: {m.get('role')!r} is not 'user' or 'assistant'"
        for i, m in enumerate(_messages(body))
        if not isinstance(m, Mapping) or m.get("role") not in ("user", "assistant")
    ]


def anthropic_no_blank_text(body: Mapping[str, Any]) -> list[str]:
    # Anthropic API 400 "messages: text content blocks must contain non-whitespace text"
    # (and "text content blocks must be non-empty" for "").
    out = []
    system = body.get("system")
    for j, block in enumerate(_list(system)):
        if isinstance(block, Mapping) and not str(block.get("text", "")).strip():
            out.append(f"$.system[{j}].text: text content blocks must contain non-whitespace text")
    for i, message in enumerate(_messages(body)):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str) and not content.strip():
            out.append(f"$.messages[{i}].content: text content must contain non-whitespace text")
        for j, block in enumerate(_list(content)):
            if (
                isinstance(block, Mapping)
                and block.get("type") == "text"
                and not str(block.get("text", "")).strip()
            ):
                out.append(
                    f"$.messages[{i}].content[{j}].text: text content blocks must contain "
                    "non-whitespace text"
                )
    return out


def anthropic_at_most_four_breakpoints(body: Mapping[str, Any]) -> list[str]:
    # Prompt caching guide: "You can define up to 4 cache breakpoints" (the top-level
    # automatic cache_control uses one of them).
    count = _count(body, lambda value: "cache_control" in value)
    return [] if count <= 4 else [f"$: {count} cache_control breakpoints; at most 4"]


# ---------------------------------------------------------------------------- Gemini

#: ``GenerateContentRequest`` fields that are siblings of ``generationConfig`` (Gemini API
#: reference, models.generateContent request body:
#: https://ai.google.dev/api/generate-content#request-body).
GEMINI_TOP_LEVEL = ("toolConfig", "safetySettings", "cachedContent", "systemInstruction", "tools")


def gemini_function_response_parts_are_media(body: Mapping[str, Any]) -> list[str]:
    # Multimodal function responses: "multimodal data should be included as parts nested
    # within functionResponse, and each multimodal part must contain inlineData or
    # fileData" (Google's function-calling docs, quoted in BerriAI/litellm#29324;
    # https://ai.google.dev/gemini-api/docs/function-calling#multimodal-function-responses).
    out = []
    for i, content in enumerate(_list(body.get("contents"))):
        parts = content.get("parts") if isinstance(content, Mapping) else None
        for j, part in enumerate(_list(parts)):
            response = part.get("functionResponse") if isinstance(part, Mapping) else None
            if not isinstance(response, Mapping) or "parts" not in response:
                continue
            for k, media in enumerate(_list(response["parts"])):
                keys = set(media) if isinstance(media, Mapping) else set()
                if len(keys & {"inlineData", "fileData"}) != 1:
                    out.append(
                        f"$.contents[{i}].parts[{j}].functionResponse.parts[{k}]: each "
                        "multimodal part must contain inlineData or fileData"
                    )
    return out


def gemini_request_fields_at_top_level(body: Mapping[str, Any]) -> list[str]:
    # toolConfig, safetySettings and cachedContent are top-level GenerateContentRequest
    # fields (reference above); inside generationConfig the request is malformed.
    config = body.get("generationConfig")
    if not isinstance(config, Mapping):
        return []
    return [
        f"$.generationConfig.{key}: a top-level GenerateContentRequest field, not a "
        "generationConfig member"
        for key in GEMINI_TOP_LEVEL
        if key in config
    ]


def gemini_cached_content_excludes_the_root(body: Mapping[str, Any]) -> list[str]:
    # With cachedContent, the instructions and tools live in the cache: the API answers
    # 400 INVALID_ARGUMENT "CachedContent can not be used with GenerateContent request
    # setting system_instruction, tools or tool_config" (vercel/ai#3333,
    # langchain-google#978, litellm#17304; newer wording "Tool config, tools and system
    # instruction should not be set in the request when using cached content",
    # instructor#2580, python-genai#348).
    if "cachedContent" not in body:
        return []
    return [
        f"$.{key}: must not be set in a request using cachedContent (it lives in the cache)"
        for key in ("systemInstruction", "tools", "toolConfig")
        if key in body
    ]


#: A Gemini model id's major version.
_GEMINI_MAJOR = re.compile(r"(?:models/)?gemini-(\d+)")


def gemini_3_current_turn_calls_signed(body: Mapping[str, Any], model: str) -> list[str]:
    # Gemini 3 and later refuse a step of the current turn whose first functionCall has
    # no thoughtSignature: 400 INVALID_ARGUMENT "Function call is missing a
    # thought_signature in functionCall parts. This is required for tools to work
    # correctly, and missing thought_signature may lead to degraded model performance.
    # Additional data, function call `default_api:Bash` , position 2. ..."
    # (lbjlaq/Antigravity-Manager#3202; gemini-3.1-flash-lite-preview in
    # nearai/ironclaw#1510; not on gemini-2.5, nanbingxyz/5ire#405). Google's
    # thought-signatures page (https://ai.google.dev/gemini-api/docs/thought-signatures):
    # "When using Gemini 3 models, you must pass back thought signatures during function
    # calling, otherwise you will get a validation error (4xx status code)"; only the
    # current turn is validated (its steps since the latest user text), and in a step of
    # parallel calls only the first carries one. Later majors are taken to keep the rule.
    found = _GEMINI_MAJOR.match(model)
    if found is None or int(found.group(1)) < 3:
        return []
    contents = _list(body.get("contents"))
    start = 0
    for index, content in enumerate(contents):
        parts = _list(content.get("parts")) if isinstance(content, Mapping) else []
        if content.get("role") == "user" and any(
            isinstance(p, Mapping) and "text" in p for p in parts
        ):
            start = index
    out = []
    for index in range(start, len(contents)):
        content = contents[index]
        if not isinstance(content, Mapping) or content.get("role") != "model":
            continue
        parts = _list(content.get("parts"))
        calls = [j for j, p in enumerate(parts) if isinstance(p, Mapping) and "functionCall" in p]
        if calls and "thoughtSignature" not in parts[calls[0]]:
            out.append(
                f"$.contents[{index}].parts[{calls[0]}]: Function call is missing a "
                f"thought_signature in functionCall parts ({model}: the first call of each "
                "step of the current turn)"
            )
    return out


# ------------------------------------------------------------ OpenAI Chat Completions

#: ``tool_calls[].id`` / ``tool_call_id``: 400 "Invalid 'messages[2].tool_calls[0].id':
#: string too long. Expected a string with maximum length 40, but got a string with
#: length 41 instead." (microsoft/autogen#6377, camel-ai/camel#2215,
#: BerriAI/litellm#17343; 44 characters refused in Portkey-AI/gateway#1062, 51 in
#: vercel/ai#8132). The SDK type is a plain ``str``.
CHAT_TOOL_CALL_ID_MAX = 40


def chat_tool_messages_answer_preceding_calls(body: Mapping[str, Any]) -> list[str]:
    # Chat Completions 400 "Invalid parameter: messages with role 'tool' must be a
    # response to a preceeding message with 'tool_calls'" (param "messages.[4].role";
    # miurla/morphic#136, smarter-sh/smarter#264, FoundationAgents/OpenManus#744): a tool
    # message belongs to the run of tool messages right after the assistant message whose
    # tool_calls it answers. So the user message that carries a batch's tool-result images
    # comes after the batch's last tool message, never between them.
    out = []
    calls: set[Any] = set()
    for i, message in enumerate(_messages(body)):
        role = message.get("role") if isinstance(message, Mapping) else None
        if role == "assistant":
            calls = {
                c.get("id") for c in _list(message.get("tool_calls")) if isinstance(c, Mapping)
            }
        elif role == "tool":
            if message.get("tool_call_id") not in calls:
                out.append(
                    f"$.messages[{i}].role: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
        else:
            calls = set()
    return out


def chat_tool_call_ids_at_most_40(body: Mapping[str, Any]) -> list[str]:
    # Chat Completions: an assistant's tool_calls[].id, and the tool message's
    # tool_call_id naming it, are at most 40 characters (the 400 quoted above).
    out = []
    for i, message in enumerate(_messages(body)):
        if not isinstance(message, Mapping):
            continue
        found = [(f"$.messages[{i}].tool_call_id", message.get("tool_call_id"))]
        found += [
            (f"$.messages[{i}].tool_calls[{j}].id", call.get("id"))
            for j, call in enumerate(_list(message.get("tool_calls")))
            if isinstance(call, Mapping)
        ]
        out += [
            f"{path}: string too long ({len(value)}): at most {CHAT_TOOL_CALL_ID_MAX}"
            for path, value in found
            if isinstance(value, str) and len(value) > CHAT_TOOL_CALL_ID_MAX
        ]
    return out


# ------------------------------------------------------------------ OpenAI Responses

#: ``call_id`` of ``function_call`` / ``function_call_output`` input items: 400
#: ``string_above_max_length`` "Invalid 'input[95].call_id': string too long. Expected a
#: string with maximum length 64, but got a string with length 116 instead."
#: (AnswerDotAI/fastllm#45). The SDK type is a plain ``str``.
RESPONSES_CALL_ID_MAX = 64


def responses_call_ids_at_most_64(body: Mapping[str, Any]) -> list[str]:
    # Responses: a function_call's call_id, and the function_call_output's naming it,
    # are at most 64 characters (the 400 quoted above).
    return [
        f"$.input[{i}].call_id: string too long ({len(item['call_id'])}): at most "
        f"{RESPONSES_CALL_ID_MAX}"
        for i, item in enumerate(_list(body.get("input")))
        if isinstance(item, Mapping)
        and item.get("type") in ("function_call", "function_call_output")
        and isinstance(item.get("call_id"), str)
        and len(item["call_id"]) > RESPONSES_CALL_ID_MAX
    ]


def responses_stateless_items_carry_no_ids(body: Mapping[str, Any]) -> list[str]:
    # With store: false the server keeps no items, so an item id refers to nothing: "Item
    # 'rs_...' of type 'reasoning' was provided without its required following item"
    # (vercel/ai#7099, langchainjs#9082). openai/codex sends no ids (its ResponseItem skips
    # every id when serializing) and asks for include: ["reasoning.encrypted_content"],
    # which carries a reasoning item's state instead.
    items = _list(body.get("input"))
    out = []
    # With store: true too, a reasoning id needs the item after it by id: "Item 'rs_...'
    # of type 'reasoning' was provided without its required following item" when "a
    # reasoning item is followed by a tool call that lacks an itemId" (vercel/ai#10827;
    # langchainjs#9082: "Missing id on function_call ... resulted in a 400").
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and item.get("type") == "reasoning" and "id" in item:
            after = items[i + 1] if i + 1 < len(items) else None
            if isinstance(after, Mapping) and "id" not in after:
                out.append(
                    f"$.input[{i}].id: reasoning item {item['id']!r} is followed by an item"
                    " without an id (its required following item)"
                )
    if body.get("store") is not False:
        return out
    for i, item in enumerate(items):
        if isinstance(item, Mapping) and "id" in item:
            out.append(f"$.input[{i}].id: store is false: input items carry no id")
    reasoning = any(isinstance(i, Mapping) and i.get("type") == "reasoning" for i in items)
    if reasoning and "reasoning.encrypted_content" not in _list(body.get("include")):
        out.append("$.include: store is false: ask for 'reasoning.encrypted_content'")
    return out


# ------------------------------------------------------------------------------ API


def _count(value: Any, hit: Callable[[Mapping[str, Any]], bool]) -> int:
    if isinstance(value, Mapping):
        return (1 if hit(value) else 0) + sum(_count(v, hit) for v in value.values())
    if isinstance(value, list):
        return sum(_count(v, hit) for v in value)
    return 0


def _has_block(body: Mapping[str, Any], kinds: tuple[str, ...], *, typed: bool) -> bool:
    """Whether a message's content holds a block of one of ``kinds`` (``type`` member
    with ``typed``, else the block's one key, as Bedrock writes blocks)."""
    for message in _messages(body):
        if not isinstance(message, Mapping):
            continue
        for block in _list(message.get("content")):
            if isinstance(block, Mapping) and (
                block.get("type") in kinds if typed else any(k in block for k in kinds)
            ):
                return True
    return False


def anthropic_tool_blocks_need_tools(body: Mapping[str, Any]) -> list[str]:
    # Messages API 400: "Requests which include tool_use or tool_result blocks must
    # define tools." (anthropics/anthropic-sdk-python#494)
    if body.get("tools") or not _has_block(body, ("tool_use", "tool_result"), typed=True):
        return []
    return ["$.tools: requests which include tool_use or tool_result blocks must define tools"]


def bedrock_tool_result_images_claude_or_nova(body: Mapping[str, Any]) -> list[str]:
    # botocore bedrock-runtime service model, ToolResultContentBlock.image: "A tool result
    # that is an image. This field is only supported by Amazon Nova and Anthropic Claude 3
    # and 4 models."
    # The POSTed body (a golden file) has no modelId (a URI member): nothing to judge.
    model = body.get("modelId")
    if not isinstance(model, str) or "anthropic.claude" in model or "amazon.nova" in model:
        return []
    out = []
    for i, message in enumerate(_messages(body)):
        for j, block in enumerate(_blocks(message)):
            result = block.get("toolResult") if isinstance(block, Mapping) else None
            if not isinstance(result, Mapping):
                continue
            for k, item in enumerate(_list(result.get("content"))):
                if isinstance(item, Mapping) and "image" in item:
                    out.append(
                        f"$.messages[{i}].content[{j}].toolResult.content[{k}].image: only "
                        f"Amazon Nova and Anthropic Claude models take it, not {model!r}"
                    )
    return out


def bedrock_tool_blocks_need_tool_config(body: Mapping[str, Any]) -> list[str]:
    # Converse ValidationException: "The toolConfig field must be defined when using
    # toolUse and toolResult content blocks." (langgenius/dify#17545, elastic/kibana#246943)
    if body.get("toolConfig") or not _has_block(body, ("toolUse", "toolResult"), typed=False):
        return []
    return ["$.toolConfig: must be defined when using toolUse and toolResult content blocks"]


#: The one ``anthropic_version`` InvokeModel takes for Claude: "anthropic_version -
#: (Required) The anthropic version. The value must be bedrock-2023-05-31."
#: (docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-anthropic-claude-messages.html;
#: "Inference using Anthropic Messages API": "bedrock-runtime: Set "anthropic_version":
#: "bedrock-2023-05-31" in the request body").
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


def bedrock_anthropic_version(body: Mapping[str, Any]) -> list[str]:
    version = body.get("anthropic_version")
    if version == BEDROCK_ANTHROPIC_VERSION:
        return []
    return [f"$.anthropic_version: must be {BEDROCK_ANTHROPIC_VERSION!r}, not {version!r}"]


def bedrock_anthropic_no_model_or_stream(body: Mapping[str, Any]) -> list[str]:
    # The model id and streaming are the path (/model/{modelId}/invoke[-with-response-
    # stream]); the anthropic SDK's Bedrock client pops both from the JSON
    # (anthropic-sdk-python lib/bedrock/_client.py, _prepare_options).
    return [
        f"$.{key}: not a body member on Bedrock InvokeModel (the path carries it)"
        for key in ("model", "stream")
        if key in body
    ]


#: OpenAI models that take ``prompt_cache_breakpoint`` / ``prompt_cache_options``.
OPENAI_BREAKPOINT_MODELS = ("gpt-5.6", "gpt-6")


def _breakpoints(body: Mapping[str, Any], history: str) -> list[tuple[str, str, Any]]:
    """(path, the role of its message, the marker) of every content-part breakpoint."""
    out = []
    for i, item in enumerate(_list(body.get(history))):
        role = item.get("role") if isinstance(item, Mapping) else None
        for j, part in enumerate(_blocks(item)):
            if isinstance(part, Mapping) and "prompt_cache_breakpoint" in part:
                path = f"$.{history}[{i}].content[{j}].prompt_cache_breakpoint"
                out.append((path, str(role), part["prompt_cache_breakpoint"]))
    return out


def _openai_breakpoint_rules(history: str) -> Rule:
    def openai_breakpoints_gpt_5_6_user_developer_tool_only(body: Mapping[str, Any]) -> list[str]:
        # openai-python 3.63.0, PromptCacheOptions: "Supported for `gpt-5.6` and later
        # models"; on older ones "prompt_cache_options and breakpoints return a 400 on
        # GPT-5.5 and older" (synthorai's GPT-5.6 prompting guide, dev.to, 2026). An
        # assistant message takes none: "AiMessage cannot carry one, because assistant
        # output blocks are not among the block types OpenAI accepts a breakpoint on"
        # (langchain4j, OpenAiOfficialPromptCacheBreakpoint). prefixlock's own limit: at
        # most four, the most one request writes ("Each request can write up to four
        # breakpoints"), so every marker it sends is written.
        marks = _breakpoints(body, history)
        out = []
        model = body.get("model")
        supported = isinstance(model, str) and model.startswith(OPENAI_BREAKPOINT_MODELS)
        if (marks or "prompt_cache_options" in body) and not supported:
            out.append(f"$.model: {model!r} takes no prompt cache breakpoints (GPT-5.6 and later)")
        out += [
            f"{path}: on an assistant message" for path, role, _ in marks if role == "assistant"
        ]
        if len(marks) > 4:
            out.append(f"$.{history}: {len(marks)} breakpoints; a request writes at most 4")
        return out

    return openai_breakpoints_gpt_5_6_user_developer_tool_only


RULES: dict[str, tuple[Rule, ...]] = {
    "openai-chat": (
        chat_tool_messages_answer_preceding_calls,
        chat_tool_call_ids_at_most_40,
        _openai_breakpoint_rules("messages"),
    ),
    "openai-responses": (
        responses_stateless_items_carry_no_ids,
        responses_call_ids_at_most_64,
        _openai_breakpoint_rules("input"),
    ),
    "anthropic": (
        anthropic_roles,
        anthropic_tool_use_ids,
        anthropic_tool_results_first,
        anthropic_no_blank_text,
        anthropic_at_most_four_breakpoints,
        anthropic_tool_blocks_need_tools,
    ),
    "bedrock-anthropic": (
        anthropic_roles,
        anthropic_tool_use_ids,
        anthropic_tool_results_first,
        anthropic_no_blank_text,
        anthropic_at_most_four_breakpoints,
        anthropic_tool_blocks_need_tools,
        bedrock_anthropic_version,
        bedrock_anthropic_no_model_or_stream,
    ),
    "gemini": (
        gemini_request_fields_at_top_level,
        gemini_cached_content_excludes_the_root,
        gemini_function_response_parts_are_media,
    ),
    "bedrock-converse": (
        bedrock_first_message_is_user,
        bedrock_roles_alternate,
        bedrock_no_blank_text,
        bedrock_at_most_four_cache_points,
        bedrock_tool_blocks_need_tool_config,
        bedrock_tool_result_images_claude_or_nova,
    ),
}


#: Rules that depend on the model where the body does not name it (Gemini's model is a
#: path parameter): ``rule(body, model) -> list[str]``, run when the model is given.
ModelRule = Callable[[Mapping[str, Any], str], list[str]]
MODEL_RULES: dict[str, tuple[ModelRule, ...]] = {"gemini": (gemini_3_current_turn_calls_signed,)}

#: (provider, endpoint) -> the rules of a provider's other endpoint: Claude's Messages
#: API on bedrock-mantle takes the first-party body (``model`` in it, the version a
#: header), so its rules are the anthropic wire's.
ENDPOINT_RULES: dict[tuple[str, str], tuple[Rule, ...]] = {
    ("bedrock-anthropic", "mantle"): RULES["anthropic"],
}


def violations(
    provider: str, body: Mapping[str, Any], model: str | None = None, endpoint: str = ""
) -> list[str]:
    """Every service rule of ``provider`` (to ``endpoint``, ``""``: its default one) that
    ``body`` breaks, as ``"$.path: message"``; with ``model``, the rules that depend on
    it too (:data:`MODEL_RULES`)."""
    rules = ENDPOINT_RULES[provider, endpoint] if endpoint else RULES[provider]
    out = [problem for rule in rules for problem in rule(body)]
    if model is not None:
        out += [p for rule in MODEL_RULES.get(provider, ()) for p in rule(body, model)]
    return out


def assert_accepted(
    provider: str, body: Mapping[str, Any], model: str | None = None, endpoint: str = ""
) -> None:
    """Raise ``AssertionError`` listing every broken service rule of ``provider``."""
    problems = violations(provider, body, model, endpoint)
    if problems:
        listing = "\n  ".join(problems)
        raise AssertionError(f"{provider} body breaks the service rules:\n  {listing}")
