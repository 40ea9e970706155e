"""AgentRunRequest: loadable from JSON or YAML, validated with exact located errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from conv_helpers import CONTEXT_A
from prefixlock.core import canonical
from prefixlock.core.errors import SpecErrors
from prefixlock.runtime.request import AgentRunRequest, RequestKind

VALUE = {
    "conversation_id": "conv-1",
    "event_id": "u1",
    "kind": "user",
    "mode": "ask",
    "query": "What does this do?",
    "timestamp": "2026-12-02T23:59:59Z",
    "open_files": [{"path": "src/app.py", "cursor_line": 12}],
    "context": CONTEXT_A,
}


def test_json_and_yaml_files_load_to_the_same_request(tmp_path: Path) -> None:
    json_file = tmp_path / "r.json"
    json_file.write_text(canonical.dumps(VALUE), encoding="utf-8")
    yaml_file = tmp_path / "r.yaml"
    yaml_file.write_text(
        "conversation_id: conv-1\nevent_id: u1\nkind: user\nmode: ask\n"
        "query: What does this do?\ntimestamp: 2026-12-02T23:59:59Z\n"
        "open_files:\n  - {cursor_line: 12, path: src/app.py}\n"
        f"context: {canonical.dumps(CONTEXT_A)}\n",
        encoding="utf-8",
    )
    from_json = AgentRunRequest.load(json_file)
    from_yaml = AgentRunRequest.load(yaml_file)
    assert from_json == from_yaml == AgentRunRequest.from_value(VALUE)
    assert from_json.kind is RequestKind.USER
    assert from_json.digest == from_yaml.digest


def test_bad_request_file_reports_every_error_with_location_and_path(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "conversation_id: conv-1\n"
        "event_id: u1\n"
        "kind: user\n"
        "query: hi\n"
        "context:\n"
        "  rules:\n"
        "    - {name: r1, kind: sometimes, body: x}\n"
        "  colour: blue\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecErrors) as err:
        AgentRunRequest.load(path)
    assert str(err.value) == (
        f"{path}:7:24: $.context.rules[0].kind: expected one of always, auto, agent, manual; "
        "got 'sometimes'\n"
        f"{path}:8:3: $.context: unknown key 'colour' "
        "(expected one of: environment, git, mcp, rules, skills, subagents)"
    )


def test_background_event_may_not_carry_a_query() -> None:
    with pytest.raises(SpecErrors) as err:
        AgentRunRequest.from_value(
            {
                "conversation_id": "c",
                "event_id": "b1",
                "kind": "background",
                "text": "t",
                "query": "q",
            }
        )
    assert str(err.value) == (
        "<request>: $: key 'query' is not allowed (only user turns take query, mode and compact)"
    )


def test_digest_ignores_key_order_but_not_content() -> None:
    reordered = dict(reversed(list(VALUE.items())))
    assert AgentRunRequest.from_value(reordered).digest == AgentRunRequest.from_value(VALUE).digest
    changed = {**VALUE, "timestamp": "2026-12-03T00:00:00Z"}
    assert AgentRunRequest.from_value(changed).digest != AgentRunRequest.from_value(VALUE).digest
