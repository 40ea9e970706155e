"""Cache policy: which TTL a conversation's cache markers ask for, when a keep-alive
pays, and what the best possible policy would have cost (issue 45).

The providers only *place* markers (``providers/cache_ttl.py``, by the ``cache_ttl``
settings option); this module holds what the runtime and the bench ask about the choice:

* :func:`with_policy`: a request with one provider's ``cache_ttl`` set (how ``verify
  --policy`` and ``bench`` price each policy on the same conversation);
* :class:`ReturnModel`: when the user comes back after a call, a log-normal fitted to the
  real gap distribution (:data:`GAP_QUANTILES`), plus the chance that the session has
  ended; configurable;
* :func:`keepalive_plan`: after the last call, at which times a keep-alive read of the
  cached prefix pays, from its size, the read and write prices and the TTL;
* :func:`cached_prefix`: what a request's cache holds and what an expiry would lose.

See docs/cache-policy.md for the figures and the decisions.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import attrs

from ..core import canonical
from ..core.limits import CACHE_TTL_OPTION
from ..core.model import ModelRequest
from .rules import rules_for
from .simulator import Simulation

__all__ = [
    "DEFAULT_RETURN_MODEL",
    "END_PROBABILITY",
    "GAP_QUANTILES",
    "KEEPALIVE_MARGIN",
    "TOOL_GAP_QUANTILES",
    "CachedPrefix",
    "ReturnModel",
    "cached_prefix",
    "keepalive_interval",
    "keepalive_plan",
    "lognormal_fit",
    "plan_for",
    "with_policy",
]

# The real gap distribution (issue 45; DESIGN.md "Cache economics"): 382 public Claude
# Code sessions (26,252 model calls, 2,908 user turns): the idle gap before a user turn
# has a median of 105 s and a p90 of 14.1 min; 24% of turns start more than 5 minutes
# after the previous call, 2.7% more than an hour after it. TraceLab (4,265 Claude Code and
# Codex sessions) agrees: human wait median 1.4 min, p90 20.6 min.
#: (seconds, share of user-turn gaps at most that long).
GAP_QUANTILES: tuple[tuple[float, float], ...] = (
    (105.0, 0.50),
    (300.0, 0.76),
    (14.1 * 60, 0.90),
    (3600.0, 0.973),
)
#: Tool-loop calls (same sessions): median 8 s apart, p90 40 s.
TOOL_GAP_QUANTILES: tuple[tuple[float, float], ...] = ((8.0, 0.50), (40.0, 0.90))
#: The chance that a user turn is a session's last (the user never comes back): each of
#: the 382 sessions ends after one of its 2,908 turns.
END_PROBABILITY = 382 / 2908
#: A keep-alive goes this many seconds before the entry it refreshes would expire (network
#: and queueing time; 270 s for a 5-minute entry: "keep-alive reads every 4.5 minutes",
#: the issue's replay).
KEEPALIVE_MARGIN = 30.0
#: No keep-alive is planned later than this after the last call (the plan's horizon).
KEEPALIVE_HORIZON = 4 * 3600.0


def lognormal_fit(quantiles: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """``(mu, sigma)`` of the log-normal whose quantiles fit ``quantiles`` best: least
    squares of ``ln x = mu + sigma * z(p)`` over the given points (two points: exact)."""
    normal = NormalDist()
    zs = [normal.inv_cdf(p) for _, p in quantiles]
    ys = [math.log(x) for x, _ in quantiles]
    z_mean, y_mean = sum(zs) / len(zs), sum(ys) / len(ys)
    szz = sum((z - z_mean) ** 2 for z in zs)
    sigma = sum((z - z_mean) * (y - y_mean) for z, y in zip(zs, ys, strict=True)) / szz
    return y_mean - sigma * z_mean, sigma


@attrs.frozen
class ReturnModel:
    """When the next call comes after the last one: with probability ``end`` never (the
    session is over), else after a log-normal time (``mu``, ``sigma`` of its logarithm, in
    seconds). A server configures its own (:meth:`from_quantiles` of its sessions)."""

    mu: float
    sigma: float
    end: float = END_PROBABILITY

    @classmethod
    def from_quantiles(
        cls, quantiles: Sequence[tuple[float, float]], end: float = END_PROBABILITY
    ) -> ReturnModel:
        mu, sigma = lognormal_fit(quantiles)
        return cls(mu, sigma, end)

    def cdf(self, seconds: float) -> float:
        """P(the user is back within ``seconds``), the ended sessions included (never)."""
        if seconds <= 0:
            return 0.0
        return (1 - self.end) * NormalDist(self.mu, self.sigma).cdf(math.log(seconds))

    def survival(self, seconds: float) -> float:
        """P(not back within ``seconds``): ended sessions included."""
        return 1 - self.cdf(seconds)

    def sample(self, rng: Any) -> float:
        """A return time in seconds (never ``end``: the bench's sessions end by length)."""
        return float(math.exp(rng.gauss(self.mu, self.sigma)))


#: The default: :data:`GAP_QUANTILES` and :data:`END_PROBABILITY`.
DEFAULT_RETURN_MODEL = ReturnModel.from_quantiles(GAP_QUANTILES)


@attrs.frozen
class CachedPrefix:
    """What a request's cache entries hold, in tokens: ``read`` is what a keep-alive (the
    same request again) reads, ``lost`` what an expiry of its shorter-lived entries would
    make the next call write again (the tokens after its last one-hour marker)."""

    read: int
    lost: int


def cached_prefix(
    provider: str, model: str, body: bytes | Mapping[str, Any], tokenizer: Any = None
) -> tuple[CachedPrefix, float]:
    """The :class:`CachedPrefix` of one request body and the seconds its shorter-lived
    entries live: the body simulated alone (a fresh cache writes everything it can hold;
    its one-hour writes survive a pause the five-minute ones do not). The lifetime is the
    rules' TTL for the marker wires (the five-minute entries are the ones lost) and the
    call's shorter-lived entries' for the others (OpenAI's by its retention; GPT-5.6's
    tail entry by the request's ``ttl``, whatever its 12h breakpoints keep)."""
    simulation = Simulation(provider, model=model, tokenizer=tokenizer)
    call = simulation.add(body)
    ttl = simulation.rules.ttl if simulation.rules.explicit else call.short_lifetime
    prefix = CachedPrefix(
        call.cache_write_tokens, call.cache_write_tokens - call.cache_write_1h_tokens
    )
    return prefix, ttl


def keepalive_interval(ttl: float) -> float:
    """Seconds between keep-alives for entries that live ``ttl``: :data:`KEEPALIVE_MARGIN`
    before each would expire (at least half the TTL)."""
    return max(ttl - KEEPALIVE_MARGIN, ttl / 2)


@functools.lru_cache(maxsize=1024)
def keepalive_plan(
    prefix: CachedPrefix,
    read_price: Fraction,
    write_price: Fraction,
    ttl: float,
    model: ReturnModel = DEFAULT_RETURN_MODEL,
) -> tuple[float, ...]:
    """Seconds after the last call at which to send keep-alives while the user has not
    come back (the first ``k`` slots every :func:`keepalive_interval`; empty: none pays).

    The choice is the optimal stopping rule under ``model``, by backward induction over
    the slots up to :data:`KEEPALIVE_HORIZON`: at slot ``k`` (time ``s_k``, the entries
    alive until ``s_(k-1) + ttl``) stopping costs the expected rewrite, P(the user comes
    back after ``s_(k-1) + ttl`` | not back by ``s_k``) times ``(write_price -
    read_price) * prefix.lost``; going on costs one read of ``prefix.read`` at
    ``read_price`` plus the next slot's value, weighted by P(not back by ``s_(k+1)`` |
    not back by ``s_k``). Keep-alives are sent up to the first slot where stopping is
    cheaper. A one-hour entry is taken to outlive the horizon's decisions (``lost``
    excludes it)."""
    loss = float(write_price - read_price) * prefix.lost
    read = float(read_price) * prefix.read
    if loss <= 0 or prefix.read <= 0:
        return ()
    step = keepalive_interval(ttl)
    slots = int(KEEPALIVE_HORIZON // step)
    times = [k * step for k in range(slots + 2)]  # times[0] = the last call

    def stop(k: int) -> float:
        alive = model.survival(times[k])
        if alive <= 0:
            return 0.0
        comes_back_late = (1 - model.end) - model.cdf(times[k - 1] + ttl)
        return max(comes_back_late, 0.0) / alive * loss

    value = stop(slots + 1)
    go_on = [False] * (slots + 2)
    for k in range(slots, 0, -1):
        alive = model.survival(times[k])
        later = model.survival(times[k + 1]) / alive if alive > 0 else 0.0
        keep = read + later * value
        halt = stop(k)
        go_on[k] = keep < halt
        value = min(keep, halt)
    plan = []
    for k in range(1, slots + 1):
        if not go_on[k]:
            break
        plan.append(times[k])
    return tuple(plan)


def plan_for(
    provider: str,
    model: str,
    body: bytes | Mapping[str, Any],
    return_model: ReturnModel = DEFAULT_RETURN_MODEL,
    tokenizer: Any = None,
) -> tuple[tuple[float, ...], float]:
    """The keep-alive plan after the call whose body is ``body`` (:func:`keepalive_plan`
    with the provider's prices) and the lifetime of its shorter-lived entries. The loss
    of an expiry is priced at the write price the next call pays for it: a body with
    one-hour markers (``auto``) loses only what follows its last one, and the next turn's
    one-hour turn marker writes that again at the one-hour price."""
    rules = rules_for(provider, model)
    prefix, ttl = cached_prefix(provider, model, body, tokenizer)
    write = rules.write_multiplier
    if prefix.lost < prefix.read and rules.write_multiplier_1h is not None:
        write = rules.write_multiplier_1h
    plan = keepalive_plan(prefix, rules.read_multiplier, write, ttl, return_model)
    return plan, ttl


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
