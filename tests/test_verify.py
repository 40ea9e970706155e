"""``prefixlock verify``: a good scenario passes; broken bodies and histories are caught
with the provider, the call, the JSON path and the spec line that produced the text."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from prefixlock.cache.simulator import Simulation, simulate
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.messages import CanonicalMessage, MessageKind, Role, TextPart
from prefixlock.core.model import ModelRequest
from prefixlock.review.invariants import Failure, check_bodies, check_history
from prefixlock.review.replay import Call, replay, replay_bodies, serialize_calls
from prefixlock.review.scenario import load_scenario
from prefixlock.review.sources import SourceIndex
from prefixlock.review.verify import (
    OTHER_TZ,
    Report,
    Row,
    _other_environment,
    call_time,
    verify,
    verify_scenario,
)
from prefixlock.spec.build import build_bundle, find_example_root
from prefixlock.spec.loader import load_yaml_file

REPO = Path(__file__).resolve().parents[1]
RUNTIME = "prompt/cursor/agent/runtime.md.j2"

#: 7 model calls: two context changes, a tool loop, a background event, a retry, a
#: restart, an automatic and a manual compaction.
SCENARIO = """\
name: small
conversation: conv-small
base:
  mode: agent
  context:
    rules:
      - {name: house-style, kind: always, body: "Use tabs."}
    environment: {os: linux, shell: bash, cwd: /home/dev/app, workspace_roots: [/home/dev/app]}
    git: {branch: main, head: abc1234, dirty: false}
steps:
  - user: {event: u1, query: "fix the bug", timestamp: "2025-01-01T10:00:00Z"}
  - assistant: {text: "Reading.", tool_calls: [{id: c1, name: read_file, arguments: {path: a.py}}]}
  - tool_results: [{call_id: c1, output: "print(1)"}]
  - assistant: {text: "Done."}
  - user:
      event: u2
      query: "now on a branch"
      context: {git: {branch: feature/x, head: abc1234, dirty: false}}
  - assistant: {text: "OK."}
  - background: {event: b1, text: "subagent finished"}
  - retry: u2
  - restart: true
  - assistant: {text: "Noted."}
  - user: {event: u3, query: "compact please", compact: {summary: "We fixed a bug."}}
  - assistant: {text: "Ok."}
  - compact: {summary: "Manual summary."}
  - user: {event: u4, query: "again"}
"""


@pytest.fixture(scope="module")
def scenario_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenario") / "scenario.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def anthropic_bodies(scenario_file: Path) -> list[bytes]:
    calls = replay(load_scenario(scenario_file))
    return serialize_calls(calls, ["anthropic"])["anthropic"]


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> SourceIndex:
    """Sources of the project's bundle, displayed relative to the repository."""
    monkeypatch.chdir(REPO)
    return SourceIndex(REPO)


def line_of(path: str, needle: str) -> int:
    lines = (REPO / path).read_text(encoding="utf-8").split("\n")
    return next(i for i, line in enumerate(lines, start=1) if needle in line)


def edited(body: bytes, change: Any) -> bytes:
    value = canonical.loads(body)
    change(value)
    return canonical.dumpb(value)


# --- a good scenario ----------------------------------------------------------------------


def test_verify_passes_on_a_good_scenario(scenario_file: Path) -> None:
    report = verify([scenario_file])  # with the hash-seed subprocess
    assert report.failures == ()
    assert {row.scenario for row in report.rows} == {scenario_file.parent.name}
    assert [row.provider for row in report.rows] == [
        "anthropic",
        "bedrock-anthropic",
        "bedrock-converse",
        "gemini",
        "openai-chat",
        "openai-responses",
    ]
    for row in report.rows:
        assert (row.name, row.calls, row.context_messages, row.prefix_stable) == (
            "small",
            7,
            4,
            True,
        )
        assert 0 < row.cost_ratio < 1 and 0 < row.cached_share < 1
        assert 0 < row.bytes_reused < 1


def test_the_hash_seed_replay_runs_under_another_seed_zone_and_locale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTHONHASHSEED", "1")
    env = _other_environment()
    assert (env["PYTHONHASHSEED"], env["TZ"], env["LC_ALL"]) == ("2", OTHER_TZ, "C")
    monkeypatch.delenv("PYTHONHASHSEED")
    assert _other_environment()["PYTHONHASHSEED"] == "1"


# --- broken bodies ------------------------------------------------------------------------


def test_a_call_that_rewrites_an_earlier_message_is_a_prefix_break(
    anthropic_bodies: list[bytes], in_repo: SourceIndex
) -> None:
    def rewrite(body: dict[str, Any]) -> None:
        block = body["messages"][1]["content"][0]  # call 1's runtime message
        block["text"] = block["text"].replace("<user_query>", "<user_request>")

    bodies = [anthropic_bodies[0], edited(anthropic_bodies[1], rewrite)]
    [failure] = check_bodies("small", "anthropic", bodies, sources=in_repo)
    assert failure == Failure(
        scenario="small",
        check="prefix",
        message="not a tail append of call 1",
        provider="anthropic",
        call=2,
        path="$.messages[1].content[0].text",
        old="'…>\\n</runtime>\\n\\n<user_query>\\nfix the bug\\n</user_query>\\n'",
        new="'…>\\n</runtime>\\n\\n<user_request>\\nfix the bug\\n</user_query>\\n'",
        source=f"{RUNTIME}:{line_of(RUNTIME, '<user_query>')}",
    )
    assert failure.lines() == [
        "FAIL small · anthropic · call 2 · prefix: not a tail append of call 1",
        "  at $.messages[1].content[0].text",
        f"  old: {failure.old}",
        f"  new: {failure.new}",
        f"  source: {failure.source}",
    ]


def test_a_changed_tool_points_at_its_spec_line(
    anthropic_bodies: list[bytes], in_repo: SourceIndex
) -> None:
    name = canonical.loads(anthropic_bodies[0])["tools"][0]["name"]

    def reword(body: dict[str, Any]) -> None:
        body["tools"][0]["description"] = "Changed."

    bodies = [*anthropic_bodies[:2], edited(anthropic_bodies[2], reword)]
    [failure] = check_bodies("small", "anthropic", bodies, sources=in_repo)
    doc = load_yaml_file(REPO / "rules/tools.yaml")
    index = [t["name"] for t in doc.value["tools"]].index(name)
    line = doc.location(f"$.tools[{index}].description").line
    assert (failure.check, failure.call, failure.path, failure.new) == (
        "prefix",
        3,
        "$.tools[0].description",
        "'Changed.'",
    )
    assert failure.source == f"rules/tools.yaml:{line}"


def test_across_a_compaction_only_the_frame_must_stay(anthropic_bodies: list[bytes]) -> None:
    first, second = anthropic_bodies[0], anthropic_bodies[5]  # call 6 starts epoch 1
    assert check_bodies("s", "anthropic", [first, second], epochs=[0, 1]) == []
    [same_epoch] = check_bodies("s", "anthropic", [first, second], epochs=[0, 0])
    assert (same_epoch.check, same_epoch.path) == ("prefix", "$.messages[1].content[0].text")

    def drop_tool(body: dict[str, Any]) -> None:
        del body["tools"][-1]

    [frame] = check_bodies("s", "anthropic", [first, edited(second, drop_tool)], epochs=[0, 1])
    assert (frame.check, frame.message) == (
        "root",
        "the frame changed across the compaction after call 1",
    )
    assert frame.path is not None and frame.path.startswith("$.tools[")


def test_a_retry_must_repeat_the_original_bytes(anthropic_bodies: list[bytes]) -> None:
    bodies = [anthropic_bodies[0], anthropic_bodies[1]]
    [failure] = check_bodies("s", "anthropic", bodies, retries={2: 1})
    assert (failure.check, failure.call, failure.message) == (
        "retry",
        2,
        "retry is not byte-identical to call 1",
    )
    assert check_bodies("s", "anthropic", [bodies[0], bodies[0]], retries={2: 1}) == []


# --- broken histories ---------------------------------------------------------------------


def msg(mid: str, text: str | None = None) -> CanonicalMessage:
    kinds = {
        "request-context": MessageKind.REQUEST_CONTEXT,
        "runtime": MessageKind.RUNTIME,
        "event": MessageKind.EVENT,
        "summary": MessageKind.SUMMARY,
        "assistant": MessageKind.ASSISTANT,
    }
    kind = kinds[mid.partition(":")[0]]
    role = Role.ASSISTANT if kind is MessageKind.ASSISTANT else Role.USER
    return CanonicalMessage.create(mid, kind, role, (TextPart(text or mid),))


def call(
    index: int,
    kind: str,
    event: str,
    messages: list[CanonicalMessage],
    epoch: int = 0,
    instructions: str = "I",
) -> Call:
    request = ModelRequest("c", instructions, (), (), tuple(messages), (), "k", epoch)
    return Call(index, index, kind, event, request)


CTX_A = msg("request-context:u1", "A")
RT1 = msg("runtime:u1")


def test_a_well_formed_history_passes() -> None:
    calls = [
        call(1, "user", "u1", [CTX_A, RT1]),
        call(2, "user", "u2", [CTX_A, RT1, msg("assistant:1"), msg("runtime:u2")]),
        call(3, "retry", "u1", [CTX_A, RT1]),
    ]
    assert check_history("s", calls) == []


@pytest.mark.parametrize(
    ("messages", "kind", "event", "expected"),
    [
        (
            [CTX_A, RT1, msg("request-context:u2", "A"), msg("runtime:u2")],
            "user",
            "u2",
            "'request-context:u2' repeats the content of 'request-context:u1' (an unchanged "
            "context must not be appended again)",
        ),
        (
            [CTX_A, RT1, msg("request-context:u2", "B"), msg("event:b1")],
            "background",
            "b1",
            "'request-context:u2' at message 2 is followed by 'event:b1', not its turn's "
            "runtime message",
        ),
        (
            [CTX_A, RT1, RT1],
            "user",
            "u1",
            "message 'runtime:u1' appears 2 times in the request",
        ),
        (
            [CTX_A, RT1, RT1, RT1],
            "user",
            "u1",
            "message 'runtime:u1' appears 3 times in the request",
        ),
        (
            [CTX_A, RT1],
            "user",
            "u2",
            "the request ends with 'runtime:u1', not the message its event appended ('runtime:u2')",
        ),
    ],
)
def test_history_checks_name_what_is_wrong(
    messages: list[CanonicalMessage], kind: str, event: str, expected: str
) -> None:
    failures = check_history("s", [call(1, kind, event, messages)])
    assert [f.message for f in failures] == [expected]
    assert failures[0].call == 1


def test_compaction_order_is_checked() -> None:
    before = call(1, "user", "u1", [CTX_A, RT1])
    manual = call(
        2,
        "user",
        "u2",
        [msg("summary:1"), msg("request-context:u2", "B"), msg("runtime:u2")],
        epoch=1,
    )
    automatic = call(2, "user", "u2", [CTX_A, msg("summary:1"), msg("runtime:u2")], epoch=1)
    assert check_history("s", [before, manual]) == []
    assert check_history("s", [before, automatic]) == []
    stale = call(2, "user", "u2", [msg("summary:1"), CTX_A, msg("runtime:u2")], epoch=1)
    [failure] = check_history("s", [before, stale])  # the reprojected context is this turn's
    assert failure.message == (
        "'request-context:u1' at message 1 is followed by 'runtime:u2', not its turn's "
        "runtime message"
    )
    # a note recorded after the compaction (an event, no call) comes before the user
    # turn that reprojects the context
    noted = [msg("summary:1"), msg("event:n1"), msg("request-context:u2", "B"), msg("runtime:u2")]
    assert check_history("s", [before, call(2, "user", "u2", noted, epoch=1)]) == []
    [failure] = check_history("s", [before, call(2, "user", "u2", noted[:2] + noted[3:], epoch=1)])
    assert failure.message == (
        "epoch 1 (manual compaction): the next user turn must reproject the request context "
        "after the summary, found ['summary', 'event', 'runtime']"
    )
    bad = call(2, "user", "u2", [msg("summary:1"), msg("runtime:u2")], epoch=1)
    [failure] = check_history("s", [before, bad])
    assert failure.message == (
        "epoch 1 (manual compaction): the next user turn must reproject the request context "
        "after the summary, found ['summary', 'runtime']"
    )
    new_same = call(
        2,
        "user",
        "u2",
        [msg("request-context:u2", "A"), msg("summary:1"), msg("runtime:u2")],
        epoch=1,
    )
    [failure] = check_history("s", [before, new_same])
    assert failure.message == (
        "automatic compaction appended 'request-context:u2' although the context did not "
        "change (keep 'request-context:u1')"
    )
    runtime_first = call(
        2, "user", "u2", [msg("event:b1"), msg("summary:1"), msg("runtime:u2")], epoch=1
    )
    [failure] = check_history("s", [before, runtime_first])
    assert failure.message == (
        "epoch 1 starts with ['event', 'summary', 'runtime']; expected [summary] (manual) or "
        "[request_context, summary, runtime] (automatic)"
    )


def test_changed_instructions_point_at_the_instructions_line(in_repo: SourceIndex) -> None:
    text = (REPO / "prompt/cursor/instructions.md").read_text(encoding="utf-8")
    lines = text.split("\n")
    lines[3] = lines[3] + " (edited)"
    calls = [
        call(1, "user", "u1", [CTX_A, RT1], instructions=text),
        call(2, "user", "u1", [CTX_A, RT1], instructions="\n".join(lines)),
    ]
    [failure] = check_history("s", calls, in_repo)
    assert (failure.check, failure.message, failure.source) == (
        "root",
        "instructions changed",
        "prompt/cursor/instructions.md:4",
    )


# --- command line -------------------------------------------------------------------------


def test_json_output_shape(scenario_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["verify", str(scenario_file), "--json", "--no-hash-seed", "--provider", "anthropic"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert out == canonical.dumps(json.loads(out)) + "\n"  # canonical JSON
    report = json.loads(out)
    assert sorted(report) == ["failures", "format", "ok", "results", "stale_locks", "tokenizer"]
    assert report["stale_locks"] == []
    assert (report["ok"], report["failures"], report["tokenizer"]) == (True, [], "estimate")
    [row] = report["results"]
    assert sorted(row) == [
        "bytes_reused",
        "cached_share",
        "calls",
        "context_messages",
        "cost_ratio",
        "cost_vs_bound",
        "cost_vs_naive",
        "file",
        "name",
        "prefix_stable",
        "provider",
        "scenario",
        "switches",
    ]
    assert (row["provider"], row["calls"], row["context_messages"]) == ("anthropic", 7, 4)
    assert row["switches"] == []  # the scenario has no switch step


def test_the_table(scenario_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["verify", str(scenario_file), "--no-hash-seed", "--provider", "gemini"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split() == [
        "scenario", "provider", "calls", "contexts", "prefix-stable", "bytes", "reused",
        "cached", "tokens", "cost", "vs", "uncached", "vs", "perfect", "cache", "vs", "naive",
    ]  # fmt: skip
    assert lines[1].split()[:5] == [scenario_file.parent.name, "gemini", "7", "4", "yes"]
    assert lines[-1] == "1 scenario(s) x 1 provider(s): every invariant holds"


def test_report_table_layout() -> None:
    row = Row("s", "S", "s.yaml", "gemini", 3, 1, False, 0.5, 0.25, 0.125, 1.0625, 0.3125)
    report = Report((row,), (Failure("s", "prefix", "x"),), "estimate")
    assert report.table().splitlines() == [
        "scenario  provider  calls  contexts  prefix-stable  bytes reused  cached tokens"
        "  cost vs uncached  vs perfect cache  vs naive",
        "s         gemini        3         1             NO         50.0%          25.0%"
        "             12.5%             1.06x     0.31x",
    ]
    assert row.to_json()["cost_vs_bound"] == 1.0625
    assert row.to_json()["cost_vs_naive"] == 0.3125
    assert not report.ok


def test_input_errors_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["verify", str(tmp_path / "missing.yaml")]) == 2
    assert "no such scenario file or folder" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nconversation: c\nsteps: []\nunknown: 1\n", encoding="utf-8")
    assert main(["verify", str(bad), "--no-hash-seed"]) == 2
    assert "unknown" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)  # no golden/ here
    assert main(["verify"]) == 2
    assert "no scenarios" in capsys.readouterr().err
    assert main(["verify", str(bad), "--provider", "antropic"]) == 2
    assert "did you mean 'anthropic'" in capsys.readouterr().err


def test_bytes_that_differ_under_another_hash_seed_are_reported(
    scenario_file: Path, anthropic_bodies: list[bytes], in_repo: SourceIndex
) -> None:
    def reorder(body: dict[str, Any]) -> None:
        block = body["messages"][0]["content"][0]  # call 1's request context
        block["text"] = block["text"].replace("house-style", "house-styles")

    elsewhere = {"anthropic": [edited(anthropic_bodies[0], reorder), *anthropic_bodies[1:]]}
    rows, failures = verify_scenario(
        load_scenario(scenario_file), ["anthropic"], elsewhere=elsewhere
    )
    [failure] = failures
    assert (failure.check, failure.provider, failure.call, failure.path) == (
        "hash seed",
        "anthropic",
        1,
        "$.messages[0].content[0].text",
    )
    assert failure.message.startswith("replay in a subprocess under PYTHONHASHSEED=")
    assert failure.source == f"{scenario_file}:7"  # the rule's line in the scenario
    assert failure.step == f"{scenario_file}:11:5 $.steps[0].user"  # the call's step
    root = find_example_root()
    note = f"bundle: {root}, sha256:{build_bundle(root).digest[7:19]}"
    assert failure.bundle == note
    assert failure.lines()[-2:] == [f"  step: {scenario_file}:11:5 $.steps[0].user", f"  {note}"]
    assert failure.to_json()["step"] == failure.step
    assert rows[0].prefix_stable  # the in-process replay itself is stable


def _bedrock_body(*contents: list[str]) -> bytes:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": t} for t in texts]}
        for i, texts in enumerate(contents)
    ]
    return canonical.dumpb({"inferenceConfig": {"maxTokens": 10}, "messages": messages})


def test_prefix_is_checked_block_by_block() -> None:
    # Invariant 1 on the wire: the (role, content block) pairs of call N are a prefix of
    # call N+1's; the last wire message may gain blocks (Bedrock), nothing else changes.
    grown = [_bedrock_body(["ctx", "q"]), _bedrock_body(["ctx", "q", "event"], ["a"])]
    assert check_bodies("s", "bedrock-converse", grown) == []
    changed = [_bedrock_body(["ctx", "q"], ["a"]), _bedrock_body(["ctx", "q", "x"], ["a"])]
    [failure] = check_bodies("s", "bedrock-converse", changed)
    assert (failure.check, failure.call, failure.path) == ("prefix", 2, "$.messages[0].content[2]")


def test_the_cost_column_expires_caches_by_the_scenarios_timestamps() -> None:
    """long-session's user turns are 20-40 minutes apart: past the 5-minute TTL, so each
    turn writes its prefix again; the same bodies without times (every call within the
    TTL) cost less. Tool-result calls carry no time: they arrive with the turn."""
    path = Path(__file__).parent.parent / "golden" / "long-session" / "scenario.yaml"
    scenario = load_scenario(path)
    [row], failures = verify_scenario(scenario, ["anthropic"])
    assert not failures
    untimed = simulate("anthropic", replay_bodies(scenario, ["anthropic"])["anthropic"])
    assert row.cost_ratio > untimed.cost_ratio
    times = [call_time(scenario, c) for c in replay(scenario)]
    assert times[0] == datetime(2026, 3, 18, 9, 0, tzinfo=UTC).timestamp()
    assert None in times  # the tool-result calls


def test_the_perfect_cache_yardstick_follows_its_definition() -> None:
    """cost_vs_bound = simulated cost / the bound of the same simulated calls: every
    token written once, read by every later call that sends it at the same place (the
    longest prefix of blocks any earlier call sent; no minimum, no expiry). Across a
    compaction the unchanged tools and instructions are still read."""
    path = Path(__file__).parent.parent / "golden" / "automatic-compaction" / "scenario.yaml"
    scenario = load_scenario(path)
    rows, _ = verify_scenario(scenario, ["anthropic", "openai-chat"])
    calls = replay(scenario)
    epochs = [c.request.epoch for c in calls]
    assert len(set(epochs)) == 2  # one compaction
    for row in rows:
        sim = Simulation(row.provider)
        bodies = [serialize_calls([c], [row.provider])[row.provider][0] for c in calls]
        for c, body in zip(calls, bodies, strict=True):
            sim.add(body, call_time(scenario, c))
        # The reference: each call's blocks, as keys and token counts, against every
        # earlier call's, the naive way.
        sent: list[list[str]] = []
        bound = Fraction(0)
        for c, body in zip(sim.calls, bodies, strict=True):
            blocks = sim.layout.blocks(canonical.loads(body))
            keys = [canonical.dumps([list(b.tag), b.value]) for b in blocks]
            tokens = [sim._count(b) for b in blocks]
            shared = max((_common(keys, old) for old in sent), default=0)
            read = sum(tokens[:shared])
            assert read == c.bound_read_tokens, (row.provider, c.index)
            bound += read * c.read_multiplier + (c.input_tokens - read) * c.write_multiplier
            sent.append(keys)
        assert row.cost_vs_bound == pytest.approx(float(sim.report().cost / bound))
        first_after = sim.calls[epochs.index(1)]
        assert first_after.bound_read_tokens > 0  # the root, read across the compaction
        # 5-minute entries: the 20- and 25-minute gaps expire the cache (with the
        # example's cache_ttl auto, an epoch's first turn has them). OpenAI's 24h retention
        # (about 30 minutes) outlasts them: its implicit cache comes close.
        expires = min(c.lifetime for c in sim.calls) < 20 * 60
        assert (row.cost_vs_bound > 1.1) is expires, row.provider


def _common(a: list[str], b: list[str]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
