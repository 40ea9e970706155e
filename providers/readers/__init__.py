"""Reading what the model sends back: one :class:`~.base.Reader` per provider.

``reader(name)`` returns the reader of a provider; the provider objects of
:func:`prefixlock.providers.get` expose the same methods (``parse_response``,
``stream_reader``, ``is_retryable``).
"""

from __future__ import annotations

import importlib

from ...core.errors import SerializationError
from .base import Reader, StreamReader

__all__ = ["ENDPOINT_MODULES", "MODULES", "Reader", "StreamReader", "reader"]

#: Provider name -> ``"module:Class"`` of its reader, imported on first use.
MODULES: dict[str, str] = {
    "anthropic": ".anthropic:AnthropicReader",
    "bedrock-anthropic": ".bedrock_anthropic:BedrockAnthropicReader",
    "bedrock-converse": ".bedrock_converse:BedrockConverseReader",
    "gemini": ".gemini:GeminiReader",
    "openai-chat": ".openai_chat:OpenAIChatReader",
    "openai-responses": ".openai_responses:OpenAIResponsesReader",
}

#: (provider, endpoint) -> the reader of a provider's other endpoint
#: (:attr:`prefixlock.providers.transport.HttpRequest.endpoint`).
ENDPOINT_MODULES: dict[tuple[str, str], str] = {
    ("bedrock-anthropic", "mantle"): ".bedrock_anthropic:BedrockMantleReader",
}


def reader(name: str, endpoint: str = "") -> Reader:
    """The response reader of provider ``name`` (of its ``endpoint``, ``""``: the
    default one)."""
    target = ENDPOINT_MODULES.get((name, endpoint)) if endpoint else MODULES.get(name)
    if target is None:
        where = f" endpoint {endpoint!r}" if endpoint else ""
        raise SerializationError(f"provider {name!r}{where} has no response reader yet")
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name, __name__), class_name)
    instance = cls()
    assert isinstance(instance, Reader)
    return instance
