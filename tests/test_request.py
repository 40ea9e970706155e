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


@pytest.mark.parametrize(
    ("stamp", "problem"),
    [
        ("2026-13-45T99:99:99Z", "'2026-13-45T99:99:99Z': month 13 is not 01 to 12"),
        (
            "2026-12-02T10:00:00Z\n",
            "'2026-12-02T10:00:00Z\\n' is not an RFC 3339 timestamp like 2026-12-02T10:00:00Z",
        ),
        ("2026-02-29T10:00:00Z", "'2026-02-29T10:00:00Z': day 29 is not 01 to 28 in 2026-02"),
        ("2026-12-02T24:00:00Z", "'2026-12-02T24:00:00Z': time 24:00:00 is not a time of day"),
        ("2026-12-02T10:00:00+25:00", "'2026-12-02T10:00:00+25:00': offset 25:00 is not an offset"),
    ],
)
def test_timestamp_is_checked_as_rfc_3339_in_full(stamp: str, problem: str) -> None:
    value = {**VALUE, "timestamp": stamp}
    with pytest.raises(SpecErrors) as err:
        AgentRunRequest.from_value(value)
    assert str(err.value) == f"<request>: $.timestamp: {problem}"


def test_leap_second_and_offsets_are_valid_timestamps() -> None:
    for stamp in ("2024-02-29T23:59:60+05:30", "2026-12-02t10:00:00.123z"):
        assert AgentRunRequest.from_value({**VALUE, "timestamp": stamp}).timestamp == stamp
