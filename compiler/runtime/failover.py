"""One model call on another provider or model: failover without touching the history.

:meth:`Conversation.request(provider=..., model=...)
<prefixlock.runtime.conversation.Conversation.request>` and ``conv.call(client,
model=...)`` build one call for a target that is not the one the history's answers came
from. The history never changes: what this module rewrites is that call's
:class:`ModelRequest` only (a pure request -> request step before serialization, so no
provider module learns about failover). The target provider must be configured in the
conversation's root (its ``max_tokens`` and options are used); ``model`` replaces its
model for this call.

One rule per part kind, for a part that the target did not produce:

1. **Text, tool calls, tool results, images** are provider-independent parts: kept. (A
   Gemini ``thought_signature`` on a text or call part is left out by every other wire
   already, by its fixed rule.)
2. **Claude thinking with its signature** (an Anthropic or ``bedrock-anthropic``
   ``thinking`` block, a Bedrock Converse ``reasoningContent.reasoningText`` with a
   ``signature``) is kept, in the target's own block shape, when the target is Claude:
   ``anthropic``, ``bedrock-anthropic`` (InvokeModel with the Claude Messages body), or
   ``bedrock-converse`` with a Claude model id (``anthropic.claude-...``, with or without
   a cross-region prefix or an ARN). Source: Anthropic, *Building with extended
   thinking*, "signature values are compatible across platforms (Claude APIs, Amazon
   Bedrock, and Vertex AI). Values generated on one platform will be compatible with
   another." (https://platform.claude.com/docs/en/build-with-claude/extended-thinking)
3. **An Anthropic text block kept opaque** (a ``text`` block with ``citations``) becomes
   its visible text: the words stay, the citation metadata only goes back to Anthropic.
4. **Every other provider-opaque part** (redacted thinking, whose bytes the two Claude
   wires encode differently and no document maps; OpenAI encrypted reasoning; Gemini
   thought parts; Bedrock reasoning of a non-Claude model; Claude thinking to a
   non-Claude target) is dropped from this call's body: only the provider that made it
   can read it. Anthropic documents that thinking blocks of earlier turns may be
   omitted; an assistant message left with no part is left out of the call.

By target (tests/test_failover.py pins the exact bodies): to **Gemini**, Claude thinking
(signed or redacted) and OpenAI encrypted reasoning are left out; a Claude signature is
never sent as a ``thoughtSignature``, which only Gemini's own parts carry back to Gemini.
To **Claude** (either wire), Gemini's thought parts and the ``thoughtSignature`` of its
text and call parts are left out, OpenAI encrypted reasoning too. To **OpenAI**, every
other provider's opaque part is left out. To **Gemini 3 and later**, which refuse a step
of the current turn whose first ``functionCall`` has no ``thoughtSignature`` ("Function
call is missing a thought_signature in functionCall parts", HTTP 400;
https://ai.google.dev/gemini-api/docs/thought-signatures, whose FAQ gives a dummy
signature for calls another model made), another provider's calls get that dummy on the
first call of each step: the Gemini wire writes it (:mod:`prefixlock.providers.gemini`,
``SKIP_SIGNATURE``), keyed by the model, so the rule holds on every path that sends a
Gemini body (a failover, a model switch, a replayed scenario) and never touches the
history; it is sent on every turn so that a call's bytes do not change when its turn
ends.

A switch of provider or model is a cache reset: no provider shares cache entries across
providers or models (each (provider, model) is its own namespace in
:mod:`prefixlock.cache.simulator`, which keys by the body's model).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..core import canonical
from ..core.errors import UnknownNameError
from ..core.messages import CanonicalMessage, OpaquePart, Part, TextPart
from ..core.model import CacheHint, ModelRequest, ProviderSettings
from ..core.names import hint

__all__ = ["is_claude", "opaque_providers", "retarget"]

#: The wires whose opaque reasoning can carry a Claude thinking signature.
_CLAUDE_WIRES = frozenset({"anthropic", "bedrock-anthropic", "bedrock-converse"})
#: The Claude wires whose thinking blocks have the Messages API's shape.
_MESSAGES_WIRES = frozenset({"anthropic", "bedrock-anthropic"})


def is_claude(provider: str, model: str) -> bool:
    """Whether ``model`` on ``provider`` is a Claude model (rule 2's target)."""
    if provider in _MESSAGES_WIRES:  # bedrock-anthropic: InvokeModel's Claude body
        return True
    # Bedrock model ids: anthropic.claude-..., us.anthropic.claude-..., or an ARN ending
    # in one (https://docs.aws.amazon.com/bedrock/latest/userguide/models-supported.html).
    return provider == "bedrock-converse" and "anthropic.claude" in model


def _thinking(part: OpaquePart) -> tuple[str, str] | None:
    """(text, signature) of a Claude thinking block of either Claude wire, else None."""
    value = part.value
    if not isinstance(value, dict):
        return None
    if part.provider in _MESSAGES_WIRES and value.get("type") == "thinking":
        text, signature = value.get("thinking"), value.get("signature")
    elif part.provider == "bedrock-converse":
        reasoning = value.get("reasoningContent")
        inner = reasoning.get("reasoningText") if isinstance(reasoning, dict) else None
        if not isinstance(inner, dict):
            return None
        text, signature = inner.get("text"), inner.get("signature")
    else:
        return None
    if isinstance(text, str) and isinstance(signature, str) and signature:
        return text, signature
    return None


def _carried(part: Part, target: str, model: str) -> Part | None:
    """``part`` as the target takes it (rules 1-4), or None to drop it."""
    if not isinstance(part, OpaquePart) or part.provider == target:
        return part
    value = part.value
    if part.provider in _MESSAGES_WIRES and isinstance(value, dict) and value.get("type") == "text":
        text = value.get("text")
        return TextPart(text) if isinstance(text, str) and text.strip() else None
    thinking = _thinking(part) if part.provider in _CLAUDE_WIRES else None
    if thinking is None or not is_claude(target, model):
        return None
    text, signature = thinking
    block: dict[str, object]
    if target in _MESSAGES_WIRES:
        block = {"type": "thinking", "thinking": text, "signature": signature}
    else:
        block = {"reasoningContent": {"reasoningText": {"text": text, "signature": signature}}}
    return OpaquePart(target, canonical.dumps(block))


def _settings(
    settings: tuple[ProviderSettings, ...], provider: str, model: str | None
) -> tuple[ProviderSettings, ...]:
    names = [s.provider for s in settings]
    if provider not in names:
        raise UnknownNameError(
            f"provider {provider!r} is not configured for this conversation "
            f"({hint(provider, names, 'configured providers')})"
        )
    if model is None:
        return settings
    return tuple(attrs.evolve(s, model=model) if s.provider == provider else s for s in settings)


def opaque_providers(messages: Sequence[CanonicalMessage]) -> set[str]:
    """The providers whose opaque parts ``messages`` hold."""
    return {p.provider for m in messages for p in m.parts if isinstance(p, OpaquePart)}


def retarget(
    request: ModelRequest,
    provider: str,
    model: str | None = None,
    *,
    opaque: set[str] | None = None,
) -> ModelRequest:
    """``request`` for one call on ``provider`` (and ``model``): settings and the parts
    the target did not produce, by the module's rules. The same request object when
    nothing changes, so an ordinary call keeps its cached fragments. ``opaque``: the
    :func:`opaque_providers` of the request's messages, when the caller keeps them (a
    call then reads no message to know that nothing is foreign)."""
    settings = _settings(request.settings, provider, model)
    target_model = next(s.model for s in settings if s.provider == provider)
    if opaque is None:
        opaque = opaque_providers(request.messages)
    foreign = bool(opaque - {provider})
    if not foreign:
        if settings is request.settings:
            return request
        return attrs.evolve(request, settings=settings)
    messages: list[CanonicalMessage] = []
    moved: dict[int, int] = {}  # old index -> new index (of the message kept at or before)
    for index, message in enumerate(request.messages):
        parts = [_carried(p, provider, target_model) for p in message.parts]
        kept = tuple(p for p in parts if p is not None)
        if kept:
            if len(kept) != len(message.parts) or any(
                a is not b for a, b in zip(kept, message.parts, strict=False)
            ):
                message = CanonicalMessage.create(message.id, message.kind, message.role, kept)
            messages.append(message)
        moved[index] = len(messages) - 1
    hints = _hints(request.cache_hints, moved)
    return attrs.evolve(request, settings=settings, messages=tuple(messages), cache_hints=hints)


def _hints(hints: Sequence[CacheHint], moved: dict[int, int]) -> tuple[CacheHint, ...]:
    out: list[CacheHint] = []
    for item in hints:
        if item.message_index is None:
            out.append(item)
        elif moved.get(item.message_index, -1) >= 0:
            out.append(attrs.evolve(item, message_index=moved[item.message_index]))
    return tuple(out)
