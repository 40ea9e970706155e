"""Scenario forms for faithful import: tool results with timestamps, a user turn that
also answers the pending calls (results first, then the query, in one model call)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixlock.core.errors import SpecErrors
from prefixlock.review.replay import replay, replay_bodies
from prefixlock.review.scenario import ToolResultsStep, UserStep, load_scenario
from prefixlock.review.verify import call_time, verify_scenario

HEAD = """name: t
conversation: c1
steps:
  - user: {event: u1, query: hi, timestamp: "2026-03-06T10:00:00Z"}
  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: {path: a}}]}
"""


def _write(tmp_path: Path, tail: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + tail)
    return path


def test_tool_results_timestamp_dates_the_call(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '  - tool_results: [{call_id: c1, output: ok, timestamp: "2026-03-06T10:09:00Z"}]\n',
    )
    scenario = load_scenario(path)
    step = scenario.steps[2]
    assert isinstance(step, ToolResultsStep) and step.timestamp == "2026-03-06T10:09:00Z"
    calls = replay(scenario)
    assert [call_time(scenario, c) for c in calls] == [1772791200.0, 1772791740.0]


def test_tool_results_timestamp_may_not_go_back(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        '  - tool_results: [{call_id: c1, output: ok, timestamp: "2026-03-06T09:59:00Z"}]\n',
    )
    with pytest.raises(SpecErrors) as caught:
        load_scenario(path)
    assert str(caught.value) == (
        f"{path}:6:57: $.steps[2].tool_results[0].timestamp: timestamp 2026-03-06T09:59:00Z "
        "is earlier than the turn's before it (2026-03-06T10:00:00Z, $.steps[0].user): "
        "a scenario's times must not go back"
    )


def test_user_turn_answers_pending_calls_in_one_call(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "  - user: {event: u2, query: next, tool_results: "
        "[{call_id: c1, output: stopped, is_error: true}]}\n",
    )
    scenario = load_scenario(path)
    step = scenario.steps[2]
    assert isinstance(step, UserStep) and [r.call_id for r in step.results] == ["c1"]
    assert len(replay(scenario)) == 2
    body = json.loads(replay_bodies(scenario, ["anthropic"])["anthropic"][1])
    last = body["messages"][-2:]
    assert last[0] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "stopped", "is_error": True}
        ],
    }
    assert last[1]["role"] == "user" and "next" in last[1]["content"][-1]["text"]
    rows, failures = verify_scenario(scenario, ["anthropic", "openai-responses", "gemini"])
    assert failures == [] and all(r.prefix_stable for r in rows)


def test_user_turn_must_answer_every_pending_call(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "  - user: {event: u2, query: next, tool_results: [{call_id: c9, output: x}]}\n",
    )
    with pytest.raises(SpecErrors) as caught:
        load_scenario(path)
    assert str(caught.value).splitlines() == [
        f"{path}:6:36: $.steps[2].user.tool_results: tool results must answer every "
        "pending call; missing: c1",
        f"{path}:6:61: $.steps[2].user.tool_results[0].call_id: tool result for unknown "
        "call id 'c9' (pending calls: c1)",
    ]


NOTE = """name: t
conversation: c1
steps:
  - user: {event: u1, query: hi, timestamp: "2026-03-06T10:00:00Z"}
  - assistant: {text: ok}
  - note: {event: n1, text: "file a.py changed on disk"}
  - user: {event: u2, query: next}
  - assistant: {text: done}
"""


def test_a_note_goes_with_the_next_call_and_makes_none(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(NOTE)
    scenario = load_scenario(path)
    calls = replay(scenario)
    assert [(c.kind, c.event) for c in calls] == [("user", "u1"), ("user", "u2")]
    assert [m.id for m in calls[1].request.messages] == [
        "request-context:u1",
        "runtime:u1",
        "assistant:1",
        "event:n1",
        "runtime:u2",
    ]
    rows, failures = verify_scenario(scenario, ["anthropic", "openai-chat", "bedrock-converse"])
    assert failures == [] and all(r.prefix_stable for r in rows)


@pytest.mark.parametrize(
    "steps,message",
    [
        (
            "  - user: {event: u1, query: hi}\n  - note: {event: n1, text: x}\n",
            "5:5: $.steps[1].note: note while a model call awaits its reply (a note goes "
            "with the next call)",
        ),
        (
            "  - note: {event: n1, text: x}\n  - user: {event: u1, query: hi}\n",
            "4:5: $.steps[0].note: note before any user turn",
        ),
        (
            "  - user: {event: u1, query: hi}\n  - assistant: {text: ok}\n"
            "  - note: {event: n1, text: x}\n  - retry: n1\n",
            "7:5: $.steps[3].retry: retry of note 'n1': a note makes no model call",
        ),
    ],
)
def test_note_rules(tmp_path: Path, steps: str, message: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("name: t\nconversation: c1\nsteps:\n" + steps)
    with pytest.raises(SpecErrors) as caught:
        load_scenario(path)
    assert str(caught.value) == f"{path}:{message}"
