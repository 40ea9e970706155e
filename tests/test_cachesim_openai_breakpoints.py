"""The simulator's OpenAI explicit-breakpoint rules, GPT-5.6 and later (issue 45, item 3;
the rules and their sources: prefixlock.cache.rules): entries only at breakpoints (the
implicit one on the last block, the latest three explicit ones; mode explicit: four),
matched exactly at their boundary among the conversation's latest 80, each living its
ttl (30m by default, 12h on request) after its last write or read."""

from __future__ import annotations

from typing import Any

from prefixlock.cache.simulator import Simulation

MODEL = "gpt-5.6-sol"
#: 1,200 tokens at the default 4 bytes a token (the minimum is 1,024).
BIG = 4800


def _text(label: str, marked: str | None = None) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text", "text": (label + " ") * (BIG // (len(label) + 1))}
    if marked is not None:
        part["prompt_cache_breakpoint"] = {
            "mode": "explicit",
            **({"ttl": marked} if marked != "30m" else {}),
        }
    return part


def _body(*messages: tuple[str, str, str | None], **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [
            {"role": role, "content": [_text(label, marked)]} for role, label, marked in messages
        ],
        "prompt_cache_key": "k",
        **extra,
    }


ROOT = ("developer", "root", "30m")
ROOT_PLAIN = ("developer", "root", None)


def _size(*messages: tuple[str, str, str | None]) -> int:
    """The tokens of a prompt of these messages (breakpoints are no content)."""
    return int(Simulation("openai-chat", model=MODEL).add(_body(*messages)).input_tokens)


def _run(*calls: tuple[dict[str, Any], float]) -> list[Any]:
    sim = Simulation("openai-chat", model=MODEL)
    return [sim.add(body, at) for body, at in calls]


def test_a_changed_suffix_reads_exactly_up_to_the_breakpoint_before_it() -> None:
    first, second = _run(
        (_body(ROOT, ("user", "one", None)), 0.0), (_body(ROOT, ("user", "two", None)), 10.0)
    )
    assert first.cache_read_tokens == 0 and first.cache_write_tokens == first.input_tokens
    assert second.cache_read_tokens == _size(ROOT)  # the root, to its exact boundary
    assert second.cache_write_tokens == second.input_tokens - _size(ROOT)


def test_without_a_breakpoint_there_is_no_fallback_to_a_shorter_unmarked_prefix() -> None:
    """openai/codex#35300: the same large developer prefix, only the final user message
    changed, no explicit breakpoint: 0% cache hits."""
    _, second = _run(
        (_body(ROOT_PLAIN, ("user", "one", None)), 0.0),
        (_body(ROOT_PLAIN, ("user", "two", None)), 10.0),
    )
    assert second.cache_read_tokens == 0


def test_a_tool_loop_reads_the_previous_calls_implicit_breakpoint() -> None:
    first, second = _run(
        (_body(ROOT_PLAIN, ("user", "one", None)), 0.0),
        (_body(ROOT_PLAIN, ("user", "one", None), ("tool", "out", None)), 8.0),
    )
    assert second.cache_read_tokens == first.input_tokens
    assert second.cache_write_tokens == second.input_tokens - first.input_tokens > 1024


def test_entries_live_30_minutes_after_their_last_use_and_12h_on_request() -> None:
    base = (_body(ROOT, ("user", "one", "12h")), 0.0)
    loop = _body(ROOT, ("user", "one", "12h"), ("tool", "out", None))
    late = _run(base, (loop, 1801.0))[1]
    one = _size(ROOT, ("user", "one", None))
    assert late.cache_read_tokens == one  # the 12h entry on the user message
    plain = (_body(ROOT, ("user", "one", None)), 0.0)
    cold = _run(plain, (_body(ROOT, ("user", "one", None), ("tool", "out", None)), 1801.0))[1]
    assert cold.cache_read_tokens == 0
    warm = _run(plain, (_body(ROOT, ("user", "one", None), ("tool", "out", None)), 1799.0))[1]
    assert warm.cache_read_tokens == one
    # a read refreshes: 1,500 s, then 1,500 s more (3,000 s after the write)
    sim = Simulation("openai-chat", model=MODEL)
    sim.add(_body(ROOT, ("user", "one", None)), 0.0)
    sim.add(_body(ROOT, ("user", "two", None)), 1500.0)
    assert sim.add(_body(ROOT, ("user", "three", None)), 3000.0).cache_read_tokens == _size(ROOT)
    # the request ttl (Responses' prompt_cache_options.ttl 12h) for every entry it writes
    options = {"prompt_cache_options": {"ttl": "12h"}}
    sim = Simulation("openai-chat", model=MODEL)
    sim.add(_body(ROOT, ("user", "one", None), **options), 0.0)
    call = sim.add(_body(ROOT, ("user", "one", None), ("tool", "x", None)), 7200.0)
    assert call.cache_read_tokens == one


def test_only_the_latest_80_breakpoints_of_the_conversation_are_considered() -> None:
    def reads_root_after(others: int) -> int:
        sim = Simulation("openai-chat", model=MODEL)
        sim.add(_body(ROOT, ("user", "one", None)), 0.0)  # entries: root, root+one
        for i in range(others):  # each writes one entry (its implicit breakpoint)
            sim.add(_body(("developer", f"other{i}", None)), 1.0)
        return sim.add(_body(ROOT, ("user", "two", None)), 2.0).cache_read_tokens

    assert reads_root_after(78) == _size(ROOT)  # root is the 80th latest
    assert reads_root_after(79) == 0


def test_a_request_writes_its_implicit_and_latest_three_explicit_breakpoints() -> None:
    marked = [("user", f"m{i}", "30m") for i in range(5)]
    sim = Simulation("openai-chat", model=MODEL)
    sim.add(_body(*marked, ("user", "tail", None)), 0.0)
    # the first two explicit breakpoints were not written: no entry at m0 nor m1
    assert sim.add(_body(*marked[:2], ("user", "other", None)), 1.0).cache_read_tokens == 0
    sim = Simulation("openai-chat", model=MODEL)
    sim.add(_body(*marked, ("user", "tail", None)), 0.0)
    assert sim.add(_body(*marked[:3], ("user", "other", None)), 1.0).cache_read_tokens == _size(
        *marked[:3]
    )


def test_mode_explicit_writes_the_latest_four_and_no_implicit_one() -> None:
    marked = [("user", f"m{i}", "30m") for i in range(5)]
    options = {"prompt_cache_options": {"mode": "explicit"}}
    sim = Simulation("openai-chat", model=MODEL)
    first = sim.add(_body(*marked, ("user", "tail", None), **options), 0.0)
    assert first.cache_write_tokens == _size(*marked)  # up to m4, the tail uncached
    read = sim.add(_body(*marked[:2], ("user", "other", None)), 1.0).cache_read_tokens
    assert read == _size(*marked[:2])
    sim = Simulation("openai-chat", model=MODEL)
    sim.add(_body(*marked, ("user", "tail", None), **options), 0.0)
    tail = _body(*marked, ("user", "tail", None), ("tool", "t", None))
    assert sim.add(tail, 1.0).cache_read_tokens == _size(*marked)  # no entry at the tail


def test_a_prefix_below_1024_tokens_writes_no_entry() -> None:
    small = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "x" * 4000}],
        "prompt_cache_key": "k",
    }
    first, second = _run((small, 0.0), (small, 1.0))
    assert first.cache_write_tokens == 0 and second.cache_read_tokens == 0
