"""The targets of ``prefixlock bench`` and its report table.

:func:`targets` derives the six target checks from the figures of the runs; they are
ratios, because absolute times vary between machines. With the golden long-session case's
economics (:mod:`prefixlock.bench.economics`) it appends two more, simulated costs (the
worst provider's), each with the per-provider figures and the reason for every miss, and
two from ``verify`` at growing lengths when measured (:func:`verify_targets`).
:func:`format_report` renders a report (the JSON value :func:`prefixlock.bench.run.bench`
returns) as a table for people, one column per history length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .economics import BOUND_LIMIT, BOUND_TARGET, NAIVE_LIMIT, NAIVE_TARGET

__all__ = [
    "BYTES_TOLERANCE",
    "FLOOR_LIMIT",
    "HANDLING_LIMIT",
    "HYDRATION_LIMIT",
    "SERIALIZATION_LIMIT",
    "SPEEDUP_MIN",
    "VERIFY_LIMIT",
    "format_report",
    "targets",
    "verify_targets",
]

HANDLING_LIMIT = 1.5  # handling per call at the longest history / at the shortest
SPEEDUP_MIN = 10.0  # naive full re-encode / incremental serialization, longest history
BYTES_TOLERANCE = 0.2  # record bytes per call, each history length vs the shortest
HYDRATION_LIMIT = 2.0  # Conversation.open / json.loads of the same stored bytes
FLOOR_LIMIT = 1.5  # handling per call / the bare durable append of the same records
SERIALIZATION_LIMIT = 1.5  # body as fragments per call, longest history / shortest
VERIFY_LIMIT = 1.5  # verify per call and its peak RSS, longest scenario / shortest


def _ratio(a: float, b: float) -> float:
    return round(a / max(b, 1), 3)


def targets(
    runs: Sequence[dict[str, Any]],
    long_session: Mapping[str, Any] | None = None,
    verify: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The target checks, computed from the figures of the runs (shortest first); with
    ``long_session`` (:func:`prefixlock.bench.economics.long_session`) two more, and
    those of ``verify`` at its lengths when measured (:func:`verify_targets`)."""
    short, long = runs[0], runs[-1]
    handling = _ratio(long["handle_ns"]["median"], short["handle_ns"]["median"])
    speedups = {
        name: _ratio(long["naive_ns"][name]["median"], ours["median"])
        for name, ours in long["serialize_ns"].items()
    }
    slowest = min(speedups, key=lambda n: (speedups[n], n))
    growth = {
        name: _ratio(long["fragments_ns"][name]["median"], short["fragments_ns"][name]["median"])
        for name in long["fragments_ns"]
    }
    steepest = max(growth, key=lambda n: (growth[n], n))
    joined = all(all(run["fragments_bytes_equal"].values()) for run in runs)
    per_run_bytes = {
        str(run["calls"]): _ratio(run["record_bytes"]["mean"], short["record_bytes"]["mean"])
        for run in runs
    }
    deviation = round(max(abs(r - 1) for r in per_run_bytes.values()), 3)
    hydration = {
        str(run["calls"]): _ratio(run["hydrate_ns"]["median"], run["json_loads_ns"]["median"])
        for run in runs
    }
    worst = max(hydration, key=lambda c: (hydration[c], int(c)))
    floor = {
        str(run["calls"]): _ratio(run["handle_ns"]["median"], run["durable_floor_ns"]["median"])
        for run in runs
    }
    worst_floor = max(floor, key=lambda c: (floor[c], int(c)))
    parts = {str(run["calls"]): _floor_parts(run) for run in runs}
    flat = [
        {
            "name": "handling_flat",
            "what": f"handling per call at {long['calls']} calls / at {short['calls']} (median)",
            "value": handling,
            "op": "<=",
            "limit": HANDLING_LIMIT,
            "met": handling <= HANDLING_LIMIT,
        },
        {
            "name": "serialization_flat",
            "what": f"body as fragments per call at {long['calls']} calls / at "
            f"{short['calls']} (median; steepest provider: {steepest}; joined fragments "
            "== serialize bytes)",
            "value": growth[steepest],
            "op": "<=",
            "limit": SERIALIZATION_LIMIT,
            "met": growth[steepest] <= SERIALIZATION_LIMIT and joined,
            "per_provider": growth,
        },
        {
            "name": "record_bytes_flat",
            "what": f"record bytes per call (mean), largest deviation from {short['calls']} calls",
            "value": deviation,
            "op": "<=",
            "limit": BYTES_TOLERANCE,
            "met": deviation <= BYTES_TOLERANCE,
            "per_run": per_run_bytes,
        },
    ]
    return [
        # a single length compares nothing with itself: no flatness target
        *(flat[:1] if len(runs) > 1 else []),
        {
            "name": "serialization_speedup",
            "what": f"naive full re-encode / incremental serialize at {long['calls']} calls "
            f"(median; slowest provider: {slowest})",
            "value": speedups[slowest],
            "op": ">=",
            "limit": SPEEDUP_MIN,
            "met": speedups[slowest] >= SPEEDUP_MIN,
            "per_provider": speedups,
        },
        *(flat[1:] if len(runs) > 1 else []),
        {
            "name": "hydration_vs_json_loads",
            "what": f"Conversation.open / json.loads of the stored bytes, values kept "
            f"(median; worst: {worst} calls)",
            "value": hydration[worst],
            "op": "<=",
            "limit": HYDRATION_LIMIT,
            "met": hydration[worst] <= HYDRATION_LIMIT,
            "per_run": hydration,
        },
        {
            "name": "handling_vs_durable_floor",
            "what": f"handling per call / bare durable append of the same records (median; "
            f"worst: {worst_floor} calls)",
            "value": floor[worst_floor],
            "op": "<=",
            "limit": FLOOR_LIMIT,
            "met": floor[worst_floor] <= FLOOR_LIMIT,
            "per_run": floor,
            "parts": parts,
            "reasons": {
                calls: _floor_reason(floor[calls], parts[calls])
                for calls in floor
                if floor[calls] > FLOOR_LIMIT
            },
        },
        *(_long_session_targets(long_session) if long_session is not None else []),
        *verify_targets(verify),
    ]


def _floor_parts(run: Mapping[str, Any]) -> dict[str, float]:
    """Handling's parts as multiples of the floor (medians): the store's appends, and of
    them its SQL alone (the same statements, none of its Python), prefixlock's own work
    (the same calls on an in-memory store), and the rest, what the parts leave of
    handling (the own work run between fsyncs costs more)."""
    floor = run["durable_floor_ns"]["median"]
    store = _ratio(run["store_append_ns"]["median"], floor)
    own = _ratio(run["own_work_ns"]["median"], floor)
    rest = round(_ratio(run["handle_ns"]["median"], floor) - store - own, 3)
    schema = _ratio(run["schema_floor_ns"]["median"], floor)
    return {"store_append": store, "store_sql": schema, "own_work": own, "rest": rest}


def _floor_reason(total: float, parts: Mapping[str, float]) -> str:
    """Why handling misses :data:`FLOOR_LIMIT`, from its parts. A store's append costs at
    least the floor, and the own work comes on top of it: own work past the limit's
    margin beside the floor (0.5x) misses with any store; past what the limit leaves
    beside the store's SQL alone, with any store of this schema, however cheap its
    Python."""
    store, sql, own, rest = (
        parts["store_append"],
        parts["store_sql"],
        parts["own_work"],
        parts["rest"],
    )
    margin = FLOOR_LIMIT - 1
    said = (
        f"handling is {total:.2f}x the floor: the store's appends {store:.2f}x (its SQL "
        f"alone, none of its Python: {sql:.2f}x), prefixlock's own work {own:.2f}x (the "
        "same calls on an in-memory store), the rest "
        f"{rest:.2f}x (the own work run between fsyncs, not back to back); "
    )
    room = FLOOR_LIMIT - sql  # what the limit leaves beside the store's SQL alone
    beside_sql = f" (beside the store's SQL alone it leaves {room:.2f}x)" if sql > 1 else ""
    if own > margin:
        return said + (
            f"the own work alone is past the {margin:.2f}x the limit leaves beside the "
            f"floor{beside_sql}: no store, however cheap, meets it"
        )
    if sql > 1 and own > room:
        return said + (
            f"the own work fits in the {margin:.2f}x the limit leaves beside the floor, but "
            f"not in the {room:.2f}x it leaves beside the store's SQL: no store "
            "with this schema meets it, however cheap its Python"
        )
    return said + (
        f"the own work fits in the {margin:.2f}x the limit leaves beside the floor; with "
        f"{_store_words(store)} and the rest {rest:.2f}x, handling does not"
    )


def _store_words(store: float) -> str:
    """The store's appends against the floor, in words: its part past the floor, or,
    as two medians taken apart can give, none."""
    if store > 1:
        return f"the store's {store - 1:.2f}x past the floor"
    return f"the store's appends at the floor ({store:.2f}x: two medians taken apart)"


def _long_session_targets(economics: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Issue 15's two cost targets on the golden long-session case, each the worst
    provider's figure; met only if every invariant of the case held too."""
    figures: Mapping[str, Mapping[str, Any]] = economics["providers"]
    checks = []
    for name, key, limit, versus in (
        (BOUND_TARGET, "cost_vs_bound", BOUND_LIMIT, "the perfect-cache bound"),
        (NAIVE_TARGET, "cost_vs_naive", NAIVE_LIMIT, "the naive harness"),
    ):
        values = {provider: f[key] for provider, f in figures.items()}
        worst = max(values, key=lambda p: (values[p], p))
        checks.append(
            {
                "name": name,
                "what": f"simulated cost on golden {economics['scenario']} / {versus} "
                f"(worst provider: {worst})",
                "value": values[worst],
                "op": "<=",
                "limit": limit,
                "met": values[worst] <= limit and economics["ok"],
                "per_provider": values,
                "reasons": {
                    p: f["reasons"][name] for p, f in figures.items() if name in f["reasons"]
                },
            }
        )
    return checks


def verify_targets(verify: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """``prefixlock verify`` at its longest length against its shortest
    (:func:`prefixlock.bench.verifyscale.measure_verify`): time per call and peak memory
    of the process tree, each at most :data:`VERIFY_LIMIT` times; met only if verify
    passed at every length. None (not measured), or a single length: no target."""
    runs = list(verify["runs"]) if verify else []
    if len(runs) < 2:
        return []
    short, long = runs[0], runs[-1]
    passed = all(run["ok"] for run in runs)
    key = "marginal_seconds_per_call"
    time_flat = _ratio(long[key] * 1e6, short[key] * 1e6)
    base = verify["baseline"]["calls"] if verify else 0
    out = [
        {
            "name": "verify_time_flat",
            "what": f"verify per call at {long['calls']} calls / at {short['calls']}, past a "
            f"{base}-call run's time (all five providers, hash-seed replay; verify passing)",
            "value": time_flat,
            "op": "<=",
            "limit": VERIFY_LIMIT,
            "met": passed and time_flat <= VERIFY_LIMIT,
        }
    ]
    if long["rss_peak_kib"] is not None and short["rss_peak_kib"] is not None:
        memory_flat = _ratio(long["rss_peak_kib"], short["rss_peak_kib"])
        out.append(
            {
                "name": "verify_memory_flat",
                "what": f"verify peak RSS of the process tree at {long['calls']} calls / at "
                f"{short['calls']} (verify passing)",
                "value": memory_flat,
                "op": "<=",
                "limit": VERIFY_LIMIT,
                "met": passed and memory_flat <= VERIFY_LIMIT,
            }
        )
    return out


def _verify_lines(verify: Mapping[str, Any] | None) -> list[str]:
    """The table's ``verify`` section: a line per length."""
    if not verify:
        return []
    base = verify["baseline"]
    lines = [
        "",
        f"verify: {verify['command']} (a generated scenario per length; best of "
        f"{len(verify['runs'][-1]['repeats'])} at the longest, more at the shorter; a "
        f"{base['calls']}-call run: {base['seconds']:,.1f} s)",
    ]
    for run in verify["runs"]:
        rss = run["rss_peak_kib"]
        memory = "?" if rss is None else f"{rss / 1024:,.0f} MiB"
        verdict = "ok" if run["ok"] else f"FAILED ({run.get('error', 'exit ' + str(run['exit']))})"
        lines.append(
            f"  {run['calls']:>6,} calls: {run['seconds']:,.1f} s, "
            f"{run['seconds_per_call'] * 1000:,.1f} ms per call "
            f"({run['marginal_seconds_per_call'] * 1000:,.1f} past the {base['calls']}-call "
            f"run's), peak RSS {memory}, {verdict}"
        )
    return lines


def _us(ns: float) -> str:
    return f"{ns / 1000:,.0f}" if ns >= 10_000 else f"{ns / 1000:,.1f}"


def _pair(stats: dict[str, int]) -> str:
    return f"{_us(stats['median'])} / {_us(stats['p95'])}"


def _ms_pair(stats: dict[str, int]) -> str:
    return f"{stats['median'] / 1e6:,.1f} / {stats['p95'] / 1e6:,.1f}"


def _bytes(stats: dict[str, int]) -> str:
    return f"{stats['median']:,} / {stats['p95']:,} ({stats['mean']:,})"


def format_report(report: dict[str, Any]) -> str:
    """The report as a table for people: one column per history length."""
    runs: list[dict[str, Any]] = report["runs"]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        rows.append((label, [cell(run) for run in runs]))

    def ratio(label: str, ours: str, base: str, key: str | None = None) -> None:
        def cell(run: dict[str, Any]) -> str:
            a, b = run[ours], run[base]
            if key is not None:
                a, b = a[key], b[key]
            return f"{_ratio(a['median'], b['median']):.3f}"

        row(label, cell)

    row("history length (calls)", lambda r: f"{r['calls']:,}")
    row("records / epochs", lambda r: f"{r['records']:,} / {r['epochs']}")
    row("live messages (contexts)", lambda r: f"{r['live_messages']:,} ({r['context_messages']})")
    row("stored KiB", lambda r: f"{r['stored_bytes'] / 1024:,.0f}")
    rows.append((f"per call, last {report['window']}: median / p95", []))
    row("  handle event, µs", lambda r: _pair(r["handle_ns"]))
    row("    CPU time, µs", lambda r: _pair(r["handle_cpu_ns"]))
    row("    amid serializing, µs", lambda r: _pair(r["handle_with_serialize_ns"]))
    row("  bare durable append, µs", lambda r: _pair(r["durable_floor_ns"]))
    ratio("  handling / durable append", "handle_ns", "durable_floor_ns")
    row("  store appends, µs", lambda r: _pair(r["store_append_ns"]))
    row("    its SQL alone, µs", lambda r: _pair(r["schema_floor_ns"]))
    row("  own work (in-memory store), µs", lambda r: _pair(r["own_work_ns"]))
    row("  record bytes (mean)", lambda r: _bytes(r["record_bytes"]))
    if all(r["written_bytes"] for r in runs):
        row("  file bytes written (mean)", lambda r: _bytes(r["written_bytes"]))
    for name in report["providers"]:
        rows.append((f"  {name}", []))
        rows.append(("    body KiB", [f"{r['body_bytes'][name] / 1024:,.0f}" for r in runs]))
        for label, key in (
            ("    fragments, µs", "fragments_ns"),
            ("    serialize, µs", "serialize_ns"),
            ("    naive dict + dumps, µs", "naive_ns"),
            ("    naive dumps alone, µs", "naive_encode_ns"),
        ):
            rows.append((label, [_pair(r[key][name]) for r in runs]))
        rows.append(
            (
                "    just hydrated: cold / warm serialize, ms",
                [
                    f"{r['cold_serialize_ns'][name]['median'] / 1e6:,.2f} / "
                    f"{r['warm_serialize_ns'][name]['median'] / 1e6:,.2f}"
                    for r in runs
                ],
            )
        )
        ratio("    ours / naive", "serialize_ns", "naive_ns", name)
        ratio("    ours / dumps alone", "serialize_ns", "naive_encode_ns", name)
    rows.append(("whole conversation: median / p95", []))
    row("  Conversation.open, ms", lambda r: _ms_pair(r["hydrate_ns"]))
    row("  json.loads of its bytes, ms", lambda r: _ms_pair(r["json_loads_ns"]))
    row("    each value dropped at once, ms", lambda r: _ms_pair(r["json_loads_discarded_ns"]))
    ratio("  ours / json.loads", "hydrate_ns", "json_loads_ns")
    row("  SQLiteStore.load alone, ms", lambda r: _ms_pair(r["store_load_ns"]))
    row(
        "peak RSS so far (after its hydration), MiB",
        lambda r: "?" if r["rss_peak_kib"] is None else f"{r['rss_peak_kib'] / 1024:,.0f}",
    )
    row(
        "hydrated: peak / kept, MiB",
        lambda r: (
            f"{r['hydrated_peak_bytes'] / 2**20:,.1f} / {r['hydrated_retained_bytes'] / 2**20:,.1f}"
        ),
    )
    width = max(len(label) for label, _ in rows)
    widths = [max(len(cells[i]) for _, cells in rows if cells) for i in range(len(runs))]
    machine = report["machine"]
    lines = [
        f"prefixlock bench: seed {report['seed']}; providers {', '.join(report['providers'])}",
        "conversations configured for "
        f"{', '.join(report['configured_providers'])} (admission checks each new message "
        "against each)",
        f"machine: {machine['cpus']} CPUs, {machine['cpu_model']}; Python {machine['python']}; "
        f"SQLite {machine['sqlite']}",
        "",
    ]
    for label, cells in rows:
        if not cells:  # a section heading
            lines.append(label)
            continue
        columns = "  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))
        lines.append(f"{label:<{width}}  {columns}")
    if "long_session" in report:
        lines += ["", *_long_session_lines(report["long_session"])]
    if report.get("real_timing"):
        lines += ["", *_real_timing_lines(report["real_timing"])]
    lines.extend(_verify_lines(report.get("verify")))
    lines.append("")
    lines.append("targets")
    for target in report["targets"]:
        flag = "met " if target["met"] else "MISS"
        lines.append(
            f"  [{flag}] {target['what']}: {target['value']} ({target['op']} {target['limit']})"
        )
        lines.extend(_why(target))
    return "\n".join(lines)


def _why(target: Mapping[str, Any]) -> list[str]:
    """A missed target's reason at its worst run or provider (``--json``: every one)."""
    reasons: Mapping[str, str] = target.get("reasons") or {}
    if target["met"] or not reasons:
        return []
    per_run = "per_run" in target
    values: Mapping[str, float] = target["per_run"] if per_run else target["per_provider"]
    worst = max(reasons, key=lambda key: (values[key], key))
    return [
        f"         why ({worst} calls): {reasons[worst]}"
        if per_run
        else f"         why ({worst}): {reasons[worst]}"
    ]


def _ttl_figures(policies: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Each ``cache_ttl`` value's cost vs its perfect-cache bound, and vs today's cost."""
    return [
        f"{value} {f['cost_vs_bound']:.2f}x "
        + ("(today)" if f["today"] else f"(cost {f['cost_vs_today']:.2f}x today's)")
        for value, f in policies.items()
    ]


def _real_timing_lines(timing: Mapping[str, Any]) -> list[str]:
    """Per provider, each policy's cost on the real-timing workload (mean over sessions)
    vs the offline optimum and vs the naive harness; the default policy marked."""
    rows: Mapping[str, Mapping[str, Any]] = timing["providers"]
    lines = [
        f"real timing ({', '.join(map(str, timing['lengths']))} calls, "
        f"{len(timing['seeds'])} seed(s) x 3 context shares): cost vs offline optimum / "
        "vs naive, per policy (* default)"
    ]
    width = max(len(name) for name in rows)
    for name, row in rows.items():
        cells = [
            f"{policy}{'*' if policy == row['default_policy'] else ''} "
            f"{f['vs_oracle']:.2f}x/{f['vs_naive']:.2f}x"
            for policy, f in row["all"]["policies"].items()
        ]
        lines.append(f"  {name:<{width}}  " + ", ".join(cells))
    return lines


def _long_session_lines(economics: Mapping[str, Any]) -> list[str]:
    """The long-session figures: per provider, the simulated cost against the bound and
    the naive harness, and the floor (what no placement of cache markers goes below)."""
    figures: Mapping[str, Mapping[str, Any]] = economics["providers"]
    calls = max((f["calls"] for f in figures.values()), default=0)
    width = max(len(name) for name in figures)
    lines = [
        f"golden {economics['scenario']} ({calls} calls), simulated cost: vs perfect cache / "
        f"vs naive (floor){'' if economics['ok'] else '; INVARIANTS FAILED: run verify'}"
    ]
    for name, f in figures.items():
        lines.append(
            f"  {name:<{width}}  {f['cost_vs_bound']:.2f}x / {f['cost_vs_naive']:.2f}x  "
            f"({f['floor_vs_bound']:.2f}x / {f['floor_vs_naive']:.2f}x), "
            f"{f['cost_ratio']:.1%} of uncached; entries live {f['lifetime_s'] / 60:g} min"
        )
        if f.get("cache_ttl"):
            lines.append("    cache_ttl: " + ", ".join(_ttl_figures(f["cache_ttl"])))
    lines.append(
        "  floor: what no placement of cache markers goes below under the service's "
        "lifetimes, minimum and increment; --json gives the reason for every miss"
    )
    return lines
