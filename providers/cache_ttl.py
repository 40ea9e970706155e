"""The cache TTL setting shared by the wires with explicit cache markers (Anthropic
``cache_control``, Bedrock ``cachePoint``).

``cache_ttl`` is prefixlock's own settings option, set per agent in
``rules/providers.yaml`` (``options: {cache_ttl: 1h}``) and never sent as a body key.
``"5m"`` (five minutes) is the services' default and prefixlock's: with it, or without
the option, markers carry no ``ttl`` member, so bodies stay byte-identical to before the
option existed. ``"1h"`` adds ``"ttl": "1h"`` to every marker:

* Anthropic: ``cache_control: {"type": "ephemeral", "ttl": "1h"}`` (Messages API,
  ``CacheControlEphemeralParam.ttl``: ``"5m"`` or ``"1h"``, "Defaults to ``5m``";
  prompt caching guide, "1-hour cache duration");
* Bedrock Converse: ``cachePoint: {"type": "default", "ttl": "1h"}`` (botocore
  ``bedrock-runtime`` service model, ``CachePointBlock.ttl``, enum ``5m`` / ``1h``).

``"auto"`` (``"turn"``, its earlier name, is accepted and means the same) puts a one-hour
marker where the conversation is likely to pause and five-minute ones inside tool loops,
mixing the two in one body (Anthropic, "Mixing different TTLs": longer TTLs
must come before shorter ones; the quotations are in :mod:`prefixlock.cache.rules`):

* on a turn's first call, a one-hour marker on the previous turn's opening message as
  well (its entry is the one a pause leaves, and it lies beyond the 20-block lookback of
  the new turn's marker once a tool loop ran in between);
* from the conversation's second user turn on, and on every turn after a compaction (the
  first turn's write holds the whole root;
  a one-hour write of it costs 0.75x more for a conversation that never pauses five
  minutes, so the first turn's bodies are the five-minute ones), a one-hour marker at
  the end of the **latest user-role message** (the one that opens
  the current turn: its runtime message, an event, a summary; never a tool result), the
  prefix every later call of the turn and the next turn's first call can read;
* the markers before it one-hour too (the ordering rule): the stable root gets **one**
  (the system block; the last tool when there are no instructions), the latest request
  context its usual one;
* the moving tail marker (Anthropic's top-level ``cache_control``, Bedrock's last
  ``cachePoint``) stays five-minute (no ``ttl``); when the tail *is* the turn's message
  (a turn's first call) that one marker is the one-hour turn marker.

So a body carries at most 4 markers (root, context, turn, tail; on a turn's first call
root, context, previous turn, turn). Why: with short gaps a
one-hour write covers only what the turn added since the previous call's five-minute
hit; across a gap longer than five minutes the previous turn's one-hour entry is still
there, so a turn rewrites only the last turn, not the whole history.

The cache simulator prices one-hour writes at 2x the base input price and five-minute
ones at 1.25x, and bills a mixed body by the A / B / C rule
(:mod:`prefixlock.cache.simulator`).
"""

from __future__ import annotations

import functools
from collections.abc import Hashable, Mapping
from typing import Any, ClassVar

from ..core import canonical
from ..core.errors import CanonicalJSONError, SerializationError
from ..core.limits import CACHE_TTL_OPTION
from ..core.messages import MessageKind
from ..core.model import CachePosition, ModelRequest, ProviderSettings

#: The settings option (never sent).
OPTION = CACHE_TTL_OPTION
#: The accepted values; the first is the default (no ``ttl`` member on the wire).
#: ``turn`` is the earlier name of ``auto`` (issue 15), still accepted: it means ``auto``.
VALUES = ("5m", "1h", "auto", "turn")
#: The values a policy table reports (``turn`` is ``auto``).
POLICIES = ("5m", "1h", "auto")
#: The ``ttl`` of a one-hour marker.
ONE_HOUR = "1h"
#: The mixed policy (see the module docstring).
AUTO = "auto"
TURN = AUTO
#: Earlier names of a value -> the value.
ALIASES = {"turn": AUTO}

Markers = frozenset[CachePosition]

#: Message kinds before the latest user message that make it a later turn (``auto``): an
#: earlier turn's runtime message, or the summary of a compaction.
_EARLIER_TURN = frozenset({MessageKind.RUNTIME, MessageKind.SUMMARY})
#: The message positions that carry a one-hour marker with ``cache_ttl: turn``.
_TURN_LONG = frozenset({CachePosition.CONTEXT, CachePosition.TURN})


def cache_ttl(provider: str, options: Mapping[str, Any]) -> str | None:
    """The agent's TTL policy: ``None`` for the default (5 minutes), ``"1h"`` or
    ``"auto"`` (also for its earlier name ``"turn"``)."""
    value = options.get(OPTION, VALUES[0])
    if not isinstance(value, str) or value not in VALUES:
        raise SerializationError(
            f"{provider}: settings option {OPTION!r} must be one of {list(VALUES)}, not {value!r}"
        )
    value = ALIASES.get(value, value)
    return None if value == VALUES[0] else value


@functools.lru_cache(maxsize=256)
def _policy_of(provider: str, options: str) -> str | None:
    try:
        value = canonical.loads(options)
    except (CanonicalJSONError, ValueError):
        return None  # the frame builder refuses it with its own error
    return cache_ttl(provider, value) if isinstance(value, dict) else None


def active_policy(policy: Hashable, frame: Markers) -> Hashable:
    """The policy a body with these frame positions follows: ``auto`` only where
    :func:`place_turn_markers` placed a turn marker, else the five-minute default."""
    if policy == TURN and CachePosition.TURN not in frame:
        return None
    return policy


def frame_ttl(policy: Hashable) -> str | None:
    """The ``ttl`` of the stable root's markers (tools, system)."""
    return ONE_HOUR if policy in (ONE_HOUR, TURN) else None


def tail_ttl(policy: Hashable) -> str | None:
    """The ``ttl`` of Anthropic's top-level (tail) marker: five minutes with ``auto``."""
    return ONE_HOUR if policy == ONE_HOUR else None


def message_ttl(policy: Any, markers: Markers) -> str | None:
    """The ``ttl`` of the marker on a message with these cache positions."""
    if policy == ONE_HOUR or (policy == TURN and markers & _TURN_LONG):
        return ONE_HOUR
    return None


def place_turn_markers(
    provider: str,
    request: ModelRequest,
    options: str,
    frame: Markers,
    per_message: dict[int, Markers],
    *,
    tail_in_frame: bool,
) -> tuple[Markers, dict[int, Markers]]:
    """With ``cache_ttl: auto`` (or ``turn``; in the settings' ``options`` JSON) from the epoch's
    second user turn on, the positions of the module docstring: one root marker,
    :attr:`CachePosition.TURN` on the latest user-role message and in the frame's
    positions (the body mixes TTLs: :func:`active_policy`), and (``tail_in_frame``:
    Anthropic's top-level marker) no separate tail marker when the turn's message is the
    last. Otherwise the positions given (the five-minute body)."""
    if _policy_of(provider, options) != TURN:
        return frame, per_message
    messages = request.messages
    turn = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)
    # The conversation's first user turn stays five-minute: its write holds the whole
    # root and context, and a one-hour write of it costs 0.75x more on every conversation
    # that never pauses for five minutes (most: the golden cases). From the second turn
    # on, a turn's one-hour write is what the conversation added since the last hit. A
    # compacted history (it holds a summary) is not a first turn: the conversation has
    # run long enough to be compacted, and its new history is written again whole, so a
    # pause after it would cost all of it (the long-session case's call 28 was cold).
    if turn is None or not any(messages[i].kind in _EARLIER_TURN for i in range(turn - 1, -1, -1)):
        return frame, per_message
    frame = frame | {CachePosition.TURN}  # this body mixes TTLs (active_policy)
    if request.instructions and CachePosition.INSTRUCTIONS in frame:
        frame = frame - {CachePosition.TOOLS}  # the system marker's prefix holds the tools
    per_message = dict(per_message)
    per_message[turn] = per_message.get(turn, frozenset()) | {CachePosition.TURN}
    if turn == len(messages) - 1:
        if tail_in_frame:
            frame = frame - {CachePosition.TAIL}  # the turn marker sits on the last block
        # A turn's first call also marks the previous turn's opening message: its
        # one-hour entry is what survives a pause, and it lies more than the 20-block
        # lookback behind the new turn's marker once a tool loop ran in between (the
        # lookback rule: prefixlock.cache.rules.LOOKBACK_BLOCKS), so without a marker of
        # its own the pause would cost the whole history after the context again.
        previous = next(
            (
                i
                for i in range(turn - 1, -1, -1)
                if messages[i].role == "user"
                and messages[i].kind is not MessageKind.REQUEST_CONTEXT
            ),
            None,
        )
        if previous is not None:
            per_message[previous] = per_message.get(previous, frozenset()) | {CachePosition.TURN}
    return frame, per_message


class TurnMarkers:
    """Mixin of a wire with explicit cache markers (before :class:`~.base.Provider` in
    the bases): its ``place_markers`` hook is :func:`place_turn_markers`."""

    name: ClassVar[str]
    #: Whether the wire's moving tail marker is a frame position (Anthropic's top-level
    #: ``cache_control``) rather than a block of the last message (Bedrock's).
    TAIL_IN_FRAME: ClassVar[bool]

    def place_markers(
        self,
        request: ModelRequest,
        settings: ProviderSettings,
        frame: Markers,
        per_message: dict[int, Markers],
    ) -> tuple[Markers, dict[int, Markers]]:
        return place_turn_markers(
            self.name,
            request,
            settings.options,
            frame,
            per_message,
            tail_in_frame=self.TAIL_IN_FRAME,
        )


def without_ttl_option(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options to send: all but :data:`OPTION`."""
    return {k: v for k, v in options.items() if k != OPTION}
