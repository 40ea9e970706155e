"""``prefixlock bench``: per-call cost against history length, next to naive baselines.

An agent server calls prefixlock once per model call and conversations reach thousands of
calls, so the work per call must depend on what is new, not on how long the conversation
already is. The benchmark is split by topic:

* :mod:`compiler.bench_workload` -- the seeded synthetic conversations
  (:func:`~compiler.bench_workload.generate`);
* :mod:`compiler.bench_measure` -- the timing, memory and store passes over one
  conversation and the naive baselines beside them (:func:`~compiler.bench_measure.measure`);
* :mod:`compiler.bench_report` -- the four target checks and the table;
* this module -- :func:`bench`, which runs them all and assembles the JSON report, and the
  command's arguments. It is the edge that wires the providers in (``compiler`` never
  imports a provider elsewhere): their serializers and the naive harness built from each.

For each history length :func:`bench` plays one conversation of that many calls; the
longest compacts once. Per-call figures are taken over the last :data:`WINDOW` calls of
each run, and every run ends with the same script of that many calls (same texts, tool
outputs and context; only counters such as seq differ), so the figures compare the same
work at different history lengths: growth would show there. Runs go in ascending length.
Both stores are shared by all runs, as a server's store is, and a warm-up conversation
goes first, so no run pays for a cold interpreter or a new, still growing WAL file.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import providers
from compiler import canonical
from compiler.bench_measure import CountingStore, WireFormats, measure, method
from compiler.bench_report import format_report, targets
from compiler.bench_workload import generate
from compiler.bundle import build_bundle, find_example_root
from compiler.errors import PrefixlockError
from compiler.sqlite_store import SQLiteStore
from providers.base import Provider

__all__ = ["DEFAULT_CALLS", "WINDOW", "arguments", "bench", "run"]

DEFAULT_CALLS: tuple[int, ...] = (100, 1000, 3000)
#: Per-call figures are taken over the last WINDOW calls of each run (fewer when the
#: shortest run has less than twice that many).
WINDOW = 50


def _naive_provider(name: str) -> Provider:
    """The provider's own :meth:`~Provider.wire_body`, without its per-item encode.

    :meth:`Provider.wire_body` rebuilds the whole body as a dict (no fragment cache) but
    also encodes every item once, to refuse what :meth:`Provider.serialize` refuses; a
    naive harness would not, so that step is a no-op here. What remains is the provider's
    own frame and per-message mapping: the encoding is the only difference from
    :meth:`Provider.serialize`.
    """
    cls = type(providers.get(name))
    naive = type(f"Naive{cls.__name__}", (cls,), {"_encode_item": _no_encode})()
    assert isinstance(naive, Provider)
    return naive


def _no_encode(self: Provider, message: Any, item: Any) -> bytes:
    return b""


def _machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "system": f"{platform.system()} {platform.release()}",
        "sqlite": sqlite3.sqlite_version,
    }


def bench(
    calls: Sequence[int] = DEFAULT_CALLS,
    names: Sequence[str] = providers.NAMES,
    seed: int = 1,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the benchmark; returns the report (a JSON value, see
    :func:`~compiler.bench_report.targets`)."""
    lengths = sorted(set(calls))
    if not lengths or lengths[0] < 2:
        raise PrefixlockError("history lengths must be at least 2 calls")
    if not names:
        raise PrefixlockError("no provider to serialize for")
    for name in names:
        providers.get(name)  # an unknown name fails before any work
    formats = WireFormats(tuple(names), providers.get, _naive_provider)
    bundle = build_bundle(find_example_root())
    window = min(WINDOW, lengths[0] // 2)
    folder = Path(tempfile.mkdtemp(prefix="prefixlock-bench-"))
    runs: list[dict[str, Any]] = []
    try:
        stores = (CountingStore(folder / "handle.db"), SQLiteStore(folder / "serialize.db"))
        try:
            progress(f"warm-up: {lengths[0]} calls")
            warmup = generate(lengths[0], seed + 1, conversation="bench-warmup")
            measure(bundle, stores, warmup, formats, 0, progress)
            for n in lengths:
                conversation = generate(
                    n, seed, compact=n == lengths[-1], tail=window, conversation=f"bench-{n}"
                )
                progress(f"run: {n} calls (per-call figures over the last {window})")
                runs.append(measure(bundle, stores, conversation, formats, window, progress))
                del conversation
        finally:
            for store in stores:
                store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    checks = targets(runs)
    return {
        "bench": "prefixlock",
        "seed": seed,
        "calls": lengths,
        "window": window,
        "providers": list(names),
        "machine": _machine(),
        "method": method(window),
        "runs": runs,
        "targets": checks,
        "all_met": all(t["met"] for t in checks),
    }


# --- the command ------------------------------------------------------------------------


def _calls(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers"
        ) from None
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: every history length must be at least 2")
    return values


def _provider_names(text: str) -> list[str]:
    if text == "all":
        return list(providers.NAMES)
    names = sorted({part.strip() for part in text.split(",") if part.strip()})
    for name in names:
        providers.get(name)  # unknown: a PrefixlockError with a suggestion
    return names


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calls",
        type=_calls,
        default=",".join(map(str, DEFAULT_CALLS)),  # argparse parses a string default
        metavar="N,N,...",
        help="history lengths to measure, in calls (default: %(default)s)",
    )
    parser.add_argument(
        "--provider",
        default="all",
        metavar="all|NAME,...",
        help="provider wire formats to serialize for (default: all)",
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of the synthetic conversations (default: 1)"
    )
    parser.add_argument("--json", action="store_true", help="print every figure as canonical JSON")


def run(args: argparse.Namespace) -> int:
    """Print the report; exit 0 whether or not the targets are met (they are figures)."""
    report = bench(
        args.calls,
        _provider_names(args.provider),
        args.seed,
        progress=lambda text: print(text, file=sys.stderr, flush=True),
    )
    if args.json:
        sys.stdout.write(canonical.dumps_pretty(report))
    else:
        print(format_report(report))
    return 0
