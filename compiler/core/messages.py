"""Canonical messages: the provider-independent unit of conversation history.

A :class:`CanonicalMessage` is a frozen value with a stable identity (``id``), a kind, a
role, ordered parts and a content digest. Identities:

==================  ===============================  ==========
kind                id                               role
==================  ===============================  ==========
request_context     ``request-context:<event id>``   user
runtime             ``runtime:<event id>``           user
event               ``event:<event id>``             user
assistant           ``assistant:<n>`` (n from 1)     assistant
tool_result         ``tool-results:<first call id>`` tool
summary             ``summary:<epoch>``              user
==================  ===============================  ==========

Tool calls are parts of an assistant message; each carries its own call id.
Provider-opaque data (thinking signatures, encrypted reasoning, Gemini thought
signatures) travels in :class:`OpaquePart` / ``thought_signature`` and round-trips
through checkpoints unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any

import attrs

from . import canonical
from .errors import CanonicalJSONError, CheckpointError
from .wire import StoredWire


class MessageKind(StrEnum):
    REQUEST_CONTEXT = "request_context"
    RUNTIME = "runtime"
    EVENT = "event"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    SUMMARY = "summary"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@attrs.frozen
class TextPart:
    """Plain text, byte for byte as given (never stripped or renormalized)."""

    text: str
    #: Gemini's opaque thought signature attached to this part, if the model sent one.
    thought_signature: str | None = None
    #: OpenAI Responses' ``phase`` of the assistant message this text came in
    #: (``commentary`` / ``final_answer``), sent back with it: "preserve and resend phase
    #: on all assistant messages -- dropping it can degrade performance" (openai-python
    #: ``types/responses/easy_input_message_param.py``).
    phase: str | None = None


@attrs.frozen
class ToolCallPart:
    """A call the assistant made. ``arguments`` is the JSON text of an object: the
    model's own argument string verbatim (OpenAI Chat and Responses send it back byte for
    byte), or canonical JSON when the caller gave an object. Providers that take an
    object (Anthropic, Bedrock, Gemini) send it parsed, canonically encoded."""

    call_id: str
    name: str
    arguments: str
    #: Gemini's opaque thought signature attached to this call, if the model sent one.
    thought_signature: str | None = None


@attrs.frozen
class ImagePart:
    """An inline image (base64). Not every provider accepts it in every role."""

    media_type: str
    data: str


@attrs.frozen
class ToolResultPart:
    """The output of one tool call: its text, whether the tool failed, and the images it
    returned (a screenshot, a PNG it read), in order, after the text.

    ``images`` is left out of the canonical encoding when empty, so a result without
    images encodes (and digests) exactly as before images existed; with images it is
    the member ``"images": [{"data", "media_type"}, ...]``. Each wire carries them by its
    own rule (docs/providers.md, "Images in tool results")."""

    call_id: str
    output: str
    is_error: bool = False
    images: tuple[ImagePart, ...] = ()


@attrs.frozen
class OpaquePart:
    """Provider-opaque data sent back exactly as received.

    ``provider`` names the wire format that produced it (``anthropic``,
    ``openai-responses``, ``gemini``, ``bedrock-converse``); ``data`` is the canonical
    JSON text of the provider's own block (an Anthropic ``thinking`` or
    ``redacted_thinking`` block, a Responses ``reasoning`` item with
    ``encrypted_content``, a Bedrock ``reasoningContent`` block, ...).
    """

    provider: str
    data: str

    @property
    def value(self) -> Any:
        return canonical.loads(self.data)


Part = TextPart | ToolCallPart | ToolResultPart | OpaquePart | ImagePart

_PART_TYPES: dict[str, type[Any]] = {
    "text": TextPart,
    "tool_call": ToolCallPart,
    "tool_result": ToolResultPart,
    "opaque": OpaquePart,
    "image": ImagePart,
}
_TYPE_NAMES = {cls: name for name, cls in _PART_TYPES.items()}
#: The JSON keys each part type may have (``type`` and its fields).
_FIELD_NAMES = {
    cls: frozenset(["type", *(f.name for f in attrs.fields(cls))]) for cls in _PART_TYPES.values()
}


def part_to_json(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _TYPE_NAMES[type(part)]}
    for field in attrs.fields(type(part)):
        value = getattr(part, field.name)
        if value is not None:
            out[field.name] = value
    if type(part) is ToolResultPart:
        images = out.pop("images")
        if images:  # absent when empty: results without images encode as before
            out["images"] = [image_json(image) for image in images]
    return out


def image_json(image: ImagePart) -> dict[str, Any]:
    """A tool result's image as its canonical member holds it: ``{"data", "media_type"}``
    (no ``type``: it is always an image)."""
    return {"data": image.data, "media_type": image.media_type}


def _images_from_json(value: Any) -> tuple[ImagePart, ...]:
    """A stored ``images`` member: a non-empty list of ``{"data", "media_type"}`` objects
    whose values are strings (an empty list is never written: it is left out)."""
    if not isinstance(value, list) or not value:
        raise CheckpointError("tool_result part: images must be a non-empty list")
    out = []
    for index, item in enumerate(value):
        if (
            not isinstance(item, dict)
            or set(item) != {"data", "media_type"}
            or not isinstance(item["data"], str)
            or not isinstance(item["media_type"], str)
        ):
            raise CheckpointError(
                f"tool_result part: images[{index}] must be an object of string data and media_type"
            )
        out.append(ImagePart(item["media_type"], item["data"]))
    return tuple(out)


def _exact_builders() -> dict[tuple[str, ...], tuple[str, Callable[[Mapping[str, Any]], Part]]]:
    """The part shapes every writer produces, by their keys in canonical (sorted) order:
    the type name they must carry and a positional constructor. Hydration builds every
    part of a conversation; keyword arguments cost it a third more."""
    return {
        ("text", "type"): ("text", lambda d: TextPart(d["text"])),
        ("text", "thought_signature", "type"): (
            "text",
            lambda d: TextPart(d["text"], d["thought_signature"]),
        ),
        ("arguments", "call_id", "name", "type"): (
            "tool_call",
            lambda d: ToolCallPart(d["call_id"], d["name"], d["arguments"]),
        ),
        ("call_id", "output", "type"): (
            "tool_result",
            lambda d: ToolResultPart(d["call_id"], d["output"]),
        ),
        ("call_id", "is_error", "output", "type"): (
            "tool_result",
            lambda d: ToolResultPart(d["call_id"], d["output"], d["is_error"]),
        ),
        ("call_id", "images", "is_error", "output", "type"): (
            "tool_result",
            lambda d: ToolResultPart(
                d["call_id"], d["output"], d["is_error"], _images_from_json(d["images"])
            ),
        ),
    }


_EXACT = _exact_builders()


def part_from_json(data: Mapping[str, Any]) -> Part:
    exact = _EXACT.get(tuple(data))
    if exact is not None and data["type"] == exact[0]:
        return exact[1](data)
    kind = data.get("type")
    cls = _PART_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise CheckpointError(f"unknown part type {kind!r}")
    if not data.keys() <= _FIELD_NAMES[cls]:
        extra = data.keys() - _FIELD_NAMES[cls]
        raise CheckpointError(f"unknown field(s) {sorted(extra)} in {kind} part")
    fields = {k: v for k, v in data.items() if k != "type"}
    if cls is ToolResultPart and "images" in fields:
        fields["images"] = _images_from_json(fields["images"])
    try:
        part: Part = cls(**fields)
    except TypeError as err:
        raise CheckpointError(f"bad {kind} part: {err}") from None
    return part


def _content_digest(kind: MessageKind, role: Role, parts: tuple[Part, ...]) -> str:
    return canonical.digest(
        {"kind": str(kind), "role": str(role), "parts": [part_to_json(p) for p in parts]}
    )


_string = canonical.string_text


def _part_text(part: Part) -> str | None:
    """The canonical JSON text of a part of the shapes every writer produces (exact
    ``str`` fields, keys in sorted order), without building its object; None for any
    other part, which the encoder takes. Lone surrogates survive here: the caller's UTF-8
    encoding refuses them."""
    kind = type(part)
    p: Any = part
    if kind is ToolResultPart:
        if (
            type(p.call_id) is str
            and type(p.output) is str
            and type(p.is_error) is bool
            and p.images == ()
        ):
            return (
                '{"call_id":'
                + _string(p.call_id)
                + (',"is_error":true,"output":' if p.is_error else ',"is_error":false,"output":')
                + _string(p.output)
                + ',"type":"tool_result"}'
            )
    elif kind is TextPart:
        if type(p.text) is str and p.phase is None:
            if p.thought_signature is None:
                return '{"text":' + _string(p.text) + ',"type":"text"}'
            if type(p.thought_signature) is str:
                return (
                    '{"text":'
                    + _string(p.text)
                    + ',"thought_signature":'
                    + _string(p.thought_signature)
                    + ',"type":"text"}'
                )
    elif (
        kind is ToolCallPart
        and type(p.arguments) is str
        and type(p.call_id) is str
        and type(p.name) is str
    ):
        head = (
            '{"arguments":'
            + _string(p.arguments)
            + ',"call_id":'
            + _string(p.call_id)
            + ',"name":'
            + _string(p.name)
        )
        if p.thought_signature is None:
            return head + ',"type":"tool_call"}'
        if type(p.thought_signature) is str:
            return (
                head
                + ',"thought_signature":'
                + _string(p.thought_signature)
                + ',"type":"tool_call"}'
            )
    return None


def _parts_json(parts: tuple[Part, ...]) -> bytes:
    """``canonical.dumpb([part_to_json(p) for p in parts])``, the common part shapes
    written directly (the same bytes; tests/test_messages_encoding.py checks it)."""
    texts = [_part_text(p) for p in parts]
    if None in texts:
        return canonical.dumpb([part_to_json(p) for p in parts])
    try:
        return ("[" + ",".join(texts) + "]").encode("utf-8")  # type: ignore[arg-type]
    except UnicodeEncodeError:  # a lone surrogate: the encoder names it
        return canonical.dumpb([part_to_json(p) for p in parts])


_KIND_JSON = {k: canonical.dumpb(str(k)) for k in MessageKind}
_ROLE_JSON = {r: canonical.dumpb(str(r)) for r in Role}


def _content(kind: MessageKind, role: Role, parts: tuple[Part, ...]) -> tuple[bytes, bytes]:
    """The canonical encoding of ``parts``, and of kind, role and parts (what the digest
    is over): the parts are encoded once, and the record encoder reuses their bytes."""
    try:
        parts_json = _parts_json(parts)
    except CanonicalJSONError:
        _content_digest(kind, role, parts)  # the refusal, with its path in the content
        raise
    # The canonical object: keys sorted, "kind" < "parts" < "role".
    return parts_json, b'{"kind":%s,"parts":%s,"role":%s}' % (
        _KIND_JSON.get(kind) or canonical.dumpb(str(kind)),
        parts_json,
        _ROLE_JSON.get(role) or canonical.dumpb(str(role)),
    )


@attrs.frozen
class CanonicalMessage:
    """One message of the canonical history. Build it with :meth:`create`."""

    id: str
    kind: MessageKind
    role: Role
    parts: tuple[Part, ...]
    #: ``sha256:`` of the canonical encoding of kind, role and parts (not the id).
    digest: str
    #: The canonical encoding of ``parts`` when :meth:`create` made this message (None
    #: otherwise): checkpoint records splice it instead of encoding the parts again.
    parts_json: bytes | None = attrs.field(default=None, init=False, eq=False, repr=False)
    #: What hydration found stored for this message's provider fragments (None: nothing;
    #: :mod:`prefixlock.core.wire`). Equality and hash do not read it.
    wire: StoredWire | None = attrs.field(default=None, init=False, eq=False, repr=False)

    @classmethod
    def create(
        cls, id: str, kind: MessageKind, role: Role, parts: tuple[Part, ...]
    ) -> CanonicalMessage:
        parts_json, content = _content(kind, role, parts)
        message = cls(id, kind, role, parts, canonical.sha256_hex(content))
        object.__setattr__(message, "parts_json", parts_json)
        return message

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": str(self.kind),
            "role": str(self.role),
            "parts": [part_to_json(p) for p in self.parts],
            "digest": self.digest,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CanonicalMessage:
        """Decode and verify the content digest (corruption is an error, not a guess)."""
        try:
            kind = MessageKind(data["kind"])
            role = Role(data["role"])
            parts = tuple(part_from_json(p) for p in data["parts"])
            msg = cls.create(data["id"], kind, role, parts)
            stored = data["digest"]
        except (KeyError, TypeError, ValueError) as err:
            raise CheckpointError(f"malformed message: {err!r}") from None
        if stored != msg.digest:
            raise CheckpointError(
                f"message {msg.id}: content digest mismatch (stored {stored}, "
                f"computed {msg.digest})"
            )
        return msg

    def canonical_parts(self) -> bytes:
        """The canonical encoding of :attr:`parts` (:attr:`parts_json`, or encoded now)."""
        if self.parts_json is not None:
            return self.parts_json
        return _parts_json(self.parts)

    def attach_wire(self, wire: StoredWire) -> None:
        """Set :attr:`wire` (hydration does, once per stored message)."""
        object.__setattr__(self, "wire", wire)

    def drop_parts_json(self) -> None:
        """Forget :attr:`parts_json`, a cache that only saves encoding work (records
        encode the parts again, to the same bytes, and admission checks their texts
        again): for a reader that keeps many messages after their conversation is done,
        such as ``verify`` (at 2,000 calls, 1.4 MiB). Equality and hash do not read it."""
        object.__setattr__(self, "parts_json", None)

    @property
    def text(self) -> str:
        """The concatenated text parts (for humans and tests)."""
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))
