"""The JSON Schemas and the validator: clear messages, exact locations, extra checks."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from prefixlock.core.errors import Location, SpecError, SpecErrors
from prefixlock.spec import validate
from prefixlock.spec.loader import load_yaml_text
from prefixlock.spec.validate import (
    SCHEMA_NAMES,
    check_document,
    schema,
    schema_text,
    validate_document,
    validate_value,
)
from referencing.exceptions import NoSuchResource
from schema_links import editor_errors, header_schema, ref_problems, walk

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_DIR = ROOT / "compiler" / "schemas"


def problems(text: str, schema_name: str, file: str = "x.yaml") -> list[str]:
    return [str(e) for e in validate_document(load_yaml_text(text, file), schema_name)]


# --------------------------------------------------------------------------- valid documents

VALID: dict[str, str] = {
    "usage": """\
format: prefixlock-usage/1
source: session.jsonl
provider: anthropic
calls:
  - call: 1
    step: 1
    line: 3
    model: claude-sonnet-5-5
    timestamp: "2026-03-06T10:00:07.000Z"
    observed:
      input_tokens: 3012
      uncached_tokens: 12
      cache_read_tokens: 0
      cache_write_5m_tokens: 2000
      cache_write_1h_tokens: 1000
      output_tokens: 40
  - {call: 2, step: 3, line: 9, model: null, timestamp: null, observed: null}
unmatched:
  - line: 5
    observed: {input_tokens: 10, uncached_tokens: 10, output_tokens: 2}
report: {user_turns: 1, dropped: []}
""",
    "agent": """\
name: cursor
instructions: prompt/cursor/instructions.md
context_template: prompt/cursor/context.md.j2
default_mode: agent
modes:
  agent:
    runtime: prompt/cursor/agent/runtime.md.j2
    reminder: |
      You are in agent mode.
  ask:
    runtime: prompt/cursor/ask/runtime.md.j2
    reminder: ""
""",
    "tools": """\
tools:
  - name: read_file
    description: Read a file.
    parameters:
      type: object
      properties: {path: {type: string, description: The path.}}
      required: [path]
      additionalProperties: false
  - name: mcp_call
    description: Call an MCP tool.
    parameters:
      type: object
      properties:
        server: {type: string}
        tool: {type: string}
        arguments: {type: object}
""",
    "providers": """\
providers:
  anthropic:        {model: claude-sonnet-4-5, max_tokens: 8192}
  openai-responses: {model: gpt-5, max_tokens: 8192, options: {reasoning: {effort: medium}}}
  openai-chat:      {model: gpt-4.1, max_tokens: 8192}
  gemini:           {model: gemini-2.5-pro, max_tokens: 8192}
  bedrock-converse: {model: anthropic.claude-sonnet-4-5-v1:0, max_tokens: 1}
""",
    "rules": """\
rules:
  - {name: style, kind: always, body: Use four spaces.}
  - {name: py, kind: auto, globs: ["**/*.py"], body: Type hints.}
  - {name: db, kind: agent, description: Database migrations, body: Use alembic.}
  - {name: rare, kind: manual, body: Only when asked.}
""",
    "skills": """\
skills:
  - {name: pdf, description: Read PDFs, path: .cursor/skills/pdf/SKILL.md}
""",
    "subagents": """\
subagents:
  - {name: explorer, description: Explores the code}
  - {name: fixer, description: Fixes tests, model: gpt-5, tools: [read_file, grep]}
""",
    "mcp": """\
servers:
  - name: github
    transport: http
    url: https://example.invalid/mcp
    headers: {Authorization: Bearer x}
    tools:
      - {name: list_issues, description: List issues, input_schema: {type: object}}
  - name: local
    transport: stdio
    command: ./server
    env: {DEBUG: "1"}
    tools: []
""",
    "context": """\
rules: [{name: r, kind: always, body: b}]
skills: [{name: s, description: d, path: p}]
subagents: [{name: a, description: d}]
environment: {os: linux, shell: /bin/bash, cwd: /w, workspace_roots: [/w]}
git: {branch: main, head: abc123, dirty: false, remote: git@example.invalid:x.git}
mcp: {servers: [{name: m, tools: [{name: t, description: d, input_schema: {}}]}]}
""",
    "agent_run_request": """\
conversation_id: conv-1
event_id: u1
kind: user
mode: agent
query: Fix the bug
selected_context: [{path: a.py, start_line: 1, end_line: 2, text: "x = 1"}]
open_files: [{path: a.py, cursor_line: 3}, {path: b.py}]
action_context: {anything: [1, {goes: true}]}
timestamp: 2026-12-02T10:00:00Z
context:
  rules: [{name: r, kind: always, body: b}]
  git: {branch: main, head: abc, dirty: true}
compact: {summary: Earlier we fixed a.py.}
""",
    "scenario": """\
name: every step kind
conversation: conv-1
bundle: ../..
base: {mode: agent, context: {git: {branch: main, head: abc, dirty: false}}}
steps:
  - user: {event: u1, query: Fix it, timestamp: 2026-12-02T10:00:00Z}
  - assistant: {text: Reading., tool_calls: [{id: c1, name: read_file, arguments: {path: a}}]}
  - tool_results: [{call_id: c1, output: x = 1, is_error: false}]
  - background: {event: b1, text: done}
  - retry: u1
  - restart: true
  - compact: {summary: We fixed a.py.}
""",
}


def test_every_schema_has_a_valid_example() -> None:
    assert sorted(VALID) == list(SCHEMA_NAMES)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_valid_documents_pass(name: str) -> None:
    doc = load_yaml_text(VALID[name], f"{name}.yaml")
    assert validate_document(doc, name) == []
    check_document(doc, name)


@pytest.mark.parametrize(
    "value",
    [
        {"conversation_id": "c", "event_id": "b1", "kind": "background", "text": "done"},
        {"conversation_id": "c", "event_id": "i1", "kind": "injected", "text": "note"},
        {"conversation_id": "c", "event_id": "u1", "kind": "user", "query": ""},
        {"conversation_id": "c", "event_id": "u1", "kind": "user", "query": "q", "context": {}},
    ],
)
def test_minimal_requests_pass(value: dict[str, Any]) -> None:
    assert validate_value(value, "agent_run_request") == []


def test_empty_lists_and_context_pass() -> None:
    assert validate_value({"tools": []}, "tools") == []
    assert validate_value({"rules": []}, "rules") == []
    assert validate_value({}, "context") == []


@pytest.mark.parametrize("section", ["agent", "tools", "providers"])
def test_the_examples_in_docs_specs_md_pass(section: str) -> None:
    text = (ROOT / "docs" / "specs.md").read_text(encoding="utf-8")
    match = re.search(
        rf"## rules/{section}\.yaml — schema `{section}`\n```yaml\n(.*?)```", text, re.S
    )
    assert match is not None
    doc = load_yaml_text(match.group(1), f"rules/{section}.yaml")
    assert validate_document(doc, section) == []


# --------------------------------------------------------------------------- messages


def test_unknown_key_is_located_at_the_key() -> None:
    text = "rules:\n  - name: a\n    kind: always\n    body: x\n    glob: '*.py'\n"
    assert problems(text, "rules", "rules/rules.yaml") == [
        "rules/rules.yaml:5:5: $.rules[0]: unknown key 'glob' (did you mean 'globs'?)"
    ]


def test_several_unknown_keys_are_each_reported_sorted() -> None:
    text = "rules: []\nzeta: 1\nalpha:\n  x: 1\n"
    assert problems(text, "rules") == [
        "x.yaml:2:1: $: unknown key 'zeta' (expected one of: rules)",
        "x.yaml:3:1: $: unknown key 'alpha' (expected one of: rules)",
    ]


def test_missing_key_is_located_at_the_object() -> None:
    text = (
        "tools:\n"
        "  - {name: a, description: d, parameters: {type: object}}\n"
        "  - {name: b, description: d, parameters: {type: object}}\n"
        "  - name: c\n"
        "    parameters: {type: object}\n"
    )
    assert problems(text, "tools", "rules/tools.yaml") == [
        "rules/tools.yaml:4:5: $.tools[2]: missing required key 'description'"
    ]


def test_every_missing_key_is_reported() -> None:
    assert problems("providers:\n  gemini: {}\n", "providers") == [
        "x.yaml:2:11: $.providers.gemini: missing required key 'max_tokens'",
        "x.yaml:2:11: $.providers.gemini: missing required key 'model'",
    ]


def test_enum() -> None:
    text = (
        "rules:\n"
        "  - {name: a, kind: always, body: x}\n"
        "  - {name: b, kind: manual, body: x}\n"
        "  - {name: c, kind: sometimes, body: x}\n"
    )
    assert problems(text, "rules") == [
        "x.yaml:4:21: $.rules[2].kind: expected one of always, auto, agent, manual; got 'sometimes'"
    ]


def test_enum_of_a_non_string() -> None:
    assert problems("rules: [{name: a, kind: 3, body: x}]\n", "rules") == [
        "x.yaml:1:25: $.rules[0].kind: expected one of always, auto, agent, manual; got 3"
    ]


def test_type() -> None:
    text = "tools:\n  - name: a\n    description: d\n    parameters: 'no'\n"
    assert problems(text, "tools") == [
        "x.yaml:4:17: $.tools[0].parameters: expected an object, got a string"
    ]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ("null", "null"),
        ("[]", "an array"),
        ("{}", "an object"),
        ("1", "an integer"),
        ("1.5", "a number"),
        ("true", "a boolean"),
    ],
)
def test_type_names_what_was_found(value: str, got: str) -> None:
    assert problems(f"git: {{branch: {value}, head: h, dirty: false}}\n", "context") == [
        f"x.yaml:1:15: $.git.branch: expected a string, got {got}"
    ]


def test_pattern() -> None:
    text = (
        "tools:\n"
        "  - {name: ok, description: d, parameters: {type: object}}\n"
        "  - {name: read file, description: d, parameters: {type: object}}\n"
    )
    assert problems(text, "tools") == [
        "x.yaml:3:12: $.tools[1].name: expected a string matching ^[a-zA-Z0-9_-]{1,64}$, "
        "got 'read file'"
    ]


def test_long_values_are_shortened() -> None:
    name = "n" * 80
    assert problems(f"skills: [{{name: {name}, description: d, path: p}}]\n", "skills") == [
        "x.yaml:1:17: $.skills[0].name: expected a string matching ^[A-Za-z0-9_.-]{1,64}$, "
        f"got '{'n' * 57}...'"
    ]


def test_empty_strings_and_lists() -> None:
    text = "rules: [{name: a, kind: agent, description: '', body: x}]\n"
    assert problems(text, "rules") == [
        "x.yaml:1:45: $.rules[0].description: expected a non-empty string"
    ]


def test_schema_violation_of_the_whole_document() -> None:
    assert problems("", "agent", "rules/agent.yaml") == [
        "rules/agent.yaml:1:1: $: expected an object, got null"
    ]
    assert problems("- a\n", "tools") == ["x.yaml:1:1: $: expected an object, got an array"]


def test_errors_are_sorted_by_location() -> None:
    text = "rules:\n  - {name: 'bad name', kind: nope, body: 1}\n  - {kind: always}\n"
    errors = validate_document(load_yaml_text(text, "x.yaml"), "rules")
    assert errors == sorted(errors)
    assert [str(e) for e in errors] == [
        "x.yaml:2:12: $.rules[0].name: expected a string matching ^[A-Za-z0-9_.-]{1,64}$, "
        "got 'bad name'",
        "x.yaml:2:30: $.rules[0].kind: expected one of always, auto, agent, manual; got 'nope'",
        "x.yaml:2:42: $.rules[0].body: expected a string, got an integer",
        "x.yaml:3:5: $.rules[1]: missing required key 'body'",
        "x.yaml:3:5: $.rules[1]: missing required key 'name'",
    ]


def test_check_document_raises_all_errors() -> None:
    doc = load_yaml_text("skills: [{name: a}]\n", "rules/skills.yaml")
    with pytest.raises(SpecErrors) as info:
        check_document(doc, "skills")
    assert str(info.value) == (
        "rules/skills.yaml:1:10: $.skills[0]: missing required key 'description'\n"
        "rules/skills.yaml:1:10: $.skills[0]: missing required key 'path'"
    )


# --------------------------------------------------------------------------- rules


def test_auto_rule_without_globs() -> None:
    assert problems("rules:\n  - {name: a, kind: auto, body: x}\n", "rules") == [
        "x.yaml:2:5: $.rules[0]: missing required key 'globs' "
        "(rules of kind 'auto' need a non-empty globs list)"
    ]


def test_auto_rule_with_empty_globs() -> None:
    assert problems("rules:\n  - {name: a, kind: auto, globs: [], body: x}\n", "rules") == [
        "x.yaml:2:34: $.rules[0].globs: expected a non-empty array "
        "(rules of kind 'auto' need a non-empty globs list)"
    ]


def test_agent_rule_without_description() -> None:
    assert problems("rules:\n  - {name: a, kind: agent, body: x}\n", "rules") == [
        "x.yaml:2:5: $.rules[0]: missing required key 'description' "
        "(rules of kind 'agent' need a description)"
    ]


def test_other_kinds_may_omit_globs_and_description() -> None:
    text = "rules: [{name: a, kind: always, body: x}, {name: b, kind: manual, body: y}]\n"
    assert problems(text, "rules") == []


# --------------------------------------------------------------------------- duplicates


@pytest.mark.parametrize(
    ("schema_name", "text", "expected"),
    [
        (
            "tools",
            "tools:\n"
            "  - {name: grep, description: d, parameters: {type: object}}\n"
            "  - {name: read, description: d, parameters: {type: object}}\n"
            "  - {name: edit, description: d, parameters: {type: object}}\n"
            "  - {name: grep, description: e, parameters: {type: object}}\n",
            ["x.yaml:5:12: $.tools[3].name: duplicate tool name 'grep' (also at $.tools[0])"],
        ),
        (
            "rules",
            "rules:\n  - {name: a, kind: always, body: x}\n  - {name: a, kind: always, body: y}\n"
            "  - {name: a, kind: always, body: z}\n",
            [
                "x.yaml:3:12: $.rules[1].name: duplicate rule name 'a' (also at $.rules[0])",
                "x.yaml:4:12: $.rules[2].name: duplicate rule name 'a' (also at $.rules[0])",
            ],
        ),
        (
            "skills",
            "skills: [{name: s, description: d, path: p}, {name: s, description: d, path: q}]\n",
            ["x.yaml:1:53: $.skills[1].name: duplicate skill name 's' (also at $.skills[0])"],
        ),
        (
            "subagents",
            "subagents: [{name: s, description: d}, {name: s, description: e}]\n",
            [
                "x.yaml:1:47: $.subagents[1].name: duplicate subagent name 's' "
                "(also at $.subagents[0])"
            ],
        ),
        (
            "mcp",
            "servers:\n"
            "  - {name: m, tools: []}\n"
            "  - name: m\n"
            "    tools:\n"
            "      - {name: t, description: d, input_schema: {}}\n"
            "      - {name: t, description: d, input_schema: {}}\n",
            [
                "x.yaml:3:11: $.servers[1].name: duplicate MCP server name 'm' "
                "(also at $.servers[0])",
                "x.yaml:6:16: $.servers[1].tools[1].name: duplicate MCP tool name 't' "
                "(also at $.servers[1].tools[0])",
            ],
        ),
        (
            "context",
            "skills: [{name: s, description: d, path: p}, {name: s, description: d, path: q}]\n"
            "mcp: {servers: [{name: m, tools: []}, {name: m, tools: []}]}\n",
            [
                "x.yaml:1:53: $.skills[1].name: duplicate skill name 's' (also at $.skills[0])",
                "x.yaml:2:46: $.mcp.servers[1].name: duplicate MCP server name 'm' "
                "(also at $.mcp.servers[0])",
            ],
        ),
        (
            "agent_run_request",
            "conversation_id: c\nevent_id: e\nkind: user\nquery: q\n"
            "context: {subagents: [{name: a, description: d}, {name: a, description: d}]}\n",
            [
                "x.yaml:5:57: $.context.subagents[1].name: duplicate subagent name 'a' "
                "(also at $.context.subagents[0])"
            ],
        ),
    ],
)
def test_duplicate_names(schema_name: str, text: str, expected: list[str]) -> None:
    assert problems(text, schema_name) == expected


def test_names_may_repeat_across_lists_and_servers() -> None:
    text = (
        "servers:\n"
        "  - {name: a, tools: [{name: t, description: d, input_schema: {}}]}\n"
        "  - {name: b, tools: [{name: t, description: d, input_schema: {}}]}\n"
    )
    assert problems(text, "mcp") == []


# --------------------------------------------------------------------------- tools


def test_tool_parameters_must_be_an_object_schema() -> None:
    text = "tools:\n  - {name: a, description: d, parameters: {type: array}}\n"
    assert problems(text, "tools") == [
        "x.yaml:2:50: $.tools[0].parameters.type: expected 'object', got 'array'"
    ]
    text = "tools:\n  - {name: a, description: d, parameters: {properties: {}}}\n"
    assert problems(text, "tools") == [
        "x.yaml:2:43: $.tools[0].parameters: missing required key 'type'"
    ]


def test_tool_parameters_must_be_a_valid_json_schema() -> None:
    text = """\
tools:
  - name: edit
    description: Edit a file.
    parameters:
      type: object
      properties:
        path: {type: strng}
        line: {type: integer, minimum: one}
        tags: {type: array, minItems: -1}
      required: path
"""
    assert problems(text, "tools", "rules/tools.yaml") == [
        "rules/tools.yaml:7:22: $.tools[0].parameters.properties.path.type: invalid JSON Schema: "
        "expected one of array, boolean, integer, null, number, object, string; got 'strng' "
        "(did you mean 'string'?)",
        "rules/tools.yaml:8:40: $.tools[0].parameters.properties.line.minimum: "
        "invalid JSON Schema: expected a number, got a string",
        "rules/tools.yaml:9:39: $.tools[0].parameters.properties.tags.minItems: "
        "invalid JSON Schema: expected a number >= 0, got -1",
        "rules/tools.yaml:10:17: $.tools[0].parameters.required: invalid JSON Schema: "
        "expected an array, got a string",
    ]


def test_free_form_objects_take_any_keys() -> None:
    text = (
        "tools:\n  - name: a\n    description: d\n    parameters:\n      type: object\n"
        "      x-vendor: {anything: 1}\n"
    )
    assert problems(text, "tools") == []


# --------------------------------------------------------------------------- providers and agent


def test_provider_names_are_restricted() -> None:
    text = "providers:\n  openai: {model: gpt, max_tokens: 1}\n  gpt: {model: g, max_tokens: 1}\n"
    assert problems(text, "providers", "rules/providers.yaml") == [
        "rules/providers.yaml:2:3: $.providers: unknown key 'openai' (did you mean 'openai-chat'?)",
        "rules/providers.yaml:3:3: $.providers: unknown key 'gpt' (expected one of: "
        "anthropic, bedrock-anthropic, bedrock-converse, gemini, openai-chat, openai-responses)",
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "expected a number >= 1, got 0"),
        ("-5", "expected a number >= 1, got -5"),
        ("1.5", "expected an integer, got a number"),
        ("'10'", "expected an integer, got a string"),
    ],
)
def test_max_tokens_is_a_positive_integer(value: str, message: str) -> None:
    text = f"providers:\n  gemini: {{model: g, max_tokens: {value}}}\n"
    assert problems(text, "providers") == [f"x.yaml:2:34: $.providers.gemini.max_tokens: {message}"]


def test_providers_need_at_least_one_provider() -> None:
    assert problems("providers: {}\n", "providers") == [
        "x.yaml:1:12: $.providers: expected a non-empty object"
    ]


AGENT = """\
name: cursor
instructions: {instructions}
context_template: prompt/cursor/context.md.j2
default_mode: agent
modes:
  agent: {{runtime: prompt/cursor/agent/runtime.md.j2, reminder: r}}
"""

PATH_MESSAGE = (
    "expected a relative path inside the spec root (forward slashes, no leading '/', no '..')"
)


@pytest.mark.parametrize(
    "path",
    [
        "../secret.md",
        "/etc/passwd",
        "prompt/../../x.md",
        "prompt/..",
        "..",
        "C:/x.md",
        "'prompt\\\\x.md'",
        "'\\\\server\\\\x'",
        "''",
    ],
)
def test_agent_paths_must_stay_inside_the_root(path: str) -> None:
    doc = load_yaml_text(AGENT.format(instructions=path), "rules/agent.yaml")
    errors = validate_document(doc, "agent")
    assert [(e.path, e.location.line, e.message) for e in errors] == [
        ("$.instructions", 2, f"{PATH_MESSAGE}, got {doc.value['instructions']!r}")
    ]


@pytest.mark.parametrize(
    "path", ["prompt/cursor/instructions.md", "a..b/x.md", "..hidden/x", "x/..y", "./x.md"]
)
def test_agent_paths_inside_the_root_pass(path: str) -> None:
    assert problems(AGENT.format(instructions=path), "agent") == []


def test_default_mode_must_be_a_mode() -> None:
    text = VALID["agent"].replace("default_mode: agent", "default_mode: plan")
    assert problems(text, "agent", "rules/agent.yaml") == [
        "rules/agent.yaml:4:15: $.default_mode: default mode 'plan' is not one of the modes "
        "(expected one of: agent, ask)"
    ]


def test_mode_names_and_modes() -> None:
    text = (
        "name: Cursor\ninstructions: i.md\ncontext_template: c.j2\ndefault_mode: agent\n"
        "modes:\n  agent: {runtime: a.j2}\n  'bad mode': {runtime: b.j2, reminder: r, x: 1}\n"
    )
    assert problems(text, "agent") == [
        "x.yaml:1:7: $.name: expected a string matching ^[a-z0-9][a-z0-9-]{0,63}$, got 'Cursor'",
        "x.yaml:6:10: $.modes.agent: missing required key 'reminder'",
        "x.yaml:7:3: $.modes: invalid key 'bad mode': expected a string matching "
        "^[A-Za-z0-9_.-]{1,64}$, got 'bad mode'",
        "x.yaml:7:44: $.modes[\"bad mode\"]: unknown key 'x' (expected one of: reminder, runtime)",
    ]


# --------------------------------------------------------------------------- requests


def test_request_with_a_bad_field_and_no_document() -> None:
    value = {"conversation_id": "c", "event_id": "u1", "kind": "chat", "query": "q"}
    assert validate_value(value, "agent_run_request") == [
        SpecError(
            Location("<request>"),
            "$.kind",
            "expected one of user, background, injected; got 'chat'",
        )
    ]
    errors = validate_value(value, "agent_run_request", file="requests/u1.json")
    assert [str(e) for e in errors] == [
        "requests/u1.json: $.kind: expected one of user, background, injected; got 'chat'"
    ]


def test_request_required_fields() -> None:
    # conversation_id is optional: the conversation an event is handed to knows it.
    assert [str(e) for e in validate_value({}, "agent_run_request")] == [
        "<request>: $: missing required key 'event_id'",
        "<request>: $: missing required key 'kind'",
    ]


def test_user_turn_requires_query_and_refuses_text() -> None:
    text = "conversation_id: c\nevent_id: u1\nkind: user\ntext: hi\n"
    assert problems(text, "agent_run_request", "req.yaml") == [
        "req.yaml:1:1: $: missing required key 'query' (user turns need a query)",
        "req.yaml:4:1: $: key 'text' is not allowed "
        "(only background and injected events take text)",
    ]


@pytest.mark.parametrize("kind", ["background", "injected"])
def test_background_and_injected_events_require_text_and_refuse_user_fields(kind: str) -> None:
    text = (
        f"conversation_id: c\nevent_id: b1\nkind: {kind}\n"
        "query: q\nmode: agent\ncompact: {summary: s}\n"
    )
    reason = "(only user turns take query, mode and compact)"
    assert problems(text, "agent_run_request", "req.yaml") == [
        "req.yaml:1:1: $: missing required key 'text' (background and injected events need text)",
        f"req.yaml:4:1: $: key 'query' is not allowed {reason}",
        f"req.yaml:5:1: $: key 'mode' is not allowed {reason}",
        f"req.yaml:6:1: $: key 'compact' is not allowed {reason}",
    ]


@pytest.mark.parametrize(
    "timestamp",
    [
        "2026-12-02T10:00:00Z",
        "2026-12-02t10:00:00.123456z",
        "2026-12-02T10:00:00+05:30",
        "2026-12-02T10:00:00.5-08:00",
    ],
)
def test_rfc3339_timestamps_pass(timestamp: str) -> None:
    value = {
        "conversation_id": "c",
        "event_id": "u",
        "kind": "user",
        "query": "q",
        "timestamp": timestamp,
    }
    assert validate_value(value, "agent_run_request") == []


@pytest.mark.parametrize(
    "timestamp",
    [
        "yesterday",
        "2026-12-02",
        "2026-12-02 10:00:00Z",
        "2026-12-02T10:00:00",
        "2026-12-02T10:00Z",
        "\uff12\uff10\uff12\uff16-12-02T10:00:00Z",  # full-width digits
    ],
)
def test_other_timestamps_are_refused(timestamp: str) -> None:
    value = {
        "conversation_id": "c",
        "event_id": "u",
        "kind": "user",
        "query": "q",
        "timestamp": timestamp,
    }
    assert [str(e) for e in validate_value(value, "agent_run_request")] == [
        "<request>: $.timestamp: expected an RFC 3339 timestamp like 2026-12-02T10:00:00Z, "
        f"got {timestamp!r}"
    ]


def test_request_nested_fields() -> None:
    text = """\
conversation_id: c
event_id: u1
kind: user
query: q
selected_context: [{path: a.py, start_line: 0}]
open_files: [a.py]
action_context: []
context:
  environment: {os: linux}
  git: {branch: main, head: h, dirty: false, extra: 1}
  rules: [{name: r, kind: auto, body: b}]
"""
    assert problems(text, "agent_run_request") == [
        "x.yaml:5:20: $.selected_context[0]: missing required key 'text'",
        "x.yaml:5:45: $.selected_context[0].start_line: expected a number >= 1, got 0",
        "x.yaml:6:14: $.open_files[0]: expected an object, got a string",
        "x.yaml:7:17: $.action_context: expected an object, got an array",
        "x.yaml:9:16: $.context.environment: missing required key 'cwd'",
        "x.yaml:9:16: $.context.environment: missing required key 'shell'",
        "x.yaml:9:16: $.context.environment: missing required key 'workspace_roots'",
        "x.yaml:10:46: $.context.git: unknown key 'extra' "
        "(expected one of: branch, dirty, head, remote)",
        "x.yaml:11:11: $.context.rules[0]: missing required key 'globs' "
        "(rules of kind 'auto' need a non-empty globs list)",
    ]


def test_a_plain_value_validates_like_a_document() -> None:
    text = VALID["agent_run_request"].replace("kind: user", "kind: nope")
    doc = load_yaml_text(text, "r.yaml")
    plain = validate_value(doc.value, "agent_run_request")
    located = validate_value(doc.value, "agent_run_request", doc)
    assert [(e.path, e.message) for e in plain] == [(e.path, e.message) for e in located]
    assert located[0].location == Location("r.yaml", 3, 7)


# --------------------------------------------------------------------------- the schemas


def test_schema_names_match_the_shipped_files() -> None:
    assert list(SCHEMA_NAMES) == sorted(SCHEMA_NAMES)
    files = sorted(p.name.removesuffix(".schema.json") for p in SCHEMA_DIR.glob("*.schema.json"))
    assert files == list(SCHEMA_NAMES)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    parsed = schema(name)
    assert parsed["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(parsed)


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_schema_text_and_no_id(name: str) -> None:
    text = schema_text(name)
    assert text == (SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8")
    assert json.loads(text) == schema(name)
    # no $id: every relative $ref resolves against the file's own location
    assert "$id" not in schema(name)
    assert text.endswith("}\n")


def test_schema_returns_a_copy() -> None:
    schema("tools")["properties"].clear()
    assert "tools" in schema("tools")["properties"]


def test_unknown_schema_name() -> None:
    with pytest.raises(ValueError, match="unknown schema 'nope'"):
        schema("nope")
    with pytest.raises(ValueError, match="unknown schema 'nope'"):
        validate_value({}, "nope")


def test_every_ref_resolves_to_a_sibling_file_and_pointer() -> None:
    assert ref_problems(SCHEMA_DIR) == []
    refs = [
        node["$ref"]
        for name in SCHEMA_NAMES
        for _, node in walk(schema(name))
        if isinstance(node, dict) and "$ref" in node
    ]
    assert any(ref.startswith("context.schema.json#") for ref in refs)  # cross-file refs exist
    assert not [ref for ref in refs if "http" in ref or "://" in ref]


def test_ref_problems_finds_what_an_editor_could_not_resolve(tmp_path: Path) -> None:
    (tmp_path / "a.schema.json").write_text(
        json.dumps(
            {
                "$id": "https://example.com/a.schema.json",
                "properties": {
                    "ok": {"$ref": "#/$defs/x"},
                    "self": {"$ref": "#/$defs/nope"},
                    "gone": {"$ref": "b.schema.json#/$defs/x"},
                    "far": {"$ref": "https://example.com/c.schema.json"},
                    "up": {"$ref": "../a.schema.json"},
                },
                "$defs": {"x": {}},
            }
        ),
        encoding="utf-8",
    )
    assert ref_problems(tmp_path) == [
        "a.schema.json#: has an $id 'https://example.com/a.schema.json'",
        "a.schema.json#/properties/self: $ref '#/$defs/nope': no schema at #/$defs/nope",
        "a.schema.json#/properties/gone: $ref 'b.schema.json#/$defs/x': no file b.schema.json",
        "a.schema.json#/properties/far: $ref 'https://example.com/c.schema.json' is not a"
        " sibling file",
        "a.schema.json#/properties/up: $ref '../a.schema.json' is not a sibling file",
    ]


def _property_schemas(value: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema that describes a property, an item or a definition (not if/then)."""
    if not isinstance(value, dict):
        return
    for key in ("properties", "$defs"):
        for name, sub in value.get(key, {}).items():
            yield f"{where}/{key}/{name}", sub
            yield from _property_schemas(sub, f"{where}/{key}/{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(value.get(key), dict):
            sub = value[key]
            if "$ref" not in sub:
                yield f"{where}/{key}", sub
            yield from _property_schemas(sub, f"{where}/{key}")


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_every_property_has_a_title_and_description(name: str) -> None:
    parsed = schema(name)
    assert parsed["title"] and parsed["description"]
    missing = [
        where
        for where, sub in _property_schemas(parsed, "#")
        if not (sub.get("title") and sub.get("description"))
    ]
    assert missing == []


FREE_FORM = {
    ("tools", "#/$defs/tool/properties/parameters"),
    ("context", "#/$defs/mcp_tool/properties/input_schema"),
    ("context", "#/$defs/string_map"),
    ("agent_run_request", "#/properties/action_context"),
    ("providers", "#/$defs/provider/properties/options"),
    ("providers", "#/$defs/cachedProvider/properties/options"),
    ("providers", "#/$defs/geminiProvider/properties/options"),
    ("providers", "#/$defs/openaiProvider/properties/options"),
    ("providers", "#/$defs/geminiProvider/properties/options/properties/toolConfig"),
    ("scenario", "#/$defs/tool_call/properties/arguments"),
    ("usage", "#/properties/report"),
}


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_objects_are_closed_except_free_form_ones(name: str) -> None:
    parsed = schema(name)
    found_free = set()
    for where, sub in [("#", parsed), *_property_schemas(parsed, "#")]:
        if sub.get("type") != "object":
            continue
        if (name, where) in FREE_FORM:
            found_free.add((name, where))
            assert sub.get("additionalProperties") is not False
            continue
        closed = sub.get("additionalProperties")
        assert closed is False or (isinstance(closed, dict) and "$ref" in closed), where
    assert found_free == {f for f in FREE_FORM if f[0] == name}


def test_validation_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("network used")

    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    validate._validator.cache_clear()
    validate._registry.cache_clear()
    for name in SCHEMA_NAMES:
        assert validate_document(load_yaml_text(VALID[name], "v.yaml"), name) == []


def test_the_registry_holds_the_schemas_under_their_file_names_and_retrieves_nothing() -> None:
    registry = validate._registry()
    for name in SCHEMA_NAMES:
        assert registry.contents(f"{name}.schema.json") == schema(name)
    for uri in ("https://prefixlock.dev/schemas/context.schema.json", "nope.schema.json"):
        with pytest.raises(NoSuchResource):
            registry.get_or_retrieve(uri)


# --------------------------------------------------------------------------- editor headers

SPEC_YAML = sorted((ROOT / "rules").glob("*.yaml"))
SCENARIO_YAML = sorted((ROOT / "golden").glob("*/scenario.yaml"))


def test_the_example_has_spec_files() -> None:
    assert len(SPEC_YAML) == 7 and SCENARIO_YAML


@pytest.mark.parametrize(
    "path", SPEC_YAML + SCENARIO_YAML, ids=lambda p: p.relative_to(ROOT).as_posix()
)
def test_yaml_first_line_points_at_a_local_schema(path: Path) -> None:
    schema_file = header_schema(path)
    assert schema_file is not None, "no relative `# yaml-language-server: $schema=` first line"
    assert schema_file.is_file()
    assert schema_file.parent == SCHEMA_DIR
    assert schema_file.name == f"{path.stem}.schema.json"  # rules/tools.yaml -> tools, ...
    # what an editor reports: refs resolved from the schema file's folder, nothing fetched
    assert editor_errors(path) == []


# --------------------------------------------------------------------------- house rules


def test_jsonschema_is_imported_only_by_the_validator() -> None:
    importers = []
    for package in ("compiler", "providers"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else []
                )
                if any(n.split(".")[0] in ("jsonschema", "referencing") for n in names):
                    importers.append(path.relative_to(ROOT).as_posix())
    assert sorted(set(importers)) == ["compiler/spec/validate.py"]
