"""``prefixlock verify SCENARIO --observed USAGE.json``: simulated beside observed cache
use, call by call.

The usage file is what ``prefixlock convert`` writes beside a scenario (format
``prefixlock-usage/1``: per model call the tokens the transcript observed: uncached,
cache read, cache writes for 5 minutes and for an hour). The scenario is replayed, each
body serialized for the usage file's provider (or the one given) and priced by the cache
simulator (:func:`~prefixlock.review.verify.simulate_calls`'s rules: after a provider
switch, the body of the provider the call went to, in a simulation of that provider's
own, as ``verify --policy`` prices it) at the call's
observed time (the transcript's stamp of the call's input, tool results included, where
the scenario only dates user turns). Both sides are priced in base input-token units at
the provider's prices for the model: the simulated side by what it simulated (its
markers' TTLs), the observed side by the observed split (a 5-minute write at the 5-minute
price, a one-hour write at the one-hour price), so the two costs differ only by what was
cached and for how long. Each call is priced at the provider and model it went to (a
``switch`` step's), in that model's base input-token units.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs

from .. import providers as registry
from ..cache.prices import PRICE_TABLE, input_price
from ..cache.rules import CacheRules, rules_for
from ..core import canonical
from ..core.errors import CanonicalJSONError, InputError, Location, SpecError, SpecErrors
from ..core.files import read_review_file
from ..core.timestamps import seconds, timestamp_problem
from ..spec.loader import LoadedDocument, load_yaml_bytes
from ..spec.validate import validate_value
from .convert.common import USAGE_FORMAT
from .replay import Call, replay, serialize_at
from .scenario import load_scenario
from .verify import call_time, simulate_calls

__all__ = ["ObservedReport", "ObservedRow", "compare_observed"]


@attrs.frozen
class Side:
    """One side of a call: its prompt tokens, read and written, and cost."""

    input_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: Fraction

    @property
    def cached_share(self) -> float:
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "cached_share": round(self.cached_share, 4),
            "cost": round(float(self.cost), 2),
        }


@attrs.frozen
class ObservedRow:
    """One model call: the simulated side and the observed one (None: the transcript
    observed no usage for it)."""

    call: int
    step: int
    simulated: Side
    observed: Side | None
    #: the model the call went to (the bundle's, or a ``switch`` step's)
    model: str = ""
    #: the provider the call went to (the replayed one, or a ``switch`` step's)
    provider: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "step": self.step,
            "provider": self.provider,
            "model": self.model,
            "simulated": self.simulated.to_json(),
            "observed": None if self.observed is None else self.observed.to_json(),
        }


@attrs.frozen
class ObservedReport:
    scenario: str
    provider: str
    model: str
    rows: tuple[ObservedRow, ...]

    def totals(self) -> tuple[Side, Side]:
        """Simulated and observed sums over the calls both sides have."""
        both = [r for r in self.rows if r.observed is not None]
        return _sum([r.simulated for r in both]), _sum([r.observed for r in both if r.observed])

    def dollars(self) -> tuple[Fraction, Fraction] | None:
        """Simulated and observed USD over the calls both sides have, each call at its
        own model's list price (:mod:`prefixlock.cache.prices`): after a ``switch`` the
        base-unit totals add two models' units, the dollars do not. None when a call's
        model has no list price (never a guess)."""
        simulated = observed = Fraction(0)
        for row in self.rows:
            if row.observed is None:
                continue
            price = input_price(row.model or self.model)
            if price is None:
                return None
            simulated += row.simulated.cost * price / 1_000_000
            observed += row.observed.cost * price / 1_000_000
        return simulated, observed

    def to_json(self) -> dict[str, Any]:
        simulated, observed = self.totals()
        dollars = self.dollars()
        return {
            "scenario": self.scenario,
            "provider": self.provider,
            "model": self.model,
            "calls": [row.to_json() for row in self.rows],
            "observed_calls": sum(1 for r in self.rows if r.observed is not None),
            "totals": {"simulated": simulated.to_json(), "observed": observed.to_json()},
            "usd": None
            if dollars is None
            else {
                "simulated": round(float(dollars[0]), 6),
                "observed": round(float(dollars[1]), 6),
                "prices": PRICE_TABLE,
            },
        }

    def table(self) -> list[str]:
        head = (
            f"{'call':>5} {'step':>5}  {'sim cached':>10} {'obs cached':>10}  "
            f"{'sim cost':>10} {'obs cost':>10}"
        )
        # each (provider, model) in the order the calls went to it; a provider named
        # where it changes: "anthropic claude-sonnet-5-5 → openai-responses gpt-4.1"
        targets = [(self.provider, self.model)]
        for row in self.rows:
            target = (row.provider or targets[-1][0], row.model or targets[-1][1])
            if target != targets[-1]:
                targets.append(target)
        names = [
            model if i and provider == targets[i - 1][0] else f"{provider} {model}"
            for i, (provider, model) in enumerate(targets)
        ]
        lines = [f"{self.scenario}: {' → '.join(names)}", head]
        for row in self.rows:
            sim, obs = row.simulated, row.observed
            lines.append(
                f"{row.call:>5} {row.step:>5}  {sim.cached_share:>10.1%} "
                + (f"{obs.cached_share:>10.1%}" if obs else f"{'-':>10}")
                + f"  {float(sim.cost):>10.0f} "
                + (f"{float(obs.cost):>10.0f}" if obs else f"{'-':>10}")
            )
        simulated, observed = self.totals()
        lines.append(
            f"{'total':>11}  {simulated.cached_share:>10.1%} {observed.cached_share:>10.1%}  "
            f"{float(simulated.cost):>10.0f} {float(observed.cost):>10.0f}"
        )
        dollars = self.dollars()
        if dollars is not None:
            lines.append(
                f"{'total USD':>11}  {'':>10} {'':>10}  "
                f"{float(dollars[0]):>10.4f} {float(dollars[1]):>10.4f}"
            )
        observed_calls = sum(1 for r in self.rows if r.observed is not None)
        lines.append(
            f"{observed_calls} of {len(self.rows)} calls observed; totals over those; costs "
            "in base input-token units at the cache prices of each call's provider and model"
        )
        if dollars is not None:
            lines.append(f"USD at {PRICE_TABLE}")
        return lines


def _sum(sides: Sequence[Side]) -> Side:
    return Side(
        sum(s.input_tokens for s in sides),
        sum(s.cache_read_tokens for s in sides),
        sum(s.cache_write_tokens for s in sides),
        sum((s.cost for s in sides), Fraction(0)),
    )


def _read_usage(path: Path) -> dict[str, Any]:
    if not os.path.lexists(path):
        raise InputError(f"{path}: cannot read the usage file: No such file or directory")
    try:
        value = canonical.loads(read_review_file(path))
    except (ValueError, CanonicalJSONError) as exc:
        raise InputError(f"{path}: not a usage file: not JSON ({exc})") from exc
    if not isinstance(value, dict) or value.get("format") != USAGE_FORMAT:
        raise InputError(f"{path}: not a usage file: $.format is not {USAGE_FORMAT!r}")
    if validate_value(value, "usage"):
        # every problem at once, each at its line and column
        raise SpecErrors(validate_value(value, "usage", _positions(path), str(path)))
    return value


def _positions(path: Path) -> LoadedDocument | None:
    """The usage file read again with where each node starts (JSON is YAML, and the spec
    loader knows positions), for an error's line and column; None if it cannot."""
    try:
        return load_yaml_bytes(read_review_file(path), str(path))
    except SpecErrors:
        return None


def _usage_errors(path: Path, problems: list[tuple[str, str]]) -> SpecErrors:
    """``(JSON path, message)`` problems of the usage file, each at its line and column
    (the file read with positions once for all of them)."""
    doc = _positions(path)
    return SpecErrors(
        SpecError(doc.location(where) if doc is not None else Location(str(path)), where, why)
        for where, why in problems
    )


def _observed(rules: CacheRules, usage: Mapping[str, Any]) -> Side:
    """One call's observed side, priced from the observed split at the provider's prices
    (``rules``): a 5-minute write at its write price, a one-hour write at its one-hour
    price, whatever markers the simulated call used (its multipliers only price what it
    simulated). A long prompt's factor is taken by the observed prompt's length. Codex
    usage has no write split (its converter writes no writes): every token it did not
    read is priced at the base price there (a GPT-5.6 write, 1.25x, is then under-priced)."""
    read = int(usage.get("cache_read_tokens", 0))
    five = int(usage.get("cache_write_5m_tokens", 0))
    hour = int(usage.get("cache_write_1h_tokens", 0))
    uncached = int(usage.get("uncached_tokens", 0))
    total = uncached + read + five + hour
    one_hour_price = rules.write_multiplier_1h
    if one_hour_price is None:  # no TTL setting: a write is a write
        one_hour_price = rules.write_multiplier
    long_prompt = rules.long_prompt
    factor = long_prompt[1] if long_prompt is not None and total > long_prompt[0] else 1
    cost = (
        uncached
        + five * rules.write_multiplier
        + hour * one_hour_price
        + read * rules.read_multiplier
    ) * factor
    return Side(total, read, five + hour, Fraction(cost))


def compare_observed(
    scenario_path: Path, usage_path: Path, *, provider: str | None = None
) -> ObservedReport:
    """Replay ``scenario_path`` and set each call's simulated cache use beside the one
    ``usage_path`` observed. Raises :class:`InputError` for a file that is not a usage
    file, :class:`SpecErrors` (each at its line, column and JSON path) for one that does
    not match its schema, does not have one row per model call, or has rows whose
    ``model`` (the converters write the transcript's) is not the model its call went to."""
    usage = _read_usage(usage_path)
    scenario = load_scenario(scenario_path)
    name = provider or str(usage.get("provider") or "anthropic")
    wire = registry.get(name)
    calls: list[Call] = replay(scenario)
    rows_in: list[Any] = usage["calls"]
    if len(rows_in) != len(calls):
        raise _usage_errors(
            usage_path,
            [
                (
                    "$.calls",
                    f"{len(rows_in)} usage rows for {len(calls)} model calls of "
                    f"{scenario_path}: the usage file belongs to another scenario",
                )
            ],
        )
    # a row observed on another model than the one its call went to (after the
    # scenario's switch steps) is another scenario's: refused, every such row at once,
    # before anything is priced
    wrong = [
        (
            f"$.calls[{index}].model",
            f"{row['model']!r}, but call {index + 1} of {scenario_path} went to "
            f"{call.target(name)!r}: the usage file belongs to another scenario",
        )
        for index, (call, row) in enumerate(zip(calls, rows_in, strict=True))
        if row.get("model") is not None and row["model"] != call.target(name)
    ]
    if wrong:
        raise _usage_errors(usage_path, wrong)
    try:
        model = calls[0].request.settings_for(name).model if calls else None
    except KeyError:
        model = None
    # priced as verify prices the calls (after a provider switch, in a simulation of the
    # provider the call went to, at the model a switch step sent it to), each at the
    # transcript's stamp of its input where the usage file has one
    times = [
        seconds(stamp)
        if isinstance(stamp := row.get("timestamp"), str) and timestamp_problem(stamp) is None
        else call_time(scenario, call)
        for call, row in zip(calls, rows_in, strict=True)
    ]
    # serialize_at sends a switched call through the provider it went to (wire_for)
    bodies = [serialize_at(scenario, call, wire) for call in calls]
    report = simulate_calls(scenario, calls, name, bodies, model, times)
    priced = report.calls
    rows = []
    for number, (call, sim, row) in enumerate(zip(calls, priced, rows_in, strict=True), 1):
        seen = row.get("observed")  # an object or null (usage.schema.json)
        rows.append(
            ObservedRow(
                call=number,
                step=call.step,
                simulated=Side(
                    sim.input_tokens, sim.cache_read_tokens, sim.cache_write_tokens, sim.cost
                ),
                # each call's observed tokens at the prices of the provider and model it
                # went to
                observed=(
                    _observed(rules_for(call.wire(name), call.target(name)), seen)
                    if seen is not None
                    else None
                ),
                model=call.target(name),
                provider=call.wire(name),
            )
        )
    first = rows[0].model if rows else report.model
    return ObservedReport(scenario.file, name, first, tuple(rows))
