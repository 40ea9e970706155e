"""Synthetic transcripts for the converter tests, written from the public descriptions of
the formats (cited in prefixlock.review.convert.claude_code / .codex): a short session
that covers every case, and a long one generated from a seed (compaction, sub-agents,
a rewind, resumed rewrites, out-of-order stamps)."""

from __future__ import annotations

import json
import random
from typing import Any

SECRET = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0kLmN"

#: A 1x1 PNG, base64.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE"
    "hQGAhKmMIQAAAABJRU5ErkJggg=="
)


#: A five-minute cache entry's lifetime, in seconds.
FIVE_MINUTES = 300


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":"))


class ClaudeSession:
    """Writes Claude Code records with a running uuid and clock."""

    def __init__(self, session: str = "sess-1", start: int = 0) -> None:
        self.session = session
        self.n = 0
        self.clock = start
        self.lines: list[str] = []
        self.last: str | None = None

    def stamp(self, step: int = 7) -> str:
        self.clock += step
        h, rest = divmod(self.clock, 3600)
        m, s = divmod(rest, 60)
        return f"2026-03-06T{10 + h:02d}:{m:02d}:{s:02d}.000Z"

    def record(self, kind: str, parent: str | None = "last", **extra: Any) -> str:
        self.n += 1
        uuid = f"{self.session}-{self.n:04d}"
        value = {
            "type": kind,
            "uuid": uuid,
            "parentUuid": self.last if parent == "last" else parent,
            "isSidechain": False,
            "sessionId": self.session,
            "cwd": "/home/dev/shop",
            "gitBranch": "main",
            "timestamp": self.stamp(),
            **extra,
        }
        self.lines.append(_line(value))
        self.last = uuid
        return uuid

    def user(self, content: Any, **extra: Any) -> str:
        return self.record("user", message={"role": "user", "content": content}, **extra)

    def assistant(
        self,
        mid: str,
        blocks: list[dict[str, Any]],
        read: int,
        write: int,
        one_hour: int = 0,
        uncached: int = 12,
        **extra: Any,
    ) -> str:
        usage = {
            "input_tokens": uncached,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": write,
            "cache_creation": {
                "ephemeral_5m_input_tokens": write - one_hour,
                "ephemeral_1h_input_tokens": one_hour,
            },
            "output_tokens": 40,
        }
        last = ""
        for block in blocks:  # one record per block, as Claude Code writes them
            last = self.record(
                "assistant",
                message={
                    "id": mid,
                    "model": "claude-sonnet-4-5",
                    "role": "assistant",
                    "content": [block],
                    "usage": usage,
                },
                **extra,
            )
        return last

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def claude_small() -> str:
    """Every case once: bookkeeping records, a split reply with thinking, a tool loop,
    a secret, a rewind, a sidechain, a resumed rewrite, an out-of-order stamp, a
    compaction, a meta record, a query travelling with a tool result, an image."""
    s = ClaudeSession()
    s.lines.append(_line({"type": "summary", "summary": "Invoice export", "leafUuid": "x"}))
    s.lines.append(_line({"type": "file-history-snapshot", "messageId": "m0", "snapshot": {}}))
    s.user("Add a PDF export for invoices.")
    s.assistant(
        "msg_1",
        [
            {"type": "thinking", "thinking": "look first", "signature": "sig=="},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "Glob", "input": {"pattern": "**/*.py"}},
        ],
        read=0,
        write=3000,
        one_hour=1000,
    )
    s.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": f"shop/a.py\nshop/b.py\nexport KEY={SECRET}",
            }
        ]
    )
    # a sub-agent's records, kept apart
    s.lines.append(
        _line(
            {
                "type": "assistant",
                "uuid": "side-1",
                "parentUuid": None,
                "isSidechain": True,
                "agentId": "a1b2",
                "sessionId": "sess-1",
                "timestamp": s.stamp(),
                "message": {"id": "msg_side", "role": "assistant", "content": []},
            }
        )
    )
    s.assistant(
        "msg_2",
        [{"type": "tool_use", "id": "toolu_2", "name": "FancyTool", "input": {"q": 1}}],
        read=3000,
        write=200,
    )
    s.user(
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": [
                    {"type": "text", "text": "done"},
                    {"type": "image", "source": {"type": "base64"}},
                ],
            },
            {"type": "text", "text": "Also add a CSV export."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
        ]
    )
    s.assistant(
        "msg_3",
        [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy"},
            {"type": "text", "text": "Both done."},
        ],
        read=3200,
        write=100,
    )
    abandoned = s.last
    # a rewind: the user edits the first prompt's follow-up; a new branch from `first`'s reply
    s.last = abandoned
    branch_root = s.user("Make it a CSV only.")
    s.assistant("msg_4", [{"type": "text", "text": "CSV only."}], read=3300, write=50)
    # ... and rewinds: the final branch goes on from msg_3 again
    s.last = abandoned
    s.lines.append(
        _line(
            {
                "type": "system",
                "subtype": "informational",
                "uuid": "sys-1",
                "parentUuid": abandoned,
                "isSidechain": False,
                "sessionId": "sess-1",
                "timestamp": s.stamp(),
                "content": "note",
            }
        )
    )
    s.last = "sys-1"
    s.user("Caveat: the messages below were generated by the user", isMeta=True)
    s.assistant(
        "msg_5",
        [
            {"type": "text", "text": "Restarting."},
            {"type": "thinking", "thinking": "interrupted", "signature": ""},
        ],
        read=3000,
        write=10,
    )
    boundary = s.record("system", parent=None, subtype="compact_boundary", logicalParentUuid=s.last)
    s.user("Summary: we added a PDF export.", isCompactSummary=True)
    early = s.user("Ship it.")
    # out of order: this stamp is before the previous one
    s.lines[-1] = s.lines[-1].replace(
        s.lines[-1].split('"timestamp":"')[1][:24], "2026-03-06T09:00:00.000Z"
    )
    s.assistant("msg_6", [{"type": "text", "text": "Shipped."}], read=500, write=20)
    # a resumed session writes the last reply's record again (same uuid)
    s.lines.append(s.lines[-1])
    del boundary, early, branch_root
    return s.text()


def claude_long(seed: int = 7, turns: int = 40) -> str:
    """A long generated session: tool loops, sub-agents, a rewind, compactions, signed
    thinking on about half of the replies."""
    rng = random.Random(seed)
    s = ClaudeSession("sess-long")
    cached = 0
    tool_names = ["Read", "Grep", "Edit", "Bash", "Glob", "Task", "mcp__db__query"]
    call = 0
    rewind_from: str | None = None
    rewind_cached = 0
    # The usage is what the API would bill: every write is a five-minute one, so a call
    # more than five minutes after the one before reads nothing (its entries expired).
    last_input: int | None = None

    def expire() -> None:
        nonlocal cached, last_input
        if last_input is not None and s.clock - last_input > FIVE_MINUTES:
            cached = 0
        last_input = s.clock

    for turn in range(turns):
        if turn and turn % 15 == 0:
            s.record("system", parent=None, subtype="compact_boundary", logicalParentUuid=s.last)
            s.user(f"Summary of turns up to {turn}.", isCompactSummary=True)
            cached = 0
        s.stamp(rng.randint(30, 900))
        s.user(f"Turn {turn}: please change module {rng.randint(1, 99)}.")
        if turn == 10:
            rewind_from, rewind_cached = s.last, cached
        for _ in range(rng.randint(0, 3)):
            call += 1
            expire()
            name = rng.choice(tool_names)
            write = rng.randint(50, 800)
            s.assistant(
                f"msg_{call}",
                [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{call}",
                        "name": name,
                        "input": {"arg": rng.randint(1, 9)},
                    }
                ],
                read=cached,
                write=write,
            )
            cached += write
            if name == "Task":
                _sidechain(s, call)
            s.user(
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": f"toolu_{call}",
                        "content": "x" * rng.randint(10, 400),
                    }
                ]
            )
        call += 1
        expire()
        write = rng.randint(20, 300)
        thinking = [
            {"type": "thinking", "thinking": f"Plan for turn {turn}.", "signature": f"EqQB{call}=="}
        ]
        s.assistant(
            f"msg_{call}",
            [*(thinking if rng.random() < 0.5 else []), {"type": "text", "text": f"Done {turn}."}],
            read=cached,
            write=write,
        )
        cached += write
        if turn == 12 and rewind_from is not None:
            # rewind: the session continues from turn 10's prompt; turns 11-12 are abandoned
            # (its prefix, cached up to turn 10's prompt, is what the next call reads)
            s.last, cached = rewind_from, rewind_cached
    return s.text()


def codex_small() -> str:
    lines = [
        {
            "timestamp": "2026-03-06T10:00:00.000Z",
            "type": "session_meta",
            "payload": {
                "id": "cx-1",
                "cwd": "/home/dev/shop",
                "git": {"branch": "main", "commit_hash": "5d1e7a0"},
            },
        },
        {
            "timestamp": "2026-03-06T10:00:00.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "<environment_context>cwd</environment_context>"}
                ],
            },
        },
        {
            "timestamp": "2026-03-06T10:00:01.000Z",
            "type": "turn_context",
            "payload": {"cwd": "/home/dev/shop", "model": "gpt-5-codex"},
        },
        {
            "timestamp": "2026-03-06T10:00:01.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "List the invoices."}],
            },
        },
        {
            "timestamp": "2026-03-06T10:00:01.000Z",
            "type": "event_msg",
            "payload": {"type": "user_message", "message": "List the invoices."},
        },
        {
            "timestamp": "2026-03-06T10:00:02.000Z",
            "type": "response_item",
            "payload": {"type": "reasoning", "summary": []},
        },
        {
            "timestamp": "2026-03-06T10:00:02.000Z",
            "type": "response_item",
            "payload": {
                "type": "function_call",
                "name": "shell",
                "call_id": "call_1",
                "arguments": '{"command":["ls","invoices"]}',
            },
        },
        {
            "timestamp": "2026-03-06T10:00:02.000Z",
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "last_token_usage": {
                        "input_tokens": 4000,
                        "cached_input_tokens": 3072,
                        "output_tokens": 30,
                        "reasoning_output_tokens": 10,
                    }
                },
            },
        },
        {
            "timestamp": "2026-03-06T10:00:03.000Z",
            "type": "response_item",
            "payload": {
                "type": "function_call_output",
                "call_id": "call_1",
                "output": '{"output":"a.pdf\\nb.pdf","metadata":{"exit_code":0}}',
            },
        },
        {
            "timestamp": "2026-03-06T10:00:04.000Z",
            "type": "response_item",
            "payload": {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "**Counting**"}],
                "content": None,
                "encrypted_content": "gAAAAABpEnc1",
            },
        },
        {
            "timestamp": "2026-03-06T10:00:04.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Two invoices."}],
            },
        },
        {
            "timestamp": "2026-03-06T10:00:04.000Z",
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "last_token_usage": {
                        "input_tokens": 4100,
                        "cached_input_tokens": 3968,
                        "output_tokens": 8,
                    }
                },
            },
        },
        {
            "timestamp": "2026-03-06T10:05:00.000Z",
            "type": "compacted",
            "payload": {"message": "We listed the invoices."},
        },
        {
            "timestamp": "2026-03-06T10:06:00.000Z",
            "type": "turn_context",
            "payload": {"cwd": "/home/dev/shop", "model": "gpt-5"},
        },
        {
            "timestamp": "2026-03-06T10:06:00.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Thanks."}],
            },
        },
        {
            "timestamp": "2026-03-06T10:06:01.000Z",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "You are welcome."}],
            },
        },
        {
            "timestamp": "2026-03-06T10:06:01.000Z",
            "type": "event_msg",
            "payload": {
                "type": "token_count",
                "info": {
                    "last_token_usage": {
                        "input_tokens": 900,
                        "cached_input_tokens": 0,
                        "output_tokens": 6,
                    }
                },
            },
        },
    ]
    return "\n".join(_line(v) for v in lines) + "\n"


def _sidechain(s: ClaudeSession, call: int) -> None:
    """A sub-agent's own conversation (its prompt, a tool loop, a reply) as sidechain
    records, between the main chain's records."""
    agent = f"agent{call}"

    def record(n: int, kind: str, message: dict[str, Any]) -> None:
        s.lines.append(
            _line(
                {
                    "type": kind,
                    "uuid": f"side-{call}-{n}",
                    "parentUuid": f"side-{call}-{n - 1}" if n else None,
                    "isSidechain": True,
                    "agentId": agent,
                    "sessionId": s.session,
                    "timestamp": s.stamp(1),
                    "message": message,
                }
            )
        )

    def usage(read: int) -> dict[str, int]:
        return {
            "input_tokens": 5,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": 50,
            "output_tokens": 9,
        }

    record(0, "user", {"role": "user", "content": f"Explore module {call}."})
    record(
        1,
        "assistant",
        {
            "id": f"msg_side_{call}_1",
            "model": "claude-haiku-4-5",
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": f"toolu_side_{call}",
                    "name": "Grep",
                    "input": {"pattern": "x"},
                }
            ],
            "usage": usage(100),
        },
    )
    record(
        2,
        "user",
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_side_{call}", "content": "match"}
            ],
        },
    )
    record(
        3,
        "assistant",
        {
            "id": f"msg_side_{call}_2",
            "model": "claude-haiku-4-5",
            "role": "assistant",
            "content": [{"type": "text", "text": "Found it."}],
            "usage": usage(200),
        },
    )


def codex_long(seed: int = 5, turns: int = 12) -> str:
    """A generated Codex rollout: turns with tool loops, token counts, a compaction."""
    rng = random.Random(seed)
    clock = 0
    out: list[dict[str, Any]] = []

    def add(kind: str, payload: dict[str, Any], step: int = 2) -> None:
        nonlocal clock
        clock += step
        m, sec = divmod(clock, 60)
        h, m = divmod(m, 60)
        stamp = f"2026-03-06T{10 + h:02d}:{m:02d}:{sec:02d}.000Z"
        out.append({"timestamp": stamp, "type": kind, "payload": payload})

    add("session_meta", {"id": "cx-long", "cwd": "/src/app", "git": {"branch": "dev"}})
    cached = 0
    call = 0
    for turn in range(turns):
        if turn == turns // 2:
            add("compacted", {"message": f"Summary up to turn {turn}."})
            cached = 0
        add("turn_context", {"cwd": "/src/app", "model": "gpt-5-codex"}, rng.randint(20, 500))
        add(
            "response_item",
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"Task {turn}."}],
            },
        )
        for _ in range(rng.randint(0, 3)):
            call += 1
            name = rng.choice(["shell", "apply_patch", "update_plan", "unknown_tool"])
            add("response_item", {"type": "reasoning", "summary": []})
            add(
                "response_item",
                {
                    "type": "function_call",
                    "name": name,
                    "call_id": f"call_{call}",
                    "arguments": '{"x":1}',
                },
            )
            total = cached + rng.randint(100, 900)
            add(
                "event_msg",
                {
                    "type": "token_count",
                    "info": {
                        "last_token_usage": {
                            "input_tokens": total,
                            "cached_input_tokens": cached,
                            "output_tokens": 7,
                        }
                    },
                },
            )
            cached = total
            add(
                "response_item",
                {
                    "type": "function_call_output",
                    "call_id": f"call_{call}",
                    "output": "ok " * rng.randint(1, 50),
                },
                rng.randint(1, 30),
            )
        add(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"Done {turn}."}],
            },
        )
        total = cached + rng.randint(50, 300)
        add(
            "event_msg",
            {
                "type": "token_count",
                "info": {
                    "last_token_usage": {
                        "input_tokens": total,
                        "cached_input_tokens": cached,
                        "output_tokens": 5,
                    }
                },
            },
        )
        cached = total
    return "\n".join(_line(v) for v in out) + "\n"


def codex_resumed() -> str:
    """A rollout with a rollback (``thread_rolled_back``), a remote compaction whose
    ``replacement_history`` is the history Codex goes on from (``message`` empty), and a
    resume that writes ``session_meta`` again (codex-rs/protocol/src/protocol.rs,
    codex-rs/core/src/codex/rollout_reconstruction.rs)."""
    clock = 0
    out: list[dict[str, Any]] = []

    def add(kind: str, payload: dict[str, Any]) -> None:
        nonlocal clock
        clock += 5
        out.append(
            {
                "timestamp": f"2026-03-06T10:{clock // 60:02d}:{clock % 60:02d}.000Z",
                "type": kind,
                "payload": payload,
            }
        )

    def user(text: str) -> None:
        add(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
        )

    def reply(text: str, cached: int) -> None:
        add(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            },
        )
        usage = {"input_tokens": cached + 100, "cached_input_tokens": cached, "output_tokens": 5}
        add("event_msg", {"type": "token_count", "info": {"last_token_usage": usage}})

    add("session_meta", {"id": "cx-resumed", "cwd": "/src/app"})
    add("turn_context", {"cwd": "/src/app", "model": "gpt-5-codex"})
    user("Rename the module.")
    reply("Renamed.", 0)
    add("turn_context", {"cwd": "/src/app", "model": "gpt-5-codex"})
    user("Now delete it.")
    reply("Deleted.", 1000)
    add("event_msg", {"type": "thread_rolled_back", "num_turns": 1})
    add("turn_context", {"cwd": "/src/app", "model": "gpt-5-codex"})
    user("Now add a test.")
    reply("Added.", 1000)
    add(
        "compacted",
        {
            "message": "",
            "replacement_history": [
                {
                    "type": "message",
                    "role": "user",
                    "content": [
                        {
                            "type": "input_text",
                            "text": "<environment_context>cwd</environment_context>",
                        }
                    ],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Rename the module."}],
                },
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "Now add a test."}],
                },
                {"type": "compaction", "encrypted_content": "gAAAAABcompacted"},
            ],
        },
    )
    add("session_meta", {"id": "cx-resumed", "cwd": "/src/app"})
    add("turn_context", {"cwd": "/src/app", "model": "gpt-5-codex"})
    user("Thanks.")
    reply("Welcome.", 0)
    return "\n".join(_line(v) for v in out) + "\n"


if __name__ == "__main__":
    # python tests/convert_fixtures.py [TURNS [SEED]] > session.jsonl: a long synthetic
    # Claude Code session (compactions every 15 turns, sub-agents, a rewind, thinking)
    import sys

    args = [int(a) for a in sys.argv[1:3]]
    sys.stdout.write(claude_long(args[1] if len(args) > 1 else 7, args[0] if args else 40))
