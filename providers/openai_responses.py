"""OpenAI Responses (``POST /v1/responses``).

Fields from the official reference (openai-python ``types/responses/
response_create_params``, ``response_input_item_param``):

* head: ``model``, ``max_output_tokens``, ``instructions`` (top level; on a model with
  prompt-cache breakpoints, GPT-5.6 and later, the first input item instead: a
  ``developer`` message carrying the root's breakpoint, see :meth:`preamble`), ``tools``
  (``FunctionToolParam``: ``type``, ``name``, ``description``, ``parameters``, and the
  required ``strict`` -- sent as ``false`` because our schemas are not written for strict
  mode);
* ``input``: the history 1:1 as input items;
* trail: ``prompt_cache_key`` = ``request.cache_key`` on every call, ``store``,
  ``include`` (see below), then the other options, sorted.

Store policy: ``store`` comes from the settings options and defaults to ``false``
(stateless: nothing is kept server-side, so every call carries the whole history, as
openai/codex does). Either way the input is self-contained:

* ``include`` lists ``"reasoning.encrypted_content"`` (added to any ``include`` the
  options give, sorted), so reasoning items come back with the ``encrypted_content`` that
  carries their state;
* **no input item carries an ``id``**: an own opaque item (a ``reasoning`` item, any
  output item recorded verbatim) is sent without its ``id`` member, everything else as
  received; openai/codex's ``ResponseItem`` skips every ``id`` when serializing.

An ``rs_...`` id is answered "Item 'rs_...' of type 'reasoning' was provided without its
required following item" when the server did not keep it (``store: false``;
vercel/ai#7099, langchainjs#9082) and also when it did but the item after it carries no
id (vercel/ai#10827: "a reasoning item is followed by a tool call that lacks an itemId";
langchainjs#9082: "Missing id on function_call broke validation and resulted in a 400").
A canonical tool call or text keeps no ``fc_`` / ``msg_`` id, so with ``store: true``
the ids of its reasoning items went out alone and were refused; they are left out now,
as with ``store: false``. (A reasoning item recorded from a ``store: true`` response by a
prefixlock before this rule has no ``encrypted_content``: it is sent as its summary.)

The SDK type marks a reasoning item's ``id`` as required; the service does not, and the
test judge follows this policy.

Mapping: user-role kinds -> one ``{"type":"message","role":"user","content":...}``
(``EasyInputMessageParam``; content a string for one text part, else ``input_text`` /
``input_image`` parts); assistant -> one item per part, in order: text ->
``{"type":"message","role":"assistant","content":"<text>"}`` (``EasyInputMessageParam``
with string content -- the output-message form needs the server's ``id`` and ``status``,
which a canonical message does not carry), tool call -> ``function_call`` item
(``call_id``, ``name``, ``arguments`` string), own opaque part (a ``reasoning`` item
with ``encrypted_content``, or any output item recorded verbatim) -> that item as
received; tool results -> one ``function_call_output`` item per result (``output`` the
output string; for a result with images, the list ``[{"type":"input_text","text":
output}, {"type":"input_image","detail":"auto","image_url":"data:..."}...]``, the
images in order).

Call ids: the API refuses a ``call_id`` longer than 64 characters: 400
``string_above_max_length`` "Invalid 'input[95].call_id': string too long. Expected a
string with maximum length 64, but got a string with length 116 instead."
(AnswerDotAI/fastllm#45). Such an id is mapped, never refused, by the rule Chat
Completions uses for its 40 (:func:`~.openai_chat.capped_id` with 64: the first 47
characters, ``_`` and the first 16 hex digits of the id's SHA-256), applied identically
to the ``function_call.call_id`` and to the ``function_call_output.call_id`` answering
it, so the two still pair; an id of at most 64 characters is sent as is. It depends on
the id only, so a message's bytes never depend on another.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from ..core import canonical
from ..core.canonical import Ordered
from ..core.errors import SerializationError
from ..core.messages import (
    CanonicalMessage,
    ImagePart,
    OpaquePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core.model import CachePosition, ModelRequest, ProviderSettings, ToolSpec
from .base import Markers, MessageAt, PartAt, Provider
from .openai_cache import BREAKPOINT_KEY, OFF, OpenAICache
from .openai_chat import capped_id

#: ``call_id``: "Expected a string with maximum length 64" (the API's 400
#: ``string_above_max_length``, AnswerDotAI/fastllm#45; the SDK type is a plain ``str``).
CALL_ID_MAX = 64


def wire_call_id(call_id: str) -> str:
    """``call_id`` as the Responses API accepts it (at most :data:`CALL_ID_MAX`
    characters; see the module docstring)."""
    return capped_id(call_id, CALL_ID_MAX)


class OpenAIResponses(OpenAICache, Provider):
    name: ClassVar[str] = "openai-responses"
    #: Content parts that take a ``prompt_cache_breakpoint`` (openai-python 3.63.0:
    #: ``ResponseInputTextParam``, ``ResponseInputImageParam``).
    BREAKPOINT_PARTS = frozenset({"input_text", "input_image"})
    #: ``prompt_cache_options.ttl`` takes ``12h`` here.
    REQUEST_TTL = True

    MESSAGES_KEY = "input"
    MAX_TOKENS_KEY = "max_output_tokens"
    # Same function-name rule as Chat Completions' FunctionDefinition.
    TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    TOOL_NAME_RULE = "1-64 characters of a-z, A-Z, 0-9, '_' and '-'"
    RESERVED_OPTIONS = frozenset({"instructions", "prompt_cache_key", "tools"})
    #: ``store`` when the options do not set it: stateless (see the module docstring).
    STORE_DEFAULT: ClassVar[bool] = False
    #: What every request asks back: the state of its reasoning items.
    STATELESS_INCLUDE: ClassVar[str] = "reasoning.encrypted_content"
    #: ``strict`` of every function tool (required by the reference).
    STRICT_TOOLS: ClassVar[bool] = False
    #: ``detail`` of input images (required by the reference).
    IMAGE_DETAIL: ClassVar[str] = "auto"

    # ------------------------------------------------------------------------ frame

    def instructions_fields(self, instructions: str, markers: Markers) -> Ordered:
        if not instructions or CachePosition.TAIL in markers:  # with breakpoints: preamble
            return Ordered()
        return Ordered(instructions=instructions)

    def preamble(
        self, request: ModelRequest, settings: ProviderSettings, markers: Markers
    ) -> list[Any]:
        """On a model with breakpoints, the instructions as the first input item: a
        developer message (``EasyInputMessageParam``, role ``developer``) whose one
        ``input_text`` part carries the root's breakpoint. The top-level
        ``instructions`` string is "A system (or developer) message inserted into the
        model's context" (openai-python 3.63.0, ``response_create_params``) but has no
        content part to mark; the developer item is the same message with one, as
        GPT-5.6's migration guide asks ("Place explicit breakpoints at the actual stable
        rendered boundary using prompt_cache_breakpoint", quoted in openai/codex#35300).
        Models before GPT-5.6 keep the string."""
        if not request.instructions or CachePosition.TAIL not in markers:
            return []
        part = Ordered(type="input_text", text=request.instructions)
        marker = self.root_breakpoint(markers, self._options(settings))
        if marker is not None:
            part[BREAKPOINT_KEY] = marker
        return [Ordered(type="message", role=self.INSTRUCTIONS_ROLE, content=[part])]

    #: Role of the instructions item on a model with breakpoints.
    INSTRUCTIONS_ROLE: ClassVar[str] = "developer"

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        return Ordered(
            type="function",
            name=name,
            description=spec.description,
            parameters=spec.parameters_value,
            strict=self.STRICT_TOOLS,
        )

    def message_variant(self, options: Mapping[str, Any]) -> Hashable:
        """One encoding of the history whatever ``store`` is (see the module
        docstring); ``store`` itself is checked here and written by the trail."""
        self._store(options)
        return None

    def _store(self, options: Mapping[str, Any]) -> bool:
        store = options.get("store", self.STORE_DEFAULT)
        if not isinstance(store, bool):
            raise SerializationError(f"{self.name}: settings option 'store' must be true or false")
        return store

    def split_options(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        # ``store`` and ``include`` are written by the trail (the store policy).
        sent = self.sent_options(options)
        return {}, {k: v for k, v in sent.items() if k not in ("store", "include")}

    def strip_cache_markers(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A copy without breakpoints and ``prompt_cache_options``."""
        return self.strip_openai_markers(super().strip_cache_markers(body), self.MESSAGES_KEY)

    def trail(self, request: ModelRequest, settings: ProviderSettings, markers: Markers) -> Ordered:
        options = self._parsed_options(settings)
        out = Ordered(prompt_cache_key=request.cache_key, store=self._store(options))
        include = options.get("include", [])
        if not isinstance(include, list) or not all(isinstance(i, str) for i in include):
            raise SerializationError(f"{self.name}: settings option 'include' must be a list")
        out["include"] = sorted({*include, self.STATELESS_INCLUDE})
        out.update(self.cache_trail(settings, options))
        return out

    def _parsed_options(self, settings: ProviderSettings) -> dict[str, Any]:
        value = canonical.loads(settings.options)  # valid: the frame parsed it first
        return value if isinstance(value, dict) else {}

    # --------------------------------------------------------------------- messages

    def user_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        parts = message.parts
        variant = at.variant
        if isinstance(variant, tuple) and variant and variant[-1] != OFF:
            # a body with breakpoints: always parts, so a marker only adds a member
            marked = self.mark_parts(self.parts(message, at), at)
            return [Ordered(type="message", role="user", content=marked)]
        if len(parts) == 1 and isinstance(parts[0], TextPart):
            content: Any = parts[0].text
        else:
            content = self.parts(message, at)
        return [Ordered(type="message", role="user", content=content)]

    def assistant_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return self.parts(message, at)

    def tool_result_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return self.parts(message, at)

    # ------------------------------------------------------------------------ parts

    def text_part(self, part: TextPart, at: PartAt) -> Any:
        role = at.message.role
        if role == "user":
            return Ordered(type="input_text", text=part.text)
        if role == "assistant":
            item = Ordered(type="message", role="assistant", content=part.text)
            if part.phase is not None:
                item["phase"] = part.phase  # as the model gave it (see TextPart.phase)
            return item
        at.fail("openai-responses cannot express a text part in a tool_result message")

    def image_part(self, part: ImagePart, at: PartAt) -> Any:
        if at.message.role != "user":
            at.fail(f"openai-responses accepts images only in user messages, not {at.message.kind}")
        return self._input_image(part, at)

    def _input_image(self, part: ImagePart, at: PartAt) -> Any:
        # the media type: one of OPENAI_IMAGE_TYPES (images-vision guide; see data_url)
        url = self.data_url(part, at)
        return Ordered(type="input_image", detail=self.IMAGE_DETAIL, image_url=url)

    def tool_call_part(self, part: ToolCallPart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(f"a tool call in a {at.message.kind} message")
        self.arguments_object(part, at)
        return Ordered(
            type="function_call",
            call_id=wire_call_id(part.call_id),
            name=self.tool_name(part.name, at),
            arguments=part.arguments,
        )

    def tool_result_part(self, part: ToolResultPart, at: PartAt) -> Any:
        if at.message.role != "tool":
            at.fail(f"a tool result in a {at.message.kind} message")
        output: Any = part.output
        if part.images:
            # FunctionCallOutput.output: "Union[str, ResponseFunctionCallOutputItemListParam]"
            # ("Text, image, or file output of the function tool call"; the list's items
            # ResponseInputTextContentParam / ResponseInputImageContentParam, openai-python
            # types/responses/response_input_item_param.py): the output as input_text,
            # then each image as input_image, in order. Without images: the string.
            output = [Ordered(type="input_text", text=part.output)]
            output.extend(self._input_image(image, at) for image in part.images)
        return Ordered(
            type="function_call_output", call_id=wire_call_id(part.call_id), output=output
        )

    def opaque_part(self, part: OpaquePart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(
                f"openai-responses opaque items belong to assistant messages, not {at.message.kind}"
            )
        value = self.own_opaque(part, at)
        if isinstance(value, dict) and "id" in value:
            # no item ids, whatever store is (see the module docstring)
            value = Ordered((k, v) for k, v in sorted(value.items()) if k != "id")
        return value
