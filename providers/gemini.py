"""Google Gemini API (``POST /v1beta/models/{model}:generateContent``).

Fields from the official reference and google-genai's own types and mldev converters
(``google.genai.types`` ``Content``/``Part``/``FunctionCall``/``FunctionResponse``/
``FunctionDeclaration``; ``google.genai.models._GenerateContentConfig_to_mldev``):

* The model is a path parameter (``models/{model}``), never a body key, so the body
  has no ``model``: it is exactly the bytes POSTed.
* Body, in this order: ``generationConfig`` (``maxOutputTokens`` = the settings' max
  tokens, then the settings options that are ``GenerationConfig`` members, sorted),
  ``systemInstruction`` (``{"parts":[{"text": instructions}]}``; omitted when empty),
  ``tools`` (one ``Tool`` holding all ``functionDeclarations``: ``name``,
  ``description``, ``parametersJsonSchema``), ``contents`` (the history 1:1), then the
  options that are top-level ``GenerateContentRequest`` fields (:data:`TOP_LEVEL_OPTIONS`:
  ``cachedContent``, ``safetySettings``, ``toolConfig``), sorted. Those three are
  siblings of ``generationConfig`` in the request body (API reference,
  models.generateContent, https://ai.google.dev/api/generate-content#request-body;
  google-genai's ``_GenerateContentConfig_to_mldev`` puts them on the request, not in
  ``generationConfig``); nested, they make a malformed request.
  ``parametersJsonSchema`` rather than ``parameters``: ``parameters`` is Gemini's own
  OpenAPI-subset ``Schema`` type, while ``parametersJsonSchema`` takes a JSON Schema as
  is ("mutually exclusive with ``parameters``"), so our tool schemas go unconverted.
* Function names (``FunctionDeclaration.name``): "Must start with a letter or an
  underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons and dashes,
  with a maximum length of 128."

Mapping, one ``Content`` per canonical message, in order, never merged:

==================  ======  =====================================================
canonical message   role    parts
==================  ======  =====================================================
user-role kinds     user    text -> ``{"text"}``; image -> ``{"inlineData":
                            {"mimeType","data"}}``
assistant           model   text -> ``{"text"}``; tool call -> ``{"functionCall":
                            {"id","name","args"}}`` (``args`` the arguments object)
tool_result         user    one ``{"functionResponse":{"id","name","response"}}``
                            per result; ``response`` is ``{"output": text}``, or
                            ``{"error": text}`` when ``is_error`` (the reference:
                            'Use "output" key to specify function output and
                            "error" key to specify error details'); a result's
                            images as below
==================  ======  =====================================================

* Images in tool results ("multimodal function responses",
  https://ai.google.dev/gemini-api/docs/function-calling#multimodal-function-responses;
  google-genai ``FunctionResponse.parts``: "Ordered Parts that constitute a function
  response", each a ``FunctionResponsePart`` with ``inlineData``): on a model that takes
  them, the result's ``functionResponse`` gets a last member ``"parts": [{"inlineData":
  {"mimeType","data"}}...]``, the images in order. Gemini 2.x refuses that member
  (NousResearch/hermes-agent#96466: "2.x rejects ``parts``"; maximhq/bifrost#4202:
  older models answer 400), so for a model named ``gemini-<major>`` with major below 3
  the images go as sibling ``{"inlineData"}`` parts of the same ``user`` content, right
  after that result's ``functionResponse`` part: gemini-cli's rule
  (``convertToFunctionResponse``: "Nest inlineData if supported by the model ...
  Otherwise treat as siblings"), with its model test (``supportsMultimodalFunctionResponse``:
  ``^gemini(-live)?-([0-9]+)`` with major >= 3; any other name nests). The choice depends
  on the settings' model only (:meth:`Gemini.model_variant`), so one conversation's
  bytes never change form between calls.
* ``thoughtSignature``: a text or tool-call part's ``thought_signature`` is sent back
  on that part exactly as received (``{"text":..,"thoughtSignature":..}``), also on a
  blank text part (the runtime keeps those; see :mod:`prefixlock.runtime.admission`).
  On Gemini 3 and later (:func:`signs_every_step`) the first tool call of an assistant
  message that has none gets :data:`SKIP_SIGNATURE`, on every turn (a service rule, with
  its sources there).
* ``functionCall.id`` is the :class:`ToolCallPart`'s call id, the model's own: a
  ``functionCall`` that arrived without ``id`` gets a local id from the reader
  (:data:`LOCAL_ID_PREFIX`), which is never sent: that call and its
  ``functionResponse`` go back without ``id``, so no id the model did not send is ever
  sent back. ``args`` is the parsed argument object.
* An image's ``mimeType`` is one of :attr:`Gemini.IMAGE_TYPES`; any other is refused.
* An ``OpaquePart(provider="gemini")`` is one whole ``Part`` object as the model sent
  it (for example a ``thought`` part); it is emitted verbatim as a part. Opaque parts
  of other providers are refused.
* ``functionResponse.name`` is required by the API but a canonical tool result carries
  only its call id: the name is that of the latest tool call with that id in an
  *earlier* assistant message of the same request (a lookup, never a reorder). A
  tool-result message's bytes therefore depend on earlier messages: :meth:`fragment_key`
  resolves its names (one dict lookup each; each message is scanned once per history,
  see :mod:`prefixlock.providers.scan`) into its fragment-cache key, and
  :meth:`tool_result_part` writes the name it finds there.
* Refused: images outside user-role messages, anything but tool results (and own
  opaque parts) in a tool-result message, tool calls outside assistant messages, tool
  results whose call is not in the request.
* Caching: Gemini caches implicitly; the body has no cache markers, cache hints are
  ignored and :meth:`strip_cache_markers` is the identity.
* Explicit cache of the stable root (``cachedContent`` in the settings options, a
  ``cachedContents/...`` name): the instructions and tools live in that cache, so the
  body carries neither ``systemInstruction`` nor ``tools`` nor ``toolConfig`` (the API
  answers 400 "CachedContent can not be used with GenerateContent request setting
  system_instruction, tools or tool_config", vercel/ai#3333, langchain-google#978,
  litellm#17304). :meth:`Gemini.cached_content_body` is the ``POST
  /v1beta/cachedContents`` body that creates such a cache from a request's root (the
  model, ``systemInstruction``, ``tools`` and the options' ``toolConfig``), so one
  cache serves every conversation with that root; the agent server creates it (with
  a ``ttl``) and names it in the options. The cache simulator reads the cached tokens
  at the cache price on every call (:mod:`prefixlock.cache.simulator`).
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from ..core.canonical import Ordered, dumps
from ..core.errors import SerializationError
from ..core.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..core.model import ModelRequest, ProviderSettings, ToolSpec
from .base import Markers, MessageAt, PartAt, Provider

#: Call ids the Gemini reader gives a ``functionCall`` the model sent without ``id``
#: (``gemini-local-<responseId, else a digest of the whole response>-<part index>``; see
#: :mod:`prefixlock.providers.readers.gemini`), so that an agent can answer it like any
#: other call. They are never sent: the ``functionCall`` and its ``functionResponse`` go
#: back without ``id``, as the model made them (Gemini matches them by name and order).
LOCAL_ID_PREFIX = "gemini-local-"

#: The ``thoughtSignature`` of a function call Gemini did not make, on Gemini 3 and later
#: (:func:`signs_every_step`). Google's thought-signatures page, FAQ: "You can set the
#: following dummy signatures of either "context_engineering_is_the_way_to_go" or
#: "skip_thought_signature_validator"" for a conversation transferred from another model
#: or a custom function call (https://ai.google.dev/gemini-api/docs/thought-signatures#faqs,
#: as quoted by pydantic-ai's Gemini model); Vertex AI's page names this one ("You can set
#: thought_signature to skip_thought_signature_validator",
#: https://cloud.google.com/vertex-ai/generative-ai/docs/thought-signatures), so it is
#: the one both services take. Proto JSON reads it as URL-safe base64 (``bytes``).
SKIP_SIGNATURE = "skip_thought_signature_validator"

#: A Gemini model id's major version (``gemini-3-pro-preview``, ``models/gemini-3.8-flash``,
#: ``gemini-live-3``): gemini-cli's pattern (``supportsMultimodalFunctionResponse``).
_GEMINI_MAJOR = re.compile(r"(?:models/)?gemini(?:-live)?-(\d+)")


def _major(model: str) -> int | None:
    """The major version of a ``gemini-<major>`` model id, None for any other name."""
    found = _GEMINI_MAJOR.match(model.lower())
    return None if found is None else int(found.group(1))


def signs_every_step(model: str) -> bool:
    """Whether ``model`` refuses an unsigned function call: Gemini 3 and later. "When
    using Gemini 3 models, you must pass back thought signatures during function
    calling, otherwise you will get a validation error (4xx status code)" (the
    thought-signatures page); the service answers 400 INVALID_ARGUMENT "Function call is
    missing a thought_signature in functionCall parts. This is required for tools to work
    correctly, and missing thought_signature may lead to degraded model performance.
    Additional data, function call `default_api:Bash` , position 2. Please refer to
    https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
    (lbjlaq/Antigravity-Manager#3202; the same on gemini-3.1-flash-lite-preview,
    nearai/ironclaw#1510, and gemini-3.5-flash, BigPizzaV3/CodexPlusPlus#332). Gemini 2.5
    does not (nanbingxyz/5ire#405: "this does not happen with gemini-2.5"). Later majors
    (the example's gemini-4-argon) are taken to keep the rule: NOT VERIFIED."""
    major = _major(model)
    return major is not None and major >= 3


class Gemini(Provider):
    name: ClassVar[str] = "gemini"

    MESSAGES_KEY = "contents"
    MODEL_KEY = None  # a path parameter
    #: Settings options go into generationConfig, after maxOutputTokens, except the
    #: TOP_LEVEL_OPTIONS.
    CONFIG_KEY = "generationConfig"
    #: ``GenerateContentRequest`` fields an option may set beside ``generationConfig``
    #: (top level, after ``contents``, sorted).
    TOP_LEVEL_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"cachedContent", "safetySettings", "toolConfig"}
    )
    #: Keys this wire emits itself; an option may not set them (at either level).
    RESERVED_OPTIONS = frozenset({"contents", "systemInstruction", "tools", "generationConfig"})
    MAX_TOKENS_KEY = "maxOutputTokens"
    TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}")
    TOOL_NAME_RULE = (
        "1-128 characters of a-z, A-Z, 0-9, '_', '.', ':' and '-', starting with a letter or '_'"
    )
    #: Wire role of each canonical role.
    ROLES: ClassVar[dict[str, str]] = {"user": "user", "assistant": "model", "tool": "user"}
    #: ``inlineData.mimeType`` of an image: "Supported image formats" (image/png,
    #: image/jpeg, image/webp, image/heic, image/heif;
    #: https://ai.google.dev/gemini-api/docs/image-understanding). ``Blob.mimeType`` is
    #: any string to the SDK; the service answers another image type 400 "MIME type
    #: must be image/png, image/jpeg, image/webp, image/heic, or image/heif."
    #: (EvanZhouDev/gemini-ai#3), image/gif included ("invalid input file", discuss.
    #: ai.google.dev/t/gemini-2-api-returns-invalid-parameter-error-for-gif-inputs/71468).
    #: inlineData takes PDFs, audio and video as well, but an :class:`ImagePart` is an
    #: image.
    IMAGE_TYPES: ClassVar[frozenset[str]] = frozenset(
        {"image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"}
    )

    # ------------------------------------------------------------------------ frame

    #: The option naming an explicit cache of the stable root (see the module docstring).
    CACHED_CONTENT: ClassVar[str] = "cachedContent"
    #: Request fields that live in an explicit cache instead of the request.
    IN_CACHE: ClassVar[tuple[str, ...]] = ("systemInstruction", "tools", "toolConfig")

    def cached_content_body(
        self, request: ModelRequest, *, ttl: str | None = None, display_name: str | None = None
    ) -> dict[str, Any]:
        """The ``POST /v1beta/cachedContents`` body of an explicit cache holding this
        request's stable root: ``model`` (``models/<model>``), ``systemInstruction``,
        ``tools``, the options' ``toolConfig``, then ``ttl`` (e.g. ``"3600s"``) and
        ``displayName`` when given. Every conversation with the same root and settings
        gets the same body (API reference, cachedContents.create; CachedContent
        resource: https://ai.google.dev/api/caching#CachedContent)."""
        settings = self._settings(request)
        options = self._options(settings)
        plain = _without_cached_content(settings, options)
        full = self.head(request, plain, frozenset(), {})
        out = Ordered(model=f"models/{settings.model}")
        for key in self.IN_CACHE:
            if key in full:
                out[key] = full[key]
        if "toolConfig" in options:
            out["toolConfig"] = options["toolConfig"]
        if ttl is not None:
            out["ttl"] = ttl
        if display_name is not None:
            out["displayName"] = display_name
        return out

    def head(
        self,
        request: ModelRequest,
        settings: ProviderSettings,
        markers: Markers,
        nested: Mapping[str, Any],
    ) -> Ordered:
        out = super().head(request, settings, markers, nested)
        cached = self._options(settings).get(self.CACHED_CONTENT)
        if cached is not None:
            if not isinstance(cached, str) or not cached.startswith("cachedContents/"):
                raise SerializationError(
                    f"{self.name}: settings option 'cachedContent' must name a cache "
                    f"('cachedContents/...'), not {cached!r}"
                )
            for key in self.IN_CACHE:  # they live in the cache (module docstring)
                out.pop(key, None)
        return out

    def split_options(self, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        top = {k: v for k, v in options.items() if k in self.TOP_LEVEL_OPTIONS}
        if self.CACHED_CONTENT in top:
            top.pop("toolConfig", None)  # in the cache: cached_content_body
        nested = {k: v for k, v in options.items() if k not in self.TOP_LEVEL_OPTIONS}
        clash = sorted(set(nested) & self.RESERVED_OPTIONS)
        if clash:
            raise SerializationError(
                f"{self.name}: settings options may not set reserved key(s) {clash}"
            )
        return nested, top

    def instructions_fields(self, instructions: str, markers: Markers) -> Ordered:
        if not instructions:
            return Ordered()
        return Ordered(systemInstruction=Ordered(parts=[Ordered(text=instructions)]))

    def tools_fields(self, tools: list[Any], markers: Markers) -> Ordered:
        return Ordered(tools=[Ordered(functionDeclarations=tools)])

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        return Ordered(
            name=name,
            description=spec.description,
            parametersJsonSchema=spec.parameters_value,
        )

    # --------------------------------------------------------------------- messages

    def fragment_key(self, message: CanonicalMessage, earlier: dict[str, Any]) -> Hashable:
        """Per part, the function name of the call a tool result answers (None for other
        parts, and for a result with no earlier call); ``()`` for a message without
        results. Notes an assistant message's calls (call id -> name) for later ones."""
        key: tuple[str | None, ...] = ()
        if any(isinstance(part, ToolResultPart) for part in message.parts):
            key = tuple(
                earlier.get(part.call_id) if isinstance(part, ToolResultPart) else None
                for part in message.parts
            )
        if message.kind is MessageKind.ASSISTANT:
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    earlier[part.call_id] = part.name
        return key

    def user_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._content(message, at)]

    def assistant_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._content(message, at)]

    def model_variant(self, model: str) -> Hashable:
        """What the message bytes depend on from ``model``: ``(signs, nested)``, whether
        the model refuses an unsigned function call (:func:`signs_every_step`) and
        whether it takes images inside a ``functionResponse`` (True: Gemini 3 and later,
        and names that are not ``gemini-<major>``; see "Images in tool results" in the
        module docstring)."""
        return (signs_every_step(model), multimodal_function_responses(model))

    def tool_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        parts = []
        for index, part in enumerate(message.parts):
            wire_part = self.part(part, at.part(index))
            parts.append(wire_part)
            if isinstance(part, ToolResultPart) and part.images and not _nested(at):
                # an older model: the images as sibling parts right after the response
                parts.extend(self._inline_data(image, at.part(index)) for image in part.images)
        return [Ordered(role=self.ROLES[message.role], parts=parts)]

    def _content(self, message: CanonicalMessage, at: MessageAt) -> Ordered:
        return Ordered(role=self.ROLES[message.role], parts=self.parts(message, at))

    # ------------------------------------------------------------------------ parts

    def text_part(self, part: TextPart, at: PartAt) -> Any:
        if at.message.role == "tool":
            at.fail("gemini cannot express a text part in a tool_result message")
        return _signed(Ordered(text=part.text), part.thought_signature)

    def image_part(self, part: ImagePart, at: PartAt) -> Any:
        if at.message.role != "user":
            at.fail(f"gemini accepts images only in user messages, not {at.message.kind}")
        return self._inline_data(part, at)

    def _inline_data(self, part: ImagePart, at: PartAt) -> Any:
        """``{"inlineData": {"mimeType", "data"}}``: a ``Part`` and a
        ``FunctionResponsePart`` alike."""
        mime_type = self.image_media_type(part, at, self.IMAGE_TYPES)
        return Ordered(inlineData=Ordered(mimeType=mime_type, data=part.data))

    def tool_call_part(self, part: ToolCallPart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(f"a tool call in a {at.message.kind} message")
        signature = part.thought_signature
        if signature is None and _signs_every_step(at) and _first_call(at):
            # A call Gemini did not make (another provider's, a scenario's, an older
            # Gemini's): the documented dummy signature. Gemini 3 validates only "the
            # current turn" and, in a step of parallel calls, the first call's signature
            # (the thought-signatures page); it is sent on every turn all the same, so a
            # call's bytes do not change when its turn ends (the append-only invariant),
            # and only on the first call of each step, where Gemini puts its own.
            signature = SKIP_SIGNATURE
        call = Ordered(
            id=part.call_id,
            name=self.tool_name(part.name, at),
            args=self.arguments_object(part, at),
        )
        if part.call_id.startswith(LOCAL_ID_PREFIX):
            del call["id"]  # the model sent none: never send one it did not make
        return _signed(Ordered(functionCall=call), signature)

    def tool_result_part(self, part: ToolResultPart, at: PartAt) -> Any:
        if at.message.role != "tool":
            at.fail(f"a tool result in a {at.message.kind} message")
        name: str | None = at.at.key[at.index]  # see fragment_key
        if name is None:
            at.fail(
                f"no earlier tool call with id {part.call_id!r} in this request "
                "(gemini needs its function name)"
            )
        response = Ordered(error=part.output) if part.is_error else Ordered(output=part.output)
        answer = Ordered(id=part.call_id, name=self.tool_name(name, at), response=response)
        if part.call_id.startswith(LOCAL_ID_PREFIX):
            del answer["id"]  # answered by name and position, as the call was made
        if part.images and _nested(at.at):
            # FunctionResponse.parts: "Ordered Parts that constitute a function response"
            # (google-genai types.FunctionResponsePart: inline_data / file_data)
            answer["parts"] = [self._inline_data(image, at) for image in part.images]
        return Ordered(functionResponse=answer)

    def opaque_part(self, part: OpaquePart, at: PartAt) -> Any:
        value = self.own_opaque(part, at)
        if not isinstance(value, dict):
            at.fail("a gemini opaque part must be one Part object as received")
        return value


def _by_model(at: MessageAt) -> tuple[bool, bool]:
    """The model part of the frame's variant, ``(signs, nested)``
    (:meth:`Gemini.model_variant`); under admission's default variant ``()``: no
    dummy signatures, images nested (both forms refuse the same images)."""
    variant = at.variant
    if isinstance(variant, tuple) and len(variant) == 2 and isinstance(variant[1], tuple):
        signs, nested = variant[1]
        return bool(signs), bool(nested)
    return False, True


def _signs_every_step(at: PartAt) -> bool:
    """Whether this request's model wants every step's first call signed (the last item
    of the frame's variant: :meth:`Gemini.model_variant`)."""
    return _by_model(at.at)[0]


def _first_call(at: PartAt) -> bool:
    """Whether the part at ``at`` is the first tool call of its message (its step)."""
    return not any(isinstance(p, ToolCallPart) for p in at.message.parts[: at.index])


def multimodal_function_responses(model: str) -> bool:
    """Whether ``model`` takes images inside ``functionResponse.parts``: a Gemini of
    major version 3 or later, or a name that is not ``gemini-<major>`` (the test of
    gemini-cli's and pi-ai's ``supportsMultimodalFunctionResponse``)."""
    major = _major(model)
    return major is None or major >= 3


def _nested(at: MessageAt) -> bool:
    """Whether this request's model takes a result's images inside its
    ``functionResponse`` (the message variant's model part; the default variant ``()``,
    admission's, says yes: both forms refuse the same images)."""
    return _by_model(at)[1]


def _signed(wire_part: Ordered, signature: str | None) -> Ordered:
    """``wire_part`` with the part's ``thoughtSignature`` sent back, when it has one."""
    if signature is not None:
        wire_part["thoughtSignature"] = signature
    return wire_part


def _without_cached_content(
    settings: ProviderSettings, options: Mapping[str, Any]
) -> ProviderSettings:
    """``settings`` without the ``cachedContent`` option (the full root, to be cached)."""
    rest = {k: v for k, v in options.items() if k != Gemini.CACHED_CONTENT}
    return ProviderSettings(settings.provider, settings.model, settings.max_tokens, dumps(rest))
