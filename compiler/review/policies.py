"""Each cache policy's cost on one conversation with its call times (issue 45): what
``prefixlock verify --policy`` prints for a user's scenarios and ``prefixlock bench``
for its real-timing workload.

:func:`price_session` prices, per provider, on the same requests and times: ``5m``,
``1h`` and ``auto`` (the ``cache_ttl`` values of the marker wires, Anthropic and Bedrock
with a model that takes one-hour entries), ``configured`` (the settings as they are),
``keepalive`` (five-minute markers where the wire has a TTL choice, else ``configured``,
plus the keep-alives :func:`~prefixlock.cache.policy.
plan_for` sends in every gap: the requests :meth:`~prefixlock.Conversation.keepalive`
returns) and ``auto+keepalive``. The yardsticks, all simulated from the exact bodies:
``uncached`` (every token at the base price), the **perfect-cache bound**
(:class:`~prefixlock.cache.simulator.PerfectBound`: never expires, unreachable), the
**offline-optimal policy** (:func:`_oracle`: knows each gap in advance and picks, per
gap, the cheapest of letting the entries expire, a one-hour write of the call before the
gap, or keep-alive reads through it) and the **naive harness**
(:class:`~prefixlock.review.naive.NaiveHarness`: the context re-rendered into the system
prompt, no keep-alive, five-minute markers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs

from .. import providers
from ..cache.policy import (
    DEFAULT_RETURN_MODEL,
    ReturnModel,
    cached_prefix,
    keepalive_interval,
    plan_for,
    with_policy,
)
from ..cache.rules import DEFAULT_TTL, rules_for
from ..cache.simulator import CacheTotals, CallCache, PerfectBound, Simulation
from ..core.errors import UsageError
from ..core.limits import keepalive_output_limit
from ..core.model import ModelRequest
from ..runtime.failover import retarget
from .naive import NaiveHarness, tool_file_order
from .replay import Carrier, iter_replay
from .scenario import Scenario, load_scenario, scenario_files
from .verify import call_time, scenario_label

__all__ = [
    "POLICIES",
    "SHORTEST_SLOT",
    "SessionCall",
    "format_policies",
    "marker_policies",
    "parse_policies",
    "price_session",
    "scenario_calls",
    "scenario_policies",
]

#: The policies priced, in report order (see the module docstring).
POLICIES = ("configured", "5m", "1h", "auto", "keepalive", "auto+keepalive")
#: No entry lives shorter than this, and no keep-alive is planned sooner (half of the
#: shortest TTL, :func:`~prefixlock.cache.policy.keepalive_interval`): a shorter gap
#: needs no choice.
SHORTEST_SLOT = DEFAULT_TTL / 2


@attrs.frozen
class SessionCall:
    """One model call of a session: the request and its time (seconds from the start),
    and the models ``switch`` steps sent it to (provider -> model; a provider not named
    gets its configured model)."""

    request: ModelRequest
    at: float
    models: Mapping[str, str] = attrs.field(factory=dict)
    #: where a provider switch sent the call (:attr:`~prefixlock.review.replay.Call.route`)
    route: tuple[str, str] | None = None

    def model(self, provider: str) -> str:
        """The model ``provider``'s body of this call names."""
        switched = self.models.get(provider)
        return switched if switched is not None else self.request.settings_for(provider).model

    def for_provider(self, provider: str) -> SessionCall:
        """This call with ``provider``'s model the one a switch set (as
        :func:`~prefixlock.review.replay.call_request` sends it): its body names it."""
        model = self.models.get(provider)
        if model is None:
            return self
        return attrs.evolve(self, request=retarget(self.request, provider, model, opaque=set()))


def marker_policies(provider: str, model: str) -> bool:
    """Whether ``provider``'s ``cache_ttl`` has a choice for ``model``."""
    return rules_for(provider, model).write_multiplier_1h is not None


def _keepalive_body(wire: providers.Provider, request: ModelRequest) -> bytes:
    settings = tuple(
        attrs.evolve(s, max_tokens=keepalive_output_limit(s.provider, s.options_value))
        for s in request.settings
    )
    return wire.serialize(attrs.evolve(request, settings=settings))


def _plan(provider: str, model: str, body: bytes, return_model: ReturnModel) -> tuple[float, ...]:
    return plan_for(provider, model, body, return_model)[0]


def _ttl(provider: str, model: str, body: bytes) -> float:
    return cached_prefix(provider, model, body)[1]


class _Lanes:
    """A session's simulation when its calls may go to more than one provider (a
    provider switch): one :class:`Simulation` per provider, whose bodies it reads, and
    the totals over all of them. Each call names its (provider, model): its namespace."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.lanes: dict[str, Simulation] = {}
        self.totals = CacheTotals()

    def add(self, wire: str, model: str, body: bytes, at: float) -> CallCache:
        lane = self.lanes.get(wire)
        if lane is None:
            lane = self.lanes[wire] = Simulation(wire, model=model, **self.options)
        lane.model = model  # Gemini and Bedrock name it in the URL only
        priced = lane.add(body, at)
        self.totals = self.totals.plus(priced)
        return priced

    def fork(self) -> _Lanes:
        twin = _Lanes(**self.options)
        twin.lanes = {wire: lane.fork() for wire, lane in self.lanes.items()}
        twin.totals = self.totals
        return twin


class _Run:
    """One policy's simulation of a session: its cost and its keep-alives."""

    def __init__(self) -> None:
        self.sim = _Lanes(keep_calls=False)
        self.keepalives = 0

    @property
    def cost(self) -> Fraction:
        return self.sim.totals.cost


@attrs.frozen
class _Sent:
    """One call as the session that started on a provider sends it: the provider it
    goes to (another after a provider switch), its model and its request."""

    wire: str
    model: str
    request: ModelRequest
    at: float

    def marked(self, marker: str) -> ModelRequest:
        """The request with ``cache_ttl`` ``marker`` where the wire has a choice."""
        if marker == "configured" or not marker_policies(self.wire, self.model):
            return self.request
        return with_policy(self.request, self.wire, marker)


def _sent(calls: Sequence[SessionCall], provider: str) -> list[_Sent]:
    """Each call as the session that started on ``provider`` sends it: another
    provider's opaque parts (a scenario's thinking) carried or dropped as the provider it
    goes to takes them; at the model a switch step sent it to (a new cache namespace,
    its prices); after a provider switch, to that provider (the failover path)."""
    carrier = Carrier()
    out = []
    for call in calls:
        wire = provider if call.route is None else call.route[0]
        moved = attrs.evolve(call, request=carrier.request(call.request, wire))
        out.append(_Sent(wire, call.model(wire), moved.for_provider(wire).request, call.at))
    return out


def price_session(
    calls: Sequence[SessionCall],
    provider: str,
    *,
    tool_order: Sequence[str] = (),
    return_model: ReturnModel = DEFAULT_RETURN_MODEL,
) -> dict[str, Any]:
    """One session's figures for ``provider`` (the provider its calls start on): the
    cost of each policy (and of the yardsticks) in base input-token units, and each
    policy's ratios."""
    sent_calls = _sent(calls, provider)
    wires = {name: providers.get(name) for name in dict.fromkeys(c.wire for c in sent_calls)}
    choice = any(marker_policies(c.wire, c.model) for c in sent_calls)
    policies = [p for p in POLICIES if p in ("configured", "keepalive") or choice]
    runs = {policy: _Run() for policy in policies}
    bound = PerfectBound()
    uncached = Fraction(0)
    for i, call in enumerate(sent_calls):
        # the next call's time; after the last call the user may come back, and the
        # server cannot know that the session is over: its keep-alives are paid too
        nxt = sent_calls[i + 1].at if i + 1 < len(sent_calls) else math.inf
        wire = wires[call.wire]
        for policy, run in runs.items():
            # keepalive: five-minute markers where the wire has a choice, else configured
            request = call.marked("5m" if policy == "keepalive" else policy.split("+")[0])
            sent = wire.serialize(request)
            priced = run.sim.add(call.wire, call.model, sent, call.at)
            if policy == "configured":
                bound.add(priced)
                uncached += priced.uncached_cost
            if policy.endswith("keepalive") and nxt - call.at > SHORTEST_SLOT:
                keep = _keepalive_body(wire, request)
                for offset in _plan(call.wire, call.model, sent, return_model):
                    if call.at + offset >= nxt:
                        break
                    run.sim.add(call.wire, call.model, keep, call.at + offset)
                    run.keepalives += 1
    oracle = _oracle(sent_calls, wires)
    naive = _naive(sent_calls, wires, tool_order)
    out: dict[str, Any] = {
        "calls": len(calls),
        "uncached": float(uncached),
        "bound": float(bound.cost),
        "oracle": float(oracle),
        "naive": float(naive),
        "policies": {},
    }
    for policy, run in runs.items():
        cost = run.cost
        out["policies"][policy] = {
            "cost": float(cost),
            "keepalives": run.keepalives,
            "vs_uncached": float(cost / uncached),
            "vs_bound": float(cost / bound.cost),
            "vs_oracle": float(cost / oracle),
            "vs_naive": float(cost / naive),
        }
    return out


def _oracle(calls: Sequence[_Sent], wires: Mapping[str, providers.Provider]) -> Fraction:
    """The offline-optimal policy's cost: the five-minute bodies (on a wire without a TTL
    choice the configured ones), and in each gap longer
    than the entries' lifetime the cheapest (given the gap) of letting them expire, a
    one-hour write of the call before the gap (where the wire has one), or keep-alive
    reads through the gap; the choice is priced by simulating each option up to and
    including the next call, and the cheapest one is kept."""
    sim = _Lanes()
    for i, call in enumerate(calls):
        wire = wires[call.wire]
        plain = wire.serialize(call.marked("5m"))  # the base: five-minute markers
        if i + 1 == len(calls):
            sim.add(call.wire, call.model, plain, call.at)
            break
        nxt = calls[i + 1]
        gap = nxt.at - call.at
        ttl = _ttl(call.wire, call.model, plain) if gap > SHORTEST_SLOT else math.inf
        if gap < ttl:
            sim.add(call.wire, call.model, plain, call.at)
            continue
        after = wires[nxt.wire].serialize(nxt.marked("5m"))
        step = keepalive_interval(ttl)
        reads = math.ceil((gap - ttl) / step) if gap >= ttl else 0
        keep = _keepalive_body(wire, call.marked("5m"))
        # each option: the bodies sent from this call up to (not including) the next
        options = [[(plain, call.at)]]
        if marker_policies(call.wire, call.model):
            options.append([(wire.serialize(call.marked("1h")), call.at)])
        options.append(
            [(plain, call.at)] + [(keep, call.at + k * step) for k in range(1, reads + 1)]
        )
        best: tuple[Fraction, _Lanes] | None = None
        for option in options:
            fork = sim.fork()
            before = fork.totals.cost
            for body, at in option:
                fork.add(call.wire, call.model, body, at)
            probe = fork.fork()
            probe.add(nxt.wire, nxt.model, after, nxt.at)
            spent = probe.totals.cost - before
            if best is None or spent < best[0]:
                best = (spent, fork)
        assert best is not None
        sim = best[1]  # the cheapest option's state, before the next call
    return sim.totals.cost


def _naive(
    calls: Sequence[_Sent],
    wires: Mapping[str, providers.Provider],
    tool_order: Sequence[str],
) -> Fraction:
    """The naive harness's cost on the same calls and times: no keep-alive, and the
    services' default five-minute markers (what most harnesses send), whatever
    ``cache_ttl`` the settings have. A harness per provider the calls go to (its
    history holds the parts as that provider takes them)."""
    harnesses: dict[str, NaiveHarness] = {}
    sim = _Lanes()
    for call in calls:
        harness = harnesses.setdefault(call.wire, NaiveHarness(tool_order))
        request = harness.request(call.request)
        if marker_policies(call.wire, call.model):
            request = with_policy(request, call.wire, "5m")
        sim.add(call.wire, call.model, wires[call.wire].serialize(request), call.at)
    return sim.totals.cost


def parse_policies(text: str) -> tuple[str, ...]:
    """``5m,1h,auto,keepalive`` -> the policy names, checked against :data:`POLICIES`."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in POLICIES]
    if not names or unknown:
        raise UsageError(
            f"--policy: unknown policy {', '.join(map(repr, unknown)) or repr(text)} "
            f"(known: {', '.join(POLICIES)})"
        )
    return names


def scenario_calls(scenario: Scenario) -> list[SessionCall]:
    """The model calls of ``scenario`` with their times in seconds (a call without a
    timestamp comes with the call before it; before the first timestamp, at 0)."""
    out: list[SessionCall] = []
    at = 0.0
    for call in iter_replay(scenario):
        stamp = call_time(scenario, call)
        if stamp is not None:
            at = stamp
        # a switch of a scenario with `providers:` names its provider's model
        models = call.models if call.route is None else dict((call.route,))
        out.append(SessionCall(call.request, at, models, call.route))
    if out:
        start = min(c.at for c in out if c.at) if any(c.at for c in out) else 0.0
        out = [attrs.evolve(c, at=max(c.at - start, 0.0)) for c in out]
    return out


def scenario_policies(
    paths: Sequence[Path], names: Sequence[str], policies: Sequence[str]
) -> list[dict[str, Any]]:
    """Per scenario (``paths``: files or folders), provider and policy (those of
    ``policies`` that the provider has), the policy's cost as a multiple of the same
    calls uncached, of the perfect-cache bound, of the offline-optimal policy and of the
    naive harness (:func:`price_session`), and its keep-alives."""
    rows: list[dict[str, Any]] = []
    for path in scenario_files(paths):
        scenario = load_scenario(path)
        calls = scenario_calls(scenario)
        if not calls:
            continue
        order = tool_file_order(scenario.bundle_root)
        for name in scenario.replayed(names):
            figures = price_session(calls, name, tool_order=order)
            for policy in policies:
                f = figures["policies"].get(policy)
                if f is None:
                    continue  # e.g. 1h on a wire without a TTL setting
                rows.append(
                    {
                        "scenario": scenario_label(scenario.path),
                        "provider": name,
                        "policy": policy,
                        "calls": figures["calls"],
                        **{key: round(f[key], 4) for key in _RATIOS},
                        "keepalives": f["keepalives"],
                    }
                )
    return rows


_RATIOS = ("vs_uncached", "vs_bound", "vs_oracle", "vs_naive")


def format_policies(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The table ``verify --policy`` prints."""
    if not rows:
        return []
    lines = [
        "cache policies: cost vs uncached / vs perfect cache / vs offline optimum / vs naive "
        "harness (keep-alives)"
    ]
    width = max(len(f"{r['scenario']}  {r['provider']}  {r['policy']}") for r in rows)
    for r in rows:
        label = f"{r['scenario']}  {r['provider']}  {r['policy']}"
        ratios = " / ".join(f"{r[key]:.2f}x" for key in _RATIOS)
        lines.append(f"  {label:<{width}}  {ratios}  ({r['keepalives']})")
    return lines
