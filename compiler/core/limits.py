"""Limits every stage may read: the fixed size limits of text inputs (instructions,
responses, a response line: ``MAX_*_BYTES``, docs/limits.md), and what a provider's
service refuses in a request's settings though each value has a form it takes: a
combination of model and option. The build reports each with its file, line, column and
field (:func:`settings_problems`, ``rules/providers.yaml``), the provider's
``serialize`` raises it, and the cache rules price nothing the service refuses. Every
stage may read it (``core``).

**Bedrock's one-hour TTL by model** [found with the issue search 2026-12-07]: Bedrock
takes ``cachePoint`` ``"ttl": "1h"`` on some models only and answers a
ValidationException on the others, so ``cache_ttl: 1h`` / ``auto`` (``turn``) is refused there.
The texts:
* AWS's announcement of 2026-01-26 (as quoted in :mod:`prefixlock.cache.rules`):
  "generally available for Claude Sonnet 4.5, Claude Haiku 4.5 and Claude Opus 4.5".
* earendil-works/pi#1570 (2026-02-20), from requests to the service: "Only Claude Opus
  4.5+, Sonnet 4.5, and Haiku 4.5 accept `ttl: "1h"`"; Claude Opus 4.0/4.1, Sonnet 4.0,
  3.7 Sonnet and 3.5 Haiku/Sonnet answer "Extra inputs are not permitted", Amazon Nova
  "Extended TTL prompt caching is only supported for Anthropic models".
* timothy-agent/timothy#756 (2026-09-17) quotes the Nova answer: "ValidationException:
  Extended TTL prompt caching is only supported for Anthropic models ... StatusCode:
  400" (us.amazon.nova-2-lite-v1:0).
* anomalyco/opencode#23106: "Tested on Haiku 4.5, Sonnet 4.5/4.6, Opus 4.5/4.6".
So a Claude model before 4.5 is refused, and so is a named model of another vendor (the
service's own wording: Anthropic models only). Claude 4.5 and later, a Claude id with no
version to judge, and an opaque id (an application inference profile's, provisioned,
custom or imported model's ARN: no model name in it) are left to the service. NOT
VERIFIED: Claude 5 and later (not in the announcement; taken to accept it, as 4.6 does).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "ANTHROPIC_VERSIONS",
    "API_VERSION_OPTION",
    "BEDROCK_ENDPOINTS",
    "BEDROCK_WIRES",
    "CACHE_TTL_OPTION",
    "ENDPOINT_OPTION",
    "MAX_INSTRUCTIONS_BYTES",
    "MAX_RESPONSE_BYTES",
    "MAX_RESPONSE_LINE_BYTES",
    "MAX_SPEC_FILE_BYTES",
    "MIN_OUTPUT_TOKENS",
    "ONE_HOUR_POLICIES",
    "OPENAI_24H_ONLY",
    "OPENAI_BREAKPOINT_MODELS",
    "OPENAI_EXTENDED_RETENTION",
    "REMOVED_IN_2026_10_21",
    "bedrock_endpoint",
    "keepalive_output_limit",
    "one_hour_ttl_refusal",
    "openai_breakpoints",
    "openai_retention",
    "settings_problems",
]

MIB = 1024 * 1024

# -- size limits of text inputs that no caller configures (docs/limits.md) ---------------
#
# Every text input has a size limit, refused with a LimitError before anything is held
# whole or saved. Those a conversation checks are the fields of
# ``prefixlock.runtime.limits.Limits`` (an agent server passes its own); these are fixed
# where the input is read.

#: A whole (non-streamed) response body, and the bytes of one streamed response: what a
#: reader takes in at most. The largest model output (128k output tokens, about 0.5 MiB of
#: text, with its reasoning and usage) is far below it; a stream's bytes repeat the text
#: in their framing (SSE ``data:`` lines of JSON), hence the room.
MAX_RESPONSE_BYTES = 32 * MIB
#: One SSE line, and the data one event joins from its lines: an event is one JSON
#: object, at most the whole response (OpenAI Responses' ``response.completed``).
#: Bedrock's binary frames have the event-stream spec's own bound (24 MiB payload).
MAX_RESPONSE_LINE_BYTES = 16 * MIB
#: The compiled instructions (UTF-8): what every request repeats, checked at build and
#: when a built bundle is loaded. Real agents' instructions are tens of KiB.
MAX_INSTRUCTIONS_BYTES = 1 * MIB

#: One file of a spec tree (YAML, a template, the instructions) and any YAML file the
#: loader reads: a real one is kilobytes. A spec file over it, a FIFO or a device is
#: refused before it is read whole (a link to ``/dev/zero`` read without bound).
MAX_SPEC_FILE_BYTES = 16 * MIB

#: prefixlock's own cache TTL settings option (providers/cache_ttl.py; never sent).
CACHE_TTL_OPTION = "cache_ttl"
#: The smallest output limit each provider's service accepts: a keep-alive request (issue
#: 45; :meth:`prefixlock.Conversation.keepalive`) is the last request with only its output
#: limit set to this, so it re-reads the cached prefix and pays for (almost) no output.
#: * anthropic ``max_tokens``: "x >= 1" (Messages API reference, ``max_tokens``; NOT
#:   VERIFIED against a stored copy of the page: the SDK types carry no minimum).
#: * bedrock-converse ``inferenceConfig.maxTokens``: botocore's bedrock-runtime service
#:   model, ``InferenceConfigurationMaxTokensInteger`` ``"min": 1``.
#: * openai-responses ``max_output_tokens``: the service answers "Invalid
#:   'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 1
#:   instead." (earendil-works/pi#6265, 2026-07-02; vectorize-io/hindsight#58).
#: * openai-chat ``max_completion_tokens``: 16 as well ("chat completions/responses error
#:   when you have a max token size of < 16", braintrustdata/lingua#186; NOT VERIFIED on a
#:   first-party page).
#: * gemini ``generationConfig.maxOutputTokens``: 1 (NOT VERIFIED: the docs give no
#:   minimum).
MIN_OUTPUT_TOKENS: Mapping[str, int] = {
    "anthropic": 1,
    "bedrock-anthropic": 1,
    "bedrock-converse": 1,
    "openai-chat": 16,
    "openai-responses": 16,
    "gemini": 1,
}


def keepalive_output_limit(provider: str, options: Mapping[str, Any]) -> int:
    """The smallest output limit ``provider`` accepts with these settings options: its
    :data:`MIN_OUTPUT_TOKENS`, and on Anthropic with extended thinking one more than the
    thinking budget ("``max_tokens`` must be greater than ``thinking.budget_tokens``",
    Anthropic's extended-thinking guide; NOT VERIFIED against a stored copy)."""
    least = MIN_OUTPUT_TOKENS.get(provider, 1)
    thinking = options.get("thinking")
    if provider in ("anthropic", "bedrock-anthropic") and isinstance(thinking, Mapping):
        budget = thinking.get("budget_tokens")
        if isinstance(budget, int) and not isinstance(budget, bool):
            least = max(least, budget + 1)
    return least


#: The wires Bedrock serves; its one-hour TTL rule (:func:`one_hour_ttl_refusal`) is the
#: service's, for Converse's ``cachePoint`` and InvokeModel's ``cache_control`` alike
#: (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html lists the models
#: taking a 1-hour TTL per model, not per API).
BEDROCK_WIRES = ("bedrock-converse", "bedrock-anthropic")

#: Its values that put one-hour markers into bodies.
ONE_HOUR_POLICIES = ("1h", "auto", "turn")

#: ``<vendor>.<model>`` after an optional inference-profile prefix (``us.``, ``global.``).
_NAMED_MODEL = re.compile(r"(?:[a-z]{2,6}(?:-[a-z]+)?\.)?(?P<vendor>[a-z][a-z0-9-]*)\.(?P<name>.+)")
#: A Claude model's generation: ``claude-<family>-<major>[-<minor>]`` (Claude 4 on) or
#: ``claude-<major>[-<minor>]-<family>`` (Claude 3); a minor is one or two digits, not
#: the eight of a date.
_CLAUDE_VERSION = (
    re.compile(r"claude-(?:opus|sonnet|haiku)-(?P<major>\d+)(?:-(?P<minor>\d{1,2}))?(?![0-9])"),
    re.compile(r"claude-(?P<major>\d+)(?:-(?P<minor>\d{1,2}))?-(?:opus|sonnet|haiku)"),
)
#: The first Claude generation Bedrock takes a one-hour TTL on.
_ONE_HOUR_FROM = (4, 5)


@functools.lru_cache(maxsize=256)
def one_hour_ttl_refusal(model: str) -> str | None:
    """Why Bedrock refuses ``cachePoint`` ``ttl: "1h"`` on ``model`` (a Converse
    ``modelId``: a model or inference profile id, or an ARN), or None where it takes it
    or the id does not say (the rule and its sources: the module docstring)."""
    named = _NAMED_MODEL.fullmatch(model.rsplit("/", 1)[-1])
    if named is None:
        return None  # opaque: no model name to judge
    if named["vendor"] != "anthropic":
        return (
            f"Bedrock accepts cachePoint ttl '1h' on Anthropic models only; on {model!r} "
            "the service refuses it ('Extended TTL prompt caching is only supported for "
            "Anthropic models')"
        )
    name = named["name"]
    version: tuple[int, int] | None = None
    if name.startswith(("claude-v", "claude-instant")):
        version = (2, 0)
    for pattern in _CLAUDE_VERSION:
        found = pattern.match(name)
        if found is not None:
            version = (int(found["major"]), int(found["minor"] or 0))
            break
    if version is None or version >= _ONE_HOUR_FROM:
        return None
    return (
        "Bedrock accepts cachePoint ttl '1h' on Claude Sonnet 4.5, Haiku 4.5, Opus 4.5 and "
        f"later only; on {model!r} the service refuses it ('Extra inputs are not permitted')"
    )


#: prefixlock's own option naming the Anthropic API version a deployment sends (the
#: ``anthropic-version`` header; never a body key).
API_VERSION_OPTION = "anthropic_version"
#: The sampling parameters Anthropic API version 2026-10-21 removes. Sources [found with
#: the document search 2026-12-07]: "Anthropic's first new API version since 2023-06-01
#: shipped Oct 21, 2026 ... temperature/top_p/top_k now return 400" (codersera.com's
#: migration guide), "Claude API version 2026-10-21 removes temperature, top_p and top_k
#: ... 400 error, 'even at t[he default]'" (developersdigest.tech, quoting the migration
#: guide), "temperature: 1.0 fails with 'temperature: Extra inputs are not permitted'"
#: (qiita.com/Synthorai, tested on Sonnet 4.6 and 5.5). NOT VERIFIED on Anthropic's own
#: versioning page (no stored copy found).
REMOVED_IN_2026_10_21 = ("temperature", "top_p", "top_k")
#: The API versions the option takes.
ANTHROPIC_VERSIONS = ("2023-06-01", "2026-10-21")


#: prefixlock's own ``bedrock-anthropic`` option choosing the Bedrock endpoint Claude's
#: Messages body goes to (never sent): ``invoke-model`` (the default: ``InvokeModel`` on
#: ``bedrock-runtime``, the body's ``anthropic_version`` member, AWS event-stream
#: responses) or ``mantle`` (the Messages API on ``bedrock-mantle``,
#: ``POST /anthropic/v1/messages``: the plain Messages body with ``model``, the
#: ``anthropic-version`` header, SSE; AWS, "Inference using Anthropic Messages API",
#: docs.aws.amazon.com/bedrock/latest/userguide/inference-messages-api.html; the
#: anthropic SDK's ``AnthropicBedrockMantle``, ``lib/bedrock/_mantle.py``).
ENDPOINT_OPTION = "endpoint"
#: Its values; the first is the default.
BEDROCK_ENDPOINTS = ("invoke-model", "mantle")
#: The wire that has the option.
_ENDPOINT_WIRE = "bedrock-anthropic"
#: The body member carrying betas on InvokeModel; on mantle the SDK sends them as the
#: ``anthropic-beta`` header instead (``lib/bedrock/_client.py`` moves the header into
#: this member for InvokeModel only; ``_mantle.py`` leaves it a header).
_BETA_MEMBER = "anthropic_beta"


def bedrock_endpoint(options: Mapping[str, Any]) -> str:
    """The Bedrock endpoint ``bedrock-anthropic`` settings options choose (a value
    :func:`settings_problems` refuses reads as the default)."""
    value = options.get(ENDPOINT_OPTION)
    return value if value in BEDROCK_ENDPOINTS else BEDROCK_ENDPOINTS[0]


def _endpoint_problems(
    provider: str, options: Mapping[str, Any]
) -> list[tuple[tuple[str, ...], str]]:
    """``endpoint`` where it means nothing or names no endpoint, and the options it
    contradicts."""
    if ENDPOINT_OPTION not in options:
        return []
    value = options[ENDPOINT_OPTION]
    field = ("options", ENDPOINT_OPTION)
    if provider != _ENDPOINT_WIRE:
        return [
            (
                field,
                f"{ENDPOINT_OPTION} chooses the Bedrock endpoint of {_ENDPOINT_WIRE} "
                f"(invoke-model or mantle); {provider} has one endpoint",
            )
        ]
    if value not in BEDROCK_ENDPOINTS:
        return [(field, f"expected 'invoke-model' or 'mantle', got {value!r}")]
    if value == "mantle" and _BETA_MEMBER in options:
        return [
            (
                ("options", _BETA_MEMBER),
                "anthropic_beta is InvokeModel's body member; the mantle endpoint takes "
                "betas as the anthropic-beta header, which prefixlock does not send: "
                "remove it, or set endpoint: invoke-model",
            )
        ]
    return []


def settings_problems(
    provider: str, model: str, options: Mapping[str, Any]
) -> list[tuple[tuple[str, ...], str]]:
    """``(field, why)`` for each value of one provider's settings (``model``, the parsed
    ``options``) that its service refuses with the others: ``field`` is the path under
    the provider's entry of ``rules/providers.yaml``, ``("options", "cache_ttl")``."""
    found = _endpoint_problems(provider, options)
    version = options.get(API_VERSION_OPTION)
    # The Messages API's version header: anthropic's, and bedrock-anthropic's on the
    # mantle endpoint ("bedrock-mantle: Set anthropic-version: 2023-06-01 as an HTTP
    # header", AWS inference-messages-api.html); InvokeModel's version is the body member.
    header_wire = provider == "anthropic" or (
        provider == _ENDPOINT_WIRE and options.get(ENDPOINT_OPTION) == "mantle"
    )
    if version is not None and provider == _ENDPOINT_WIRE and not header_wire:
        found.append(
            (
                ("options", API_VERSION_OPTION),
                f"{API_VERSION_OPTION} is the Messages API's version header, sent with "
                "endpoint: mantle only; InvokeModel's version is the body member "
                "'bedrock-2023-05-31', which prefixlock sets",
            )
        )
    elif version is not None and not header_wire:
        found.append(
            (
                ("options", API_VERSION_OPTION),
                f"{API_VERSION_OPTION} is the Anthropic Messages API's version header; "
                f"{provider} has none",
            )
        )
    elif version == "2026-10-21":
        found += [
            (
                ("options", key),
                f"Anthropic API version 2026-10-21 removes {key!r}: the service answers 400 "
                "('Extra inputs are not permitted', even at its default value); remove it, "
                "or set anthropic_version: 2023-06-01",
            )
            for key in REMOVED_IN_2026_10_21
            if key in options
        ]
    return found + _ttl_problems(provider, model, options)


def _ttl_problems(
    provider: str, model: str, options: Mapping[str, Any]
) -> list[tuple[tuple[str, ...], str]]:
    value = options.get(CACHE_TTL_OPTION)
    if provider in ("openai-chat", "openai-responses") and isinstance(value, str):
        return _openai_ttl_problems(model, value, options)
    if provider not in BEDROCK_WIRES or value not in ONE_HOUR_POLICIES:
        return []
    refusal = one_hour_ttl_refusal(model)
    if refusal is None:
        return []
    return [
        (("options", CACHE_TTL_OPTION), f"{value!r} asks for one-hour cache entries: {refusal}")
    ]


# -- OpenAI: explicit breakpoints and retention by model (issue 45, items 2 and 3) --------
#
# openai-python 3.63.0 (the installed SDK), ``PromptCacheOptions`` of Chat Completions
# and Responses: "Supported for `gpt-5.6` and later models"; ``prompt_cache_breakpoint``
# and ``prompt_cache_options`` "return a 400 on GPT-5.5 and older" (synthorai, "GPT-5.6
# Prompting Guide", dev.to, 2026; NOT VERIFIED first-party). The same SDK's
# ``prompt_cache_retention``: "For `gpt-5.5`, `gpt-5.5-pro`, and future models, only
# `24h` is supported"; the models with both ``in_memory`` and ``24h`` before it are the
# caching guide's list (quoted in prefixlock.cache.rules): gpt-5.4, 5.2, 5.1, 5 and their
# -codex/-chat models, gpt-4.1.
#: OpenAI model prefixes that take ``prompt_cache_breakpoint`` (GPT-5.6 and later).
OPENAI_BREAKPOINT_MODELS = ("gpt-5.6", "gpt-6")
#: OpenAI model prefixes with ``24h`` retention only (GPT-5.5; later ones too, but they
#: are :data:`OPENAI_BREAKPOINT_MODELS`, whose breakpoints carry the TTL).
OPENAI_24H_ONLY = ("gpt-5.5",)
#: OpenAI model prefixes with both ``in_memory`` and ``24h`` retention (before GPT-5.5).
OPENAI_EXTENDED_RETENTION = ("gpt-5", "gpt-4.1")
#: ``cache_ttl`` -> ``prompt_cache_retention`` on a model with the choice
#: (:func:`openai_retention`): five minutes is in-memory retention ("Entries typically
#: remain active for around 5 to 10 minutes of inactivity"), the longer policies are
#: extended retention ("typically keeps entries available for around 30 minutes and can
#: retain them for up to 24 hours"; the caching guide, quoted in prefixlock.cache.rules).
_RETENTION_OF_TTL = {"5m": "in_memory", "1h": "24h", "auto": "24h", "turn": "24h"}


def openai_breakpoints(model: str) -> bool:
    """Whether OpenAI ``model`` takes explicit ``prompt_cache_breakpoint`` markers."""
    return model.startswith(OPENAI_BREAKPOINT_MODELS)


def openai_retention(model: str, cache_ttl: str) -> str | None:
    """The ``prompt_cache_retention`` an OpenAI model without breakpoints gets for the
    agent's ``cache_ttl`` (None: the body names none). ``5m`` is ``in_memory`` where the
    model has the choice, else nothing (a GPT-5.5 model has ``24h`` only, and a model
    without extended retention has in-memory only: both their defaults); ``1h`` and
    ``auto`` are ``24h`` (refused by :func:`settings_problems` on a model without it)."""
    if openai_breakpoints(model):
        return None
    wanted = _RETENTION_OF_TTL.get(cache_ttl)
    if model.startswith(OPENAI_24H_ONLY):
        return None if wanted == "in_memory" else wanted
    if model.startswith(OPENAI_EXTENDED_RETENTION):
        return wanted
    return None if wanted == "in_memory" else wanted


def _openai_ttl_problems(
    model: str, value: str, options: Mapping[str, Any]
) -> list[tuple[tuple[str, ...], str]]:
    """``cache_ttl`` on an OpenAI model: a longer policy on a model without extended
    retention or breakpoints, or a ``prompt_cache_retention`` that says otherwise."""
    if openai_breakpoints(model):
        return []
    wanted = openai_retention(model, value)
    if wanted == "24h" and not model.startswith((*OPENAI_24H_ONLY, *OPENAI_EXTENDED_RETENTION)):
        return [
            (
                ("options", CACHE_TTL_OPTION),
                f"{value!r} asks for longer-lived cache entries, but {model!r} has neither "
                "extended prompt_cache_retention (24h) nor prompt_cache_breakpoint "
                "(GPT-5.6 and later)",
            )
        ]
    given = options.get("prompt_cache_retention")
    if given is not None and wanted is not None and given != wanted:
        return [
            (
                ("options", "prompt_cache_retention"),
                f"{given!r} contradicts cache_ttl {value!r}, which sends "
                f"prompt_cache_retention {wanted!r} on {model!r}: set one of them",
            )
        ]
    return []
