"""Provider wire formats: serialization of a finished ModelRequest only.

The registry maps a provider name to its module lazily, so a wire format is imported
only when used (and modules may land independently)::

    from . import get
    body_bytes = get("anthropic").serialize(request)

Each :func:`get` returns a new :class:`~prefixlock.providers.base.Provider` instance; keep one per
conversation (or per process) to profit from its incremental encoding cache.
"""

from __future__ import annotations

import importlib

from ..core.errors import SerializationError
from ..core.names import hint
from .base import Provider

__all__ = ["MODULES", "NAMES", "Provider", "get"]

#: Provider name -> ``"module:Class"``, imported on first use.
MODULES: dict[str, str] = {
    "anthropic": ".anthropic:Anthropic",
    "bedrock-anthropic": ".bedrock_anthropic:BedrockAnthropic",
    "bedrock-converse": ".bedrock_converse:BedrockConverse",
    "gemini": ".gemini:Gemini",
    "openai-chat": ".openai_chat:OpenAIChat",
    "openai-responses": ".openai_responses:OpenAIResponses",
}

NAMES: tuple[str, ...] = (
    "anthropic",
    "bedrock-anthropic",
    "bedrock-converse",
    "gemini",
    "openai-chat",
    "openai-responses",
)


def get(name: str) -> Provider:
    """A new instance of the provider called ``name``; unknown names get a suggestion."""
    target = MODULES.get(name)
    if target is None:
        raise SerializationError(f"unknown provider {name!r} ({hint(name, NAMES, 'known')})")
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name, __name__), class_name)
    instance = cls()
    assert isinstance(instance, Provider)
    return instance
