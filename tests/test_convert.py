"""prefixlock convert: Claude Code and Codex transcripts as scenarios and observed usage."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from convert_fixtures import (
    PNG,
    SECRET,
    ClaudeSession,
    claude_long,
    claude_small,
    codex_resumed,
    codex_small,
)
from prefixlock.cache.prices import PRICE_TABLE
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
        "switch",  # to the transcript's model (test_convert_switch.py)
        "user",
        "assistant",
        "tool_results",
        "assistant",
        "user",
        "assistant",
        "note",
        "compact",
        "user",
        "assistant",
    ]
    steps = c.scenario["steps"][1:]
    assert steps[0] == {
        "user": {
            "event": "u1",
            "query": "Add a PDF export for invoices.",
            "timestamp": "2026-03-06T10:00:07.000Z",
        }
    }
    # the split reply (thinking, text, tool_use) is one assistant step; its thinking
    # block a thinking part with the signature; Glob -> glob_search
    assert steps[1] == {
        "assistant": {
            "thinking": [{"provider": "anthropic", "text": "look first", "signature": "sig=="}],
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
            "query": "Also add a CSV export.\n[image]",
            "timestamp": "2026-03-06T10:00:56.000Z",
            "images": [{"media_type": "image/png", "data": PNG}],
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
    # redacted thinking is kept as its data; an unsigned block cannot be sent back
    assert steps[5] == {
        "assistant": {
            "thinking": [{"provider": "anthropic", "redacted": "EmwKAhgBEgy"}],
            "text": "Both done.",
        }
    }
    assert counts["thinking_parts"] == 2
    # an inline image goes with the prompt; a URL one and a tool result's are placeholders
    assert counts["images"] == 1
    assert counts["images_as_placeholders"] == 1
    assert counts["tool_result_images_as_placeholders"] == 1
    assert {
        "where": f"{DATA / 'claude-small.jsonl'}:17",
        "what": "a thinking block without its signature",
        "why": "only a signed block can be sent back",
    } in c.report["dropped"]
    assert counts["queries_with_tool_results"] == 1
    assert counts["tools_by_fallback"] == 1
    whys = [d["what"] for d in c.report["dropped"]]
    assert whys[:2] == ["a 'summary' record", "a 'file-history-snapshot' record"]
    assert steps[6] == {
        "note": {"event": "n1", "text": "Caveat: the messages below were generated by the user"}
    }
    assert "an assistant reply" in whys


def test_codex_maps_calls_usage_and_compaction() -> None:
    c = convert("codex", DATA / "codex-small.jsonl")
    assert _steps(c) == [
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
    # a reasoning item with encrypted_content is a thinking part; one without is reported
    assert c.scenario["steps"][4] == {
        "assistant": {
            "thinking": [
                {
                    "provider": "openai-responses",
                    "summary": ["**Counting**"],
                    "signature": "gAAAAABpEnc1",
                }
            ],
            "text": "Two invoices.",
        }
    }
    where = str(DATA / "codex-small.jsonl")
    assert {
        "where": f"{where}:6",
        "what": "a reasoning item without encrypted_content",
        "why": "only its encrypted content can be sent back: no item ids are sent",
    } in c.report["dropped"]
    # turn_context.model: a change is a switch step before the call (counted)
    assert c.usage["calls"][2]["model"] == "gpt-5"
    assert c.report["counts"]["model_switches"] == 1
    assert c.scenario["steps"][6] == {"switch": {"provider": "openai-responses", "model": "gpt-5"}}


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
    assert [row["step"] for row in value["calls"]] == [1, 3, 5, 9]  # after the switch
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
        "switch",  # the sub-agent's model: claude-haiku-4-5
        "user",
        "assistant",
        "tool_results",
        "assistant",
    ]
    assert side.scenario["steps"][0]["switch"] == {
        "provider": "anthropic",
        "model": "claude-haiku-4-5",
    }
    assert side.scenario["conversation"] == f"sess-long:{agents[0]}"
    assert [call["observed"]["cache_read_tokens"] for call in side.usage["calls"]] == [100, 200]
    _, failures = verify_scenario(load_scenario(written[2]), ["anthropic"])
    assert failures == []


def test_a_tool_map_file_overrides_the_defaults(tmp_path: Path) -> None:
    tools = tmp_path / "tools.yaml"
    tools.write_text("tools: {Glob: list_dir}\nfallback: web_search\n")
    c = convert("claude-code", DATA / "claude-small.jsonl", tools=tools)
    names = [
        call["name"]
        for step in c.scenario["steps"]
        if "assistant" in step
        for call in step["assistant"].get("tool_calls", [])
    ]
    assert names == ["list_dir", "web_search"]


def test_a_bad_tool_map_is_an_error(tmp_path: Path) -> None:
    tools = tmp_path / "tools.yaml"
    tools.write_text("tools: {Glob: 3}\n")
    with pytest.raises(SpecErrors) as caught:
        convert("claude-code", DATA / "claude-small.jsonl", tools=tools)
    assert str(caught.value) == (
        f"{tools}:1:8: $.tools: expected a mapping of tool name to bundle tool name"
    )


def test_a_bad_timestamp_is_reported(tmp_path: Path) -> None:
    lines = claude_small().splitlines()
    lines[2] = lines[2].replace("2026-03-06T10:00:07.000Z", "yesterday")
    lines[-1] = lines[-1].replace("claude-sonnet-4-5", "claude-opus-4-1")
    lines[-2] = lines[-2].replace("claude-sonnet-4-5", "claude-opus-4-1")
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    c = convert("claude-code", path)
    dropped = {(d["where"], d["what"]): d["why"] for d in c.report["dropped"]}
    assert dropped[(f"{path}:3", "the timestamp")] == (
        "'yesterday' is not an RFC 3339 timestamp like 2026-12-02T10:00:00Z"
    )
    # the model change is a switch step (test_convert_switch.py), no longer reported
    assert not [what for _, what in dropped if "switch" in what]
    assert "timestamp" not in c.scenario["steps"][1]["user"]


def test_verify_observed_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prefixlock.cli.commands import main

    out = tmp_path / "s.yaml"
    assert (
        main(["convert", "claude-code", str(DATA / "claude-small.jsonl"), "--out", str(out)]) == 0
    )
    capsys.readouterr()
    assert main(["verify", str(out), "--observed", str(tmp_path / "s.usage.json")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{out}: anthropic claude-sonnet-4-5"  # the transcript's model
    assert lines[1] == " call  step  sim cached obs cached    sim cost   obs cost"
    # the observed side comes from the transcript's tokens, priced at the model the call
    # went to (a switch step to the transcript's claude-sonnet-4-5, which reads at 0.1x)
    # by the transcript's own split of the writes (observed.py): 5-minute writes 1.25x,
    # one-hour writes 2x, although the example's cache_ttl auto ends calls 3 and 4 with
    # a one-hour marker in the simulation. Call 1: 12 + 2000 x 1.25 + 1000 x 2; call 2:
    # 12 + 3000 x 0.1 + 200 x 1.25; call 3: 12 + 3200 x 0.1 + 100 x 1.25; call 4: 12 +
    # 500 x 0.1 + 20 x 1.25
    observed = [(row[:11], row[24:34], row[-10:]) for row in lines[2:6]]
    assert observed == [
        ("    1     1", "      0.0%", "      4512"),
        ("    2     3", "     93.4%", "       562"),
        ("    3     5", "     96.6%", "       457"),
        ("    4     9", "     94.0%", "        87"),
    ]
    assert lines[6][:11] == "      total"
    assert lines[6][24:34] == "     66.5%" and lines[6][-10:] == "      5618"
    # in dollars at claude-sonnet-4-5's list price, $3 per million: 5618 x 3 / 10^6
    assert lines[7][:11] == "  total USD" and lines[7][-10:] == f"{5618 * 3 / 1e6:>10.4f}"
    assert lines[8:] == [
        "4 of 4 calls observed; totals over those; costs in base input-token units at the "
        "cache prices of each call's provider and model",
        f"USD at {PRICE_TABLE}",
    ]


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_codex_rollouts_replay_with_every_invariant(tmp_path: Path, seed: int) -> None:
    from convert_fixtures import codex_long

    path = tmp_path / "rollout-x.jsonl"
    path.write_text(codex_long(seed))
    c = convert("codex", path)
    assert c.report["counts"]["compactions"] == 1
    assert c.report["counts"]["observed_calls"] == c.report["counts"]["model_calls"]
    out = write_converted(c, tmp_path / "s.yaml")[0]
    _, failures = verify_scenario(load_scenario(out), ["openai-responses"])
    assert failures == []
    assert convert("codex", path).scenario_bytes() == out.read_bytes()


def test_a_sub_agent_file_is_converted_as_the_scenario(tmp_path: Path) -> None:
    whole = tmp_path / "session.jsonl"
    whole.write_text(claude_long(7, turns=20))
    side = [line for line in whole.read_text().splitlines() if '"agentId":"agent1"' in line]
    path = tmp_path / "agent-agent1.jsonl"
    path.write_text("\n".join(side) + "\n")
    c = convert("claude-code", path)
    assert c.sidechains == ()
    assert c.report["counts"]["sidechain agent1 as the scenario"] == 1
    expected = convert("claude-code", whole).sidechains[0][1]
    assert c.scenario["steps"] == expected.scenario["steps"]


def test_codex_rollback_replacement_history_and_resume(tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    path.write_text(codex_resumed())
    c = convert("codex", path)
    steps = c.scenario["steps"]
    # the rolled-back turn ("Now delete it.") is gone; its billed call kept beside
    assert [next(iter(s)) for s in steps] == [
        "switch",
        "user",
        "assistant",
        "user",
        "assistant",
        "compact",
        "user",
        "assistant",
    ]
    assert [s["user"]["query"] for s in steps if "user" in s] == [
        "Rename the module.",
        "Now add a test.",
        "Thanks.",
    ]
    assert c.report["counts"]["rewound_turns"] == 1
    assert c.report["counts"]["rewound_billed_calls"] == 1
    assert [u["line"] for u in c.usage["unmatched"]] == [7]  # the rolled-back request
    assert len(c.usage["calls"]) == 3
    # a remote compaction (message empty): the replacement history's texts are the
    # summary; its context message is rebuilt, its encrypted item reported
    assert steps[5] == {"compact": {"summary": "Rename the module.\n\nNow add a test."}}
    assert c.report["dropped"] == [
        {
            "where": f"{path}:15",
            "what": "a 'compaction' item of the replacement history",
            "why": "only its messages' texts become the summary",
        }
    ]
    assert c.scenario["conversation"] == "cx-resumed"
    assert c.report["counts"]["session_meta_again"] == 1
    out = write_converted(c, tmp_path / "s.yaml")[0]
    _, failures = verify_scenario(load_scenario(out), ["openai-responses"])
    assert failures == []


def test_codex_images_and_claude_interleaved_thinking(tmp_path: Path) -> None:
    """A Codex prompt's data-URL image is the turn's image (an http one reported); a
    Claude Code reply's thinking after its text is moved first, counted."""
    rollout = tmp_path / "r.jsonl"
    content = [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
        {"type": "input_image", "image_url": "https://example.com/a.png"},
    ]
    lines = [
        {"timestamp": "2026-03-06T10:00:00.000Z", "type": "session_meta", "payload": {"id": "c"}},
        {
            "timestamp": "2026-03-06T10:00:01.000Z",
            "type": "response_item",
            "payload": {"type": "message", "role": "user", "content": content},
        },
    ]
    rollout.write_text("".join(json.dumps(line) + "\n" for line in lines))
    c = convert("codex", rollout)
    assert c.scenario["steps"][0]["user"]["images"] == [{"media_type": "image/png", "data": PNG}]
    assert c.report["dropped"] == [
        {"where": f"{rollout}:2", "what": "an image", "why": "not a base64 data URL"}
    ]
    session = tmp_path / "s.jsonl"
    s = ClaudeSession()
    s.user("Go.")
    thinking = {"type": "thinking", "thinking": "then this", "signature": "c2ln"}
    s.assistant("msg_1", [{"type": "text", "text": "First."}, thinking], read=0, write=10)
    session.write_text(s.text())
    c = convert("claude-code", session)
    assert c.scenario["steps"][2] == {
        "assistant": {
            "thinking": [{"provider": "anthropic", "text": "then this", "signature": "c2ln"}],
            "text": "First.",
        }
    }
    assert c.report["counts"]["thinking_moved_before_text_or_calls"] == 1


def test_observed_writes_are_priced_by_their_own_ttl(tmp_path: Path) -> None:
    """The observed side prices each observed write at the provider's price for the TTL
    the transcript says it had (Anthropic: 5 minutes 1.25x, one hour 2x; reads at 0.1x,
    the price of claude-sonnet-4-5, the transcript's model, which the converter's switch
    step sends the calls to), whatever markers the simulated call used: the example's
    ``cache_ttl: auto`` ends calls 3 and 4 with a one-hour marker (their simulated writes
    cost 2x), yet 5-minute writes observed there cost 1.25x."""
    from prefixlock.review.observed import compare_observed

    out = write_converted(convert("claude-code", DATA / "claude-small.jsonl"), tmp_path / "s.yaml")[
        0
    ]
    usage = json.loads((tmp_path / "s.usage.json").read_text())
    rows = [
        (12, 0, 2000, 1000),  # call 1: 12 + 2000 x 1.25 + 1000 x 2 = 4512
        (12, 3000, 200, 0),  # call 2: 12 + 3000 x 0.1 + 200 x 1.25 = 562
        (12, 3200, 100, 0),  # call 3: 12 + 3200 x 0.1 + 100 x 1.25 = 457
        (12, 500, 0, 20),  # call 4: 12 + 500 x 0.1 + 20 x 2 = 102
    ]
    for row, (uncached, read, five, hour) in zip(usage["calls"], rows, strict=True):
        row["observed"] = {
            "uncached_tokens": uncached,
            "cache_read_tokens": read,
            "cache_write_5m_tokens": five,
            "cache_write_1h_tokens": hour,
            "output_tokens": 40,
        }
    path = tmp_path / "u.usage.json"
    path.write_text(json.dumps(usage))
    report = compare_observed(out, path)
    assert [row.observed.cost for row in report.rows if row.observed] == [
        Fraction(4512),
        Fraction(562),
        Fraction(457),
        Fraction(102),
    ]
    # the same tokens written for 5 minutes cost 1.25x on call 4, not its marker's 2x
    usage["calls"][3]["observed"]["cache_write_5m_tokens"] = 20
    usage["calls"][3]["observed"]["cache_write_1h_tokens"] = 0
    path.write_text(json.dumps(usage))
    row4 = compare_observed(out, path).rows[3].observed
    assert row4 is not None and row4.cost == Fraction(12) + Fraction(50) + Fraction(25)
