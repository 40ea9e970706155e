"""The timing, memory and store passes of ``prefixlock bench``, and the naive baselines.

:func:`measure` takes one generated conversation per run (:mod:`prefixlock.bench.workload`),
the runs' timed calls in lockstep (one call of each run in turn, see :func:`_lockstep`),
and measures, over the last ``window`` calls of each:

* **handling** one model call: the work between two model calls, i.e. recording the
  previous call's model output with its usage (:meth:`Conversation.record`, as a server
  that reads provider responses does) and handling the event that makes this call
  (:meth:`Conversation.handle` for a user turn or background event,
  :meth:`Conversation.tool_results` for tool results): compile, append, and commit the
  checkpoint records to an :class:`~prefixlock.store.sqlite.SQLiteStore` (WAL,
  ``synchronous=FULL``, so one fsync per record) in a temporary folder. Requests are
  validated before the clock starts (that is the client edge). Wall and process CPU time;
* **the durable floor** per call: right after each handled call (outside its clock),
  the same record bytes appended to a bare one-table SQLite file with the same pragmas,
  one ``INSERT`` + ``COMMIT`` per record (:class:`DurableFloor`); handling is reported as
  a multiple of it, split into its parts: the time inside the store's appends, and
  prefixlock's **own work**, the same calls handled once more on an in-memory store (a
  pass of its own, no fsync between calls). Beside the floor, in the same place, **the
  store's SQL alone**: the same records appended with the statements the store sends, on
  a file with its schema and pragmas, and none of its Python (:class:`SchemaFloor`), so
  the store's appends split into what its schema costs and what its Python does. The two
  are timed one after the other, in turns (the bare floor first after every other call);
* **record bytes** per call: the checkpoint bytes handed to the store; and, where
  ``/proc/self/io`` exists, the bytes the process wrote to files (``wchar``: WAL frames,
  and the WAL checkpoints into the database file that SQLite runs now and then);
* **serializing** the call's body for every provider (``Provider.serialize``, the
  incremental encoder that returns one buffer; every call is serialized, so its caches
  are as in a server), and, in a third pass of its own (an in-memory store), the same
  bodies as fragments (``Provider.fragments``: what an HTTP client sends as an
  iterable body, no whole-body copy between calls);
* **hydration**: :meth:`Conversation.open` of the finished conversation from its store
  (a fresh connection), from the stored bytes alone;
* **cold serialization** (issue 47): the first ``Provider.serialize`` of a conversation
  just hydrated from its store, by a serializer that has served nothing (a worker of a
  fleet without sticky routing, which has not served this conversation), against the
  second serialize of the same request (warm), per provider: it joins the wire templates
  the records store (:mod:`prefixlock.core.wire`; ``prefixlock bench --cold`` measures
  it at lengths in messages, next to records without them);
* **memory**: the process's peak RSS after the run (``resource.getrusage``: the
  high-water mark of this run and the ones before), and :mod:`tracemalloc` around one
  extra, untimed hydration: the peak and the retained bytes of one hydrated conversation.

Per-call figures are the median, the 95th percentile (nearest rank) and the mean.

Each conversation is played twice, into two stores: once timing handling alone, once
serializing every call for every provider (whose handling is timed too, as
``handle_with_serialize``: serializing megabytes per call evicts the CPU caches, which
slows whatever runs next, and that effect grows with the bodies, not with prefixlock's
own work). Baselines, on the same conversation in the same process:

* **naive serialization**, after the serializing pass, on the same requests: rebuild the
  whole body as a plain dict (the provider's own frame and per-message mapping, no
  caching) and encode it with :func:`json.dumps`, per call; and the :func:`json.dumps` of
  the ready dict alone, for reference;
* **naive hydration**: :func:`json.loads` of every stored byte string (the root and
  every record), already in memory, into a list of the values: a hydration keeps what
  it reads. (``json_loads_discarded_ns``: the same parses, each value dropped at once,
  so that its memory is reused by the next; for reference: about 20 % faster at 3,000
  calls, a speed no reader that keeps the history can have.)

Timing uses :func:`time.perf_counter_ns` (handling also :func:`time.process_time_ns`).
Garbage collection stays enabled while timing, as in a server; :func:`gc.collect` runs
before each pass and each hydration repeat, so no garbage of an earlier step is collected
inside a timed one.

``compiler`` never imports a provider: the serializers and the naive harnesses come in
as :class:`WireFormats`, wired by the CLI edge (:mod:`prefixlock.bench.run`).
"""

from __future__ import annotations

import functools
import gc
import json
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import attrs

from ..core import canonical
from ..core.messages import MessageKind
from ..core.model import ModelRequest
from ..runtime.conversation import Conversation
from ..spec.bundle import Bundle
from ..store.contract import Head, MemoryStore
from ..store.sqlite import DurableFloor, SchemaFloor, SQLiteStore
from .workload import Call, play

__all__ = [
    "HYDRATION_MAX_REPEATS",
    "HYDRATION_RECORD_BUDGET",
    "HYDRATION_REPEATS",
    "CountingStore",
    "DurableFloor",
    "Floors",
    "NaiveHarness",
    "SchemaFloor",
    "Serializer",
    "WireFormats",
    "fresh",
    "hydration_repeats",
    "measure",
    "method",
]

#: Hydration is timed at least this many times per run, and more for a short history
#: (:func:`hydration_repeats`): a 100-call conversation opens in a few milliseconds, so
#: five repeats could all fall into one slow spell of the machine (one run read 2.2x for
#: 100 calls where the runs around it read 1.6x).
HYDRATION_REPEATS = 5
#: At most this many repeats, ...
HYDRATION_MAX_REPEATS = 25
#: ... as many as keep the stored records parsed per run under this many.
HYDRATION_RECORD_BUDGET = 40_000


def hydration_repeats(records: int) -> int:
    """How many times a conversation of ``records`` records is hydrated (and each other
    figure of :func:`_hydration` taken): :data:`HYDRATION_REPEATS` to
    :data:`HYDRATION_MAX_REPEATS`, fewer the longer it is."""
    fit = HYDRATION_RECORD_BUDGET // max(1, records)
    return max(HYDRATION_REPEATS, min(HYDRATION_MAX_REPEATS, fit))


T = TypeVar("T")
#: One pass over one run's conversation (:func:`_lockstep`): it stops before each timed
#: call, and once after the last one, and returns its figures.
Pass = Generator[None, None, T]


class Serializer(Protocol):
    """A provider's incremental encoder: ``Provider.serialize`` (one buffer) and
    ``Provider.fragments`` (the same bytes as a sequence of fragments)."""

    def serialize(self, request: ModelRequest) -> bytes: ...

    def fragments(self, request: ModelRequest) -> Iterable[bytes]: ...


class NaiveHarness(Protocol):
    """The naive baseline: rebuilds the whole body as a plain dict on every call."""

    def wire_body(self, request: ModelRequest) -> dict[str, Any]: ...


@attrs.frozen
class WireFormats:
    """The provider wire formats to serialize for, and how to make each one's encoders."""

    names: tuple[str, ...]
    serializer: Callable[[str], Serializer]  # a new one per pass: empty caches
    naive: Callable[[str], NaiveHarness]


class CountingStore(SQLiteStore):
    """An SQLiteStore that counts the record bytes it is asked to append, keeps the
    appends of the current call (``recent``: conversation, seq, event id and record,
    cleared by the caller) and the roots (``roots``) for the floors, and adds up the time
    spent in its appends (``appending``, nanoseconds)."""

    appended = 0
    appending = 0

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        super().__init__(path, timeout=timeout)
        self.recent: list[tuple[str, int, str, bytes]] = []
        self.roots: dict[str, bytes] = {}  # each conversation's root, as stored

    def create_root(self, conversation_id: str, root: bytes) -> bytes:
        stored = super().create_root(conversation_id, root)
        self.roots[conversation_id] = stored
        return stored

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> Head:
        t0 = time.perf_counter_ns()
        head = super().append(conversation_id, seq, event_id, record)
        self.appending += time.perf_counter_ns() - t0
        self.appended += len(record)
        self.recent.append((conversation_id, seq, event_id, record))
        return head


@attrs.frozen
class Floors:
    """The two bare appends beside the handling pass, each in a file of its own: the
    record bytes into a one-table file (``bare``, the floor handling is measured
    against) and the store's own statements on its schema (``schema``)."""

    bare: DurableFloor
    schema: SchemaFloor

    @classmethod
    def open(cls, folder: Path) -> Floors:
        return cls(DurableFloor(folder / "floor.db"), SchemaFloor(folder / "schema-floor.db"))

    def append(
        self, appends: Sequence[tuple[str, int, str, bytes]], *, bare_first: bool
    ) -> tuple[int, int]:
        """Append the call's records to both, one after the other (``bare_first``: the
        bare floor first); returns the time of each (bare, schema), in nanoseconds."""
        records = [append[3] for append in appends]
        bare = functools.partial(self.bare.append, records)
        schema = functools.partial(self.schema.append, appends)
        first, second = (bare, schema) if bare_first else (schema, bare)
        clock = time.perf_counter_ns
        t0 = clock()
        first()
        t1 = clock()
        second()
        t2 = clock()
        return (t1 - t0, t2 - t1) if bare_first else (t2 - t1, t1 - t0)

    def close(self) -> None:
        self.bare.close()
        self.schema.close()


def _written() -> int | None:
    """Bytes this process has written to files so far (Linux ``wchar``), if known."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _stats(values: Sequence[int]) -> dict[str, int]:
    """Median, 95th percentile (nearest rank) and mean, rounded to integers."""
    ordered = sorted(values)
    rank = max(1, math.ceil(0.95 * len(ordered)))
    return {
        "median": round(statistics.median(ordered)),
        "p95": ordered[rank - 1],
        "mean": round(statistics.fmean(ordered)),
    }


def _naive_encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _cid(calls: Sequence[Call]) -> str:
    first = calls[0].request
    assert first is not None and first.conversation_id is not None
    return first.conversation_id


def fresh(calls: Sequence[Call]) -> list[Call]:
    """The same calls with new request objects: a request computes its digest once and
    keeps it (:attr:`AgentRunRequest.digest`), so a pass playing the requests another
    pass played would skip work that handling pays for. Every pass plays its own."""
    return [
        call if call.request is None else attrs.evolve(call, request=attrs.evolve(call.request))
        for call in calls
    ]


def _handling_pass(
    bundle: Bundle, store: CountingStore, floors: Floors, calls: Sequence[Call], window: int
) -> Pass[tuple[dict[str, Any], Conversation]]:
    """Play the calls, timing handling alone over the last ``window``; after each call,
    the floors' appends of the records it wrote (timed over the same window)."""
    conv = Conversation.open(store, bundle, _cid(calls))
    floors.schema.prepare(conv.id, store.roots[conv.id])
    handle: list[int] = []
    durable: list[int] = []
    sql: list[int] = []
    appending: list[int] = []
    handle_cpu: list[int] = []
    record_bytes: list[int] = []
    written: list[int] = []
    first_timed = len(calls) - window
    clock, cpu = time.perf_counter_ns, time.process_time_ns
    for index, call in enumerate(calls):
        if index >= first_timed:
            yield  # the other runs' calls may come now: recent is cleared after it
        store.recent.clear()
        if index < first_timed:
            play(conv, call)
            floors.append(store.recent, bare_first=True)
            continue
        appended, spent, before = store.appended, store.appending, _written()
        t0, c0 = clock(), cpu()
        play(conv, call)
        t1, c1 = clock(), cpu()
        after = _written()
        bare, store_sql = floors.append(store.recent, bare_first=index % 2 == 0)
        durable.append(bare)
        sql.append(store_sql)
        appending.append(store.appending - spent)
        handle.append(t1 - t0)
        handle_cpu.append(c1 - c0)
        record_bytes.append(store.appended - appended)
        if before is not None and after is not None:
            written.append(after - before)
    if not window:
        return {}, conv
    yield
    final = conv.request()
    return {
        "records": conv.history.seq,
        "epochs": conv.history.epoch + 1,
        "live_messages": len(final.messages),
        "context_messages": sum(1 for m in final.messages if m.kind is MessageKind.REQUEST_CONTEXT),
        "handle_ns": _stats(handle),
        "handle_cpu_ns": _stats(handle_cpu),
        "durable_floor_ns": _stats(durable),
        "schema_floor_ns": _stats(sql),
        "store_append_ns": _stats(appending),
        "record_bytes": _stats(record_bytes),
        "written_bytes": _stats(written) if written else None,
    }, conv


def _own_work_pass(bundle: Bundle, calls: Sequence[Call], window: int) -> Pass[dict[str, Any]]:
    """Play the calls into an in-memory store, timing handling over the last ``window``:
    prefixlock's own work per call, with no store work and no fsync between calls."""
    conv = Conversation.open(MemoryStore(), bundle, _cid(calls))
    own: list[int] = []
    first_timed = len(calls) - window
    clock = time.perf_counter_ns
    for index, call in enumerate(calls):
        if index >= first_timed:
            yield
        t0 = clock()
        play(conv, call)
        t1 = clock()
        if index >= first_timed:
            own.append(t1 - t0)
    return {"own_work_ns": _stats(own)} if window else {}


def _serializing_pass(
    bundle: Bundle,
    store: SQLiteStore,
    calls: Sequence[Call],
    formats: WireFormats,
    window: int,
    progress: Callable[[str], None],
) -> Pass[dict[str, Any]]:
    """Play the calls again, serializing every call for every provider; then the naive
    harness on the requests of the last ``window`` calls."""
    conv = Conversation.open(store, bundle, _cid(calls))
    names = formats.names
    live = {name: formats.serializer(name) for name in names}
    serialize: dict[str, list[int]] = {name: [] for name in names}
    handle: list[int] = []
    requests: list[ModelRequest] = []
    bodies: dict[str, bytes] = {}
    first_timed = len(calls) - window
    clock = time.perf_counter_ns
    for index, call in enumerate(calls):
        timed = index >= first_timed
        if timed:
            yield
        t0 = clock()
        request = play(conv, call)
        t1 = clock()
        for name, provider in live.items():
            t2 = clock()
            bodies[name] = provider.serialize(request)
            t3 = clock()
            if timed:
                serialize[name].append(t3 - t2)
        if timed:
            handle.append(t1 - t0)
            requests.append(request)  # an immutable view: still this call's request later
        if (index + 1) % 1000 == 0 and index + 1 < len(calls):
            progress(f"  {index + 1}/{len(calls)} calls")
    sizes = {name: len(body) for name, body in bodies.items()}
    head = conv.history.head
    del live, conv  # the fragment caches: the naive harness needs none of it
    if not window:
        return {}
    yield  # the naive harness: after every run's timed calls
    # The naive harness runs afterwards, so that its garbage (whole bodies as dicts, every
    # call) does not slow down what is measured above.
    naive: dict[str, list[int]] = {name: [] for name in names}
    naive_encode: dict[str, list[int]] = {name: [] for name in names}
    naive_equal: dict[str, bool] = {}
    for name in names:
        harness = formats.naive(name)
        gc.collect()
        for request in requests:
            t0 = clock()
            body = harness.wire_body(request)
            t1 = clock()
            data = _naive_encode(body)
            t2 = clock()
            naive[name].append(t2 - t0)
            naive_encode[name].append(t2 - t1)
            del body
        # The last call's body: the same bytes, so the comparison is like for like.
        naive_equal[name] = data == bodies[name]
    return {
        "body_bytes": sizes,
        "handle_with_serialize_ns": _stats(handle),
        "serialize_ns": {name: _stats(v) for name, v in serialize.items()},
        "body_sha256": {name: canonical.sha256_hex(body) for name, body in bodies.items()},
        "naive_ns": {name: _stats(v) for name, v in naive.items()},
        "naive_encode_ns": {name: _stats(v) for name, v in naive_encode.items()},
        "naive_bytes_equal": naive_equal,
        "digest": canonical.digest(
            {
                "head": head,
                "bodies": {name: canonical.sha256_hex(body) for name, body in bodies.items()},
            }
        ),
    }


def _fragments_pass(
    bundle: Bundle, calls: Sequence[Call], formats: WireFormats, window: int
) -> Pass[dict[str, Any]]:
    """Play the calls once more (an in-memory store: only the fragments are timed),
    making every call's body as fragments for every provider, as a server that hands
    them to its HTTP client does: no whole-body buffer between two calls."""
    conv = Conversation.open(MemoryStore(), bundle, _cid(calls))
    live = {name: formats.serializer(name) for name in formats.names}
    fragments: dict[str, list[int]] = {name: [] for name in formats.names}
    last: dict[str, Iterable[bytes]] = {}
    first_timed = len(calls) - window
    clock = time.perf_counter_ns
    for index, call in enumerate(calls):
        if index >= first_timed:
            yield
        request = play(conv, call)
        for name, provider in live.items():
            t0 = clock()
            last[name] = provider.fragments(request)
            t1 = clock()
            if index >= first_timed:
                fragments[name].append(t1 - t0)
    if not window:
        return {}
    return {
        "fragments_ns": {name: _stats(v) for name, v in fragments.items()},
        "fragments_sha256": {
            name: canonical.sha256_hex(b"".join(pieces)) for name, pieces in last.items()
        },
    }


def _rss_kib() -> int | None:
    """The process's peak resident set size in KiB (None where unknown: Windows)."""
    try:
        import resource  # Unix only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS


def traced_open(store: Any, bundle: Bundle, cid: str) -> tuple[Conversation, int, int]:
    """One untimed :meth:`Conversation.open` under :mod:`tracemalloc`, after a collection:
    the conversation, the bytes it retains and the peak while opening."""
    gc.collect()
    tracemalloc.start()
    try:
        conv = Conversation.open(store, bundle, cid)
        retained, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return conv, retained, peak


def collected_then_timed(work: Callable[[], object]) -> int:
    """:func:`gc.collect`, then the nanoseconds ``work()`` takes; what it returns is
    dropped after the clock stops, so its freeing is not timed."""
    gc.collect()
    t0 = time.perf_counter_ns()
    done = work()
    elapsed = time.perf_counter_ns() - t0
    del done
    return elapsed


def _cold_serialization(
    bundle: Bundle, path: Path, cid: str, formats: WireFormats
) -> dict[str, Any]:
    """Per provider: the first serialize of a freshly hydrated conversation by a fresh
    serializer (cold), and the second one of the same request (warm)."""
    cold: dict[str, list[int]] = {name: [] for name in formats.names}
    warm: dict[str, list[int]] = {name: [] for name in formats.names}
    with SQLiteStore(path) as store:
        stored = store.load(cid)
        assert stored is not None
        repeats = hydration_repeats(len(stored.records))
        del stored
        # As in _hydration: the bench's own heap is frozen, so each collection before a
        # timed step walks this conversation's garbage only (unfrozen, every gc.collect()
        # walked every run's conversations: seconds per bench run in the test suite).
        gc.collect()
        gc.freeze()
        try:
            for _ in range(repeats):
                request = Conversation.open(store, bundle, cid).request()
                for name in formats.names:
                    serializer = formats.serializer(name)
                    work = functools.partial(serializer.serialize, request)
                    cold[name].append(collected_then_timed(work))
                    warm[name].append(collected_then_timed(work))
        finally:
            gc.unfreeze()
    return {
        "cold_serialize_ns": {name: _stats(v) for name, v in cold.items()},
        "warm_serialize_ns": {name: _stats(v) for name, v in warm.items()},
    }


def _parse_each(blobs: Sequence[bytes]) -> None:
    """:func:`json.loads` of every blob, each value dropped at once."""
    for blob in blobs:
        json.loads(blob)


def _hydration(bundle: Bundle, path: Path, live: Conversation) -> dict[str, Any]:
    """Conversation.open of the finished conversation against json.loads of its bytes."""
    cid = live.id
    hydrate: list[int] = []
    loads: list[int] = []
    discarded: list[int] = []
    load: list[int] = []
    with SQLiteStore(path) as store:
        stored = store.load(cid)
        assert stored is not None
        blobs = (stored.root, *stored.records)
        repeats = hydration_repeats(len(stored.records))
        # The bench's own heap (every run's conversations and calls, which no server
        # opening this one would hold) is left out of the collections from here on:
        # each gc.collect() below then costs what this conversation's garbage costs, not
        # a walk of the whole bench (9 ms each in a 40-call bench, more in a longer
        # one), and no collection inside a timed step walks it either, for the open and
        # the baseline alike.
        gc.collect()
        gc.freeze()
        try:
            for _ in range(repeats):
                hydrate.append(collected_then_timed(lambda: Conversation.open(store, bundle, cid)))
                loads.append(collected_then_timed(lambda: [json.loads(b) for b in blobs]))
                discarded.append(collected_then_timed(lambda: _parse_each(blobs)))
                load.append(collected_then_timed(lambda: store.load(cid)))
        finally:
            gc.unfreeze()
        conv, retained, peak = traced_open(store, bundle, cid)
    same = conv.history.head == live.history.head and conv.request().same_as(live.request())
    return {
        "hydration_repeats": repeats,
        "stored_bytes": sum(len(b) for b in blobs),
        "hydrate_ns": _stats(hydrate),
        "json_loads_ns": _stats(loads),
        "json_loads_discarded_ns": _stats(discarded),
        "store_load_ns": _stats(load),
        "hydrated_equal": same,
        "hydrated_peak_bytes": peak,
        "hydrated_retained_bytes": retained,
    }


def measure(
    bundle: Bundle,
    stores: tuple[CountingStore, SQLiteStore],
    floors: Floors,
    conversations: Sequence[Sequence[Call]],
    formats: WireFormats,
    window: int,
    progress: Callable[[str], None],
) -> list[dict[str, Any]]:
    """Every pass over the conversations, one per run, in lockstep; then each one's
    hydration. Figures over the last ``window`` calls of each.

    Each pass (handling, own work, serializing, fragments) plays every conversation up to
    its timed calls, one after another, and then times the runs' calls in turns: one call
    of each run per round, the runs in ascending length and in descending order in
    alternate rounds (:func:`_lockstep`). The runs' timed calls, which are the same script
    at each length, thus meet the same machine: a drift of its speed over the minutes a
    bench takes (another process, the CPU's clock, the page cache) shows in every run
    alike instead of in their ratios.

    ``stores``: one for the handling pass, one for the serializing pass, shared by the
    runs; ``floors``: the bare appends beside the handling pass. With a window of 0
    the conversations are played (a warm-up) and nothing is returned.
    """
    count = len(conversations)
    spent = [0] * count  # per run: the time of its steps in every pass
    handled = _lockstep(
        [_handling_pass(bundle, stores[0], floors, fresh(c), window) for c in conversations],
        spent,
    )
    own = _lockstep([_own_work_pass(bundle, fresh(c), window) for c in conversations], spent)
    serializing = _lockstep(
        [
            _serializing_pass(bundle, stores[1], fresh(c), formats, window, progress)
            for c in conversations
        ],
        spent,
    )
    split = _lockstep(
        [_fragments_pass(bundle, fresh(c), formats, window) for c in conversations], spent
    )
    if not window:
        return []
    runs: list[dict[str, Any]] = []
    clock = time.perf_counter_ns
    for index, calls in enumerate(conversations):
        (handling, conv), serial, frag = handled[index], serializing[index], split[index]
        sha, joined = serial.pop("body_sha256"), frag.pop("fragments_sha256")
        frag["fragments_bytes_equal"] = {name: joined[name] == sha[name] for name in sha}
        figures: dict[str, Any] = {"calls": len(calls), "window": window}
        figures.update(handling)
        figures.update(own[index])
        figures.update(serial)
        figures.update(frag)
        t0 = clock()
        figures.update(_hydration(bundle, stores[0].path, conv))
        figures.update(_cold_serialization(bundle, stores[0].path, conv.id, formats))
        figures["rss_peak_kib"] = _rss_kib()
        figures["seconds"] = round((spent[index] + clock() - t0) / 1e9, 2)
        runs.append(figures)
        del conv
    return runs


def _lockstep(passes: Sequence[Pass[T]], spent: list[int]) -> list[T]:
    """Run the passes, one per run, to their ends; return what each returned.

    First every pass plays its untimed calls (to its first stop), one pass after another;
    then :func:`gc.collect`, so that no garbage of that is collected inside a timed call;
    then rounds: each live pass advances one step (one timed call), in the passes' order
    and in reverse order in alternate rounds, so that neither the first nor the last
    place in a round is any run's alone. The time of each pass's steps is added to
    ``spent`` at its index."""
    results: dict[int, T] = {}
    clock = time.perf_counter_ns

    def step(index: int) -> bool:
        t0 = clock()
        try:
            next(passes[index])
        except StopIteration as stop:
            results[index] = stop.value
            return False
        finally:
            spent[index] += clock() - t0
        return True

    live = [index for index in range(len(passes)) if step(index)]
    gc.collect()
    forward = True
    while live:
        order = live if forward else live[::-1]
        live = sorted(index for index in order if step(index))
        forward = not forward
    return [results[index] for index in range(len(passes))]


def method(window: int) -> dict[str, str]:
    """How the figures of :func:`measure` are taken, in words, for the report."""
    return {
        "timer": "time.perf_counter_ns; handling also time.process_time_ns",
        "per_call": f"median, p95 (nearest rank) and mean over the last {window} calls "
        "of each run, the same script in every run",
        "handling": "Conversation.record (previous output, with usage) + handle / "
        "tool_results (this call's event); SQLiteStore in a temporary folder, WAL, "
        "synchronous=FULL; a pass of its own (handle_with_serialize_ns: in the serializing pass)",
        "durable_floor": "after each handled call, untimed by handling, the same record "
        "bytes appended to a bare one-table SQLite file (WAL, synchronous=FULL): one "
        "INSERT + COMMIT per record, as the store; durable_floor_ns per call; "
        "schema_floor_ns: in the same place, the store's own statements (BEGIN IMMEDIATE, "
        "UPDATE heads, INSERT records, COMMIT per record, with the record's SHA-256) on a "
        "file with its schema and pragmas, none of its Python; the two in turns, the bare "
        "floor first after every other call",
        "handling_parts": "store_append_ns: the time inside SQLiteStore.append during "
        "handling, per call; own_work_ns: the same calls handled on an in-memory store "
        "(a pass of its own, no fsync between calls): prefixlock's own work",
        "record_bytes": "checkpoint record bytes handed to the store per call; "
        "written_bytes: /proc/self/io wchar per call (WAL frames and checkpoints)",
        "serialize": "Provider.serialize of every call; naive: wire_body without its "
        "per-item encode, then json.dumps, on the same requests after the pass; "
        "naive_encode: json.dumps of the ready dict only",
        "fragments": "Provider.fragments of every call for every provider, in a third "
        "pass of its own (in-memory store, new provider instances), as a server handing "
        "the fragments to its HTTP client; fragments_bytes_equal: the last call's "
        "fragments joined == its serialize bytes",
        "hydration": f"Conversation.open of the finished conversation (fresh "
        f"connection), {HYDRATION_REPEATS} to {HYDRATION_MAX_REPEATS} repeats "
        f"(hydration_repeats: as many as keep the records parsed under "
        f"{HYDRATION_RECORD_BUDGET:,}); json_loads: json.loads of the root and "
        "every record, in memory, the values kept in a list (json_loads_discarded: each "
        "dropped at once); store_load: SQLiteStore.load alone",
        "memory": "rss_peak_kib: resource.getrusage ru_maxrss after the run's hydration "
        "(process high-water mark: every run's passes, then the hydrations in ascending "
        "length); hydrated_*: tracemalloc peak and "
        "retained bytes around one untimed Conversation.open",
        "gc": "enabled while timing; gc.collect() before each pass's timed calls and each "
        "hydration step; the hydrations with the bench's own heap frozen (gc.freeze)",
        "lockstep": "each pass plays every run's untimed calls first, then times the runs' "
        "calls in rounds, one call of each run per round, ascending and descending length "
        "in alternate rounds: every run's timed calls meet the same machine",
    }
