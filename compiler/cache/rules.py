"""Each provider's documented prompt-caching rules, as parameters with their sources.

:func:`rules_for` gives the :class:`CacheRules` of a provider and model (its family's,
matched by the longest model-name prefix, else the provider's default).
:mod:`prefixlock.cache.simulator` applies them to request bodies. Prices are multipliers of
the model's base input-token price, not dollars.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs

from ..core.errors import UnknownNameError
from ..core.limits import (
    OPENAI_24H_ONLY,
    OPENAI_BREAKPOINT_MODELS,
    OPENAI_EXTENDED_RETENTION,
    one_hour_ttl_refusal,
)

__all__ = [
    "BEDROCK_MIN_TOKENS",
    "CLAUDE_LONG_PROMPT",
    "CLAUDE_MIN_TOKENS",
    "CLAUDE_READ_PRICES",
    "DEFAULT_TTL",
    "FIVE_MINUTE_TTL",
    "GEMINI_EXPLICIT_TTL",
    "GEMINI_MIN_TOKENS",
    "GEMINI_STORAGE_PER_HOUR",
    "LOOKBACK_BLOCKS",
    "MAX_BREAKPOINTS",
    "ONE_HOUR_TTL",
    "ONE_HOUR_TTL_SECONDS",
    "OPENAI_BREAKPOINT_TTL",
    "OPENAI_CONSIDERED_BREAKPOINTS",
    "OPENAI_EXACT_FAMILIES",
    "OPENAI_EXACT_TTL",
    "OPENAI_EXTENDED_RETENTION",
    "OPENAI_FAMILIES",
    "OPENAI_INCREMENT",
    "OPENAI_MIN_TOKENS",
    "OPENAI_RETENTION_TTL",
    "OPENAI_WRITTEN_EXPLICIT",
    "RETENTION_OPTION",
    "CacheRules",
    "rules_for",
]

# Dates: "[quoted D]" is when the quotation was taken. Those of 2026-12-02 come from the
# page the rule cites when the rule was added (issues 10 and 15). Those of 2026-12-03 come
# from stored copies of the cited pages found with the project's document search (this
# machine has no network); each says which copy and, where the copy carries one, its
# date. Figures the docs do not state are marked NOT VERIFIED.
#
# Anthropic prompt caching, https://platform.claude.com/docs/en/build-with-claude/prompt-caching
# [quoted 2026-12-02]
# * "Prompt caching references the entire prompt - tools, system, and messages (in that
#   order) up to and including the block designated with cache_control."
# * "You can define up to 4 cache breakpoints"; automatic caching (a top-level
#   cache_control) "applies the cache breakpoint to the last cacheable block" and uses
#   one of the four slots.
# * Lookback [quoted 2026-12-03, stored copy of the same page, docs.claude.com era of
#   Claude Sonnet 4.5 / Haiku 4.5, "How automatic prefix checking works"]:
#   "Backward sequential checking: The system checks for cache hits by working backwards
#   from your explicit breakpoint, checking each previous block in reverse order."
#   "20-block lookback window: The system only checks up to 20 blocks before each
#   explicit cache_control breakpoint. After checking 20 blocks without a match, it stops
#   checking and moves to the next explicit breakpoint (if any)." Its example: "Consider
#   a conversation with 30 content blocks where you set cache_control only on block 30
#   ... If you modify block 25 ... 30 -> 29 -> 28... -> 25 (no match) -> 24 (match!)
#   ... If you modify block 5 ... 30 -> 29 -> 28... -> 11 (check #20). After 20 checks
#   without finding a match, it stops looking. ... if you had set an explicit
#   cache_control breakpoint on block 5, ... block 5 (no match) -> block 4 (match!)".
#   The current page words it "The lookback window is 20 blocks. The system checks at
#   most 20 positions per breakpoint" (as quoted in a third-party verification note of
#   2026-10; the stored copies of the page itself that we found are the older one).
#   So 20 positions *including* the breakpoint's own block (30 down to 11): we check
#   blocks b, b-1, ..., b-19 (until 2026-12-03 we checked 21). What counts as one
#   position: a block, and the same page's "What can be cached" lists the blocks: "Tool
#   definitions in the tools array", "Content blocks in the system array", "Content
#   blocks in the messages.content array" (tool use and tool results included); we count
#   each as one. NOT VERIFIED: the page's examples use message content blocks only, so
#   whether a tool definition counts as a position of the window is our reading.
# Amazon Bedrock (Claude models, cachePoint blocks) documents the same 4-checkpoint
# limit and the same window, https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html
# [quoted 2026-12-03, stored copy of the current page, "Prompt caching for models from
# Anthropic"]: "the system automatically checks for cache hits at previous content block
# boundaries, looking back up to approximately 20 content blocks from your specified
# breakpoint", "multiple cache checkpoints (up to 4 for Claude models)".
MAX_BREAKPOINTS = 4
LOOKBACK_BLOCKS = 20

# Anthropic pricing (same page, "Pricing") [quoted 2026-12-02; the same three lines in the
# stored copy of 2026-12-03]: "5-minute cache write tokens are 1.25 times the base input
# tokens price ... 1-hour cache write tokens are 2 times the base input tokens price ...
# cache read tokens are 0.1 times the base input tokens price". Bedrock's Claude prices
# use the same ratios (https://aws.amazon.com/bedrock/pricing/).
_CLAUDE_WRITE = Fraction("1.25")
_CLAUDE_READ = Fraction("0.1")
# The read price by model, the pricing page's "Cache Hits & Refreshes" beside "Base Input
# Tokens" (https://platform.claude.com/docs/en/about-claude/pricing and the prompt-caching
# page's table) [found with the document search 2026-12-07, stored copies]: "Claude Opus
# 5.5 | $4 / MTok | $5 / MTok | $8 / MTok | $0.20 / MTok", "Claude Fable 5.1 | $10 / MTok |
# $12.50 / MTok | $20 / MTok | $0.25 / MTok" (Mythos 5.1 the same), "Claude Fable 5 | $10
# / MTok | $12.50 / MTok | $20 / MTok | $1 / MTok"; footnotes "Cache hits and refreshes on
# Claude Fable 5.1 and Claude Mythos 5.1 are priced at 0.025x the base input price", "...
# on Claude Opus 5.5 and Claude Sonnet 5.5 are priced at 0.05x the base input price", "All
# other models use the standard 0.1x multiplier"; the models overview: "prompt cache reads
# cost 10% of the base input price (2.5% on Claude Fable 5.1 and Claude Mythos 5.1, 5% on
# Claude Opus 5.5 and Claude Sonnet 5.5)" (a copy of 2026-10-08; Sonnet 5.5 read at 0.1x,
# "$0.20 / MTok" of $2, before 2026-10-07 by third-party changelogs: the simulator prices
# today's). Every model's writes are 1.25x and 2x its input (all rows fit). NOT VERIFIED:
# Fable 5.2 and Mythos 5.2 (first-party: "$8 USD per MTok" input only; their "$0.20 cache
# read" is in third-party price lists: 0.025x, as 5.1); Bedrock's prices for these
# exceptions (third-party: Bedrock's Claude prices are Anthropic's). Claude Haiku 5.5 "is
# priced by prompt length" ($0.10 input up to 100,000 tokens, $0.50 over; cache prices in
# the same ratios: $0.125 / $0.20 / $0.01 and $0.625 / $1 / $0.05; the pricing page:
# "Claude Haiku 5.5 is priced by prompt length: a prompt of over 100,000 tokens pays higher
# prices"): CLAUDE_LONG_PROMPT, every input price of such a call 5x. What counts as the
# prompt: all its input tokens, read from and written to the cache included (third-party
# usage tools, kurofune/claudit v1.9.2; NOT VERIFIED on a first-party page), which is what
# the simulator counts. Its output, 5x too, is not simulated.
#: Claude model prefix (after Bedrock's ``anthropic.``; longest wins) -> cache read price
#: as a multiple of its base input price.
CLAUDE_READ_PRICES: Mapping[str, Fraction] = {
    "claude-opus-5-5": Fraction("0.05"),
    "claude-sonnet-5-5": Fraction("0.05"),
    "claude-fable-5-1": Fraction("0.025"),
    "claude-mythos-5-1": Fraction("0.025"),
    "claude-fable-5-2": Fraction("0.025"),
    "claude-mythos-5-2": Fraction("0.025"),
    "": _CLAUDE_READ,
}
#: Claude model prefix -> (prompt tokens, factor): a call whose prompt has more tokens
#: pays every input price times the factor (above).
CLAUDE_LONG_PROMPT: Mapping[str, tuple[int, Fraction]] = {
    "claude-haiku-5-5": (100_000, Fraction(5)),
}
# Cache TTL (issue 10, item 5): a breakpoint may ask for a one-hour entry
# (``cache_control: {"type": "ephemeral", "ttl": "1h"}``; Bedrock ``cachePoint: {"type":
# "default", "ttl": "1h"}``). Same pricing page: "1-hour cache write tokens are 2 times
# the base input tokens price"; reads cost the same for both durations. A TTL sets the
# write price (:attr:`CacheRules.write_multiplier_1h`) and, with the calls' times, how
# long an entry lives (below).
_CLAUDE_WRITE_1H = Fraction(2)
#: The ``ttl`` value of a one-hour cache marker (both wires).
ONE_HOUR_TTL = "1h"
#: The ``ttl`` of a marker without one (both wires' default).
FIVE_MINUTE_TTL = "5m"

# Mixed TTLs in one request (issue 15, the ``cache_ttl: turn`` policy of
# providers/cache_ttl.py) [quoted 2026-12-03 from stored copies of the current page found
# with the project's document search: a copy with Claude Opus 5 in its examples, and one
# with Claude Opus 4.8; same text], "Mixing different TTLs":
#   "You can use both 1-hour and 5-minute cache controls in the same request, but with an
#   important constraint: Cache entries with longer TTL must appear before shorter TTLs
#   (that is, a 1-hour cache entry must appear before any 5-minute cache entries).
#   When mixing TTLs, the API determines three billing locations in your prompt:
#   1. Position `A`: The token count at the highest cache hit (or 0 if no hits).
#   2. Position `B`: The token count at the highest 1-hour `cache_control` block after
#   `A` (or equals `A` if none exist).
#   3. Position `C`: The token count at the last `cache_control` block.
#   If `B` or `C` is larger than `A`, it is necessarily a cache miss, because `A` is the
#   highest cache hit.
#   You'll be charged for: 1. Cache read tokens for `A`. 2. 1-hour cache write tokens for
#   `(B - A)`. 3. 5-minute cache write tokens for `(C - B)`."
# The page's "three examples" are a diagram (prompt-cache-mixed-ttl.svg) whose figures no
# stored copy holds as text; its one figure in text is the usage of the section "1-hour
# cache duration": "cache_read_input_tokens": 1800, "cache_creation_input_tokens": 248,
# "ephemeral_5m_input_tokens": 148, "ephemeral_1h_input_tokens": 100 (that is A = 1800,
# B = 1900, C = 2048; tests/test_cache_rules_docs.py pins it). The same page: "The 1-hour
# cache duration is available on the Claude API, Amazon Bedrock, ...".
# Bedrock: the user guide gives the marker, "Specify the desired ttl value as below, when
# ttl value not specified the default behavior of 5 minutes caching applies.
# "cachePoint" : { "type": "default", "ttl" : "5m | 1h" }" [stored copy of the current
# page, quoted 2026-12-03], and botocore 1.44.8's bedrock-runtime service model (the
# installed one) has ``CachePointBlock.ttl`` (enum "5m", "1h": "Optional TTL duration for
# cache entries") and ``TokenUsage.cacheDetails``: "Detailed breakdown of cache writes by
# TTL. Empty if no cache creation occurred. Sorted by TTL duration (1h before 5m)", so one
# call may write both. The ordering rule on Bedrock is not in AWS's pages we found; it is
# observed: strands-agents/harness-sdk#3758 (2026-08-11) quotes the service's
# "ValidationException: messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control
# block must not come after a ttl='5m' cache_control block" ("Verified live against
# us-west-2 / claude-sonnet-4-5"). NOT VERIFIED: that Bedrock bills A / B / C as Anthropic
# does (the simulator assumes it: the same models, and the usage splits writes by TTL).
# The simulator refuses a body with a 1h marker after a 5m one (an API error, like a fifth
# breakpoint), keeps each entry for the TTL of the marker that wrote it (a read refreshes
# an entry for its own TTL), and bills A / B / C.

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
#   the low end, 5 minutes (a simulated miss where the service may still hit). The
#   current guide splits this by model and retention: see OPENAI_RETENTION_TTL below.
# * Gemini implicit caching: the docs give no lifetime. NOT VERIFIED: we apply the same
#   5 minutes. (An explicit cachedContent has its own ttl, default 1 hour:
#   GEMINI_EXPLICIT_TTL below.)
#
# The longer lifetimes a body can ask for (issue 15, the long-session economics of
# ``prefixlock bench``) [quoted 2026-12-03 from stored copies found with the document
# search]:
# * Anthropic: the current page (the copy whose examples use Claude Opus 5) opens "using
#   automatic caching or explicit breakpoints with 5-minute or 1-hour TTLs"; it names no
#   model without the 1-hour option. prefixlock: ``cache_ttl: 1h`` (providers/cache_ttl.py).
# * Bedrock: AWS's announcement of 2026-01-26 (as quoted by aws-samples/
#   bedrock-access-gateway#224, "Per AWS docs: claude-haiku-4-5, claude-sonnet-4-5,
#   claude-opus-4-5", and a re-publication of 2026-01-27): the 1-hour TTL is "generally
#   available for Claude Sonnet 4.5, Claude Haiku 4.5 and Claude Opus 4.5". NOT VERIFIED:
#   later Claude models on Bedrock (not in the announcement). prefixlock: ``cache_ttl: 1h``.
# * OpenAI: openai-python 3.57.0's ``prompt_cache_retention`` (Chat and Responses): "Set
#   to `24h` to enable extended prompt caching ... For `gpt-5.5`, `gpt-5.5-pro`, and
#   future models, only `24h` is supported. For older models that support both
#   `in_memory` and `24h`, the default depends on your organization's data retention
#   policy: Organizations without ZDR enabled default to `24h`. Organizations with ZDR
#   enabled default to `in_memory`"; the guide's model list ("Extended prompt cache
#   retention is available for the following models", in a third-party copy of the guide
#   fetched 2026-03-05 and in Microsoft's Azure OpenAI copy): gpt-5.4, gpt-5.2, gpt-5.1
#   (and -codex, -codex-mini, -chat), gpt-5, gpt-5-codex, gpt-4.1. Extended retention is
#   "NOT zero-data-retention eligible (unlike in-memory)" (the third-party copy). The same
#   SDK marks the field "Deprecated. Use `prompt_cache_options.ttl` instead", an option
#   "Supported for `gpt-5.6` and later models" whose "`ttl` defaults to `30m`": prefixlock
#   sends no ``prompt_cache_options`` (GPT-5.6 and later get OPENAI_EXACT_TTL whatever the
#   body says). prefixlock: ``prompt_cache_retention`` in the settings options, as given.
# * Gemini: implicit caching has no lifetime setting ("Send requests with a similar
#   prefix in a short amount of time", Vertex AI context cache overview); an explicit
#   cache (``cachedContent``, providers/gemini.py) holds the stable root for its own ttl,
#   "extend[ed] from the default 60 minutes", with "storage costs based on how long caches
#   are stored", priced by GEMINI_STORAGE_PER_HOUR below.
#: Seconds a cache entry lives after the last call that wrote or read it.
DEFAULT_TTL = 300.0
# Gemini explicit caches (``cachedContents``) [quoted 2026-12-07 from stored copies found
# with the document search]:
# * The lifetime: "When you cache a set of tokens, you can choose how long you want the
#   cache to exist before the tokens are automatically deleted. This caching duration is
#   called the time to live (TTL). If not set, the TTL defaults to 1 hour."
#   (https://ai.google.dev/gemini-api/docs/caching).
# * Its form, in the create body: "ttl: The TTL for this resource. The expiration time is
#   computed: now + TTL. It is a duration string, with up to nine fractional digits,
#   terminated by 's'. Example: "3.5s"." or "expireTime: Timestamp of when this resource
#   is considered expired. Uses RFC 3339 format" (the Google Gen AI SDKs'
#   CachedContent config types, googleapis.github.io/js-genai and java-genai).
# * A use does not extend it: "Updates CachedContent resource (only expiration is
#   updatable)." (https://ai.google.dev/api/rest/v1beta/cachedContents/patch): only an
#   update moves the expiry. So, unlike the implicit caches and Anthropic's, the
#   simulator counts a cache's life from its creation, not from its last read.
# * After it: a request naming the expired cache fails with NOT_FOUND, and a deployment
#   creates the cache again (workglow-dev/libs#656, "reactive CachedContent NOT_FOUND"
#   handling): the simulator writes it again on the first call after its expiry.
# * Storage is billed per token-hour ("Storage duration" in the same caching page), by
#   model: GEMINI_STORAGE_PER_HOUR below.
#: Seconds a Gemini explicit cache lives after its creation without ``ttl`` or
#: ``expireTime`` in its create body.
GEMINI_EXPLICIT_TTL = 3600.0
# Bedrock's one-hour TTL by model: Bedrock takes ``cachePoint`` ``"ttl": "1h"`` on Claude
# 4.5 and later only (prefixlock.core.limits.one_hour_ttl_refusal quotes the sources);
# these rules price no one-hour write for another model (``write_multiplier_1h`` None) and
# the simulator refuses a body that asks for one there.
#: Seconds with ``ttl: 1h`` markers (Anthropic, Bedrock).
ONE_HOUR_TTL_SECONDS = 3600.0

#: Claude model family (longest matching prefix wins) -> minimum cacheable tokens.
#: Anthropic, "Cache limitations" [quoted 2026-12-03 from a stored copy of the current
#: page, the one that lists Claude Opus 5]: "On the Claude API, Claude Platform on AWS,
#: Google Cloud, and Microsoft Foundry, the minimum cacheable prompt length is: * 512
#: tokens for Claude Opus 5, Claude Fable 5, and Claude Mythos 5 * 2,048 tokens for Claude
#: Mythos Preview and Claude Opus 4.7 * 4,096 tokens for Claude Opus 4.6 and Claude Opus
#: 4.5 * 1,024 tokens for Claude Opus 4.8, Claude Sonnet 5, Claude Sonnet 4.6, Claude
#: Sonnet 4.5, Claude Opus 4.1 ..., Claude Opus 4 ..., and Claude Sonnet 4 ... * 4,096
#: tokens for Claude Haiku 4.5 * 2,048 tokens for Claude Haiku 3.5 ... These minimums
#: apply on every platform where each model is available." Claude Sonnet 3.7 (1,024) and
#: Claude Haiku 3 (2,048) are no longer listed; the figures are the page's earlier ones
#: [quoted 2026-12-02]. Sonnet 4.6: the page said 2,048 for a while (so did this table);
#: it now says 1,024, and anthropic-sdk-python#1194 observes no cache below 2,048. We
#: follow the page. The copy of 2026-10-08 [found 2026-12-07]: "512 tokens for Claude
#: Fable 5.1, Claude Mythos 5.1, Claude Opus 5.5, Claude Opus 5, Claude Sonnet 5.5, Claude
#: Fable 5, Claude Mythos 5, and Claude Haiku 5.5" (Sonnet 5.5 and Haiku 5.5 had fallen to
#: Sonnet 5's 1,024 and the default). NOT VERIFIED: Fable 5.2 / Mythos 5.2 (512 by their
#: prefix; no page found).
CLAUDE_MIN_TOKENS: Mapping[str, int] = {
    "claude-opus-5-5": 512,
    "claude-opus-5": 512,
    "claude-sonnet-5-5": 512,
    "claude-haiku-5-5": 512,
    "claude-fable-5-2": 512,  # NOT VERIFIED: no page found
    "claude-fable-5-1": 512,
    "claude-fable-5": 512,
    "claude-mythos-5-2": 512,  # NOT VERIFIED: no page found
    "claude-mythos-5-1": 512,
    "claude-mythos-5": 512,
    "claude-mythos-preview": 2048,
    "claude-opus-4-7": 2048,
    "claude-opus-4-8": 1024,
    "claude-sonnet-5": 1024,
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-3-7-sonnet": 1024,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
    "": 1024,  # any other Claude model
}

# Bedrock (user guide above) [quoted 2026-12-03, stored copy of the current page]:
# "Cache checkpoints have a minimum and maximum number of tokens, depending on the model.
# You can only create a cache checkpoint if your total prompt prefix meets the minimum
# number of tokens. ... For a model with a 1,024-token minimum, your first cache
# checkpoint can be defined after 1,024 tokens and your second cache checkpoint can be
# defined after 2,048 tokens. If you add a cache checkpoint before meeting the minimum
# number of tokens, your inference still succeeds, but your prefix isn't cached." and
# "The minimum cache size is evaluated against the cumulative tokens across all three
# sections combined, not each section individually": a checkpoint counts only if it ends
# at least the minimum after the previous one, counted over tools, system and messages.
#
#: Bedrock model id (without the cross-region prefix; longest matching prefix wins) ->
#: minimum tokens per cache checkpoint: Bedrock's own table, "Supported models, Regions,
#: and explicit caching limits", column "Minimum number of tokens per cache checkpoint"
#: [quoted 2026-12-03, stored copy of the current page, the one listing Claude Opus 5]:
#: anthropic.claude-opus-4-8 1,024; anthropic.claude-opus-4-7 4,096;
#: anthropic.claude-opus-4-6-v1 4,096; anthropic.claude-opus-4-5-20251101-v1:0 4,096;
#: anthropic.claude-sonnet-5 1,024; anthropic.claude-sonnet-4-6 1,024;
#: anthropic.claude-sonnet-4-5-20250929-v1:0 1,024; anthropic.claude-3-7-sonnet-20250219-v1:0
#: 1,024; anthropic.claude-3-5-sonnet-20241022-v2:0 1,024; anthropic.claude-haiku-4-5-20251001-v1:0
#: 4,096; anthropic.claude-opus-5, -fable-5, -mythos-5 (and their 5.1) 512;
#: anthropic.claude-mythos-preview 4,096. Where it differs from Anthropic's own table:
#: Claude Opus 4.7 (4,096 here, 2,048 there) and Mythos Preview (4,096, 2,048).
#: The table changes: an earlier copy of the same page (captured 2026-05-16) gave Claude
#: Sonnet 4.5 4,096 ("Claude Opus 4.5, Claude Opus 4.6, Claude Haiku 4.5, and Claude
#: Sonnet 4.5 require at least 4,096 tokens per cache checkpoint"), the figure issue 15
#: cites; the current page says 1,024, and so does Anthropic's ("These minimums apply on
#: every platform"). Models the current table no longer lists take that earlier copy's
#: figure (Claude Opus 4: 1,024) or, failing that, Anthropic's (Claude 3.5 Haiku: 2,048,
#: also the figure of an older copy of the table). NOT VERIFIED: Amazon Nova (the older
#: copy: 1,000 tokens, no tools checkpoint) is not simulated; a Nova model falls back to
#: the Claude default below.
BEDROCK_MIN_TOKENS: Mapping[str, int] = {
    "anthropic.claude-opus-5": 512,
    "anthropic.claude-fable-5": 512,
    "anthropic.claude-fable-5-1": 512,
    "anthropic.claude-mythos-5": 512,
    "anthropic.claude-mythos-5-1": 512,
    "anthropic.claude-mythos-preview": 4096,
    "anthropic.claude-opus-4-8": 1024,
    "anthropic.claude-opus-4-7": 4096,
    "anthropic.claude-opus-4-6": 4096,
    "anthropic.claude-opus-4-5": 4096,
    "anthropic.claude-opus-4": 1024,
    "anthropic.claude-sonnet-5": 1024,
    "anthropic.claude-sonnet-4-6": 1024,
    "anthropic.claude-sonnet-4-5": 1024,
    "anthropic.claude-haiku-4-5": 4096,
    "anthropic.claude-3-7-sonnet": 1024,
    "anthropic.claude-3-5-sonnet": 1024,
    "anthropic.claude-3-5-haiku": 2048,
}

# OpenAI prompt caching, https://developers.openai.com/api/docs/guides/prompt-caching:
# [quoted 2026-12-02] "Caching is enabled automatically for prompts that are 1024 tokens
# or longer"; cache hits happen "in increments of 128 tokens" (the guide and the "Prompt
# Caching 201" cookbook): the guide's own example of cached lengths is 1024, 1152, 1280,
# 1408, ... (tests/test_cache_rules_docs.py pins it); requests are routed by a prefix
# hash combined with `prompt_cache_key`, so the key is part of the cache namespace here.
# The current guide [quoted 2026-12-03 from a stored copy clipped 2026-09-20], "Summary of
# model differences" (GPT-5.6 and later | GPT-5.5 and GPT-5.5 Pro | Other earlier models):
# "Minimum cacheable prefix | 1,024 visible input tokens | Varies by request settings |
# Varies by request settings"; "Cached-token reporting | Exact eligible boundary, excluding
# hidden tokens | Excludes hidden tokens and rounds down to a multiple of 128 | (same)";
# "For models before GPT-5.6, the minimum cacheable input length varies with request
# settings, including tools, images, output schemas, reasoning effort, and verbosity."
# So: 128-token increments before GPT-5.6 and exact boundaries (increment 1) from it;
# 1,024 tokens from GPT-5.6. NOT VERIFIED: 1,024 for models before GPT-5.6 (the guide
# once said so; it now says the minimum varies by request settings and gives no figure).
OPENAI_MIN_TOKENS = 1024
OPENAI_INCREMENT = 128
#: OpenAI families that report cached tokens at the exact boundary (GPT-5.6 and later).
OPENAI_EXACT_FAMILIES = OPENAI_BREAKPOINT_MODELS
#: OpenAI cache lifetime in seconds, by the body's ``prompt_cache_retention``. Same copy
#: of the guide: "in_memory: Entries typically remain active for around 5 to 10 minutes
#: of inactivity, up to one hour." "24h: Extended retention typically keeps entries
#: available for around 30 minutes and can retain them for up to 24 hours." We take the
#: typical low ends, 5 and 30 minutes. GPT-5.6 and later: "A cached prefix remains
#: eligible for reuse for 30 minutes after its most recent write or reuse" (30 minutes
#: whatever the retention). NOT VERIFIED: a body without ``prompt_cache_retention`` gets
#: "24h" in organizations without Zero Data Retention and "in_memory" with it, which the
#: body does not show; we take in_memory's 5 minutes (the bundled example sends "24h").
OPENAI_RETENTION_TTL: Mapping[str, float] = {"in_memory": 300.0, "24h": 1800.0}
# OPENAI_24H_ONLY (models with ``24h`` retention only: "For `gpt-5.5`, `gpt-5.5-pro`, and
# future models, only `24h` is supported", openai-python 3.57.0 and 3.63.0: their entries
# get 24h's lifetime whatever the body says) and OPENAI_EXTENDED_RETENTION (the models
# with both before GPT-5.5, the guide's list quoted above; another model's entries live in
# memory whatever the body asks, NOT VERIFIED whether the service refuses ``24h`` there)
# live in prefixlock.core.limits, which maps ``cache_ttl`` onto the retention.
#: The body key (a settings option, sent as given) that names the retention.
RETENTION_OPTION = "prompt_cache_retention"
OPENAI_EXACT_TTL = 1800.0
# Explicit breakpoints, GPT-5.6 and later (issue 45, item 3). openai-python 3.63.0 (the
# installed SDK), ``PromptCacheOptions`` of Chat Completions and of Responses [quoted
# 2026-12-07]: "Supported for `gpt-5.6` and later models. By default, OpenAI
# automatically chooses one implicit cache breakpoint. You can add explicit breakpoints to
# content blocks with `prompt_cache_breakpoint`. Each request can write up to four
# breakpoints. For cache matching, OpenAI considers up to the latest 80 breakpoints in the
# conversation, without a content-block lookback limit. Set `mode` to `explicit` to
# disable the implicit breakpoint. The `ttl` defaults to `30m`." ``mode``: "With
# `implicit`, OpenAI creates one implicit breakpoint and writes up to the latest three
# explicit breakpoints in the request. With `explicit`, OpenAI does not create an implicit
# breakpoint and writes up to the latest four explicit breakpoints. If there are no
# explicit breakpoints, the request does not use prompt caching." ``ttl``: Responses
# "Supported values are `30m` (the default) and `12h`", Chat "`30m`, which is currently
# the only supported value". ``PromptCacheBreakpoint`` (on a text, image, file or audio
# content part): ``{"mode": "explicit", "ttl"?: "30m" | "12h"}``, "The minimum lifetime of
# this cache breakpoint. Defaults to the request TTL"; "the boundary is not rounded to a
# token block". ``prompt_cache_retention`` "expresses a maximum retention policy, while
# `prompt_cache_options.ttl` expresses a minimum cache lifetime. The two fields are
# independent and do not interact" (so a body may carry both; langchain4j's note that
# "Setting both on the same request is rejected" is not what the SDK says).
# Where the implicit breakpoint sits: "GPT-5.6 implicit caching places a managed
# breakpoint near the latest user or tool message and no longer relies on 128-token
# rounding. A prompt with a large stable prefix followed by a changing suffix can
# therefore lose cache hits even when the stable prefix itself has not changed" (OpenAI's
# GPT-5.6 migration guide as vendored by openai/codex, quoted in openai/codex#35300).
# Matching: "a cached prefix is matched exactly at a breakpoint, without falling back to a
# shorter unmarked prefix" (langchain4j's OpenAiOfficialPromptCacheBreakpoint, NOT
# VERIFIED first-party); a tool loop without explicit breakpoints still reads its previous
# call's prefix (a Codex audit of 73,386 GPT-5.6 calls: 96.7% of input tokens read,
# thibautrey/multivibe wiki, 2026-07-30), so the breakpoints considered are those written
# by the conversation's earlier requests, not only the ones the request carries. The
# simulator: an entry is written at each breakpoint a request writes (the implicit one on
# its last block, and the latest three explicit ones; mode explicit: the latest four) whose
# prefix has OPENAI_MIN_TOKENS; a call reads the longest entry among the namespace's
# latest OPENAI_CONSIDERED_BREAKPOINTS that is alive and equals its prefix up to that
# block exactly; an entry lives its TTL after its last write or read. NOT VERIFIED: the
# write price of a ``12h`` entry (the guide names one write price for GPT-5.6, 1.25x: we
# price both TTLs at it).
#: Entries a GPT-5.6 request's matching considers (the latest written).
OPENAI_CONSIDERED_BREAKPOINTS = 80
#: Breakpoints a request writes besides the implicit one (mode ``implicit``), or in all
#: (mode ``explicit``).
OPENAI_WRITTEN_EXPLICIT = (3, 4)
#: Seconds of each breakpoint ``ttl`` (``30m`` is the default).
OPENAI_BREAKPOINT_TTL: Mapping[str, float] = {"30m": 1800.0, "12h": 43200.0}
#: OpenAI model family -> (cached-input multiplier, cache-write multiplier), from the
#: pricing page [quoted 2026-12-02] (https://developers.openai.com/api/docs/pricing:
#: cached input is a tenth
#: of the input price for the GPT-5 family, a quarter for GPT-4.1 / o3 / o4-mini, half
#: for GPT-4o / o1) and the caching guide ("Cache writes have no additional fee on models
#: before the GPT-5.6 family. For GPT-5.6 models and later ... 1.25x"); the current guide
#: [quoted 2026-12-03, copy clipped 2026-09-20]: "For GPT-5.6 and later, cache writes cost
#: 1.25x the standard, uncached input-token rate. ... subsequent reads cost only 0.1x that
#: rate". NOT VERIFIED: GPT-6.1 Sol's 0.05x reads (seen only in a third-party copy of a
#: later version of the guide); GPT-6 models get the GPT-5.6 figures. o3-mini, no longer
#: on the pricing page: $1.10 input, $0.55 cached input, half (third-party price lists
#: found with the document search 2026-12-07: llmcalc.app, modelpedia.dev; NOT VERIFIED
#: on OpenAI's own page), not o3's quarter.
OPENAI_FAMILIES: Mapping[str, tuple[Fraction, Fraction]] = {
    "gpt-6": (Fraction("0.1"), Fraction("1.25")),
    "gpt-5.6": (Fraction("0.1"), Fraction("1.25")),
    "gpt-5": (Fraction("0.1"), Fraction(1)),
    "gpt-4.1": (Fraction("0.25"), Fraction(1)),
    "o4-mini": (Fraction("0.25"), Fraction(1)),
    "o3-mini": (Fraction("0.5"), Fraction(1)),
    "o3": (Fraction("0.25"), Fraction(1)),
    "gpt-4o": (Fraction("0.5"), Fraction(1)),
    "o1": (Fraction("0.5"), Fraction(1)),
    "": (Fraction("0.5"), Fraction(1)),  # other models: the most conservative discount
}

# Gemini implicit caching, https://ai.google.dev/gemini-api/docs/caching [quoted
# 2026-12-02; the table re-checked 2026-12-03 against a stored copy of the current page,
# the one listing Gemini 3.8 Flash]: "Implicit caching is enabled by default for all
# Gemini 2.5 and newer models. ... The minimum input token count for context caching is
# listed in the following table for each model: | Gemini 3.8 Flash | 4,096 | Gemini 3.7
# Flash | 4,096 | Gemini 3.6 Flash | 4,096 | Gemini 3.5 Flash | 4,096 | Gemini 3.1 Pro
# Preview | 4,096 | Gemini 2.5 Flash | 2,048 | Gemini 2.5 Pro | 2,048 |" (earlier copies:
# "1,024 for 2.5 Flash and 2,048 for 2.5 Pro" in 2025; later 1,024 / 4,096 with the
# Gemini 3 previews). Discount:
# "Implicit caching provides a 90% discount on cached tokens compared to standard input
# tokens" (Vertex AI context cache overview); tokens that create the cache are "billed
# ... at the standard input token price".
GEMINI_MIN_TOKENS: Mapping[str, int] = {
    "gemini-4": 4096,
    "gemini-3-flash-preview": 1024,
    "gemini-3": 4096,
    "gemini-2.5": 2048,
    "": 2048,
}
# The newest stored copy of the page ("Last updated 2026-10-13 UTC", re-checked
# 2026-12-06 with the document search): "| Gemini 4 Argon | 4,096 | Gemini 3.8 Flash |
# 4,096 | Gemini 3.6 Flash | 4,096 | Gemini 3.1 Pro Preview | 4,096 | Gemini 2.5 Flash |
# 2,048 | Gemini 2.5 Pro | 2,048 |" (model id gemini-4-argon). NOT VERIFIED: other
# Gemini 4 models, given Argon's minimum (the higher one predicts fewer hits).
# Gemini 3 Flash Preview is in none of the newer copies; the last one listing it
# ("Last updated 2026-05-07", the same page): "| Gemini 3 Flash Preview | 1024 | Gemini 3
# Pro Preview | 4096 |".
#: Models before Gemini 2.5 (the same page: "enabled by default for all Gemini 2.5 and
#: newer models"): no implicit cache, so nothing is read or written.
GEMINI_NO_IMPLICIT = ("gemini-1", "gemini-2.0", "gemini-pro", "gemini-ultra")
_GEMINI_READ = Fraction("0.1")
#: Their explicit cache (``cachedContent``) reads cost a quarter of the input price:
#: Gemini 2.0 Flash "Input $0.1, Cached input $0.025" (modelpedia.dev's copy of Google's
#: price list, found with the document search 2026-12-07), and "up to 75% savings" with
#: explicit caching before implicit caching came with 2.5 (Google's announcement of
#: implicit caching, as summarized by third parties). NOT VERIFIED on ai.google.dev's own
#: pricing page, which no longer lists these models.
_GEMINI_OLD_READ = Fraction("0.25")
# Gemini explicit cache storage ("Billing is based on the following factors: ... Storage
# duration", the caching page above; "For explicit caching, there are also storage costs
# based on how long caches are stored. There are no storage costs for implicit caching",
# Vertex AI context cache overview) [found with the document search 2026-12-07]:
# * Gemini 2.5 Pro: "$4.50 / 1,000,000 tokens per hour (storage price)" beside "Input:
#   $1.25 / 1M tokens" (two threads quoting the pricing page, discuss.ai.google.dev
#   /t/question-about-gemini-api-caching-pricing/107349 and .../92919).
# * Gemini 1.5 Pro $4.50, 1.5 Flash $1.00, 1.5 Flash-8B $0.25, 2.0 Flash $1.00 per 1M
#   token-hours, with inputs $1.25, $0.075, $0.0375, $0.10 (third-party price lists in
#   code found with the code search: `cache_storage: 4.50` ...). NOT VERIFIED on the
#   pricing page, which no longer lists them.
# * Gemini 2.5 Flash: input $0.30 (deploybase.ai's copy of the pricing page, March 2026);
#   Gemini 3 Pro: input $2 (aifreeapi.com, "verified Google AI Studio data (2026-02-04)");
#   Gemini 3 Flash Preview: input $0.50 (factquire.com quoting the pricing page,
#   2026-07-04). NOT VERIFIED: their storage prices, taken as their class's ($4.50 for Pro,
#   $1.00 for Flash), and 2.5 Flash-Lite's ($1.00 at input $0.10).
# The simulator bills a cache's storage when a call creates it, for its whole life (its
# ttl, or until its expireTime): a deployment that deletes a cache early pays less.
#: Gemini model prefix -> the storage price of a cached token for an hour, as a multiple
#: of the model's input price (storage / input, the prices above); "": 2.5 Pro's, the one
#: quoted from the pricing page.
GEMINI_STORAGE_PER_HOUR: Mapping[str, Fraction] = {
    "gemini-3-flash": Fraction("1.00") / Fraction("0.50"),
    "gemini-3": Fraction("4.50") / Fraction("2.00"),
    "gemini-2.5-flash-lite": Fraction("1.00") / Fraction("0.10"),
    "gemini-2.5-flash": Fraction("1.00") / Fraction("0.30"),
    "gemini-2.5-pro": Fraction("4.50") / Fraction("1.25"),
    "gemini-2.0-flash": Fraction("1.00") / Fraction("0.10"),
    "gemini-1.5-flash-8b": Fraction("0.25") / Fraction("0.0375"),
    "gemini-1.5-flash": Fraction("1.00") / Fraction("0.075"),
    "gemini-1.5-pro": Fraction("4.50") / Fraction("1.25"),
    "": Fraction("4.50") / Fraction("1.25"),
}


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
    #: Seconds an entry lives after its last write or read (markers' ``ttl: 1h`` aside).
    ttl: float = DEFAULT_TTL
    #: OpenAI: lifetime by the body's ``prompt_cache_retention`` (:data:`OPENAI_RETENTION_TTL`).
    retention_ttl: tuple[tuple[str, float], ...] = ()
    #: False: the model has no implicit cache (:data:`GEMINI_NO_IMPLICIT`).
    implicit_cache: bool = True
    #: A model priced by prompt length: (prompt tokens, factor), every input price of a
    #: call with a longer prompt times the factor (:data:`CLAUDE_LONG_PROMPT`).
    long_prompt: tuple[int, Fraction] | None = None
    #: Gemini: an explicit cache's storage price per token-hour, as a multiple of the
    #: input price (:data:`GEMINI_STORAGE_PER_HOUR`); 0 where nothing is stored for a fee.
    storage_per_hour: Fraction = Fraction(0)
    #: OpenAI GPT-5.6 and later: entries only at breakpoints, matched among the
    #: namespace's latest this many (0: not such a cache; see OPENAI_CONSIDERED_BREAKPOINTS).
    considered_breakpoints: int = 0
    #: Seconds an entry written by a marker with the longer TTL lives (Anthropic's and
    #: Bedrock's ``1h``; OpenAI's ``12h``).
    long_ttl: float = ONE_HOUR_TTL_SECONDS


def _longest_prefix(table: Mapping[str, Any], model: str) -> str:
    return max((key for key in table if model.startswith(key)), key=len)


def _claude_name(model: str) -> str:
    # Bedrock ids: "anthropic.claude-sonnet-4-5-20250929-v1:0", optionally with a
    # cross-region prefix ("us.anthropic.claude-...").
    return model.rpartition("anthropic.")[2] if "anthropic." in model else model


#: What may not follow a model key for the key to name the model: a digit (the key ends
#: inside a number) or a minor version (``-5`` of ``claude-sonnet-5-5``: another model).
_NOT_THE_MODEL = re.compile(r"[0-9]|-[0-9]{1,2}(?![0-9])")


def _model_prefix(table: Mapping[str, Any], name: str) -> str:
    """The longest key of ``table`` that names ``name``'s model: ``name`` starts with it
    and goes on with neither a digit nor a minor version (``claude-fable-5-2`` is not a
    dated ``claude-fable-5-20260609``, ``claude-sonnet-5`` is not ``claude-sonnet-5-5``;
    ``claude-opus-4-5`` is ``claude-opus-4-5-20251101``). ``""`` names every model, and is
    the answer where no key does."""
    return max(
        (
            key
            for key in table
            if name.startswith(key) and not (key and _NOT_THE_MODEL.match(name, len(key)))
        ),
        key=len,
        default="",
    )


def _bedrock_family(model: str) -> str:
    """The :data:`BEDROCK_MIN_TOKENS` key of a Bedrock model id ("" if none matches)."""
    name = "anthropic." + _claude_name(model) if "anthropic." in model else model
    return _model_prefix(BEDROCK_MIN_TOKENS, name)


@functools.lru_cache(maxsize=256)
def rules_for(provider: str, model: str) -> CacheRules:
    """The caching rules of ``provider`` for ``model`` (its family's, else the default).
    Bedrock takes its minimum from its own table, else from Anthropic's. Cached: the
    simulator asks for every call, and the rules are frozen."""
    if provider in ("anthropic", "bedrock-converse", "bedrock-anthropic"):
        # Bedrock's minimum-token table is per model, whichever API (Converse or
        # InvokeModel with the Messages body) carries the markers.
        on_bedrock = provider != "anthropic"
        name = _claude_name(model)
        family = _model_prefix(CLAUDE_MIN_TOKENS, name)
        minimum = CLAUDE_MIN_TOKENS[family]
        bedrock = _bedrock_family(model) if on_bedrock else ""
        if bedrock:
            family, minimum = bedrock, BEDROCK_MIN_TOKENS[bedrock]
        return CacheRules(
            provider,
            family or "claude",
            explicit=True,
            min_tokens=minimum,
            read_multiplier=CLAUDE_READ_PRICES[_model_prefix(CLAUDE_READ_PRICES, name)],
            write_multiplier=_CLAUDE_WRITE,
            min_tokens_per_checkpoint=on_bedrock,
            long_prompt=CLAUDE_LONG_PROMPT.get(_model_prefix(CLAUDE_LONG_PROMPT, name)),
            write_multiplier_1h=(
                None if on_bedrock and one_hour_ttl_refusal(model) is not None else _CLAUDE_WRITE_1H
            ),
        )
    if provider in ("openai-chat", "openai-responses"):
        family = _longest_prefix(OPENAI_FAMILIES, model)
        read, write = OPENAI_FAMILIES[family]
        exact = family in OPENAI_EXACT_FAMILIES
        only_24h = model.startswith(OPENAI_24H_ONLY)
        retention: tuple[tuple[str, float], ...]
        if exact:
            ttl, retention = OPENAI_EXACT_TTL, ()
        elif only_24h:
            ttl, retention = OPENAI_RETENTION_TTL["24h"], ()
        elif model.startswith(OPENAI_EXTENDED_RETENTION):
            ttl, retention = DEFAULT_TTL, tuple(sorted(OPENAI_RETENTION_TTL.items()))
        else:
            ttl, retention = DEFAULT_TTL, ()
        return CacheRules(
            provider,
            family or "openai",
            explicit=False,
            min_tokens=OPENAI_MIN_TOKENS,
            read_multiplier=read,
            write_multiplier=write,
            increment=1 if exact else OPENAI_INCREMENT,
            ttl=ttl,
            retention_ttl=retention,
            # a 12h breakpoint: the same write price (NOT VERIFIED, above)
            write_multiplier_1h=write if exact else None,
            considered_breakpoints=OPENAI_CONSIDERED_BREAKPOINTS if exact else 0,
            long_ttl=OPENAI_BREAKPOINT_TTL["12h"] if exact else ONE_HOUR_TTL_SECONDS,
        )
    if provider == "gemini":
        name = model.removeprefix("models/")  # the API's resource name, as some send it
        old = [prefix for prefix in GEMINI_NO_IMPLICIT if name.startswith(prefix)]
        family = _longest_prefix(GEMINI_MIN_TOKENS, name)
        return CacheRules(
            provider,
            old[0] if old else family or "gemini",
            explicit=False,
            min_tokens=GEMINI_MIN_TOKENS[family],
            read_multiplier=_GEMINI_OLD_READ if old else _GEMINI_READ,
            write_multiplier=Fraction(1),
            implicit_cache=not old,
            storage_per_hour=GEMINI_STORAGE_PER_HOUR[
                _longest_prefix(GEMINI_STORAGE_PER_HOUR, name)
            ],
        )
    raise UnknownNameError(f"cache simulation: unknown provider {provider!r}")
