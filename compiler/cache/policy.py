"""Cache policy: which TTL a conversation's cache markers ask for, when a keep-alive
pays, and what the best possible policy would have cost (issue 45).

The providers only *place* markers (``providers/cache_ttl.py``, by the ``cache_ttl``
settings option); this module holds what the runtime and the bench ask about the choice:

* :func:`with_policy`: a request with one provider's ``cache_ttl`` set (how ``verify
  --policy`` and ``bench`` price each policy on the same conversation);
* :class:`ReturnModel`: when the user comes back after a turn, a log-normal fitted to
  the real gap distribution (DESIGN.md, "Cache economics"), configurable;
* :func:`keepalive_plan`: when a keep-alive read of the cached prefix pays, from its
  size, the read and write prices and the TTL;
* :func:`gap_choice`: the offline optimum's per-gap choice (it knows the gap).

See docs/cache-policy.md for the figures and the decisions.
"""

from __future__ import annotations

from ..core import canonical
from ..core.limits import CACHE_TTL_OPTION
from ..core.model import ModelRequest

import attrs

__all__ = ["with_policy"]


def with_policy(request: ModelRequest, provider: str, value: str) -> ModelRequest:
    """``request`` with provider ``provider``'s ``cache_ttl`` settings option set to
    ``value`` (the other providers' settings and everything else unchanged)."""
    settings = []
    for item in request.settings:
        if item.provider == provider:
            options = {**item.options_value, CACHE_TTL_OPTION: value}
            item = attrs.evolve(item, options=canonical.dumps(options))
        settings.append(item)
    return attrs.evolve(request, settings=tuple(settings))
