"""Anthropic Messages (``POST /v1/messages``).

Fields from the official reference (anthropic-sdk-python ``types/message_create_params``
and the block params):

* head: ``model``, ``max_tokens``, ``system`` (a list of one text block, so a
  ``cache_control`` can sit on it), ``tools`` (``name``, ``description``,
  ``input_schema``);
* ``messages``: the history 1:1; content is always a list of blocks;
* trail: the top-level automatic ``cache_control`` (the moving tail breakpoint), then
  options.

Mapping: user-role kinds -> ``user`` (text / image blocks); assistant -> ``assistant``
with blocks in part order (own opaque ``thinking`` / ``redacted_thinking`` blocks as
received, ``text``, ``tool_use`` with ``input`` the parsed arguments object); tool
results -> one ``user`` message whose content starts with the ``tool_result`` blocks
(any later text / image parts follow them). Consecutive same-role messages are sent as
they are (the API merges them server-side).

Tool use ids: the API refuses a ``tool_use.id`` not matching ``^[a-zA-Z0-9_-]+$`` (a
400, "String should match pattern"); other providers' ids such as
``functions.read_file:0`` or ``call/1 x`` do not. Such an id is mapped, never refused,
by one fixed rule (:func:`wire_tool_use_id`), applied identically to the ``tool_use.id``
and to the ``tool_result.tool_use_id`` answering it: every character outside
``[a-zA-Z0-9_-]`` becomes ``_``, then ``_`` and the first 16 hex digits of the SHA-256
of the original id (UTF-8) are appended (``functions.read_file:0`` ->
``functions_read_file_0_<16 hex>``). An id the API accepts is sent as is. The mapping is
deterministic (it depends on the id only, so a message's bytes never depend on another)
and collision-free in practice: two different ids map apart unless their 64-bit digests
collide, and a valid id equals a mapped one only if it was built to end in that id's
digest.

Cache rule (never more than 4 breakpoints, one per position):
TOOLS -> last tool; INSTRUCTIONS -> the system block; CONTEXT -> the last non-opaque
block of the hinted (latest request-context) message; TAIL -> top-level
``{"cache_control": {"type": "ephemeral"}}``. Never on empty text (refused anyway) nor
on opaque (thinking) blocks. Every marker carries ``"ttl": "1h"`` when the agent's
settings options say ``cache_ttl: 1h`` (:mod:`prefixlock.providers.cache_ttl`; the
option itself is never sent; without it, or with ``5m``, markers have no ``ttl``).
``cache_ttl: turn`` places them as that module says: TOOLS only without instructions;
a one-hour marker on the last markable block of the latest user-role message (TURN);
the root's and CONTEXT's markers one-hour, the top-level TAIL five-minute, and no
top-level marker when the turn's message is the last (its marker is that block's).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from ..core.canonical import Ordered
from ..core.limits import API_VERSION_OPTION
from ..core.messages import (
    CanonicalMessage,
    ImagePart,
    OpaquePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core.model import CachePosition, ModelRequest, ProviderSettings, ToolSpec
from .base import (
    Markers,
    MessageAt,
    PartAt,
    Provider,
    id_digest,
    sent_indexes,
)
from .cache_ttl import (
    TurnMarkers,
    active_policy,
    cache_ttl,
    frame_ttl,
    message_ttl,
    tail_ttl,
    without_ttl_option,
)

#: The one cache marker this module writes.
CACHE_CONTROL_KEY = "cache_control"


def _ephemeral(ttl: Any = None) -> Ordered:
    """A marker; ``ttl`` (``"1h"``) when the agent sets a one-hour cache TTL
    (:mod:`prefixlock.providers.cache_ttl`)."""
    out = Ordered(type="ephemeral")
    if isinstance(ttl, str):
        out["ttl"] = ttl
    return out


#: ``tool_use.id`` (and so ``tool_result.tool_use_id``): "String should match pattern
#: '^[a-zA-Z0-9_-]+$'" (Anthropic API 400; the SDK type is a plain ``str``).
TOOL_USE_ID_PATTERN = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_ID_CHAR = re.compile(r"[^a-zA-Z0-9_-]")


def wire_tool_use_id(call_id: str) -> str:
    """``call_id`` as the Anthropic wire accepts it: unchanged when it matches
    ``^[a-zA-Z0-9_-]+$``, else its other characters replaced by ``_``, then ``_`` and
    the first :data:`~.base.ID_DIGEST_LENGTH` hex digits of its SHA-256 (see the module
    docstring)."""
    if TOOL_USE_ID_PATTERN.fullmatch(call_id):
        return call_id
    return f"{_NOT_ID_CHAR.sub('_', call_id)}_{id_digest(call_id)}"


class Anthropic(TurnMarkers, Provider):
    name: ClassVar[str] = "anthropic"
    TAIL_IN_FRAME = True

    MESSAGES_KEY = "messages"
    MAX_TOKENS_KEY = "max_tokens"
    # Tool definition ``name``: "Must match the regex ^[a-zA-Z0-9_-]{1,64}$" (Claude tool
    # use guide, "Specifying client tools"; the SDK type does not encode it).
    TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    TOOL_NAME_RULE = "1-64 characters of a-z, A-Z, 0-9, '_' and '-'"
    CACHE_POSITIONS = frozenset(CachePosition)
    MESSAGE_MARKERS = frozenset({CachePosition.CONTEXT, CachePosition.TURN})
    RESERVED_OPTIONS = frozenset({"system", "tools", CACHE_CONTROL_KEY})
    # The 400 the Messages API answers (anthropics/anthropic-sdk-python#494, quoting it).
    TOOL_BLOCKS_NEED_TOOLS = (
        "Requests which include tool_use or tool_result blocks must define tools."
    )
    #: Media types of base64 image sources (``Base64ImageSourceParam.media_type``).
    IMAGE_TYPES: ClassVar[frozenset[str]] = frozenset(
        {"image/jpeg", "image/png", "image/gif", "image/webp"}
    )
    #: Block ``type``s of each message content that may carry a cache marker.
    MARKABLE: ClassVar[frozenset[str]] = frozenset({"text", "image", "tool_use", "tool_result"})

    # ------------------------------------------------------------------------ frame

    def frame_variant(self, options: Mapping[str, Any], markers: Markers) -> Hashable:
        return active_policy(self.message_variant(options), markers)

    def message_variant(self, options: Mapping[str, Any]) -> Hashable:
        """The cache TTL policy (``None``: the 5-minute default): it is in the markers."""
        return cache_ttl(self.name, options)

    def split_options(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # anthropic_version names the header a deployment sends (core.limits): no body key
        sent = without_ttl_option(options)
        sent.pop(API_VERSION_OPTION, None)
        return {}, sent

    def head(
        self,
        request: ModelRequest,
        settings: ProviderSettings,
        markers: Markers,
        nested: Mapping[str, Any],
    ) -> Ordered:
        out = super().head(request, settings, markers, nested)
        policy = active_policy(cache_ttl(self.name, self._options(settings)), markers)
        ttl = frame_ttl(policy)
        for key in ("system", "tools"):
            for item in out.get(key, ()):
                if CACHE_CONTROL_KEY in item:
                    item[CACHE_CONTROL_KEY] = _ephemeral(ttl)
        return out

    def instructions_fields(self, instructions: str, markers: Markers) -> Ordered:
        if not instructions:
            return Ordered()
        block = Ordered(type="text", text=instructions)
        if CachePosition.INSTRUCTIONS in markers:
            block[CACHE_CONTROL_KEY] = _ephemeral()
        return Ordered(system=[block])

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        out = Ordered(name=name, description=spec.description, input_schema=spec.parameters_value)
        if last and CachePosition.TOOLS in markers:
            out[CACHE_CONTROL_KEY] = _ephemeral()
        return out

    def trail(self, request: ModelRequest, settings: ProviderSettings, markers: Markers) -> Ordered:
        if CachePosition.TAIL in markers:
            policy = active_policy(cache_ttl(self.name, self._options(settings)), markers)
            ttl = tail_ttl(policy)
            return Ordered(cache_control=_ephemeral(ttl))
        return Ordered()

    def strip_cache_markers(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A copy without ``cache_control`` at the top level, on tools, on system blocks
        and on message content blocks (exactly where this module places them)."""
        out = super().strip_cache_markers(body)
        out.pop(CACHE_CONTROL_KEY, None)
        for key in ("tools", "system"):
            items = out.get(key)
            if isinstance(items, list):
                for item in items:
                    if isinstance(item, dict):
                        item.pop(CACHE_CONTROL_KEY, None)
        for message in out.get(self.MESSAGES_KEY) or ():
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") in self.MARKABLE:
                        block.pop(CACHE_CONTROL_KEY, None)
        return out

    # --------------------------------------------------------------------- messages

    def user_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._marked(Ordered(role="user", content=self.parts(message, at)), at)]

    def assistant_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        content = self.parts(message, at, sent_indexes(message))  # no Gemini-only parts
        if not content:
            at.fail("only a blank text with a Gemini thought signature: nothing to send")
        return [self._marked(Ordered(role="assistant", content=content), at)]

    def tool_result_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        seen_other = False
        for i, part in enumerate(message.parts):
            if not isinstance(part, ToolResultPart):
                seen_other = True
            elif seen_other:
                at.part(i).fail(
                    f"{self.name} needs tool_result blocks first in their user message; "
                    "this one follows other content (prefixlock never reorders parts)"
                )
        return self.user_message(message, at)

    def _marked(self, wire: Ordered, at: MessageAt) -> Ordered:
        if at.markers & self.MESSAGE_MARKERS:
            for block in reversed(wire["content"]):
                if block.get("type") in self.MARKABLE and not isinstance(block, _Verbatim):
                    block[CACHE_CONTROL_KEY] = _ephemeral(message_ttl(at.variant, at.markers))
                    break
        return wire

    # ------------------------------------------------------------------------ parts

    def text_part(self, part: TextPart, at: PartAt) -> Any:
        if not part.text.strip():
            at.fail(
                f"{self.name} rejects empty or whitespace-only text blocks (text is {part.text!r})"
            )
        return Ordered(type="text", text=part.text)

    def image_part(self, part: ImagePart, at: PartAt) -> Any:
        if at.message.role == "assistant":
            at.fail(f"{self.name} accepts images only in user content, not in assistant messages")
        if part.media_type not in self.IMAGE_TYPES:
            at.fail(
                f"{self.name} accepts image media types {sorted(self.IMAGE_TYPES)}, "
                f"not {part.media_type!r}"
            )
        return Ordered(
            type="image",
            source=Ordered(type="base64", media_type=part.media_type, data=part.data),
        )

    def tool_call_part(self, part: ToolCallPart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(f"a tool call in a {at.message.kind} message")
        return Ordered(
            type="tool_use",
            id=wire_tool_use_id(part.call_id),
            name=self.tool_name(part.name, at),
            input=self.arguments_object(part, at),
        )

    def tool_result_part(self, part: ToolResultPart, at: PartAt) -> Any:
        if at.message.role != "tool":
            at.fail(f"a tool result in a {at.message.kind} message")
        content: Any = part.output
        if part.images:
            # ToolResultBlockParam.content: "Union[str, Iterable[Content]]", Content the
            # text and image block params (anthropic-sdk-python
            # types/tool_result_block_param.py): the output as a text block, then the
            # images in order. A result without images keeps its string content.
            content = [Ordered(type="text", text=part.output)]
            content.extend(self.image_part(image, at) for image in part.images)
        out = Ordered(
            type="tool_result", tool_use_id=wire_tool_use_id(part.call_id), content=content
        )
        if part.is_error:
            out["is_error"] = True
        return out

    def opaque_part(self, part: OpaquePart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(
                f"{self.name} opaque blocks belong to assistant messages, not {at.message.kind}"
            )
        value = self.own_opaque(part, at)
        if not isinstance(value, dict):
            at.fail(f"{self.name} opaque data must be a content block object")
        return _Verbatim(value)


class _Verbatim(dict[str, Any]):
    """An opaque block as received: never gets a cache marker. Encodes like a dict."""
