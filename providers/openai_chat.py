"""OpenAI Chat Completions (``POST /v1/chat/completions``).

Fields from the official reference (openai-python ``types/chat/completion_create_params``):

* head: ``model``, ``max_completion_tokens`` (``max_tokens`` is deprecated there and
  refused as an option), ``tools`` (``{"type":"function","function":{name,
  description, parameters}}``);
* ``messages``: a ``developer`` message with the instructions first (the reference: "With
  o1 models and newer, ``developer`` messages replace the previous ``system``
  messages"), then the history 1:1;
* trail: ``prompt_cache_key`` = ``request.cache_key`` on every call, then options.

Mapping: user-role kinds -> ``user``; assistant -> one ``assistant`` message (text parts
as ``content``, tool calls as ``tool_calls`` with ``arguments`` the stored argument
string, verbatim as the model sent it); tool results -> one ``tool`` message per
result, in order. The wire has no tool-error flag, so ``is_error`` travels only in
the output text the caller wrote.

Images in tool results: a ``tool`` message's content is a string or text parts only
(openai-python ``ChatCompletionToolMessageParam.content: Union[str,
Iterable[ChatCompletionContentPartTextParam]]``; "Chat Completions only supports text
content for tool messages, although images are supported in user messages",
VectifyAI/OpenKB#242; an image part there is not processed, BerriAI/litellm#20403). So,
by one fixed rule, as harnesses do it (the LiteLLM hook of open-webui/open-terminal#89
"injects a user message after the tool response containing the image"): a result with
images keeps its output as the first text part of its ``tool`` message and gets a second
text part, ``[1 image of this result follows in a user message after the tool results]``
(``[N images ... follow ...]``); after the batch's last ``tool`` message comes ONE
``user`` message holding, per result with images in batch order, a text part ``[N
image(s) of the result of tool call <id>]`` (the wire id) and its ``image_url`` parts
(data URLs), in order. The tool messages stay right after the assistant message that
made the calls (the service refuses a ``tool`` message that does not answer a preceding
``tool_calls``). Everything depends on the one canonical tool-result message only: the
same history always gives the same bytes, and the next request extends them.

Tool call ids: the API refuses a ``tool_calls[].id`` (and so a ``tool_call_id``) longer
than 40 characters: 400 "Invalid 'messages[2].tool_calls[0].id': string too long.
Expected a string with maximum length 40, but got a string with length 41 instead."
(microsoft/autogen#6377, camel-ai/camel#2215, BerriAI/litellm#17343; a 44-character id
in Portkey-AI/gateway#1062, a 51-character one in vercel/ai#8132). Ids that long come
from other providers and gateways (``call_`` + a UUID is 41 characters, Bedrock's reach
64). Such an id is mapped, never refused, by one fixed rule (:func:`capped_id`),
applied identically to the assistant's ``tool_calls[].id`` and to the ``tool_call_id``
of the tool message answering it, so the two still pair: its first 23 characters, then
``_`` and the first 16 hex digits of the SHA-256 of the whole id (UTF-8), 40 in all
(``call_`` + a UUID -> ``call_<first 18 of the UUID>_<16 hex>``). An id of at most 40
characters is sent as is. The mapping depends on the id only (so a message's bytes
never depend on another, and are the same on every call: no fragment key is needed),
and two different ids map apart unless their 64-bit digests collide (a short id equals
a mapped one only if it was built to end in that id's digest).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from ..core.canonical import Ordered
from ..core.messages import (
    CanonicalMessage,
    ImagePart,
    OpaquePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core.model import CachePosition, ModelRequest, ProviderSettings, ToolSpec
from .base import ID_DIGEST_LENGTH, Markers, MessageAt, PartAt, Provider, id_digest
from .openai_cache import BREAKPOINT_KEY, OFF, OpenAICache

#: ``tool_calls[].id`` / ``tool_call_id``: "Expected a string with maximum length 40"
#: (the API's 400; sources in the module docstring; the SDK type is a plain ``str``).
TOOL_CALL_ID_MAX = 40


def capped_id(call_id: str, limit: int) -> str:
    """``call_id`` as a wire that refuses ids longer than ``limit`` characters accepts
    it: unchanged when it fits, else its first ``limit - 17`` characters, ``_`` and the
    first :data:`~.base.ID_DIGEST_LENGTH` hex digits of its SHA-256 (see the module docstring;
    OpenAI Responses uses it with 64). A mapped id fits, so mapping it again keeps it."""
    if len(call_id) <= limit:
        return call_id
    return f"{call_id[: limit - ID_DIGEST_LENGTH - 1]}_{id_digest(call_id)}"


def wire_tool_call_id(call_id: str) -> str:
    """``call_id`` as Chat Completions accepts it (at most :data:`TOOL_CALL_ID_MAX`
    characters; see the module docstring)."""
    return capped_id(call_id, TOOL_CALL_ID_MAX)


def _plural(count: int) -> str:
    return "1 image" if count == 1 else f"{count} images"


def _images_note(count: int) -> str:
    """The text part after a result's output in its ``tool`` message."""
    verb = "follows" if count == 1 else "follow"
    return f"[{_plural(count)} of this result {verb} in a user message after the tool results]"


def _images_label(count: int, wire_id: str) -> str:
    """The text part before a result's images in the ``user`` message that carries them."""
    return f"[{_plural(count)} of the result of tool call {wire_id}]"


class OpenAIChat(OpenAICache, Provider):
    name: ClassVar[str] = "openai-chat"
    #: Content parts that take a ``prompt_cache_breakpoint`` (openai-python 3.63.0:
    #: ``ChatCompletionContentPartTextParam``, ``...ImageParam``).
    BREAKPOINT_PARTS = frozenset({"text", "image_url"})

    MESSAGES_KEY = "messages"
    MAX_TOKENS_KEY = "max_completion_tokens"
    # FunctionDefinition.name: "Must be a-z, A-Z, 0-9, or contain underscores and
    # dashes, with a maximum length of 64."
    TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    TOOL_NAME_RULE = "1-64 characters of a-z, A-Z, 0-9, '_' and '-'"
    RESERVED_OPTIONS = frozenset({"max_tokens", "prompt_cache_key", "tools"})
    #: Role of the instructions message.
    INSTRUCTIONS_ROLE: ClassVar[str] = "developer"

    # ------------------------------------------------------------------------ frame

    def preamble(
        self, request: ModelRequest, settings: ProviderSettings, markers: Markers
    ) -> list[Any]:
        if not request.instructions:
            return []
        if CachePosition.TAIL in markers:  # a body with breakpoints: content parts
            part = Ordered(type="text", text=request.instructions)
            marker = self.root_breakpoint(markers, self._options(settings))
            if marker is not None:
                part[BREAKPOINT_KEY] = marker
            return [Ordered(role=self.INSTRUCTIONS_ROLE, content=[part])]
        return [Ordered(role=self.INSTRUCTIONS_ROLE, content=request.instructions)]

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        return Ordered(
            type="function",
            function=Ordered(
                name=name, description=spec.description, parameters=spec.parameters_value
            ),
        )

    def trail(self, request: ModelRequest, settings: ProviderSettings, markers: Markers) -> Ordered:
        out = Ordered(prompt_cache_key=request.cache_key)
        out.update(self.cache_trail(settings, self._options(settings)))
        return out

    def split_options(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return {}, self.sent_options(options)

    def strip_cache_markers(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A copy without breakpoints (on any content part of ``messages``)."""
        return self.strip_openai_markers(super().strip_cache_markers(body), self.MESSAGES_KEY)

    # --------------------------------------------------------------------- messages

    def user_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        variant = at.variant
        if isinstance(variant, tuple) and variant and variant[-1] != OFF:
            # a body with breakpoints: always parts, so a marker only adds a member
            return [Ordered(role="user", content=self.mark_parts(self.parts(message, at), at))]
        return [Ordered(role="user", content=self._content(message, at))]

    def assistant_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        calls = [i for i, p in enumerate(message.parts) if isinstance(p, ToolCallPart)]
        others = [i for i, p in enumerate(message.parts) if not isinstance(p, ToolCallPart)]
        out = Ordered(role="assistant")
        if others:
            out["content"] = self._content(message, at, others)
        if calls:
            out["tool_calls"] = self.parts(message, at, calls)
        return [out]

    def tool_result_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        """One ``tool`` message per result, then, when results carry images, ONE ``user``
        message holding them (see "Images in tool results" in the module docstring)."""
        items = self.parts(message, at)
        content: list[Any] = []
        for index, part in enumerate(message.parts):
            if isinstance(part, ToolResultPart) and part.images:
                label = _images_label(len(part.images), wire_tool_call_id(part.call_id))
                content.append(Ordered(type="text", text=label))
                content.extend(self._image_url(image, at.part(index)) for image in part.images)
        if content:
            items.append(Ordered(role="user", content=content))
        return items

    def _content(
        self, message: CanonicalMessage, at: MessageAt, indexes: list[int] | None = None
    ) -> Any:
        """A string for exactly one text part, else an array of content parts."""
        chosen = list(range(len(message.parts))) if indexes is None else indexes
        if len(chosen) == 1:
            only = message.parts[chosen[0]]
            if isinstance(only, TextPart):
                return only.text
        return self.parts(message, at, chosen)

    # ------------------------------------------------------------------------ parts

    def text_part(self, part: TextPart, at: PartAt) -> Any:
        if at.message.role == "tool":
            at.fail("openai-chat cannot express a text part in a tool_result message")
        return Ordered(type="text", text=part.text)

    def image_part(self, part: ImagePart, at: PartAt) -> Any:
        if at.message.role != "user":
            at.fail(f"openai-chat accepts images only in user messages, not {at.message.kind}")
        return self._image_url(part, at)

    def _image_url(self, part: ImagePart, at: PartAt) -> Any:
        # the media type: one of OPENAI_IMAGE_TYPES (images-vision guide; see data_url)
        return Ordered(type="image_url", image_url=Ordered(url=self.data_url(part, at)))

    def tool_call_part(self, part: ToolCallPart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(f"a tool call in a {at.message.kind} message")
        self.arguments_object(part, at)
        return Ordered(
            id=wire_tool_call_id(part.call_id),
            type="function",
            function=Ordered(name=self.tool_name(part.name, at), arguments=part.arguments),
        )

    def tool_result_part(self, part: ToolResultPart, at: PartAt) -> Any:
        if at.message.role != "tool":
            at.fail(f"a tool result in a {at.message.kind} message")
        content: Any = part.output
        if part.images:  # text parts only (ChatCompletionToolMessageParam.content)
            note = Ordered(type="text", text=_images_note(len(part.images)))
            content = [Ordered(type="text", text=part.output), note]
        return Ordered(role="tool", tool_call_id=wire_tool_call_id(part.call_id), content=content)

    def opaque_part(self, part: OpaquePart, at: PartAt) -> Any:
        if at.message.role == "tool":
            at.fail("openai-chat cannot express an opaque part in a tool_result message")
        return self.own_opaque(part, at)
