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
:data:`~prefixlock.cache.rules.ONE_HOUR_TTL_SECONDS` when that call's markers carry
``ttl: 1h``); a later call finds it only within that time. A call without a time
arrives at the previous call's time (tool results follow the turn that asked for them);
while no call has a time, nothing expires (the behaviour before timestamps).

* **Explicit** caches (Anthropic, Bedrock): a call may *read* the longest cached prefix
  found by checking, from each breakpoint backwards, :data:`LOOKBACK_BLOCKS` block
  boundaries (the breakpoint's own block is the first check; every tool definition,
  system block and message content block is one block); it *writes* a cache entry at
  every breakpoint whose prefix reaches the model's minimum, paying the write price for
  the tokens beyond what it read up to its last such breakpoint. More than
  :data:`MAX_BREAKPOINTS` breakpoints is an API error.
* **Implicit** caches (OpenAI, Gemini): a call reads the longest prefix (at a block
  boundary) that an earlier call of the same cache namespace sent, if it reaches the
  minimum, rounded down to the provider's increment; the rest of a cacheable prompt is
  written at the write price (the normal input price unless documented otherwise).
* **Gemini explicit cache** (a body naming ``cachedContent``; issue 10, item 3): the
  named cache holds the stable root (its ``cachedContents`` create body, passed as
  ``cached_contents``); its tokens count as input of every call that names it, written
  (at the normal input price: creating a cache is billed as input) by the first such
  call and read at the cache price by every later one. Storage per hour is not priced.

**The floor** (``Simulation(..., floor=True)``): the same bodies, times and lifetimes
under an ideal placement of cache markers: every prefix of every call is cached (at block
boundaries, no breakpoint limit, no lookback window: implicit matching for every
provider), still subject to the service's minimum and increment, and a token not read
costs the lower of the write price and the base price. By induction over the calls its
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

import hashlib
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import CacheSimulationError, UnknownNameError
from .rules import (
    DEFAULT_TTL,
    LOOKBACK_BLOCKS,
    MAX_BREAKPOINTS,
    ONE_HOUR_TTL,
    ONE_HOUR_TTL_SECONDS,
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
    "CallCache",
    "PerfectBound",
    "Simulation",
    "rules_for",
    "simulate",
]

# --- body layouts: blocks in processing order -----------------------------------------


@attrs.frozen
class Block:
    """One block of a body: its identity (tag + canonical JSON) and whether a cache
    breakpoint ends at it."""

    tag: tuple[Any, ...]
    value: Any
    breakpoint: bool = False


_CACHE_CONTROL = "cache_control"


def _without(value: Any, key: str) -> tuple[Any, bool]:
    if isinstance(value, dict) and key in value:
        return {k: v for k, v in value.items() if k != key}, True
    return value, False


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _anthropic(body: Mapping[str, Any]) -> list[Block]:
    """tools -> system -> messages; ``cache_control`` on a block is a breakpoint, at the
    top level it is automatic caching (a breakpoint on the last block)."""
    blocks: list[Block] = []
    for tool in _list(body.get("tools")):
        value, marked = _without(tool, _CACHE_CONTROL)
        blocks.append(Block(("tool",), value, marked))
    system = body.get("system")
    for block in [system] if isinstance(system, str) else _list(system):
        value, marked = _without(block, _CACHE_CONTROL)
        blocks.append(Block(("system",), value, marked))
    for message in _list(body.get("messages")):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        for j, block in enumerate([content] if isinstance(content, str) else _list(content)):
            value, marked = _without(block, _CACHE_CONTROL)
            blocks.append(Block(("message", role, j), value, marked))
    if _CACHE_CONTROL in body and blocks:
        blocks[-1] = attrs.evolve(blocks[-1], breakpoint=True)
    return blocks


def _is_cache_point(value: Any) -> bool:
    return isinstance(value, dict) and "cachePoint" in value


def _with_cache_points(blocks: list[Block], tag: tuple[Any, ...], items: list[Any]) -> None:
    """Append ``items``; a ``cachePoint`` item marks the block before it."""
    index = 0
    for item in items:
        if _is_cache_point(item):
            if blocks:
                blocks[-1] = attrs.evolve(blocks[-1], breakpoint=True)
            continue
        blocks.append(Block((*tag, index), item))
        index += 1


def _bedrock(body: Mapping[str, Any]) -> list[Block]:
    """toolConfig.tools -> system -> messages (the Claude order); ``cachePoint`` blocks
    mark the end of the block before them."""
    blocks: list[Block] = []
    tool_config = body.get("toolConfig")
    tools = tool_config.get("tools") if isinstance(tool_config, dict) else None
    _with_cache_points(blocks, ("tool",), _list(tools))
    _with_cache_points(blocks, ("system",), _list(body.get("system")))
    for message in _list(body.get("messages")):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        _with_cache_points(blocks, ("message", role), _list(content))
    return blocks


def _openai_chat(body: Mapping[str, Any]) -> list[Block]:
    """tools -> messages (the developer message first); one block per message."""
    blocks = [Block(("tool",), tool) for tool in _list(body.get("tools"))]
    blocks.extend(Block(("message",), message) for message in _list(body.get("messages")))
    return blocks


def _openai_responses(body: Mapping[str, Any]) -> list[Block]:
    """tools -> instructions -> input items; one block per item."""
    blocks = [Block(("tool",), tool) for tool in _list(body.get("tools"))]
    if isinstance(body.get("instructions"), str):
        blocks.append(Block(("instructions",), body["instructions"]))
    blocks.extend(Block(("item",), item) for item in _list(body.get("input")))
    return blocks


def _gemini(body: Mapping[str, Any]) -> list[Block]:
    """systemInstruction parts -> tool declarations -> contents parts."""
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
    for content in _list(body.get("contents")):
        role = content.get("role") if isinstance(content, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        blocks.extend(Block(("part", role, j), part) for j, part in enumerate(_list(parts)))
    return blocks


#: Provider name -> its body layout.
_LAYOUTS: Mapping[str, Callable[[Mapping[str, Any]], list[Block]]] = {
    "anthropic": _anthropic,
    "bedrock-converse": _bedrock,
    "gemini": _gemini,
    "openai-chat": _openai_chat,
    "openai-responses": _openai_responses,
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
    write_multiplier: Fraction
    #: Seconds the entries this call wrote or read live after it (its markers' TTL, its
    #: ``prompt_cache_retention``, else the rules' TTL).
    lifetime: float = DEFAULT_TTL

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    @property
    def cost(self) -> Fraction:
        """In base input-token units."""
        return (
            self.uncached_tokens
            + self.cache_write_tokens * self.write_multiplier
            + self.cache_read_tokens * self.read_multiplier
        )

    @property
    def uncached_cost(self) -> Fraction:
        """The same prompt without any caching: every token at the base price."""
        return Fraction(self.input_tokens)


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
    def cached_share(self) -> float:
        """Share of all input tokens read from the cache (0 without input)."""
        total = self.input_tokens
        return self.cache_read_tokens / total if total else 0.0

    @property
    def cost_ratio(self) -> float:
        """Simulated cost / cost without caching (1.0 without input)."""
        uncached = self.uncached_cost
        return float(self.cost / uncached) if uncached else 1.0

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
    the call's write price, and read at its read price by every later call of the same
    epoch; a compaction (a new epoch) starts over. No minimum, no breakpoint limit, no
    expiry. Within an epoch a call's first ``max(earlier calls' input tokens)`` tokens
    are reads, the rest writes.

    Where a provider sends tokens uncached for less than its write price (Anthropic and
    Bedrock: uncached 1x, writes 1.25x or 2x), a simulated cost can fall just below this
    bound; the ratio is a yardstick, not a proof of optimality.
    """

    def __init__(self) -> None:
        self.cost = Fraction(0)
        self._seen = 0
        self._epoch: int | None = None

    def add(self, call: CallCache, epoch: int) -> None:
        if epoch != self._epoch:
            self._epoch, self._seen = epoch, 0
        read = min(self._seen, call.input_tokens)
        self.cost += read * call.read_multiplier
        self.cost += (call.input_tokens - read) * call.write_multiplier
        self._seen = max(self._seen, call.input_tokens)

    def ratio(self, cost: Fraction) -> float:
        """``cost`` as a multiple of the bound (1.0 when the bound is 0)."""
        return float(cost / self.cost) if self.cost else 1.0


# --- simulation ------------------------------------------------------------------------


def _prefix_hashes(keys: Sequence[bytes]) -> Iterator[bytes]:
    state = b""
    for key in keys:
        state = hashlib.sha256(state + hashlib.sha256(key).digest()).digest()
        yield state


def _round_down(tokens: int, rules: CacheRules) -> int:
    """Cacheable part of a ``tokens`` prefix: 0 below the minimum, else whole increments."""
    if tokens < rules.min_tokens:
        return 0
    return tokens - tokens % rules.increment


def simulate(
    provider: str,
    bodies: Iterable[bytes | str | Mapping[str, Any]],
    *,
    model: str | None = None,
    tokenizer: Tokenizer | None = None,
    cached_contents: Mapping[str, bytes | str | Mapping[str, Any]] | None = None,
) -> CacheReport:
    """Simulate the prompt cache over one conversation's request bodies, in call order.

    ``model`` is used when a body does not name one (Gemini and Bedrock carry it in the
    URL); ``tokenizer`` defaults to the UTF-8-bytes/4 estimate; ``cached_contents`` maps
    a Gemini explicit cache's name to the body that created it. Raises
    :class:`PrefixlockError` for an unknown provider, a body that is not a JSON object,
    or an explicit-cache call with more breakpoints than the API accepts.
    """
    simulation = Simulation(
        provider, model=model, tokenizer=tokenizer, cached_contents=cached_contents
    )
    for raw in bodies:
        simulation.add(raw)
    return simulation.report()


class Simulation:
    """:func:`simulate` one body at a time (:meth:`add`), for callers that stream the
    bodies and keep none of them; :meth:`report` at any point. ``floor``: simulate the
    floor instead (see the module docstring)."""

    def __init__(
        self,
        provider: str,
        *,
        model: str | None = None,
        tokenizer: Tokenizer | None = None,
        cached_contents: Mapping[str, bytes | str | Mapping[str, Any]] | None = None,
        floor: bool = False,
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
        self.token_memo: dict[bytes, int] = {}
        #: Per namespace: prefix hash -> the time its entry expires (``inf``: never,
        #: for entries last used by a call without a time).
        self.explicit_entries: dict[tuple[Any, ...], dict[bytes, float]] = {}
        self.implicit_seen: dict[tuple[Any, ...], dict[bytes, float]] = {}
        self.last_at: float | None = None
        self.calls: list[CallCache] = []
        self.cached_contents = cached_contents or {}
        self.created: set[str] = set()  # Gemini explicit caches already written
        self.model_name = model or ""
        #: The floor (see the module docstring): an ideal cache under the same lifetimes.
        self.floor = floor
        self.rules = rules_for(provider, self.model_name)

    def add(self, raw: bytes | str | Mapping[str, Any], at: float | None = None) -> CallCache:
        """Simulate the next call's body; ``at``: its time in seconds (any epoch), if
        known. Times must not go backwards."""
        provider, model, counter, token_memo = (
            self.provider,
            self.model,
            self.counter,
            self.token_memo,
        )
        index = len(self.calls) + 1
        body = raw if isinstance(raw, Mapping) else canonical.loads(raw)
        if not isinstance(body, Mapping):
            raise CacheSimulationError(f"{provider} call {index}: the body is not a JSON object")
        body_model = body.get("model")
        model_name = body_model if isinstance(body_model, str) else (model or "")
        self.model_name = model_name
        rules = self.rules = rules_for(provider, model_name)
        namespace = (model_name, *(body.get(key) for key in _NAMESPACE_KEYS))
        blocks = self.layout(body)
        keys = [canonical.dumpb([list(b.tag), b.value]) for b in blocks]
        cumulative: list[int] = []
        total = 0
        for block, key in zip(blocks, keys, strict=True):
            tokens = token_memo.get(key)
            if tokens is None:
                text = block.value if isinstance(block.value, str) else canonical.dumps(block.value)
                tokens = token_memo[key] = counter.count(text)
            total += tokens
            cumulative.append(total)
        hashes = list(_prefix_hashes(keys))
        breakpoints = [i for i, b in enumerate(blocks) if b.breakpoint]
        write_multiplier = _write_multiplier(rules, body)
        if at is not None and self.last_at is not None and at < self.last_at:
            raise CacheSimulationError(
                f"{provider} call {index}: its time goes back {self.last_at - at:g} s"
            )
        if at is None:  # with the previous call (never expires before any time is known)
            now = math.inf if self.last_at is None else self.last_at
        else:
            now = self.last_at = at
        one_hour = rules.write_multiplier_1h is not None and (
            write_multiplier == rules.write_multiplier_1h
        )
        lifetime = ONE_HOUR_TTL_SECONDS if one_hour else _lifetime(rules, body)
        until = now + lifetime
        if self.floor:  # after the lifetime: it depends on the real rules and markers
            rules = attrs.evolve(rules, explicit=False)
            write_multiplier = min(write_multiplier, Fraction(1))
        if rules.explicit:
            if len(breakpoints) > rules.max_breakpoints:
                raise CacheSimulationError(
                    f"{provider} call {index}: {len(breakpoints)} cache breakpoints; the API "
                    f"accepts at most {rules.max_breakpoints}"
                )
            entries = self.explicit_entries.setdefault(namespace, {})
            live = _Live(entries, now)
            read, write, written, hit = _explicit(rules, breakpoints, cumulative, hashes, live)
            if hit is not None:
                entries[hit] = until  # reading an entry refreshes it
            for entry in written:
                entries[entry] = until
        else:
            seen = self.implicit_seen.setdefault(namespace, {})
            live = _Live(seen, now)
            matched = next((i for i in range(len(hashes) - 1, -1, -1) if hashes[i] in live), -1)
            read = _round_down(cumulative[matched], rules) if matched >= 0 else 0
            write = max(0, _round_down(total, rules) - read)
            for h in hashes:
                seen[h] = until
        name = body.get("cachedContent") if provider == "gemini" else None
        if isinstance(name, str):
            cached = _cached_tokens(name, self.cached_contents, counter, index)
            total += cached
            if name in self.created:
                read += cached
            else:
                write += cached
                self.created.add(name)
        call = CallCache(
            index=index,
            input_tokens=total,
            cache_read_tokens=read,
            cache_write_tokens=write,
            blocks=len(blocks),
            breakpoints=len(breakpoints),
            read_multiplier=rules.read_multiplier,
            write_multiplier=write_multiplier,
            lifetime=lifetime,
        )
        self.calls.append(call)
        return call

    def report(self) -> CacheReport:
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
    rules: CacheRules,
    breakpoints: Sequence[int],
    cumulative: Sequence[int],
    hashes: Sequence[bytes],
    entries: _Live,
) -> tuple[int, int, list[bytes], bytes | None]:
    """(read tokens, write tokens, entries written, the entry read) of one
    explicit-cache call."""
    hit = -1
    for b in breakpoints:
        # The breakpoint's own block is check #1: blocks b .. b - (lookback - 1).
        for p in range(b, max(-1, b - rules.lookback_blocks), -1):
            if hashes[p] in entries:
                hit = max(hit, p)
                break
    read = cumulative[hit] if hit >= 0 else 0
    valid: list[int] = []
    since = 0
    for b in breakpoints:
        needed = cumulative[b] - since if rules.min_tokens_per_checkpoint else cumulative[b]
        if needed >= rules.min_tokens:
            valid.append(b)
            since = cumulative[b]
    write = max(0, cumulative[valid[-1]] - read) if valid else 0
    return read, write, [hashes[b] for b in valid], hashes[hit] if hit >= 0 else None


def _lifetime(rules: CacheRules, body: Mapping[str, Any]) -> float:
    """Seconds the call's entries live: by its ``prompt_cache_retention`` where the rules
    have one for it (OpenAI), else the rules' TTL."""
    retention = body.get(RETENTION_OPTION)
    return (
        dict(rules.retention_ttl).get(retention, rules.ttl)
        if isinstance(retention, str)
        else rules.ttl
    )


def _write_multiplier(rules: CacheRules, body: Mapping[str, Any]) -> Fraction:
    """The call's cache-write price: ``write_multiplier_1h`` when its cache markers ask
    for a one-hour TTL (issue 10, item 5; the TTL is one setting per agent, so every
    marker of a body carries the same one), else ``write_multiplier``."""
    if rules.write_multiplier_1h is None:
        return rules.write_multiplier
    # Only where prefixlock places markers besides the history (top level, tools, system)
    # and the last message (Bedrock's tail cachePoint): no walk over the whole history.
    messages = body.get("messages")
    last = messages[-1:] if isinstance(messages, list) else []
    places = [body.get(k) for k in ("cache_control", "tools", "system", "toolConfig")]
    if _has_one_hour_marker({"cache_control": places[0]}) or _has_one_hour_marker(
        [*places[1:], last]
    ):
        return rules.write_multiplier_1h
    return rules.write_multiplier


def _has_one_hour_marker(value: Any) -> bool:
    """Whether a ``cache_control`` or ``cachePoint`` object in ``value`` has ttl 1h."""
    if isinstance(value, Mapping):
        for key in ("cache_control", "cachePoint"):
            marker = value.get(key)
            if isinstance(marker, Mapping) and marker.get("ttl") == ONE_HOUR_TTL:
                return True
        return any(_has_one_hour_marker(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_one_hour_marker(v) for v in value)
    return False


def _cached_tokens(
    name: str,
    cached_contents: Mapping[str, bytes | str | Mapping[str, Any]],
    counter: Tokenizer,
    index: int,
) -> int:
    """The tokens of the Gemini explicit cache ``name`` (its create body's blocks)."""
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
    return sum(counter.count(v if isinstance(v, str) else canonical.dumps(v)) for v in values)
