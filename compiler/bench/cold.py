"""``prefixlock bench --cold``: a cold worker's first serialize, against history length.

A worker of a fleet without sticky routing opens a conversation it has not served
(:meth:`Conversation.open`, from the store alone) and serializes its request with a
serializer that has served nothing. Since record format 6 each record stores its
messages' wire templates (:mod:`prefixlock.core.wire`), and that first serialize joins
stored bytes. This bench measures it at given history lengths **in messages** (the live
messages of the request), for every provider, next to:

* the warm serialize: the second serialize of the same request by the same serializer;
* the same conversation written without templates (``Conversation.store_wire = False``:
  what every record before format 6 is), whose cold serialize maps and encodes every
  message;
* what the templates cost: the stored bytes, :meth:`Conversation.open`, and the memory
  of one hydrated conversation (:mod:`tracemalloc`: peak and retained bytes).

Each figure is the median of a few repeats; before each timed step :func:`gc.collect`
runs with the bench's own heap frozen (as in :mod:`prefixlock.bench.measure`), and what
a step returns is dropped after its clock stops.
"""

from __future__ import annotations

import functools
import gc
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import providers
from ..runtime.conversation import Conversation
from ..spec.bundle import Bundle
from ..store.contract import DurableStore, Store
from ..store.sqlite import SQLiteStore
from ..store.urls import open_store
from .measure import collected_then_timed as _timed
from .measure import traced_open
from .workload import generate, play

__all__ = ["COLD_MESSAGES", "cold_bench", "format_cold"]

#: The default history lengths, in messages.
COLD_MESSAGES: tuple[int, ...] = (100, 1000, 3000)
#: Timed repeats per length (each: one open, then each provider cold and warm).
REPEATS = 7
#: Fewer repeats from this many messages on (a longer open costs more).
LONG = 2000
LONG_REPEATS = 3
#: The target of issue 47: a cold serialize at 1,000 messages, per provider.
TARGET_MS = 5.0


def _write(store: Store, bundle: Bundle, cid: str, messages: int, seed: int, wire: bool) -> int:
    """Play the seeded workload until the live history holds ``messages`` messages."""
    conv = Conversation.open(store, bundle, cid)
    conv.store_wire = wire
    for call in generate(messages + 2, seed, conversation=cid):
        play(conv, call)
        if len(conv.history.messages) >= messages:
            break
    return len(conv.request().messages)


def _measure(
    store: Store, bundle: Bundle, cid: str, names: Sequence[str], most: int
) -> dict[str, Any]:
    stored = store.load(cid)
    assert stored is not None
    repeats = min(most, LONG_REPEATS if len(stored.records) >= LONG else REPEATS)
    stored_bytes = sum(map(len, stored.records))
    del stored
    cold: dict[str, list[int]] = {name: [] for name in names}
    warm: dict[str, list[int]] = {name: [] for name in names}
    opens: list[int] = []
    gc.collect()
    gc.freeze()
    try:
        opening = functools.partial(Conversation.open, store, bundle, cid)
        for _ in range(repeats):
            opens.append(_timed(opening))
            request = opening().request()
            for name in names:
                work = functools.partial(providers.get(name).serialize, request)
                cold[name].append(_timed(work))
                warm[name].append(_timed(work))
                del work
            del request
    finally:
        gc.unfreeze()
    conv, retained, peak = traced_open(store, bundle, cid)
    del conv
    return {
        "repeats": repeats,
        "stored_bytes": stored_bytes,
        "open_ms": _median_ms(opens),
        "cold_ms": {name: _median_ms(v) for name, v in cold.items()},
        "warm_ms": {name: _median_ms(v) for name, v in warm.items()},
        "hydrated_peak_bytes": peak,
        "hydrated_retained_bytes": retained,
    }


def _median_ms(values: Sequence[int]) -> float:
    return round(statistics.median(values) / 1e6, 3)


def cold_bench(
    messages: Sequence[int] = COLD_MESSAGES,
    names: Sequence[str] = providers.NAMES,
    seed: int = 1,
    *,
    bundle: Callable[[Path], Bundle],
    store_url: str | None = None,
    repeats: int = REPEATS,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The report (a JSON value): per length, the conversation written with stored
    templates (``stored``) and without (``plain``), each measured as above.
    ``bundle(folder)``: the example bundle for ``names``; ``store_url``: the store to
    write into (default: an SQLite file in a temporary folder); ``repeats``: at most
    this many timed repeats per length."""
    folder = Path(tempfile.mkdtemp(prefix="prefixlock-cold-"))
    runs: list[dict[str, Any]] = []
    try:
        built = bundle(folder)
        store: DurableStore = (
            open_store(store_url) if store_url is not None else SQLiteStore(folder / "cold.db")
        )
        tag = f"{time.time_ns():x}"  # a store given by URL may hold earlier runs
        with store:
            for count in sorted(set(messages)):
                run: dict[str, Any] = {"messages": count}
                for kind, wire in (("stored", True), ("plain", False)):
                    cid = f"bench-cold-{count}-{kind}-{tag}"
                    progress(f"cold: {count} messages, {kind}: writing")
                    run["live_messages"] = _write(store, built, cid, count, seed, wire)
                    progress(f"cold: {count} messages, {kind}: measuring")
                    run[kind] = _measure(store, built, cid, names, repeats)
                runs.append(run)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    at = next((r for r in runs if r["messages"] == 1000), None)
    worst = None if at is None else max(at["stored"]["cold_ms"].values())
    return {
        "bench": "prefixlock-cold",
        "seed": seed,
        "providers": list(names),
        "store": "sqlite (temporary file)" if store_url is None else "given URL",
        "runs": runs,
        "target": {
            "what": "cold serialize at 1,000 messages, slowest provider (median ms)",
            "value": worst,
            "op": "<=",
            "limit": TARGET_MS,
            "met": None if worst is None else worst <= TARGET_MS,
        },
    }


def format_cold(report: dict[str, Any]) -> str:
    """The report as a table: one column per history length."""
    runs = report["runs"]
    rows: list[tuple[str, list[str]]] = []
    rows.append(("messages (live)", [f"{r['live_messages']:,}" for r in runs]))
    rows.append(("cold / warm serialize, ms (median)", []))
    for name in report["providers"]:
        rows.append(
            (
                f"  {name}",
                [
                    f"{r['stored']['cold_ms'][name]:,.2f} / {r['stored']['warm_ms'][name]:,.2f}"
                    for r in runs
                ],
            )
        )
    rows.append(("  without templates (format <= 4): cold, ms", []))
    for name in report["providers"]:
        rows.append((f"    {name}", [f"{r['plain']['cold_ms'][name]:,.2f}" for r in runs]))
    rows.append(
        (
            "Conversation.open, ms: templates / none",
            [f"{r['stored']['open_ms']:,.1f} / {r['plain']['open_ms']:,.1f}" for r in runs],
        )
    )
    rows.append(
        (
            "stored MiB: templates / none",
            [
                f"{r['stored']['stored_bytes'] / 2**20:,.2f} / "
                f"{r['plain']['stored_bytes'] / 2**20:,.2f}"
                for r in runs
            ],
        )
    )
    rows.append(
        (
            "hydrated kept MiB: templates / none",
            [
                f"{r['stored']['hydrated_retained_bytes'] / 2**20:,.1f} / "
                f"{r['plain']['hydrated_retained_bytes'] / 2**20:,.1f}"
                for r in runs
            ],
        )
    )
    rows.append(
        (
            "hydrated peak MiB: templates / none",
            [
                f"{r['stored']['hydrated_peak_bytes'] / 2**20:,.1f} / "
                f"{r['plain']['hydrated_peak_bytes'] / 2**20:,.1f}"
                for r in runs
            ],
        )
    )
    width = max(len(label) for label, _ in rows)
    widths = [max(len(cells[i]) for _, cells in rows if cells) for i in range(len(runs))]
    lines = [f"prefixlock bench --cold: seed {report['seed']}; store {report['store']}"]
    for label, cells in rows:
        line = label.ljust(width)
        for cell, w in zip(cells, widths, strict=False):
            line += "  " + cell.rjust(w)
        lines.append(line.rstrip())
    target = report["target"]
    if target["value"] is not None:
        verdict = "met" if target["met"] else "missed"
        lines.append(
            f"target: {target['what']}: {target['value']:,.2f} {target['op']} "
            f"{target['limit']:g} ms: {verdict}"
        )
    return "\n".join(lines)
