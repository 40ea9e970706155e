"""Check before saving (issue 10, item 6): every appending operation refuses, or
normalizes by a documented rule, what some configured provider would refuse -- before
the record is written -- so a stored conversation always reopens and serializes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import CONV, REPO, background, example_bundle, user
from prefixlock import (
    Conversation,
    HistoryError,
    SQLiteStore,
    ToolCall,
    ToolResult,
    build_bundle,
    providers,
)
from prefixlock.core.errors import (
    CanonicalJSONError,
    PrefixlockError,
    SerializationError,
    UnknownNameError,
)
from prefixlock.core.messages import (
    CanonicalMessage,
    MessageKind,
    OpaquePart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from prefixlock.core.output import ModelOutput, Usage
from prefixlock.providers import Provider
from prefixlock.runtime.admission import EMPTY_TOOL_OUTPUT, Admission
from sdk_judge import assert_valid

CALL = ToolCall("c1", "read_file", {"path": "a.py"})


def _chat_response(content: str) -> bytes:
    """An OpenAI Chat completion whose message has ``content`` beside one tool call."""
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4.1",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": content,
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "read_file", "arguments": '{"path":"a.py"}'},
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    ).encode()


def _turn(conv: Conversation) -> None:
    conv.handle(user("u1"))


def _called(conv: Conversation) -> None:
    _turn(conv)
    conv.assistant(None, [CALL])


Step = Callable[[Conversation], Any]

#: (name, setup, the poisoned step, expected refusal (type, message part) or None if it
#: is accepted (normalized)).
CASES: list[tuple[str, Step, Step, tuple[type[PrefixlockError], str] | None]] = [
    ("assistant-empty-text-beside-call", _turn, lambda c: c.assistant("", [CALL]), None),
    ("assistant-blank-text-beside-call", _turn, lambda c: c.assistant(" \n\t", [CALL]), None),
    (
        "assistant-blank-text-alone",
        _turn,
        lambda c: c.assistant("   "),
        (HistoryError, "assistant output: assistant output has only empty or whitespace-only"),
    ),
    (
        "assistant-text-none-type",
        _turn,
        lambda c: c.assistant(3),
        (HistoryError, "assistant text: expected a string, got int 3"),
    ),
    ("tool-result-empty", _called, lambda c: c.tool_results([ToolResult("c1", "")]), None),
    ("tool-result-blank", _called, lambda c: c.tool_results([ToolResult("c1", " \n")]), None),
    (
        "tool-result-none",
        _called,
        lambda c: c.tool_results([ToolResult("c1", None)]),  # type: ignore[arg-type]
        (HistoryError, "tool_results[0] (call 'c1').output: expected a string, got NoneType"),
    ),
    (
        "background-empty",
        _turn,
        lambda c: c.handle(background("b1", "")),
        (HistoryError, "background event 'b1': text: empty or whitespace-only text ('')"),
    ),
    (
        "background-blank",
        _turn,
        lambda c: c.handle(background("b1", "  ")),
        (HistoryError, "background event 'b1': text: empty or whitespace-only text ('  ')"),
    ),
    (
        "compact-none",
        lambda c: (_turn(c), c.assistant("done")),
        lambda c: c.compact(None),
        (HistoryError, "compact summary: expected a string, got NoneType None"),
    ),
    (
        "compact-empty",
        lambda c: (_turn(c), c.assistant("done")),
        lambda c: c.compact(""),
        (HistoryError, "compact summary: empty or whitespace-only text ('')"),
    ),
    (
        "automatic-compaction-blank-summary",
        lambda c: (_turn(c), c.assistant("done")),
        lambda c: c.handle(user("u2", compact={"summary": " "})),
        (HistoryError, "event 'u2': compact.summary: empty or whitespace-only text (' ')"),
    ),
    (
        "reader-blank-text-beside-call",
        _turn,
        lambda c: c.record(providers.get("openai-chat").parse_response(_chat_response("  "))),
        None,
    ),
    (
        "gemini-signed-blank-text-beside-call",
        _turn,
        lambda c: c.record(
            ModelOutput(
                "gemini",
                (ToolCallPart("c1", "read_file", "{}"), TextPart("", thought_signature="c2ln")),
            )
        ),
        None,
    ),
    (
        "reader-blank-text-alone",
        _turn,
        lambda c: c.record(ModelOutput("anthropic", (TextPart(" "),))),
        (HistoryError, "only empty or whitespace-only text"),
    ),
    (
        "truncated-arguments",
        _turn,
        lambda c: c.assistant(None, [ToolCall("c1", "read_file", '{"path": "a.p')]),
        (HistoryError, "tool call 'c1': arguments are not JSON"),
    ),
    (
        "arguments-not-an-object",
        _turn,
        lambda c: c.assistant(None, [ToolCall("c1", "read_file", "[1]")]),
        (HistoryError, "tool call 'c1': arguments must be a JSON object"),
    ),
    (
        "call-id-bedrock-refuses",
        _turn,
        lambda c: c.assistant(None, [ToolCall("c/1 x", "read_file", {})]),
        (SerializationError, "assistant output 'assistant:1': not stored, a configured provider"),
    ),
]


def _records(db: Path) -> int:
    with SQLiteStore(db) as store:
        stored = store.load(CONV)
    assert stored is not None
    return len(stored.records)


@pytest.mark.parametrize(("name", "setup", "step", "refusal"), CASES, ids=[c[0] for c in CASES])
def test_poisoned_input_is_refused_or_stored_so_every_provider_can_send_it(
    tmp_path: Path,
    name: str,
    setup: Step,
    step: Step,
    refusal: tuple[type[PrefixlockError], str] | None,
) -> None:
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), example_bundle(), CONV)
    configured = [s.provider for s in conv.history.root.settings]
    assert sorted(configured) == sorted(providers.NAMES)  # all five are configured
    setup(conv)
    before = _records(db)
    if refusal is not None:
        kind, text = refusal
        with pytest.raises(kind) as raised:
            step(conv)
        assert text in str(raised.value)
        assert _records(db) == before  # nothing written
    else:
        step(conv)
        assert _records(db) == before + 1
    # Whatever was stored reopens from SQLite and serializes for every provider; a
    # pending call is answered first, so each body is a whole request.
    reopened = Conversation.open(SQLiteStore(db), example_bundle(), CONV)
    if reopened.history.pending_calls:
        reopened.tool_results([ToolResult(i, "ok") for i in reopened.history.pending_calls])
    request = reopened.request()
    for provider in providers.NAMES:
        wire = providers.get(provider)
        wire.serialize(request)
        assert_valid(provider, wire.body(request))


def _open(tmp_path: Path) -> Conversation:
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), CONV)
    conv.handle(user("u1"))
    return conv


def test_a_blank_tool_output_is_stored_as_the_fixed_placeholder(tmp_path: Path) -> None:
    conv = _open(tmp_path)
    conv.assistant(None, [CALL, ToolCall("c2", "read_file", {"path": "b.py"})])
    request = conv.tool_results([ToolResult("c1", ""), ToolResult("c2", " \n", is_error=True)])
    assert EMPTY_TOOL_OUTPUT == "(no output)"
    assert request.messages[-1].parts == (
        ToolResultPart("c1", "(no output)"),
        ToolResultPart("c2", "(no output)", True),
    )
    # a retry of the same (normalized) batch is the same event
    again = conv.tool_results([ToolResult("c1", ""), ToolResult("c2", " \n", is_error=True)])
    wire = providers.get("anthropic")
    assert wire.serialize(again) == wire.serialize(request)
    assert _records(tmp_path / "s.db") == 3


def test_blank_assistant_text_beside_other_parts_is_dropped(tmp_path: Path) -> None:
    conv = _open(tmp_path)
    message = conv.assistant("", [CALL])
    assert message.parts == (ToolCallPart("c1", "read_file", '{"path":"a.py"}'),)
    conv.tool_results([ToolResult("c1", "x")])
    thinking = OpaquePart("anthropic", '{"signature":"c2ln","thinking":"t","type":"thinking"}')
    output = ModelOutput("anthropic", (thinking, TextPart("\n\n"), TextPart("Done.")))
    assert conv.record(output).parts == (thinking, TextPart("Done."))


def test_a_configured_provider_refusal_names_the_field_and_writes_nothing(
    tmp_path: Path,
) -> None:
    conv = _open(tmp_path)
    with pytest.raises(SerializationError) as raised:
        conv.assistant("x", [ToolCall("c/1 x", "read_file", {})])
    assert str(raised.value) == (
        "assistant output 'assistant:1': not stored, a configured provider would refuse "
        "it: bedrock-converse: message 'assistant:1' part 1: tool use id 'c/1 x' must be "
        "1-64 characters of a-z, A-Z, 0-9, '_.:-'"
    )
    assert _records(tmp_path / "s.db") == 1


def test_assistant_refuses_values_of_the_wrong_type(tmp_path: Path) -> None:
    conv = _open(tmp_path)
    with pytest.raises(HistoryError, match=r"assistant tool_calls\[0\]: expected a ToolCall"):
        conv.assistant(None, [{"id": "c1"}])  # type: ignore[list-item]
    with pytest.raises(HistoryError, match=r"assistant parts\[0\]: expected a message part"):
        conv.assistant(None, parts=["text"])  # type: ignore[list-item]
    with pytest.raises(HistoryError, match=r"tool_results\[0\]: expected a ToolResult"):
        conv.assistant(None, [CALL])
        conv.tool_results([("c1", "x")])  # type: ignore[list-item]


def test_provider_check_message_is_the_serializers_own_refusal() -> None:
    blank = CanonicalMessage.create(
        "assistant:1", MessageKind.ASSISTANT, Role.ASSISTANT, (TextPart(" "),)
    )
    for name in ("anthropic", "bedrock-converse"):
        with pytest.raises(SerializationError, match="whitespace-only text"):
            providers.get(name).check_message(blank)
    for name in ("openai-chat", "openai-responses", "gemini"):
        providers.get(name).check_message(blank)
    # another provider's opaque part is left to that provider
    opaque = CanonicalMessage.create(
        "assistant:1",
        MessageKind.ASSISTANT,
        Role.ASSISTANT,
        (OpaquePart("anthropic", '{"type":"redacted_thinking","data":"x"}'),),
    )
    for name in providers.NAMES:
        providers.get(name).check_message(opaque)


def test_a_blank_text_carrying_a_gemini_signature_is_kept_for_gemini_only(
    tmp_path: Path,
) -> None:
    conv = _open(tmp_path)
    signed = TextPart("", thought_signature="c2ln")
    call = ToolCallPart("c1", "read_file", '{"path":"a.py"}')
    assert conv.record(ModelOutput("gemini", (call, signed))).parts == (call, signed)
    request = conv.tool_results([ToolResult("c1", "x")])
    gemini = json.loads(providers.get("gemini").serialize(request))
    assert gemini["contents"][-2]["parts"][1] == {"text": "", "thoughtSignature": "c2ln"}
    anthropic = json.loads(providers.get("anthropic").serialize(request))
    assert [b["type"] for b in anthropic["messages"][-2]["content"]] == ["tool_use"]
    bedrock = json.loads(providers.get("bedrock-converse").serialize(request))
    assert [list(b) for b in bedrock["messages"][-2]["content"]] == [["toolUse"]]


class _CountingList(list[CanonicalMessage]):
    """An epoch list that counts how many of its messages a reader visits."""

    visits = 0

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        self.visits += len(got) if isinstance(index, slice) else 1
        return got

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]


def _loop_messages(n: int) -> list[CanonicalMessage]:
    out = []
    for i in range(1, n + 1):
        call = ToolCallPart(f"c{i}", "read_file", '{"path":"a.py"}')
        result = ToolResultPart(f"c{i}", "x")
        create = CanonicalMessage.create
        out.append(create(f"assistant:{i}", MessageKind.ASSISTANT, Role.ASSISTANT, (call,)))
        out.append(create(f"tool-results:c{i}", MessageKind.TOOL_RESULT, Role.TOOL, (result,)))
    return out


def test_admission_after_stored_messages_visits_only_the_new_ones() -> None:
    """Per-call admission work does not grow with the history: once a check has seen the
    epoch, the next one reads only the messages stored since (every provider, Gemini's
    call-name fold included)."""
    admission = Admission(providers.NAMES)
    history = _CountingList(_loop_messages(300))
    more = _loop_messages(303)[600:]
    admission.check(more[:1], history, "first")  # may read the whole epoch once
    for step in range(1, len(more)):
        history.append(more[step - 1])  # stored, as History.apply does
        history.visits = 0
        admission.check(more[step : step + 1], history, f"call {step}")
        assert history.visits <= 1


def test_admission_forgets_what_a_refused_message_would_have_noted() -> None:
    """A refused assistant message is not stored: a later result for its call id is still
    refused by Gemini, which finds function names in earlier calls only."""
    admission = Admission(providers.NAMES)
    history = _CountingList(_loop_messages(3))
    bad = CanonicalMessage.create(
        "assistant:4",
        MessageKind.ASSISTANT,
        Role.ASSISTANT,
        (ToolCallPart("c9", "read_file", '{"path":"a.py"}'), TextPart(" ")),
    )
    with pytest.raises(SerializationError, match="not stored"):
        admission.check((bad,), history, "assistant")
    result = CanonicalMessage.create(
        "tool-results:c9", MessageKind.TOOL_RESULT, Role.TOOL, (ToolResultPart("c9", "x"),)
    )
    with pytest.raises(SerializationError, match="no earlier tool call with id 'c9'"):
        admission.check((result,), history, "tool results")
    good = _loop_messages(4)[6:]
    admission.check(good[:1], history, "assistant")
    history.append(good[0])
    admission.check(good[1:], history, "tool results")


def test_admission_checks_several_messages_of_one_record_in_order() -> None:
    """A record's later messages are checked after its earlier ones (the call a result
    answers may be in the same batch), without copying the history."""
    admission = Admission(providers.NAMES)
    history = _CountingList(_loop_messages(50))
    pair = _loop_messages(51)[100:]
    admission.check(pair, history, "pair")
    history.append(pair[0])
    history.append(pair[1])
    history.visits = 0
    nxt = _loop_messages(53)[102:]
    admission.check(nxt, history, "pair")
    assert history.visits <= 2


def test_admission_checks_wire_items_without_encoding_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Admission runs each provider's mapping and the canonical encoder's checks on its
    wire items, but encodes nothing (serialization does, once, later); what only the
    encoder's checks catch -- a lone surrogate escaped inside tool arguments -- is still
    refused, naming the part."""
    encoded: list[str] = []
    original = Provider._encode_item

    def counting(self: Provider, message: CanonicalMessage, item: Any) -> bytes:
        encoded.append(self.name)
        return original(self, message, item)

    monkeypatch.setattr(Provider, "_encode_item", counting)
    admission = Admission(providers.NAMES)
    history = _loop_messages(5)
    admission.check(_loop_messages(6)[10:11], history, "assistant")
    assert encoded == []
    bad = CanonicalMessage.create(
        "assistant:6",
        MessageKind.ASSISTANT,
        Role.ASSISTANT,
        (ToolCallPart("c6", "read_file", '{"path":"\\ud800"}'),),
    )
    with pytest.raises(SerializationError, match=r"not stored.*lone surrogate"):
        admission.check((bad,), history, "assistant")


@pytest.mark.parametrize("name", providers.NAMES)
def test_a_lone_surrogate_in_a_message_not_made_by_create_is_still_refused(name: str) -> None:
    """Admission takes the part texts of a message made by ``create`` as encoded (it
    encoded them); a message built any other way is checked string by string."""
    text = "caf\u00e9 \ud800"
    built = CanonicalMessage("runtime:e1", MessageKind.RUNTIME, Role.USER, (TextPart(text),), "x")
    assert built.parts_json is None
    with pytest.raises(SerializationError, match="lone surrogate U\\+D800"):
        providers.get(name).check_message(built)
    with pytest.raises(CanonicalJSONError, match="lone surrogate"):
        CanonicalMessage.create("runtime:e1", MessageKind.RUNTIME, Role.USER, built.parts)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (
            ModelOutput("openai", (TextPart("ok"),)),
            "assistant output: unknown provider 'openai' (did you mean 'openai-chat'?)",
        ),
        (
            ModelOutput("gemini", (TextPart("ok"),), usage=Usage(10, provider="vertex")),
            "assistant output usage: unknown provider 'vertex' (providers: anthropic, "
            "bedrock-anthropic, bedrock-converse, gemini, openai-chat, openai-responses)",
        ),
    ],
)
def test_an_output_of_an_unknown_provider_is_refused_before_anything_is_stored(
    tmp_path: Path, output: ModelOutput, message: str
) -> None:
    """Its usage could never be priced (``inspect --cache`` simulates the provider that
    answered), and an opaque part of it could never be sent back."""
    conv = _open(tmp_path)
    with pytest.raises(UnknownNameError) as raised:
        conv.record(output)
    assert str(raised.value) == message
    assert _records(tmp_path / "s.db") == 1


def _toolless_root(tmp_path: Path, providers_yaml: str) -> Conversation:
    """The minimal spec with no tools and the given providers, opened on SQLite."""
    root = tmp_path / "spec"
    shutil.copytree(REPO / "tests" / "data" / "specs" / "minimal", root)
    (root / "rules" / "tools.yaml").write_text("tools: []\n", encoding="utf-8")
    (root / "rules" / "providers.yaml").write_text(providers_yaml, encoding="utf-8")
    bundle = build_bundle(root)
    assert bundle.tools == ()
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), bundle, CONV)
    conv.handle(user("u1"))
    return conv


@pytest.mark.parametrize(
    ("name", "model", "quote"),
    [
        (
            "anthropic",
            "claude-sonnet-4-5",
            "Requests which include tool_use or tool_result blocks must define tools.",
        ),
        (
            "bedrock-converse",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
            "The toolConfig field must be defined when using toolUse and toolResult "
            "content blocks.",
        ),
    ],
)
def test_a_tool_call_under_a_root_without_tools_is_refused_where_the_service_refuses_it(
    tmp_path: Path, name: str, model: str, quote: str
) -> None:
    """Anthropic and Bedrock refuse a request whose history holds tool blocks when it
    defines no tools, so such an output is not stored: every later request of the
    conversation would be refused."""
    conv = _toolless_root(
        tmp_path,
        "providers:\n"
        f"  {name}: {{model: {model}, max_tokens: 1024}}\n"
        "  openai-chat: {model: gpt-4.1, max_tokens: 1024}\n",
    )
    with pytest.raises(SerializationError) as raised:
        conv.assistant(None, [ToolCall("c1", "read_file", {"path": "a.py"})])
    assert str(raised.value) == (
        "assistant output 'assistant:1': not stored, a configured provider would refuse "
        f"it: {name}: message 'assistant:1' part 0: a tool call cannot be sent under a "
        f"root that defines no tools (the service: {quote!r})"
    )
    assert _records(tmp_path / "s.db") == 1
    conv.assistant("No tools here.")  # text alone is stored
    assert _records(tmp_path / "s.db") == 2


def test_a_tool_call_under_a_root_without_tools_is_stored_where_no_rule_refuses_it(
    tmp_path: Path,
) -> None:
    """Only the services documented to refuse it block it: with OpenAI Chat alone the
    call and its result are stored and sent."""
    conv = _toolless_root(
        tmp_path, "providers:\n  openai-chat: {model: gpt-4.1, max_tokens: 1024}\n"
    )
    conv.assistant(None, [ToolCall("c1", "read_file", {"path": "a.py"})])
    request = conv.tool_results([ToolResult("c1", "x = 1")])
    body = json.loads(providers.get("openai-chat").serialize(request))
    assert "tools" not in body
    assert [m["role"] for m in body["messages"]][-2:] == ["assistant", "tool"]
