"""Long scenario files for measuring ``verify`` and ``replay`` at any length.

:func:`long_scenario` writes a seeded scenario (the public scenario format, as JSON,
which YAML reads as it is) of exactly ``calls`` model calls against the bundled
example: user turns with tool loops of small tool outputs, background events, a
context change on the first user turn at or after every 50th call (the same mix of work
per call at every length), a retry and a restart early on (so the per-call checks of
every kind run). Texts are short, so the bodies grow by a few hundred bytes per call
and the figures show the verifier's own cost per call rather than the copying of
megabyte bodies.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

#: The first generated turn's time.
_START = datetime(2026, 3, 18, 9, 0, tzinfo=UTC)

__all__ = ["CONTEXT_EVERY", "long_scenario", "write_long_scenario"]

#: The context changes on the first user turn at or after each multiple of this many
#: calls, so that every length does the same mix of work per call.
CONTEXT_EVERY = 50

_WORDS = ("parse", "cache", "order", "coupon", "ledger", "sync", "retry", "token", "query")


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)) + "."


def long_scenario(calls: int, seed: int = 1) -> dict[str, Any]:
    """A scenario value of exactly ``calls`` model calls (``calls`` >= 4)."""
    rng = random.Random(seed)
    steps: list[dict[str, Any]] = []
    made = 0
    turn = 0
    call_no = 0
    head = 0
    retried = False
    restarted = False
    change_at = CONTEXT_EVERY  # the context changes on the first user turn from here
    while made < calls:
        turn += 1
        if made >= change_at:
            head += 1
            change_at += CONTEXT_EVERY * (1 + (made - change_at) // CONTEXT_EVERY)
        minute = made
        steps.append(
            {
                "user": {
                    "event": f"u{turn}",
                    "query": _text(rng, rng.randint(5, 20)),
                    # one minute per call from 09:00, across midnight (never backwards)
                    "timestamp": (_START + timedelta(minutes=minute)).strftime(
                        "%Y-%m-%dT%H:%M:%SZ"
                    ),
                    "context": {"git": {"branch": "main", "head": f"{head:07x}", "dirty": False}},
                }
            }
        )
        made += 1
        if not retried and made >= 3 and made < calls:
            steps.append({"retry": f"u{turn}"})
            made += 1
            retried = True
        rounds = rng.randint(1, 4)
        while rounds and made < calls:
            rounds -= 1
            batch = []
            for _ in range(rng.choice((1, 1, 2))):
                call_no += 1
                batch.append(
                    {
                        "id": f"call_{call_no}",
                        "name": "read_file",
                        "arguments": {"path": f"src/{rng.choice(_WORDS)}.py"},
                    }
                )
            steps.append({"assistant": {"text": _text(rng, 6), "tool_calls": batch}})
            steps.append(
                {
                    "tool_results": [
                        {"call_id": c["id"], "output": _text(rng, rng.randint(10, 40))}
                        for c in batch
                    ]
                }
            )
            made += 1
        if made >= calls:
            break
        steps.append({"assistant": {"text": _text(rng, rng.randint(8, 30))}})
        if not restarted and made >= 6:
            steps.append({"restart": True})
            restarted = True
        if rng.random() < 0.2 and made < calls:
            steps.append({"background": {"event": f"b{turn}", "text": _text(rng, 12)}})
            made += 1
    return {
        "name": f"long synthetic session of {calls} calls (seed {seed})",
        "conversation": f"conv-long-{calls}",
        "base": {
            "mode": "agent",
            "context": {
                "environment": {
                    "os": "linux",
                    "shell": "bash",
                    "cwd": "/home/dev/app",
                    "workspace_roots": ["/home/dev/app"],
                }
            },
        },
        "steps": steps,
    }


def write_long_scenario(folder: Path, calls: int, seed: int = 1) -> Path:
    """Write :func:`long_scenario` as ``folder/long-<calls>.yaml``; returns its path."""
    path = Path(folder) / f"long-{calls}.yaml"
    value = long_scenario(calls, seed)
    path.write_text(json.dumps(value, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
