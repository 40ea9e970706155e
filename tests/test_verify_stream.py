"""Streaming verify: the long-scenario generator, digests, and the sparse restarts."""

from __future__ import annotations

import json
import os
import pty
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from conv_helpers import REPO
from prefixlock.bench.scenarios import long_scenario, write_long_scenario
from prefixlock.cli.commands import main
from prefixlock.review.replay import (
    RESTART_EVERY_STEP,
    iter_replay,
    replay_bodies,
    replay_digests,
    sparse_restarts,
)
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import _DigestCheck, verify_scenario


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
    ]:
        check = _DigestCheck(expected)
        for digest in made:
            check.add(digest)
        assert check.equal is equal, (expected, made)
