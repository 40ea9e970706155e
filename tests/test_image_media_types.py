"""Image media types: every wire sends only the image types its service documents and
refuses the rest (a ``SerializationError`` from serialize, body and check_message alike),
so a malformed media type can never reach a data URL or a ``mimeType``."""

from __future__ import annotations

from typing import Any

import pytest
from prefixlock import providers
from prefixlock.core.errors import SerializationError
from prefixlock.core.messages import ImagePart, MessageKind, TextPart
from prefixlock.core.model import ModelRequest
from provider_cases import CTX, PNG_B64, msg, produce, refused, request

#: The allow-lists, each from its service's documentation (see the providers).
OPENAI = ["image/gif", "image/jpeg", "image/png", "image/webp"]
GEMINI = ["image/heic", "image/heif", "image/jpeg", "image/png", "image/webp"]
ACCEPTED = {"openai-chat": OPENAI, "openai-responses": OPENAI, "gemini": GEMINI}
AT = "message 'runtime:u1' part 1"


def _image(media_type: str) -> ModelRequest:
    return request(
        CTX,
        msg(
            MessageKind.RUNTIME,
            "runtime:u1",
            TextPart("What is this?"),
            ImagePart(media_type, PNG_B64),
        ),
    )


def _message(name: str, media_type: str) -> str:
    if name == "bedrock-converse":
        allowed = ["image/gif", "image/jpeg", "image/png", "image/webp"]
        return f"{name}: {AT}: image media type {media_type!r} is not one of {allowed}"
    allowed = ACCEPTED.get(name, ["image/gif", "image/jpeg", "image/png", "image/webp"])
    return f"{name}: {AT}: {name} accepts image media types {allowed}, not {media_type!r}"


def _refused_everywhere(name: str, media_type: str) -> None:
    req = _image(media_type)
    assert refused(name, req) == _message(name, media_type)  # serialize and body
    with pytest.raises(SerializationError) as info:  # admission asks this
        providers.get(name).check_message(req.messages[-1], req.messages[:-1])
    assert str(info.value) == _message(name, media_type)


def _sent(name: str, body: dict[str, Any]) -> Any:
    if name == "openai-chat":
        return body["messages"][-1]["content"][1]
    if name == "openai-responses":
        return body["input"][-1]["content"][1]
    return body["contents"][-1]["parts"][1]


@pytest.mark.parametrize(
    ("name", "media_type"),
    [(name, media) for name, allowed in ACCEPTED.items() for media in allowed],
)
def test_each_documented_image_type_is_sent(name: str, media_type: str) -> None:
    sent = _sent(name, produce(name, _image(media_type)))
    url = f"data:{media_type};base64,{PNG_B64}"
    expected = {
        "openai-chat": {"type": "image_url", "image_url": {"url": url}},
        "openai-responses": {"type": "input_image", "detail": "auto", "image_url": url},
        "gemini": {"inlineData": {"mimeType": media_type, "data": PNG_B64}},
    }[name]
    assert sent == expected


@pytest.mark.parametrize("name", sorted(ACCEPTED))
@pytest.mark.parametrize(
    "media_type",
    ["image/tiff", "application/pdf", "image/svg+xml", "text/plain", "image/jpg", "IMAGE/PNG"],
)
def test_other_types_are_refused_with_the_allowed_list(name: str, media_type: str) -> None:
    _refused_everywhere(name, media_type)


def test_gif_is_openai_only_and_heic_heif_are_gemini_only() -> None:
    for name in ("openai-chat", "openai-responses"):
        _refused_everywhere(name, "image/heic")
        _refused_everywhere(name, "image/heif")
    _refused_everywhere("gemini", "image/gif")


@pytest.mark.parametrize("name", providers.NAMES)
@pytest.mark.parametrize("media_type", ["image/png;base64,AAAA", "image/png ", ""])
def test_a_malformed_media_type_is_refused_by_every_wire(name: str, media_type: str) -> None:
    # "image/png;base64,AAAA" once made "data:image/png;base64,AAAA;base64,<data>"
    _refused_everywhere(name, media_type)
