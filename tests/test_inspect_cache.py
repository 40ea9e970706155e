"""``prefixlock inspect STORE CONV --cache``: observed against predicted cache reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from conv_helpers import example_bundle, user
from prefixlock import Conversation, SQLiteStore, ToolResult
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.messages import TextPart, ToolCallPart
from prefixlock.core.output import ModelOutput, Usage
from prefixlock.review.cacheuse import cache_use

PROMPT = 20_000


def _play(db: Path, conversation: str, read: float) -> None:
    """Three model calls (a turn, its tool loop, a second turn); the provider reports
    ``read`` of every prompt after the first as read from its cache."""
    conv = Conversation.open(SQLiteStore(db), example_bundle(), conversation)
    calls = 0

    def output(parts: tuple[TextPart | ToolCallPart, ...]) -> ModelOutput:
        nonlocal calls
        calls += 1
        cached = 0 if calls == 1 else int(PROMPT * read)
        used = Usage(PROMPT, cached, PROMPT - cached, 30, None, '{"source":"test"}')
        return ModelOutput("anthropic", parts, "end_turn", used)

    conv.handle(user("u1", conversation=conversation))
    conv.record(output((ToolCallPart("toolu_1", "read_file", '{"path":"a.py"}'),)))
    conv.tool_results([ToolResult("toolu_1", "print('a')")])
    conv.record(output((TextPart("It prints a."),)))
    conv.handle(user("u2", conversation=conversation))
    conv.record(output((TextPart("Done."),)))


def test_a_provider_that_read_nothing_is_flagged_after_the_first_call(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _play(db, "cold", read=0.0)
    with SQLiteStore(db) as store:
        report = cache_use(store, "cold")
    assert [c.call for c in report.calls] == [1, 2, 3]
    assert [c.seq for c in report.calls] == [2, 4, 6]
    assert report.calls[0].predicted_tokens == 0
    assert all(c.predicted_share > 0.5 for c in report.calls[1:])
    assert [c.flagged for c in report.calls] == [False, True, True]


def test_a_provider_that_read_the_predicted_prefix_is_not_flagged(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _play(db, "warm", read=0.99)
    with SQLiteStore(db) as store:
        report = cache_use(store, "warm")
    assert report.flagged == ()
    for call in report.calls[1:]:
        assert call.cache_read_tokens is not None and call.predicted_tokens is not None
        assert call.cache_read_tokens >= call.predicted_tokens * (1 - report.slack)


def test_cli_table_json_and_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    _play(db, "cold", read=0.0)
    assert main(["inspect", str(db), "cold", "--cache"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["call", "seq", "provider", "prompt", "predicted", "read", "written"]
    assert out[2].endswith("FEWER CACHED THAN PREDICTED")
    assert out[-1] == "3 recorded call(s), 2 with fewer cached than predicted"
    assert main(["inspect", str(db), "cold", "--cache", "--json"]) == 1
    value = canonical.loads(capsys.readouterr().out)
    assert value["flagged"] == [2, 3]
    assert value["calls"][0]["cache_write_tokens"] == PROMPT
    # a generous slack accepts anything
    assert main(["inspect", str(db), "cold", "--cache", "--slack", "1"]) == 0
