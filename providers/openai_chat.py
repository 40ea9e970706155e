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
"""

from __future__ import annotations

import re
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
from ..core.model import ModelRequest, ProviderSettings, ToolSpec
from .base import Markers, MessageAt, PartAt, Provider


class OpenAIChat(Provider):
    name: ClassVar[str] = "openai-chat"

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
        return [Ordered(role=self.INSTRUCTIONS_ROLE, content=request.instructions)]

    def tool(self, spec: ToolSpec, name: str, last: bool, markers: Markers) -> Any:
        return Ordered(
            type="function",
            function=Ordered(
                name=name, description=spec.description, parameters=spec.parameters_value
            ),
        )

    def trail(self, request: ModelRequest, settings: ProviderSettings, markers: Markers) -> Ordered:
        return Ordered(prompt_cache_key=request.cache_key)

    # --------------------------------------------------------------------- messages

    def user_message(self, message: CanonicalMessage, at: MessageAt) -> list[Any]:
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
        return self.parts(message, at)

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
        # the media type: one of OPENAI_IMAGE_TYPES (images-vision guide; see data_url)
        return Ordered(type="image_url", image_url=Ordered(url=self.data_url(part, at)))

    def tool_call_part(self, part: ToolCallPart, at: PartAt) -> Any:
        if at.message.role != "assistant":
            at.fail(f"a tool call in a {at.message.kind} message")
        self.arguments_object(part, at)
        return Ordered(
            id=part.call_id,
            type="function",
            function=Ordered(name=self.tool_name(part.name, at), arguments=part.arguments),
        )

    def tool_result_part(self, part: ToolResultPart, at: PartAt) -> Any:
        if at.message.role != "tool":
            at.fail(f"a tool result in a {at.message.kind} message")
        return Ordered(role="tool", tool_call_id=part.call_id, content=part.output)

    def opaque_part(self, part: OpaquePart, at: PartAt) -> Any:
        if at.message.role == "tool":
            at.fail("openai-chat cannot express an opaque part in a tool_result message")
        return self.own_opaque(part, at)
