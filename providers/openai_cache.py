"""OpenAI prompt-cache settings shared by Chat Completions and Responses (issue 45, items 2
and 3): explicit breakpoints on GPT-5.6 and later, ``cache_ttl`` as retention before it.

**Breakpoints** (a model of :data:`~prefixlock.core.limits.OPENAI_BREAKPOINT_MODELS`):
``{"prompt_cache_breakpoint": {"mode": "explicit"}}`` on the last text or image part of a
message, the shape of openai-python 3.63.0's ``PromptCacheBreakpoint`` (Chat
``ChatCompletionContentPartTextParam`` / ``...ImageParam``; Responses
``ResponseInputTextParam`` / ``ResponseInputImageParam``; the rules and their sources are
in :mod:`prefixlock.cache.rules`). They go where the Anthropic markers go, under the same
``cache_ttl`` policy (:mod:`.cache_ttl`):

* the stable root: the developer message (INSTRUCTIONS; tools cannot carry one, and
  the developer message's prefix holds them): Chat's first message; on Responses the
  first input item, which carries the instructions on these models instead of the
  top-level ``instructions`` string (that string has no part to mark);
* the latest request-context message (CONTEXT);
* ``auto`` from the epoch's second user turn: the turn's opening message and, on a turn's
  first call, the previous turn's (TURN);
* the moving tail is OpenAI's own implicit breakpoint ("near the latest user or tool
  message"): no marker, ``prompt_cache_options`` left at its default mode ``implicit``.
  The TAIL position in a frame's positions says that the body carries breakpoints.

At most four explicit breakpoints, the most a request writes. TTLs: ``cache_ttl`` ``5m``
(the default) sends no ``ttl`` (the request's default, ``30m``); a one-hour marker of the
policy is ``"ttl": "12h"``, OpenAI's longer lifetime (``1h`` maps every breakpoint to it,
``auto`` the root, context and turn ones). With ``1h`` a Responses body also sends
``prompt_cache_options: {"ttl": "12h"}`` so the implicit tail breakpoint lives as long
(Chat's request ``ttl`` takes ``30m`` only: its tail stays 30 minutes). On these models a
user-role message's content is always a list of parts, so adding or moving a breakpoint
changes no content, only the marker member (a single text is otherwise sent as a string).

**Retention** (a model without breakpoints): ``cache_ttl`` maps onto
``prompt_cache_retention`` (:func:`~prefixlock.core.limits.openai_retention`: ``5m`` ->
``in_memory`` where the model has the choice, ``1h`` / ``auto`` -> ``24h``); an explicit
``prompt_cache_retention`` option that says otherwise is refused. ``cache_ttl`` itself is
never sent.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from ..core.canonical import Ordered
from ..core.limits import openai_breakpoints, openai_retention
from ..core.model import CachePosition, ModelRequest, ProviderSettings
from .base import Markers, MessageAt
from .cache_ttl import (
    ONE_HOUR,
    OPTION,
    active_policy,
    cache_ttl,
    frame_ttl,
    message_ttl,
    place_turn_markers,
    without_ttl_option,
)

#: The content-part member of an explicit breakpoint.
BREAKPOINT_KEY = "prompt_cache_breakpoint"
#: The request-level cache options member.
OPTIONS_KEY = "prompt_cache_options"
#: OpenAI's longer breakpoint lifetime: what the policy's one-hour markers ask for.
LONG_TTL = "12h"
#: The body member named by ``cache_ttl`` on a model without breakpoints.
RETENTION_KEY = "prompt_cache_retention"
#: The message variant of a body without breakpoints.
OFF = "no-breakpoints"


def breakpoint_marker(ttl: str | None) -> Ordered:
    """A breakpoint; ``ttl`` a policy TTL (``"1h"``: OpenAI's ``12h``; None: none)."""
    out = Ordered(mode="explicit")
    if ttl == ONE_HOUR:
        out["ttl"] = LONG_TTL
    return out


class OpenAICache:
    """Mixin of the two OpenAI wires (before :class:`~.base.Provider` in the bases)."""

    name: ClassVar[str]
    CACHE_POSITIONS: ClassVar[Markers] = frozenset(
        {CachePosition.INSTRUCTIONS, CachePosition.CONTEXT, CachePosition.TAIL}
    )
    MESSAGE_MARKERS: ClassVar[Markers] = frozenset({CachePosition.CONTEXT, CachePosition.TURN})
    #: Content part ``type``s that take a breakpoint.
    BREAKPOINT_PARTS: ClassVar[frozenset[str]]

    def place_markers(
        self,
        request: ModelRequest,
        settings: ProviderSettings,
        frame: Markers,
        per_message: dict[int, Markers],
    ) -> tuple[Markers, dict[int, Markers]]:
        if not openai_breakpoints(settings.model):
            return frozenset(), {}
        frame, per_message = place_turn_markers(
            self.name, request, settings.options, frame, per_message, tail_in_frame=False
        )
        return frame | {CachePosition.TAIL}, per_message

    def frame_variant(self, options: Mapping[str, Any], markers: Markers) -> Hashable:
        """The wire's own message variant and the breakpoint policy (:meth:`cache_variant`)."""
        own = super().frame_variant(options, markers)  # type: ignore[misc]
        return (own, self.cache_variant(options, markers))

    def cache_variant(self, options: Mapping[str, Any], markers: Markers) -> Hashable:
        """The breakpoint policy of a body (:data:`OFF` without breakpoints)."""
        policy = cache_ttl(self.name, options)  # refuses a bad value on every model
        if CachePosition.TAIL not in markers:
            return OFF
        return active_policy(policy, markers)

    def cache_trail(self, settings: ProviderSettings, options: Mapping[str, Any]) -> Ordered:
        """The trail members the cache settings add: Responses' ``prompt_cache_options``
        under ``1h`` (:attr:`REQUEST_TTL`), or the retention ``cache_ttl`` names."""
        out = Ordered()
        value = options.get(OPTION)
        if value is None:
            return out
        if openai_breakpoints(settings.model):
            if cache_ttl(self.name, options) == ONE_HOUR and self.REQUEST_TTL:
                out[OPTIONS_KEY] = Ordered(ttl=LONG_TTL)
            return out
        # the frame checked the value and settings_problems the combination first
        retention = openai_retention(settings.model, str(value))
        if retention is not None and RETENTION_KEY not in options:
            out[RETENTION_KEY] = retention
        return out

    #: Whether the request-level ``ttl`` takes ``12h`` (Responses; Chat: ``30m`` only).
    REQUEST_TTL: ClassVar[bool] = False

    def sent_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The options sent as body members: all but ``cache_ttl``."""
        return without_ttl_option(options)

    def mark_parts(self, parts: list[Any], at: MessageAt) -> list[Any]:
        """``parts`` with a breakpoint on the last one that takes it, where the message
        is marked (:attr:`MESSAGE_MARKERS`) in a body with breakpoints."""
        variant = at.variant
        policy = variant[-1] if isinstance(variant, tuple) and variant else OFF
        if policy == OFF or not at.markers & self.MESSAGE_MARKERS:
            return parts
        for part in reversed(parts):
            if isinstance(part, dict) and part.get("type") in self.BREAKPOINT_PARTS:
                part[BREAKPOINT_KEY] = breakpoint_marker(message_ttl(policy, at.markers))
                break
        return parts

    def root_breakpoint(self, markers: Markers, options: Mapping[str, Any]) -> Ordered | None:
        """The developer message's breakpoint, if the frame marks the root."""
        if CachePosition.TAIL not in markers or CachePosition.INSTRUCTIONS not in markers:
            return None
        return breakpoint_marker(frame_ttl(active_policy(cache_ttl(self.name, options), markers)))

    def strip_openai_markers(self, out: dict[str, Any], history: str) -> dict[str, Any]:
        """``out`` (a copy) without breakpoints and ``prompt_cache_options``."""
        out.pop(OPTIONS_KEY, None)
        for item in out.get(history) or ():
            content = item.get("content") if isinstance(item, dict) else None
            if isinstance(content, list):
                for part in content:
                    if isinstance(part, dict):
                        part.pop(BREAKPOINT_KEY, None)
        return out
