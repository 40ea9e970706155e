"""Prompt-cache simulation over exact provider request bodies.

:func:`simulate` replays a conversation's request bodies (the bytes that would be
POSTed, cache markers included) against each provider's *documented* caching rules and
reports, per call and in total, how many input tokens were read from the cache, written
to it, and what that costs relative to sending everything uncached. It is what makes
``prefixlock verify``'s cost column honest: a prefix break, a marker in the wrong place
or a prompt below the minimum shows up as cache misses.

The model
---------
A body is cut into **blocks** in the provider's processing order (one block per tool
definition, system block, message content block or history item; see ``_LAYOUTS``).
A block's identity is its canonical JSON without cache markers, tagged with where it
sits (section, role, position inside its message), and a *prefix* is identified by the
chain hash of its blocks; a block's tokens are counted by :mod:`prefixlock.cache.tokens`
(default: UTF-8 bytes / 4 of its canonical JSON). Matching is block-granular: a
partially equal block counts as a miss from its start (real caches match tokens; this
errs on the side of fewer hits). Nothing is evicted for lack of space.

**Expiry** (issue 15, item 4): a call may carry its time (:meth:`Simulation.add`'s
``at``, seconds; verify passes the scenario's timestamps). A cache entry lives for the
TTL from the last call that wrote or read it (the rules' ``ttl``: 5 minutes,
:data:`~prefixlock.cache.rules.DEFAULT_TTL`, but 30 minutes from OpenAI's GPT-5.6;
OpenAI's by the body's ``prompt_cache_retention`` before it;
:data:`~prefixlock.cache.rules.ONE_HOUR_TTL_SECONDS` for an entry whose marker carries
``ttl: 1h``: each explicit entry keeps the TTL of the marker that wrote it, and a read
refreshes it for that TTL); a later call finds it only within that time. A call without a time
arrives at the previous call's time (tool results follow the turn that asked for them);
while no call has a time, nothing expires (the behaviour before timestamps).

* **Explicit** caches (Anthropic, Bedrock): a call may *read* the longest cached prefix
  found by checking, from each breakpoint backwards, :data:`LOOKBACK_BLOCKS` block
  boundaries (the breakpoint's own block is the first check; every tool definition,
  system block and message content block is one block); it *writes* a cache entry at
  every breakpoint whose prefix reaches the model's minimum, paying the write price for
  the tokens beyond what it read up to its last such breakpoint; with markers of both
  TTLs, the tokens from the read up to the highest one-hour breakpoint at the one-hour
  price, the rest at the five-minute one (Anthropic's A / B / C). More than
  :data:`MAX_BREAKPOINTS` breakpoints, or a one-hour marker after a five-minute one, is
  an API error.
* **Implicit** caches (OpenAI, Gemini): a call reads the longest prefix (at a block
  boundary) that an earlier call of the same cache namespace sent, if it reaches the
  minimum, rounded down to the provider's increment; the rest of a cacheable prompt is
  written at the write price (the normal input price unless documented otherwise).
* **Gemini explicit cache** (a body naming ``cachedContent``; issue 10, item 3): the
  named cache holds the stable root (its ``cachedContents`` create body, passed as
  ``cached_contents``); its tokens count as input of every call that names it, written
  (at the normal input price: creating a cache is billed as input) by the first such
  call and read at the cache price by every later one. A call that creates it also
  pays its storage for the cache's whole life (tokens x hours x the rules'
  ``storage_per_hour``, :data:`~prefixlock.cache.rules.GEMINI_STORAGE_PER_HOUR`;
  :attr:`CallCache.cache_storage_token_hours`); the perfect-cache bound has none.
  With call times, the cache expires its create body's ``ttl`` after that first call
  (default :data:`~prefixlock.cache.rules.GEMINI_EXPLICIT_TTL`, an hour; reads do not
  extend it), or at its ``expireTime``; the first call after that writes it again, as
  a deployment re-creates it. A caller whose root changes names the new body
  (:meth:`Simulation.name_cache`): the next call writes it again.

**The floor** (``Simulation(..., floor=True)``): the same bodies, times and lifetimes
under an ideal placement of cache markers: every prefix of every call is cached (at block
boundaries, no breakpoint limit, no lookback window: implicit matching for every
provider), still subject to the service's minimum and increment, and a token not read
costs, where markers choose what is written (the explicit caches), the lower of the write
price and the base price; an implicit cache writes every cacheable token at its write
price (1.25x from OpenAI's GPT-5.6), markers or not. By induction over the calls its
live entries include every entry any marker placement could keep alive (each lives as
long, from the same calls), the minimum and increment only round a longer match down
further, and a read costs less than either way of sending a token: no call of the real
simulation costs less than its floor. So the floor is what the service's rules leave
unavoidable for these bodies with these settings; for the implicit caches (OpenAI,
Gemini) it is the simulated cost itself, for the explicit ones the rest is where the
markers sit (``prefixlock bench``'s long-session figures).

Costs are in *base input-token units*: an uncached input token costs 1, a cache read
``read_multiplier``, a cache write ``write_multiplier`` (per model family; the documented
parameters and their sources are in :mod:`prefixlock.cache.rules`).
Output tokens are not simulated.
"""

from __future__ import annotations

import copy
import hashlib
import math
import re
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs

from ..core import canonical
from ..core.bodyscan import HistoryScanner, Scan
from ..core.errors import CacheSimulationError, UnknownNameError, UsageError
from ..core.fragments import Body, common_prefix
from ..core.limits import BEDROCK_WIRES, one_hour_ttl_refusal
from ..core.timestamps import seconds, stamp_problem
from .rules import (
    DEFAULT_TTL,
    FIVE_MINUTE_TTL,
    GEMINI_EXPLICIT_TTL,
    LOOKBACK_BLOCKS,
    MAX_BREAKPOINTS,
    ONE_HOUR_TTL,
    OPENAI_BREAKPOINT_TTL,
    OPENAI_WRITTEN_EXPLICIT,
    RETENTION_OPTION,
    CacheRules,
    rules_for,
)
from .tokens import Tokenizer, get_tokenizer

__all__ = [
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "CacheReport",
    "CacheRules",
    "CacheTotals",
    "CallCache",
    "PerfectBound",
    "Simulation",
    "rules_for",
    "simulate",
]

# --- body layouts: blocks in processing order -----------------------------------------


@attrs.frozen
class Block:
    """One block of a body: its identity (tag + canonical JSON), whether a cache
    breakpoint ends at it, and whether that breakpoint asks for a one-hour entry
    (``"ttl": "1h"``)."""

    tag: tuple[Any, ...]
    value: Any
    breakpoint: bool = False
    one_hour: bool = False


_CACHE_CONTROL = "cache_control"


def _ttl(marker: Any) -> str:
    """The TTL a cache marker object asks for: its ``ttl``, else the 5-minute default."""
    ttl = marker.get("ttl") if isinstance(marker, Mapping) else None
    return ONE_HOUR_TTL if ttl == ONE_HOUR_TTL else FIVE_MINUTE_TTL


def _marked(block: Block, ttl: str) -> Block:
    """``block`` with a breakpoint of ``ttl`` (a block marked twice keeps the longer)."""
    return attrs.evolve(block, breakpoint=True, one_hour=block.one_hour or ttl == ONE_HOUR_TTL)


def _without(value: Any, key: str) -> tuple[Any, str | None]:
    """``value`` without its marker ``key``, and the marker's TTL (None: no marker)."""
    if isinstance(value, dict) and key in value:
        return {k: v for k, v in value.items() if k != key}, _ttl(value[key])
    return value, None


def _block(tag: tuple[Any, ...], value: Any, ttl: str | None) -> Block:
    return Block(tag, value, ttl is not None, ttl == ONE_HOUR_TTL)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


#: A history item's blocks: the TTL of the marker it puts on the block before it (a
#: Bedrock ``cachePoint`` before any block of its own; None: none), and its own blocks.
ItemBlocks = tuple[str | None, list[Block]]


@attrs.frozen
class Layout:
    """A wire's blocks in processing order: those of the frame (every member but the
    history list: tools, system, instructions), then each history item's in turn. A
    history item's blocks depend on that item alone, so a body's blocks can be made item
    by item (:class:`Simulation` with fragments keeps those of unchanged items)."""

    #: The body member holding the history list.
    history: str
    frame: Callable[[Mapping[str, Any]], list[Block]]
    item: Callable[[Any], ItemBlocks]
    #: ``cache_control`` at the top level marks the last block (Anthropic's automatic
    #: caching).
    top_marker: bool = False

    def blocks(self, body: Mapping[str, Any]) -> list[Block]:
        """The blocks of a whole body."""
        blocks = self.frame(body)
        for item in _list(body.get(self.history)):
            marks_before, own = self.item(item)
            if marks_before is not None and blocks:
                blocks[-1] = _marked(blocks[-1], marks_before)
            blocks.extend(own)
        if self.top_marker and _CACHE_CONTROL in body and blocks:
            blocks[-1] = _marked(blocks[-1], _ttl(body[_CACHE_CONTROL]))
        return blocks


def _role_and(message: Any, key: str) -> tuple[Any, Any]:
    if not isinstance(message, dict):
        return None, None
    return message.get("role"), message.get(key)


def _anthropic_frame(body: Mapping[str, Any]) -> list[Block]:
    """tools -> system; ``cache_control`` on a block is a breakpoint."""
    blocks: list[Block] = []
    for tool in _list(body.get("tools")):
        value, ttl = _without(tool, _CACHE_CONTROL)
        blocks.append(_block(("tool",), value, ttl))
    system = body.get("system")
    for block in [system] if isinstance(system, str) else _list(system):
        value, ttl = _without(block, _CACHE_CONTROL)
        blocks.append(_block(("system",), value, ttl))
    return blocks


def _anthropic_item(message: Any) -> ItemBlocks:
    """A message's content blocks; ``cache_control`` on a block is a breakpoint."""
    role, content = _role_and(message, "content")
    blocks = []
    for j, block in enumerate([content] if isinstance(content, str) else _list(content)):
        value, ttl = _without(block, _CACHE_CONTROL)
        blocks.append(_block(("message", role, j), value, ttl))
    return None, blocks


def _is_cache_point(value: Any) -> bool:
    return isinstance(value, dict) and "cachePoint" in value


def _with_cache_points(tag: tuple[Any, ...], items: list[Any]) -> ItemBlocks:
    """``items`` as blocks; a ``cachePoint`` item marks the block before it (before any
    block of ``items``: the one before them all, its TTL reported as the first value)."""
    blocks: list[Block] = []
    marks_before: str | None = None
    index = 0
    for item in items:
        if _is_cache_point(item):
            ttl = _ttl(item["cachePoint"])
            if blocks:
                blocks[-1] = _marked(blocks[-1], ttl)
            elif marks_before is None or ttl == ONE_HOUR_TTL:
                marks_before = ttl
            continue
        blocks.append(Block((*tag, index), item))
        index += 1
    return marks_before, blocks


def _bedrock_frame(body: Mapping[str, Any]) -> list[Block]:
    """toolConfig.tools -> system (the Claude order); ``cachePoint`` blocks mark the end
    of the block before them."""
    blocks: list[Block] = []
    tool_config = body.get("toolConfig")
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    for tag, items in ((("tool",), _list(tools)), (("system",), _list(body.get("system")))):
        marks_before, own = _with_cache_points(tag, items)
        if marks_before is not None and blocks:
            blocks[-1] = _marked(blocks[-1], marks_before)
        blocks.extend(own)
    return blocks


def _bedrock_item(message: Any) -> ItemBlocks:
    role, content = _role_and(message, "content")
    return _with_cache_points(("message", role), _list(content))


#: An OpenAI content part's explicit breakpoint (GPT-5.6 and later).
_BREAKPOINT = "prompt_cache_breakpoint"
#: OpenAI's request-level cache options (``ttl``, ``mode``).
_OPTIONS = "prompt_cache_options"
#: OpenAI's longer breakpoint ``ttl``: an entry of the rules' ``long_ttl``.
_OPENAI_LONG = "12h"


def _openai_marked(tag: tuple[Any, ...], item: Any) -> Block:
    """One OpenAI message / input item as a block; a ``prompt_cache_breakpoint`` on any of
    its content parts marks the item's end (prefixlock puts it on the last part), and a
    ``12h`` one asks for the longer entry (as ``ttl: 1h`` does on Anthropic). The block's
    identity has no breakpoint in it."""
    content = item.get("content") if isinstance(item, dict) else None
    if not isinstance(content, list) or not any(
        isinstance(part, dict) and _BREAKPOINT in part for part in content
    ):
        return Block(tag, item)
    ttl = FIVE_MINUTE_TTL
    parts = []
    for part in content:
        if isinstance(part, dict) and _BREAKPOINT in part:
            marker = part[_BREAKPOINT]
            if isinstance(marker, Mapping) and marker.get("ttl") == _OPENAI_LONG:
                ttl = ONE_HOUR_TTL
            part = {k: v for k, v in part.items() if k != _BREAKPOINT}
        parts.append(part)
    return _block(tag, {**item, "content": parts}, ttl)


def _openai_chat_frame(body: Mapping[str, Any]) -> list[Block]:
    """tools (then the messages, the developer message first: one block each)."""
    return [Block(("tool",), tool) for tool in _list(body.get("tools"))]


def _openai_chat_item(message: Any) -> ItemBlocks:
    return None, [_openai_marked(("message",), message)]


def _openai_responses_frame(body: Mapping[str, Any]) -> list[Block]:
    """tools -> instructions (then the input items: one block each)."""
    blocks = [Block(("tool",), tool) for tool in _list(body.get("tools"))]
    if isinstance(body.get("instructions"), str):
        blocks.append(Block(("instructions",), body["instructions"]))
    return blocks


def _openai_responses_item(item: Any) -> ItemBlocks:
    return None, [_openai_marked(("item",), item)]


def _gemini_frame(body: Mapping[str, Any]) -> list[Block]:
    """systemInstruction parts -> tool declarations (then the contents' parts)."""
    blocks: list[Block] = []
    system = body.get("systemInstruction")
    parts = system.get("parts") if isinstance(system, dict) else None
    blocks.extend(Block(("system",), part) for part in _list(parts))
    for tool in _list(body.get("tools")):
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        if isinstance(declarations, list):
            blocks.extend(Block(("function",), d) for d in declarations)
        else:
            blocks.append(Block(("tool",), tool))
    return blocks


def _gemini_item(content: Any) -> ItemBlocks:
    role, parts = _role_and(content, "parts")
    return None, [Block(("part", role, j), part) for j, part in enumerate(_list(parts))]


def _gemini(body: Mapping[str, Any]) -> list[Block]:
    """systemInstruction parts -> tool declarations -> contents parts."""
    return _LAYOUTS["gemini"].blocks(body)


#: Provider name -> its body layout.
_LAYOUTS: Mapping[str, Layout] = {
    "anthropic": Layout("messages", _anthropic_frame, _anthropic_item, top_marker=True),
    "bedrock-anthropic": Layout("messages", _anthropic_frame, _anthropic_item, top_marker=True),
    "bedrock-converse": Layout("messages", _bedrock_frame, _bedrock_item),
    "gemini": Layout("contents", _gemini_frame, _gemini_item),
    "openai-chat": Layout("messages", _openai_chat_frame, _openai_chat_item),
    "openai-responses": Layout("input", _openai_responses_frame, _openai_responses_item),
}

#: Body keys that name the cache namespace besides the model (OpenAI's routing key).
_NAMESPACE_KEYS = ("prompt_cache_key",)


# --- results ---------------------------------------------------------------------------


@attrs.frozen
class CallCache:
    """One call's simulated usage. Token counts are of the whole prompt."""

    index: int  # 1-based
    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    blocks: int
    breakpoints: int
    read_multiplier: Fraction
    #: The price of the writes beyond the one-hour ones (:attr:`cache_write_1h_tokens`):
    #: that of the TTL the call's last cache marker asks for (5 minutes unless it says
    #: ``ttl: 1h``); the perfect-cache bound prices the call's writes at it.
    write_multiplier: Fraction
    #: Seconds the entries this call wrote or read live after it (the longest TTL its
    #: markers ask for: Anthropic's and Bedrock's ``1h``, OpenAI GPT-5.6's ``12h``; its
    #: ``prompt_cache_retention``, else the rules' TTL).
    lifetime: float = DEFAULT_TTL
    #: Seconds its shorter-lived entries live (those a pause loses first: the 5-minute
    #: ones after one-hour markers, GPT-5.6's tail entry of the request's ``ttl``); equal
    #: to :attr:`lifetime` where every entry lives as long.
    short_lifetime: float = DEFAULT_TTL
    #: Of :attr:`cache_write_tokens`, those written as one-hour entries (Anthropic's
    #: ``B - A`` of "Mixing different TTLs", :mod:`prefixlock.cache.rules`), priced at
    #: :attr:`write_multiplier_1h`.
    cache_write_1h_tokens: int = 0
    write_multiplier_1h: Fraction = Fraction(0)
    #: The tokens a perfect cache reads for this call (:class:`PerfectBound`): the
    #: longest prefix of its prompt that any earlier call of the simulation sent (no
    #: minimum, no breakpoint, no expiry), and a Gemini explicit cache an earlier call
    #: named with the same body.
    bound_read_tokens: int = 0
    #: Gemini: the token-hours of the explicit cache this call created (its tokens times
    #: the hours it lives), billed at :attr:`storage_per_hour` (``CacheRules``).
    cache_storage_token_hours: Fraction = Fraction(0)
    storage_per_hour: Fraction = Fraction(0)
    #: Every input price of this call times this: a model priced by prompt length
    #: (``CacheRules.long_prompt``: Claude Haiku 5.5's prompts over 100,000 tokens pay 5x).
    price_factor: Fraction = Fraction(1)

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    @property
    def cost(self) -> Fraction:
        """In base input-token units."""
        one_hour = self.cache_write_1h_tokens
        return (
            self.uncached_tokens
            + (self.cache_write_tokens - one_hour) * self.write_multiplier
            + one_hour * self.write_multiplier_1h
            + self.cache_read_tokens * self.read_multiplier
        ) * self.price_factor + self.cache_storage_token_hours * self.storage_per_hour

    @property
    def uncached_cost(self) -> Fraction:
        """The same prompt without any caching: every token at the base price (times
        :attr:`price_factor`)."""
        return self.input_tokens * self.price_factor


@attrs.frozen
class CacheTotals:
    """The sums over a conversation's calls, as :class:`CacheReport` has them, kept call
    by call (:attr:`Simulation.totals`): all a caller of a long conversation needs that
    does not want every call's figures kept (``Simulation(keep_calls=False)``)."""

    calls: int = 0
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: Fraction = Fraction(0)
    uncached_cost: Fraction = Fraction(0)

    def plus(self, call: CallCache) -> CacheTotals:
        """These totals and one call more."""
        return CacheTotals(
            self.calls + 1,
            self.input_tokens + call.input_tokens,
            self.cache_read_tokens + call.cache_read_tokens,
            self.cache_write_tokens + call.cache_write_tokens,
            self.cost + call.cost,
            self.uncached_cost + call.uncached_cost,
        )

    @property
    def cached_share(self) -> float:
        """Share of all input tokens read from the cache (0 without input)."""
        total = self.input_tokens
        return self.cache_read_tokens / total if total else 0.0

    @property
    def cost_ratio(self) -> float:
        """Simulated cost / cost without caching (1.0 without input)."""
        uncached = self.uncached_cost
        return float(self.cost / uncached) if uncached else 1.0


@attrs.frozen
class CacheReport:
    provider: str
    model: str
    rules: CacheRules
    tokenizer: str
    calls: tuple[CallCache, ...]

    @property
    def input_tokens(self) -> int:
        return sum(c.input_tokens for c in self.calls)

    @property
    def cache_read_tokens(self) -> int:
        return sum(c.cache_read_tokens for c in self.calls)

    @property
    def cache_write_tokens(self) -> int:
        return sum(c.cache_write_tokens for c in self.calls)

    @property
    def cost(self) -> Fraction:
        return sum((c.cost for c in self.calls), Fraction(0))

    @property
    def uncached_cost(self) -> Fraction:
        return sum((c.uncached_cost for c in self.calls), Fraction(0))

    @property
    def totals(self) -> CacheTotals:
        return CacheTotals(
            len(self.calls),
            self.input_tokens,
            self.cache_read_tokens,
            self.cache_write_tokens,
            self.cost,
            self.uncached_cost,
        )

    @property
    def cached_share(self) -> float:
        """Share of all input tokens read from the cache (0 without input)."""
        return self.totals.cached_share

    @property
    def cost_ratio(self) -> float:
        """Simulated cost / cost without caching (1.0 without input)."""
        return self.totals.cost_ratio

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "family": self.rules.family,
            "tokenizer": self.tokenizer,
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cached_share": round(self.cached_share, 4),
            "cost_ratio": round(self.cost_ratio, 4),
            "calls": [
                {
                    "call": c.index,
                    "input_tokens": c.input_tokens,
                    "cache_read_tokens": c.cache_read_tokens,
                    "cache_write_tokens": c.cache_write_tokens,
                    "cost": round(float(c.cost), 2),
                }
                for c in self.calls
            ],
        }


class PerfectBound:
    """The perfect-cache bound of a conversation (issue 15, item 5), fed the simulated
    calls one by one (:meth:`add`): every input token is written to the cache once, at
    the call's write price, and read at its read price by every later call that sends
    it again at the same place: a call reads the longest prefix of its prompt that any
    earlier call sent (:attr:`CallCache.bound_read_tokens`, counted by the
    :class:`Simulation`) and writes the rest. No minimum, no breakpoint limit, no
    expiry. A compaction starts the history over, so its history is written again; the
    tools and instructions before it, unchanged, are still read (a prefix cache keeps
    them, and the real one does: a bound that wrote them again was above the simulated
    cost after every compaction).

    Where a provider sends tokens uncached for less than its write price (Anthropic and
    Bedrock: uncached 1x, writes 1.25x or 2x), a simulated cost can fall just below this
    bound; the ratio is a yardstick, not a proof of optimality.
    """

    def __init__(self) -> None:
        self.cost = Fraction(0)

    def add(self, call: CallCache) -> None:
        read = call.bound_read_tokens
        self.cost += read * call.read_multiplier * call.price_factor
        self.cost += (call.input_tokens - read) * call.write_multiplier * call.price_factor

    def ratio(self, cost: Fraction) -> float:
        """``cost`` as a multiple of the bound (1.0 when the bound is 0)."""
        return float(cost / self.cost) if self.cost else 1.0


# --- simulation ------------------------------------------------------------------------

#: Bytes of a block's key digest and of a prefix hash: 128-bit BLAKE2b. They name
#: prefixes, nothing is signed: two of a simulation's (some 10^5) prefixes share a hash
#: with a probability near 10^-29, and half of SHA-256's 32 bytes is half the memory of
#: every chain, segment and entry the simulator keeps.
_HASH = 16


def _key_digest(block: Block) -> bytes:
    """The hash of a block's identity, its canonical ``[tag, value]``."""
    data = canonical.dumpb([list(block.tag), block.value])
    return hashlib.blake2b(data, digest_size=_HASH).digest()


def _chained(state: bytes, digest: bytes) -> bytes:
    """The hash of a prefix: the hash of the prefix before it (``b""`` for none) and the
    key digest of its last block."""
    return hashlib.blake2b(state + digest, digest_size=_HASH).digest()


def _round_down(tokens: int, rules: CacheRules) -> int:
    """Cacheable part of a ``tokens`` prefix: 0 below the minimum, else whole increments."""
    if tokens < rules.min_tokens:
        return 0
    return tokens - tokens % rules.increment


def _alive(until: float, now: float) -> bool:
    """Whether an entry kept until ``until`` is found at ``now``; a call without a time
    (now = inf) finds every entry ever written."""
    return now == math.inf or now <= until


class _Prompt:
    """What the pricing of one call reads of its body's blocks: how many, their tokens
    up to each block, the prefix hash at each block and the breakpoints. The cumulative
    tokens are those of a leading part (``lead``) and of the rest counted from the end
    of the lead (the blocks of the history, which do not change with the frame)."""

    __slots__ = (
        "breakpoints",
        "count",
        "lead",
        "lead_total",
        "one_hour",
        "packed",
        "rest",
        "total",
    )

    def __init__(
        self,
        lead: Sequence[int],
        rest: Sequence[int],
        packed: bytes,
        breakpoints: Sequence[int],
        one_hour: Sequence[int] = (),
    ) -> None:
        self.lead, self.rest, self.packed = lead, rest, packed
        self.breakpoints = breakpoints
        #: The breakpoints (in order) that ask for a one-hour entry.
        self.one_hour = one_hour
        self.count = len(lead) + len(rest)
        self.lead_total = lead[-1] if lead else 0
        self.total = self.lead_total + (rest[-1] if rest else 0)

    def tokens_to(self, index: int) -> int:
        """The tokens of blocks 0 .. ``index``."""
        lead = self.lead
        if index < len(lead):
            return lead[index]
        return self.lead_total + self.rest[index - len(lead)]

    def hash_at(self, index: int) -> bytes:
        """The hash of the prefix that ends with block ``index``."""
        return self.packed[index * _HASH : (index + 1) * _HASH]


class _Seen:
    """The implicit cache of one namespace: the prefixes earlier calls sent and when
    each one's entry expires. It answers exactly as a map prefix hash -> expiry that
    every call sets for all its prefixes would, without touching every prefix on every
    call: the prefixes of the namespace's latest call (``chain``, its prefix hashes end
    to end) share that call's expiry, and a prefix enters ``left`` with the expiry it
    had when a later call stopped sending it. A prefix hash names the whole prefix, so
    position ``i`` of two chains holds the same hash exactly when their first ``i + 1``
    blocks are equal.

    A call that stops sending many prefixes at once (a naive harness's context change
    rewrites its system prompt, the first block) leaves them as one :class:`_Segment`
    of the old chain, not one ``left`` entry each. Every prefix has one owner, the
    latest write: a write takes the positions it sets from the ``left`` entries and
    older segments that held them."""

    __slots__ = ("chain", "left", "segments", "until")

    def __init__(self) -> None:
        self.chain = b""
        self.until = 0.0
        self.left = _Expiries()
        self.segments: list[_Segment] = []

    def longest(self, prompt: _Prompt, now: float) -> tuple[int, int, float]:
        """(the last block of the longest prefix of ``prompt`` found at ``now``, or -1;
        how many leading prefixes it shares with the latest call; the time the found
        prefix's entry expires, ``-inf`` if none is found)."""
        packed = prompt.packed
        shared = common_prefix(self.chain, packed) // _HASH
        best, best_until = -1, -math.inf
        for segment in self.segments:
            if _alive(segment.until, now):
                end = min(segment.stop, prompt.count, common_prefix(segment.chain, packed) // _HASH)
                if end > max(segment.start, shared, best + 1):
                    best, best_until = end - 1, segment.until
        left = self.left
        for index in range(prompt.count - 1, max(shared, best + 1) - 1, -1):
            until = left.get(prompt.hash_at(index))
            if until is not None and _alive(until, now):
                return index, shared, until
        if best >= 0:
            return best, shared, best_until
        if shared and _alive(self.until, now):
            return shared - 1, shared, self.until
        return -1, shared, -math.inf

    def sent(self, prompt: _Prompt, until: float, shared: int, now: float) -> None:
        """``prompt`` was sent at ``now``: its prefixes are kept until ``until``."""
        chain, left, before = self.chain, self.left, self.until
        stop = len(chain) // _HASH
        if stop > shared:
            self._take(chain, shared, stop)
            if stop - shared >= _SEGMENT_MIN:
                if left:
                    for index in range(shared, stop):
                        left.pop(chain[index * _HASH : (index + 1) * _HASH], None)
                self.segments.append(_Segment(chain, shared, stop, before))
            else:
                for index in range(shared, stop):
                    left[chain[index * _HASH : (index + 1) * _HASH]] = before
        self.chain, self.until = prompt.packed, until
        left.forget_expired(now)
        if now != math.inf and any(segment.until < now for segment in self.segments):
            # Exact, as for ``left``: an entry expired at a finite time is never found.
            self.segments = [segment for segment in self.segments if segment.until >= now]

    def _take(self, chain: bytes, start: int, stop: int) -> None:
        """Positions ``start`` .. ``stop`` of ``chain`` are written again: the older
        segments that hold any of them give those up."""
        kept: list[_Segment] = []
        for segment in self.segments:
            lo = max(start, segment.start)
            hi = min(stop, segment.stop, common_prefix(segment.chain, chain) // _HASH)
            if hi <= lo:
                kept.append(segment)
                continue
            if segment.start < lo:
                kept.append(_Segment(segment.chain, segment.start, lo, segment.until))
            if hi < segment.stop:
                kept.append(_Segment(segment.chain, hi, segment.stop, segment.until))
        self.segments = kept


#: A call that stops sending at least this many of the latest call's prefixes leaves
#: them as one :class:`_Segment` (below it, one ``left`` entry each).
_SEGMENT_MIN = 64


@attrs.frozen
class _Segment:
    """Positions ``start`` .. ``stop - 1`` of an earlier chain, kept until ``until``."""

    chain: bytes
    start: int
    stop: int
    until: float


class _Expiries(dict[bytes, float]):
    """Entry -> the time it expires; :meth:`forget_expired` drops the entries that no
    later call can find, so the map holds what is alive, not everything ever sent (a
    naive harness's context change sends a whole new history of prefixes)."""

    __slots__ = ("lifetimes", "limit")

    def __init__(self) -> None:
        super().__init__()
        self.limit = 1024
        #: Explicit caches: entry -> the TTL it was last written with (seconds).
        self.lifetimes: dict[bytes, float] = {}

    def keep(self, entry: bytes, now: float, lifetime: float) -> None:
        """``entry`` was written or read at ``now``: it lives ``lifetime`` more."""
        self[entry] = now + lifetime
        self.lifetimes[entry] = lifetime

    def forget_expired(self, now: float) -> None:
        """Drop the entries expired at ``now``, from time to time (when the map has
        doubled since), so the work is constant per entry. Exact: times never go back,
        and once a call has a time every later call has one, so an entry expired at a
        finite ``now`` is never found again (:class:`_Live`)."""
        if len(self) <= self.limit or now == math.inf:
            return
        kept = {entry: until for entry, until in self.items() if until >= now}
        if len(kept) < len(self):
            # Made again, not deleted from: a dict's table never shrinks, so one that
            # once held a naive harness's 16,000 prefixes would keep that size.
            self.clear()
            self.update(kept)
            lifetimes = self.lifetimes
            self.lifetimes = {entry: lifetimes[entry] for entry in kept if entry in lifetimes}
        self.limit = max(2 * len(self), 1024)


class _Stream:
    """The blocks of the previous body, kept for the next one (:meth:`Simulation.add_fragments`):
    the frame's, and per history block its key digest, the tokens of the history up to
    it and its prefix hash, with where each history item's blocks start and the items
    that mark a breakpoint. A body's unchanged leading items keep theirs; only the
    blocks of the items after them are made, keyed, counted and hashed."""

    def __init__(
        self, layout: Layout, tokens: Callable[[Block, bytes], int], count: Callable[[Block], int]
    ) -> None:
        self.layout = layout
        #: The frame's blocks are counted through the simulation's memo; a history
        #: block is counted when it first appears (kept after that), so a memo of every
        #: history block would only hold memory.
        self.tokens = tokens
        self.count = count
        self.fresh = True
        self.frame_digests: list[bytes] = []
        self.frame_cumulative: list[int] = []
        self.frame_packed = b""
        #: The frame's breakpoints, and those of them that ask for one hour.
        self.frame_marks: list[int] = []
        self.frame_long: list[int] = []
        self.digests = bytearray()  # _HASH bytes per history block
        self.cumulative = array("q")  # tokens of the history up to each of its blocks
        #: The previous body's prefix hashes, the frame's then the history's (_HASH bytes
        #: per block): the next body's are made from it, and it is also what the cache
        #: keeps of that call (``_Seen.chain``), so one copy serves both.
        self.packed = b""
        self.starts = array("q")  # per history item, its first block
        #: (item, the TTL of its mark on the block before it or None, its own blocks
        #: that are breakpoints, those of them that ask for one hour), in item order:
        #: only the items that mark something.
        self.marked: list[tuple[int, str | None, tuple[int, ...], tuple[int, ...]]] = []

    def update(self, scan: Scan) -> _Prompt:
        """The blocks of the body ``scan`` read."""
        fresh, layout = self.fresh, self.layout
        common = 0 if fresh else scan.common
        assert common == scan.common, "the stream and its scanner are out of step"
        rechain = False
        if fresh or not (scan.head_same and scan.trail_same):
            rechain = self._frame(layout.frame(scan.frame)) and not fresh
        self.fresh = False
        starts, cumulative, digests = self.starts, self.cumulative, self.digests
        keep = starts[common] if common < len(starts) else len(cumulative)
        del starts[common:], cumulative[keep:], digests[keep * _HASH :]
        marked = self.marked
        while marked and marked[-1][0] >= common:
            marked.pop()
        frame_packed = self.frame_packed
        state = frame_packed[-_HASH:]
        kept: bytes | memoryview = frame_packed
        hashes = bytearray()  # this body's history prefix hashes after those in `kept`
        if rechain:  # the frame's blocks changed: every history prefix hash with them
            for index in range(keep):
                state = _chained(state, bytes(digests[index * _HASH : (index + 1) * _HASH]))
                hashes += state
        elif keep:  # the frame's hashes and the first `keep` history ones as they were
            end = len(frame_packed) + keep * _HASH
            kept, state = memoryview(self.packed)[:end], self.packed[end - _HASH : end]
        total = cumulative[-1] if cumulative else 0
        count = self.count
        for offset, item in enumerate(scan.items):
            marks_before, own = layout.item(item)
            starts.append(len(cumulative))
            marks = tuple(j for j, block in enumerate(own) if block.breakpoint)
            if marks_before is not None or marks:
                long = tuple(j for j in marks if own[j].one_hour)
                marked.append((common + offset, marks_before, marks, long))
            for block in own:
                digest = _key_digest(block)
                total += count(block)
                state = _chained(state, digest)
                digests += digest
                cumulative.append(total)
                hashes += state
        top = _ttl(scan.frame[_CACHE_CONTROL]) if _CACHE_CONTROL in scan.frame else None
        breakpoints, one_hour = self._breakpoints(top)
        self.packed = packed = b"".join((kept, hashes))
        return _Prompt(self.frame_cumulative, cumulative, packed, breakpoints, one_hour)

    def _frame(self, blocks: list[Block]) -> bool:
        """Take the frame's blocks; whether their keys changed."""
        digests = [_key_digest(block) for block in blocks]
        self.frame_marks = [i for i, block in enumerate(blocks) if block.breakpoint]
        self.frame_long = [i for i in self.frame_marks if blocks[i].one_hour]
        if digests == self.frame_digests and not self.fresh:
            return False
        cumulative: list[int] = []
        packed = bytearray()
        total, state = 0, b""
        for block, digest in zip(blocks, digests, strict=True):
            total += self.tokens(block, digest)
            cumulative.append(total)
            state = _chained(state, digest)
            packed += state
        self.frame_digests, self.frame_cumulative = digests, cumulative
        self.frame_packed = bytes(packed)
        return True

    def _breakpoints(self, top: str | None) -> tuple[list[int], list[int]]:
        """The breakpoints in block order (the frame's, the history items', the top
        level's on the last block; ``top``: its TTL, None without one), each once, and
        those of them that ask for one hour."""
        out = list(self.frame_marks)
        long = list(self.frame_long)
        lead = len(self.frame_digests)

        def add(index: int, one_hour: bool) -> None:
            if not out or out[-1] != index:
                out.append(index)
            if one_hour and (not long or long[-1] != index):
                long.append(index)

        for item, marks_before, marks, long_marks in self.marked:
            first = lead + self.starts[item]
            if marks_before is not None and first:
                add(first - 1, marks_before == ONE_HOUR_TTL)
            for j in marks:
                add(first + j, j in long_marks)
        count = lead + len(self.cumulative)
        if top is not None and self.layout.top_marker and count:
            add(count - 1, top == ONE_HOUR_TTL)
        return out, long


def simulate(
    provider: str,
    bodies: Iterable[bytes | str | Mapping[str, Any]],
    *,
    model: str | None = None,
    tokenizer: Tokenizer | None = None,
    cached_contents: Mapping[str, bytes | str | Mapping[str, Any]] | None = None,
    times: Sequence[float | None] | None = None,
) -> CacheReport:
    """Simulate the prompt cache over one conversation's request bodies, in call order.

    ``model`` is used when a body does not name one (Gemini and Bedrock carry it in the
    URL); ``tokenizer`` defaults to the UTF-8-bytes/4 estimate; ``cached_contents`` maps
    a Gemini explicit cache's name to the body that created it; ``times``: each call's
    time, one per body (:meth:`Simulation.add`'s ``at``; default: none, nothing
    expires). Raises
    :class:`PrefixlockError` for an unknown provider, a body that is not a JSON object,
    or an explicit-cache call with more breakpoints than the API accepts.
    """
    simulation = Simulation(
        provider, model=model, tokenizer=tokenizer, cached_contents=cached_contents
    )
    if times is None:
        for raw in bodies:
            simulation.add(raw)
    else:
        for raw, at in zip(bodies, times, strict=True):
            simulation.add(raw, at)
    return simulation.report()


class Simulation:
    """:func:`simulate` one body at a time, for callers that stream the bodies and keep
    none of them; :meth:`report` at any point. ``floor``: simulate the floor instead
    (see the module docstring).

    :meth:`add` reads each body whole. :meth:`add_fragments` gives the same figures
    with work that follows what changed since the body before: the body's history items
    that are byte-identical to the previous body's keep their blocks, key digests,
    token counts and prefix hashes (:class:`~prefixlock.core.bodyscan.HistoryScanner`),
    and only the blocks of the items after them are made.
    """

    def __init__(
        self,
        provider: str,
        *,
        model: str | None = None,
        tokenizer: Tokenizer | None = None,
        cached_contents: Mapping[str, bytes | str | Mapping[str, Any]] | None = None,
        floor: bool = False,
        keep_calls: bool = True,
    ) -> None:
        layout = _LAYOUTS.get(provider)
        if layout is None:
            raise UnknownNameError(
                f"cache simulation: unknown provider {provider!r} (known: {', '.join(_LAYOUTS)})"
            )
        self.provider = provider
        self.layout = layout
        self.model = model
        self.counter = tokenizer or get_tokenizer()
        #: Block key digest -> its tokens (the same block text is counted once).
        self.token_memo: dict[bytes, int] = {}
        #: Per namespace: prefix hash -> the time its entry expires (``inf``: never,
        #: for entries last used by a call without a time).
        self.explicit_entries: dict[tuple[Any, ...], _Expiries] = {}
        self.implicit_seen: dict[tuple[Any, ...], _Seen] = {}
        #: Per namespace: the entries written at OpenAI breakpoints (GPT-5.6 and later).
        self.breakpoint_entries: dict[tuple[Any, ...], _Book] = {}
        self.last_at: float | None = None
        #: Every call's figures (none with ``keep_calls=False``: then :attr:`totals` only).
        self.calls: list[CallCache] = []
        self.keep_calls = keep_calls
        self.totals = CacheTotals()
        #: Gemini explicit cache name -> the body that creates it (:meth:`name_cache`).
        self.cached_contents: dict[str, bytes | str | Mapping[str, Any]] = dict(
            cached_contents or {}
        )
        #: Gemini explicit caches written: name -> (the digest of the body written, the
        #: time it expires: ``inf`` while no call has a time).
        self.created: dict[str, tuple[bytes, float]] = {}
        #: Per cache name: (its tokens, its body's digest, its expiry), of the body
        #: named now.
        self._cached_figures: dict[str, tuple[int, bytes, CachedContentExpiry]] = {}
        #: The perfect cache (:attr:`CallCache.bound_read_tokens`): every prefix any call
        #: sent, never expiring, per model (a switch's new namespace holds nothing of
        #: the old one's), and the Gemini explicit cache bodies named.
        self._perfect: dict[str, _Seen] = {}
        self._perfect_caches: set[bytes] = set()
        self.model_name = model or ""
        #: The floor (see the module docstring): an ideal cache under the same lifetimes.
        self.floor = floor
        self.rules = rules_for(provider, self.model_name)
        self._scanner = HistoryScanner(layout.history)
        self._stream = _Stream(layout, self._tokens, self._count)

    def name_cache(self, name: str, body: bytes | str | Mapping[str, Any]) -> None:
        """From the next call on, the Gemini explicit cache ``name`` is the one ``body``
        creates (as given in ``cached_contents``). Another body than the one the cache
        was written from is another cache under that name: the next call naming it
        writes it again (a root that changed needs a new cache)."""
        if self.cached_contents.get(name) is not body:
            self.cached_contents[name] = body
            self._cached_figures.pop(name, None)

    def fork(self) -> Simulation:
        """An independent copy of this simulation's state: the same figures and cache
        entries, to price an alternative next call without touching this one (the
        offline-optimal policy of ``prefixlock bench`` tries each choice per gap). The
        block token memo, a pure cache, is shared."""
        memo: dict[int, Any] = {
            id(self._scanner): None,  # per body: add() starts a new scan
            id(self._stream): None,
            id(self.counter): self.counter,
            id(self.layout): self.layout,
            id(self.rules): self.rules,
            id(self.token_memo): self.token_memo,
        }
        twin = copy.deepcopy(self, memo)
        twin._scanner = HistoryScanner(self.layout.history)
        twin._restart_stream()
        return twin

    def _count(self, block: Block) -> int:
        value = block.value
        return self.counter.count(value if isinstance(value, str) else canonical.dumps(value))

    def _tokens(self, block: Block, digest: bytes) -> int:
        tokens = self.token_memo.get(digest)
        if tokens is None:
            tokens = self.token_memo[digest] = self._count(block)
        return tokens

    def _restart_stream(self) -> None:
        self._scanner.reset()
        self._stream = _Stream(self.layout, self._tokens, self._count)

    def add(self, raw: bytes | str | Mapping[str, Any], at: float | None = None) -> CallCache:
        """Simulate the next call's body; ``at``: its time in seconds (any epoch), if
        known. Times must not go backwards."""
        self._restart_stream()
        index = self.totals.calls + 1
        body = raw if isinstance(raw, Mapping) else canonical.loads(raw)
        if not isinstance(body, Mapping):
            raise CacheSimulationError(
                f"{self.provider} call {index}: the body is not a JSON object"
            )
        blocks = self.layout.blocks(body)
        cumulative: list[int] = []
        packed = bytearray()
        total, state = 0, b""
        for block in blocks:
            digest = _key_digest(block)
            total += self._tokens(block, digest)
            cumulative.append(total)
            state = _chained(state, digest)
            packed += state
        breakpoints = [i for i, b in enumerate(blocks) if b.breakpoint]
        one_hour = [i for i, b in enumerate(blocks) if b.breakpoint and b.one_hour]
        prompt = _Prompt(cumulative, (), bytes(packed), breakpoints, one_hour)
        return self._price(index, body, prompt, at)

    def add_fragments(
        self, body: Body | bytes | Iterable[bytes], at: float | None = None
    ) -> CallCache:
        """:meth:`add` of the body these fragments join to (a :class:`Body`, its bytes or
        its fragments), working on what changed since the body given before: the
        figures are exactly :meth:`add`'s. A body the scanner does not read (not in the
        compact canonical form) is read whole by :meth:`add`."""
        body = body if isinstance(body, Body) else Body.of(body)
        scan = self._scanner.scan(body)
        if scan is None:
            return self.add(body.join(), at)
        index = self.totals.calls + 1
        try:
            prompt = self._stream.update(scan)
        except BaseException:
            self._restart_stream()
            raise
        head = dict(scan.frame)
        head[self.layout.history] = [scan.last] if scan.count else []
        return self._price(index, head, prompt, at)

    def _price(
        self, index: int, body: Mapping[str, Any], prompt: _Prompt, at: float | None
    ) -> CallCache:
        """One call's figures from its blocks; ``body``: its members (of the history,
        the last item is enough)."""
        provider, counter = self.provider, self.counter
        body_model = body.get("model")
        model_name = body_model if isinstance(body_model, str) else (self.model or "")
        self.model_name = model_name
        rules = self.rules = rules_for(provider, model_name)
        namespace = (model_name, *(body.get(key) for key in _NAMESPACE_KEYS))
        total = prompt.total
        breakpoints = prompt.breakpoints
        # Only the explicit caches' markers have a TTL (rules.write_multiplier_1h).
        one_hour_price = rules.write_multiplier_1h
        timed = one_hour_price is not None
        if prompt.one_hour and not timed and provider in BEDROCK_WIRES:
            refusal = one_hour_ttl_refusal(model_name)  # an API error, as a fifth marker
            if refusal is not None:
                raise CacheSimulationError(f"{provider} call {index}: {refusal}")
        long_marks = prompt.one_hour if timed else ()
        last_one_hour = bool(long_marks) and long_marks[-1] == breakpoints[-1]
        write_multiplier = (
            one_hour_price
            if one_hour_price is not None and last_one_hour
            else rules.write_multiplier
        )
        if at is not None and self.last_at is not None and at < self.last_at:
            raise CacheSimulationError(
                f"{provider} call {index}: its time goes back {self.last_at - at:g} s"
            )
        if at is None:  # with the previous call (never expires before any time is known)
            now = math.inf if self.last_at is None else self.last_at
        else:
            now = self.last_at = at
        short = _lifetime(rules, body)
        lifetime = rules.long_ttl if long_marks else short
        until = now + lifetime
        write_1h = 0
        if self.floor:  # after the lifetime: it depends on the real rules and markers
            if rules.explicit:  # markers choose what is written: a token can go uncached
                write_multiplier = min(write_multiplier, Fraction(1))
            rules = attrs.evolve(rules, explicit=False)
        if rules.explicit:
            if len(breakpoints) > rules.max_breakpoints:
                raise CacheSimulationError(
                    f"{provider} call {index}: {len(breakpoints)} cache breakpoints; the API "
                    f"accepts at most {rules.max_breakpoints}"
                )
            if long_marks and long_marks != breakpoints[: len(long_marks)]:
                raise CacheSimulationError(
                    f"{provider} call {index}: a ttl {ONE_HOUR_TTL} cache marker after a "
                    f"{FIVE_MINUTE_TTL} one; the API needs longer TTLs before shorter ones"
                )
            entries = self.explicit_entries.get(namespace)
            if entries is None:
                entries = self.explicit_entries[namespace] = _Expiries()
            live = _Live(entries, now)
            read, write, write_1h, written, hit = _explicit(rules, prompt, live)
            if hit is not None:  # reading an entry refreshes it, for its own TTL
                entries.keep(hit, now, entries.lifetimes.get(hit, short))
            for entry, long in written:
                if entry != hit:  # the entry read is not written again: it keeps its TTL
                    entries.keep(entry, now, rules.long_ttl if long else short)
            entries.forget_expired(now)
        elif rules.considered_breakpoints and not self.floor:  # OpenAI GPT-5.6 and later
            short = _request_ttl(body, short)
            # a 12h breakpoint's entry outlives the request's ttl (the implicit tail's)
            lifetime = max(rules.long_ttl, short) if long_marks else short
            book = self.breakpoint_entries.get(namespace)
            if book is None:
                book = self.breakpoint_entries[namespace] = _Book()
            read, write, write_1h = book.price(rules, prompt, now, short, _implicit(body))
        elif not rules.implicit_cache:  # a model without one (Gemini before 2.5)
            read = write = 0
        else:
            seen = self.implicit_seen.get(namespace)
            if seen is None:
                seen = self.implicit_seen[namespace] = _Seen()
            matched, shared, found_until = seen.longest(prompt, now)
            read = _round_down(prompt.tokens_to(matched), rules) if matched >= 0 else 0
            write = max(0, _round_down(total, rules) - read)
            kept = until
            if self.floor:
                # A read keeps its entry's own TTL (the explicit path above): a 5-minute
                # call that reads a one-hour entry must not shorten it here either,
                # whether the entry is the latest call's prefix or an older one (another
                # system prompt came between). The call's new prefixes then live as long
                # too: the floor may only err low.
                chain_until = seen.until if shared and _alive(seen.until, now) else -math.inf
                kept = max(until, found_until, chain_until)
            seen.sent(prompt, kept, shared, now)
        perfect = self._perfect.get(model_name)
        if perfect is None:
            perfect = self._perfect[model_name] = _Seen()
        found, shared, _ = perfect.longest(prompt, math.inf)
        bound_read = prompt.tokens_to(found) if found >= 0 else 0
        perfect.sent(prompt, math.inf, shared, math.inf)
        name = body.get("cachedContent") if provider == "gemini" else None
        token_hours = Fraction(0)
        if isinstance(name, str):
            figures = self._cached_figures.get(name)
            if figures is None:
                figures = _cached_tokens(name, self.cached_contents, counter, index)
                self._cached_figures[name] = figures
            cached, digest, expiry = figures
            total += cached
            if digest in self._perfect_caches:
                bound_read += cached
            self._perfect_caches.add(digest)
            made = self.created.get(name)
            if made is not None and made[1] == math.inf and now != math.inf:
                # Created by a call without a time: its life counts from the first known
                # time, as an entry's does when a timed call reads it.
                made = self.created[name] = (made[0], expiry.at(name, index, now))
            if made is not None and made[0] == digest and _alive(made[1], now):
                read += cached
            else:  # the first call naming it, another body named since, or expired
                write += cached
                expires = expiry.at(name, index, now)
                self.created[name] = (digest, expires)
                stored = expiry.hours(now, expires)
                token_hours = cached * stored if stored is not None else Fraction(0)
        call = CallCache(
            index=index,
            input_tokens=total,
            cache_read_tokens=read,
            cache_write_tokens=write,
            blocks=prompt.count,
            breakpoints=len(breakpoints),
            read_multiplier=rules.read_multiplier,
            write_multiplier=write_multiplier,
            lifetime=lifetime,
            short_lifetime=short,
            cache_write_1h_tokens=write_1h,
            write_multiplier_1h=one_hour_price or Fraction(0),
            bound_read_tokens=bound_read,
            cache_storage_token_hours=token_hours,
            storage_per_hour=rules.storage_per_hour,
            price_factor=(
                rules.long_prompt[1]
                if rules.long_prompt is not None and total > rules.long_prompt[0]
                else Fraction(1)
            ),
        )
        self.totals = self.totals.plus(call)
        if self.keep_calls:
            self.calls.append(call)
        return call

    def report(self) -> CacheReport:
        """Every call's figures; refused by a simulation that keeps none."""
        if not self.keep_calls and self.totals.calls:
            raise UsageError(f"{self.provider}: this simulation keeps totals only")
        return CacheReport(
            self.provider, self.model_name, self.rules, self.counter.name, tuple(self.calls)
        )


@attrs.frozen
class _Live:
    """The entries of a namespace that have not expired at ``now``."""

    expiries: Mapping[bytes, float]
    now: float

    def __contains__(self, entry: object) -> bool:
        until = self.expiries.get(entry)  # type: ignore[call-overload]
        # A call without a time (now = inf) finds every entry ever written.
        return until is not None and (self.now == math.inf or self.now <= until)


def _explicit(
    rules: CacheRules, prompt: _Prompt, entries: _Live
) -> tuple[int, int, int, list[tuple[bytes, bool]], bytes | None]:
    """(read tokens, write tokens, of them one-hour writes, entries written with whether
    each is a one-hour one, the entry read) of one explicit-cache call.

    Billing, Anthropic's "Mixing different TTLs": A is the tokens up to the highest cache
    hit, B those up to the highest one-hour breakpoint after A (else A), C those up to
    the last breakpoint; reads A, one-hour writes B - A, five-minute writes C - B. Only
    breakpoints whose prefix reaches the minimum write (are counted as B or C)."""
    hit = -1
    breakpoints = prompt.breakpoints
    for b in breakpoints:
        # The breakpoint's own block is check #1: blocks b .. b - (lookback - 1).
        for p in range(b, max(-1, b - rules.lookback_blocks), -1):
            if prompt.hash_at(p) in entries:
                hit = max(hit, p)
                break
    read = prompt.tokens_to(hit) if hit >= 0 else 0
    valid: list[int] = []
    since = 0
    for b in breakpoints:
        upto = prompt.tokens_to(b)
        needed = upto - since if rules.min_tokens_per_checkpoint else upto
        if needed >= rules.min_tokens:
            valid.append(b)
            since = upto
    write = max(0, prompt.tokens_to(valid[-1]) - read) if valid else 0
    long = set(prompt.one_hour)
    highest = max((prompt.tokens_to(b) for b in valid if b in long), default=read)
    write_1h = min(write, max(0, highest - read))
    return (
        read,
        write,
        write_1h,
        [(prompt.hash_at(b), b in long) for b in valid],
        prompt.hash_at(hit) if hit >= 0 else None,
    )


def _implicit(body: Mapping[str, Any]) -> bool:
    """Whether an OpenAI request adds its implicit breakpoint (``prompt_cache_options.mode``
    ``implicit``, the default) besides its explicit ones."""
    options = body.get(_OPTIONS)
    return not (isinstance(options, Mapping) and options.get("mode") == "explicit")


def _request_ttl(body: Mapping[str, Any], default: float) -> float:
    """Seconds an OpenAI GPT-5.6 entry lives by the request's ``prompt_cache_options.ttl``
    (``30m`` by default; ``12h`` on Responses)."""
    options = body.get(_OPTIONS)
    ttl = options.get("ttl") if isinstance(options, Mapping) else None
    return OPENAI_BREAKPOINT_TTL.get(ttl, default) if isinstance(ttl, str) else default


class _Book:
    """The entries an OpenAI conversation (namespace) wrote at breakpoints, GPT-5.6 and
    later (the rules and their sources: :mod:`prefixlock.cache.rules`): per entry, the
    prefix hash, its last block, its expiry and its lifetime, in the order they were last
    written or read (the latest last)."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[int, float, float]] = {}

    def price(
        self, rules: CacheRules, prompt: _Prompt, now: float, short: float, implicit: bool
    ) -> tuple[int, int, int]:
        """(read, write, of them the longer-lived writes) of one call, and the entries it
        reads and writes kept: it reads the longest of the latest
        ``rules.considered_breakpoints`` entries alive at ``now`` that ends exactly at one
        of its blocks with the same prefix; it writes an entry at its implicit breakpoint
        (its last block) and its latest explicit ones (three beside the implicit one, four
        without it), those whose prefix has the minimum, paying the write price for the
        tokens after the read up to the last of them."""
        entries = self.entries
        hit, hit_entry = -1, b""
        for entry, (block, until, _) in list(entries.items())[-rules.considered_breakpoints :]:
            if hit < block < prompt.count and _alive(until, now) and prompt.hash_at(block) == entry:
                hit, hit_entry = block, entry
        read = prompt.tokens_to(hit) if hit >= 0 else 0
        if hit >= 0:  # a read refreshes the entry for its own lifetime
            _, _, life = entries.pop(hit_entry)
            entries[hit_entry] = (hit, now + life, life)
        explicit = list(prompt.breakpoints)
        long = set(prompt.one_hour)
        marks = explicit[
            -(OPENAI_WRITTEN_EXPLICIT[0] if implicit else OPENAI_WRITTEN_EXPLICIT[1]) :
        ]
        lifetimes = {b: rules.long_ttl if b in long else short for b in marks}
        if implicit and prompt.count:
            last = prompt.count - 1
            lifetimes[last] = max(lifetimes.get(last, short), short)
        written = sorted(b for b in lifetimes if prompt.tokens_to(b) >= rules.min_tokens)
        for block in written:
            entry = prompt.hash_at(block)
            life = lifetimes[block]
            if entry in entries:
                life = max(life, entries.pop(entry)[2])
            entries[entry] = (block, now + life, life)
        if len(entries) > 4 * rules.considered_breakpoints:  # only the latest are matched
            for entry in list(entries)[: len(entries) - rules.considered_breakpoints]:
                del entries[entry]
        write = max(0, prompt.tokens_to(written[-1]) - read) if written else 0
        highest = max((prompt.tokens_to(b) for b in written if lifetimes[b] > short), default=read)
        return read, write, min(write, max(0, highest - read))


def _lifetime(rules: CacheRules, body: Mapping[str, Any]) -> float:
    """Seconds the call's entries live: by its ``prompt_cache_retention`` where the rules
    have one for it (OpenAI), else the rules' TTL."""
    retention = body.get(RETENTION_OPTION)
    return (
        dict(rules.retention_ttl).get(retention, rules.ttl)
        if isinstance(retention, str)
        else rules.ttl
    )


def _cached_tokens(
    name: str,
    cached_contents: Mapping[str, bytes | str | Mapping[str, Any]],
    counter: Tokenizer,
    index: int,
) -> tuple[int, bytes, CachedContentExpiry]:
    """The tokens of the Gemini explicit cache ``name`` (its create body's blocks), the
    digest of that body's canonical JSON, and when a cache it creates expires."""
    raw = cached_contents.get(name)
    if raw is None:
        raise CacheSimulationError(
            f"gemini call {index}: cachedContent {name!r}: pass the body that created it "
            "(Gemini.cached_content_body) in cached_contents"
        )
    body = raw if isinstance(raw, Mapping) else canonical.loads(raw)
    if not isinstance(body, Mapping):
        raise CacheSimulationError(f"gemini cachedContent {name!r}: not a JSON object")
    blocks = _gemini(body)
    config = body.get("toolConfig")
    values = [b.value for b in blocks] + ([config] if config is not None else [])
    tokens = sum(counter.count(v if isinstance(v, str) else canonical.dumps(v)) for v in values)
    expiry = CachedContentExpiry.of(name, body)
    return tokens, hashlib.sha256(canonical.dumpb(body)).digest(), expiry


#: A ``google.protobuf.Duration`` in JSON: seconds, up to nine fractional digits, ``s``.
_DURATION = re.compile(r"(0|[1-9][0-9]*)(\.[0-9]{1,9})?s")
#: Its range (google/protobuf/duration.proto, ``seconds``: "Must be from -315,576,000,000
#: to +315,576,000,000 inclusive").
_DURATION_MAX = 315_576_000_000


@attrs.frozen
class CachedContentExpiry:
    """When a Gemini explicit cache expires, from its create body (see
    :data:`~prefixlock.cache.rules.GEMINI_EXPLICIT_TTL`): ``ttl`` seconds after its
    creation, or at the absolute ``expire_time`` (seconds since the epoch)."""

    ttl: float | None = None
    expire_time: float | None = None
    expire_text: str = ""

    @classmethod
    def of(cls, name: str, body: Mapping[str, Any]) -> CachedContentExpiry:
        """The expiry the body's ``ttl`` or ``expireTime`` asks for (neither: the default
        TTL); a :class:`CacheSimulationError` names a value the API would refuse."""
        ttl, expire = body.get("ttl"), body.get("expireTime")
        where = f"gemini cachedContent {name!r}"
        if ttl is not None and expire is not None:
            raise CacheSimulationError(
                f"{where}: gives both ttl and expireTime; the API takes one of them"
            )
        if expire is not None:
            problem = stamp_problem(expire)
            if problem is not None:
                raise CacheSimulationError(f"{where}: expireTime: {problem}")
            assert isinstance(expire, str)
            return cls(expire_time=seconds(expire), expire_text=expire)
        if ttl is None:
            return cls(ttl=GEMINI_EXPLICIT_TTL)
        if (
            not isinstance(ttl, str)
            or _DURATION.fullmatch(ttl) is None
            or float(ttl[:-1]) > _DURATION_MAX
        ):
            raise CacheSimulationError(
                f"{where}: ttl {ttl!r} is not a duration like '3600s' (seconds, up to nine "
                "fractional digits, then 's')"
            )
        return cls(ttl=float(ttl[:-1]))

    def hours(self, now: float, expires: float) -> Fraction | None:
        """The hours a cache created at ``now`` that expires at ``expires`` is stored
        (and billed): its ttl, or from ``now`` to its ``expireTime``; None for an
        ``expireTime`` cache created while no call has a time (not priced)."""
        if self.ttl is not None:
            return Fraction(self.ttl) / 3600
        if now == math.inf:
            return None
        return Fraction(expires) / 3600 - Fraction(now) / 3600

    def at(self, name: str, index: int, now: float) -> float:
        """The time a cache created at ``now`` expires: ``now`` + its ttl (``inf``
        while no call has a time), or its ``expireTime`` (whenever it is created; a time
        in seconds since the Unix epoch, as :func:`~prefixlock.core.timestamps.seconds`
        gives a scenario's). A body whose ``expireTime`` is already past cannot create
        the cache (the service refuses a past expiry): a :class:`CacheSimulationError`."""
        if self.ttl is not None:
            return now + self.ttl
        assert self.expire_time is not None
        if now != math.inf and self.expire_time <= now:
            raise CacheSimulationError(
                f"gemini call {index}: cachedContent {name!r} must be created (again) for "
                f"this call, but its body's expireTime {self.expire_text} is already past"
            )
        return self.expire_time
