"""The cache TTL setting shared by the wires with explicit cache markers (Anthropic
``cache_control``, Bedrock ``cachePoint``).

``cache_ttl`` is prefixlock's own settings option, set per agent in
``rules/providers.yaml`` (``options: {cache_ttl: 1h}``) and never sent as a body key:
the TTL of every cache marker the wire places. ``"5m"`` (five minutes) is the services'
default and prefixlock's: with it, or without the option, markers carry no ``ttl``
member, so bodies stay byte-identical to before the option existed. ``"1h"`` adds
``"ttl": "1h"`` to every marker:

* Anthropic: ``cache_control: {"type": "ephemeral", "ttl": "1h"}`` (Messages API,
  ``CacheControlEphemeralParam.ttl``: ``"5m"`` or ``"1h"``, "Defaults to ``5m``";
  prompt caching guide, "1-hour cache duration");
* Bedrock Converse: ``cachePoint: {"type": "default", "ttl": "1h"}`` (botocore
  ``bedrock-runtime`` service model, ``CachePointBlock.ttl``, enum ``5m`` / ``1h``).

One TTL for every marker of a body also keeps Anthropic's ordering rule (entries with a
longer TTL must come before shorter ones) trivially. The cache simulator prices a
one-hour write at 2x the base input price (:mod:`prefixlock.cache.rules`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.errors import SerializationError

#: The settings option (never sent).
OPTION = "cache_ttl"
#: The accepted values; the first is the default (no ``ttl`` member on the wire).
VALUES = ("5m", "1h")


def cache_ttl(provider: str, options: Mapping[str, Any]) -> str | None:
    """The ``ttl`` every cache marker carries: ``None`` for the default, else ``"1h"``."""
    value = options.get(OPTION, VALUES[0])
    if value not in VALUES or not isinstance(value, str):
        raise SerializationError(
            f"{provider}: settings option {OPTION!r} must be one of {list(VALUES)}, not {value!r}"
        )
    return None if value == VALUES[0] else value


def without_ttl_option(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options to send: all but :data:`OPTION`."""
    return {k: v for k, v in options.items() if k != OPTION}
