"""List prices in dollars: the base input-token price of each model, for reports.

The simulator prices in base input tokens (:mod:`prefixlock.cache.rules`: every cache
read or write is a multiple of the model's base input price). A report that wants
dollars multiplies by :func:`input_price`, the model's base input price in USD per
million tokens from :data:`LIST_PRICES`, and names :data:`PRICE_TABLE` beside the figure.
A model the table does not know has no dollar figure (never a guess).

Sources (list prices, standard tier, checked 2026-12-07):

* Anthropic, https://platform.claude.com/docs/en/about-claude/pricing ("Model pricing",
  "Base input tokens"); Claude on Bedrock is priced as Anthropic prices it (third-party
  price lists; the cache rules take Bedrock's Claude prices as Anthropic's too). Haiku
  5.5's price is that of prompts up to 100,000 tokens.
* OpenAI, https://openai.com/api/pricing ("Input" per 1M tokens).
* Google, https://ai.google.dev/gemini-api/docs/pricing ("Input price", prompts up to
  200,000 tokens).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

__all__ = ["LIST_PRICES", "PRICE_TABLE", "input_price"]

#: How a report names the table its dollar figures come from.
PRICE_TABLE = "prefixlock list prices of 2026-12-07 (USD per million base input tokens)"

#: Model name (or its prefix before a ``-``: dated snapshots, Bedrock's versions; the
#: longest that matches wins) -> USD per million base input tokens.
LIST_PRICES: Mapping[str, Fraction] = {
    # Anthropic (and Claude on Bedrock, after its "anthropic." and region prefixes)
    "claude-fable-5": Fraction(10),
    "claude-mythos-5": Fraction(10),
    "claude-opus-5-5": Fraction(4),
    "claude-opus-5": Fraction(5),
    "claude-opus-4-5": Fraction(5),
    "claude-opus-4-6": Fraction(5),
    "claude-opus-4-7": Fraction(5),
    "claude-opus-4-8": Fraction(5),
    "claude-opus-4": Fraction(15),
    "claude-sonnet-5": Fraction(2),
    "claude-sonnet-4": Fraction(3),
    "claude-3-7-sonnet": Fraction(3),
    "claude-haiku-5-5": Fraction(1, 10),
    "claude-haiku-4-5": Fraction(1),
    "claude-3-5-haiku": Fraction(4, 5),
    # OpenAI. GPT-5.6 [found 2026-12-07, third-party, NOT VERIFIED on openai.com]: "Sol at
    # $5/M input" (coder/mux#3705, 2026-07-09), Terra "$2.50/M" (ai-cost-estimator.com,
    # 2026-06-27); Luna's price not found.
    "gpt-5.6-sol": Fraction(5),
    "gpt-5.6-terra": Fraction(5, 2),
    "gpt-5.5": Fraction(5),
    "gpt-5.4-mini": Fraction(3, 4),
    "gpt-5.4-nano": Fraction(1, 5),
    "gpt-5.4": Fraction(5, 2),
    "gpt-5.1": Fraction(5, 4),
    "gpt-5-mini": Fraction(1, 4),
    "gpt-5-nano": Fraction(1, 20),
    "gpt-5": Fraction(5, 4),
    "gpt-4.1-mini": Fraction(2, 5),
    "gpt-4.1-nano": Fraction(1, 10),
    "gpt-4.1": Fraction(2),
    "gpt-4o-mini": Fraction(3, 20),
    "gpt-4o": Fraction(5, 2),
    "o3-mini": Fraction(11, 10),
    "o3": Fraction(2),
    "o4-mini": Fraction(11, 10),
    # Google
    "gemini-2.5-pro": Fraction(5, 4),
    "gemini-2.5-flash-lite": Fraction(1, 10),
    "gemini-2.5-flash": Fraction(3, 10),
}

#: Prefixes of a Bedrock model id before the Claude name: cross-region profiles, then
#: the vendor (``us.anthropic.claude-...``, ``anthropic.claude-...``).
_BEDROCK_PREFIXES = ("global.", "us.", "eu.", "apac.", "jp.", "au.", "anthropic.")


def input_price(model: str) -> Fraction | None:
    """USD per million base input tokens of ``model`` (:data:`LIST_PRICES`), or None."""
    name = model
    for prefix in _BEDROCK_PREFIXES:
        name = name.removeprefix(prefix)
    matches = [key for key in LIST_PRICES if name == key or name.startswith(key + "-")]
    return LIST_PRICES[max(matches, key=len)] if matches else None
