"""Each provider's documented prompt-caching rules, as parameters with their sources.

:func:`rules_for` gives the :class:`CacheRules` of a provider and model (its family's,
matched by the longest model-name prefix, else the provider's default).
:mod:`prefixlock.cache.simulator` applies them to request bodies. Prices are multipliers of
the model's base input-token price, not dollars.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs

from ..core.errors import UnknownNameError

__all__ = [
    "CLAUDE_MIN_TOKENS",
    "DEFAULT_TTL",
    "GEMINI_MIN_TOKENS",
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "ONE_HOUR_TTL",
    "ONE_HOUR_TTL_SECONDS",
    "OPENAI_FAMILIES",
    "OPENAI_INCREMENT",
    "OPENAI_MIN_TOKENS",
    "CacheRules",
    "rules_for",
]

# Dates: every quotation below was taken from the page it cites when the rule was added
# (this file's history: 2026-12-02, issues 10 and 15); none was re-fetched in the change
# that added these dates. Figures the docs do not state are marked NOT VERIFIED.
#
# Anthropic prompt caching, https://platform.claude.com/docs/en/build-with-claude/prompt-caching
# [quoted 2026-12-02]
# * "Prompt caching references the entire prompt - tools, system, and messages (in that
#   order) up to and including the block designated with cache_control."
# * "You can define up to 4 cache breakpoints"; automatic caching (a top-level
#   cache_control) "applies the cache breakpoint to the last cacheable block" and uses
#   one of the four slots.
# * "The system automatically checks for cache hits at all previous content block
#   boundaries (up to approximately 20 blocks before your explicit breakpoint)": we
#   check the breakpoint's own boundary and the 20 block boundaries before it. NOT
#   VERIFIED: issue 15 reads the docs as 20 positions including the breakpoint; not
#   changed here.
# Amazon Bedrock (Claude models, cachePoint blocks) documents the same 4-checkpoint
# limit, https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html; we
# apply the same lookback since the model behind it is the same.
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20

# Anthropic pricing (same page, "Pricing") [quoted 2026-12-02]: "5-minute cache write
# tokens are 1.25 times the base input tokens price ... cache read tokens are 0.1 times
# the base input tokens price". Bedrock's Claude prices use the same ratios (https://aws.amazon.com/bedrock/pricing/).
_CLAUDE_WRITE = Fraction("1.25")
_CLAUDE_READ = Fraction("0.1")
# Cache TTL (issue 10, item 5): a breakpoint may ask for a one-hour entry
# (``cache_control: {"type": "ephemeral", "ttl": "1h"}``; Bedrock ``cachePoint: {"type":
# "default", "ttl": "1h"}``). Same pricing page: "1-hour cache write tokens are 2 times
# the base input tokens price"; reads cost the same for both durations. The simulator has
# no clock, so a TTL changes only the write price (:attr:`CacheRules.write_multiplier_1h`).
_CLAUDE_WRITE_1H = Fraction(2)
#: The ``ttl`` value of a one-hour cache marker (both wires).
ONE_HOUR_TTL = "1h"

# Expiry (issue 15, item 4), from the scenario's timestamps (simulator ``at``).
# [doc text as quoted 2026-12-02, not re-fetched in this change]
# * Anthropic (page above): "By default, the cache has a 5-minute lifetime. The cache is
#   refreshed for no additional cost each time the cached content is used."; the 1-hour
#   option ("ttl": "1h") lives an hour, refreshed the same way.
# * Bedrock (user guide above): "Cache checkpoints have a five minute Time To Live (TTL),
#   which resets with each successful cache hit"; one hour with "ttl": "1h" for the
#   Claude models that accept it.
# * OpenAI (caching guide below): "Cached prefixes generally remain active for 5 to 10
#   minutes of inactivity, up to a maximum of one hour during off-peak periods": we take
#   the low end, 5 minutes (a simulated miss where the service may still hit).
# * Gemini implicit caching: the docs give no lifetime. NOT VERIFIED: we apply the same
#   5 minutes. (An explicit cachedContent has its own ttl, default 1 hour; the simulator
#   does not expire those.)
#: Seconds a cache entry lives after the last call that wrote or read it.
DEFAULT_TTL = 300.0
#: Seconds with ``ttl: 1h`` markers (Anthropic, Bedrock).
ONE_HOUR_TTL_SECONDS = 3600.0

#: Claude model family (longest matching prefix wins) -> minimum cacheable tokens.
#: Anthropic, "Cache limitations" [quoted 2026-12-02]: "4096 tokens for Claude Opus 4.6,
#: Claude Opus 4.5 ...
#: 1024 tokens for Claude Sonnet 4.5, Claude Opus 4.1, Claude Opus 4, Claude Sonnet 4,
#: and Claude Sonnet 3.7 ... 4096 tokens for Claude Haiku 4.5 ... 2048 tokens for Claude
#: Haiku 3.5 and Claude Haiku 3". Sonnet 4.6: the page has said 1024 and 2048 at
#: different times (and anthropic-sdk-python#1194 observes 2048); we use 2048.
CLAUDE_MIN_TOKENS: Mapping[str, int] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 2048,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "": 1024,  # any other Claude model
}

# Bedrock [quoted 2026-12-02]: "cache checkpoints have a minimum number of tokens ...
# For example, the
# Anthropic Claude 3.7 Sonnet model requires at least 1,024 tokens per cache checkpoint.
# That means that your first cache checkpoint can be defined after 1,024 tokens and the
# second cache checkpoint can be defined after 2,048 tokens." (Bedrock user guide, above):
# a checkpoint counts only if it ends at least the minimum after the previous one. The
# per-model minimum is the Claude family's (table above). NOT VERIFIED: issue 15 reports
# that Bedrock documents its own minimums (Claude Sonnet 4.5: 4,096); not changed here,
# since no source in the repo quotes Bedrock's table.

# OpenAI prompt caching, https://developers.openai.com/api/docs/guides/prompt-caching:
# [quoted 2026-12-02] "Caching is enabled automatically for prompts that are 1024 tokens
# or longer"; cache hits happen "in increments of 128 tokens" (the guide and the "Prompt
# Caching 201" cookbook): the guide's own example of cached lengths is 1024, 1152, 1280,
# 1408, ... (tests/test_cache_rules_docs.py pins it); requests are routed by a prefix
# hash combined with `prompt_cache_key`, so the key is part of the cache namespace here.
OPENAI_MIN_TOKENS = 1024
OPENAI_INCREMENT = 128
#: OpenAI model family -> (cached-input multiplier, cache-write multiplier), from the
#: pricing page [quoted 2026-12-02] (https://developers.openai.com/api/docs/pricing:
#: cached input is a tenth
#: of the input price for the GPT-5 family, a quarter for GPT-4.1 / o3 / o4-mini, half
#: for GPT-4o / o1) and the caching guide ("Cache writes have no additional fee on models
#: before the GPT-5.6 family. For GPT-5.6 models and later ... 1.25x").
OPENAI_FAMILIES: Mapping[str, tuple[Fraction, Fraction]] = {
    "gpt-5.6": (Fraction("0.1"), Fraction("1.25")),
    "gpt-5": (Fraction("0.1"), Fraction(1)),
    "gpt-4.1": (Fraction("0.25"), Fraction(1)),
    "o4-mini": (Fraction("0.25"), Fraction(1)),
    "o3": (Fraction("0.25"), Fraction(1)),
    "gpt-4o": (Fraction("0.5"), Fraction(1)),
    "o1": (Fraction("0.5"), Fraction(1)),
    "": (Fraction("0.5"), Fraction(1)),  # other models: the most conservative discount
}

# Gemini implicit caching, https://ai.google.dev/gemini-api/docs/caching [quoted
# 2026-12-02]: "Implicit
# caching is enabled by default for all Gemini 2.5 and newer models"; minimum input
# tokens: Gemini 2.5 Flash 2,048, Gemini 2.5 Pro 2,048, Gemini 3.x 4,096 (earlier
# versions of the page said 1,024 for 2.5 Flash and 4,096 for 2.5 Pro). Discount:
# "Implicit caching provides a 90% discount on cached tokens compared to standard input
# tokens" (Vertex AI context cache overview); tokens that create the cache are "billed
# ... at the standard input token price".
GEMINI_MIN_TOKENS: Mapping[str, int] = {
    "gemini-3": 4096,
    "gemini-2.5": 2048,
    "": 2048,
}
_GEMINI_READ = Fraction("0.1")


@attrs.frozen
class CacheRules:
    """One model family's caching rules (see the module's parameter comments)."""

    provider: str
    family: str
    explicit: bool
    min_tokens: int
    read_multiplier: Fraction
    write_multiplier: Fraction
    increment: int = 1
    max_breakpoints: int = MAX_BREAKPOINTS
    lookback_blocks: int = LOOKBACK_BLOCKS
    #: Bedrock: a checkpoint needs ``min_tokens`` since the previous valid one.
    min_tokens_per_checkpoint: bool = False
    #: The write multiplier of a call whose cache markers ask for a one-hour TTL (None:
    #: the provider has no TTL setting).
    write_multiplier_1h: Fraction | None = None


def _longest_prefix(table: Mapping[str, Any], model: str) -> str:
    return max((key for key in table if model.startswith(key)), key=len)


def _claude_family(model: str) -> str:
    # Bedrock ids: "anthropic.claude-sonnet-4-5-20250929-v1:0", optionally with a
    # cross-region prefix ("us.anthropic.claude-...").
    name = model.rpartition("anthropic.")[2] if "anthropic." in model else model
    return _longest_prefix(CLAUDE_MIN_TOKENS, name)


def rules_for(provider: str, model: str) -> CacheRules:
    """The caching rules of ``provider`` for ``model`` (its family's, else the default)."""
    if provider == "anthropic" or provider == "bedrock-converse":
        family = _claude_family(model)
        return CacheRules(
            provider,
            family or "claude",
            explicit=True,
            min_tokens=CLAUDE_MIN_TOKENS[family],
            read_multiplier=_CLAUDE_READ,
            write_multiplier=_CLAUDE_WRITE,
            min_tokens_per_checkpoint=provider == "bedrock-converse",
            write_multiplier_1h=_CLAUDE_WRITE_1H,
        )
    if provider in ("openai-chat", "openai-responses"):
        family = _longest_prefix(OPENAI_FAMILIES, model)
        read, write = OPENAI_FAMILIES[family]
        return CacheRules(
            provider,
            family or "openai",
            explicit=False,
            min_tokens=OPENAI_MIN_TOKENS,
            read_multiplier=read,
            write_multiplier=write,
            increment=OPENAI_INCREMENT,
        )
    if provider == "gemini":
        family = _longest_prefix(GEMINI_MIN_TOKENS, model)
        return CacheRules(
            provider,
            family or "gemini",
            explicit=False,
            min_tokens=GEMINI_MIN_TOKENS[family],
            read_multiplier=_GEMINI_READ,
            write_multiplier=Fraction(1),
        )
    raise UnknownNameError(f"cache simulation: unknown provider {provider!r}")
