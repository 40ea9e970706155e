"""The long-session economics of ``prefixlock bench`` (issue 15): what the golden
``long-session`` case costs per provider, against the perfect-cache bound and the naive
harness, and, for a target it misses, the rule that puts the target out of reach.

:func:`long_session` verifies the case with
:func:`~prefixlock.review.verify.verify_scenario` (every invariant; no hash-seed
subprocess) and takes its ``cost_vs_bound`` and ``cost_vs_naive``. It then replays the
case once more and simulates the same bodies at their **floor**
(:class:`~prefixlock.cache.simulator.Simulation` with ``floor=True``: every prefix
cached, only the service's lifetimes, minimum and increment left), timed and untimed. No
placement of cache markers costs less than the floor, so a floor past a target's limit
proves the target unreachable for these bodies with these settings, and the untimed
floor tells whether expiry is what does it. The reason is data: a sentence built from
the figures and the rules (:mod:`prefixlock.cache.rules`), per missed target.

The scenario ships in the package (``_example/bench/long-session/scenario.yaml``, in a
checkout a symlink to ``golden/long-session/scenario.yaml``), so an installed wheel
reports the same figures; it runs against the bundled example's settings
(``rules/providers.yaml``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs

from .. import providers
from ..cache.rules import (
    ONE_HOUR_TTL,
    ONE_HOUR_TTL_SECONDS,
    OPENAI_EXACT_TTL,
    RETENTION_OPTION,
    CacheRules,
    rules_for,
)
from ..cache.simulator import PerfectBound, Simulation
from ..cache.tokens import get_tokenizer
from ..core import canonical
from ..core.messages import MessageKind
from ..core.model import ModelRequest
from ..core.resources import example_dir
from ..providers.cache_ttl import OPTION as CACHE_TTL_OPTION
from ..providers.cache_ttl import POLICIES as CACHE_TTL_VALUES
from ..review.naive import full_contexts
from ..review.replay import iter_replay, refuse_provider_switch, serialize_at
from ..review.scenario import Scenario, UserStep, load_scenario
from ..review.verify import (
    RootCaches,
    Row,
    call_time,
    name_caches,
    scenario_label,
    verify_scenario,
)

__all__ = [
    "BOUND_LIMIT",
    "BOUND_TARGET",
    "NAIVE_LIMIT",
    "NAIVE_TARGET",
    "SCENARIO",
    "ProviderEconomics",
    "long_session",
    "scenario_path",
]

#: The case, by its golden folder name.
SCENARIO = "long-session"
#: Issue 15: simulated cost within 1.10x of the perfect-cache bound, every provider.
BOUND_TARGET = "long_session_vs_bound"
BOUND_LIMIT = 1.10
#: Issue 15: at most 0.25x the naive harness's simulated cost, every provider.
NAIVE_TARGET = "long_session_vs_naive"
NAIVE_LIMIT = 0.25


def scenario_path() -> Path:
    """The shipped copy of ``golden/long-session/scenario.yaml``."""
    return example_dir() / "bench" / SCENARIO / "scenario.yaml"


@attrs.frozen
class ProviderEconomics:
    """One provider's figures on the case (ratios as floats; see :func:`long_session`)."""

    provider: str
    model: str
    calls: int
    #: Simulated cost / the same calls uncached.
    cost_ratio: float
    cost_vs_bound: float
    cost_vs_naive: float
    #: The floor (no marker placement costs less) as a multiple of the bound, of the
    #: naive harness's cost, and of the bound when nothing expires.
    floor_vs_bound: float
    floor_vs_naive: float
    floor_vs_bound_without_expiry: float
    #: Seconds a cache entry lives after its last use, with these settings.
    lifetime_s: float
    #: Calls whose floor reads less than it would if nothing expired.
    expired_calls: int
    #: Calls that bring a request context not sent before, and those of them that expired.
    context_changes: int
    expired_context_changes: int
    #: Target name -> why it is missed (only the missed targets).
    reasons: tuple[tuple[str, str], ...]
    #: For a wire with a ``cache_ttl`` setting, each value -> the case's cost with it, as
    #: a multiple of its own perfect-cache bound and of the cost with today's setting.
    cache_ttl: tuple[tuple[str, tuple[tuple[str, float | bool], ...]], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        for key, value in out.items():
            if isinstance(value, float):
                out[key] = round(value, 4)
        out["reasons"] = dict(self.reasons)
        out["cache_ttl"] = {value: dict(figures) for value, figures in self.cache_ttl}
        return out


@attrs.frozen
class _Floors:
    """One provider's replay beside verify: the real cost and the two floors."""

    model: str
    rules: CacheRules
    cost: Fraction
    floor: Fraction
    untimed: Fraction
    lifetime: float
    #: 1-based numbers of the calls whose floor read less than without expiry.
    expired: frozenset[int]


def long_session(
    names: Sequence[str] = providers.NAMES,
    *,
    path: Path | None = None,
    tokenizer: str = "estimate",
) -> dict[str, Any]:
    """The economics of the long-session case for ``names`` (a JSON value): per provider
    a :class:`ProviderEconomics`, and whether every invariant held (``ok``)."""
    scenario = load_scenario(path or scenario_path())
    names = scenario.replayed(names)
    calls = list(iter_replay(scenario))
    for name in names:
        refuse_provider_switch(scenario, calls, name, "the bench economics")
    del calls
    rows, failures = verify_scenario(scenario, names, tokenizer=tokenizer)
    floors, changes = _floors(scenario, names, tokenizer)
    policies = _ttl_policies(scenario, names, tokenizer)
    return {
        "scenario": scenario_label(scenario.path),
        "name": scenario.name,
        "tokenizer": get_tokenizer(tokenizer).name,
        "ok": not failures,
        "failures": len(failures),
        "providers": {
            row.provider: _economics(
                row, floors[row.provider], changes, policies[row.provider]
            ).to_json()
            for row in rows
        },
    }


def _floors(
    scenario: Scenario, names: Sequence[str], tokenizer: str
) -> tuple[dict[str, _Floors], frozenset[int]]:
    """Per provider the real cost and the floors of the case's bodies (the replay is
    deterministic: verify checks it); and the calls that bring a new request context."""
    counter = get_tokenizer(tokenizer)
    wires = {name: providers.get(name) for name in names}
    sims: dict[str, tuple[Simulation, Simulation, Simulation]] = {}
    roots = {name: RootCaches(name) for name in names}
    expired: dict[str, set[int]] = {name: set() for name in names}
    # The whole context of each turn, as the naive harness renders it into its system
    # prompt (a sectioned update carries only the sections that changed).
    whole = full_contexts(
        scenario.bundle, [s.request for s in scenario.steps if isinstance(s, UserStep)]
    )
    current: str | None = None
    changes: set[int] = set()
    for call in iter_replay(scenario):
        latest = None
        for message in call.request.messages:
            if message.kind is MessageKind.REQUEST_CONTEXT:
                latest = message
        if latest is not None:
            text = whole.get(latest.id, latest.text)
            if current is not None and text != current:  # the first context is no change
                changes.add(call.index)
            current = text
        at = call_time(scenario, call)
        for name, wire in wires.items():
            if name not in sims:
                model = call.request.settings_for(name).model
                real, timed, untimed = (
                    Simulation(name, model=model, tokenizer=counter, floor=floor)
                    for floor in (False, True, True)
                )
                sims[name] = (real, timed, untimed)
            real, timed, untimed = sims[name]
            # the model a switch step sent the call to: its namespace and prices (Gemini
            # and Bedrock name it in the URL, not the body)
            real.model = timed.model = untimed.model = call.target(name)
            caches = roots[name](call.request)  # Gemini's root cache, as verify names it
            for simulation in (real, timed, untimed):
                name_caches(simulation, caches)
            body = serialize_at(scenario, call, wire)
            real.add(body, at)
            # Untimed, nothing expires: a call that reads less timed lost it to expiry.
            if timed.add(body, at).cache_read_tokens < untimed.add(body).cache_read_tokens:
                expired[name].add(call.index)
    out = {}
    for name, (real, timed, untimed) in sims.items():
        report = real.report()
        out[name] = _Floors(
            model=report.model,
            rules=report.rules,
            cost=report.cost,
            floor=timed.report().cost,
            untimed=untimed.report().cost,
            lifetime=max(c.lifetime for c in report.calls),
            expired=frozenset(expired[name]),
        )
    return out, frozenset(changes)


def _with_ttl(request: ModelRequest, name: str, value: str) -> ModelRequest:
    """``request`` with provider ``name``'s ``cache_ttl`` option set to ``value``."""
    settings = []
    for item in request.settings:
        if item.provider == name:
            options = {**item.options_value, CACHE_TTL_OPTION: value}
            item = attrs.evolve(item, options=canonical.dumps(options))
        settings.append(item)
    return attrs.evolve(request, settings=tuple(settings))


def _ttl_policies(
    scenario: Scenario, names: Sequence[str], tokenizer: str
) -> dict[str, dict[str, dict[str, float | bool]]]:
    """Per provider, for a wire with a ``cache_ttl`` setting (its rules price one-hour
    writes), each value -> ``cost_vs_bound`` (the case replayed with only that option
    changed, as a multiple of its own :class:`PerfectBound`: what verify reports with
    that setting), ``cost_vs_today`` (as a multiple of the cost with the setting the
    case has) and ``today`` (whether it is that setting). Other wires: ``{}``."""
    counter = get_tokenizer(tokenizer)
    runs: dict[tuple[str, str], tuple[providers.Provider, Simulation, PerfectBound]] = {}
    today: dict[str, str] = {}
    out: dict[str, dict[str, dict[str, float | bool]]] = {name: {} for name in names}
    for call in iter_replay(scenario):
        at = call_time(scenario, call)
        for name in names:
            settings = call.request.settings_for(name)
            if name not in today:
                if rules_for(name, call.target(name)).write_multiplier_1h is None:
                    continue
                today[name] = settings.options_value.get(CACHE_TTL_OPTION, CACHE_TTL_VALUES[0])
                for value in CACHE_TTL_VALUES:
                    sim = Simulation(name, model=settings.model, tokenizer=counter)
                    runs[name, value] = (providers.get(name), sim, PerfectBound())
            for value in CACHE_TTL_VALUES:
                wire, sim, bound = runs[name, value]
                sim.model = call.target(name)  # a switch step's (its namespace)
                priced = attrs.evolve(call, request=_with_ttl(call.request, name, value))
                body = serialize_at(scenario, priced, wire)
                bound.add(sim.add(body, at))
    for name, current in today.items():
        base = runs[name, current][1].totals.cost
        for value in CACHE_TTL_VALUES:
            _, sim, bound = runs[name, value]
            cost = sim.totals.cost
            out[name][value] = {
                "cost_vs_bound": round(bound.ratio(cost), 4),
                "cost_vs_today": round(float(cost / base), 4) if base else 1.0,
                "today": value == current,
            }
    return out


def _economics(
    row: Row,
    floors: _Floors,
    changes: frozenset[int],
    policies: dict[str, dict[str, float | bool]] | None = None,
) -> ProviderEconomics:
    """The figures of ``row`` with the floors beside them (the floors as shares of the
    same bodies' real cost, times verify's ratios), the ``cache_ttl`` alternatives and
    the reasons for missed targets."""
    share = float(floors.floor / floors.cost) if floors.cost else 1.0
    untimed_share = float(floors.untimed / floors.cost) if floors.cost else 1.0
    economics = ProviderEconomics(
        provider=row.provider,
        model=floors.model,
        calls=row.calls,
        cost_ratio=row.cost_ratio,
        cost_vs_bound=row.cost_vs_bound,
        cost_vs_naive=row.cost_vs_naive,
        floor_vs_bound=row.cost_vs_bound * share,
        floor_vs_naive=row.cost_vs_naive * share,
        floor_vs_bound_without_expiry=row.cost_vs_bound * untimed_share,
        lifetime_s=floors.lifetime,
        expired_calls=len(floors.expired),
        context_changes=len(changes),
        expired_context_changes=len(changes & floors.expired),
        reasons=(),
        cache_ttl=tuple(
            (value, tuple(sorted(figures.items()))) for value, figures in (policies or {}).items()
        ),
    )
    return attrs.evolve(economics, reasons=_reasons(economics, floors.rules))


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min"


def _lifetime_rule(rules: CacheRules, lifetime: float) -> str:
    """The name of the rule in :mod:`prefixlock.cache.rules` that gives ``lifetime``."""
    if rules.write_multiplier_1h is not None and lifetime == rules.long_ttl:
        return (
            "ONE_HOUR_TTL_SECONDS"
            if lifetime == ONE_HOUR_TTL_SECONDS
            else "OPENAI_BREAKPOINT_TTL['12h']"
        )
    retention = [name for name, ttl in rules.retention_ttl if ttl == lifetime]
    if retention and lifetime != rules.ttl:
        return f"OPENAI_RETENTION_TTL[{retention[0]!r}]"
    return (
        "OPENAI_EXACT_TTL"
        if rules.ttl == OPENAI_EXACT_TTL and rules.increment == 1
        else "DEFAULT_TTL"
    )


def _longer_lifetime(economics: ProviderEconomics, rules: CacheRules) -> str:
    """The setting that would keep entries longer, if the wire has one (from the rules),
    with what the case costs under each other value of it where it was priced."""
    if rules.write_multiplier_1h is not None and economics.lifetime_s < rules.long_ttl:
        text = (
            f"; `{CACHE_TTL_OPTION}: {ONE_HOUR_TTL}` would keep them "
            f"{_minutes(rules.long_ttl)} (writes at {float(rules.write_multiplier_1h):g}x)"
        )
        priced = [
            f"`{CACHE_TTL_OPTION}: {value}`: {figures['cost_vs_bound']:.2f}x the bound, "
            f"{figures['cost_vs_today']:.2f}x today's cost"
            for value, figures in ((v, dict(f)) for v, f in economics.cache_ttl)
            if not figures["today"]
        ]
        return text + (f"; on this case {'; '.join(priced)}" if priced else "")
    longer = [(ttl, name) for name, ttl in rules.retention_ttl if ttl > economics.lifetime_s]
    if longer:
        ttl, name = max(longer)
        return f"; `{RETENTION_OPTION}: {name}` would keep them about {_minutes(ttl)}"
    if not rules.explicit and not rules.retention_ttl:
        return "; the implicit cache has no lifetime setting"
    return ""


def _reasons(economics: ProviderEconomics, rules: CacheRules) -> tuple[tuple[str, str], ...]:
    """Why each missed target is missed: a floor past its limit names the rule that
    puts it there; otherwise the target is not ruled out by the rules."""
    e = economics
    steps = f"; reads count in {rules.increment}-token steps" if rules.increment > 1 else ""
    expiry = (
        f"cache entries live {_minutes(e.lifetime_s)} after their last use "
        f"(prefixlock.cache.rules.{_lifetime_rule(rules, e.lifetime_s)}) and "
        f"{e.expired_calls} of {e.calls} calls come later than that"
    )
    markers = (
        f"where the cache markers sit ({rules.max_breakpoints} breakpoints, "
        f"{rules.lookback_blocks}-block lookback) and the {float(rules.write_multiplier):g}x write "
        "price"
        if rules.explicit
        else "the simulation's block granularity"
    )
    expired = "all" if e.expired_context_changes == e.context_changes else e.expired_context_changes
    reasons = []
    if e.cost_vs_bound > BOUND_LIMIT:
        if e.floor_vs_bound <= BOUND_LIMIT:
            text = (
                f"not ruled out by the rules: an ideal placement of cache markers costs "
                f"{e.floor_vs_bound:.2f}x the bound; the rest is {markers}"
            )
        elif e.floor_vs_bound_without_expiry <= BOUND_LIMIT:
            text = (
                f"unreachable with these settings: {expiry}, so even an ideal placement of "
                f"cache markers costs {e.floor_vs_bound:.2f}x the bound "
                f"({e.floor_vs_bound_without_expiry:.2f}x if nothing expired){steps}"
                f"{_longer_lifetime(e, rules)}"
            )
        else:
            text = (
                f"unreachable even if nothing expired: the {rules.min_tokens}-token minimum"
                f"{steps} leave an ideal placement of cache markers at "
                f"{e.floor_vs_bound_without_expiry:.2f}x the bound"
            )
        reasons.append((BOUND_TARGET, text))
    if e.cost_vs_naive > NAIVE_LIMIT:
        if e.floor_vs_naive <= NAIVE_LIMIT:
            text = (
                f"not ruled out by the rules: an ideal placement of cache markers costs "
                f"{e.floor_vs_naive:.2f}x the naive harness; the rest is {markers}"
            )
        else:
            text = (
                f"unreachable: the naive harness caches too and loses its cache only where "
                f"its system prompt changes, {e.context_changes} times here, {expired} of "
                f"them on calls whose cache had expired anyway "
                f"({expiry}); even an ideal placement of cache markers on prefixlock's bodies "
                f"costs {e.floor_vs_naive:.2f}x the naive harness"
            )
        reasons.append((NAIVE_TARGET, text))
    return tuple(reasons)
