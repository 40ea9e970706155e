"""Fleets: many worker processes on one store (SQLite file or PostgreSQL database).

* Races never surface: writers that lose catch up after their head and retry until they
  win or find their event already stored.
* The soak: W workers, C conversations, each step routed to a random worker (some sent to
  two workers at once, as a retrying load balancer does), restarts injected; the stored
  history and the next request body equal a single-process replay byte for byte.

CI runs a bounded soak; ``PREFIXLOCK_SOAK_TURNS=500`` (turns per conversation) and
``PREFIXLOCK_SOAK_WORKERS`` / ``PREFIXLOCK_SOAK_CONVERSATIONS`` run longer ones.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import random
from multiprocessing.queues import Queue
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import CONTEXT_A, background, context_b, example_bundle, user
from prefixlock import providers
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.store.contract import MemoryStore, Store
from prefixlock.store.urls import open_store

CTX = multiprocessing.get_context("fork")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/fleet.db"
    return str(request.getfixturevalue("postgres_url"))


# -- races never surface ------------------------------------------------------------------


def _racer(url: str, worker: int, conversations: list[str], n: int) -> None:
    """Deliver own and shared events to every conversation as fast as possible."""
    bundle = example_bundle()
    with open_store(url) as store:
        convs = {cid: Conversation.open(store, bundle, cid) for cid in conversations}
        for i in range(n):
            for cid, conv in convs.items():  # warm and stale: no catch-up before handling
                conv.handle(user(f"w{worker}-{i}", f"from {worker}", conversation=cid))
                conv.handle(background(f"shared-{i}", "same for all", conversation=cid))


def test_racing_processes_never_see_a_race_and_lose_nothing(url: str) -> None:
    conversations, workers, n = ["a", "b"], 4, 25
    example_bundle()  # built once, inherited by the forked workers
    with open_store(url) as store:
        for cid in conversations:
            Conversation.open(store, example_bundle(), cid)
    procs = [CTX.Process(target=_racer, args=(url, w, conversations, n)) for w in range(workers)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * workers  # a surfaced race exits 1
    with open_store(url) as store:
        assert store.integrity_check() == []
        for cid in conversations:
            stored = store.load(cid)
            assert stored is not None
            events = [canonical.loads(r)["event_id"] for r in stored.records]
            assert len(events) == len(set(events)) == workers * n + n
            for w in range(workers):
                mine = [e for e in events if e.startswith(f"w{w}-")]
                assert mine == [f"w{w}-{i}" for i in range(n)]  # each worker's order kept


# -- the soak ----------------------------------------------------------------------------

#: steps per turn: user turn, tool call, tool results, final answer
STEPS_PER_TURN = 4
#: steps a load balancer may deliver twice (idempotent by event id)
IDEMPOTENT = {0, 2}


def _step(conv: Conversation, index: int) -> None:
    cid, turn, kind = conv.id, index // STEPS_PER_TURN, index % STEPS_PER_TURN
    if kind == 0:
        context = CONTEXT_A if turn % 3 else context_b()
        conv.handle(user(f"u{turn}", f"query {turn} of {cid}", context=context, conversation=cid))
    elif kind == 1:
        conv.assistant("reading", [ToolCall(f"c{turn}", "read_file", {"path": f"f{turn}.py"})])
    elif kind == 2:
        conv.tool_results([ToolResult(f"c{turn}", f"contents of f{turn}.py in {cid}\n")])
    else:
        conv.assistant(f"done with turn {turn}")


def _soak_worker(url: str, inbox: Queue[Any], outbox: Queue[Any]) -> None:
    bundle = example_bundle()
    store: Store = open_store(url)
    convs: dict[str, Conversation] = {}
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
            _step(conv, index)
            outbox.put((cid, index, None))
        except Exception as err:
            outbox.put((cid, index, f"{type(err).__name__}: {err}"))
    store.close()


def _replay(cid: str, steps: int) -> tuple[tuple[bytes, ...], bytes]:
    conv = Conversation.open(MemoryStore(), example_bundle(), cid)
    for index in range(steps):
        _step(conv, index)
    stored = conv.store.load(cid)
    assert stored is not None
    return stored.records, providers.get("anthropic").serialize(conv.request())


@pytest.mark.soak
def test_soak_fleet_history_equals_a_single_process_replay(url: str) -> None:
    workers = int(os.environ.get("PREFIXLOCK_SOAK_WORKERS", "4"))
    conversations = [
        f"conv-{i}" for i in range(int(os.environ.get("PREFIXLOCK_SOAK_CONVERSATIONS", "6")))
    ]
    steps = STEPS_PER_TURN * int(os.environ.get("PREFIXLOCK_SOAK_TURNS", "6"))
    rng = random.Random(7)
    example_bundle()
    inboxes: list[Queue[Any]] = [CTX.Queue() for _ in range(workers)]
    outbox: Queue[Any] = CTX.Queue()
    procs = [CTX.Process(target=_soak_worker, args=(url, q, outbox)) for q in inboxes]
    for p in procs:
        p.start()
    next_step = dict.fromkeys(conversations, 0)
    waiting: dict[str, int] = {}  # conversation -> acks still due for its current step
    errors: list[str] = []
    duplicates = restarts = 0
    try:
        while any(i < steps for i in next_step.values()) or waiting:
            for cid, index in next_step.items():
                if cid in waiting or index >= steps:
                    continue
                targets = [rng.randrange(workers)]
                if index % STEPS_PER_TURN in IDEMPOTENT and rng.random() < 0.25:
                    targets.append(rng.randrange(workers))  # delivered twice
                    duplicates += 1
                if rng.random() < 0.05:
                    inboxes[rng.randrange(workers)].put("restart")
                    restarts += 1
                for w in targets:
                    inboxes[w].put((cid, index))
                waiting[cid] = len(targets)
            try:
                cid, index, error = outbox.get(timeout=60)
            except queue.Empty:  # pragma: no cover - a hung worker
                pytest.fail(f"no worker answered for 60 s; waiting for {waiting}")
            if error is not None:
                errors.append(f"{cid} step {index}: {error}")
            waiting[cid] -= 1
            if not waiting[cid]:
                del waiting[cid]
                next_step[cid] = index + 1
    finally:
        for q in inboxes:
            q.put(None)
        for p in procs:
            p.join(60)
    assert errors == []  # 0 errors surfaced to callers
    assert [p.exitcode for p in procs] == [0] * workers
    assert duplicates > 0 and restarts > 0
    with open_store(url) as store:
        assert store.integrity_check() == []
        for cid in conversations:
            stored = store.load(cid)
            assert stored is not None
            records, body = _replay(cid, steps)
            assert stored.records == records  # 0 lost, 0 duplicated, byte-identical
            fleet = Conversation.open(store, example_bundle(), cid).request()
            assert providers.get("anthropic").serialize(fleet) == body


# -- catch-up refuses a store that lost or rewrote what a worker holds -------------------


def test_catch_up_refuses_a_store_behind_or_on_another_history(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "s.db"
    with open_store(str(path)) as store:
        conv = Conversation.open(store, example_bundle(), "c")
        conv.handle(user("u1", conversation="c"))
        conv.assistant("done")
        assert conv.catch_up() == 0
        with sqlite3.connect(path, isolation_level=None) as raw:
            raw.execute("UPDATE heads SET digest = 'sha256:00'")
        with pytest.raises(CheckpointError) as info:
            conv.catch_up()
        assert str(info.value) == (
            f"conversation 'c': record 2 has digest sha256:00 in the store, but "
            f"{conv.head.digest} here: the store holds another history"
        )
        with sqlite3.connect(path, isolation_level=None) as raw:
            raw.execute("DELETE FROM records WHERE seq = 2")
            raw.execute("UPDATE heads SET seq = 1")
        with pytest.raises(CheckpointError) as info:
            conv.catch_up()
        assert str(info.value) == (
            "conversation 'c' is behind: its head is record 1, but the reader holds record 2: "
            "the store lost committed records"
        )
