"""prefixlock convert and verify --observed: the model a transcript's calls used (switch
steps), and observed usage that a real cache could have billed."""

from __future__ import annotations

import shutil
from pathlib import Path

from convert_fixtures import FIVE_MINUTES, claude_long
from prefixlock.core.timestamps import seconds
from prefixlock.review.convert import convert, write_converted
from prefixlock.review.observed import compare_observed

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
