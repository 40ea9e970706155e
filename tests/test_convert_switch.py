"""prefixlock convert and verify --observed: the model a transcript's calls used (switch
steps), and observed usage that a real cache could have billed."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

from convert_fixtures import FIVE_MINUTES, claude_long, claude_small, codex_small
from prefixlock.core.timestamps import seconds
from prefixlock.review.convert import convert, write_converted
from prefixlock.review.observed import compare_observed
from prefixlock.review.replay import replay, serialize_calls
from prefixlock.review.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]


def _five_minute_bundle(root: Path) -> Path:
    """The example bundle with Anthropic's cache_ttl 5m (every entry lives 5 minutes)."""
    shutil.copytree(REPO / "prompt", root / "prompt")
    shutil.copytree(REPO / "rules", root / "rules")
    providers = root / "rules" / "providers.yaml"
    text = providers.read_text(encoding="utf-8")
    assert "cache_ttl: auto" in text
    providers.write_text(text.replace("cache_ttl: auto", "cache_ttl: 5m", 1), encoding="utf-8")
    return root


def test_the_long_sessions_usage_reads_nothing_after_five_idle_minutes(tmp_path: Path) -> None:
    """The demo discrepancy (issue 48): call 42 of the 60-turn session came 11 minutes
    after call 41, yet the generated transcript billed a cache read of every token
    written before (78.6%), all of it written with five-minute entries: a bill no API
    sends. The simulation (0% under five-minute entries) was right; the fixture now bills
    what the API would, and both sides agree on every cold call."""
    bundle = _five_minute_bundle(tmp_path / "spec")
    path = tmp_path / "session.jsonl"
    path.write_text(claude_long(7, turns=60))
    out = write_converted(convert("claude-code", path), bundle / "run" / "s.yaml")
    usage = convert("claude-code", path).usage["calls"]
    times = [seconds(row["timestamp"]) for row in usage]
    cold = [
        index + 1
        for index in range(1, len(times))
        if times[index] - times[index - 1] > FIVE_MINUTES
    ]
    assert 42 in cold and times[41] - times[40] == 660  # 12:01:39 -> 12:12:39
    assert all(row["observed"]["cache_write_1h_tokens"] == 0 for row in usage if row["observed"])
    report = compare_observed(out[0], out[1])
    for row in report.rows:
        if row.call in cold:  # (a call the transcript billed nothing for has no row)
            assert row.observed is None or row.observed.cache_read_tokens == 0, row.call
            assert row.simulated.cache_read_tokens == 0, row.call
    assert [(r.call, r.observed.cache_read_tokens if r.observed else None) for r in report.rows][
        41
    ] == (42, 0)


def _claude_small_ending_on(tmp_path: Path, model: str) -> Path:
    """claude_small whose last reply (and its resumed copy) came from ``model``."""
    lines = claude_small().splitlines()
    lines[-1] = lines[-1].replace("claude-sonnet-4-5", model)
    lines[-2] = lines[-2].replace("claude-sonnet-4-5", model)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_claude_code_model_changes_are_switch_steps(tmp_path: Path) -> None:
    path = _claude_small_ending_on(tmp_path, "claude-opus-4-1")
    c = convert("claude-code", path)
    steps = c.scenario["steps"]
    switches = [(i, s["switch"]) for i, s in enumerate(steps) if "switch" in s]
    assert switches == [
        (0, {"provider": "anthropic", "model": "claude-sonnet-4-5"}),
        (9, {"provider": "anthropic", "model": "claude-opus-4-1"}),
    ]
    assert next(iter(steps[10])) == "user" and steps[10]["user"]["query"] == "Ship it."
    assert [(call["step"], call["model"]) for call in c.usage["calls"]] == [
        (1, "claude-sonnet-4-5"),
        (3, "claude-sonnet-4-5"),
        (5, "claude-sonnet-4-5"),
        (10, "claude-opus-4-1"),
    ]
    assert c.report["counts"]["model_switches"] == 1
    assert not [d for d in c.report["dropped"] if "switch" in d["what"]]
    out = write_converted(c, tmp_path / "s.yaml")[0]
    calls = replay(load_scenario(out))
    assert [call.step for call in calls] == [1, 3, 5, 10]
    bodies = serialize_calls(calls, ["anthropic", "openai-responses"])
    assert [json.loads(b)["model"] for b in bodies["anthropic"]] == [
        "claude-sonnet-4-5",
        "claude-sonnet-4-5",
        "claude-sonnet-4-5",
        "claude-opus-4-1",
    ]
    # the transcript's provider only: another provider's replay keeps its model
    assert {json.loads(b)["model"] for b in bodies["openai-responses"]} == {"gpt-5.6-sol"}


def test_codex_turn_context_model_changes_are_switch_steps(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(codex_small())
    c = convert("codex", path)
    steps = c.scenario["steps"]
    assert [next(iter(s)) for s in steps] == [
        "switch",
        "user",
        "assistant",
        "tool_results",
        "assistant",
        "compact",
        "switch",
        "user",
        "assistant",
    ]
    assert steps[0]["switch"] == {"provider": "openai-responses", "model": "gpt-5-codex"}
    assert steps[6]["switch"] == {"provider": "openai-responses", "model": "gpt-5"}
    assert [call["step"] for call in c.usage["calls"]] == [1, 3, 7]
    out = write_converted(c, tmp_path / "s.yaml")[0]
    bodies = serialize_calls(replay(load_scenario(out)), ["openai-responses"])
    assert [json.loads(b)["model"] for b in bodies["openai-responses"]] == [
        "gpt-5-codex",
        "gpt-5-codex",
        "gpt-5",
    ]


def test_verify_observed_prices_each_call_at_the_model_it_used(tmp_path: Path) -> None:
    """Calls 1-3 went to claude-sonnet-4-5 (cache reads at 0.1x its base input price),
    call 4 to claude-opus-5-5 (0.05x; compiler/cache/rules.py CLAUDE_READ_PRICES): each
    side of each call is priced at its own model, and the call after the switch starts
    in the new model's cache namespace (nothing read). Observed call 3: 12 uncached +
    3,200 read x 0.1 + 100 five-minute writes x 1.25 (the transcript's split)."""
    path = _claude_small_ending_on(tmp_path, "claude-opus-5-5")
    out, usage = write_converted(convert("claude-code", path), tmp_path / "s.yaml")[:2]
    report = compare_observed(out, usage)
    value = report.to_json()
    assert [row["model"] for row in value["calls"]] == [
        "claude-sonnet-4-5",
        "claude-sonnet-4-5",
        "claude-sonnet-4-5",
        "claude-opus-5-5",
    ]
    assert value["model"] == "claude-sonnet-4-5"
    observed = [row.observed for row in report.rows]
    five = Fraction(125, 100)
    assert observed[2] is not None and observed[2].cost == 12 + Fraction(3200, 10) + 100 * five
    assert observed[3] is not None and observed[3].cost == 12 + Fraction(500 * 5, 100) + 20 * five
    assert report.rows[3].simulated.cache_read_tokens == 0
    assert report.table()[0] == f"{out}: anthropic claude-sonnet-4-5 → claude-opus-5-5"
