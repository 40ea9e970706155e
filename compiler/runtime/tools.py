"""What a caller hands a :class:`~prefixlock.runtime.conversation.Conversation` about
tools: the calls in model output and their results."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..core import canonical
from ..core.admit import tool_call_part
from ..core.errors import CanonicalJSONError, HistoryError
from ..core.messages import ImagePart, ToolCallPart
from ..spec.validate import schema

__all__ = ["ToolCall", "ToolResult"]


@attrs.frozen
class ToolCall:
    """A tool call in model output. ``arguments`` is an object or its JSON text."""

    id: str
    name: str
    arguments: Mapping[str, Any] | str = attrs.field(factory=dict)
    thought_signature: str | None = None

    def to_part(self) -> ToolCallPart:
        """The call as a message part, checked (:func:`prefixlock.core.admit.tool_call_part`:
        an argument string is kept verbatim and must parse as a JSON object; an object is
        stored as its canonical JSON text; NUL and lone surrogates are refused)."""
        return tool_call_part(self.id, self.name, self.arguments, self.thought_signature)


#: A tool result image's ``media_type`` and ``data``: the patterns of ``user.images``,
#: read from ``agent_run_request.schema.json#/$defs/image`` (one source for both); each
#: wire then accepts the media types its service documents.
_IMAGE = schema("agent_run_request")["$defs"]["image"]["properties"]
_MEDIA_TYPE = re.compile(_IMAGE["media_type"]["pattern"])
_BASE64 = re.compile(_IMAGE["data"]["pattern"])


@attrs.frozen
class ToolResult:
    """The result of one tool call: its text output, whether the tool failed, and the
    images it returned, in order (each an :class:`~prefixlock.core.messages.ImagePart` or
    a mapping ``{"media_type", "data"}``, base64 as in a user turn's ``images``)."""

    call_id: str
    output: str
    is_error: bool = False
    images: Sequence[ImagePart | Mapping[str, Any]] = ()

    def image_parts(self, field: str = "images") -> tuple[ImagePart, ...]:
        """The images as parts, checked: ``{media_type, data}`` strings, the media type
        ``image/...`` and the data non-empty base64 (:class:`HistoryError` naming
        ``field[i]`` otherwise)."""
        if isinstance(self.images, str | bytes | Mapping) or not isinstance(self.images, Sequence):
            raise HistoryError(
                f"{field}: expected a list of images, got {type(self.images).__name__}"
            )
        out = []
        for index, image in enumerate(self.images):
            where = f"{field}[{index}]"
            if isinstance(image, ImagePart):
                media_type, data = image.media_type, image.data
            elif isinstance(image, Mapping) and set(image) == {"media_type", "data"}:
                media_type, data = image["media_type"], image["data"]
            else:
                raise HistoryError(
                    f"{where}: expected an image {{media_type, data}}, got {image!r:.80}"
                )
            if not isinstance(media_type, str) or not _MEDIA_TYPE.fullmatch(media_type):
                raise HistoryError(
                    f"{where}.media_type: expected an image media type (image/...), "
                    f"got {media_type!r:.80}"
                )
            if not isinstance(data, str) or not _BASE64.fullmatch(data):
                raise HistoryError(f"{where}.data: expected non-empty base64 image data")
            out.append(ImagePart(media_type, data))
        return tuple(out)

    def check(self) -> None:
        """Refuse what has no canonical form: a lone surrogate (NUL too, in the id)."""
        try:
            canonical.check(self.call_id, "$.call_id", strings_without_nul=True)
            canonical.check(self.output, "$.output")
        except CanonicalJSONError as err:
            raise HistoryError(f"tool result for call {self.call_id!r}: {err}") from None
