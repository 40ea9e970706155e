"""A message's parts are written directly for the shapes every writer produces: the
same bytes, digest and refusals as the canonical encoder of their objects."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from prefixlock.core import canonical
from prefixlock.core.errors import CanonicalJSONError
from prefixlock.core.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    part_to_json,
)

_text = st.text(
    st.characters(codec=None, categories=None, blacklist_categories=()), max_size=8
) | st.sampled_from(["", "\0", "\ud800", "é\u2028", '"', "\\", "\U0001f600", "\x7f"])
_sig = st.none() | _text
_parts = st.one_of(
    st.builds(TextPart, _text, _sig),
    st.builds(ToolCallPart, _text, _text, _text, _sig),
    st.builds(ToolResultPart, _text, _text, st.booleans()),
    st.builds(OpaquePart, _text, _text),
    st.builds(ImagePart, _text, _text),
)


def _outcome(parts: tuple[Any, ...]) -> tuple[str, Any]:
    try:
        m = CanonicalMessage.create("m", MessageKind.ASSISTANT, Role.ASSISTANT, parts)
    except CanonicalJSONError as err:
        return "refused", (str(err), err.path, err.reason)
    return "ok", (m.parts_json, m.digest)


def _reference(parts: tuple[Any, ...]) -> tuple[str, Any]:
    objects = [part_to_json(p) for p in parts]
    try:
        parts_json = canonical.dumpb(objects)
    except CanonicalJSONError:
        try:
            canonical.dumpb({"kind": "assistant", "role": "assistant", "parts": objects})
        except CanonicalJSONError as err:
            return "refused", (str(err), err.path, err.reason)
        raise
    content = {"kind": "assistant", "parts": objects, "role": "assistant"}
    return "ok", (parts_json, canonical.digest(content))


@settings(max_examples=400, deadline=None)
@given(st.lists(_parts, max_size=4).map(tuple))
def test_direct_part_encoding_is_the_canonical_encoding(parts: tuple[Any, ...]) -> None:
    assert _outcome(parts) == _reference(parts)


def test_parts_of_other_types_in_their_fields_go_through_the_encoder() -> None:
    odd: Any = 7  # attrs does not check field types; the encoder still decides
    for part in (TextPart(odd), ToolResultPart("c", odd), ToolResultPart("c", "o", odd)):
        assert _outcome((part,)) == _reference((part,))
