"""Google Gemini API (``POST /v1beta/models/{model}:generateContent``).

Fields from the official reference and google-genai's own types and mldev converters
(``google.genai.types`` ``Content``/``Part``/``FunctionCall``/``FunctionResponse``/
``FunctionDeclaration``; ``google.genai.models._GenerateContentConfig_to_mldev``):

* The model is a path parameter (``models/{model}``), never a body key, so the body
  has no ``model``: it is exactly the bytes POSTed.
* Body, in this order: ``generationConfig`` (``maxOutputTokens`` = the settings' max
  tokens, then every settings option, sorted, merged into it), ``systemInstruction``
  (``{"parts":[{"text": instructions}]}``; omitted when empty), ``tools`` (one
  ``Tool`` holding all ``functionDeclarations``: ``name``, ``description``,
  ``parametersJsonSchema``), then ``contents``: the history 1:1, nothing after it.
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
                            "error" key to specify error details')
==================  ======  =====================================================

* ``thoughtSignature``: a text or tool-call part's ``thought_signature`` is sent back
  on that part exactly as received (``{"text":..,"thoughtSignature":..}``).
* An ``OpaquePart(provider="gemini")`` is one whole ``Part`` object as the model sent
  it (for example a ``thought`` part); it is emitted verbatim as a part. Opaque parts
  of other providers are refused.
* ``functionResponse.name`` is required by the API but a canonical tool result carries
  only its call id: the name is looked up from the matching tool call in an *earlier*
  message of the same request (a lookup, never a reorder). Because a tool-result
  message's bytes therefore depend on that earlier call, the fragment cache key of a
  tool-result message includes the resolved names.
* Refused: images outside user-role messages, anything but tool results (and own
  opaque parts) in a tool-result message, tool calls outside assistant messages, tool
  results whose call is not in the request.
* Caching: Gemini caches implicitly; the body has no cache markers, cache hints are
  ignored and :meth:`strip_cache_markers` is the identity.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from compiler import canonical
from compiler.canonical import CanonicalJSONError, Ordered
from compiler.errors import SerializationError
from compiler.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from compiler.model import ModelRequest, ProviderSettings, ToolSpec
from providers.base import (
    CACHE_LIMIT,
    Frame,
    Markers,
    MessageAt,
    PartAt,
    Provider,
    join_body,
)

_NO_MARKERS: Markers = frozenset()


class Gemini(Provider):
    name: ClassVar[str] = "gemini"

    MESSAGES_KEY = "contents"
    TOOL_NAME_PATTERN = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}")
    TOOL_NAME_RULE = (
        "1-128 characters of a-z, A-Z, 0-9, '_', '.', ':' and '-', starting with a letter or '_'"
    )
    #: Wire role of each canonical role.
    ROLES: ClassVar[dict[str, str]] = {"user": "user", "assistant": "model", "tool": "user"}
    #: Object the settings options are merged into, and its max-tokens key.
    CONFIG_KEY: ClassVar[str] = "generationConfig"
    CONFIG_MAX_TOKENS_KEY: ClassVar[str] = "maxOutputTokens"

    def __init__(self) -> None:
        super().__init__()
        #: The messages of the request being encoded (tool-result name lookup).
        self._messages: Sequence[CanonicalMessage] = ()
        #: Fragment cache keyed by (id, digest, markers, resolved call names).
        self._named_fragments: dict[tuple[Any, ...], bytes] = {}

    # ------------------------------------------------------------------ public API

    def serialize(self, request: ModelRequest) -> bytes:
        """As :meth:`Provider.serialize`, with the call names of a tool-result message
        in its fragment cache key (its bytes depend on them)."""
        frame, message_markers = self._prepare(request)
        self._messages = request.messages
        try:
            fragments: list[bytes] = [frame.preamble_bytes] if frame.preamble_bytes else []
            cache = self._named_fragments
            if len(cache) > CACHE_LIMIT:
                cache.clear()
            for index, message in enumerate(request.messages):
                markers = message_markers.get(index, _NO_MARKERS)
                names = self._result_names(message, index)
                key = (message.id, message.digest, markers, names)
                fragment = cache.get(key)
                if fragment is None:
                    items = self._message_items(message, index, markers)
                    fragment = b",".join(self._encode_item(message, item) for item in items)
                    cache[key] = fragment
                fragments.append(fragment)
            return join_body(frame, fragments)
        finally:
            self._messages = ()

    def body(self, request: ModelRequest) -> dict[str, Any]:
        self._messages = request.messages
        try:
            return super().body(request)
        finally:
            self._messages = ()

    # ------------------------------------------------------------------------ frame

    def _build_frame(
        self, request: ModelRequest, settings: ProviderSettings, markers: Markers
    ) -> Frame:
        # Every option goes into generationConfig (see head); none at the top level.
        return super()._build_frame(request, attrs.evolve(settings, options="{}"), markers)

    def head(self, request: ModelRequest, settings: ProviderSettings, markers: Markers) -> Ordered:
        config = Ordered()
        config[self.CONFIG_MAX_TOKENS_KEY] = settings.max_tokens
        options = self._options(request)
        if self.CONFIG_MAX_TOKENS_KEY in options:
            raise SerializationError(
                f"{self.name}: settings options may not set reserved key(s) "
                f"[{self.CONFIG_MAX_TOKENS_KEY!r}] (max tokens come from the settings)"
            )
        for key in sorted(options):
            config[key] = options[key]
        out = Ordered()
        out[self.CONFIG_KEY] = config
        if request.instructions:
            out["systemInstruction"] = Ordered(parts=[Ordered(text=request.instructions)])
        if request.tools:
            declarations = [
                self.tool(spec, self.check_tool_spec(spec, i), i == len(request.tools) - 1, markers)
                for i, spec in enumerate(request.tools)
            ]
            out["tools"] = [Ordered(functionDeclarations=declarations)]
        return out

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        return Ordered(
            name=name,
            description=spec.description,
            parametersJsonSchema=spec.parameters_value,
        )

    def _options(self, request: ModelRequest) -> dict[str, Any]:
        """The original settings options (the frame builder sees them emptied)."""
        raw = self._settings(request).options
        try:
            options = canonical.loads(raw)
        except (CanonicalJSONError, ValueError) as err:
            raise SerializationError(
                f"{self.name}: settings options are not JSON ({err})"
            ) from None
        if not isinstance(options, dict):
            raise SerializationError(f"{self.name}: settings options must be a JSON object")
        return options

    # --------------------------------------------------------------------- messages

    def user_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._content(message, at)]

    def assistant_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._content(message, at)]

    def tool_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
        return [self._content(message, at)]

    def _content(self, message: CanonicalMessage, at: MessageAt) -> Ordered:
        return Ordered(role=self.ROLES[message.role], parts=self.parts(message, at))

    # ------------------------------------------------------------------------ parts

    def text_part(self, part: TextPart, at: PartAt) -> Any:
        if at.message.role == "tool":
            at.fail("gemini cannot express a text part in a tool_result message")
        out = Ordered(text=part.text)
        if part.thought_signature is not None:
            out["thoughtSignature"] = part.thought_signature
        return out

    def image_part(self, part: ImagePart, at: PartAt) -> Any:
        if at.message.role != "user":
            at.fail(f"gemini accepts images only in user messages, not {at.message.kind}")
        return Ordered(inlineData=Ordered(mimeType=part.media_type, data=part.data))

    def tool_call_part(self, part: ToolCallPart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(f"a tool call in a {at.message.kind} message")
        call = Ordered(
            id=part.call_id,
            name=self.tool_name(part.name, at),
            args=self.arguments_object(part, at),
        )
        out = Ordered(functionCall=call)
        if part.thought_signature is not None:
            out["thoughtSignature"] = part.thought_signature
        return out

    def tool_result_part(self, part: ToolResultPart, at: PartAt) -> Any:
        if at.message.role != "tool":
            at.fail(f"a tool result in a {at.message.kind} message")
        name = self._call_name(part.call_id, at.at.index)
        if name is None:
            at.fail(
                f"no earlier tool call with id {part.call_id!r} in this request "
                "(gemini needs its function name)"
            )
        response = Ordered(error=part.output) if part.is_error else Ordered(output=part.output)
        return Ordered(
            functionResponse=Ordered(
                id=part.call_id, name=self.tool_name(name, at), response=response
            )
        )

    def opaque_part(self, part: OpaquePart, at: PartAt) -> Any:
        value = self.own_opaque(part, at)
        if not isinstance(value, dict):
            at.fail("a gemini opaque part must be one Part object as received")
        return value

    # --------------------------------------------------------------- name lookup

    def _call_name(self, call_id: str, before: int) -> str | None:
        """The name of the latest tool call ``call_id`` in messages before ``before``."""
        for index in range(before - 1, -1, -1):
            message = self._messages[index]
            if message.kind is not MessageKind.ASSISTANT:
                continue
            for part in message.parts:
                if isinstance(part, ToolCallPart) and part.call_id == call_id:
                    return part.name
        return None

    def _result_names(self, message: CanonicalMessage, index: int) -> tuple[str | None, ...]:
        if message.kind is not MessageKind.TOOL_RESULT:
            return ()
        return tuple(
            self._call_name(part.call_id, index)
            for part in message.parts
            if isinstance(part, ToolResultPart)
        )
