"""``prefixlock bench`` times the runs' calls in lockstep: after every run's untimed
calls, one timed call of each run per round, ascending and descending length in
alternate rounds, so that a drift of the machine's speed shows in every run alike.

The order is asserted, never a time."""

from __future__ import annotations

import gc
import json
from collections.abc import Generator, Sequence
from typing import Any

import pytest
from prefixlock.bench import measure
from prefixlock.bench import run as bench
from prefixlock.runtime.conversation import Conversation


def _pass(name: str, untimed: int, timed: int, log: list[str]) -> Generator[None, None, str]:
    for index in range(untimed + timed):
        if index >= untimed:
            yield
        log.append(f"{name}{index}")
    if timed:
        yield
    log.append(f"{name}-after")
    return f"{name}-done"


def test_lockstep_plays_untimed_calls_first_then_one_timed_call_per_run_per_round() -> None:
    log: list[str] = []
    spent = [0, 0, 0]
    results = measure._lockstep(
        [_pass("a", 1, 3, log), _pass("b", 3, 3, log), _pass("c", 0, 3, log)], spent
    )
    assert results == ["a-done", "b-done", "c-done"]
    assert log == [
        # every run's untimed calls, one run after another
        *["a0", "b0", "b1", "b2"],
        # rounds: ascending, descending, ascending
        *["a1", "b3", "c0"],
        *["c1", "b4", "a2"],
        *["a3", "b5", "c2"],
        # the work after the timed calls comes in a round of its own
        *["c-after", "b-after", "a-after"],
    ]
    assert all(t > 0 for t in spent)


def test_lockstep_collects_garbage_after_the_untimed_calls_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log: list[str] = []
    monkeypatch.setattr(gc, "collect", lambda *a: log.append("gc") or 0)
    measure._lockstep([_pass("a", 2, 2, log), _pass("b", 1, 2, log)], [0, 0])
    assert log[: log.index("gc")] == ["a0", "a1", "b0"]
    assert log.count("gc") == 1


def test_a_pass_without_timed_calls_ends_in_its_first_step() -> None:
    log: list[str] = []
    assert measure._lockstep([_pass("a", 2, 0, log)], [0]) == ["a-done"]
    assert log == ["a0", "a1", "a-after"]


def test_the_bench_times_the_runs_calls_in_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    # Which run each played call belongs to, pass by pass: the handling, own-work,
    # serializing and fragments passes each play both conversations once.
    played: list[tuple[str, int]] = []
    real = measure.play

    def play(conv: Conversation, call: Any) -> Any:
        played.append((conv.id, conv.history.seq))
        return real(conv, call)

    monkeypatch.setattr(measure, "play", play)
    lengths, window = [20, 40], 10
    monkeypatch.setattr(bench, "warm_up", lambda *a: None)  # only the runs' calls
    report = bench.bench(lengths, ["anthropic"], seed=1)
    assert report["window"] == window
    assert [run["calls"] for run in report["runs"]] == lengths
    ids = [f"bench-{n}" for n in lengths]
    per_pass = sum(lengths)
    assert len(played) == 4 * per_pass
    for at in range(0, len(played), per_pass):
        runs = [cid for cid, _ in played[at : at + per_pass]]
        untimed = sum(n - window for n in lengths)
        # first each run's untimed calls, the shorter run first
        assert runs[:untimed] == [ids[0]] * (20 - window) + [ids[1]] * (40 - window)
        # then one timed call of each run per round, alternating the order
        rounds = [runs[i : i + 2] for i in range(untimed, per_pass, 2)]
        assert rounds == [ids if r % 2 == 0 else ids[::-1] for r in range(window)]


def test_each_durable_floor_append_gets_the_records_of_its_own_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The handling store is shared by the runs: the records it keeps for the floors
    # ("recent") are cleared after a pass's stop, never before, so no run's floor sample
    # holds another run's records (the last timed round once did). Both floors get the
    # same records, the store's SQL under the store's keys.
    appended: list[list[str]] = []
    keyed: list[list[tuple[str, int, str, bytes]]] = []

    class Floor(measure.DurableFloor):
        def append(self, records: Sequence[bytes]) -> None:
            appended.append([json.loads(r)["conversation"] for r in records])
            super().append(records)

    class Schema(measure.SchemaFloor):
        def append(self, records: Sequence[tuple[str, int, str, bytes]]) -> None:
            keyed.append(list(records))
            super().append(records)

    stored: list[tuple[str, int, str, bytes]] = []
    real = measure.SQLiteStore.append

    def append(self: Any, cid: str, seq: int, event_id: str, record: bytes) -> Any:
        if isinstance(self, measure.CountingStore):
            stored.append((cid, seq, event_id, record))
        return real(self, cid, seq, event_id, record)

    monkeypatch.setattr(measure, "DurableFloor", Floor)
    monkeypatch.setattr(measure, "SchemaFloor", Schema)
    monkeypatch.setattr(measure.SQLiteStore, "append", append)
    monkeypatch.setattr(bench, "warm_up", lambda *a: None)
    bench.bench([20, 40], ["anthropic"], seed=1)
    assert len(appended) == len(keyed) == 20 + 40  # one append per handled call
    assert all(len(set(cids)) == 1 for cids in appended if cids)
    assert all(len({a[0] for a in call}) == 1 for call in keyed if call)
    assert [a for call in keyed for a in call] == stored  # the same records, in order
    assert [len(call) for call in keyed] == [len(cids) for cids in appended]


def test_a_short_history_is_hydrated_more_times() -> None:
    # A 100-call conversation opens in milliseconds: five repeats could all fall into
    # one slow spell. Short histories get more, long ones the minimum.
    assert measure.hydration_repeats(0) == measure.HYDRATION_MAX_REPEATS
    assert measure.hydration_repeats(200) == 25  # about 100 calls
    assert measure.hydration_repeats(2_000) == 20  # about 1,000 calls
    assert measure.hydration_repeats(6_000) == 6  # about 3,000 calls
    assert measure.hydration_repeats(60_000) == measure.HYDRATION_REPEATS


def test_the_report_says_how_many_times_each_run_was_hydrated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench, "warm_up", lambda *a: None)
    report = bench.bench([20, 40], ["anthropic"], seed=1)
    for run in report["runs"]:
        assert run["hydration_repeats"] == measure.hydration_repeats(run["records"])
    assert report["runs"][0]["hydration_repeats"] == measure.HYDRATION_MAX_REPEATS
