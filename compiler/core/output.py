"""What a model sends back, provider-independent: :class:`ModelOutput` and :class:`Usage`.

A provider module reads a whole response or a stream into one :class:`ModelOutput`
(:mod:`prefixlock.providers.readers`); :meth:`Conversation.record
<prefixlock.runtime.conversation.Conversation.record>` appends it as the assistant message
and stores its usage beside the record. Parts are the canonical message parts, in the
order the model produced them:

* :class:`~prefixlock.core.messages.OpaquePart` -- provider-opaque blocks kept verbatim
  (thinking with its signature, redacted thinking, encrypted reasoning, a Gemini part
  with a thought signature, Bedrock ``reasoningContent``);
* :class:`~prefixlock.core.messages.TextPart` -- visible text;
* :class:`~prefixlock.core.messages.ToolCallPart` -- a call with its id, name and the
  argument string.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from . import canonical
from .errors import CanonicalJSONError
from .messages import OpaquePart, Part, TextPart, ToolCallPart

__all__ = ["ModelOutput", "Usage", "visible_text"]

_FIGURES = (
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "reasoning_tokens",
)


@attrs.frozen
class Usage:
    """Token counts of one model call; ``None`` where the provider reports no figure.

    ``input_tokens`` counts every prompt token, cached or not (providers that report
    uncached input only are converted: Anthropic and Bedrock add their cache reads and
    writes). ``raw`` is the provider's own usage object, as canonical JSON text.
    """

    input_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    raw: str = "{}"
    #: the provider that reported it (set when :meth:`Conversation.record` stores it)
    provider: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in _FIGURES}
        out["raw"] = canonical.loads(self.raw)
        out["provider"] = self.provider
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        figures = {name: data[name] for name in _FIGURES}
        for name, value in figures.items():
            if value is not None and (type(value) is not int or value < 0):
                raise ValueError(f"usage {name}: expected a count or null, got {value!r}")
        provider = data["provider"]
        if provider is not None and not isinstance(provider, str):
            raise ValueError(f"usage provider: expected a name or null, got {provider!r}")
        try:
            raw = canonical.dumps(data["raw"])
        except CanonicalJSONError as err:
            raise ValueError(f"usage raw: {err}") from None
        return cls(**figures, raw=raw, provider=provider)


def _visible(part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, OpaquePart):
        value = part.value
        if isinstance(value, dict) and value.get("type") == "text":
            text = value.get("text")
            return text if isinstance(text, str) else ""
    return ""


def visible_text(parts: tuple[Part, ...]) -> str:
    """The visible text of output parts, joined in model order (:attr:`ModelOutput.text`)."""
    return "".join(_visible(p) for p in parts)


@attrs.frozen
class ModelOutput:
    """One model call's output: parts in model order, why it stopped, what it cost."""

    provider: str
    parts: tuple[Part, ...]
    stop_reason: str | None = None
    usage: Usage | None = None
    #: the model the provider says answered (``None`` if it does not say)
    model: str | None = None
    #: the provider's id of this response (Anthropic ``msg_...``, OpenAI Chat
    #: ``chatcmpl-...``, Responses ``resp_...``, Gemini ``responseId``); ``None`` where the
    #: provider gives none (Bedrock Converse). :meth:`Conversation.record
    #: <prefixlock.runtime.conversation.Conversation.record>` is idempotent by it.
    response_id: str | None = None

    @property
    def text(self) -> str:
        """The visible text, joined in model order: the text parts, and the text of an
        opaque text block (an Anthropic ``text`` block with ``citations``, kept whole so
        it goes back verbatim)."""
        return visible_text(self.parts)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))

    @property
    def opaque(self) -> tuple[OpaquePart, ...]:
        return tuple(p for p in self.parts if isinstance(p, OpaquePart))
