"""Streaming verify: the long-scenario generator, digests, and the sparse restarts."""

from __future__ import annotations

import copy
import json
import os
import pty
import queue
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import prefixlock.providers as providers
import pytest
from conv_helpers import REPO
from prefixlock.bench.scenarios import long_scenario, write_long_scenario
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.bodyscan import HistoryScanner
from prefixlock.review.invariants import check_bodies
from prefixlock.review.replay import (
    RESTART_EVERY_STEP,
    forget_encodings,
    iter_replay,
    replay_bodies,
    replay_digests,
    serialize_calls,
    sparse_restarts,
)
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import _DigestCheck, verify_scenario
from prefixlock.store.records import Record, RecordType


def test_long_scenario_makes_exactly_the_calls_asked_for(tmp_path: Path) -> None:
    scenario = load_scenario(write_long_scenario(tmp_path, 40))
    assert sum(1 for _ in iter_replay(scenario)) == 40
    assert long_scenario(40) == long_scenario(40)  # seeded


def test_streaming_verify_of_a_long_scenario_holds(tmp_path: Path) -> None:
    scenario = load_scenario(write_long_scenario(tmp_path, 30))
    rows, failures = verify_scenario(scenario, ["anthropic", "bedrock-converse"])
    assert failures == []
    assert [row.calls for row in rows] == [30, 30]


def test_digests_are_those_of_the_bodies(tmp_path: Path) -> None:
    import hashlib

    scenario = load_scenario(write_long_scenario(tmp_path, 12))
    bodies = replay_bodies(scenario, ["openai-chat"])["openai-chat"]
    digests = replay_digests(scenario, ["openai-chat"])["openai-chat"]
    assert digests == [hashlib.sha256(b).hexdigest() for b in bodies]


def test_replay_writes_digests(tmp_path: Path) -> None:
    path = write_long_scenario(tmp_path, 8)
    out = tmp_path / "digests.json"
    assert main(["replay", str(path), "--provider", "gemini", "--digests", str(out)]) == 0
    assert len(json.loads(out.read_text())["gemini"]) == 8


def test_sparse_restarts_are_everywhere_in_short_scenarios_and_geometric_after() -> None:
    due = sparse_restarts()
    picked = [i for i in range(4 * RESTART_EVERY_STEP) if due(i)]
    assert picked[:RESTART_EVERY_STEP] == list(range(RESTART_EVERY_STEP))
    later = picked[RESTART_EVERY_STEP:]
    assert len(later) < 20
    assert all(
        b - a >= a // 8 for a, b in zip(picked[RESTART_EVERY_STEP - 1 :], later, strict=False)
    )


def test_generated_turn_times_never_go_back() -> None:
    """One minute per call from 09:00: past 720 turns the clock crosses midnight into the
    next day instead of wrapping (the cache simulation refuses time going back)."""
    stamps = [s["user"]["timestamp"] for s in long_scenario(3000)["steps"] if "user" in s]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert stamps[-1].startswith("2026-03-20T")


# --- the CLI streams its table -------------------------------------------------------

#: Runs ``prefixlock`` with every scenario after the first held until the file
#: ``argv[1]`` exists: the first case's rows can only be read before the end if they are
#: printed when that case is done.
GATED = """
import pathlib, sys, time
import prefixlock.review.verify as verify
gate, done = pathlib.Path(sys.argv[1]), []
original = verify.verify_scenario
def gated(*args, **kwargs):
    while done and not gate.exists():
        time.sleep(0.02)
    done.append(1)
    return original(*args, **kwargs)
verify.verify_scenario = gated
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.bodyscan import HistoryScanner
from prefixlock.review.invariants import check_bodies
sys.exit(main(sys.argv[2:]))
"""

CASES = [REPO / "golden" / "context-revert", REPO / "golden" / "mcp-order"]
VERIFY = ["verify", *map(str, CASES), "--no-hash-seed", "--provider", "gemini"]


def _lines(stream: IO[bytes]) -> queue.Queue[str | None]:
    """The lines of ``stream`` as they arrive (None at its end), read by a thread."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line.decode("utf-8").rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def test_verify_prints_each_row_when_its_case_is_done(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    process = subprocess.Popen(
        [sys.executable, "-c", GATED, str(gate), *VERIFY],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        lines = _lines(process.stdout)
        header = lines.get(timeout=120)
        assert header is not None and header.split()[:3] == ["scenario", "provider", "calls"]
        first = lines.get(timeout=120)  # the second case is still held: this is streamed
        assert first is not None
        assert first.split()[:5] == ["context-revert", "gemini", "4", "3", "yes"]
        assert process.poll() is None
        gate.touch()
        rest = []
        while (line := lines.get(timeout=120)) is not None:
            rest.append(line)
        assert process.wait(timeout=120) == 0
        assert rest[0].split()[:2] == ["mcp-order", "gemini"]
        assert rest[-1] == "2 scenario(s) x 1 provider(s): every invariant holds"
        assert process.stderr.read() == b""  # not a terminal: no progress line
    finally:
        process.kill()  # a failed assertion must not leave the held child running
        process.wait()


def test_verify_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "prefixlock", *VERIFY], stdout=subprocess.PIPE, stderr=slave
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    assert seen == (
        b"\r\x1b[K[1/2] verifying context-revert...\r\x1b[K"
        b"\r\x1b[K[2/2] verifying mcp-order...\r\x1b[K\r\x1b[K"
    )
    assert b"\x1b" not in out and out.decode().splitlines()[1].startswith("context-revert")


def test_digest_check_is_equality_with_the_other_replays_list() -> None:
    """verify compares each call's body digest with the other replay's as it goes and
    keeps none of its own: equal means as many and each the same."""
    a, b = "a" * 64, "b" * 64
    for expected, made, equal in [
        ([a, b], [a, b], True),
        ([a, b], [a], False),
        ([a], [a, b], False),
        ([a, b], [b, a], False),
        ([], [], True),
        (["short"], ["short"], False),  # not a digest: never taken as equal
        (["g" * 64], ["g" * 64], False),  # 64 characters, not hex digits
        (["A" * 64], ["A" * 64], False),  # not as a digest is written (lower case)
        (["a " * 32], ["a " * 32], False),  # bytes.fromhex would take it
        ([a], ["A" * 64], False),  # a made digest is held to the same pattern
        ([a + b], [a, b], False),  # the joined text of the right digests, as one
        ([a, b], [a + b], False),
        ([a, a, b], [a, b, a], False),
    ]:
        check = _DigestCheck(expected)
        for digest in made:
            check.add(digest)
        assert check.equal is equal, (expected, made)


# --- the body checker's fast path names exactly what the whole-body path names ---------


def _golden_bodies(case: str) -> tuple[dict[str, list[bytes]], dict[str, Any]]:
    """A golden case's bodies, and what check_bodies needs to know of its calls."""
    scenario = load_scenario(REPO / "golden" / case / "scenario.yaml")
    calls = list(iter_replay(scenario))
    first: dict[str, int] = {}
    retries = {}
    for call in calls:
        if call.kind == "retry":
            retries[call.index] = first[call.event]
        first.setdefault(call.event, call.index)
    known = {"epochs": [call.request.epoch for call in calls], "retries": retries}
    return replay_bodies(scenario, providers.NAMES), known


def _mutations(body: bytes, key: str, strip: Callable[[Any], dict[str, Any]]) -> list[bytes]:
    """The same body broken in the ways a serializer bug could: an early history item
    changed, the last item dropped, an item appended twice, a frame member changed, a
    block added to the last message, a key moved; and two a frame change can hide
    behind: the frame's cache markers removed (alone, and with an early item changed)."""
    value = canonical.loads(body)
    items = value[key]
    out = []
    early = copy.deepcopy(value)
    early[key][0] = {**early[key][0], "extra": "x"} if isinstance(items[0], dict) else "x"
    out.append(early)
    if len(items) > 1:
        out.append({**value, key: items[:-1]})
    out.append({**value, key: [*items, items[-1]]})
    frame = next(k for k in value if k != key)
    out.append({**value, frame: "changed"})
    last = items[-1]
    blocks = next((k for k in ("content", "parts") if isinstance(last, dict) and k in last), None)
    if blocks is not None and isinstance(last[blocks], list):
        grown = copy.deepcopy(value)
        grown[key][-1][blocks].append({"text": "more"})
        out.append(grown)
    moved = {k: value[k] for k in reversed(list(value))}
    out.append(moved)
    unmarked = {**value, **strip({k: v for k, v in value.items() if k != key})}
    if unmarked != value:
        out.append(unmarked)
        out.append({**early, **strip({k: v for k, v in early.items() if k != key})})
    return [json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode() for v in out]


@pytest.mark.parametrize("case", ["long-session", "automatic-compaction", "retry"])
def test_the_fast_path_names_the_failures_of_the_whole_body_path(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies, known = _golden_bodies(case)
    named = 0
    for name in providers.NAMES:
        key = providers.get(name).MESSAGES_KEY
        good = bodies[name]
        for at in (1, len(good) // 2, len(good) - 1):
            strip = providers.get(name).strip_cache_markers
            for broken in _mutations(good[at], key, strip):
                sequence = [*good[:at], broken, *good[at + 1 :]]
                fast = check_bodies(case, name, sequence, **known)
                with monkeypatch.context() as patched:  # every body read whole
                    patched.setattr(HistoryScanner, "scan", lambda self, body: None)
                    whole = check_bodies(case, name, sequence, **known)
                assert fast == whole, (name, at)
                named += len(fast)
        assert check_bodies(case, name, good, **known) == []
    assert named  # the mutations do break invariants


def test_cache_markers_sit_inside_the_items_that_carry_them() -> None:
    """What the fast path assumes: stripping a body's markers item by item gives the
    whole body's stripped history (every golden body, every provider)."""
    for case in ("long-session", "automatic-compaction", "changed-context"):
        bodies, _ = _golden_bodies(case)
        for name, found in bodies.items():
            wire = providers.get(name)
            key = wire.MESSAGES_KEY
            for body in found:
                value = canonical.loads(body)
                whole = wire.strip_cache_markers(value)[key]
                assert [
                    wire.strip_cache_markers({key: [item]})[key][0] for item in value[key]
                ] == whole


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The heap as it is before the test moved out of the collector's way (``gc.freeze``):
    each ``gc.collect`` of ``_provider_log`` then walks only what the test made (the
    providers among it), not every object of the test session (0.2 s a call)."""
    import gc

    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _provider_log(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """Every ``fragments`` call of a provider ``registry.get`` hands out, from now on:
    (its provider's name, the names of the provider instances still alive then)."""
    import gc
    import weakref

    made: list[tuple[str, weakref.ref[Any]]] = []
    log: list[tuple[str, list[str]]] = []
    real = providers.get

    def get(name: str) -> Any:
        provider = real(name)
        inner = type(provider).fragments

        def fragments(request: Any) -> Any:
            gc.collect()
            log.append((name, sorted({n for n, ref in made if ref() is not None})))
            return inner(provider, request)

        provider.fragments = fragments  # type: ignore[method-assign]
        made.append((name, weakref.ref(provider)))
        return provider

    monkeypatch.setattr(providers, "get", get)
    return log


def _runs(log: list[tuple[str, list[str]]]) -> list[str]:
    """The provider names of ``log`` with consecutive repeats merged."""
    return [name for i, (name, _) in enumerate(log) if i == 0 or log[i - 1][0] != name]


@pytest.mark.usefixtures("frozen_heap")
def test_digests_are_made_one_provider_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replay's calls are made once and serialized by one provider after the other, so
    only one provider's fragment cache is alive at a time (memory: one provider's
    bodies, not five)."""
    scenario = load_scenario(write_long_scenario(tmp_path, 10))
    log = _provider_log(monkeypatch)
    names = ["anthropic", "gemini", "openai-chat"]
    digests = replay_digests(scenario, names)
    assert _runs(log) == names
    assert all(alive == [name] for name, alive in log)
    assert [len(digests[name]) for name in names] == [10, 10, 10]


@pytest.mark.usefixtures("frozen_heap")
def test_verify_serializes_one_provider_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """verify's restart replay and its main pass each serialize for one provider after
    the other; the naive harness of a provider is priced in that provider's pass."""
    scenario = load_scenario(write_long_scenario(tmp_path, 10))
    log = _provider_log(monkeypatch)
    names = ["anthropic", "bedrock-converse", "openai-responses"]
    rows, failures = verify_scenario(scenario, names)
    assert failures == []
    assert _runs(log) == names + names
    assert all(alive == [name] for name, alive in log)
    assert [row.calls for row in rows] == [10, 10, 10]
    # each pass: every call once for prefixlock's body and once for the naive harness's
    assert len(log) == 3 * 10 + 3 * 2 * 10


def test_freed_memory_is_handed_back_where_the_c_library_can() -> None:
    """Between provider passes verify and replay call ``malloc_trim`` (glibc's; where
    the C library has none, only the garbage collector runs)."""
    import platform

    from prefixlock.core import memory

    memory.release_freed_memory()
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert memory._trim() is not None


def test_a_loaded_scenario_leaves_no_cycles_behind(tmp_path: Path) -> None:
    """What loading made and dropped is freed when ``load_scenario`` returns, not at the
    next full collection: the document (its values, its positions) sitting as cyclic
    garbage while the calls were replayed grew the peak of ``replay --digests`` of
    2,000 calls by 4.6 MB."""
    import gc

    path = write_long_scenario(tmp_path, 12)
    load_scenario(path)  # the bundle's templates and caches, made once
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        scenario = load_scenario(path)
        found = gc.collect()
        kinds = sorted({type(o).__name__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert (found, kinds) == (0, [])
    assert len(scenario.steps) > 12


def test_a_done_replay_keeps_its_messages_not_their_record_encodings() -> None:
    """verify and ``replay --digests`` keep every call of a replay to serialize it for
    each provider; once the replay is done, no message keeps the encoding its records
    were spliced from (1.4 MiB at 2,000 calls), and what the bodies and records are
    made of is unchanged: the same bodies, the same record bytes."""
    scenario = load_scenario(REPO / "golden" / "long-session" / "scenario.yaml")
    calls = list(iter_replay(scenario))
    messages = [m for call in calls for m in call.request.messages]
    # (after a restart the calls hold the hydrated messages, which have no encoding)
    assert sum(m.parts_json is not None for m in messages) > len(messages) / 10
    before = {name: serialize_calls(calls, [name])[name] for name in providers.NAMES}
    # the longest request whose messages the replay made itself (a restart hydrates)
    last = max(
        (c.request.messages for c in calls if all(m.parts_json for m in c.request.messages)),
        key=len,
    )
    assert len(last) > 10
    record = Record(1, RecordType.USER, "e", tuple(last))
    prev = "sha256:" + "0" * 64
    spliced = record.encode("c", prev)
    forget_encodings(calls)
    assert [m for m in messages if m.parts_json is not None] == []
    assert {name: serialize_calls(calls, [name])[name] for name in providers.NAMES} == before
    assert record.encode("c", prev) == spliced
