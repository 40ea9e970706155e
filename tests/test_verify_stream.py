"""Streaming verify: the long-scenario generator, digests, and the sparse restarts."""

from __future__ import annotations

import json
from pathlib import Path

from prefixlock.bench.scenarios import long_scenario, write_long_scenario
from prefixlock.cli.commands import main
from prefixlock.review.replay import (
    RESTART_EVERY_STEP,
    iter_replay,
    replay_bodies,
    replay_digests,
    sparse_restarts,
)
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import verify_scenario


def test_long_scenario_makes_exactly_the_calls_asked_for(tmp_path: Path) -> None:
    scenario = load_scenario(write_long_scenario(tmp_path, 40))
    assert sum(1 for _ in iter_replay(scenario)) == 40
    assert long_scenario(40) == long_scenario(40)  # seeded


def test_streaming_verify_of_a_long_scenario_holds(tmp_path: Path) -> None:
    scenario = load_scenario(write_long_scenario(tmp_path, 30))
    rows, failures = verify_scenario(scenario, ["anthropic", "bedrock-converse"])
    assert failures == []
    assert [row.calls for row in rows] == [30, 30]


def test_digests_are_those_of_the_bodies(tmp_path: Path) -> None:
    import hashlib

    scenario = load_scenario(write_long_scenario(tmp_path, 12))
    bodies = replay_bodies(scenario, ["openai-chat"])["openai-chat"]
    digests = replay_digests(scenario, ["openai-chat"])["openai-chat"]
    assert digests == [hashlib.sha256(b).hexdigest() for b in bodies]


def test_replay_writes_digests(tmp_path: Path) -> None:
    path = write_long_scenario(tmp_path, 8)
    out = tmp_path / "digests.json"
    assert main(["replay", str(path), "--provider", "gemini", "--digests", str(out)]) == 0
    assert len(json.loads(out.read_text())["gemini"]) == 8


def test_sparse_restarts_are_everywhere_in_short_scenarios_and_geometric_after() -> None:
    due = sparse_restarts()
    picked = [i for i in range(4 * RESTART_EVERY_STEP) if due(i)]
    assert picked[:RESTART_EVERY_STEP] == list(range(RESTART_EVERY_STEP))
    later = picked[RESTART_EVERY_STEP:]
    assert len(later) < 20
    assert all(
        b - a >= a // 8 for a, b in zip(picked[RESTART_EVERY_STEP - 1 :], later, strict=False)
    )


def test_generated_turn_times_never_go_back() -> None:
    """One minute per call from 09:00: past 720 turns the clock crosses midnight into the
    next day instead of wrapping (the cache simulation refuses time going back)."""
    stamps = [s["user"]["timestamp"] for s in long_scenario(3000)["steps"] if "user" in s]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert stamps[-1].startswith("2026-03-20T")
