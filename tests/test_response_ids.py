"""The provider's response id, read from every wire (whole body and stream alike), and
kept with the record: ``Conversation.record`` is idempotent by it (issue 47)."""

from __future__ import annotations

import pytest
from http_support import TURNS, expected, stream_bytes
from prefixlock import providers
from prefixlock.core.errors import ResponseError
from prefixlock.core.messages import CanonicalMessage, MessageKind, Role
from prefixlock.core.output import ModelOutput
from prefixlock.store.records import FORMAT_RESPONSE, Record, RecordType, decode_record

#: The id of each fixture response, as the provider sent it (None: the wire has none).
IDS = {
    ("anthropic", "turn1"): "msg_01AbCdEfGhIjKlMnOpQrStUv",
    ("anthropic", "turn2"): "msg_01WxYz0123456789AbCdEfGh",
    ("gemini", "turn1"): "mGIbaOqNJ5y3nvgP0cXJgAw",
    ("gemini", "turn2"): "nWIbaKqdL8y3nvgP1cXJgAw",
    ("openai-chat", "tool_calls"): "chatcmpl-C1a2b3",
    ("openai-chat", "final"): "chatcmpl-C1a2b4",
    ("openai-responses", "tool_calls"): "resp_68e1a2b3c4d5e6f7",
    ("openai-responses", "final"): "resp_68e1a2b3c4d5e6f8",
    # ConverseResponse has no id (botocore bedrock-runtime 2023-09-30: output, stopReason,
    # usage, metrics, additionalModelResponseFields, trace, performanceConfig,
    # serviceTier; the stream's messageStart carries only the role)
    **{("bedrock-converse", name): None for name in TURNS["bedrock-converse"]},
}


def _streamed(provider: str, name: str) -> ModelOutput:
    reader = providers.get(provider).stream_reader()
    data, _ = stream_bytes(provider, name)
    for i in range(0, len(data), 57):
        reader.feed(data[i : i + 57])
    return reader.result()


@pytest.mark.parametrize(("provider", "name"), sorted(IDS))
def test_every_reader_gives_the_response_id_whole_and_streamed(provider: str, name: str) -> None:
    whole = expected(provider, name)
    assert whole.response_id == IDS[(provider, name)]
    assert _streamed(provider, name).response_id == whole.response_id


def test_a_response_id_that_is_not_a_string_is_refused() -> None:
    body = (
        b'{"id":7,"type":"message","role":"assistant","model":"claude-sonnet-4-5",'
        b'"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{}}'
    )
    with pytest.raises(ResponseError) as caught:
        providers.get("anthropic").parse_response(body)
    assert str(caught.value) == (
        "anthropic response: the response id is not a string (7) (do not retry as is)"
    )


def test_an_empty_response_id_counts_as_none() -> None:
    body = (
        b'{"id":"","type":"message","role":"assistant","model":"claude-sonnet-4-5",'
        b'"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{}}'
    )
    assert providers.get("anthropic").parse_response(body).response_id is None


def test_openai_chat_chunks_of_two_responses_are_refused() -> None:
    data, _ = stream_bytes("openai-chat", "final")
    lines = data.split(b"\n\n")
    lines[2] = lines[2].replace(b"chatcmpl-C1a2b4", b"chatcmpl-OTHER")
    reader = providers.get("openai-chat").stream_reader()
    with pytest.raises(ResponseError) as caught:
        reader.feed(b"\n\n".join(lines))
    assert str(caught.value) == (
        "openai-chat stream chunk: id 'chatcmpl-OTHER' after 'chatcmpl-C1a2b4' "
        "(chunks of another response) (do not retry as is)"
    )


def test_a_record_keeps_the_response_id_and_decodes_it_on_both_paths() -> None:
    output = expected("anthropic", "turn2")
    message = CanonicalMessage.create(
        "assistant:1", MessageKind.ASSISTANT, Role.ASSISTANT, output.parts
    )
    usage = output.usage
    for used in (usage, None):
        record = Record(
            1,
            RecordType.ASSISTANT,
            "assistant:1",
            (message,),
            usage=used,
            response_id="msg_01WxYz0123456789AbCdEfGh",
        )
        data = record.encode("c", "sha256:" + "0" * 64)
        assert b'"format":%d' % FORMAT_RESPONSE in data
        assert b',"reset":false,"response_id":"msg_01WxYz0123456789AbCdEfGh","seq":1,' in data
        fast = decode_record(data, "c", 1, "sha256:" + "0" * 64)
        checked = decode_record(data, "c", 1, "sha256:" + "0" * 64, checked=True)
        assert fast == checked == record


def test_a_record_refuses_an_empty_response_id() -> None:
    with pytest.raises(ValueError, match="response_id: expected a non-empty string or null"):
        Record(1, RecordType.ASSISTANT, "assistant:1", (), response_id="")
