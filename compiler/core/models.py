"""Which model ids are current, per provider, and which are retired: a build warning names
a retired or unknown ``model`` of ``rules/providers.yaml`` with the current ones (issue 45,
item 6). Every stage may read it (``core``).

Each row has its source and the date it was taken. A model id matches a row by the
longest row id it starts with, followed by nothing, a date (``-20250929``) or a Bedrock
version suffix (``-v1:0``); a Bedrock id may carry an inference-profile prefix (``us.``,
``global.``). Ids of another form (an ARN, a fine-tune) are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import attrs

__all__ = ["CURRENT", "RETIRED", "ModelRow", "model_warning"]


@attrs.frozen
class ModelRow:
    """One model id and where its status comes from."""

    id: str
    #: The retirement date (``YYYY-MM-DD``); None for a current model.
    retired: str | None
    source: str


_CLAUDE_CURRENT = (
    # Anthropic's docs (stored copy found with the document search 2026-12-07): "Claude API:
    # all customers, as claude-sonnet-5-5. AWS: Claude on Amazon Bedrock, as
    # anthropic.claude-sonnet-5-5"; the pricing page's rows for Claude Opus 5.5, Sonnet 5.5
    # and Haiku 5.5 (copy of 2026-10-08, quoted in prefixlock.cache.rules).
    ("claude-opus-5-5", "Anthropic pricing page, copy of 2026-10-08 [found 2026-12-07]"),
    ("claude-sonnet-5-5", "Anthropic models overview / pricing, copy of 2026-10-08"),
    ("claude-haiku-5-5", "Anthropic pricing page, copy of 2026-10-08"),
)
_CLAUDE_RETIRED = (
    # issue 45: "claude-sonnet-4-5, retired 2026-11-30" (Anthropic's model deprecations
    # page, as the issue quotes it).
    ("claude-sonnet-4-5", "2026-11-30", "Anthropic model deprecations (issue 45)"),
    # "Claude Sonnet 4 and Claude Opus 4 API model IDs were retired on June 15, 2026"
    # (Anthropic release notes, as recorded by ottto-ai/ai-provider-watch, 2026-06-17).
    ("claude-sonnet-4", "2026-06-15", "Anthropic release notes, 2026-06-15"),
    ("claude-opus-4", "2026-06-15", "Anthropic release notes, 2026-06-15"),
    # "Claude Opus 4.1 (claude-opus-4-1-20250805) ... its retirement date is August 5, 2026"
    # (totalum.app, 2026-06-15; NOT VERIFIED on Anthropic's page).
    ("claude-opus-4-1", "2026-08-05", "third-party (totalum.app), NOT VERIFIED"),
)

_GPT_56 = "OpenRouter GPT-5.6 migration guide / openai-python 3.63.0 [found 2026-12-07]"
_OPENAI_CURRENT = (
    ModelRow("gpt-5.6-sol", None, _GPT_56),
    ModelRow("gpt-5.6-terra", None, _GPT_56),
    ModelRow("gpt-5.6-luna", None, _GPT_56),
    *(
        ModelRow(i, None, "OpenAI prompt caching guide / openai-python 3.63.0")
        for i in ("gpt-6", "gpt-5.6", "gpt-5.5", "gpt-5", "gpt-4.1")
    ),
)

#: Provider -> the current model ids (the ones a warning names).
CURRENT: Mapping[str, tuple[ModelRow, ...]] = {
    "anthropic": tuple(ModelRow(i, None, s) for i, s in _CLAUDE_CURRENT),
    "bedrock-converse": tuple(ModelRow("anthropic." + i, None, s) for i, s in _CLAUDE_CURRENT),
    "bedrock-anthropic": tuple(ModelRow("anthropic." + i, None, s) for i, s in _CLAUDE_CURRENT),
    "gemini": (
        # The caching page's newest stored copy ("Last updated 2026-10-13 UTC"): "Gemini 4
        # Argon | 4,096 | Gemini 3.8 Flash | 4,096 | ..." (prefixlock.cache.rules).
        ModelRow("gemini-4-argon", None, "ai.google.dev caching page, 2026-10-13"),
        ModelRow("gemini-3.8-flash", None, "ai.google.dev caching page, 2026-10-13"),
    ),
    # OpenAI: the models the prompt-caching guide and openai-python 3.63.0 name (quoted in
    # prefixlock.cache.rules); none of them is announced retired in what we found. The
    # GPT-5.6 family [found with the document search 2026-12-07]: "OpenAI's GPT-5.6 family
    # ships in three tiers, each with a pro variant: openai/gpt-5.6-sol Flagship
    # capability, ... gpt-5.6-terra Balanced performance and cost, ... gpt-5.6-luna
    # Fastest, most affordable" (OpenRouter's GPT-5.6 migration guide); "Supported for
    # `gpt-5.6` and later models" (openai-python 3.63.0, PromptCacheOptions): the first
    # models with explicit prompt-cache breakpoints (prefixlock.core.limits).
    "openai-responses": _OPENAI_CURRENT,
    "openai-chat": _OPENAI_CURRENT,
}
#: Provider -> retired model ids. Bedrock sets its own schedule ("Partner-operated
#: platforms (Amazon Bedrock and Google Cloud) set their own retirement schedules",
#: Anthropic's deprecations page): its rows are Anthropic's, marked NOT VERIFIED there.
RETIRED: Mapping[str, tuple[ModelRow, ...]] = {
    "anthropic": tuple(ModelRow(i, d, s) for i, d, s in _CLAUDE_RETIRED),
    "bedrock-converse": tuple(
        ModelRow("anthropic." + i, d, f"{s}; on Bedrock NOT VERIFIED")
        for i, d, s in _CLAUDE_RETIRED
    ),
    "bedrock-anthropic": tuple(
        ModelRow("anthropic." + i, d, f"{s}; on Bedrock NOT VERIFIED")
        for i, d, s in _CLAUDE_RETIRED
    ),
    "gemini": (
        # issue 45: "gemini-2.5-pro shut down"; Gemini 1.5 and 2.0 are no longer on the
        # pricing page (prefixlock.cache.rules, GEMINI_NO_IMPLICIT's comment).
        ModelRow("gemini-2.5-pro", "2026", "issue 45 (shut down)"),
        ModelRow("gemini-1.5", "2025", "no longer on Google's pricing page"),
        ModelRow("gemini-2.0", "2026", "no longer on Google's pricing page"),
    ),
}

#: What may follow a row id for the row to name the model: a date, a Bedrock version.
_SUFFIX = re.compile(r"(?:-\d{8})?(?:-v\d+(?::\d+)?)?")
#: A Bedrock inference-profile prefix.
_PROFILE = re.compile(r"^(?:[a-z]{2,6}\.)(?=anthropic\.)")


def _row(rows: tuple[ModelRow, ...], model: str) -> ModelRow | None:
    name = _PROFILE.sub("", model)
    found = [
        row
        for row in rows
        if name.startswith(row.id) and _SUFFIX.fullmatch(name, len(row.id)) is not None
    ]
    return max(found, key=lambda row: len(row.id), default=None)


def model_warning(provider: str, model: str) -> str | None:
    """Why ``model`` deserves a warning on ``provider`` (retired, or not a model
    prefixlock knows), naming the current ones; None for a current model, an opaque id
    (an ARN) or a provider without a table."""
    current = CURRENT.get(provider)
    if current is None or model.startswith("arn:") or "/" in model:
        return None
    names = ", ".join(row.id for row in current)
    if _row(current, model) is not None:
        return None
    retired = _row(RETIRED.get(provider, ()), model)
    if retired is not None:
        return (
            f"{model!r} was retired ({retired.retired}; {retired.source}): requests to it "
            f"fail; current models: {names}"
        )
    if provider.startswith("openai") and model.startswith(("gpt-", "o1", "o3", "o4")):
        return None  # OpenAI's dated and variant ids are too many to list; none retired
    return (
        f"{model!r} is not a model prefixlock knows for {provider} (its cache rules fall "
        f"back to the provider's defaults); current models: {names}"
    )
