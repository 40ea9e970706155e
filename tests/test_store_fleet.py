"""Fleets: many worker processes on one store (SQLite file or PostgreSQL database).

* Races never surface: writers that lose catch up after their head and retry until they
  win or find their event already stored.
* The soak: W workers, C conversations, each step routed to a random worker (some sent to
  two workers at once, as a retrying load balancer does), restarts injected; the stored
  history and the next request body equal a single-process replay byte for byte.

CI runs a bounded soak; ``PREFIXLOCK_SOAK_EVENTS=2000`` (events per conversation) and
``PREFIXLOCK_SOAK_WORKERS`` / ``PREFIXLOCK_SOAK_CONVERSATIONS`` run longer ones (or
``prefixlock bench --soak``).
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest
from conv_helpers import background, example_bundle, user
from prefixlock.bench.fleet import (
    SoakConfig,
    apply_step,
    compare_with_replay,
    soak,
    soak_ok,
    soak_steps,
)
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError
from prefixlock.runtime.conversation import Conversation
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
# The soak itself is the library's (``prefixlock bench --soak``); these tests drive it.


@pytest.mark.soak
def test_soak_fleet_history_equals_a_single_process_replay(url: str) -> None:
    config = SoakConfig(
        workers=int(os.environ.get("PREFIXLOCK_SOAK_WORKERS", "4")),
        conversations=int(os.environ.get("PREFIXLOCK_SOAK_CONVERSATIONS", "6")),
        events=int(os.environ.get("PREFIXLOCK_SOAK_EVENTS", "24")),
        restart_share=0.05,
    )
    report = soak(url, config)
    assert report["errors"] == []  # 0 errors surfaced to callers
    assert (report["lost"], report["duplicated"], report["differ"]) == (0, 0, [])
    assert report["identical"] == config.conversations
    assert report["duplicate_deliveries"] > 0 and report["restarts"] > 0
    assert soak_ok(report)


def test_soak_comparison_counts_lost_and_extra_records(tmp_path: Path) -> None:
    """The comparison the soak ends with can fail: a store one event short of the
    replay has lost a record; one event ahead holds a record the replay never made."""
    url = f"sqlite://{tmp_path}/s.db"
    steps = {"c": soak_steps("c", 6, seed=1)}
    with open_store(url) as store:
        conv = Conversation.open(store, example_bundle(), "c")
        for step in steps["c"][:5]:
            apply_step(conv, step)
    short = compare_with_replay(url, example_bundle(), steps, {"c": 6})
    assert (short["lost"], short["duplicated"], short["differ"]) == (1, 0, ["c"])
    ahead = compare_with_replay(url, example_bundle(), steps, {"c": 4})
    assert (ahead["lost"], ahead["duplicated"], ahead["differ"]) == (0, 1, ["c"])
    same = compare_with_replay(url, example_bundle(), steps, {"c": 5})
    assert (same["lost"], same["duplicated"], same["differ"]) == (0, 0, [])
    assert not soak_ok({**same, "errors_surfaced": 1, "workers": 1, "worker_exit_codes": [0]})


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
