"""``bench``: per-call cost against history length, next to naive baselines."""

from __future__ import annotations

import argparse

from .. import providers
from ..bench.cold import COLD_MESSAGES, cold_bench, format_cold
from ..bench.fleet import (
    DEFAULT_SOAK,
    STORE_CALLS,
    SoakConfig,
    format_soak,
    format_store_bench,
    soak,
    soak_ok,
    store_bench,
)
from ..bench.realtime import LENGTHS as REAL_TIMING_LENGTHS
from ..bench.report import format_report
from ..bench.run import DEFAULT_CALLS, bench, example_bundle
from ..bench.verifyscale import BASELINE, DEFAULT_LENGTHS
from ..core.errors import UsageError
from ..review import processes
from .console import FINDING, OK, Command, err, out, out_json

__all__ = ["COMMANDS"]


def _numbers(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers"
        ) from None


def _calls(text: str) -> list[int]:
    values = _numbers(text)
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: every history length must be at least 2")
    return values


def _verify_calls(text: str) -> list[int]:
    """``200,2000``; ``0`` (or nothing) measures no verify."""
    values = _numbers(text)
    if values == [0] or not values:
        return []
    if min(values) <= BASELINE:
        raise argparse.ArgumentTypeError(
            f"{text!r}: every verify length must be more than {BASELINE} (a {BASELINE}-call"
            " run is the baseline; or 0: none)"
        )
    return values


def _real_timing(text: str) -> list[int]:
    """``16,46,200``; ``0`` (or nothing): the real-timing workload is not run."""
    values = _numbers(text)
    if values == [0] or not values:
        return []
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every session length must be at least 1")
    return values


def _provider_names(text: str) -> list[str]:
    if text == "all":
        return list(providers.NAMES)
    names = sorted({part.strip() for part in text.split(",") if part.strip()})
    for name in names:
        providers.get(name)  # unknown: a PrefixlockError with a suggestion
    return names


def _bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calls",
        type=_calls,
        metavar="N,N,...",
        help="history lengths to measure, in calls (default: "
        f"{','.join(map(str, DEFAULT_CALLS))}; with --store: "
        f"{','.join(map(str, STORE_CALLS))})",
    )
    parser.add_argument(
        "--provider",
        default="all",
        metavar="all|NAME,...",
        help="providers to serialize for; the conversations are configured for these alone, "
        "so admission checks each new message against each (default: all; not with "
        "--store or --soak)",
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of the synthetic conversations (default: 1)"
    )
    parser.add_argument(
        "--verify-calls",
        type=_verify_calls,
        default=list(DEFAULT_LENGTHS),
        metavar="N,N,...|0",
        help="also time 'prefixlock verify' on a generated scenario of each length, in a "
        "process of its own (all providers, hash-seed replay): time per call and peak RSS "
        f"of its process tree (default: {','.join(map(str, DEFAULT_LENGTHS))}; 0: skip)",
    )
    parser.add_argument(
        "--real-timing",
        type=_real_timing,
        default=list(REAL_TIMING_LENGTHS),
        metavar="N,N,...|0",
        help="also price each cache policy on sessions of these lengths with real pauses "
        "(gaps drawn from the real distribution; docs/cache-policy.md), against the "
        "perfect cache, the offline-optimal policy and the naive harness (default: "
        f"{','.join(map(str, REAL_TIMING_LENGTHS))}; 0: skip)",
    )
    parser.add_argument(
        "--real-timing-seeds",
        type=int,
        default=1,
        metavar="N",
        help="sessions per length and context share on real timing (default: 1)",
    )
    parser.add_argument("--json", action="store_true", help="print every figure as canonical JSON")
    parser.add_argument(
        "--cold",
        type=_calls,
        nargs="?",
        const=list(COLD_MESSAGES),
        metavar="N,N,...",
        help="measure only a cold worker's first serialize of a just-opened conversation at "
        "these history lengths in messages, per provider, next to the warm serialize and "
        "to the same conversation stored without wire templates; with the stored bytes, "
        "Conversation.open and the memory of one hydrated conversation (default: "
        f"{','.join(map(str, COLD_MESSAGES))}; with --store: written to that store)",
    )
    fleet = parser.add_argument_group("fleet soak (--soak)")
    fleet.add_argument(
        "--soak",
        action="store_true",
        help="run worker processes on one store with events routed to random workers, "
        "duplicate deliveries and restarts injected; compare with a single-process replay "
        "(exit 1 on any loss, duplicate, surfaced error or difference)",
    )
    fleet.add_argument(
        "--store",
        metavar="URL",
        help="with --soak: the store (sqlite:///path/to.db or postgresql://...; default: a "
        "temporary SQLite file); without --soak: measure handling per call on this store "
        "at each --calls history length, for a warm fleet and a cold open, next to SQLite",
    )
    fleet.add_argument(
        "--workers",
        type=int,
        default=DEFAULT_SOAK.workers,
        help="with --soak: worker processes (default: %(default)s)",
    )
    fleet.add_argument(
        "--conversations",
        type=int,
        default=DEFAULT_SOAK.conversations,
        help="with --soak: conversations (default: %(default)s)",
    )
    fleet.add_argument(
        "--events",
        type=int,
        default=DEFAULT_SOAK.events,
        help="with --soak: events per conversation (default: %(default)s)",
    )


def _run_soak(args: argparse.Namespace) -> int:
    config = SoakConfig(
        workers=args.workers,
        conversations=args.conversations,
        events=args.events,
        seed=args.seed,
    )
    report = soak(args.store, config, progress=lambda text: err(text))
    if args.json:
        out_json("bench-soak", report, pretty=True)
    else:
        out(format_soak(report))
    return OK if soak_ok(report) else FINDING


def _run_bench(args: argparse.Namespace) -> int:
    """Print the report; exit 0 whether or not the targets are met (they are figures)."""
    if args.cold is not None and args.soak:
        raise UsageError("--cold and --soak are separate benches: give one")
    if (args.soak or args.store is not None) and args.provider != "all" and args.cold is None:
        raise UsageError(
            f"--provider {args.provider} times the handling bench alone; --store and --soak"
            " run the example configured for all its providers (leave --provider out)"
        )
    if args.cold is not None:
        names = _provider_names(args.provider)
        cold_report = cold_bench(
            args.cold,
            names,
            args.seed,
            bundle=lambda folder: example_bundle(names, folder),
            store_url=args.store,
            progress=lambda text: err(text),
        )
        if args.json:
            out_json("bench-cold", cold_report, pretty=True)
        else:
            out(format_cold(cold_report))
        return OK
    if args.soak:
        return _run_soak(args)
    if args.store is not None:
        store_report = store_bench(
            args.store, args.calls or STORE_CALLS, args.seed, progress=lambda text: err(text)
        )
        if args.json:
            out_json("bench-store", store_report, pretty=True)
        else:
            out(format_store_bench(store_report))
        return OK
    report = bench(
        args.calls or DEFAULT_CALLS,
        _provider_names(args.provider),
        args.seed,
        verify_calls=args.verify_calls,
        real_timing=args.real_timing,
        real_timing_seeds=args.real_timing_seeds,
        run_process=processes.run_measured,
        progress=lambda text: err(text),
    )
    if args.json:
        out_json("bench", report, pretty=True)
    else:
        out(format_report(report))
    return OK


COMMANDS = (
    Command(
        "bench",
        "measure per-call cost against history length, next to naive baselines",
        _bench_arguments,
        _run_bench,
    ),
)
