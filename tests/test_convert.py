"""prefixlock convert: Claude Code and Codex transcripts as scenarios and observed usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from convert_fixtures import SECRET, claude_long, claude_small, codex_small
from prefixlock.core.errors import SpecErrors
from prefixlock.review.convert import convert, usage_path, write_converted
from prefixlock.review.replay import replay
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import verify_scenario

DATA = Path(__file__).parent / "data" / "convert"


def _steps(converted: object) -> list[str]:
    return [next(iter(step)) for step in converted.scenario["steps"]]  # type: ignore[attr-defined]


def test_fixtures_are_the_generated_ones() -> None:
    assert (DATA / "claude-small.jsonl").read_text() == claude_small()
    assert (DATA / "codex-small.jsonl").read_text() == codex_small()


def test_claude_code_keeps_the_final_branch_and_reports_the_rest() -> None:
    c = convert("claude-code", DATA / "claude-small.jsonl")
    assert _steps(c) == [
        "user",
        "assistant",
        "tool_results",
        "assistant",
        "user",
        "assistant",
        "compact",
        "user",
        "assistant",
    ]
    steps = c.scenario["steps"]
    assert steps[0] == {
        "user": {
            "event": "u1",
            "query": "Add a PDF export for invoices.",
            "timestamp": "2026-03-06T10:00:07.000Z",
        }
    }
    # the split reply (thinking, text, tool_use) is one assistant step; Glob -> glob_search
    assert steps[1] == {
        "assistant": {
            "text": "Let me look.",
            "tool_calls": [
                {"arguments": {"pattern": "**/*.py"}, "id": "toolu_1", "name": "glob_search"}
            ],
        }
    }
    # the secret is redacted before anything is kept
    assert SECRET not in json.dumps(c.scenario)
    assert steps[2] == {
        "tool_results": [
            {
                "call_id": "toolu_1",
                "output": "shop/a.py\nshop/b.py\nexport KEY=[REDACTED]",
                "timestamp": "2026-03-06T10:00:35.000Z",
            }
        ]
    }
    # a query that travels with a tool result: one turn, the results first
    assert steps[4] == {
        "user": {
            "event": "u2",
            "query": "Also add a CSV export.",
            "timestamp": "2026-03-06T10:00:56.000Z",
            "tool_results": [
                {
                    "call_id": "toolu_2",
                    "output": "done\n[image]",
                    "timestamp": "2026-03-06T10:00:56.000Z",
                }
            ],
        }
    }
    # the first reply's usage, the 5m/1h split of the writes
    assert c.usage["calls"][0]["observed"] == {
        "input_tokens": 3012,
        "uncached_tokens": 12,
        "cache_read_tokens": 0,
        "cache_write_5m_tokens": 2000,
        "cache_write_1h_tokens": 1000,
        "output_tokens": 40,
    }
    assert all(call["observed"] is not None for call in c.usage["calls"])
    # an unknown tool goes to the documented fallback
    assert steps[3]["assistant"]["tool_calls"][0]["name"] == "run_terminal_command"
    counts = c.report["counts"]
    assert counts["rewound_billed_calls"] == 1 and counts["rewound_records"] == 2
    assert counts["sidechain a1b2 billed calls"] == 1
    assert counts["rewritten_records"] == 1
    assert counts["out_of_order_timestamps"] == 1
    assert counts["thinking_blocks_dropped"] == 1
    assert counts["queries_with_tool_results"] == 1
    assert counts["tools_by_fallback"] == 1
    whys = [d["what"] for d in c.report["dropped"]]
    assert whys[:2] == ["a 'summary' record", "a 'file-history-snapshot' record"]
    assert "a meta user record" in whys


def test_codex_maps_calls_usage_and_compaction() -> None:
    c = convert("codex", DATA / "codex-small.jsonl")
    assert _steps(c) == [
        "user",
        "assistant",
        "tool_results",
        "assistant",
        "compact",
        "user",
        "assistant",
    ]
    assert c.scenario["base"]["context"]["git"] == {
        "branch": "main",
        "dirty": False,
        "head": "5d1e7a0",
    }
    rows = [call["observed"] for call in c.usage["calls"]]
    assert rows[0] == {
        "input_tokens": 4000,
        "uncached_tokens": 928,
        "cache_read_tokens": 3072,
        "cache_write_5m_tokens": 0,
        "cache_write_1h_tokens": 0,
        "output_tokens": 30,
    }
    assert [r["cache_read_tokens"] for r in rows] == [3072, 3968, 0]


@pytest.mark.parametrize(
    "source,name", [("claude-code", "claude-small.jsonl"), ("codex", "codex-small.jsonl")]
)
def test_import_replays_with_every_invariant(tmp_path: Path, source: str, name: str) -> None:
    c = convert(source, DATA / name)
    out, usage = write_converted(c, tmp_path / "s.yaml")[:2]
    assert usage == tmp_path / "s.usage.json"
    again = convert(source, DATA / name)
    assert again.scenario_bytes() == out.read_bytes()  # re-import: byte for byte
    assert again.usage_bytes() == usage.read_bytes()
    scenario = load_scenario(out)
    calls = replay(scenario)
    assert len(calls) == len(c.usage["calls"])
    rows, failures = verify_scenario(scenario, ["anthropic", "openai-responses"])
    assert failures == []
    assert all(row.prefix_stable for row in rows)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_long_sessions_replay_with_every_invariant(tmp_path: Path, seed: int) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(claude_long(seed, turns=20))
    c = convert("claude-code", path)
    assert c.report["counts"]["compactions"] == 1
    out = write_converted(c, tmp_path / "s.yaml")[0]
    _, failures = verify_scenario(load_scenario(out), ["anthropic"])
    assert failures == []
    assert convert("claude-code", path).scenario_bytes() == out.read_bytes()


def test_a_truncated_line_is_an_error_and_nothing_is_written(tmp_path: Path) -> None:
    text = claude_small().splitlines()
    text[4] = text[4][:30]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(text) + "\n[1]\n")
    with pytest.raises(SpecErrors) as caught:
        convert("claude-code", path)
    assert str(caught.value).splitlines() == [
        f"{path}:5: not a JSON line (Unterminated string starting at); a truncated or "
        "malformed transcript line: nothing was written",
        f"{path}:{len(text) + 1}: expected a JSON object, got list: nothing was written",
    ]
    assert list(tmp_path.iterdir()) == [path]


def test_usage_path_is_beside_the_scenario() -> None:
    assert usage_path(Path("a/s.yaml")) == Path("a/s.usage.json")


def test_cli_convert_then_verify_observed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefixlock.cli.commands import main

    out = tmp_path / "s.yaml"
    code = main(["convert", "claude-code", str(DATA / "claude-small.jsonl"), "--out", str(out)])
    assert code == 0
    assert (
        capsys.readouterr().out.splitlines()[-1] == f"wrote {out} and {tmp_path / 's.usage.json'}"
    )
    code = main(["verify", str(out), "--observed", str(tmp_path / "s.usage.json"), "--json"])
    assert code == 0
    value = json.loads(capsys.readouterr().out)
    assert value["format"] == "prefixlock.verify-observed/1"
    assert [row["call"] for row in value["calls"]] == [1, 2, 3, 4]
    assert [row["step"] for row in value["calls"]] == [0, 2, 4, 7]
    assert value["calls"][0]["observed"] == {
        "cache_read_tokens": 0,
        "cache_write_tokens": 3000,
        "cached_share": 0.0,
        "cost": 4512.0,
        "input_tokens": 3012,
    }
    assert value["totals"]["observed"]["input_tokens"] == sum(
        row["observed"]["input_tokens"] for row in value["calls"] if row["observed"]
    )


def test_cli_convert_bad_line_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefixlock.cli.commands import main

    path = tmp_path / "t.jsonl"
    path.write_text('{"type":"user"}\n{"type":\n')
    code = main(["convert", "codex", str(path), "--out", str(tmp_path / "s.yaml")])
    assert code == 2
    assert f"{path}:2: not a JSON line" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.jsonl"]


def test_sub_agents_are_their_own_scenarios(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    path.write_text(claude_long(7, turns=20))
    c = convert("claude-code", path)
    agents = [agent for agent, _ in c.sidechains]
    assert agents and all(agent.startswith("agent") for agent in agents)
    written = write_converted(c, tmp_path / "s.yaml")
    assert written[:2] == [tmp_path / "s.yaml", tmp_path / "s.usage.json"]
    assert written[2:4] == [
        tmp_path / f"s.agent-{agents[0]}.yaml",
        tmp_path / f"s.agent-{agents[0]}.usage.json",
    ]
    side = c.sidechains[0][1]
    assert [next(iter(step)) for step in side.scenario["steps"]] == [
        "user",
        "assistant",
        "tool_results",
        "assistant",
    ]
    assert side.scenario["conversation"] == f"sess-long:{agents[0]}"
    assert [call["observed"]["cache_read_tokens"] for call in side.usage["calls"]] == [100, 200]
    _, failures = verify_scenario(load_scenario(written[2]), ["anthropic"])
    assert failures == []
