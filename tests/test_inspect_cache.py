"""``prefixlock inspect STORE CONV --cache``: observed against predicted cache reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conv_helpers import example_bundle, user
from prefixlock import Conversation, SQLiteStore, ToolResult
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError
from prefixlock.core.messages import TextPart, ToolCallPart
from prefixlock.core.output import ModelOutput, Usage
from prefixlock.review.cacheuse import CacheUse, cache_use

PROMPT = 20_000


def _play(
    db: Path, conversation: str, read: float, times: tuple[str | None, str | None] = (None, None)
) -> None:
    """Three model calls (a turn, its tool loop, a second turn); the provider reports
    ``read`` of every prompt after the first as read from its cache. ``times``: the
    two turns' request timestamps."""
    conv = Conversation.open(SQLiteStore(db), example_bundle(), conversation)
    stamps = [{} if t is None else {"timestamp": t} for t in times]
    calls = 0

    def output(parts: tuple[TextPart | ToolCallPart, ...]) -> ModelOutput:
        nonlocal calls
        calls += 1
        cached = 0 if calls == 1 else int(PROMPT * read)
        used = Usage(PROMPT, cached, PROMPT - cached, 30, None, '{"source":"test"}')
        return ModelOutput("anthropic", parts, "end_turn", used)

    conv.handle(user("u1", conversation=conversation, **stamps[0]))
    conv.record(output((ToolCallPart("toolu_1", "read_file", '{"path":"a.py"}'),)))
    conv.tool_results([ToolResult("toolu_1", "print('a')")])
    conv.record(output((TextPart("It prints a."),)))
    conv.handle(user("u2", conversation=conversation, **stamps[1]))
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
    assert out[0].split() == [
        "call",
        "seq",
        "provider",
        "sent",
        "prompt",
        "predicted",
        "read",
        "written",
    ]
    assert out[2].endswith("FEWER CACHED THAN PREDICTED")
    assert out[-2] == "3 recorded call(s), 2 with fewer cached than predicted"
    assert out[-1] == (
        "no request of these calls carried a timestamp: cache entries are predicted never to expire"
    )
    assert main(["inspect", str(db), "cold", "--cache", "--json"]) == 1
    value = canonical.loads(capsys.readouterr().out)
    assert value["flagged"] == [2, 3]
    assert value["calls"][0]["cache_write_tokens"] == PROMPT
    # a generous slack accepts anything
    assert main(["inspect", str(db), "cold", "--cache", "--slack", "1"]) == 0


def test_a_call_after_an_idle_gap_is_predicted_to_miss_not_flagged(tmp_path: Path) -> None:
    """The turns' request timestamps are stored with their records: a call ten minutes
    after the last one finds its 5-minute entries gone, as the provider would, and reading
    nothing then is what the prefix predicts. The tool-loop call has no timestamp of its
    own: it comes right after the call before it (as verify prices scenario calls)."""
    db = tmp_path / "s.db"
    _play(db, "idle", read=0.0, times=("2026-12-02T10:00:00Z", "2026-12-02T10:10:00Z"))
    with SQLiteStore(db) as store:
        report = cache_use(store, "idle")
    assert [c.timestamp for c in report.calls] == [
        "2026-12-02T10:00:00Z",
        None,
        "2026-12-02T10:10:00Z",
    ]
    assert report.calls[1].predicted_share > 0.5  # the tool loop: still cached
    assert report.calls[2].predicted_share == 0.0  # after the gap: expired
    assert report.calls[2].predicted_tokens == 0
    assert [c.flagged for c in report.calls] == [False, True, False]


def test_a_call_within_the_cache_lifetime_is_still_predicted_to_hit(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _play(db, "busy", read=0.0, times=("2026-12-02T10:00:00Z", "2026-12-02T10:04:00+00:00"))
    with SQLiteStore(db) as store:
        report = cache_use(store, "busy")
    assert report.calls[2].predicted_share > 0.5
    assert [c.flagged for c in report.calls] == [False, True, True]
    value = report.to_json()
    assert [c["timestamp"] for c in value["calls"]] == [
        "2026-12-02T10:00:00Z",
        None,
        "2026-12-02T10:04:00+00:00",
    ]


def test_the_prediction_is_verify_s_pricing_of_the_same_bodies(tmp_path: Path) -> None:
    """Shares equal the simulator's over the bodies the calls sent, each at its time:
    the same rules verify applies to a scenario."""
    from prefixlock import providers
    from prefixlock.cache.simulator import simulate
    from prefixlock.core.timestamps import seconds

    db = tmp_path / "s.db"
    times = ("2026-12-02T10:00:00Z", "2026-12-02T10:06:00Z")
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "same")
    wire = providers.get("anthropic")
    bodies = [wire.serialize(conv.handle(user("u1", conversation="same", timestamp=times[0])))]
    used = Usage(PROMPT, 0, PROMPT, 30, None, "{}")
    conv.record(ModelOutput("anthropic", (TextPart("a"),), "end_turn", used))
    bodies.append(wire.serialize(conv.handle(user("u2", conversation="same", timestamp=times[1]))))
    conv.record(ModelOutput("anthropic", (TextPart("b"),), "end_turn", used))
    expected = simulate("anthropic", bodies, times=[seconds(t) for t in times])
    with SQLiteStore(db) as store:
        report = cache_use(store, "same")
    assert [c.predicted_share for c in report.calls] == [
        c.cache_read_tokens / c.input_tokens for c in expected.calls
    ]
    without = simulate("anthropic", bodies)
    assert [c.cache_read_tokens for c in without.calls] != [
        c.cache_read_tokens for c in expected.calls
    ]


def test_a_conversation_without_recorded_usage_says_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "plain")
    conv.handle(user("u1", conversation="plain"))
    conv.assistant("Let me look.")
    assert main(["inspect", str(db), "plain", "--cache"]) == 0
    assert capsys.readouterr().out == (
        "plain: no model call was recorded with its usage, so there is nothing to compare: "
        "Conversation.record(output) stores what the provider reported "
        "(docs/agent-loop.md); Conversation.assistant does not\n"
    )
    assert main(["inspect", str(db), "plain", "--cache", "--json"]) == 0
    assert canonical.loads(capsys.readouterr().out)["calls"] == []


def _tool_loop(db: Path, conversation: str, turn_at: str, results_at: str) -> CacheUse:
    """A turn at ``turn_at``, one tool call, its results sent at ``results_at``; the
    provider reports no cache read. Returns the conversation's report."""
    conv = Conversation.open(SQLiteStore(db), example_bundle(), conversation)
    used = Usage(PROMPT, 0, PROMPT, 30, None, "{}")
    conv.handle(user("u1", conversation=conversation, timestamp=turn_at))
    call = ToolCallPart("toolu_1", "run_terminal_command", '{"command":"pytest"}')
    conv.record(ModelOutput("anthropic", (call,), "tool_use", used))
    conv.tool_results([ToolResult("toolu_1", "1 passed")], timestamp=results_at)
    conv.record(ModelOutput("anthropic", (TextPart("Green."),), "end_turn", used))
    with SQLiteStore(db) as store:
        return cache_use(store, conversation)


def test_a_tool_that_ran_past_the_cache_lifetime_is_predicted_to_miss(tmp_path: Path) -> None:
    """The tool-loop call is sent when its results are: six minutes after the turn's call
    (a long test run), its 5-minute entries are gone, and reading nothing is predicted."""
    report = _tool_loop(tmp_path / "s.db", "slow", "2026-12-02T10:00:00Z", "2026-12-02T10:06:00Z")
    assert [c.timestamp for c in report.calls] == ["2026-12-02T10:00:00Z", "2026-12-02T10:06:00Z"]
    assert report.calls[1].predicted_tokens == 0
    assert report.flagged == ()


def test_a_time_before_the_previous_call_s_is_priced_with_it_not_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two hosts of a fleet may disagree by seconds: the tool results' host stamps them
    4 s before the turn it answers. A store is read whatever its clients' clocks did."""
    db = tmp_path / "s.db"
    report = _tool_loop(db, "skew", "2026-12-02T10:00:05Z", "2026-12-02T10:00:01Z")
    assert report.earlier == (2,)
    assert report.calls[1].timestamp == "2026-12-02T10:00:01Z"  # as sent
    assert report.calls[1].predicted_share > 0.5  # as if sent with call 1
    assert main(["inspect", str(db), "skew", "--cache"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (
        "call(s) 2: the timestamp is before the previous call's (do two hosts' clocks "
        "disagree?); priced as sent with the previous call"
    )
    assert main(["inspect", str(db), "skew", "--cache", "--json"]) == 1
    assert canonical.loads(capsys.readouterr().out)["earlier"] == [2]
    assert main(["inspect", str(db), "--cache"]) == 1
    (row,) = capsys.readouterr().out.splitlines()[1:-1]
    assert row.endswith("  1 call(s) timed before the call before")


def test_an_untimed_call_follows_the_conversation_s_last_call_whoever_answered_it(
    tmp_path: Path,
) -> None:
    """A conversation that fails over between providers: an untimed tool-loop call is
    sent right after the call before it, on the conversation's clock, not on its own
    provider's (which last saw this conversation 20 minutes earlier, or never)."""
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "failover")

    def output(provider: str, part: TextPart | ToolCallPart, read: int) -> ModelOutput:
        used = Usage(PROMPT, read, PROMPT - read, 30, None, "{}")
        return ModelOutput(provider, (part,), "end_turn", used)

    conv.handle(user("u1", conversation="failover", timestamp="2026-12-02T10:00:00Z"))
    conv.record(output("anthropic", ToolCallPart("toolu_1", "read_file", "{}"), 0))
    conv.tool_results([ToolResult("toolu_1", "x")])
    conv.record(output("anthropic", TextPart("ok"), 19_000))
    conv.handle(user("u2", conversation="failover", timestamp="2026-12-02T10:20:00Z"))
    conv.record(output("openai-chat", ToolCallPart("call_2", "read_file", "{}"), 0))
    conv.tool_results([ToolResult("call_2", "y")])  # right after 10:20
    conv.record(output("anthropic", TextPart("done"), 0))  # anthropic's 10:00 entries: gone
    with SQLiteStore(tmp_path / "s.db") as store:
        report = cache_use(store, "failover")
    assert [(c.provider, c.timestamp) for c in report.calls] == [
        ("anthropic", "2026-12-02T10:00:00Z"),
        ("anthropic", None),
        ("openai-chat", "2026-12-02T10:20:00Z"),
        ("anthropic", None),
    ]
    assert report.calls[1].predicted_share > 0.5  # within a second of call 1
    assert report.calls[3].predicted_tokens == 0
    assert report.flagged == ()


def test_the_bodies_are_simulated_one_at_a_time_not_kept(tmp_path: Path) -> None:
    """A long conversation's bodies together are gigabytes: cache_use holds about one.
    40 tool-loop calls with 50 KB outputs: each body repeats the ones before, so keeping
    them all takes some 20 times the last body; streaming takes a few times it."""
    import tracemalloc

    from prefixlock import providers

    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "long")
    used = Usage(PROMPT, 0, PROMPT, 30, None, "{}")
    request = conv.handle(user("u1", conversation="long"))
    for n in range(40):
        call = ToolCallPart(f"toolu_{n}", "read_file", '{"path":"a.py"}')
        conv.record(ModelOutput("anthropic", (call,), "tool_use", used))
        request = conv.tool_results([ToolResult(f"toolu_{n}", f"{n} " + "x" * 50_000)])
    conv.record(ModelOutput("anthropic", (TextPart("done"),), "end_turn", used))
    last_body = len(providers.get("anthropic").serialize(request))
    with SQLiteStore(db) as store:
        tracemalloc.start()
        report = cache_use(store, "long")
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert len(report.calls) == 41
    assert peak < 8 * last_body, (peak, last_body)


def test_the_root_s_model_sets_the_rules_of_a_body_that_does_not_name_it(
    tmp_path: Path,
) -> None:
    """A Bedrock body names no model (it is in the URL), and Claude Opus 4.7 on Bedrock
    caches nothing under 4,096 tokens where the default is 1,024: a prompt of about 3,000
    tokens is predicted to read nothing, as the service would."""
    import shutil

    from prefixlock import build_bundle
    from prefixlock.cache.rules import rules_for

    model = "anthropic.claude-opus-4-7"
    assert rules_for("bedrock-converse", model).min_tokens == 4096
    assert rules_for("bedrock-converse", "").min_tokens == 1024
    root = tmp_path / "spec"
    shutil.copytree(Path(__file__).parent / "data" / "specs" / "minimal", root)
    providers_yaml = root / "rules" / "providers.yaml"
    providers_yaml.write_text(
        providers_yaml.read_text(encoding="utf-8")
        + f"  bedrock-converse: {{model: {model}, max_tokens: 4096}}\n",
        encoding="utf-8",
    )
    bundle = build_bundle(root)
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), bundle, "opus")
    used = Usage(3000, 0, 3000, 30, None, "{}")
    conv.handle(user("u1", "x " * 4000, conversation="opus", context={}))
    conv.record(ModelOutput("bedrock-converse", (TextPart("a"),), "end_turn", used))
    conv.handle(user("u2", conversation="opus", context={}))
    conv.record(ModelOutput("bedrock-converse", (TextPart("b"),), "end_turn", used))
    with SQLiteStore(db) as store:
        report = cache_use(store, "opus")
    assert [c.predicted_share for c in report.calls] == [0.0, 0.0]


def test_a_store_wide_sweep_has_a_line_per_conversation_and_fails_on_any_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``inspect STORE --cache``: what an operator's cron job runs over a fleet's store."""
    db = tmp_path / "s.db"
    _play(db, "cold", read=0.0)
    _play(db, "warm", read=0.99, times=("2026-12-02T10:00:00Z", "2026-12-02T10:01:00Z"))
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "plain")
    conv.handle(user("u1", conversation="plain"))
    conv.assistant("no usage")
    assert main(["inspect", str(db), "--cache"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["conversation", "calls", "predicted", "read", "flagged"]
    rows = {line.split()[0]: line.split()[1:] for line in out[1:-1]}
    assert rows["cold"][0] == "3" and rows["cold"][3] == "2"
    assert rows["cold"][4:] == ["no", "timestamps:", "nothing", "expires"]
    assert rows["warm"][0] == "3" and rows["warm"][3:] == ["0"]
    assert rows["plain"] == ["0", "0", "0", "0"]
    assert out[-1] == (
        "3 conversation(s), 6 recorded call(s), 2 with fewer cached than predicted in "
        "1 conversation(s)"
    )
    assert main(["inspect", str(db), "--cache", "--json"]) == 1
    value = canonical.loads(capsys.readouterr().out)
    assert value["format"] == "prefixlock.inspect-cache-list/1"
    lines = {c["conversation"]: c for c in value["conversations"]}
    assert sorted(lines) == ["cold", "plain", "warm"]
    assert lines["cold"]["flagged"] == [2, 3] and lines["cold"]["timed"] is False
    assert lines["warm"]["flagged"] == [] and lines["warm"]["timed"] is True
    with SQLiteStore(db) as store:
        warm = cache_use(store, "warm")
    assert lines["warm"]["predicted_cached_tokens"] == sum(
        c.predicted_tokens or 0 for c in warm.calls
    )
    # a store where every conversation read what was predicted passes
    other = tmp_path / "t.db"
    _play(other, "warm", read=0.99)
    assert main(["inspect", str(other), "--cache"]) == 0


def test_a_sweep_names_a_conversation_it_cannot_read_and_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One damaged conversation does not hide the others from an operator's cron job:
    its line says why it could not be read, and the sweep exits 1."""
    db = tmp_path / "s.db"
    for name in ("a-warm", "b-damaged", "c-warm"):
        _play(db, name, read=0.99, times=("2026-12-02T10:00:00Z", "2026-12-02T10:01:00Z"))
    with sqlite3.connect(db) as raw:
        raw.execute(
            "UPDATE records SET body = CAST(replace(CAST(body AS TEXT), 'It prints a.', "
            "'It prints b.') AS BLOB) WHERE conversation = 'b-damaged'"
        )
    with SQLiteStore(db) as store, pytest.raises(CheckpointError) as raised:
        cache_use(store, "b-damaged")
    problem = str(raised.value)
    assert main(["inspect", str(db), "--cache"]) == 1
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[1:-1]}
    assert sorted(rows) == ["a-warm", "b-damaged", "c-warm"]
    assert rows["a-warm"].split()[1:] == ["3", *rows["a-warm"].split()[2:4], "0"]
    assert rows["b-damaged"].split()[1:5] == ["-", "-", "-", "-"]
    assert rows["b-damaged"].endswith(f"cannot be read: {problem}")
    assert out[-1] == (
        "3 conversation(s), 6 recorded call(s), 0 with fewer cached than predicted in "
        "0 conversation(s); 1 conversation(s) could not be read"
    )
    assert main(["inspect", str(db), "--cache", "--json"]) == 1
    value = canonical.loads(capsys.readouterr().out)
    lines = {c["conversation"]: c for c in value["conversations"]}
    assert lines["b-damaged"] == {"conversation": "b-damaged", "error": problem}
    assert lines["c-warm"]["calls"] == 3 and "error" not in lines["c-warm"]


def test_a_call_after_a_failover_is_priced_as_the_failover_sent_it(tmp_path: Path) -> None:
    """Anthropic answers with signed thinking, then OpenAI Chat answers two calls: each
    OpenAI call is simulated on the body the conversation sent it (the thinking left out
    by the failover rule, never out of the history), not refused as another provider's
    opaque part."""
    from prefixlock import providers
    from prefixlock.cache.simulator import Simulation
    from prefixlock.core.messages import OpaquePart, Part

    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "failover")
    block = {"type": "thinking", "thinking": "t", "signature": "c2ln"}
    thinking = OpaquePart("anthropic", canonical.dumps(block))
    wire = providers.get("openai-chat")

    def output(provider: str, *parts: Part) -> ModelOutput:
        return ModelOutput(provider, parts, "end_turn", Usage(PROMPT, 0, PROMPT, 30, None, "{}"))

    sent: list[bytes] = []
    conv.handle(user("u1", conversation="failover", timestamp="2026-12-02T10:00:00Z"))
    conv.record(output("anthropic", thinking, ToolCallPart("toolu_1", "read_file", "{}")))
    conv.tool_results([ToolResult("toolu_1", "x")])
    sent.append(wire.serialize(conv.request(provider="openai-chat")))
    conv.record(output("openai-chat", ToolCallPart("call_2", "read_file", "{}")))
    conv.tool_results([ToolResult("call_2", "y")])
    sent.append(wire.serialize(conv.request(provider="openai-chat")))
    conv.record(output("openai-chat", TextPart("done")))
    assert all(b"c2ln" not in body for body in sent)  # the thinking stays with Claude
    model = conv.request().settings_for("openai-chat").model
    expected = Simulation("openai-chat", model=model)
    figures = [expected.add(body) for body in sent]
    shares = [f.cache_read_tokens / f.input_tokens for f in figures]
    with SQLiteStore(tmp_path / "s.db") as store:
        report = cache_use(store, "failover")
    assert [c.provider for c in report.calls] == ["anthropic", "openai-chat", "openai-chat"]
    assert [c.predicted_share for c in report.calls[1:]] == shares
    assert shares[0] == 0 and shares[1] > 0.5
