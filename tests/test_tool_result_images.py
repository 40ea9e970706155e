"""Images in tool results (issue 48): a tool's images (a screenshot, a PNG it read) travel
with its result, in the canonical history, in checkpoints (record format 7) and on every
wire by that wire's documented rule (docs/providers.md, "Images in tool results")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conv_helpers import CONV, example_bundle, user
from prefixlock import Conversation, HistoryError, SQLiteStore, ToolCall, ToolResult, providers
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError, SerializationError
from prefixlock.core.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    Role,
    ToolResultPart,
    part_from_json,
)
from prefixlock.core.model import ModelRequest, ProviderSettings
from prefixlock.store.records import (
    FORMAT,
    FORMAT_TOOL_IMAGES,
    FORMAT_WIRE,
    Record,
    RecordType,
    Root,
    decode_chain,
    decode_record,
)
from provider_cases import (
    CTX,
    PNG_B64,
    RT,
    SETTINGS,
    assert_wire,
    assistant,
    call,
    produce,
    refused,
    request,
    results,
    runtime,
)

JPEG_B64 = "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAEBAQ=="
SHOT = ImagePart("image/png", PNG_B64)
PHOTO = ImagePart("image/jpeg", JPEG_B64)
PNG_URL = f"data:image/png;base64,{PNG_B64}"
JPEG_URL = f"data:image/jpeg;base64,{JPEG_B64}"


def _batch() -> tuple[ToolResultPart, ToolResultPart]:
    return (
        ToolResultPart("call_a", "Read shot.png", False, (SHOT, PHOTO)),
        ToolResultPart("call_b", "no match", True),
    )


def _request(settings: tuple[ProviderSettings, ...] = SETTINGS, *more: Any) -> ModelRequest:
    return request(
        CTX,
        RT,
        assistant(
            1, call("call_a", "read_file", path="shot.png"), call("call_b", "grep", pattern="x")
        ),
        results(*_batch()),
        *more,
        settings=settings,
    )


def _with_model(provider: str, model: str) -> tuple[ProviderSettings, ...]:
    return tuple(
        ProviderSettings(provider, model, 4096) if s.provider == provider else s for s in SETTINGS
    )


# -- canonical form -------------------------------------------------------------------


def test_a_result_with_images_encodes_them_after_its_fields() -> None:
    message = results(*_batch())
    assert message.parts_json == (
        b'[{"call_id":"call_a","images":[{"data":"' + PNG_B64.encode() + b'","media_type":'
        b'"image/png"},{"data":"' + JPEG_B64.encode() + b'","media_type":"image/jpeg"}],'
        b'"is_error":false,"output":"Read shot.png","type":"tool_result"},'
        b'{"call_id":"call_b","is_error":true,"output":"no match","type":"tool_result"}]'
    )
    assert CanonicalMessage.from_json(message.to_json()) == message


def test_a_result_without_images_encodes_and_digests_as_before() -> None:
    # the digest of a result as every prefixlock before images wrote it
    message = results(ToolResultPart("call_b", "no match", True))
    assert message.parts_json == (
        b'[{"call_id":"call_b","is_error":true,"output":"no match","type":"tool_result"}]'
    )
    before = canonical.digest(
        {
            "kind": "tool_result",
            "role": "tool",
            "parts": [
                {"call_id": "call_b", "is_error": True, "output": "no match", "type": "tool_result"}
            ],
        }
    )
    assert message.digest == before


@pytest.mark.parametrize(
    ("images", "error"),
    [
        ([], "tool_result part: images must be a non-empty list"),
        ("x", "tool_result part: images must be a non-empty list"),
        ([{"data": "AA=="}], "tool_result part: images[0] must be an object of string data"),
        (
            [{"data": "AA==", "media_type": "image/png", "x": 1}],
            "tool_result part: images[0] must be an object of string data",
        ),
        ([{"data": 1, "media_type": "image/png"}], "images[0] must be an object of string data"),
    ],
)
def test_a_stored_images_member_is_checked(images: Any, error: str) -> None:
    part = {"call_id": "c", "images": images, "is_error": False, "output": "o"}
    with pytest.raises(CheckpointError, match=error.replace("[", r"\[").replace("]", r"\]")):
        part_from_json({**part, "type": "tool_result"})


# -- the wires ------------------------------------------------------------------------


def _last(name: str, body: dict[str, Any], count: int = 1) -> list[Any]:
    history = body.get("messages") or body.get("input") or body.get("contents")
    assert isinstance(history, list)
    return history[-count:]


def test_anthropic_sends_a_text_block_then_the_image_blocks() -> None:
    expected = {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "call_a",
                "content": [
                    {"type": "text", "text": "Read shot.png"},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                    },
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/jpeg", "data": JPEG_B64},
                    },
                ],
            },
            {
                "type": "tool_result",
                "tool_use_id": "call_b",
                "content": "no match",
                "is_error": True,
            },
        ],
    }
    for name in ("anthropic", "bedrock-anthropic"):
        [last] = _last(name, produce(name, _request()))
        # the tail's cache marker sits on the last tool_result block
        last["content"][-1].pop("cache_control", None)
        assert_wire(last, expected)


def test_bedrock_converse_sends_text_then_image_blocks_in_the_tool_result() -> None:
    [last] = _last("bedrock-converse", produce("bedrock-converse", _request()))
    assert_wire(
        last,
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "call_a",
                        "content": [
                            {"text": "Read shot.png"},
                            {"image": {"format": "png", "source": {"bytes": PNG_B64}}},
                            {"image": {"format": "jpeg", "source": {"bytes": JPEG_B64}}},
                        ],
                    }
                },
                {
                    "toolResult": {
                        "toolUseId": "call_b",
                        "content": [{"text": "no match"}],
                        "status": "error",
                    }
                },
                {"cachePoint": {"type": "default"}},
            ],
        },
    )


def test_openai_responses_sends_an_output_list() -> None:
    first, second = _last("openai-responses", produce("openai-responses", _request()), 2)
    assert_wire(
        first,
        {
            "type": "function_call_output",
            "call_id": "call_a",
            "output": [
                {"type": "input_text", "text": "Read shot.png"},
                {"type": "input_image", "detail": "auto", "image_url": PNG_URL},
                {"type": "input_image", "detail": "auto", "image_url": JPEG_URL},
            ],
        },
    )
    assert_wire(second, {"type": "function_call_output", "call_id": "call_b", "output": "no match"})


CHAT_TAIL = [
    {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": [
            {"type": "text", "text": "Read shot.png"},
            {
                "type": "text",
                "text": "[2 images of this result follow in a user message after the tool results]",
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_b", "content": "no match"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "[2 images of the result of tool call call_a]"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
            {"type": "image_url", "image_url": {"url": JPEG_URL}},
        ],
    },
]


def test_openai_chat_moves_the_images_into_a_user_message_after_the_batch() -> None:
    body = produce("openai-chat", _request())
    tail = _last("openai-chat", body, 4)
    assert tail[0]["role"] == "assistant"
    for got, expected in zip(tail[1:], CHAT_TAIL, strict=True):
        assert_wire(got, expected)


def test_openai_chat_next_request_extends_the_previous_bytes() -> None:
    chat = providers.get("openai-chat")
    first = _request()
    later = _request(SETTINGS, runtime("u2", "thanks"))
    one, two = chat.serialize(first), chat.serialize(later)
    history_end = one.rindex(b'],"prompt_cache_key"')
    assert two.startswith(one[:history_end] + b",")
    assert chat.serialize(_request()) == one  # the same history: the same bytes


def test_gemini_3_nests_the_images_in_the_function_response() -> None:
    settings = _with_model("gemini", "gemini-3-pro-preview")
    [last] = _last("gemini", produce("gemini", _request(settings)))
    inline = [
        {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
        {"inlineData": {"mimeType": "image/jpeg", "data": JPEG_B64}},
    ]
    assert_wire(
        last,
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_a",
                        "name": "read_file",
                        "response": {"output": "Read shot.png"},
                        "parts": inline,
                    }
                },
                {
                    "functionResponse": {
                        "id": "call_b",
                        "name": "grep",
                        "response": {"error": "no match"},
                    }
                },
            ],
        },
    )


@pytest.mark.parametrize("model", ["gemini-2.5-pro", "gemini-2.0-flash", "models/gemini-1.5-pro"])
def test_gemini_before_3_sends_the_images_as_sibling_parts(model: str) -> None:
    [last] = _last("gemini", produce("gemini", _request(_with_model("gemini", model))))
    assert_wire(
        last,
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_a",
                        "name": "read_file",
                        "response": {"output": "Read shot.png"},
                    }
                },
                {"inlineData": {"mimeType": "image/png", "data": PNG_B64}},
                {"inlineData": {"mimeType": "image/jpeg", "data": JPEG_B64}},
                {
                    "functionResponse": {
                        "id": "call_b",
                        "name": "grep",
                        "response": {"error": "no match"},
                    }
                },
            ],
        },
    )


def test_gemini_model_test_follows_gemini_cli() -> None:
    from prefixlock.providers.gemini import multimodal_function_responses as nests

    assert [nests(m) for m in ("gemini-3-flash", "gemini-live-3.1", "gemini-4-argon")] == [
        True,
        True,
        True,
    ]
    assert [nests(m) for m in ("gemini-2.5-pro", "Gemini-1.5-flash", "gemini-live-2.5")] == [
        False,
        False,
        False,
    ]
    assert nests("tuned-model-7") is True  # not gemini-<major>: nested, as gemini-cli does


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("anthropic", "anthropic accepts image media types"),
        ("bedrock-anthropic", "bedrock-anthropic accepts image media types"),
        ("bedrock-converse", "image media type 'image/tiff' is not one of"),
        ("openai-chat", "openai-chat accepts image media types"),
        ("openai-responses", "openai-responses accepts image media types"),
        ("gemini", "gemini accepts image media types"),
    ],
)
def test_an_image_type_the_service_refuses_is_refused_in_a_result(name: str, error: str) -> None:
    req = request(
        CTX,
        RT,
        assistant(1, call("call_a", "read_file", path="a.tif")),
        results(ToolResultPart("call_a", "Read a.tif", False, (ImagePart("image/tiff", "AAAA"),))),
    )
    message = refused(name, req, error)
    assert message.startswith(f"{name}: message 'tool-results:call_a' part 0: ")
    with pytest.raises(SerializationError):  # admission asks the same
        providers.get(name).check_message(req.messages[-1], req.messages[:-1])


# -- the runtime and the store --------------------------------------------------------


def _open(path: Path) -> Conversation:
    return Conversation.open(SQLiteStore(path), example_bundle(), CONV)


def test_tool_results_with_images_survive_a_restart_byte_for_byte(tmp_path: Path) -> None:
    conv = _open(tmp_path / "s.db")
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {"path": "shot.png"})])
    sent = conv.tool_results(
        [ToolResult("c1", "Read shot.png", images=[{"media_type": "image/png", "data": PNG_B64}])]
    )
    assert sent.messages[-1].parts == (ToolResultPart("c1", "Read shot.png", False, (SHOT,)),)
    bodies = {name: providers.get(name).serialize(sent) for name in providers.NAMES}
    reopened = _open(tmp_path / "s.db")
    again = reopened.tool_results([ToolResult("c1", "Read shot.png", images=[SHOT])])  # a retry
    assert {name: providers.get(name).serialize(again) for name in providers.NAMES} == bodies
    with pytest.raises(Exception, match="different content"):
        reopened.tool_results([ToolResult("c1", "Read shot.png")])  # the same event, no image


@pytest.mark.parametrize(
    ("images", "error"),
    [
        ("AAAA", "tool_results[0] (call 'c1').images: expected a list of images, got str"),
        ([{"media_type": "image/png"}], "images[0]: expected an image {media_type, data}"),
        ([{"media_type": "png", "data": "AA=="}], "images[0].media_type: expected an image"),
        ([{"media_type": "image/png", "data": "not base64!"}], "images[0].data: expected"),
        ([{"media_type": "image/png", "data": ""}], "images[0].data: expected non-empty base64"),
    ],
)
def test_bad_tool_result_images_are_refused_before_anything_is_written(
    tmp_path: Path, images: Any, error: str
) -> None:
    conv = _open(tmp_path / "s.db")
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {"path": "shot.png"})])
    seq = conv.history.seq
    with pytest.raises(HistoryError) as info:
        conv.tool_results([ToolResult("c1", "out", images=images)])
    assert error in str(info.value)
    assert conv.history.seq == seq


def _records(images: tuple[ImagePart, ...], **extra: Any) -> tuple[bytes, list[bytes]]:
    root = Root("c", "sha256:" + "0" * 64, "Be brief.", (), ())
    message = CanonicalMessage.create(
        "tool-results:c1",
        MessageKind.TOOL_RESULT,
        Role.TOOL,
        (ToolResultPart("c1", "out", False, images),),
    )
    record = Record(1, RecordType.TOOL_RESULTS, "tool-results:c1", (message,), **extra)
    root_bytes = root.encode()
    return root_bytes, [record.encode("c", canonical.sha256_hex(root_bytes))]


def test_a_record_with_tool_result_images_has_format_7() -> None:
    root_bytes, [data] = _records((SHOT,))
    assert FORMAT_TOOL_IMAGES == 7
    assert b'"format":7,' in data
    prev = canonical.sha256_hex(root_bytes)
    fast = decode_record(data, "c", 1, prev)
    checked = decode_record(data, "c", 1, prev, checked=True)
    assert fast == checked
    assert fast.messages[0].parts[0].images == (SHOT,)
    assert fast.encode("c", prev) == data


def test_a_record_with_images_and_wire_templates_decodes_on_both_paths() -> None:
    root_bytes, [data] = _records((SHOT,), wire={})
    prev = canonical.sha256_hex(root_bytes)
    assert b'"format":7,' in data and data.endswith(b',"wire":{}}')
    assert decode_record(data, "c", 1, prev) == decode_record(data, "c", 1, prev, checked=True)


def test_an_old_record_reads_as_before() -> None:
    # a tool-results record as prefixlock wrote it before images (format 1), verbatim
    root_bytes, [data] = _records(())
    prev = canonical.sha256_hex(root_bytes)
    assert data == (
        b'{"conversation":"c","event_id":"tool-results:c1","format":1,"kind":"record",'
        b'"messages":[{"digest":"sha256:'
        + canonical.sha256_hex(
            b'{"kind":"tool_result","parts":[{"call_id":"c1","is_error":false,"output":"out",'
            b'"type":"tool_result"}],"role":"tool"}'
        )
        .removeprefix("sha256:")
        .encode()
        + b'","id":"tool-results:c1","kind":"tool_result","parts":[{"call_id":"c1",'
        b'"is_error":false,"output":"out","type":"tool_result"}],"role":"tool"}],"prev":"'
        + prev.encode()
        + b'","request_digest":null,"reset":false,"seq":1,"type":"tool_results"}'
    )
    _, [record], _ = decode_chain(root_bytes, [data], "c")
    assert record.format == FORMAT
    assert record.messages[0].parts == (ToolResultPart("c1", "out"),)


@pytest.mark.parametrize("claimed", [FORMAT, FORMAT_WIRE])
def test_images_under_an_older_format_are_refused(claimed: int) -> None:
    root_bytes, [data] = _records((SHOT,), **({"wire": {}} if claimed == FORMAT_WIRE else {}))
    bad = data.replace(b'"format":7,', b'"format":%d,' % claimed)
    with pytest.raises(CheckpointError, match="record 1: not in canonical form"):
        decode_chain(root_bytes, [bad], "c")


def test_format_7_without_images_is_refused() -> None:
    root_bytes, [data] = _records(())
    bad = data.replace(b'"format":1,', b'"format":7,')
    with pytest.raises(CheckpointError, match="record 1: not in canonical form"):
        decode_chain(root_bytes, [bad], "c")


# -- scenarios ------------------------------------------------------------------------

SCENARIO = """\
name: tool image
conversation: conv-tool-img
steps:
  - user: {event: u1, query: "What is on the screenshot?", timestamp: "2026-03-02T09:00:00Z"}
  - assistant:
      tool_calls: [{id: c1, name: read_file, arguments: {path: shot.png}}]
  - tool_results:
      - call_id: c1
        output: Read shot.png.
        images: [{media_type: MEDIA, data: "DATA"}]
  - assistant: {text: A login form.}
"""


def _scenario_file(tmp_path: Path, media_type: str = "image/png", data: str = PNG_B64) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("MEDIA", media_type).replace("DATA", data), encoding="utf-8")
    return path


BUNDLES: dict[Path, Any] = {}


def test_a_scenario_tool_result_image_reaches_the_history_and_every_wire(tmp_path: Path) -> None:
    from prefixlock.review.replay import replay, replay_bodies
    from prefixlock.review.scenario import load_scenario

    path = _scenario_file(tmp_path)
    calls = replay(load_scenario(path, bundles=BUNDLES))
    last = calls[-1].request.messages[-1]
    assert last.parts == (ToolResultPart("c1", "Read shot.png.", False, (SHOT,)),)
    bodies = replay_bodies(load_scenario(path, bundles=BUNDLES), list(providers.NAMES))
    anthropic = canonical.loads(bodies["anthropic"][-1])["messages"][-1]["content"][0]
    assert anthropic["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
    }
    chat = canonical.loads(bodies["openai-chat"][-1])["messages"][-1]
    assert chat == {
        "role": "user",
        "content": [
            {"type": "text", "text": "[1 image of the result of tool call c1]"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
        ],
    }


def test_a_scenario_tool_result_image_with_bad_data_is_a_schema_error(tmp_path: Path) -> None:
    from prefixlock.core.errors import SpecErrors
    from prefixlock.review.scenario import load_scenario

    path = _scenario_file(tmp_path, data="not base64!")
    with pytest.raises(SpecErrors) as info:
        load_scenario(path, bundles=BUNDLES)
    assert str(info.value).startswith(f"{path}:10:")
    assert "$.steps[2].tool_results[0].images[0].data: expected a string matching" in str(
        info.value
    )


def test_a_tool_result_image_type_a_provider_refuses_is_refused_at_its_step(
    tmp_path: Path,
) -> None:
    from prefixlock.core.errors import SpecErrors
    from prefixlock.review.replay import replay
    from prefixlock.review.scenario import load_scenario

    path = _scenario_file(tmp_path, "image/tiff")
    with pytest.raises(SpecErrors) as info:
        replay(load_scenario(path, bundles=BUNDLES))
    message = str(info.value)
    assert message.startswith(f"{path}:7:5: $.steps[2].tool_results: tool results ")
    assert "not stored, a configured provider would refuse it" in message
    assert "not 'image/tiff'" in message


# -- the cache simulator --------------------------------------------------------------


@pytest.mark.parametrize("name", ["anthropic", "openai-chat", "gemini"])
def test_the_simulator_counts_a_result_image_as_part_of_its_block(name: str) -> None:
    from prefixlock.cache.simulator import simulate
    from prefixlock.cache.tokens import ByteEstimate

    big = ImagePart("image/png", "A" * 4000)  # 4,000 base64 characters: 1,000 tokens
    with_image = request(
        CTX,
        RT,
        assistant(1, call("call_a", "read_file", path="shot.png")),
        results(ToolResultPart("call_a", "Read shot.png", False, (big,))),
    )
    without = request(
        CTX,
        RT,
        assistant(1, call("call_a", "read_file", path="shot.png")),
        results(ToolResultPart("call_a", "Read shot.png")),
    )
    wire = providers.get(name)
    tokens = [
        simulate(name, [wire.serialize(req)]).totals.input_tokens for req in (with_image, without)
    ]
    # the blocks that hold the result, each counted as every block is (UTF-8 bytes / 4 of
    # its canonical JSON, markers left out): a user turn's image is counted the same way
    estimate = ByteEstimate()

    def result_tokens(req: ModelRequest) -> int:
        body = wire.body(req)
        if name == "anthropic":
            blocks = body["messages"][-1]["content"]
        elif name == "openai-chat":
            after = max(i for i, m in enumerate(body["messages"]) if m["role"] == "assistant")
            blocks = body["messages"][after + 1 :]
        else:
            blocks = body["contents"][-1]["parts"]
        bare = [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks]
        return sum(estimate.count(canonical.dumps(b)) for b in bare)

    assert tokens[0] - tokens[1] == result_tokens(with_image) - result_tokens(without)
    assert tokens[0] - tokens[1] >= 1000  # the image's 4,000 base64 characters


# -- converters -----------------------------------------------------------------------


def _claude_transcript(tmp_path: Path) -> Path:
    from convert_fixtures import PNG, ClaudeSession

    s = ClaudeSession()
    s.user("What is on the screenshot?")
    s.assistant(
        "msg_1",
        [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.png"}}],
        read=0,
        write=3000,
    )
    s.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                    },
                    {
                        "type": "image",
                        "source": {"type": "url", "url": "https://example.com/b.png"},
                    },
                ],
            }
        ]
    )
    s.assistant("msg_2", [{"type": "text", "text": "A login form."}], read=3000, write=100)
    path = tmp_path / "claude.jsonl"
    path.write_text(s.text(), encoding="utf-8")
    return path


def test_claude_code_tool_result_images_become_result_images(tmp_path: Path) -> None:
    from convert_fixtures import PNG
    from prefixlock.review.convert import convert

    path = _claude_transcript(tmp_path)
    c = convert("claude-code", path)
    results_step = c.scenario["steps"][3]  # after the switch to the transcript's model
    assert results_step == {
        "tool_results": [
            {
                "call_id": "toolu_1",
                "output": "[image]",
                "timestamp": "2026-03-06T10:00:21.000Z",
                "images": [{"media_type": "image/png", "data": PNG}],
            }
        ]
    }
    counts = c.report["counts"]
    assert counts["tool_result_images"] == 1
    assert counts["tool_result_images_as_placeholders"] == 1  # the URL one
    assert {
        "where": f"{path}:3",
        "what": "an image in a tool result",
        "why": "not inline base64 data: an [image] placeholder",
    } in c.report["dropped"]
    assert not any("base64" in d["what"] for d in c.report["dropped"])


def _codex_rollout(tmp_path: Path, output: Any) -> Path:
    import json

    lines = [
        {"timestamp": "2026-03-06T10:00:00.000Z", "type": "session_meta", "payload": {"id": "cx"}},
        {
            "timestamp": "2026-03-06T10:00:01.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Look at a.png."}],
            },
        },
        {
            "timestamp": "2026-03-06T10:00:02.000Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "view_image",
                "arguments": '{"path":"a.png"}',
                "call_id": "call_1",
            },
        },
        {
            "timestamp": "2026-03-06T10:00:03.000Z",
            "type": "response_item",
            "payload": {"type": "function_call_output", "call_id": "call_1", "output": output},
        },
        {
            "timestamp": "2026-03-06T10:00:04.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "A login form."}],
            },
        },
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_codex_function_call_output_images_become_result_images(tmp_path: Path) -> None:
    from prefixlock.review.convert import convert
    from prefixlock.review.replay import replay
    from prefixlock.review.scenario import load_scenario

    output = [
        {"type": "input_text", "text": "Viewed a.png"},
        {"type": "input_image", "image_url": PNG_URL, "detail": "high"},
        {"type": "input_image", "image_url": "https://example.com/b.png"},
    ]
    path = _codex_rollout(tmp_path, output)
    c = convert("codex", path)
    [step] = [s for s in c.scenario["steps"] if "tool_results" in s]
    assert step == {
        "tool_results": [
            {
                "call_id": "call_1",
                "output": "Viewed a.png\n[image]",
                "timestamp": "2026-03-06T10:00:03.000Z",
                "images": [{"media_type": "image/png", "data": PNG_B64}],
            }
        ]
    }
    assert c.report["counts"]["tool_result_images"] == 1
    assert c.report["counts"]["tool_result_images_as_placeholders"] == 1
    # the converted scenario replays: the image reaches the tool result
    from prefixlock.review.convert import write_converted

    written = write_converted(c, tmp_path / "out" / "s.yaml")
    calls = replay(load_scenario(written[0] if isinstance(written, list) else written))
    assert calls[-1].request.messages[-1].parts[0].images == (SHOT,)


def test_a_codex_text_output_is_unchanged(tmp_path: Path) -> None:
    from prefixlock.review.convert import convert

    c = convert("codex", _codex_rollout(tmp_path, "plain text"))
    [step] = [s for s in c.scenario["steps"] if "tool_results" in s]
    assert step["tool_results"][0]["output"] == "plain text"
    assert "images" not in step["tool_results"][0]
    assert "tool_result_images" not in c.report["counts"]


# -- Bedrock Converse: Claude and Nova only -------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        "anthropic.claude-sonnet-4-5-v1:0",
        "us.anthropic.claude-opus-4-1-v1:0",
        "amazon.nova-pro-v1:0",
    ],
)
def test_converse_sends_result_images_to_claude_and_nova(model: str) -> None:
    body = produce("bedrock-converse", _request(_with_model("bedrock-converse", model)))
    [last] = _last("bedrock-converse", body)
    assert last["content"][0]["toolResult"]["content"][1] == {
        "image": {"format": "png", "source": {"bytes": PNG_B64}}
    }


def test_converse_refuses_result_images_for_other_models() -> None:
    model = "meta.llama3-3-70b-instruct-v1:0"
    req = _request(_with_model("bedrock-converse", model))
    expected = (
        "bedrock-converse: message 'tool-results:call_a' part 0: bedrock-converse takes "
        "images in a tool result only on Amazon Nova and Anthropic Claude models "
        f"(ToolResultContentBlock.image), not {model!r}"
    )
    assert refused("bedrock-converse", req) == expected
    wire = providers.get("bedrock-converse")
    with pytest.raises(SerializationError) as info:
        wire.check_message(req.messages[-1], req.messages[:-1], model=model)
    assert str(info.value) == expected
    # the same model without images: nothing changes
    plain = request(CTX, RT, settings=_with_model("bedrock-converse", model))
    produce("bedrock-converse", plain)
    # and the check without a model cannot know
    wire.check_message(req.messages[-1], req.messages[:-1])


def test_admission_asks_by_the_roots_models() -> None:
    from prefixlock.runtime.admission import Admission

    req = _request()
    names = ["bedrock-converse", "gemini"]
    Admission(names, models=["anthropic.claude-sonnet-4-5-v1:0", "gemini-2.5-pro"]).check(
        req.messages[-1:], req.messages[:-1], "tool_results"
    )
    with pytest.raises(SerializationError) as info:
        Admission(names, models=["mistral.mistral-large-2407-v1:0", "gemini-3-pro"]).check(
            req.messages[-1:], req.messages[:-1], "tool_results"
        )
    assert str(info.value).startswith(
        "tool_results: not stored, a configured provider would refuse it: bedrock-converse: "
        "message 'tool-results:call_a' part 0: bedrock-converse takes images in a tool result"
    )


@pytest.mark.parametrize("images", [(), (SHOT, PHOTO)])
def test_the_results_digest_is_the_same_without_the_encoded_parts(
    images: tuple[ImagePart, ...],
) -> None:
    from prefixlock.runtime.conversation import results_digest

    created = results(ToolResultPart("c1", "out", False, images), ToolResultPart("c2", "x", True))
    bare = CanonicalMessage(created.id, created.kind, created.role, created.parts, created.digest)
    assert bare.parts_json is None and created.parts_json is not None
    assert results_digest(bare) == results_digest(created)


def test_redaction_redacts_the_output_and_keeps_the_images(tmp_path: Path) -> None:
    from test_redact import policy_bundle

    bundle = policy_bundle(tmp_path, "redact")
    conv = Conversation.open(SQLiteStore(tmp_path / "r.db"), bundle, CONV)
    conv.handle(user("u1"))
    conv.assistant(None, [ToolCall("c1", "read_file", {"path": "shot.png"})])
    secret = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0kLmN"
    sent = conv.tool_results([ToolResult("c1", f"key {secret}", images=[SHOT])])
    [part] = sent.messages[-1].parts
    assert isinstance(part, ToolResultPart)
    assert secret not in part.output and "[REDACTED]" in part.output
    assert part.images == (SHOT,)
