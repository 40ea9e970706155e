"""Property tests of ``prefixlock convert claude-code``: random small valid transcripts
(tool loops, thinking, images, notes, compactions, sub-agents, rewinds) convert into
scenarios that load, replay and keep every invariant on every provider (the history's
and each wire's prefix), sub-agents' scenarios too; converting again gives the same
bytes."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from convert_fixtures import PNG, ClaudeSession, _sidechain
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prefixlock.review.convert import convert, write_converted
from prefixlock.review.invariants import check_bodies, check_history
from prefixlock.review.replay import replay, serialize_calls
from prefixlock.review.scenario import load_scenario
from prefixlock.spec.bundle import Bundle

BUNDLES: dict[Path, Bundle] = {}

ALL = ["anthropic", "openai-responses", "openai-chat", "gemini", "bedrock-converse"]

#: What a step of a generated session does.
OPS = st.sampled_from(["turn", "compact", "rewind", "meta", "image"])


Pick = Callable[[Sequence[Any]], Any]


def _thinking(pick: Pick, n: int) -> list[dict[str, Any]]:
    kind = pick(["none", "signed", "redacted", "unsigned"])
    if kind == "signed":
        return [{"type": "thinking", "thinking": f"think {n}", "signature": f"sig{n}=="}]
    if kind == "redacted":
        return [{"type": "redacted_thinking", "data": f"EmwK{n}"}]
    if kind == "unsigned":
        return [{"type": "thinking", "thinking": "cut off", "signature": ""}]
    return []


def session(ops: Sequence[str], pick: Pick) -> str:
    """A Claude Code transcript of ``ops``: user turns with tool loops, thinking (signed,
    redacted, unsigned), images, meta records, compactions, sub-agents (a Task call's
    sidechain) and rewinds (a prompt edited: a new branch from an earlier turn's
    parent); ``pick`` chooses among options."""
    s = ClaudeSession("sess-prop")
    n = 0
    cached = 0
    parents: list[str | None] = []  # where each turn's prompt hangs
    turns = 0
    for op in ops:
        if op == "compact" and turns:
            s.record("system", parent=None, subtype="compact_boundary", logicalParentUuid=s.last)
            s.user("Summary so far.", isCompactSummary=True)
            parents.clear()  # a rewind does not reach across it here
            cached = 0
            continue
        if op == "rewind" and parents:
            s.last = pick(parents)
        if op == "meta" and turns:
            s.user("<system-reminder>mind the tests</system-reminder>", isMeta=True)
            continue
        parents.append(s.last)
        turns += 1
        s.stamp(pick([1, 30, 400, 900]))
        if op == "image":
            image = {"type": "base64", "media_type": "image/png", "data": PNG}
            s.user([{"type": "text", "text": f"Look {turns}."}, {"type": "image", "source": image}])
        else:
            s.user(f"Turn {turns}.")
        for _ in range(pick([0, 1, 2])):
            n += 1
            name = pick(["Read", "Task", "Bash", "Unknown"])
            call = {"type": "tool_use", "id": f"toolu_{n}", "name": name, "input": {"n": n}}
            s.assistant(f"msg_{n}", [*_thinking(pick, n), call], read=cached, write=100)
            cached += 100
            if name == "Task":
                _sidechain(s, n)
            s.user([{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"out {n}"}])
        n += 1
        blocks = [*_thinking(pick, n), {"type": "text", "text": f"Done {turns}."}]
        s.assistant(f"msg_{n}", blocks, read=cached, write=50)
        cached += 50
    if not turns:
        s.user("Only turn.")
        s.assistant("msg_last", [{"type": "text", "text": "Done."}], read=0, write=10)
    return s.text()


@st.composite
def sessions(draw: Any) -> str:
    ops = draw(st.lists(OPS, min_size=1, max_size=7))
    return session(ops, lambda options: draw(st.sampled_from(options)))


def _cycling() -> Pick:
    """Picks each option of a list in turn (the explicit example covers every choice)."""
    counts: dict[tuple[Any, ...], int] = {}

    def pick(options: Sequence[Any]) -> Any:
        key = tuple(options) if len(options) < 5 else ("parents",)
        counts[key] = counts.get(key, -1) + 1
        return options[counts[key] % len(options)]

    return pick


#: Every kind of step at least once, every choice of the generator in turn.
EVERY = session(["turn", "image", "turn", "rewind", "meta", "compact", "turn", "image"], _cycling())


def _every_invariant(path: Path) -> int:
    """Replay the scenario at ``path``; assert every invariant on every provider; the
    number of calls."""
    scenario = load_scenario(path, bundles=BUNDLES)
    calls = replay(scenario)
    assert check_history(str(path), calls) == []
    epochs = [call.request.epoch for call in calls]
    for name, bodies in serialize_calls(calls, ALL).items():
        assert check_bodies(str(path), name, bodies, epochs=epochs) == [], name
    return len(calls)


@settings(max_examples=6, deadline=None)
@given(sessions())
@example(EVERY)
def test_random_sessions_convert_replay_and_keep_every_invariant(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "session.jsonl"
        source.write_text(text)
        converted = convert("claude-code", source)
        written = write_converted(converted, Path(folder) / "s.yaml")
        again = convert("claude-code", source)
        assert again.scenario_bytes() == written[0].read_bytes()  # byte for byte
        assert again.usage_bytes() == written[1].read_bytes()
        assert _every_invariant(written[0]) == len(converted.usage["calls"])
        for path in written[2::2]:  # each sub-agent's scenario
            _every_invariant(path)
