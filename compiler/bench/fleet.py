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

import multiprocessing
import queue
import random
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import attrs

from .. import providers
from ..core import canonical
from ..core.errors import UsageError
from ..runtime.conversation import Conversation
from ..spec.build import build_bundle, find_example_root
from ..spec.bundle import Bundle
from ..store.contract import MemoryStore
from ..store.urls import open_store, redact_url
from .workload import Call, generate

__all__ = [
    "DEFAULT_SOAK",
    "SoakConfig",
    "Step",
    "format_soak",
    "soak",
    "soak_ok",
    "soak_steps",
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


def _apply(conv: Conversation, step: Step) -> None:
    call = step.call
    if step.output:
        assert call.output is not None
        conv.assistant(call.output.text, call.output.tool_calls)
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
                _apply(conv, steps[cid][index])
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
        **_compare(url, bundle, steps, next_step),
    }


def _compare(
    url: str, bundle: Bundle, steps: dict[str, list[Step]], done: dict[str, int]
) -> dict[str, Any]:
    """Lost and duplicated records, and conversations that differ from the replay."""
    lost = duplicated = 0
    differ: list[str] = []
    serializer = providers.get(PROVIDER)
    with open_store(url) as store:
        for cid, conv_steps in steps.items():
            replay = Conversation.open(MemoryStore(), bundle, cid)
            for step in conv_steps[: done[cid]]:
                _apply(replay, step)
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
