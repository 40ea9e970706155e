"""The service-rules layer (``tests/service_rules.py``): each rule refuses a body that
breaks it, and every body prefixlock produces (golden files, provider cases) keeps them."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
import service_rules
from prefixlock.core import canonical
from prefixlock.providers import NAMES, get
from prefixlock.review.replay import replay
from prefixlock.review.scenario import load_scenario
from provider_cases import tool_loop
from sdk_judge import assert_valid, judge
from service_rules import RULES, assert_accepted, violations

GOLDEN = Path(__file__).resolve().parents[1] / "golden"

Change = Callable[[dict[str, Any]], None]


def good(provider: str) -> dict[str, Any]:
    """The tool-loop case's full params (Bedrock: with ``modelId``)."""
    return get(provider).body(tool_loop())


def _set(path: tuple[str | int, ...], value: Any) -> Change:
    def change(body: dict[str, Any]) -> None:
        target: Any = body
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _split_first_bedrock_message(body: dict[str, Any]) -> None:
    # request context and runtime as two user messages, as prefixlock sent them before
    first = body["messages"][0]
    body["messages"][0:1] = [
        {"role": "user", "content": first["content"][:2]},
        {"role": "user", "content": first["content"][2:]},
    ]


def _assistant_first(body: dict[str, Any]) -> None:
    body["messages"].insert(0, {"role": "assistant", "content": [{"text": "Hello."}]})


def _five_cache_points(body: dict[str, Any]) -> None:
    body["messages"][0]["content"].insert(1, {"cachePoint": {"type": "default"}})


def _text_before_tool_result(body: dict[str, Any]) -> None:
    # an event message between the tool calls and their results: the API combines the
    # two user messages into one turn whose first block is text
    body["messages"].insert(3, {"role": "user", "content": [{"type": "text", "text": "note"}]})


def _text_first_in_one_message(body: dict[str, Any]) -> None:
    content = body["messages"][3]["content"]
    content.insert(0, {"type": "text", "text": "note"})


def _user_between_tool_messages(body: dict[str, Any]) -> None:
    # a tool-result image message between the batch's tool messages
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body["messages"].insert(5, {"role": "user", "content": [image]})


def _tool_result_image_on_llama(body: dict[str, Any]) -> None:
    body["modelId"] = "meta.llama3-70b-instruct-v1:0"
    image = {"image": {"format": "png", "source": {"bytes": "AAAA"}}}
    body["messages"][2]["content"][0]["toolResult"]["content"].append(image)


def _five_breakpoints(body: dict[str, Any]) -> None:
    # tools, system, context and the top-level one are the good body's four
    body["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral"}


def _breakpoint_on(history: str, index: int, kind: str) -> Change:
    """A GPT-5.6 breakpoint on message ``index``'s text (its content as one part)."""

    def change(body: dict[str, Any]) -> None:
        item = body[history][index]
        marker = {"mode": "explicit"}
        item["content"] = [{"type": kind, "text": item["content"], BREAKPOINT: marker}]

    return change


BREAKPOINT = "prompt_cache_breakpoint"
#: The breakpoint rule's message on the tool-loop case's models (gpt-4.1, gpt-5).
NO_BREAKPOINTS = "takes no prompt cache breakpoints (GPT-5.6 and later)"

#: The Anthropic Messages rules, broken one at a time; Bedrock's Messages body keeps them.
ANTHROPIC_BREAKS: dict[str, tuple[Change, str]] = {
    "anthropic_roles": (_set(("messages", 0, "role"), "system"), "$.messages[0].role"),
    "anthropic_tool_use_ids": (
        _set(("messages", 2, "content", 1, "id"), "functions.read_file:0"),
        "$.messages[2].content[1].id: 'functions.read_file:0' does not match",
    ),
    "anthropic_tool_results_first": (
        _text_first_in_one_message,
        "$.messages[3].content[1]: tool_result blocks must come first",
    ),
    "anthropic_no_blank_text": (
        _set(("messages", 1, "content", 0, "text"), ""),
        "$.messages[1].content[0].text: text content blocks must contain non-whitespace",
    ),
    "anthropic_at_most_four_breakpoints": (_five_breakpoints, "5 cache_control"),
    "anthropic_tool_blocks_need_tools": (
        lambda body: body.pop("tools"),
        "$.tools: requests which include tool_use or tool_result blocks must define tools",
    ),
}


#: provider -> rule -> (a change that breaks it, a fragment of the violation).
BREAKS: dict[str, dict[str, tuple[Change, str]]] = {
    "bedrock-converse": {
        "bedrock_roles_alternate": (
            _split_first_bedrock_message,
            "$.messages[1].role: 'user' follows 'user': a conversation must alternate",
        ),
        "bedrock_first_message_is_user": (
            _assistant_first,
            "$.messages[0].role: 'assistant': a conversation must start with a user message",
        ),
        "bedrock_no_blank_text": (
            _set(("messages", 1, "content", 0, "text"), " \n"),
            "$.messages[1].content[0].text: text content blocks must contain non-whitespace",
        ),
        "bedrock_at_most_four_cache_points": (_five_cache_points, "5 cachePoint blocks"),
        "bedrock_tool_result_images_claude_or_nova": (
            _tool_result_image_on_llama,
            "$.messages[2].content[0].toolResult.content[1].image: only Amazon Nova and",
        ),
        "bedrock_tool_blocks_need_tool_config": (
            lambda body: body.pop("toolConfig"),
            "$.toolConfig: must be defined when using toolUse and toolResult content blocks",
        ),
    },
    "anthropic": ANTHROPIC_BREAKS,
    # the Anthropic rules hold on Bedrock's Messages body too, plus its own two
    "bedrock-anthropic": {
        **ANTHROPIC_BREAKS,
        "bedrock_anthropic_version": (
            _set(("anthropic_version",), "2023-06-01"),
            "$.anthropic_version: must be 'bedrock-2023-05-31', not '2023-06-01'",
        ),
        "bedrock_anthropic_no_model_or_stream": (
            _set(("stream",), True),
            "$.stream: not a body member on Bedrock InvokeModel (the path carries it)",
        ),
    },
    "openai-chat": {
        "chat_tool_messages_answer_preceding_calls": (
            _user_between_tool_messages,
            "$.messages[6].role: messages with role 'tool' must be a response to a preceding",
        ),
        "chat_tool_call_ids_at_most_40": (
            _set(("messages", 4, "tool_call_id"), "call_" + "a" * 36),
            "$.messages[4].tool_call_id: string too long (41): at most 40",
        ),
        "openai_breakpoints_gpt_5_6_user_developer_tool_only": (
            _breakpoint_on("messages", 1, "text"),
            f"$.model: 'gpt-4.1' {NO_BREAKPOINTS}",
        ),
    },
    "openai-responses": {
        "responses_stateless_items_carry_no_ids": (
            _set(("input", 1), {"type": "reasoning", "id": "rs_1", "summary": []}),
            "$.input[1].id: store is false: input items carry no id",
        ),
        "responses_call_ids_at_most_64": (
            _set(("input", 3, "call_id"), "c" * 65),
            "$.input[3].call_id: string too long (65): at most 64",
        ),
        "openai_breakpoints_gpt_5_6_user_developer_tool_only": (
            _breakpoint_on("input", 0, "input_text"),
            f"$.model: 'gpt-5' {NO_BREAKPOINTS}",
        ),
    },
    "gemini": {
        "gemini_function_response_parts_are_media": (
            _set(("contents", 3, "parts", 0, "functionResponse", "parts"), [{"text": "x"}]),
            "$.contents[3].parts[0].functionResponse.parts[0]: each multimodal part must",
        ),
        "gemini_request_fields_at_top_level": (
            _set(("generationConfig", "toolConfig"), {"functionCallingConfig": {"mode": "ANY"}}),
            "$.generationConfig.toolConfig: a top-level GenerateContentRequest field",
        ),
        "gemini_cached_content_excludes_the_root": (
            _set(("cachedContent",), "cachedContents/root-1"),
            "$.systemInstruction: must not be set in a request using cachedContent",
        ),
    },
}

CASES = [(p, r) for p in sorted(BREAKS) for r in sorted(BREAKS[p])]


def _rule(provider: str, name: str) -> Callable[[dict[str, Any]], list[str]]:
    """``provider``'s rule called ``name`` (the OpenAI breakpoint rule is one function
    per wire, made for its history key, so it is not a module attribute)."""
    [rule] = [r for r in RULES[provider] if r.__name__ == name]
    return rule


def test_every_rule_has_a_breaking_body() -> None:
    assert {p: sorted(r.__name__ for r in rules) for p, rules in RULES.items() if rules} == {
        p: sorted(BREAKS[p]) for p in BREAKS
    }
    assert set(RULES) == set(NAMES)


@pytest.mark.parametrize(("provider", "rule"), CASES)
def test_a_body_breaking_the_rule_is_refused(provider: str, rule: str) -> None:
    change, fragment = BREAKS[provider][rule]
    body = good(provider)
    assert _rule(provider, rule)(body) == []
    broken = copy.deepcopy(body)
    change(broken)
    found = _rule(provider, rule)(broken)
    assert found, f"{rule} accepted a body that breaks it"
    assert any(fragment in problem for problem in found), found
    assert any(fragment in problem for problem in violations(provider, broken))
    with pytest.raises(AssertionError, match="breaks the service rules"):
        assert_accepted(provider, broken)
    if not judge(provider, broken):  # the SDK types let it through: only the rules catch it
        with pytest.raises(AssertionError, match="service rules"):
            assert_valid(provider, broken)


def test_anthropic_results_first_is_judged_on_the_combined_turn() -> None:
    body = good("anthropic")
    _text_before_tool_result(body)
    assert service_rules.anthropic_tool_results_first(body) == [
        "$.messages[4].content[0]: tool_result blocks must come first in the user message "
        "content (after $.messages[3].content[0])",
        "$.messages[4].content[1]: tool_result blocks must come first in the user message "
        "content (after $.messages[3].content[0])",
    ]


def test_bedrock_blank_tool_result_text_is_refused() -> None:
    body = good("bedrock-converse")
    body["messages"][2]["content"][0]["toolResult"]["content"][0]["text"] = ""
    assert service_rules.bedrock_no_blank_text(body) == [
        "$.messages[2].content[0].toolResult.content[0].text: text content blocks must "
        "contain non-whitespace text"
    ]


@pytest.mark.parametrize(
    ("provider", "history", "kind", "assistant"),
    [("openai-chat", "messages", "text", 3), ("openai-responses", "input", "input_text", 2)],
)
def test_gpt_5_6_breakpoints_stay_off_assistant_messages_and_at_most_four(
    provider: str, history: str, kind: str, assistant: int
) -> None:
    """The breakpoint rule's other two clauses, on a GPT-5.6 body (where breakpoints are
    taken): none on an assistant message, at most four in a request."""
    body = good(provider)
    body["model"] = "gpt-5.6-sol"
    rule = _rule(provider, "openai_breakpoints_gpt_5_6_user_developer_tool_only")
    first_user = next(i for i, m in enumerate(body[history]) if m.get("role") == "user")
    _breakpoint_on(history, first_user, kind)(body)
    assert rule(body) == []
    on_assistant = copy.deepcopy(body)
    _breakpoint_on(history, assistant, kind)(on_assistant)
    assert rule(on_assistant) == [
        f"$.{history}[{assistant}].content[0].{BREAKPOINT}: on an assistant message"
    ]
    [part] = body[history][first_user]["content"]
    body[history][first_user]["content"] = [part] * 4
    assert rule(body) == []
    body[history][first_user]["content"] = [part] * 5
    assert rule(body) == [f"$.{history}: 5 breakpoints; a request writes at most 4"]


def _gemini(model: str) -> dict[str, Any]:
    """The tool-loop case's Gemini body on ``model``, cut after the calls' results: its
    current turn (since the runtime text) holds the step of two parallel calls."""
    request = tool_loop()
    settings = tuple(
        attrs.evolve(s, model=model) if s.provider == "gemini" else s for s in request.settings
    )
    body = get("gemini").body(attrs.evolve(request, settings=settings))
    body["contents"] = body["contents"][:4]
    return body


SKIP = "skip_thought_signature_validator"
UNSIGNED = (
    "$.contents[2].parts[1]: Function call is missing a thought_signature in functionCall "
    "parts (gemini-3-pro-preview: the first call of each step of the current turn)"
)


def test_gemini_3_refuses_an_unsigned_first_call_of_the_current_turn() -> None:
    """The Gemini 3 rule (a model rule: Gemini's body has no model): the body prefixlock
    sends keeps it (the dummy signature on the step's first call, none on the parallel
    one); the same body without it breaks it, on Gemini 3 and later only."""
    body = _gemini("gemini-3-pro-preview")
    step = body["contents"][2]
    assert step["role"] == "model"
    assert [p.get("thoughtSignature") for p in step["parts"]] == [None, SKIP, None]
    assert violations("gemini", body, "gemini-3-pro-preview") == []
    assert_valid("gemini", body, "gemini-3-pro-preview")
    broken = copy.deepcopy(body)
    del broken["contents"][2]["parts"][1]["thoughtSignature"]
    rule = service_rules.gemini_3_current_turn_calls_signed
    assert rule(broken, "gemini-3-pro-preview") == [UNSIGNED]
    assert rule(broken, "models/gemini-4-argon") == [
        UNSIGNED.replace("gemini-3-pro-preview", "models/gemini-4-argon")
    ]
    assert violations("gemini", broken) == []  # no model given: the SDK-level rules only
    with pytest.raises(AssertionError, match="breaks the service rules"):
        assert_accepted("gemini", broken, "gemini-3-pro-preview")
    with pytest.raises(AssertionError, match="service rules"):
        assert_valid("gemini", broken, "gemini-3-pro-preview")
    assert rule(broken, "gemini-2.5-pro") == []  # Gemini 2.5 takes unsigned calls
    older = _gemini("gemini-2.5-pro")
    assert SKIP not in json.dumps(older) and rule(older, "gemini-2.5-pro") == []


def test_gemini_3_validates_the_current_turn_only() -> None:
    """An unsigned call of an earlier turn (a user text came after it) is not refused:
    Google validates the current turn's calls only."""
    body = _gemini("gemini-3-pro-preview")
    del body["contents"][2]["parts"][1]["thoughtSignature"]
    body["contents"].append({"role": "user", "parts": [{"text": "next turn"}]})
    assert service_rules.gemini_3_current_turn_calls_signed(body, "gemini-3-pro-preview") == []


GOLDEN_BODIES = sorted(GOLDEN.glob("*/*/0*.json"))
#: The model of the example's Gemini settings (rules/providers.yaml), for the model rules.
GOLDEN_MODELS = {"gemini": "gemini-4-argon"}


def test_golden_bodies_exist_for_every_provider() -> None:
    assert {path.parent.name for path in GOLDEN_BODIES} == set(NAMES)


@functools.cache
def _routes(case: str) -> tuple[tuple[str, str] | None, ...] | None:
    """Where each call of golden ``case`` went after a provider switch (None: to the
    provider of its folder); None for a case without ``providers:`` (no such switch)."""
    scenario = load_scenario(GOLDEN / case / "scenario.yaml")
    return tuple(call.route for call in replay(scenario)) if scenario.providers else None


def _wire(path: Path) -> str:
    """The provider that made the golden body at ``path`` (``case/folder/000k.json``)."""
    routes = _routes(path.parent.parent.name)
    route = routes[int(path.stem) - 1] if routes is not None else None
    return path.parent.name if route is None else route[0]


@functools.cache
def _endpoint(case: Path, provider: str) -> str:
    """The endpoint a golden case's settings choose for ``provider`` (bedrock-anthropic's
    ``mantle`` in golden/bedrock-mantle, whose own bundle says so)."""
    from prefixlock.review.scenario import load_scenario

    settings = load_scenario(case / "scenario.yaml").bundle.settings
    return get(provider).endpoint(next(s for s in settings if s.provider == provider))


@pytest.mark.parametrize("provider", NAMES)
def test_every_golden_body_keeps_the_service_rules(provider: str) -> None:
    paths = [p for p in GOLDEN_BODIES if _wire(p) == provider]
    assert paths
    model = GOLDEN_MODELS.get(provider)
    for path in paths:
        endpoint = _endpoint(path.parent.parent, provider)
        body = canonical.loads(path.read_bytes())
        assert violations(provider, body, model, endpoint) == [], path


def test_the_golden_models_are_the_examples() -> None:
    text = (GOLDEN.parent / "rules" / "providers.yaml").read_text(encoding="utf-8")
    assert "  gemini:\n    model: gemini-4-argon\n" in text


def test_stateless_reasoning_needs_encrypted_content_asked_back() -> None:
    body = good("openai-responses")
    body["input"].insert(2, {"type": "reasoning", "summary": [], "encrypted_content": "e"})
    assert service_rules.responses_stateless_items_carry_no_ids(body) == []
    del body["include"]
    assert service_rules.responses_stateless_items_carry_no_ids(body) == [
        "$.include: store is false: ask for 'reasoning.encrypted_content'"
    ]
    body["store"] = True  # stored: ids and include are the caller's business
    assert service_rules.responses_stateless_items_carry_no_ids(body) == []
