"""``prefixlock bench --soak``: a fleet of worker processes on one checkpoint store.

W worker processes share one store (a SQLite file or a PostgreSQL database) and C
conversations, each a seeded synthetic conversation (:func:`~.workload.generate`) cut
into events: recorded model outputs, user turns, background events and tool results.
The coordinator routes each conversation's next event to a random worker, as a load
balancer does; an idempotent event (one with an event id: a user turn, a background
event, tool results) is sometimes delivered to two workers at once, as a retrying load
balancer does, and workers are sometimes restarted (everything warm is dropped and the
store reopened). A worker keeps the conversations it has opened and catches up
(:meth:`~prefixlock.runtime.conversation.Conversation.catch_up`: the records after its
head, one round trip) before handling an event.

At the end every conversation's stored records and the next request body (Anthropic's
wire bytes) are compared with a single-process replay of the same events: the report
counts lost and duplicated records, errors surfaced to callers (any exception a worker
raised) and conversations that are not byte-identical.
"""

from __future__ import annotations

import math
import multiprocessing
import queue
import random
import secrets
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any, Protocol

import attrs

from .. import providers
from ..core import canonical
from ..core.errors import UsageError
from ..runtime.conversation import Conversation
from ..spec.build import build_bundle, find_example_root
from ..spec.bundle import Bundle
from ..store.contract import (
    CatchUp,
    DurableStore,
    Head,
    MemoryStore,
    StoredConversation,
)
from ..store.sqlite import DurableFloor
from ..store.urls import is_postgres_url, open_store, redact_url
from .report import BYTES_TOLERANCE, FLOOR_LIMIT, HANDLING_LIMIT
from .run import WARMUP_CALLS
from .workload import Call, generate, play

__all__ = [
    "DEFAULT_SOAK",
    "SoakConfig",
    "Step",
    "apply_step",
    "compare_with_replay",
    "format_soak",
    "format_store_bench",
    "soak",
    "soak_ok",
    "soak_steps",
    "store_bench",
]

#: The wire format whose next request body is compared with the replay.
PROVIDER = "anthropic"
#: Seconds the coordinator waits for any worker before it gives up.
ANSWER_TIMEOUT = 120.0

CTX = multiprocessing.get_context("fork")


@attrs.frozen
class SoakConfig:
    """One soak: ``workers`` processes, ``conversations`` x ``events`` events."""

    workers: int = 4
    conversations: int = 8
    #: events per conversation
    events: int = 2000
    seed: int = 7
    #: share of idempotent events delivered to two workers at once
    duplicate_share: float = 0.25
    #: chance, per routed event, that a random worker is restarted first
    restart_share: float = 0.02

    def check(self) -> None:
        for name in ("workers", "conversations", "events"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name} must be at least 1, not {getattr(self, name)}")


DEFAULT_SOAK = SoakConfig()


@attrs.frozen
class Step:
    """One event of a conversation: record a model output, or deliver an event."""

    call: Call
    #: True: record ``call.output``; False: deliver the call's event
    output: bool

    @property
    def idempotent(self) -> bool:
        """Deliverable twice: the event carries its own event id."""
        return not self.output


def soak_steps(conversation: str, events: int, seed: int) -> list[Step]:
    """The first ``events`` events of a seeded synthetic conversation."""
    steps: list[Step] = []
    for call in generate(events + 1, seed, conversation=conversation):
        if call.output is not None:
            steps.append(Step(call, True))
        steps.append(Step(call, False))
        if len(steps) >= events:
            break
    return steps[:events]


def apply_step(conv: Conversation, step: Step) -> None:
    call = step.call
    if step.output:
        assert call.output is not None
        conv.record(call.output.model)
    elif call.kind == "tool_results":
        conv.tool_results(call.results)
    else:
        assert call.request is not None
        conv.handle(call.request)


# -- workers ---------------------------------------------------------------------------

#: Set in the coordinator before forking: the bundle and every conversation's steps.
_SHARED: dict[str, Any] = {}


def _worker(url: str, inbox: Queue[Any], outbox: Queue[Any]) -> None:
    bundle: Bundle = _SHARED["bundle"]
    steps: dict[str, list[Step]] = _SHARED["steps"]
    store = open_store(url)
    convs: dict[str, Conversation] = {}
    try:
        while (message := inbox.get()) is not None:
            if message == "restart":  # a crashed and restarted server: nothing warm survives
                store.close()
                store, convs = open_store(url), {}
                continue
            cid, index = message
            try:
                conv = convs.get(cid)
                if conv is None:
                    conv = convs[cid] = Conversation.open(store, bundle, cid)
                else:
                    conv.catch_up()  # reads only what other workers appended
                apply_step(conv, steps[cid][index])
                outbox.put((cid, index, None))
            except Exception as err:  # every error a caller would see is counted
                convs.pop(cid, None)
                outbox.put((cid, index, f"{type(err).__name__}: {err}"))
    finally:
        store.close()


# -- the coordinator -------------------------------------------------------------------


def soak(
    url: str | None,
    config: SoakConfig = DEFAULT_SOAK,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run one soak on the store ``url`` names (a temporary SQLite file if None)."""
    config.check()
    folder: Path | None = None
    if url is None:
        folder = Path(tempfile.mkdtemp(prefix="prefixlock-soak-"))
        url = f"sqlite://{folder / 'soak.db'}"
    try:
        return _soak(url, config, progress)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def _soak(url: str, config: SoakConfig, progress: Callable[[str], None]) -> dict[str, Any]:
    run = secrets.token_hex(3)  # fresh conversation ids: a shared database may hold others
    ids = [f"soak-{run}-{i}" for i in range(config.conversations)]
    progress(f"generating {config.conversations} x {config.events} events")
    bundle = build_bundle(find_example_root())
    steps = {cid: soak_steps(cid, config.events, config.seed + i) for i, cid in enumerate(ids)}
    with open_store(url):  # create the schema before the workers race to
        pass
    _SHARED.update(bundle=bundle, steps=steps)
    rng = random.Random(config.seed)
    inboxes: list[Queue[Any]] = [CTX.Queue() for _ in range(config.workers)]
    outbox: Queue[Any] = CTX.Queue()
    procs = [CTX.Process(target=_worker, args=(url, q, outbox)) for q in inboxes]
    progress(f"{config.workers} workers on {redact_url(url)}")
    start = time.perf_counter()
    for p in procs:
        p.start()
    _SHARED.clear()
    next_step = dict.fromkeys(ids, 0)
    waiting: dict[str, int] = {}
    errors: list[str] = []
    duplicates = restarts = delivered = 0
    try:
        while any(next_step[c] < len(steps[c]) for c in ids) or waiting:
            for cid in ids:
                index = next_step[cid]
                if cid in waiting or index >= len(steps[cid]):
                    continue
                targets = [rng.randrange(config.workers)]
                if steps[cid][index].idempotent and rng.random() < config.duplicate_share:
                    targets.append(rng.randrange(config.workers))
                    duplicates += 1
                if rng.random() < config.restart_share:
                    inboxes[rng.randrange(config.workers)].put("restart")
                    restarts += 1
                for w in targets:
                    inboxes[w].put((cid, index))
                waiting[cid] = len(targets)
            try:
                cid, index, error = outbox.get(timeout=ANSWER_TIMEOUT)
            except queue.Empty:
                dead = [i for i, p in enumerate(procs) if not p.is_alive()]
                errors.append(
                    f"no worker answered for {ANSWER_TIMEOUT:.0f} s (dead workers: {dead}); "
                    f"waiting for {sorted(waiting.items())}"
                )
                break
            delivered += 1
            if error is not None:
                errors.append(f"{cid} event {index}: {error}")
            waiting[cid] -= 1
            if not waiting[cid]:
                del waiting[cid]
                next_step[cid] = index + 1
                if next_step[cid] % 500 == 0:
                    progress(f"{cid}: {next_step[cid]} events")
    finally:
        for q in inboxes:
            q.put(None)
        for p in procs:
            p.join(60)
            if p.is_alive():  # pragma: no cover - a hung worker
                p.terminate()
                p.join(5)
    seconds = time.perf_counter() - start
    events = sum(next_step.values())
    progress("comparing with a single-process replay")
    return {
        "store": redact_url(url),
        "workers": config.workers,
        "conversations": config.conversations,
        "events_per_conversation": config.events,
        "events": events,
        "deliveries": delivered,
        "duplicate_deliveries": duplicates,
        "restarts": restarts,
        "seconds": round(seconds, 3),
        "events_per_second": round(events / seconds, 1) if seconds > 0 else 0.0,
        "errors_surfaced": len(errors),
        "errors": errors[:20],
        "worker_exit_codes": [p.exitcode for p in procs],
        **compare_with_replay(url, bundle, steps, next_step),
    }


def compare_with_replay(
    url: str, bundle: Bundle, steps: dict[str, list[Step]], done: dict[str, int]
) -> dict[str, Any]:
    """Lost and duplicated records, and conversations that differ from a single-process
    replay of each conversation's first ``done[cid]`` events."""
    lost = duplicated = 0
    differ: list[str] = []
    serializer = providers.get(PROVIDER)
    with open_store(url) as store:
        for cid, conv_steps in steps.items():
            replay = Conversation.open(MemoryStore(), bundle, cid)
            for step in conv_steps[: done[cid]]:
                apply_step(replay, step)
            expected = replay.store.load(cid)
            stored = store.load(cid)
            assert expected is not None
            got = stored.records if stored is not None else ()
            want_ids = [canonical.loads(r)["event_id"] for r in expected.records]
            got_ids = [canonical.loads(r)["event_id"] for r in got]
            lost += len(set(want_ids) - set(got_ids))
            duplicated += len(got_ids) - len(set(got_ids)) + len(set(got_ids) - set(want_ids))
            same = got == expected.records
            if same:
                fleet = Conversation.open(store, bundle, cid)
                same = serializer.serialize(fleet.request()) == serializer.serialize(
                    replay.request()
                )
            if not same:
                differ.append(cid)
        problems = store.integrity_check()
    return {
        "lost": lost,
        "duplicated": duplicated,
        "identical": len(steps) - len(differ),
        "differ": differ,
        "integrity_problems": problems,
    }


def format_soak(report: dict[str, Any]) -> str:
    """The soak figures as text, one per line."""
    r = report
    lines = [
        f"soak on {r['store']}: {r['workers']} workers x {r['conversations']} conversations "
        f"x {r['events_per_conversation']} events",
        f"  events           {r['events']} in {r['seconds']:.1f} s "
        f"({r['events_per_second']:.1f} events/s)",
        f"  injected         {r['duplicate_deliveries']} duplicate deliveries, "
        f"{r['restarts']} restarts",
        f"  lost             {r['lost']}",
        f"  duplicated       {r['duplicated']}",
        f"  errors surfaced  {r['errors_surfaced']}",
        f"  byte-identical   {r['identical']} of {r['conversations']} conversations "
        "(records and next request body, vs a single-process replay)",
    ]
    lines += [f"  error: {e}" for e in r["errors"]]
    return "\n".join(lines)


def soak_ok(report: dict[str, Any]) -> bool:
    """No loss, no duplicate, no surfaced error, every conversation byte-identical."""
    return (
        report["lost"] == 0
        and report["duplicated"] == 0
        and report["errors_surfaced"] == 0
        and not report["differ"]
        and not report["integrity_problems"]
        and report["worker_exit_codes"] == [0] * report["workers"]
    )


# -- bench --store: handling per call against history length -----------------------------

#: History lengths (calls) ``bench --store`` compares by default.
STORE_CALLS = (100, 3000)
#: Calls measured at the end of each history (the same tail script at every length).
WARM_WINDOW = 30
COLD_WINDOW = 5


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    median = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]
    return median, p95


class Floor(Protocol):
    """A bare durable append (:class:`~prefixlock.store.sqlite.DurableFloor`,
    :class:`~prefixlock.store.postgres.PostgresFloor`)."""

    def append(self, records: Sequence[bytes]) -> None: ...

    def close(self) -> None: ...


class _TimedStore:
    """A store that adds up the time spent in its appends (``appending``, seconds) and
    keeps the records of the current call (``recent``, cleared by the caller)."""

    def __init__(self, store: DurableStore) -> None:
        self._store = store
        self.appending = 0.0
        self.recent: list[bytes] = []

    @property
    def bytes_read(self) -> int:
        return self._store.bytes_read

    def create_root(self, conversation_id: str, root: bytes) -> bytes:
        return self._store.create_root(conversation_id, root)

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> Head:
        start = time.perf_counter()
        head = self._store.append(conversation_id, seq, event_id, record)
        self.appending += time.perf_counter() - start
        self.recent.append(record)
        return head

    def load(self, conversation_id: str, after: int = 0) -> StoredConversation | None:
        return self._store.load(conversation_id, after)

    def load_after(self, conversation_id: str, seq: int) -> CatchUp | None:
        return self._store.load_after(conversation_id, seq)

    def conversations(self) -> list[str]:
        return self._store.conversations()

    def close(self) -> None:
        self._store.close()


def _floor(url: str, folder: Path) -> Floor:
    """The bare durable append beside the store ``url`` names: a table of its own in a
    PostgreSQL database, a one-table SQLite file in ``folder`` otherwise."""
    if is_postgres_url(url):
        from ..store.postgres import PostgresFloor

        return PostgresFloor(url)
    return DurableFloor(folder / "floor.db")


#: Records appended to a new floor, untimed, before it is used: enough for a SQLite WAL
#: file to reach its first checkpoint (1,000 pages), after which commits reuse the file
#: instead of extending it (see :data:`prefixlock.bench.run.WARMUP_CALLS`).
FLOOR_PRIMING = 500


def _primed(floor: Floor) -> Floor:
    record = b"0" * 9_300  # a tool-loop call's records, about
    for _ in range(FLOOR_PRIMING):
        floor.append([record])
    return floor


def _warm_up(url: str, seed: int) -> None:
    """Play a conversation of :data:`~prefixlock.bench.run.WARMUP_CALLS` calls into the
    store, untimed, so that the first run does not pay for a new, still growing file."""
    calls = generate(WARMUP_CALLS, seed + 1, conversation=f"bench-warmup-{secrets.token_hex(3)}")
    with open_store(url) as store:
        conv = Conversation.open(store, build_bundle(find_example_root()), _first_id(calls))
        for call in calls:
            play(conv, call)


def _first_id(calls: Sequence[Call]) -> str:
    first = calls[0].request
    assert first is not None and first.conversation_id is not None
    return first.conversation_id


def _store_run(
    url: str, calls: int, seed: int, floor: Floor, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Play ``calls`` calls; time the last ones for a warm fleet and for cold opens, and
    beside each warm call the bare durable append of the records it wrote."""
    bundle = build_bundle(find_example_root())
    cid = f"bench-{secrets.token_hex(3)}-{calls}"
    script = generate(calls, seed, tail=WARM_WINDOW + COLD_WINDOW, conversation=cid)
    setup, warm_calls, cold_calls = (
        script[: calls - WARM_WINDOW - COLD_WINDOW],
        script[calls - WARM_WINDOW - COLD_WINDOW : calls - COLD_WINDOW],
        script[calls - COLD_WINDOW :],
    )
    with open_store(url) as first, open_store(url) as second:
        progress(f"{redact_url(url)}: playing {len(setup)} calls")
        timed = (_TimedStore(first), _TimedStore(second))
        a = Conversation.open(timed[0], bundle, cid)
        for call in setup:
            play(a, call)
        b = Conversation.open(timed[1], bundle, cid)
        warm: list[float] = []
        catch: list[float] = []
        warm_bytes: list[int] = []
        appends: list[float] = []
        bare: list[float] = []
        for i, call in enumerate(warm_calls):  # two warm workers take turns
            conv, store = (a, b)[i % 2], timed[i % 2]
            before, spent = store.bytes_read, store.appending
            store.recent.clear()
            start = time.perf_counter()
            conv.catch_up()
            caught = time.perf_counter()
            play(conv, call)
            done = time.perf_counter()
            floor.append(store.recent)
            warm.append(done - start)
            catch.append(caught - start)
            appends.append(store.appending - spent)
            bare.append(time.perf_counter() - done)
            warm_bytes.append(store.bytes_read - before)
        cold: list[float] = []
        cold_bytes: list[int] = []
        for call in cold_calls:  # a worker that holds nothing: open from the store
            before = first.bytes_read
            start = time.perf_counter()
            play(Conversation.open(first, bundle, cid), call)
            cold.append(time.perf_counter() - start)
            cold_bytes.append(first.bytes_read - before)
    warm_median, warm_p95 = _percentiles(warm)
    cold_median, cold_p95 = _percentiles(cold)
    appends_median = round(statistics.median(appends) * 1000, 3)
    floor_median = round(statistics.median(bare) * 1000, 3)
    return {
        "calls": calls,
        "warm_median_ms": round(warm_median * 1000, 3),
        "warm_p95_ms": round(warm_p95 * 1000, 3),
        "warm_bytes_per_call": round(statistics.mean(warm_bytes)),
        "warm_catch_up_median_ms": round(statistics.median(catch) * 1000, 3),
        "warm_appends_median_ms": appends_median,
        "floor_median_ms": floor_median,
        "appends_vs_floor": round(appends_median / max(floor_median, 0.001), 2),
        "cold_median_ms": round(cold_median * 1000, 3),
        "cold_p95_ms": round(cold_p95 * 1000, 3),
        "cold_bytes_per_call": round(statistics.mean(cold_bytes)),
    }


def store_bench(
    url: str,
    lengths: Sequence[int] = STORE_CALLS,
    seed: int = 1,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Handling per call at each history length, on ``url`` and on a temporary SQLite
    file side by side: a warm fleet (two workers taking turns, each catching up before
    it handles a call) and a cold open (the worker holds nothing), with the record and
    root bytes each call read from the store."""
    short = min(lengths)
    if short < WARM_WINDOW + COLD_WINDOW + 2:
        raise UsageError(
            f"bench --store: every history length must be at least "
            f"{WARM_WINDOW + COLD_WINDOW + 2} calls, not {short}"
        )
    folder = Path(tempfile.mkdtemp(prefix="prefixlock-store-bench-"))
    try:
        targets = [("sqlite", f"sqlite://{folder / 'bench.db'}"), ("store", url)]
        stores = []
        for label, target in targets:
            _warm_up(target, seed)
            floor = _primed(_floor(target, folder))
            try:
                rows = [_store_run(target, n, seed, floor, progress) for n in lengths]
            finally:
                floor.close()
            first, last = rows[0], rows[-1]
            stores.append(
                {
                    "store": "temporary SQLite file" if label == "sqlite" else redact_url(url),
                    "rows": rows,
                    "warm_ratio": round(last["warm_median_ms"] / first["warm_median_ms"], 2),
                    "appends_vs_floor": max(row["appends_vs_floor"] for row in rows),
                }
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    checks = store_targets(stores)
    return {
        "lengths": list(lengths),
        "seed": seed,
        "stores": stores,
        "targets": checks,
        # SQLite runs beside for comparison; the store under test is what is judged
        "all_met": all(t["met"] for t in checks if t["name"].startswith("store_")),
    }


def store_targets(stores: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per store (``sqlite_*`` beside, ``store_*`` under test): a warm worker's handling
    per call at the longest history over the shortest (<= :data:`HANDLING_LIMIT`), and
    the bytes it reads per call, as the largest deviation from the shortest history
    (<= :data:`BYTES_TOLERANCE`)."""
    out: list[dict[str, Any]] = []
    for label, store in zip(("sqlite", "store"), stores, strict=True):
        first, last = store["rows"][0], store["rows"][-1]
        ratio = store["warm_ratio"]
        base = max(first["warm_bytes_per_call"], 1)
        deviation = round(
            max(abs(row["warm_bytes_per_call"] / base - 1) for row in store["rows"]), 3
        )
        out += [
            {
                "name": f"{label}_warm_flat",
                "what": f"{store['store']}: warm handling per call at {last['calls']} calls "
                f"/ at {first['calls']} (median)",
                "value": ratio,
                "op": "<=",
                "limit": HANDLING_LIMIT,
                "met": ratio <= HANDLING_LIMIT,
            },
            {
                "name": f"{label}_warm_bytes_flat",
                "what": f"{store['store']}: bytes read per warm call (catch-up), largest "
                f"deviation from {first['calls']} calls",
                "value": deviation,
                "op": "<=",
                "limit": BYTES_TOLERANCE,
                "met": deviation <= BYTES_TOLERANCE,
            },
            {
                "name": f"{label}_appends_vs_floor",
                "what": f"{store['store']}: the store's appends of a warm call / the bare "
                "durable append of the same records (median; worst history length)",
                "value": store["appends_vs_floor"],
                "op": "<=",
                "limit": FLOOR_LIMIT,
                "met": store["appends_vs_floor"] <= FLOOR_LIMIT,
            },
        ]
    return out


def format_store_bench(report: dict[str, Any]) -> str:
    """One table: per store and history length, warm and cold handling per call (the
    catch-up and the appends, the store's share of a warm call, on their own, and the
    bare durable append of the same records beside them)."""
    header = (
        "store", "calls", "warm median ms", "warm p95 ms", "catch-up median ms",
        "appends median ms", "bare append ms", "warm bytes/call",
        "cold median ms", "cold p95 ms", "cold bytes/call",
    )  # fmt: skip
    table = [header]
    for store in report["stores"]:
        for row in store["rows"]:
            table.append(
                (
                    store["store"],
                    str(row["calls"]),
                    f"{row['warm_median_ms']:.2f}",
                    f"{row['warm_p95_ms']:.2f}",
                    f"{row['warm_catch_up_median_ms']:.2f}",
                    f"{row['warm_appends_median_ms']:.2f}",
                    f"{row['floor_median_ms']:.2f}",
                    str(row["warm_bytes_per_call"]),
                    f"{row['cold_median_ms']:.2f}",
                    f"{row['cold_p95_ms']:.2f}",
                    str(row["cold_bytes_per_call"]),
                )
            )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    for target in report["targets"]:
        lines.append(
            f"{target['what']}: {target['value']} (target {target['op']} {target['limit']}: "
            f"{'met' if target['met'] else 'NOT met'})"
        )
    return "\n".join(lines)
