"""``prefixlock bench``: per-call cost against history length, next to naive baselines.

An agent server calls prefixlock once per model call and conversations reach thousands of
calls, so the work per call must depend on what is new, not on how long the conversation
already is. The benchmark is split by topic:

* :mod:`prefixlock.bench.workload` -- the seeded synthetic conversations
  (:func:`~prefixlock.bench.workload.generate`);
* :mod:`prefixlock.bench.measure` -- the timing, memory and store passes over one
  conversation and the naive baselines beside them (:func:`~prefixlock.bench.measure.measure`);
* :mod:`prefixlock.bench.economics` -- the simulated cost of the golden long-session case
  against the perfect-cache bound and the naive harness (issue 15);
* :mod:`prefixlock.bench.report` -- the target checks and the table;
* :mod:`prefixlock.bench.verifyscale` -- ``prefixlock verify`` timed at growing lengths
  (with ``verify_calls``);
* this module -- :func:`bench`, which runs them all and assembles the JSON report, and the
  command's arguments. It is the edge that wires the providers in (``compiler`` never
  imports a provider elsewhere): their serializers and the naive harness built from each.

For each history length :func:`bench` plays one conversation of that many calls; the
longest compacts once. Per-call figures are taken over the last :data:`WINDOW` calls of
each run, and every run ends with the same script of that many calls (same texts, tool
outputs and context; only counters such as seq differ), so the figures compare the same
work at different history lengths: growth would show there. The runs' timed calls are
taken in lockstep, in turns (:func:`~prefixlock.bench.measure.measure`), so that a drift
of the machine's speed during the bench shows in every run alike, not in their ratios.
Both stores are shared by all runs, as a server's store is, and a warm-up conversation
goes first, so no run pays for a cold interpreter or a new, still growing WAL file.
"""

from __future__ import annotations

import os
import platform
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import providers
from ..core import canonical
from ..core.errors import UsageError
from ..providers.base import Provider
from ..spec.build import build_bundle, find_example_root
from ..spec.bundle import Bundle
from ..spec.loader import load_yaml_file
from ..store.sqlite import SQLITE_VERSION, SQLiteStore
from .economics import long_session
from .measure import CountingStore, Floors, WireFormats, measure, method
from .realtime import realtime
from .realtime import targets as realtime_targets
from .report import targets
from .verifyscale import Runner, measure_verify
from .workload import generate

__all__ = ["DEFAULT_CALLS", "WARMUP_CALLS", "WINDOW", "bench", "warm_up"]

DEFAULT_CALLS: tuple[int, ...] = (100, 1000, 3000)
#: Per-call figures are taken over the last WINDOW calls of each run (fewer when the
#: shortest run has less than twice that many).
WINDOW = 50
#: The warm-up conversation's length: enough records for every WAL file (the two stores',
#: the store's SQL floor's and the bare floor's, which writes the fewest pages per record)
#: to reach SQLite's first automatic checkpoint (1,000 pages), after which commits reuse
#: the file instead of extending it. An fsync that extends the file costs about twice as
#: much (measured on the bare floor: 240-330 µs per record while its WAL grew, 140-180 µs
#: after), so a shorter warm-up made the shortest run's floor look twice as slow as the
#: others'.
WARMUP_CALLS = 300


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


def example_bundle(names: Sequence[str], folder: Path) -> Bundle:
    """The bundled example, configured for the providers of ``names`` alone.

    Admission checks every new message against each provider the conversation's root
    configures (:class:`~prefixlock.runtime.admission.Admission`), so handling is timed
    for the deployment being benchmarked: when ``names`` leaves out one of the example's
    providers, its spec root is copied to ``folder`` with ``rules/providers.yaml``
    keeping only the entries of ``names`` (each as the example has it) and built there;
    ``folder`` must outlive the bundle."""
    root = find_example_root()
    document = load_yaml_file(root / "rules" / "providers.yaml").value
    if set(document["providers"]) <= set(names):
        return build_bundle(root)
    copy = folder / "example"
    for part in ("rules", "prompt"):
        shutil.copytree(root / part, copy / part)
    document["providers"] = {
        name: entry for name, entry in document["providers"].items() if name in names
    }
    text = canonical.dumps_pretty(document) + "\n"  # JSON is YAML
    (copy / "rules" / "providers.yaml").write_text(text, encoding="utf-8")
    return build_bundle(copy)


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
        "sqlite": SQLITE_VERSION,
    }


def _formats(names: Sequence[str]) -> WireFormats:
    return WireFormats(tuple(names), providers.get, _naive_provider)


def warm_up(
    bundle: Bundle,
    stores: tuple[CountingStore, SQLiteStore],
    floors: Floors,
    formats: WireFormats,
    seed: int,
) -> None:
    """Play a conversation of :data:`WARMUP_CALLS` calls through every pass, untimed."""
    calls = generate(WARMUP_CALLS, seed + 1, conversation="bench-warmup")
    measure(bundle, stores, floors, [calls], formats, 0, lambda _: None)


def bench(
    calls: Sequence[int] = DEFAULT_CALLS,
    names: Sequence[str] = providers.NAMES,
    seed: int = 1,
    *,
    verify_calls: Sequence[int] = (),
    real_timing: Sequence[int] = (),
    real_timing_seeds: int = 1,
    run_process: Runner | None = None,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the benchmark; returns the report (a JSON value, see
    :func:`~prefixlock.bench.report.targets`). ``verify_calls``: also time ``prefixlock
    verify`` on a generated scenario of each of these lengths, after the runs, in a
    process of its own started by ``run_process``
    (:func:`~prefixlock.bench.verifyscale.measure_verify`); empty: not measured (the
    report's ``verify`` is None). ``real_timing``: session lengths of the real-timing
    workload (:mod:`prefixlock.bench.realtime`, ``real_timing_seeds`` sessions of each
    length and context share, seeds from ``seed``); empty: not run (``real_timing``
    None)."""
    lengths = sorted(set(calls))
    if not lengths or lengths[0] < 2:
        raise UsageError("history lengths must be at least 2 calls")
    if not names:
        raise UsageError("no provider to serialize for")
    if verify_calls and run_process is None:
        raise UsageError("timing verify needs a process runner")
    for name in names:
        providers.get(name)  # an unknown name fails before any work
    formats = _formats(names)
    window = min(WINDOW, lengths[0] // 2)
    folder = Path(tempfile.mkdtemp(prefix="prefixlock-bench-"))
    runs: list[dict[str, Any]] = []
    try:
        bundle = example_bundle(names, folder)
        configured = [s.provider for s in bundle.settings]
        stores = (CountingStore(folder / "handle.db"), SQLiteStore(folder / "serialize.db"))
        floors = Floors.open(folder)
        try:
            progress(f"warm-up: {WARMUP_CALLS} calls")
            warm_up(bundle, stores, floors, formats, seed)
            conversations = [
                generate(n, seed, compact=n == lengths[-1], tail=window, conversation=f"bench-{n}")
                for n in lengths
            ]
            progress(
                f"runs: {', '.join(map(str, lengths))} calls, timed in lockstep "
                f"(per-call figures over the last {window} of each)"
            )
            runs = measure(bundle, stores, floors, conversations, formats, window, progress)
            del conversations
        finally:
            for store in stores:
                store.close()
            floors.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    progress("golden long-session: simulated cost per provider")
    economics = long_session(names)
    timing = None
    if real_timing:
        timing = realtime(
            names,
            lengths=real_timing,
            seeds=tuple(range(seed, seed + real_timing_seeds)),
            progress=progress,
        )
    verify = None
    if verify_calls:
        assert run_process is not None
        verify = measure_verify(verify_calls, run=run_process, progress=progress)
    checks = targets(runs, economics, verify) + (realtime_targets(timing) if timing else [])
    return {
        "bench": "prefixlock",
        "seed": seed,
        "calls": lengths,
        "window": window,
        "providers": list(names),
        "configured_providers": configured,
        "machine": _machine(),
        "method": method(window),
        "runs": runs,
        "long_session": economics,
        "real_timing": timing,
        "verify": verify,
        "targets": checks,
        "all_met": all(t["met"] for t in checks),
    }
