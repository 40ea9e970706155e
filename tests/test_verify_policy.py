"""``prefixlock verify --policy`` (issue 45, item 5): each cache policy priced on the
user's own scenarios, with their timestamps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prefixlock.cli import main
from prefixlock.review.policies import parse_policies, scenario_calls
from prefixlock.review.scenario import load_scenario

ROOT = Path(__file__).resolve().parent.parent
CASE = ROOT / "golden" / "changed-context"


def test_the_table_has_a_row_per_provider_and_policy(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["verify", str(CASE), "--provider", "anthropic", "--provider", "gemini"]
    assert main([*args, "--policy", "5m,auto,keepalive", "--no-hash-seed"]) == 0
    out = capsys.readouterr().out.splitlines()
    start = out.index(
        "cache policies: cost vs uncached / vs perfect cache / vs offline optimum / vs naive "
        "harness (keep-alives)"
    )
    rows = out[start + 1 : start + 5]
    labels = [re.split(r"\s{2,}", row.strip())[:3] for row in rows]
    # gemini has no TTL setting: its only policy of these is the keep-alive
    assert labels == [
        ["changed-context", "anthropic", "5m"],
        ["changed-context", "anthropic", "auto"],
        ["changed-context", "anthropic", "keepalive"],
        ["changed-context", "gemini", "keepalive"],
    ]
    for row in rows:
        assert re.search(r"  (\d+\.\d\dx / ){3}\d+\.\d\dx  \(\d+\)$", row), row


def test_json_carries_the_rows(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["verify", str(CASE), "--provider", "anthropic", "--policy", "1h", "--json"]
    assert main([*args, "--no-hash-seed"]) == 0
    value = json.loads(capsys.readouterr().out)
    [row] = value["policies"]
    assert sorted(row) == [
        "calls",
        "keepalives",
        "policy",
        "provider",
        "scenario",
        "vs_bound",
        "vs_naive",
        "vs_oracle",
        "vs_uncached",
    ]
    assert (row["scenario"], row["provider"], row["policy"], row["calls"]) == (
        "changed-context",
        "anthropic",
        "1h",
        5,
    )


def test_an_unknown_policy_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(CASE), "--policy", "5m,2h"]) == 2
    assert (
        "--policy: unknown policy '2h' (known: configured, 5m, 1h, auto, keepalive, "
        "auto+keepalive)" in capsys.readouterr().err
    )
    assert parse_policies("5m, keepalive") == ("5m", "keepalive")


def test_scenario_calls_take_the_timestamps_from_the_first() -> None:
    calls = scenario_calls(load_scenario(CASE / "scenario.yaml"))
    times = [c.at for c in calls]
    assert times[0] == 0.0 and times == sorted(times)
    assert len(set(times)) == 2  # two user turns; tool results come with their turn
