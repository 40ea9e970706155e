"""AWS Bedrock Converse (``POST /model/{modelId}/converse``).

Fields from the official API reference and botocore's ``bedrock-runtime`` service model
(``Converse`` input: ``Message``, ``ContentBlock``, ``SystemContentBlock``,
``ToolConfiguration``, ``ToolSpecification``, ``ToolUseBlock``, ``ToolResultBlock``,
``CachePointBlock``, ``InferenceConfiguration``):

* ``modelId`` is a URI member (``/model/{modelId}/converse``, :attr:`URI_MEMBERS`),
  not part of the JSON body. :meth:`serialize` returns exactly the POSTed JSON body,
  *without* ``modelId``; :meth:`body` returns the full Converse params, ``modelId``
  first, as an SDK call takes them (the SDK judge validates those). :meth:`wire_body` is
  the body without the URI members, so ``canonical.dumpb(wire_body(r)) == serialize(r)``.
* Body, in this order: ``inferenceConfig`` (``maxTokens`` = the settings' max tokens,
  then the options that are ``InferenceConfiguration`` members -- ``temperature``,
  ``topP``, ``stopSequences`` -- sorted), ``system`` (``[{"text": instructions},
  cachePoint?]``; omitted when the instructions are empty: ``text`` has a minimum
  length of 1), ``toolConfig`` (``{"tools": [{"toolSpec": {name, description?,
  inputSchema: {"json": schema}}}..., cachePoint?]}``; ``description`` is omitted when
  empty for the same reason; no ``toolConfig`` without tools: ``tools`` needs at least
  one element), ``messages``, then the remaining options, sorted, as top-level
  Converse fields (``additionalModelRequestFields``, ``performanceConfig`` ...):
  :meth:`split_options` nests the ``InferenceConfiguration`` members.
* Tool names (``ToolName``): 1-64 characters matching ``[a-zA-Z0-9_-]+``; tool use
  ids (``ToolUseId``): 1-64 characters matching ``[a-zA-Z0-9_.:-]+``.

Mapping: each canonical message maps to the content blocks below, in order. Converse
requires the messages to alternate between ``user`` and ``assistant``, starting with
``user`` (a ``ValidationException``, "A conversation must alternate between user and
assistant roles", reported in langchain-aws#130, Portkey gateway#748 and
semantic-kernel#10281, where a maintainer calls it "a limitation of the Bedrock
service"; the service does *not* merge same-role turns). So consecutive same-role
canonical messages (request context then runtime; tool results then an event or the
next user turn) become consecutive blocks of ONE wire message, in canonical order (tool
results first, then texts), never reordered (:attr:`MERGE_SAME_ROLE` in
:mod:`prefixlock.providers.base`); each canonical message is still mapped and cached on
its own. The append-only property holds over (role, content block) pairs: a later call
may add blocks to the last wire message, never change or drop an earlier block. A
request whose first message is not a user-role message is refused (:attr:`FIRST_ROLE`).

==================  =========  ===================================================
canonical message   role       content blocks
==================  =========  ===================================================
user-role kinds     user       text -> ``{"text"}``; image -> ``{"image": {"format",
                               "source": {"bytes"}}}`` (png, jpeg, gif, webp)
assistant           assistant  text -> ``{"text"}``; tool call -> ``{"toolUse":
                               {"toolUseId","name","input"}}`` (``input`` the
                               arguments object)
tool_result         user       one ``{"toolResult": {"toolUseId", "content":
                               [{"text": output}, {"image": ...}...], "status":
                               "error"?}}`` per result (the result's images follow
                               its text, each ``{"image": {"format", "source":
                               {"bytes"}}}``; ``status`` only when ``is_error``; the
                               API default is success)
==================  =========  ===================================================

* An ``OpaquePart(provider="bedrock-converse")`` is one whole ``ContentBlock`` as the
  model returned it (``{"reasoningContent": {"reasoningText": {"text", "signature"}}}``
  or ``{"reasoningContent": {"redactedContent": ...}}``) and is emitted verbatim.
* A result's images go to Amazon Nova and Anthropic Claude models only
  (``ToolResultContentBlock.image``: "only supported by Amazon Nova and Anthropic Claude
  3 and 4 models"): for another model they are refused, by serialize and by the check
  before saving (:meth:`BedrockConverse.model_variant`).
* Refused: images outside user-role messages, and image parts beside the results of a
  tool-result message (such an image cannot be attached to a call without guessing; a
  result's own images travel in its ``toolResult.content``), anything but tool results (and
  own opaque parts) in a tool-result message, foreign opaque parts, bad names and ids.

Cache rule (fixed; the same positions as Anthropic's stable breakpoints plus the tail):
a ``{"cachePoint": {"type": "default"}}`` block goes (positions are in blocks, so a
cachePoint may sit in the middle of a merged wire message, after the blocks of the
canonical message it marks)

1. last in ``toolConfig.tools`` (TOOLS hint),
2. last in ``system`` (INSTRUCTIONS hint),
3. after the last block of the latest request-context message (CONTEXT hint),
4. after the last block of the last canonical message, the last block of the body
   (TAIL hint; it moves every call, as the prefix grows). When CONTEXT and TAIL name
   the same message it gets one cachePoint.

So a body carries at most 4 cachePoints, Bedrock's per-request limit. A position that
has nothing to mark (no tools, empty instructions) simply gets no cachePoint; hints
never move a marker anywhere else. :meth:`strip_cache_markers` removes exactly these
blocks. Every cachePoint carries ``"ttl": "1h"`` when the agent's settings options say
``cache_ttl: 1h`` (:mod:`prefixlock.providers.cache_ttl`; the option is never sent).
``cache_ttl: turn`` places them as that module says: the tools' cachePoint only without
instructions; one after the last block of the latest user-role message (TURN); those of
the root, CONTEXT and TURN one-hour, TAIL's five-minute (no ``ttl``); a message marked
for several positions still gets one cachePoint, one-hour if any of them is.

One-hour TTL models: Bedrock takes ``"ttl": "1h"`` on some models only and answers a
ValidationException on the others, so ``cache_ttl: 1h`` or ``turn`` with such a model
is refused by the build (the option's file, line and field) and by :meth:`serialize`
(:func:`prefixlock.core.limits.one_hour_ttl_refusal`, which quotes the sources).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Hashable, Mapping
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
from .base import Markers, MessageAt, PartAt, Provider, sent_indexes
from .cache_ttl import (
    TurnMarkers,
    active_policy,
    cache_ttl,
    frame_ttl,
    message_ttl,
    without_ttl_option,
)

_ALL_POSITIONS: Markers = frozenset(CachePosition)


class BedrockConverse(TurnMarkers, Provider):
    name: ClassVar[str] = "bedrock-converse"
    TAIL_IN_FRAME = False

    MESSAGES_KEY = "messages"
    MODEL_KEY = None  # a URI member: see URI_MEMBERS and body()
    #: InferenceConfiguration: maxTokens first, then the INFERENCE_KEYS options.
    CONFIG_KEY = "inferenceConfig"
    MAX_TOKENS_KEY = "maxTokens"
    TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,64}")
    TOOL_NAME_RULE = "1-64 characters of a-z, A-Z, 0-9, '_' and '-'"
    #: ``ToolUseId``: min 1, max 64, pattern ``[a-zA-Z0-9_.:-]+``.
    TOOL_USE_ID_PATTERN: ClassVar[re.Pattern[str]] = re.compile(r"[a-zA-Z0-9_.:-]{1,64}")
    MESSAGE_MARKERS = frozenset({CachePosition.CONTEXT, CachePosition.TAIL, CachePosition.TURN})
    CACHE_POSITIONS = _ALL_POSITIONS
    RESERVED_OPTIONS = frozenset({"modelId", "messages", "system", "toolConfig", "inferenceConfig"})
    # The ValidationException Converse answers (langgenius/dify#17545 and
    # elastic/kibana#246943 quote it, Claude on Bedrock).
    TOOL_BLOCKS_NEED_TOOLS = (
        "The toolConfig field must be defined when using toolUse and toolResult content blocks."
    )
    URI_MEMBERS = ("modelId",)
    #: Model id parts of the families that take images in a tool result:
    #: ``ToolResultContentBlock.image`` "is only supported by Amazon Nova and Anthropic
    #: Claude 3 and 4 models" (botocore bedrock-runtime service model). Inference
    #: profiles (``us.anthropic.claude-...``) and ARNs hold them too.
    TOOL_RESULT_IMAGE_MODELS: ClassVar[tuple[str, ...]] = ("anthropic.claude", "amazon.nova")
    #: "A conversation must alternate between user and assistant roles" (see above):
    #: same-role neighbours become blocks of one wire message; the first is a user one.
    MERGE_SAME_ROLE = True
    BLOCKS_KEY = "content"
    FIRST_ROLE = "user"
    #: Wire role of each canonical role.
    ROLES: ClassVar[dict[str, str]] = {"user": "user", "assistant": "assistant", "tool": "user"}
    #: ``InferenceConfiguration`` members; options with these keys go into it
    #: (``maxTokens`` is refused: max tokens come from the settings).
    INFERENCE_KEYS: ClassVar[frozenset[str]] = frozenset(
        {"maxTokens", "temperature", "topP", "stopSequences"}
    )
    #: ``ImageFormat`` enum by media type.
    IMAGE_FORMATS: ClassVar[dict[str, str]] = {
        "image/png": "png",
        "image/jpeg": "jpeg",
        "image/gif": "gif",
        "image/webp": "webp",
    }
    CACHE_POINT: ClassVar[dict[str, Any]] = {"cachePoint": {"type": "default"}}

    # ------------------------------------------------------------------ public API

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The full Converse params: ``modelId`` first, then :meth:`wire_body`."""
        out = Ordered(modelId=self._settings(request).model)
        out.update(super().body(request))
        return out

    def strip_cache_markers(self, body: Mapping[str, Any]) -> dict[str, Any]:
        out = super().strip_cache_markers(body)
        if isinstance(out.get("system"), list):
            out["system"] = _without_cache_points(out["system"])
        tool_config = out.get("toolConfig")
        if isinstance(tool_config, dict) and isinstance(tool_config.get("tools"), list):
            tool_config["tools"] = _without_cache_points(tool_config["tools"])
        for message in out.get(self.MESSAGES_KEY) or ():
            if isinstance(message, dict) and isinstance(message.get("content"), list):
                message["content"] = _without_cache_points(message["content"])
        return out

    # ------------------------------------------------------------------------ frame

    def frame_variant(self, options: Mapping[str, Any], markers: Markers) -> Hashable:
        return active_policy(self.message_variant(options), markers)

    def message_variant(self, options: Mapping[str, Any]) -> Hashable:
        """The cache TTL policy (``None``: the 5-minute default): it is in the cachePoints."""
        return cache_ttl(self.name, options)

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
        if ttl is not None:
            tool_config = out.get("toolConfig") or {}
            for blocks in (out.get("system") or [], tool_config.get("tools") or []):
                for i, block in enumerate(blocks):
                    if isinstance(block, dict) and set(block) == {"cachePoint"}:
                        blocks[i] = self._cache_point(ttl)
        return out

    def split_options(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        options = without_ttl_option(options)
        nested = {k: v for k, v in options.items() if k in self.INFERENCE_KEYS}
        return nested, {k: v for k, v in options.items() if k not in self.INFERENCE_KEYS}

    def instructions_fields(self, instructions: str, markers: Markers) -> Ordered:
        if not instructions:  # SystemContentBlock text has a minimum length of 1
            return Ordered()
        system: list[Any] = [Ordered(text=instructions)]
        if CachePosition.INSTRUCTIONS in markers:
            system.append(self._cache_point())
        return Ordered(system=system)

    def tools_fields(self, tools: list[Any], markers: Markers) -> Ordered:
        if CachePosition.TOOLS in markers:
            tools = [*tools, self._cache_point()]
        return Ordered(toolConfig=Ordered(tools=tools))

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        tool_spec = Ordered(name=name)
        if spec.description:
            tool_spec["description"] = spec.description
        tool_spec["inputSchema"] = Ordered(json=spec.parameters_value)
        return Ordered(toolSpec=tool_spec)

    def _cache_point(self, ttl: Any = None) -> Any:
        out = copy.deepcopy(self.CACHE_POINT)
        if isinstance(ttl, str):  # the agent's cache TTL (providers/cache_ttl.py)
            out["cachePoint"]["ttl"] = ttl
        return out

    # --------------------------------------------------------------------- messages

    def user_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._message(message, at)]

    def assistant_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._message(message, at)]

    def tool_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._message(message, at)]

    def model_variant(self, model: str) -> Hashable:
        """None for a model that takes images in a tool result (Claude, Nova: the
        message bytes do not depend on the model); else the model, which
        :meth:`tool_result_part` names when it refuses a result's images."""
        return None if any(family in model for family in self.TOOL_RESULT_IMAGE_MODELS) else model

    def _message(self, message: CanonicalMessage, at: MessageAt) -> Ordered:
        content = self.parts(message, at, sent_indexes(message))  # no Gemini-only parts
        if at.markers & self.MESSAGE_MARKERS:
            policy = _policy(at.variant)
            content.append(self._cache_point(message_ttl(policy, at.markers)))
        return Ordered(role=self.ROLES[message.role], content=content)

    # ------------------------------------------------------------------------ parts

    def text_part(self, part: TextPart, at: PartAt) -> Any:
        if at.message.role == "tool":
            at.fail("bedrock-converse cannot express a text part in a tool_result message")
        if not part.text.strip():
            # "text content blocks must contain non-whitespace text" (a ValidationException).
            at.fail(
                "bedrock-converse rejects empty or whitespace-only text blocks "
                f"(text is {part.text!r})"
            )
        return Ordered(text=part.text)

    def image_part(self, part: ImagePart, at: PartAt) -> Any:
        if at.message.role != "user":
            at.fail(f"bedrock-converse accepts images only in user messages, not {at.message.kind}")
        return self._image_block(part, at)

    def _image_block(self, part: ImagePart, at: PartAt) -> Any:
        """``{"image": {"format", "source": {"bytes"}}}`` (``ImageBlock``; a user message's
        content block and a tool result's content item alike)."""
        image_format = self.IMAGE_FORMATS.get(part.media_type)
        if image_format is None:
            at.fail(
                f"image media type {part.media_type!r} is not one of {sorted(self.IMAGE_FORMATS)}"
            )
        return Ordered(image=Ordered(format=image_format, source=Ordered(bytes=part.data)))

    def tool_call_part(self, part: ToolCallPart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(f"a tool call in a {at.message.kind} message")
        return Ordered(
            toolUse=Ordered(
                toolUseId=self._tool_use_id(part.call_id, at),
                name=self.tool_name(part.name, at),
                input=self.arguments_object(part, at),
            )
        )

    def tool_result_part(self, part: ToolResultPart, at: PartAt) -> Any:
        if at.message.role != "tool":
            at.fail(f"a tool result in a {at.message.kind} message")
        if not part.output.strip():
            at.fail(
                "bedrock-converse rejects a tool result whose text is empty or whitespace-only "
                f"(output is {part.output!r}); send a non-empty output such as the error text"
            )
        model = _without_tool_result_images(at.at.variant) if part.images else None
        if model is not None:
            at.fail(
                f"bedrock-converse takes images in a tool result only on Amazon Nova and "
                f"Anthropic Claude models (ToolResultContentBlock.image), not {model!r}"
            )
        # ToolResultContentBlock is a union of text, image, ...: the output, then each
        # image as an ImageBlock, in order (botocore bedrock-runtime service model).
        content = [Ordered(text=part.output)]
        content.extend(self._image_block(image, at) for image in part.images)
        result = Ordered(toolUseId=self._tool_use_id(part.call_id, at), content=content)
        if part.is_error:
            result["status"] = "error"
        return Ordered(toolResult=result)

    def opaque_part(self, part: OpaquePart, at: PartAt) -> Any:
        value = self.own_opaque(part, at)
        if not isinstance(value, dict) or len(value) != 1:
            at.fail("a bedrock-converse opaque part must be one ContentBlock object as received")
        return value

    def _tool_use_id(self, call_id: str, at: PartAt) -> str:
        if not self.TOOL_USE_ID_PATTERN.fullmatch(call_id):
            at.fail(f"tool use id {call_id!r} must be 1-64 characters of a-z, A-Z, 0-9, '_.:-'")
        return call_id


def _policy(variant: Any) -> Any:
    """The cache TTL policy of a message variant: the variant itself, or its first member
    when :meth:`BedrockConverse.model_variant` named a model (``(policy, model)``)."""
    return variant[0] if isinstance(variant, tuple) and len(variant) == 2 else variant


def _without_tool_result_images(variant: Any) -> str | None:
    """The model of a variant ``(policy, model)`` (one that takes no images in a tool
    result), else None."""
    if isinstance(variant, tuple) and len(variant) == 2 and isinstance(variant[1], str):
        return variant[1]
    return None


def _without_cache_points(blocks: list[Any]) -> list[Any]:
    return [b for b in blocks if not (isinstance(b, dict) and set(b) == {"cachePoint"})]
