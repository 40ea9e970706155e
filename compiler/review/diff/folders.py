"""Two folders of request bodies compared call by call: the result model and its JSON.

:func:`diff_folders` pairs call *k* of every ``<case>/<provider>`` folder of OLD with
call *k* of the same folder of NEW and classifies it
(:func:`prefixlock.review.compare.compare_bodies`); calls, providers and cases present on one
side only are ``added`` or ``removed``. Each case x provider also gets the simulated
cost of both call sequences (:func:`prefixlock.cache.simulator.simulate`), hence its cost delta.
Gemini calls that name an explicit cache of the root (``cachedContent``) are priced with
the cache their case's ``scenario.yaml`` gives (as verify prices them); where a side's
bodies are all there is, both sides are priced without that cache's tokens, and a note
says so.

The result is :class:`FolderDiff` -> :class:`PairDiff` (one case x provider) ->
:class:`CallDiff` (one call number); each has the ``to_json`` that ``prefixlock diff
--json`` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs

from ...cache.simulator import CacheReport, CallCache, Simulation
from ...core import canonical
from ...core.errors import CacheSimulationError, InputError, PrefixlockError
from ...spec.bundle import Bundle
from ..compare import (
    ADDED,
    CALL_VERDICTS,
    IMPACTS,
    NO_IMPACT,
    PREFIX_BREAK,
    REMOVED,
    TAIL_APPEND,
    TAIL_ONLY,
    UNCHANGED,
    Comparison,
    attribute,
    compare_bodies,
    explanation,
    parse_body,
)
from ..jsondiff import describe
from ..replay import replay
from ..scenario import load_scenario
from ..sources import SourceIndex
from ..verify import RootCaches, call_time, name_caches
from .sides import Side, call_sets, read_body

__all__ = ["CallDiff", "FolderDiff", "PairDiff", "SourceIndexes", "diff_folders", "worst_impact"]


def worst_impact(impacts: Iterable[str]) -> str:
    """The most far-reaching of ``impacts`` (root, then rendered content, then none)."""
    found = set(impacts)
    return next((impact for impact in IMPACTS if impact in found), NO_IMPACT)


@attrs.frozen
class CallDiff:
    """One call number of one case and provider."""

    number: int
    verdict: str  # UNCHANGED, TAIL_ONLY, PREFIX_BREAK, ADDED or REMOVED
    comparison: Comparison | None = None
    source: str | None = None
    old_cost: Fraction | None = None
    new_cost: Fraction | None = None

    def lines(self) -> list[str]:
        if self.comparison is None:
            return [self.verdict]
        return explanation(self.comparison, self.source)

    def group(self) -> tuple[Any, ...]:
        """Consecutive calls of one group print as one range."""
        c = self.comparison
        if c is None:
            return (self.verdict,)
        return (c.kind, c.appended, c.note, c.difference.path if c.difference else None)

    @property
    def impact(self) -> str:
        """Deployment impact; calls added or removed change the scenario, not a deploy."""
        return self.comparison.impact if self.comparison is not None else NO_IMPACT

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"call": self.number, "verdict": self.verdict}
        if self.comparison is not None and self.impact != NO_IMPACT:
            out["impact"] = self.impact
        c = self.comparison
        if c is not None and c.note:
            out["note"] = c.note
        if c is not None and c.kind == TAIL_APPEND:
            out["appended"] = c.appended
        if c is not None and c.kind == PREFIX_BREAK and c.difference is not None:
            old_text, new_text = describe(c.difference)
            out.update(
                path=c.difference.path,
                old_value=old_text,
                new_value=new_text,
                source=self.source,
                invalidated=round(c.invalidated, 4),
                invalidated_bytes=c.old_size - c.common,
                old_bytes=c.old_size,
            )
        for key, cost in (("old_cost", self.old_cost), ("new_cost", self.new_cost)):
            if cost is not None:
                out[key] = round(float(cost), 2)
        return out


def _cost(report: CacheReport | None) -> Fraction:
    return report.cost if report is not None else Fraction(0)


@attrs.frozen
class PairDiff:
    """One case x provider: its calls, and the simulated cost of each side."""

    case: str  # the folder holding the provider folder, relative ("" at the top)
    provider: str
    old_calls: int
    new_calls: int
    calls: tuple[CallDiff, ...]
    old_report: CacheReport | None
    new_report: CacheReport | None

    @property
    def key(self) -> str:
        return f"{self.case}/{self.provider}" if self.case else self.provider

    def count(self, verdict: str) -> int:
        return sum(1 for call in self.calls if call.verdict == verdict)

    @property
    def changed(self) -> bool:
        return any(call.verdict != UNCHANGED for call in self.calls)

    @property
    def impact(self) -> str:
        return worst_impact(call.impact for call in self.calls)

    @property
    def invalidated_max(self) -> float | None:
        shares = [
            c.comparison.invalidated
            for c in self.calls
            if c.verdict == PREFIX_BREAK and c.comparison
        ]
        return max(shares) if shares else None

    @property
    def old_cost(self) -> Fraction:
        return _cost(self.old_report)

    @property
    def new_cost(self) -> Fraction:
        return _cost(self.new_report)

    @property
    def cost_delta(self) -> Fraction:
        return self.new_cost - self.old_cost

    @property
    def cost_delta_share(self) -> float | None:
        """``cost_delta / old_cost``; None without an old cost."""
        return float(self.cost_delta / self.old_cost) if self.old_cost else None

    def to_json(self) -> dict[str, Any]:
        share, invalidated = self.cost_delta_share, self.invalidated_max
        return {
            "case": self.case,
            "provider": self.provider,
            "old_calls": self.old_calls,
            "new_calls": self.new_calls,
            "unchanged": self.count(UNCHANGED),
            "tail_only": self.count(TAIL_ONLY),
            "prefix_breaks": self.count(PREFIX_BREAK),
            "added": self.count(ADDED),
            "removed": self.count(REMOVED),
            "impact": self.impact,
            "invalidated_max": None if invalidated is None else round(invalidated, 4),
            "old_cost": round(float(self.old_cost), 2),
            "new_cost": round(float(self.new_cost), 2),
            "cost_delta": round(float(self.cost_delta), 2),
            "cost_delta_share": None if share is None else round(share, 4),
            "old_cost_ratio": _ratio(self.old_report),
            "new_cost_ratio": _ratio(self.new_report),
            "calls": [call.to_json() for call in self.calls],
        }


def _ratio(report: CacheReport | None) -> float | None:
    return None if report is None or not report.calls else round(report.cost_ratio, 4)


@attrs.frozen
class FolderDiff:
    old: Side
    new: Side
    pairs: tuple[PairDiff, ...]
    #: one per case that only one side has call times for (both priced back to back)
    notes: tuple[str, ...] = ()

    def count(self, verdict: str) -> int:
        return sum(pair.count(verdict) for pair in self.pairs)

    @property
    def impact(self) -> str:
        return worst_impact(pair.impact for pair in self.pairs)

    def sources(self, impact: str) -> list[str]:
        """The spec lines behind the calls of one impact class, first seen first."""
        found: dict[str, None] = {}
        for pair in self.pairs:
            for call in pair.calls:
                if call.impact == impact and call.source:
                    found.setdefault(call.source)
        return list(found)

    def _cases(self, side: str) -> set[str]:
        return {p.case for p in self.pairs if (p.old_calls if side == "old" else p.new_calls)}

    @property
    def cases_added(self) -> list[str]:
        return sorted(self._cases("new") - self._cases("old"))

    @property
    def cases_removed(self) -> list[str]:
        return sorted(self._cases("old") - self._cases("new"))

    def to_json(self) -> dict[str, Any]:
        counts = {v: self.count(v) for v in CALL_VERDICTS}
        return {
            "old": self.old.to_json(),
            "new": self.new.to_json(),
            "prefix_stable": not counts[PREFIX_BREAK],
            "impact": self.impact,
            "calls": sum(counts.values()),
            "unchanged": counts[UNCHANGED],
            "tail_only": counts[TAIL_ONLY],
            "prefix_breaks": counts[PREFIX_BREAK],
            "added": counts[ADDED],
            "removed": counts[REMOVED],
            "cases_added": self.cases_added,
            "cases_removed": self.cases_removed,
            "results": [pair.to_json() for pair in self.pairs],
            "notes": list(self.notes),
        }


class SourceIndexes:
    """One :class:`SourceIndex` per spec root (and per pair of roots compared), built
    when first asked for."""

    def __init__(self) -> None:
        self._built: dict[Path, SourceIndex] = {}
        self._changed: dict[tuple[Path, Path], SourceIndex] = {}

    def __call__(self, root: Path) -> SourceIndex:
        index = self._built.get(root)
        if index is None:
            index = self._built[root] = SourceIndex(root)
        return index

    def changed(self, old_root: Path, new_root: Path) -> SourceIndex:
        """``new_root``'s index that blames only lines changed since ``old_root``."""
        index = self._changed.get((old_root, new_root))
        if index is None:
            index = self._changed[old_root, new_root] = self(new_root).with_changes(old_root)
        return index


class CallTimes:
    """Per case folder, the time of each of its model calls, as verify prices them
    (:func:`~prefixlock.review.verify.call_time`), replayed from the ``scenario.yaml``
    beside the bodies; None where there is none, or its replay does not load, or the
    body numbers are not 1 to its number of calls (bodies of another version of the
    case): the calls then follow each other at once, as before times were read."""

    def __init__(self) -> None:
        self._times: dict[Path, list[float | None] | None] = {}
        #: the models of the bundle each case's scenario names (as verify takes them)
        self._models: dict[Path, dict[str, str] | None] = {}
        #: per provider whose calls name explicit caches, each call's (:class:`RootCaches`)
        self._roots: dict[Path, dict[str, list[Roots]]] = {}
        #: one bundle per spec root: the cases of a side share theirs (``bundle: ../..``)
        self._bundles: dict[Path, Bundle] = {}
        #: per call, where a provider switch sent it ((provider, model)), else None
        self._routes: dict[Path, list[tuple[str, str] | None]] = {}

    def __call__(self, case: Path, numbers: Iterable[int]) -> list[float | None] | None:
        self._load(case)
        times = self._times[case]
        if times is None or list(numbers) != list(range(1, len(times) + 1)):
            return None
        return times

    def roots(self, case: Path, numbers: Iterable[int], provider: str) -> list[Roots] | None:
        """Per call, the explicit caches of the root its request names -> the bodies
        that create them, as verify gives them to the simulator; None where there are no
        times (:meth:`__call__`) or the scenario's calls name none."""
        if self(case, numbers) is None:
            return None
        return self._roots[case].get(provider)

    def routes(self, case: Path, numbers: Iterable[int]) -> list[tuple[str, str] | None] | None:
        """Per call, the (provider, model) a provider switch of the case's scenario sent
        it to (None: the folder's own); None where there are no times (:meth:`__call__`)."""
        if self(case, numbers) is None:
            return None
        return self._routes.get(case)

    def models(self, case: Path) -> dict[str, str] | None:
        """Provider -> model of the bundle the case's scenario names; None where it has
        no scenario that loads (the spec root's models are taken then)."""
        self._load(case)
        return self._models[case]

    def _load(self, case: Path) -> None:
        if case in self._times:
            return
        self._times[case] = self._models[case] = None
        path = case / "scenario.yaml"
        if not path.is_file():
            return
        try:
            scenario = load_scenario(path, bundles=self._bundles)
            calls = replay(scenario)
            times = [call_time(scenario, call) for call in calls]
            roots = {}
            for settings in scenario.bundle.settings:
                made = RootCaches(settings.provider)
                found = [made(call.request) for call in calls]
                if any(found):
                    roots[settings.provider] = found
        except PrefixlockError:  # the bodies are still compared; verify names the error
            return
        self._times[case] = times
        self._roots[case] = roots
        self._routes[case] = [call.route for call in calls]
        self._models[case] = {s.provider: s.model for s in scenario.bundle.settings}


#: Explicit cache name -> the body that creates it (:class:`RootCaches`).
Roots = Mapping[str, Mapping[str, Any]]


def _named_caches(provider: str, bodies: Sequence[bytes]) -> list[str | None]:
    """Per body, the Gemini explicit cache it names (``cachedContent``), else None."""
    names: list[str | None] = []
    for data in bodies:
        name = None
        if provider == "gemini" and b'"cachedContent"' in data:
            try:
                value = canonical.loads(data)
            except ValueError:  # the simulation names the file
                value = None
            found = value.get("cachedContent") if isinstance(value, dict) else None
            name = found if isinstance(found, str) else None
        names.append(name)
    return names


def _unknown_caches(
    provider: str, bodies: Sequence[bytes], roots: Sequence[Roots] | None
) -> list[str]:
    """The explicit caches ``bodies`` name whose create body ``roots`` does not give
    (for the call that names it)."""
    unknown: dict[str, None] = {}
    for i, name in enumerate(_named_caches(provider, bodies)):
        if name is not None and (roots is None or name not in roots[i]):
            unknown.setdefault(name)
    return list(unknown)


def _without_cache(data: bytes) -> Any:
    """A Gemini body without its ``cachedContent`` (the body as is when it has none)."""
    value = canonical.loads(data)
    if isinstance(value, dict) and "cachedContent" in value:
        return {k: v for k, v in value.items() if k != "cachedContent"}
    return value


def _simulate(
    provider: str,
    files: Mapping[int, Path],
    bodies: list[bytes],
    model: str | None,
    times: Sequence[float | None] | None = None,
    roots: Sequence[Roots] | None = None,
    *,
    uncached_root: bool = False,
    routes: Sequence[tuple[str, str] | None] | None = None,
) -> CacheReport | None:
    """The cache simulation of one call sequence (None without calls), each call at its
    time where ``times`` gives them, with the explicit caches ``roots`` gives for each
    call; ``uncached_root``: every call priced without the explicit cache it names."""
    if not bodies:
        return None
    try:
        simulation = Simulation(provider, model=model)
        # after a provider switch (``routes``), that provider's bodies: its simulation
        lanes = {provider: simulation}
        out: list[CallCache] = []
        for i, data in enumerate(bodies):
            route = routes[i] if routes is not None else None
            lane = simulation
            if route is not None:
                lane = lanes.get(route[0]) or lanes.setdefault(
                    route[0], Simulation(route[0], model=route[1])
                )
                lane.model = route[1]
            if roots is not None:
                name_caches(lane, roots[i])
            body = _without_cache(data) if uncached_root else data
            priced = lane.add(body, None if times is None else times[i])
            out.append(attrs.evolve(priced, index=len(out) + 1))
        return attrs.evolve(simulation.report(), calls=tuple(out))
    except ValueError:  # name the file, as compare_bodies would
        for path, data in zip(files.values(), bodies, strict=True):
            parse_body(data, str(path))
        raise
    except PrefixlockError as err:  # e.g. more cache breakpoints than the API accepts
        folder = next(iter(files.values())).parent
        raise CacheSimulationError(f"{folder}: cache simulation: {err}") from None


def diff_folders(old: Side, new: Side, indexes: SourceIndexes | None = None) -> FolderDiff:
    """Compare call k of every ``<case>/<provider>`` folder of ``old`` and ``new``."""
    indexes = indexes if indexes is not None else SourceIndexes()
    old_sets, new_sets = call_sets(old.path), call_sets(new.path)
    if not old_sets and not new_sets:
        raise InputError(f"no <provider>/NNNN.json bodies below {old.label} or {new.label}")
    old_index, new_index = indexes(old.root), indexes.changed(old.root, new.root)
    times = CallTimes()
    pairs: list[PairDiff] = []
    notes: dict[str, None] = {}
    for key in sorted(set(old_sets) | set(new_sets)):
        case, _, name = key.rpartition("/")
        a, b = old_sets.get(key, {}), new_sets.get(key, {})
        old_read = {n: read_body(path) for n, path in a.items()}
        new_read = {n: read_body(path) for n, path in b.items()}
        old_bodies, new_bodies = list(old_read.values()), list(new_read.values())
        old_models = times.models(old.path / case) or old_index.models
        new_models = times.models(new.path / case) or new_index.models
        old_model, new_model = old_models.get(name), new_models.get(name)
        # A side with no spec root or scenario beside its bodies names no model: it is
        # priced as the other side's (Bedrock's model is in its URL, not its body, so the
        # default rules would price identical bodies differently).
        old_model, new_model = old_model or new_model, new_model or old_model
        old_times, new_times = times(old.path / case, a), times(new.path / case, b)
        if (old_times is None) != (new_times is None) and a and b:
            # Priced each its own way, identical bodies would differ in cost: price both
            # as back-to-back calls, and say which side had no times.
            side = "OLD" if old_times is None else "NEW"
            notes.setdefault(
                f"{case or '.'}: {side}'s calls have no times (no scenario.yaml beside its "
                "bodies that loads here and gives their number of calls), so both sides "
                "are priced as back-to-back calls"
            )
            old_times = new_times = None
        old_roots, new_roots = (
            times.roots(old.path / case, a, name),
            times.roots(new.path / case, b, name),
        )
        unknown = {
            side: _unknown_caches(name, bodies, roots)
            for side, bodies, roots in (
                ("OLD", old_bodies, old_roots),
                ("NEW", new_bodies, new_roots),
            )
        }
        uncached_root = any(unknown.values())
        if uncached_root:
            # Only a scenario gives the root an explicit cache holds: without it, price
            # both sides without the cache, and say so.
            caches = ", ".join(map(repr, dict.fromkeys(unknown["OLD"] + unknown["NEW"])))
            sides = " and ".join(side for side, names in unknown.items() if names)
            notes.setdefault(
                f"{case or '.'}: the {name} calls of {sides} name the explicit cache {caches} "
                "(option cachedContent), whose contents only a scenario.yaml beside their "
                "bodies gives, so both sides are priced without that cache's tokens"
            )
            old_roots = new_roots = None
        old_routes = times.routes(old.path / case, a)
        new_routes = times.routes(new.path / case, b)
        before = _simulate(
            name,
            a,
            old_bodies,
            old_model,
            old_times,
            old_roots,
            uncached_root=uncached_root,
            routes=old_routes,
        )
        same = (
            old_bodies == new_bodies
            and old_model == new_model
            and old_times == new_times
            and old_roots == new_roots
            and old_routes == new_routes
        )
        after = (
            before
            if same
            else _simulate(
                name,
                b,
                new_bodies,
                new_model,
                new_times,
                new_roots,
                uncached_root=uncached_root,
                routes=new_routes,
            )
        )
        old_costs = dict(zip(a, before.calls, strict=True)) if before else {}
        new_costs = dict(zip(b, after.calls, strict=True)) if after else {}
        scenario = (new.path / key).parent / "scenario.yaml"
        sources: SourceIndex | None = None  # with the case's scenario, at the first break
        calls: list[CallDiff] = []
        for number in sorted(set(a) | set(b)):
            old_cost = old_costs[number].cost if number in old_costs else None
            new_cost = new_costs[number].cost if number in new_costs else None
            if number not in a or number not in b:
                verdict = ADDED if number in b else REMOVED
                calls.append(CallDiff(number, verdict, None, None, old_cost, new_cost))
                continue
            old_bytes, new_bytes = old_read[number], new_read[number]
            # after a provider switch, the bodies are that provider's (the new side's)
            route = new_routes[number - 1] if new_routes is not None else None
            wire = name if route is None else route[0]
            comparison = compare_bodies(
                wire, old_bytes, new_bytes, old_name=str(a[number]), new_name=str(b[number])
            )
            source = None
            if comparison.kind == PREFIX_BREAK:
                if sources is None:
                    extra = [scenario] if scenario.is_file() else []
                    sources = new_index.extended(extra) if extra else new_index
                found = attribute(wire, comparison, sources, new_bytes, old_bytes)
                source = new.show(found) if found is not None else None
            calls.append(
                CallDiff(number, comparison.verdict, comparison, source, old_cost, new_cost)
            )
        pairs.append(PairDiff(case, name, len(a), len(b), tuple(calls), before, after))
    return FolderDiff(old, new, tuple(pairs), tuple(notes))
