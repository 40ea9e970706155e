"""Images a user sends with a turn (``user.images``, the request's ``images``): after the
turn's text in its runtime message, in every provider's image block; only user turns
take them; a media type some configured provider refuses is refused before anything
is recorded."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from convert_fixtures import PNG
from prefixlock.core.errors import SpecErrors
from prefixlock.core.messages import ImagePart, TextPart
from prefixlock.review.replay import replay, replay_bodies
from prefixlock.review.scenario import load_scenario
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.spec.bundle import Bundle

BUNDLES: dict[Path, Bundle] = {}

ALL = [
    "anthropic",
    "bedrock-anthropic",
    "openai-responses",
    "openai-chat",
    "gemini",
    "bedrock-converse",
]


def _scenario(tmp_path: Path, media_type: str = "image/png") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        textwrap.dedent(
            f"""\
            name: image
            conversation: conv-img
            steps:
              - user:
                  event: u1
                  query: What is on this screenshot?
                  timestamp: "2026-03-02T09:00:00Z"
                  images: [{{media_type: {media_type}, data: "{PNG}"}}]
              - assistant: {{text: A login form.}}
              - user: {{event: u2, query: Thanks., timestamp: "2026-03-02T09:01:00Z"}}
            """
        ),
        encoding="utf-8",
    )
    return path


#: Each wire's image block of the PNG (the providers' own mapping, tests per wire).
SENT: dict[str, Any] = {
    "anthropic": {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    },
    "bedrock-anthropic": {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG},
    },
    "openai-responses": {
        "type": "input_image",
        "detail": "auto",
        "image_url": f"data:image/png;base64,{PNG}",
    },
    "openai-chat": {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
    "gemini": {"inlineData": {"mimeType": "image/png", "data": PNG}},
    "bedrock-converse": {"image": {"format": "png", "source": {"bytes": PNG}}},
}


_ANTHROPIC_HOUR = ("cache_control", {"type": "ephemeral", "ttl": "1h"})
_OPENAI_12H = ("prompt_cache_breakpoint", {"mode": "explicit", "ttl": "12h"})
#: The marker member a wire puts on a content block, and its one-hour value there
#: (Bedrock Converse's markers are blocks of their own; Gemini has none).
MARKER: dict[str, tuple[str, Any]] = {
    "anthropic": _ANTHROPIC_HOUR,
    "bedrock-anthropic": _ANTHROPIC_HOUR,
    "openai-responses": _OPENAI_12H,
    "openai-chat": _OPENAI_12H,
}


def _runtime_blocks(name: str, body: dict[str, Any]) -> list[Any]:
    """The content blocks of the wire message holding the first user query."""
    key, blocks = {
        "gemini": ("contents", "parts"),
        "openai-responses": ("input", "content"),
    }.get(name, ("messages", "content"))
    for message in body[key]:
        content = message.get(blocks)
        if isinstance(content, list) and "What is on this screenshot?" in json.dumps(content):
            return content
    raise AssertionError("no runtime message")


def test_a_user_image_follows_the_turn_text_on_every_wire(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    calls = replay(load_scenario(path, bundles=BUNDLES))
    runtime = calls[0].request.messages[-1]
    assert runtime.id == "runtime:u1"
    assert isinstance(runtime.parts[0], TextPart)
    assert runtime.parts[1:] == (ImagePart("image/png", PNG),)
    bodies = replay_bodies(load_scenario(path, bundles=BUNDLES), ALL)
    for name in ALL:
        key, hour = MARKER.get(name, ("", None))
        # the first call and the next, which repeats it: under cache_ttl auto (the
        # example's) the second turn's first call puts a one-hour marker on the previous
        # turn's opening message, whose last block is the image
        for k, body in enumerate(bodies[name]):
            blocks = _runtime_blocks(name, json.loads(body))
            images = [b for b in blocks if PNG in json.dumps(b)]
            assert [b.get(key) for b in images] == [None if k == 0 else hour], (name, k)
            image = [{m: v for m, v in b.items() if m != key} for b in images]
            assert image == [SENT[name]], name
            text = [i for i, b in enumerate(blocks) if "What is on" in json.dumps(b)]
            at = [i for i, b in enumerate(blocks) if PNG in json.dumps(b)]
            assert text[0] < at[0], name  # after the turn's text


def test_a_request_without_images_keeps_its_digest() -> None:
    """Requests (and their retries) recorded before images existed keep their identity:
    an absent images list is not part of the request's JSON."""
    value = {"event_id": "u1", "kind": "user", "query": "q"}
    request = AgentRunRequest.from_value(value)
    assert request.to_json() == {"event_id": "u1", "kind": "user", "query": "q"}
    with_image = AgentRunRequest.from_value(
        {**value, "images": [{"media_type": "image/png", "data": PNG}]}
    )
    assert with_image.digest != request.digest


def test_only_user_turns_take_images(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(
        _scenario(tmp_path)
        .read_text()
        .replace(
            "  - user: {event: u2,",
            "  - background: {event: b1, text: done, "
            f'images: [{{media_type: image/png, data: "{PNG}"}}]}}\n'
            "  - user: {event: u2,",
        )
    )
    with pytest.raises(SpecErrors) as info:
        load_scenario(Path("s.yaml"), bundles=BUNDLES)
    messages = [str(e) for e in info.value.errors]
    assert messages == [
        "s.yaml:10:41: $.steps[2].background: unknown key 'images' (expected one of: event, text)"
    ]


def test_bad_image_data_is_a_schema_error(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    path.write_text(path.read_text().replace(PNG, "not base64!"))
    with pytest.raises(SpecErrors) as info:
        load_scenario(path, bundles=BUNDLES)
    assert "$.steps[0].user.images[0].data" in str(info.value)


def test_a_media_type_a_configured_provider_refuses_is_refused_at_its_step(
    tmp_path: Path,
) -> None:
    # Gemini documents image/heic; the example bundle also configures wires that do not
    path = _scenario(tmp_path, "image/heic")
    with pytest.raises(SpecErrors) as info:
        replay(load_scenario(path, bundles=BUNDLES))
    message = str(info.value)
    assert "$.steps[0].user" in message and "'image/heic'" in message


def test_a_background_request_with_images_is_refused() -> None:
    value = {"event_id": "b1", "kind": "background", "text": "t"}
    image = {"media_type": "image/png", "data": PNG}
    with pytest.raises(SpecErrors) as info:
        AgentRunRequest.from_value({**value, "images": [image]})
    assert [str(e) for e in info.value.errors] == [
        "<request>: $: key 'images' is not allowed (only user turns take images)"
    ]
