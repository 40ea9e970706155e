"""Scenario files: the format, the merge rules, and every error with its exact message."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
from prefixlock.core import canonical
from prefixlock.core.errors import SpecErrors
from prefixlock.review.replay import replay
from prefixlock.review.scenario import (
    AssistantStep,
    BackgroundStep,
    CompactStep,
    RestartStep,
    RetryStep,
    ToolResultsStep,
    UserStep,
    load_scenario,
    merge_base,
)
from prefixlock.runtime.request import RequestKind
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.spec.build import build_bundle, find_example_root

REPO = Path(__file__).resolve().parents[1]

HEAD = """\
name: test
conversation: conv-1
"""


def note() -> str:
    """How an error names the bundle a scenario without ``bundle:`` ran against."""
    root = find_example_root()
    return f"(bundle: {root}, sha256:{build_bundle(root).digest[7:19]})"


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Scenario files are loaded by a relative path, so messages name ``s.yaml``."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(text: str, name: str = "s.yaml") -> Path:
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def errors(text: str, name: str = "s.yaml") -> list[str]:
    with pytest.raises(SpecErrors) as info:
        load_scenario(write(text, name))
    return [str(e) for e in info.value.errors]


# --------------------------------------------------------------------------- loading


def test_every_step_kind_loads(here: Path) -> None:
    scenario = load_scenario(
        write(
            HEAD
            + textwrap.dedent(
                """\
            steps:
              - user: {event: u1, query: Fix it, timestamp: "2026-03-02T09:00:00Z"}
              - assistant:
                  text: Reading.
                  tool_calls:
                    - {id: c1, name: read_file, arguments: {path: a.py}}
                    - {id: c2, name: list_dir, arguments: {path: .}}
              - tool_results:
                  - {call_id: c1, output: "x = 1"}
                  - {call_id: c2, output: "boom", is_error: true}
              - assistant: {text: Done.}
              - background: {event: b1, text: The build finished.}
              - retry: u1
              - restart: true
              - compact: {summary: We fixed a.py.}
            """
            )
        )
    )
    assert scenario.name == "test"
    assert scenario.conversation == "conv-1"
    assert scenario.file == "s.yaml"
    assert scenario.bundle_root == find_example_root()
    assert [type(s) for s in scenario.steps] == [
        UserStep,
        AssistantStep,
        ToolResultsStep,
        AssistantStep,
        BackgroundStep,
        RetryStep,
        RestartStep,
        CompactStep,
    ]
    user, calls, results, _, background, retry, restart, compact = scenario.steps
    assert isinstance(user, UserStep) and user.event == "u1"
    assert user.request.kind is RequestKind.USER
    assert user.request.conversation_id == "conv-1"
    assert user.request.timestamp == "2026-03-02T09:00:00Z"
    assert str(user.location) == "s.yaml:4:5"
    assert isinstance(calls, AssistantStep)
    assert calls.tool_calls == (
        ToolCall("c1", "read_file", {"path": "a.py"}),
        ToolCall("c2", "list_dir", {"path": "."}),
    )
    assert isinstance(results, ToolResultsStep)
    assert results.results == (ToolResult("c1", "x = 1"), ToolResult("c2", "boom", True))
    assert results.event == "tool-results:c1"
    assert isinstance(background, BackgroundStep)
    assert background.request.kind is RequestKind.BACKGROUND
    assert background.request.text == "The build finished."
    assert isinstance(retry, RetryStep) and retry.event == "u1"
    assert isinstance(restart, RestartStep)
    assert isinstance(compact, CompactStep) and compact.summary == "We fixed a.py."
    assert scenario.step_path(5) == "$.steps[5].retry"
    assert scenario.delivered_by("u1") == 0
    assert scenario.delivered_by("b1") == 4


def test_the_requests_of_a_scenario_share_their_context_texts(here: Path) -> None:
    """Every user step sends the base's context: the requests hold one text of it."""
    path = write(
        HEAD
        + "base:\n  mode: agent\n  context: {git: {branch: main, dirty: false, head: abc}}\n"
        + "steps:\n- user: {event: u1, query: one}\n- assistant: {text: ok}\n"
        + "- user: {event: u2, query: two}\n"
    )
    first, second = (s.request for s in load_scenario(path).steps if isinstance(s, UserStep))
    assert first.context == second.context == '{"git":{"branch":"main","dirty":false,"head":"abc"}}'
    assert first.context is second.context
    assert first.open_files is second.open_files


def test_automatic_compaction_is_part_of_the_request(here: Path) -> None:
    scenario = load_scenario(
        write(HEAD + "steps:\n  - user: {event: u1, query: q, compact: {summary: S}}\n")
    )
    step = scenario.steps[0]
    assert isinstance(step, UserStep)
    assert step.request.compact_summary == "S"


def test_bundle_is_relative_to_the_scenario_file(here: Path) -> None:
    path = REPO / "golden" / "context-revert" / "scenario.yaml"
    scenario = load_scenario(path)
    assert scenario.bundle_root == REPO
    assert [t.name for t in scenario.bundle.tools] == [
        t.name for t in load_scenario(REPO / "golden" / "retry" / "scenario.yaml").bundle.tools
    ]


def test_a_bundle_that_does_not_exist(here: Path) -> None:
    assert errors(HEAD + "bundle: nowhere\nsteps:\n  - user: {event: u1, query: q}\n") == [
        f"s.yaml:3:9: $.bundle: cannot build the bundle at {str(here / 'nowhere')!r}: "
        f"spec root {str(here / 'nowhere')!r} is not a folder"
    ]


def test_a_yaml_syntax_error_is_reported_alone(here: Path) -> None:
    problems = errors(HEAD + "steps:\n  - user: {event: u1, query: a: b}\n")
    assert len(problems) == 1
    assert problems[0].startswith("s.yaml:4:")
    assert "YAML syntax error" in problems[0]


# --------------------------------------------------------------------------- merging


def test_merge_base_merges_mappings_and_replaces_lists() -> None:
    base = {
        "mode": "agent",
        "open_files": [{"path": "a.py"}, {"path": "b.py"}],
        "action_context": {"source": "chat", "editor": {"line": 1, "column": 2}},
        "context": {"git": {"branch": "main", "head": "abc", "dirty": False}, "rules": []},
    }
    user = {
        "mode": "ask",
        "open_files": [{"path": "c.py"}],
        "action_context": {"editor": {"line": 9}},
        "context": {"git": {"branch": "dev", "head": "def", "dirty": True}},
    }
    assert merge_base(base, user) == {
        "mode": "ask",
        "open_files": [{"path": "c.py"}],
        "action_context": {"source": "chat", "editor": {"line": 9, "column": 2}},
        "context": {"git": {"branch": "dev", "head": "def", "dirty": True}, "rules": []},
    }


def test_user_context_replaces_base_context_key_by_key() -> None:
    base = {"context": {"git": {"branch": "main", "head": "a", "dirty": False, "remote": "r"}}}
    user = {"context": {"git": {"branch": "dev", "head": "b", "dirty": True}}}
    # The whole git key is replaced: no "remote" is merged in from base.
    assert merge_base(base, user)["context"] == {
        "git": {"branch": "dev", "head": "b", "dirty": True}
    }


def test_merge_base_leaves_its_inputs_alone() -> None:
    base = {"action_context": {"a": {"b": 1}}, "context": {"git": {"x": 1}}}
    merge_base(base, {"action_context": {"a": {"c": 2}}, "context": {"mcp": {}}})
    assert base == {"action_context": {"a": {"b": 1}}, "context": {"git": {"x": 1}}}


def test_base_is_merged_into_every_user_request(here: Path) -> None:
    scenario = load_scenario(
        write(
            HEAD
            + textwrap.dedent(
                """\
            base:
              mode: ask
              timestamp: "2026-03-02T09:00:00Z"
              action_context: {source: chat, editor: {line: 1}}
              context:
                git: {branch: main, head: abc, dirty: false}
                environment: {os: linux, shell: bash, cwd: /w, workspace_roots: [/w]}
            steps:
              - user: {event: u1, query: one}
              - assistant: {text: ok}
              - user:
                  event: u2
                  query: two
                  mode: plan
                  action_context: {editor: {column: 4}}
                  context:
                    git: {branch: dev, head: def, dirty: true}
            """
            )
        )
    )
    first, _, second = scenario.steps
    assert isinstance(first, UserStep) and isinstance(second, UserStep)
    assert first.request.mode == "ask"
    assert first.request.timestamp == "2026-03-02T09:00:00Z"
    assert second.request.mode == "plan"
    assert canonical.loads(second.request.action_context) == {
        "source": "chat",
        "editor": {"line": 1, "column": 4},
    }
    assert second.request.context_value == {
        "git": {"branch": "dev", "head": "def", "dirty": True},
        "environment": {"os": "linux", "shell": "bash", "cwd": "/w", "workspace_roots": ["/w"]},
    }
    assert first.request.context_value["git"] == {"branch": "main", "head": "abc", "dirty": False}


# --------------------------------------------------------------------------- errors


def test_retry_of_an_unknown_event(here: Path) -> None:
    text = """\
    name: retry of an unknown event
    conversation: conv-1
    base:
      mode: agent
    steps:
      - user: {event: u1, query: one}
      - assistant: {text: ok}
      - user: {event: u2, query: two}
      - assistant:
          tool_calls:
            - {id: c1, name: read_file, arguments: {path: a.py}}
      - tool_results: [{call_id: c1, output: x}]
      - assistant: {text: ok}
      - retry: u9
    """
    assert errors(text, "golden/x/scenario.yaml") == [
        "golden/x/scenario.yaml:14:5: $.steps[6].retry: retry of unknown event 'u9' "
        "(delivered so far: u1, u2)"
    ]


def test_a_timestamp_earlier_than_the_turn_before_is_refused_at_its_place(here: Path) -> None:
    text = HEAD + (
        "base:\n"
        "  timestamp: '2026-03-18T09:00:00Z'\n"
        "steps:\n"
        "  - user: {event: u1, query: one, timestamp: '2026-03-18T10:30:00Z'}\n"
        "  - assistant: {text: ok}\n"
        "  - user: {event: u2, query: two, timestamp: '2026-03-18T10:30:00Z'}\n"
        "  - assistant: {text: ok}\n"
        "  - user: {event: u3, query: three, timestamp: '2026-03-18T10:00:00+01:00'}\n"
        "  - assistant: {text: ok}\n"
        "  - user: {event: u4, query: four}\n"
    )
    assert errors(text) == [
        "s.yaml:4:14: $.base.timestamp: timestamp 2026-03-18T09:00:00Z is earlier than the "
        "turn's before it (2026-03-18T10:30:00Z, $.steps[2].user): a scenario's times must "
        "not go back",
        "s.yaml:10:48: $.steps[4].user.timestamp: timestamp 2026-03-18T10:00:00+01:00 is "
        "earlier than the turn's before it (2026-03-18T10:30:00Z, $.steps[2].user): a "
        "scenario's times must not go back",
    ]


def test_retry_before_anything_was_delivered(here: Path) -> None:
    assert errors(HEAD + "steps:\n  - retry: u1\n") == [
        "s.yaml:4:5: $.steps[0].retry: retry of unknown event 'u1' (delivered so far: none)"
    ]


def test_a_user_step_reusing_an_event_id_with_different_content(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant: {text: ok}\n"
        "  - user: {event: u1, query: changed}\n"
    )
    assert errors(text) == [
        "s.yaml:6:19: $.steps[2].user.event: event 'u1' conflicts with $.steps[0], which "
        "delivered it with different content; a retry must use 'retry: u1'"
    ]


def test_a_user_step_repeating_an_event_must_be_a_retry(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant: {text: ok}\n"
        "  - user: {event: u1, query: one}\n"
    )
    assert errors(text) == [
        "s.yaml:6:19: $.steps[2].user.event: event 'u1' was already delivered by "
        "$.steps[0]; re-deliver it with 'retry: u1'"
    ]


def test_a_background_event_reusing_a_user_event_id(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant: {text: ok}\n"
        "  - background: {event: u1, text: done}\n"
    )
    assert errors(text) == [
        "s.yaml:6:25: $.steps[2].background.event: event 'u1' conflicts with $.steps[0], "
        "which delivered it with different content; a retry must use 'retry: u1'"
    ]


def test_a_tool_result_for_an_unknown_call_id(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant:\n"
        "      tool_calls: [{id: c1, name: read_file, arguments: {path: a.py}}]\n"
        "  - tool_results:\n"
        "      - {call_id: c1, output: x}\n"
        "      - {call_id: c9, output: y}\n"
    )
    assert errors(text) == [
        "s.yaml:9:19: $.steps[2].tool_results[1].call_id: tool result for unknown call id "
        "'c9' (pending calls: c1)"
    ]


def test_tool_results_must_answer_every_pending_call(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant:\n"
        "      tool_calls:\n"
        "        - {id: c1, name: read_file, arguments: {path: a.py}}\n"
        "        - {id: c2, name: read_file, arguments: {path: b.py}}\n"
        "  - tool_results: [{call_id: c2, output: x}]\n"
    )
    assert errors(text) == [
        "s.yaml:9:5: $.steps[2].tool_results: tool results must answer every pending call; "
        "missing: c1"
    ]


def test_a_second_result_for_one_call(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: {path: a}}]}\n"
        "  - tool_results: [{call_id: c1, output: x}]\n"
        "  - assistant: {tool_calls: [{id: c2, name: read_file, arguments: {path: b}}]}\n"
        "  - tool_results: [{call_id: c2, output: y}, {call_id: c1, output: z}]\n"
    )
    assert errors(text) == [
        "s.yaml:8:56: $.steps[4].tool_results[1].call_id: tool call 'c1' already has a "
        "result (at $.steps[2].tool_results[0])"
    ]


def test_a_reused_tool_call_id(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: {path: a}}]}\n"
        "  - tool_results: [{call_id: c1, output: x}]\n"
        "  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: {path: b}}]}\n"
    )
    assert errors(text) == [
        "s.yaml:7:35: $.steps[3].assistant.tool_calls[0].id: tool call id 'c1' was already "
        "used at $.steps[1].assistant.tool_calls[0]"
    ]


def test_an_assistant_step_before_any_user_turn(here: Path) -> None:
    text = HEAD + "steps:\n  - assistant: {text: hello}\n  - user: {event: u1, query: q}\n"
    assert errors(text) == ["s.yaml:4:5: $.steps[0].assistant: assistant step before any user turn"]


def test_an_assistant_step_without_a_model_call(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant: {text: ok}\n"
        "  - restart: true\n"
        "  - assistant: {text: again}\n"
    )
    assert errors(text) == [
        "s.yaml:7:5: $.steps[3].assistant: assistant step without a model call to answer "
        "(the last model call already has its reply)"
    ]


def test_a_turn_while_tool_calls_are_pending(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: one}\n"
        "  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: {path: a}}]}\n"
        "  - user: {event: u2, query: two}\n"
        "  - compact: {summary: s}\n"
    )
    assert errors(text) == [
        "s.yaml:6:5: $.steps[2].user: user turn while tool calls c1 have no results "
        "(a tool_results step must answer them first)",
        "s.yaml:7:5: $.steps[3].compact: manual compaction while tool calls c1 have no "
        "results (a tool_results step must answer them first)",
    ]


def test_a_background_event_before_any_user_turn(here: Path) -> None:
    assert errors(HEAD + "steps:\n  - background: {event: b1, text: done}\n") == [
        "s.yaml:4:5: $.steps[0].background: background event before any user turn"
    ]


def test_unknown_keys(here: Path) -> None:
    text = """\
    name: unknown keys
    conversation: conv-1
    owner: me
    base: {mode: agent, colour: blue}
    steps:
      - user: {event: u1, query: q, priority: high}
      - assistant: {text: ok, mood: happy}
      - usr: {event: u2, query: q}
    """
    assert errors(text) == [
        "s.yaml:3:1: $: unknown key 'owner' (expected one of: base, bundle, conversation, "
        "name, providers, steps)",
        "s.yaml:4:21: $.base: unknown key 'colour' (expected one of: action_context, "
        "context, mode, open_files, query, selected_context, timestamp)",
        "s.yaml:6:33: $.steps[0].user: unknown key 'priority' (expected one of: "
        "action_context, compact, context, event, images, mode, open_files, query, "
        "selected_context, timestamp, tool_results)",
        "s.yaml:7:27: $.steps[1].assistant: unknown key 'mood' "
        "(expected one of: text, thinking, tool_calls)",
        "s.yaml:8:5: $.steps[2]: unknown key 'usr' (did you mean 'user'?)",
    ]


def test_a_step_with_two_kinds(here: Path) -> None:
    text = HEAD + "steps:\n  - user: {event: u1, query: q}\n    restart: true\n"
    assert errors(text) == [
        "s.yaml:4:5: $.steps[0]: expected at most 1 key, got 2 (a step has exactly one key: "
        "user, assistant, tool_results, background, injected, note, retry, restart, "
        "compact or switch)"
    ]


def test_missing_keys_and_wrong_types(here: Path) -> None:
    text = """\
    name: types
    steps:
      - user: {query: q}
      - restart: false
      - tool_results: []
    """
    assert errors(text) == [
        "s.yaml:1:1: $: missing required key 'conversation'",
        "s.yaml:3:11: $.steps[0].user: missing required key 'event'",
        "s.yaml:4:14: $.steps[1].restart: expected true, got false",
        "s.yaml:5:19: $.steps[2].tool_results: expected a non-empty array",
    ]


def test_a_user_turn_without_a_query_is_located_at_its_step(here: Path) -> None:
    assert errors(HEAD + "steps:\n  - user: {event: u1}\n") == [
        "s.yaml:4:11: $.steps[0].user: missing required key 'query' (user turns need a query)"
    ]


def test_context_errors_are_located_where_the_value_was_given(here: Path) -> None:
    text = HEAD + (
        "base:\n"
        "  context:\n"
        "    rules: [{name: r, kind: sometimes, body: b}]\n"
        "steps:\n"
        "  - user:\n"
        "      event: u1\n"
        "      query: q\n"
        "      context: {git: {branch: main, dirty: false}}\n"
    )
    assert errors(text) == [
        "s.yaml:5:29: $.base.context.rules[0].kind: expected one of always, auto, agent, "
        "manual; got 'sometimes'",
        "s.yaml:10:22: $.steps[0].user.context.git: missing required key 'head'",
    ]


def test_unknown_modes_and_tools(here: Path) -> None:
    text = HEAD + (
        "base: {mode: yolo}\n"
        "steps:\n"
        "  - user: {event: u1, query: q, mode: review}\n"
        "  - assistant: {tool_calls: [{id: c1, name: reed_file}, {id: c2, name: teleport}]}\n"
        "  - tool_results: [{call_id: c1, output: x}, {call_id: c2, output: y}]\n"
        "  - user: {event: u2, query: q}\n"
    )
    problems = errors(text)
    assert problems[:3] == [
        f"s.yaml:3:14: $.base.mode: unknown mode 'yolo' (modes: agent, ask, debug, plan) {note()}",
        "s.yaml:5:39: $.steps[0].user.mode: unknown mode 'review' "
        f"(modes: agent, ask, debug, plan) {note()}",
        "s.yaml:6:45: $.steps[1].assistant.tool_calls[0].name: unknown tool 'reed_file' "
        f"(did you mean 'read_file'?) {note()}",
    ]
    assert problems[3].startswith(
        "s.yaml:6:72: $.steps[1].assistant.tool_calls[1].name: unknown tool 'teleport' "
        "(tools: codebase_search, delete_file, "
    )
    assert len(problems) == 4


def test_all_errors_of_a_file_are_reported_together_sorted(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - assistant: {text: early}\n"
        "  - user: {event: u1, query: q, mode: nope}\n"
        "  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: {path: a}}]}\n"
        "  - tool_results: [{call_id: c2, output: x}]\n"
        "  - retry: u7\n"
    )
    assert errors(text) == [
        "s.yaml:4:5: $.steps[0].assistant: assistant step before any user turn",
        "s.yaml:5:39: $.steps[1].user.mode: unknown mode 'nope' "
        f"(modes: agent, ask, debug, plan) {note()}",
        "s.yaml:7:5: $.steps[3].tool_results: tool results must answer every pending call; "
        "missing: c1",
        "s.yaml:7:30: $.steps[3].tool_results[0].call_id: tool result for unknown call id "
        "'c2' (pending calls: c1)",
        "s.yaml:8:5: $.steps[4].retry: retry of unknown event 'u7' (delivered so far: u1)",
    ]


def test_after_an_unreadable_step_the_walk_stops(here: Path) -> None:
    # Step 1 is invalid, so what comes after cannot be judged against the state: no
    # echo errors (c1 would look unknown), only the schema error.
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: q}\n"
        "  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: 3}]}\n"
        "  - tool_results: [{call_id: c1, output: x}]\n"
    )
    assert errors(text) == [
        "s.yaml:5:67: $.steps[1].assistant.tool_calls[0].arguments: expected an object, "
        "got an integer"
    ]


def test_duplicate_names_in_a_context(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user:\n"
        "      event: u1\n"
        "      query: q\n"
        "      context: {skills: [{name: a, description: d, path: p}, "
        "{name: a, description: d, path: q}]}\n"
    )
    assert errors(text) == [
        "s.yaml:7:69: $.steps[0].user.context.skills[1].name: duplicate skill name 'a' "
        "(also at $.steps[0].user.context.skills[0])"
    ]


def test_the_golden_scenarios_load() -> None:
    for path in sorted((REPO / "golden").glob("*/scenario.yaml")):
        assert load_scenario(path).steps


def test_a_scenario_without_bundle_uses_the_spec_root_it_lives_in(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(Path(__file__).parent / "data" / "specs" / "minimal", root)
    path = root / "golden" / "first" / "scenario.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(
        "name: first\nconversation: c1\nsteps:\n  - user: {event: u1, query: hi, mode: ask}\n",
        encoding="utf-8",
    )
    scenario = load_scenario(path)
    assert scenario.bundle_root == root.resolve()
    assert scenario.bundle.agent == "mini"


def test_an_injected_event_makes_a_call_and_never_appends_context(here: Path) -> None:
    text = HEAD + (
        "steps:\n"
        "  - user: {event: u1, query: q}\n"
        "  - assistant: {text: ok}\n"
        "  - injected: {event: i1, text: the build finished}\n"
        "  - retry: i1\n"
    )
    (here / "s.yaml").write_text(text, encoding="utf-8")
    scenario = load_scenario(here / "s.yaml")
    assert [type(step).__name__ for step in scenario.steps] == [
        "UserStep",
        "AssistantStep",
        "InjectedStep",
        "RetryStep",
    ]
    calls = replay(scenario)
    assert [call.kind for call in calls] == ["user", "injected", "retry"]
    last = [m.id for m in calls[1].request.messages]
    assert last[-1] == "event:i1"
    assert [m for m in last if m.startswith("request-context:")] == ["request-context:u1"]
    assert calls[2].request.same_as(calls[1].request)


def test_an_injected_event_before_any_user_turn_is_refused(here: Path) -> None:
    text = HEAD + "steps:\n  - injected: {event: i1, text: t}\n"
    assert errors(text) == ["s.yaml:4:5: $.steps[0].injected: injected event before any user turn"]


def test_an_alias_bomb_in_a_step_is_a_located_error(here: Path) -> None:
    """Nine levels of nine aliases inside a step (issue 43 #9): the loader streams the
    items of a sequence, and expanded the bomb there, outside its budget's handling
    (a traceback of ``_BudgetExceeded``)."""
    anchors = "\n".join(f"    a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9))
    text = HEAD + "steps:\n  - user: {event: u1, query: q}\n    x:\n"
    text += "    a0: &a0 [x, x, x, x, x, x, x, x, x]\n".replace("    a0", "      a0")
    text += anchors.replace("    a", "      a") + "\n"
    assert errors(text) == [
        "s.yaml:10:16: $: expanding alias *a3 exceeds the limit of 10000 values produced"
        " by aliases in one file (a 'billion laughs' document?)"
    ]
