"""``prefixlock bench``: per-call cost against history length, next to naive baselines.

An agent server calls prefixlock once per model call and conversations reach thousands of
calls, so the work per call must depend on what is new, not on how long the conversation
already is. ``prefixlock bench`` generates seeded, realistic synthetic conversations from
the bundled example spec root (:func:`generate`) -- tool loops with 2-8 KB tool outputs
and sometimes parallel calls, background events, a context change every ~50 calls, one
automatic compaction in the longest run -- and measures, for each history length:

* **handling** one model call: the work between two model calls, i.e. recording the
  previous call's model output (:meth:`Conversation.assistant`) and handling the event
  that makes this call (:meth:`Conversation.handle` for a user turn or background event,
  :meth:`Conversation.tool_results` for tool results): compile, append, and commit the
  checkpoint records to an :class:`~compiler.sqlite_store.SQLiteStore` (WAL,
  ``synchronous=FULL``, so one fsync per record) in a temporary folder. Requests are
  validated before the clock starts (that is the client edge). Wall and process CPU time;
* **record bytes** per call: the checkpoint bytes handed to the store; and, where
  ``/proc/self/io`` exists, the bytes the process wrote to files (``wchar``: WAL frames,
  and the WAL checkpoints into the database file that SQLite runs now and then);
* **serializing** the call's body for every provider (:meth:`Provider.serialize`, the
  incremental encoder; every call is serialized, so its caches are as in a server);
* **hydration**: :meth:`Conversation.open` of the finished conversation from its store
  (a fresh connection), from the stored bytes alone;
* **memory**: the process's peak RSS after each run (``resource.getrusage``; runs go in
  ascending length, so it is the high-water mark of that run and the ones before), and
  :mod:`tracemalloc` around one extra, untimed hydration: the peak and the retained
  bytes of one hydrated conversation.

Per-call figures are the median and the 95th percentile (nearest rank) over the last
:data:`WINDOW` calls of each run. Every run ends with the same script of that many calls
(same texts, tool outputs and context; only counters such as seq differ), so the figures
compare the same work at different history lengths: growth would show there.

Each conversation is played twice, into two stores: once timing handling alone, once
serializing every call for every provider (whose handling is timed too, as
``handle_with_serialize``: serializing megabytes per call evicts the CPU caches, which
slows whatever runs next, and that effect grows with the bodies, not with prefixlock's
own work). Baselines, on the same conversation in the same process:

* **naive serialization**, after the serializing pass, on the same requests: rebuild the
  whole body as a plain dict (the provider's own frame and per-message mapping, no
  caching) and encode it with :func:`json.dumps`, per call; and the :func:`json.dumps` of
  the ready dict alone, for reference;
* **naive hydration**: :func:`json.loads` of every stored byte string (the root and
  every record), already in memory.

Timing uses :func:`time.perf_counter_ns` (handling also :func:`time.process_time_ns`).
Garbage collection stays enabled while timing, as in a server; :func:`gc.collect` runs
before each pass and each hydration repeat, so no garbage of an earlier step is collected
inside a timed one. Both stores are shared by all runs, as a server's store is, and a
warm-up conversation goes first, so no run pays for a cold interpreter or a new, still
growing WAL file.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

import providers
from compiler import canonical
from compiler.bundle import Bundle, build_bundle, find_example_root
from compiler.conversation import Conversation, ToolCall, ToolResult
from compiler.errors import PrefixlockError
from compiler.messages import MessageKind
from compiler.model import ModelRequest
from compiler.request import AgentRunRequest
from compiler.sqlite_store import SQLiteStore
from providers.base import Provider

__all__ = [
    "DEFAULT_CALLS",
    "WINDOW",
    "Call",
    "Output",
    "arguments",
    "bench",
    "format_report",
    "generate",
    "run",
    "targets",
]

DEFAULT_CALLS: tuple[int, ...] = (100, 1000, 3000)
#: Per-call figures are taken over the last WINDOW calls of each run (fewer when the
#: shortest run has less than twice that many).
WINDOW = 50
#: The automatic compaction of the longest run comes with its first user turn at or after
#: this fraction of its calls.
COMPACT_AT = 1 / 3
#: Context changes come every CONTEXT_EVERY calls (give or take 10), at a user turn.
CONTEXT_EVERY = 50
#: Hydration is timed this many times per run.
HYDRATION_REPEATS = 5

# Targets: ratios, because absolute times vary between machines.
HANDLING_LIMIT = 1.5  # handling per call at the longest history / at the shortest
SPEEDUP_MIN = 10.0  # naive full re-encode / incremental serialization, longest history
BYTES_TOLERANCE = 0.2  # record bytes per call, each history length vs the shortest
HYDRATION_LIMIT = 3.0  # Conversation.open / json.loads of the same stored bytes


# --- the synthetic conversation ---------------------------------------------------------


@attrs.frozen
class Output:
    """Model output, recorded before the next call."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()


@attrs.frozen
class Call:
    """One model call: the previous call's output, then the event that makes this call."""

    output: Output | None
    kind: str  # "user", "background" or "tool_results"
    request: AgentRunRequest | None = None
    results: tuple[ToolResult, ...] = ()


_WORDS = [
    "account",
    "audit",
    "batch",
    "buffer",
    "cache",
    "client",
    "config",
    "cursor",
    "digest",
    "engine",
    "event",
    "export",
    "field",
    "filter",
    "handler",
    "index",
    "invoice",
    "ledger",
    "loader",
    "merge",
    "metric",
    "order",
    "parser",
    "payload",
    "policy",
    "queue",
    "record",
    "render",
    "report",
    "request",
    "retry",
    "route",
    "schema",
    "session",
    "shard",
    "signal",
    "snapshot",
    "stream",
    "table",
    "tenant",
    "token",
    "trace",
    "update",
    "user",
    "vector",
    "worker",
]
_TYPES = ("int", "str", "bytes", "float", "dict[str, Any]", "list[Record]", "Path", "None")
_PACKAGES = ("billing", "core", "api", "storage", "sync", "reports")


def _ident(rng: random.Random) -> str:
    return f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}"


def _path(rng: random.Random) -> str:
    return f"src/{rng.choice(_PACKAGES)}/{rng.choice(_WORDS)}_{rng.choice(_WORDS)}.py"


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(_WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def _prose(rng: random.Random, size: int) -> str:
    parts: list[str] = []
    total = 0
    while total < size:
        parts.append(_sentence(rng, rng.randint(6, 16)))
        total += len(parts[-1]) + 1
    return " ".join(parts)


def _code_line(rng: random.Random) -> str:
    a, b = _ident(rng), _ident(rng)
    pick = rng.randrange(9)
    if pick == 0:
        return f"def {a}(self, {b}: {rng.choice(_TYPES)}) -> {rng.choice(_TYPES)}:"
    if pick == 1:
        return f"    return self.{a}({b}) + {rng.randint(0, 999)}"
    if pick == 2:
        return f"    # {_sentence(rng, rng.randint(4, 10))}"
    if pick == 3:
        return f'        raise ValueError(f"{a}: {{{b}!r}} is not a {rng.choice(_WORDS)}")'
    if pick == 4:
        return f"    if {a} is None or {b} > {rng.randint(1, 64)}:"
    if pick == 5:
        return f'    "{a}": {{"{b}": [{rng.randint(0, 9)}, {rng.randint(10, 99)}], "ok": True}},'
    if pick == 6:
        return f"from {rng.choice(_PACKAGES)}.{rng.choice(_WORDS)} import {a}, {b}"
    if pick == 7:
        return ""
    return f"        {a} = {b}.get('{rng.choice(_WORDS)}', \"\\t\")  # é ✓"


def _lines(rng: random.Random, size: int, line: Callable[[random.Random], str]) -> str:
    out: list[str] = []
    total = 0
    while total < size:
        out.append(line(rng))
        total += len(out[-1]) + 1
    return "\n".join(out) + "\n"


def _tool_call(rng: random.Random, call_id: str) -> tuple[ToolCall, str]:
    """A tool call and its output (2-8 KB, shaped like what that tool returns)."""
    size = rng.randint(2048, 8192)
    pick = rng.randrange(6)
    path = _path(rng)
    if pick <= 1:
        start = rng.randint(1, 400)
        call = ToolCall(call_id, "read_file", {"path": path, "offset": start, "limit": 200})
        body = _lines(rng, size, _code_line)
        numbered = "\n".join(f"{start + i:>5}\t{line}" for i, line in enumerate(body.split("\n")))
        return call, numbered[:size]
    if pick == 2:
        word = rng.choice(_WORDS)
        call = ToolCall(call_id, "grep_search", {"query": word, "include": "*.py"})

        def grep(r: random.Random) -> str:
            return f"{_path(r)}:{r.randint(1, 900)}:{_code_line(r)}"

        return call, _lines(rng, size, grep)[:size]
    if pick == 3:
        test = f"tests/test_{rng.choice(_WORDS)}.py"
        call = ToolCall(call_id, "run_terminal_command", {"command": f"pytest -q {test}"})

        def pytest_line(r: random.Random) -> str:
            outcome = r.choice(("PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"))
            return f"{test}::test_{_ident(r)} {outcome} [{r.randint(1, 100):>3}%]"

        return call, _lines(rng, size, pytest_line)[:size]
    if pick == 4:
        query = _sentence(rng, 7)
        call = ToolCall(call_id, "codebase_search", {"query": query})

        def snippet(r: random.Random) -> str:
            return f"{_path(r)}\n" + _lines(r, r.randint(120, 400), _code_line)

        return call, _lines(rng, size, snippet)[:size]
    old = _lines(rng, rng.randint(80, 300), _code_line)
    new = _lines(rng, rng.randint(80, 300), _code_line)
    call = ToolCall(call_id, "edit_file", {"path": path, "old_string": old, "new_string": new})

    def diff(r: random.Random) -> str:
        return r.choice(("+", "-", " ")) + _code_line(r)

    return call, (f"Applied the edit to {path}.\n" + _lines(rng, size, diff))[:size]


def _base_context() -> dict[str, Any]:
    return {
        "rules": [
            {"name": "house-style", "kind": "always", "body": "Use tabs. Keep functions short."},
            {
                "name": "py-tests",
                "kind": "auto",
                "globs": ["tests/**/*.py", "*_test.py"],
                "body": "Write pytest tests; no unittest classes.",
            },
            {
                "name": "migrations",
                "kind": "agent",
                "description": "How to write database migrations",
                "body": "Step 1: never drop a column in the same release.",
            },
        ],
        "skills": [
            {"name": "pdf", "description": "Read PDF files", "path": ".cursor/skills/pdf/SKILL.md"}
        ],
        "subagents": [{"name": "explorer", "description": "Explores the codebase read-only"}],
        "environment": {
            "os": "linux",
            "shell": "bash",
            "cwd": "/home/dev/app",
            "workspace_roots": ["/home/dev/app"],
        },
        "git": {"branch": "main", "head": "0000000", "dirty": False},
        "mcp": {
            "servers": [
                {
                    "name": "warehouse-db",
                    "transport": "stdio",
                    "tools": [
                        {
                            "name": "query",
                            "description": "Run a read-only SQL query.",
                            "input_schema": {
                                "type": "object",
                                "properties": {"sql": {"type": "string"}},
                                "required": ["sql"],
                            },
                        }
                    ],
                }
            ]
        },
    }


def _change_context(rng: random.Random, context: dict[str, Any], n: int) -> None:
    """A conversation-level change: always a new commit, sometimes more."""
    git = context["git"]
    git["head"] = f"{rng.getrandbits(28):07x}"
    git["dirty"] = rng.random() < 0.5
    pick = rng.randrange(4)
    if pick == 0:
        git["branch"] = rng.choice(("main", "feature/sync", "fix/retry", "release/2.1"))
    elif pick == 1:
        context["rules"].append(
            {"name": f"team-rule-{n}", "kind": "always", "body": _sentence(rng, 12)}
        )
    elif pick == 2:
        context["environment"]["workspace_roots"] = sorted(
            {"/home/dev/app", f"/home/dev/{rng.choice(_WORDS)}"}
        )


class _Script:
    """A conversation script: each :meth:`step` gives one call and the model's answer.

    User turns run tool loops (2-10 rounds, one call in three rounds parallel) whose
    outputs are 2-8 KB each; a background event follows about one answer in five; the
    request context changes every ~:data:`CONTEXT_EVERY` calls of the script.
    """

    def __init__(
        self, conversation: str, rng: random.Random, prefix: str, context: dict[str, Any], day: int
    ) -> None:
        self.conversation = conversation
        self.rng = rng
        self.prefix = prefix  # of event and call ids, unique per script
        self.context = context
        self.day = day  # of the timestamps
        self.index = 0  # calls made by this script
        self.next_change = CONTEXT_EVERY
        self.pending: dict[str, str] = {}  # call id -> its output, for the next results
        self.rounds = 0  # tool rounds left in the current turn
        self.turn = self.call_no = self.changes = 0

    def step(self, output: Output | None, compact: bool = False) -> tuple[Call, Output]:
        """The next call (after ``output``) and the model's answer to it.

        ``compact``: if this call is a user turn, it compacts automatically.
        """
        rng, index = self.rng, self.index
        self.index += 1
        if output is not None and output.tool_calls:
            results = tuple(ToolResult(c.id, self.pending[c.id]) for c in output.tool_calls)
            call = Call(output, "tool_results", results=results)
        elif self.turn and not compact and rng.random() < 0.2:
            value: dict[str, Any] = {
                "conversation_id": self.conversation,
                "event_id": f"{self.prefix}bg-{index}",
                "kind": "background",
                "text": f"Subagent explorer finished.\n{_prose(rng, rng.randint(200, 1500))}",
            }
            call = Call(output, "background", AgentRunRequest.from_value(value))
            self.rounds = 0
        else:
            call = Call(output, "user", AgentRunRequest.from_value(self._user(compact)))
            self.rounds = rng.randint(2, 10)
        self.pending = {}
        if self.rounds > 0:
            self.rounds -= 1
            batch = []
            for _ in range(rng.choice((1, 1, 1, 1, 2, 3))):
                self.call_no += 1
                tool_call, result = _tool_call(rng, f"{self.prefix}call-{self.call_no}")
                batch.append(tool_call)
                self.pending[tool_call.id] = result
            text = _sentence(rng, rng.randint(6, 30)) if rng.random() < 0.6 else None
            return call, Output(text, tuple(batch))
        return call, self.answer()

    def answer(self) -> Output:
        """A final answer: text, no tool calls."""
        return Output(_prose(self.rng, self.rng.randint(300, 2000)))

    def _user(self, compact: bool) -> dict[str, Any]:
        rng, index = self.rng, self.index - 1
        self.turn += 1
        if index >= self.next_change:
            self.changes += 1
            _change_context(rng, self.context, self.changes)
            self.next_change = index + rng.randint(CONTEXT_EVERY - 10, CONTEXT_EVERY + 10)
        value: dict[str, Any] = {
            "conversation_id": self.conversation,
            "event_id": f"{self.prefix}u{self.turn}",
            "kind": "user",
            "mode": rng.choice(("agent",) * 7 + ("ask", "plan", "debug")),
            "query": _prose(rng, rng.randint(60, 400)),
            "open_files": [
                {"path": _path(rng), "cursor_line": rng.randint(1, 500)}
                for _ in range(rng.randint(1, 4))
            ],
            "timestamp": f"2026-{1 + self.day // 28:02d}-{1 + self.day % 28 + index // 1440:02d}T"
            f"{index // 60 % 24:02d}:{index % 60:02d}:00Z",
            "context": self.context,
        }
        if rng.random() < 0.3:
            value["selected_context"] = [
                {
                    "path": _path(rng),
                    "start_line": 10,
                    "end_line": 30,
                    "text": _lines(rng, rng.randint(200, 1500), _code_line),
                }
            ]
        if compact:
            value["compact"] = {"summary": _prose(rng, 3000)}
        return value


def generate(
    calls: int, seed: int, *, compact: bool = False, tail: int = 0, conversation: str = "bench"
) -> list[Call]:
    """``calls`` model calls of one seeded conversation (see :class:`_Script`).

    With ``compact``, the first user turn at or after :data:`COMPACT_AT` of the calls
    compacts automatically. The last ``tail`` calls follow a script of their own, with
    its own context, derived from the seed alone: every conversation generated with the
    same seed and tail ends with the same ``tail`` calls, so per-call figures taken over
    them compare the same work at different history lengths.
    """
    if not 0 <= tail <= calls - 1:
        raise PrefixlockError(f"{calls} calls cannot end with a tail of {tail}")
    compact_at = math.ceil(calls * COMPACT_AT) if compact else None
    main = _Script(conversation, random.Random(seed), "", _base_context(), day=0)
    out: list[Call] = []
    output: Output | None = None
    while len(out) < calls - tail:
        due = compact_at is not None and len(out) >= compact_at
        call, output = main.step(output, compact=due)
        if due and call.kind == "user":
            compact_at = None
        out.append(call)
    if tail:
        context = _base_context()
        context["rules"].append(
            {"name": "release-week", "kind": "always", "body": "Only bug fixes this week."}
        )
        rng = random.Random(f"prefixlock-bench-tail-{seed}")
        script = _Script(conversation, rng, "t-", context, day=40)
        output = script.answer()  # the answer to the call before the tail
        while len(out) < calls:
            call, output = script.step(output)
            out.append(call)
    return out


# --- measuring --------------------------------------------------------------------------


class _CountingStore(SQLiteStore):
    """An SQLiteStore that counts the record bytes it is asked to append."""

    appended = 0

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> None:
        super().append(conversation_id, seq, event_id, record)
        self.appended += len(record)


def _written() -> int | None:
    """Bytes this process has written to files so far (Linux ``wchar``), if known."""
    try:
        with open("/proc/self/io", "rb") as f:
            for line in f:
                if line.startswith(b"wchar:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _stats(values: Sequence[int]) -> dict[str, int]:
    """Median, 95th percentile (nearest rank) and mean, rounded to integers."""
    ordered = sorted(values)
    rank = max(1, math.ceil(0.95 * len(ordered)))
    return {
        "median": round(statistics.median(ordered)),
        "p95": ordered[rank - 1],
        "mean": round(statistics.fmean(ordered)),
    }


def _naive_provider(name: str) -> Provider:
    """The provider's own :meth:`~Provider.wire_body`, without its per-item encode.

    :meth:`Provider.wire_body` rebuilds the whole body as a dict (no fragment cache) but
    also encodes every item once, to refuse what :meth:`Provider.serialize` refuses; a
    naive harness would not, so that step is a no-op here. What remains is the provider's
    own frame and per-message mapping: the encoding is the only difference from
    :meth:`Provider.serialize`.
    """
    cls = type(providers.get(name))
    naive = type(f"Naive{cls.__name__}", (cls,), {"_encode_item": _no_encode})()
    assert isinstance(naive, Provider)
    return naive


def _no_encode(self: Provider, message: Any, item: Any) -> bytes:
    return b""


def _naive_encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _play(conv: Conversation, call: Call) -> ModelRequest:
    """Record the previous output, then handle this call's event."""
    if call.output is not None:
        conv.assistant(call.output.text, call.output.tool_calls)
    if call.kind == "tool_results":
        return conv.tool_results(call.results)
    assert call.request is not None
    return conv.handle(call.request)


def _cid(calls: Sequence[Call]) -> str:
    first = calls[0].request
    assert first is not None
    return first.conversation_id


def _handling_pass(
    bundle: Bundle, store: _CountingStore, calls: Sequence[Call], window: int
) -> tuple[dict[str, Any], Conversation]:
    """Play the calls, timing handling alone over the last ``window``."""
    conv = Conversation.open(store, bundle, _cid(calls))
    handle: list[int] = []
    handle_cpu: list[int] = []
    record_bytes: list[int] = []
    written: list[int] = []
    first_timed = len(calls) - window
    clock, cpu = time.perf_counter_ns, time.process_time_ns
    gc.collect()
    for index, call in enumerate(calls):
        if index < first_timed:
            _play(conv, call)
            continue
        appended, before = store.appended, _written()
        t0, c0 = clock(), cpu()
        _play(conv, call)
        t1, c1 = clock(), cpu()
        after = _written()
        handle.append(t1 - t0)
        handle_cpu.append(c1 - c0)
        record_bytes.append(store.appended - appended)
        if before is not None and after is not None:
            written.append(after - before)
    if not window:
        return {}, conv
    final = conv.request()
    return {
        "records": conv.history.seq,
        "epochs": conv.history.epoch + 1,
        "live_messages": len(final.messages),
        "context_messages": sum(1 for m in final.messages if m.kind is MessageKind.REQUEST_CONTEXT),
        "handle_ns": _stats(handle),
        "handle_cpu_ns": _stats(handle_cpu),
        "record_bytes": _stats(record_bytes),
        "written_bytes": _stats(written) if written else None,
    }, conv


def _serializing_pass(
    bundle: Bundle,
    store: SQLiteStore,
    calls: Sequence[Call],
    names: Sequence[str],
    window: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Play the calls again, serializing every call for every provider; then the naive
    harness on the requests of the last ``window`` calls."""
    conv = Conversation.open(store, bundle, _cid(calls))
    live = {name: providers.get(name) for name in names}
    serialize: dict[str, list[int]] = {name: [] for name in names}
    handle: list[int] = []
    requests: list[ModelRequest] = []
    bodies: dict[str, bytes] = {}
    first_timed = len(calls) - window
    clock = time.perf_counter_ns
    gc.collect()
    for index, call in enumerate(calls):
        timed = index >= first_timed
        t0 = clock()
        request = _play(conv, call)
        t1 = clock()
        for name, provider in live.items():
            t2 = clock()
            bodies[name] = provider.serialize(request)
            t3 = clock()
            if timed:
                serialize[name].append(t3 - t2)
        if timed:
            handle.append(t1 - t0)
            requests.append(request)  # an immutable view: still this call's request later
        if (index + 1) % 1000 == 0 and index + 1 < len(calls):
            progress(f"  {index + 1}/{len(calls)} calls")
    sizes = {name: len(body) for name, body in bodies.items()}
    head = conv.history.head
    del live, conv  # the fragment caches: the naive harness needs none of it
    if not window:
        return {}
    # The naive harness runs afterwards, so that its garbage (whole bodies as dicts, every
    # call) does not slow down what is measured above.
    naive: dict[str, list[int]] = {name: [] for name in names}
    naive_encode: dict[str, list[int]] = {name: [] for name in names}
    naive_equal: dict[str, bool] = {}
    for name in names:
        harness = _naive_provider(name)
        gc.collect()
        for request in requests:
            t0 = clock()
            body = harness.wire_body(request)
            t1 = clock()
            data = _naive_encode(body)
            t2 = clock()
            naive[name].append(t2 - t0)
            naive_encode[name].append(t2 - t1)
            del body
        # The last call's body: the same bytes, so the comparison is like for like.
        naive_equal[name] = data == bodies[name]
    return {
        "body_bytes": sizes,
        "handle_with_serialize_ns": _stats(handle),
        "serialize_ns": {name: _stats(v) for name, v in serialize.items()},
        "naive_ns": {name: _stats(v) for name, v in naive.items()},
        "naive_encode_ns": {name: _stats(v) for name, v in naive_encode.items()},
        "naive_bytes_equal": naive_equal,
        "digest": canonical.digest(
            {
                "head": head,
                "bodies": {name: canonical.sha256_hex(body) for name, body in bodies.items()},
            }
        ),
    }


def _rss_kib() -> int | None:
    """The process's peak resident set size in KiB (None where unknown: Windows)."""
    try:
        import resource  # Unix only
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS


def _hydration(bundle: Bundle, path: Path, live: Conversation) -> dict[str, Any]:
    """Conversation.open of the finished conversation against json.loads of its bytes."""
    cid = live.id
    hydrate: list[int] = []
    loads: list[int] = []
    load: list[int] = []
    clock = time.perf_counter_ns
    with SQLiteStore(path) as store:
        stored = store.load(cid)
        assert stored is not None
        blobs = (stored.root, *stored.records)
        for _ in range(HYDRATION_REPEATS):
            gc.collect()
            t0 = clock()
            conv = Conversation.open(store, bundle, cid)
            t1 = clock()
            hydrate.append(t1 - t0)
            del conv
            gc.collect()
            t0 = clock()
            for blob in blobs:
                json.loads(blob)
            t1 = clock()
            loads.append(t1 - t0)
            gc.collect()
            t0 = clock()
            store.load(cid)
            t1 = clock()
            load.append(t1 - t0)
        gc.collect()
        tracemalloc.start()
        try:
            conv = Conversation.open(store, bundle, cid)
            retained, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    same = conv.history.head == live.history.head and conv.request().same_as(live.request())
    return {
        "stored_bytes": sum(len(b) for b in blobs),
        "hydrate_ns": _stats(hydrate),
        "json_loads_ns": _stats(loads),
        "store_load_ns": _stats(load),
        "hydrated_equal": same,
        "hydrated_peak_bytes": peak,
        "hydrated_retained_bytes": retained,
    }


def _run(
    bundle: Bundle,
    stores: tuple[_CountingStore, SQLiteStore],
    calls: Sequence[Call],
    names: Sequence[str],
    window: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    """Both passes over one conversation, then its hydration; figures over ``window``."""
    started = time.perf_counter_ns()
    handling, conv = _handling_pass(bundle, stores[0], calls, window)
    serializing = _serializing_pass(bundle, stores[1], calls, names, window, progress)
    if not window:
        return {}
    figures: dict[str, Any] = {"calls": len(calls), "window": window}
    figures.update(handling)
    figures.update(serializing)
    figures["rss_peak_kib"] = _rss_kib()
    figures.update(_hydration(bundle, stores[0].path, conv))
    figures["seconds"] = round((time.perf_counter_ns() - started) / 1e9, 2)
    return figures


def _machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "system": f"{platform.system()} {platform.release()}",
        "sqlite": sqlite3.sqlite_version,
    }


def bench(
    calls: Sequence[int] = DEFAULT_CALLS,
    names: Sequence[str] = providers.NAMES,
    seed: int = 1,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Run the benchmark; returns the report (a JSON value, see :func:`targets`)."""
    lengths = sorted(set(calls))
    if not lengths or lengths[0] < 2:
        raise PrefixlockError("history lengths must be at least 2 calls")
    if not names:
        raise PrefixlockError("no provider to serialize for")
    for name in names:
        providers.get(name)  # an unknown name fails before any work
    bundle = build_bundle(find_example_root())
    window = min(WINDOW, lengths[0] // 2)
    folder = Path(tempfile.mkdtemp(prefix="prefixlock-bench-"))
    runs: list[dict[str, Any]] = []
    try:
        stores = (_CountingStore(folder / "handle.db"), SQLiteStore(folder / "serialize.db"))
        try:
            progress(f"warm-up: {lengths[0]} calls")
            warmup = generate(lengths[0], seed + 1, conversation="bench-warmup")
            _run(bundle, stores, warmup, names, 0, progress)
            for n in lengths:
                conversation = generate(
                    n, seed, compact=n == lengths[-1], tail=window, conversation=f"bench-{n}"
                )
                progress(f"run: {n} calls (per-call figures over the last {window})")
                runs.append(_run(bundle, stores, conversation, names, window, progress))
                del conversation
        finally:
            for store in stores:
                store.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    checks = targets(runs)
    return {
        "bench": "prefixlock",
        "seed": seed,
        "calls": lengths,
        "window": window,
        "providers": list(names),
        "machine": _machine(),
        "method": {
            "timer": "time.perf_counter_ns; handling also time.process_time_ns",
            "per_call": f"median, p95 (nearest rank) and mean over the last {window} calls "
            "of each run, the same script in every run",
            "handling": "Conversation.assistant (previous output) + handle / tool_results "
            "(this call's event); SQLiteStore in a temporary folder, WAL, synchronous=FULL; "
            "a pass of its own (handle_with_serialize_ns: in the serializing pass)",
            "record_bytes": "checkpoint record bytes handed to the store per call; "
            "written_bytes: /proc/self/io wchar per call (WAL frames and checkpoints)",
            "serialize": "Provider.serialize of every call; naive: wire_body without its "
            "per-item encode, then json.dumps, on the same requests after the pass; "
            "naive_encode: json.dumps of the ready dict only",
            "hydration": f"Conversation.open of the finished conversation (fresh "
            f"connection), {HYDRATION_REPEATS} repeats; json_loads: json.loads of the root and "
            "every record, in memory; store_load: SQLiteStore.load alone",
            "memory": "rss_peak_kib: resource.getrusage ru_maxrss after the run (process "
            "high-water mark; runs in ascending length); hydrated_*: tracemalloc peak and "
            "retained bytes around one untimed Conversation.open",
            "gc": "enabled while timing; gc.collect() before each pass and each hydration repeat",
        },
        "runs": runs,
        "targets": checks,
        "all_met": all(t["met"] for t in checks),
    }


# --- the report -------------------------------------------------------------------------


def _ratio(a: float, b: float) -> float:
    return round(a / max(b, 1), 3)


def targets(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The four target checks, computed from the figures of the runs (shortest first)."""
    short, long = runs[0], runs[-1]
    handling = _ratio(long["handle_ns"]["median"], short["handle_ns"]["median"])
    speedups = {
        name: _ratio(long["naive_ns"][name]["median"], ours["median"])
        for name, ours in long["serialize_ns"].items()
    }
    slowest = min(speedups, key=lambda n: (speedups[n], n))
    per_run_bytes = {
        str(run["calls"]): _ratio(run["record_bytes"]["mean"], short["record_bytes"]["mean"])
        for run in runs
    }
    deviation = round(max(abs(r - 1) for r in per_run_bytes.values()), 3)
    hydration = {
        str(run["calls"]): _ratio(run["hydrate_ns"]["median"], run["json_loads_ns"]["median"])
        for run in runs
    }
    worst = max(hydration, key=lambda c: (hydration[c], int(c)))
    return [
        {
            "name": "handling_flat",
            "what": f"handling per call at {long['calls']} calls / at {short['calls']} (median)",
            "value": handling,
            "op": "<=",
            "limit": HANDLING_LIMIT,
            "met": handling <= HANDLING_LIMIT,
        },
        {
            "name": "serialization_speedup",
            "what": f"naive full re-encode / incremental serialize at {long['calls']} calls "
            f"(median; slowest provider: {slowest})",
            "value": speedups[slowest],
            "op": ">=",
            "limit": SPEEDUP_MIN,
            "met": speedups[slowest] >= SPEEDUP_MIN,
            "per_provider": speedups,
        },
        {
            "name": "record_bytes_flat",
            "what": f"record bytes per call (mean), largest deviation from {short['calls']} calls",
            "value": deviation,
            "op": "<=",
            "limit": BYTES_TOLERANCE,
            "met": deviation <= BYTES_TOLERANCE,
            "per_run": per_run_bytes,
        },
        {
            "name": "hydration_vs_json_loads",
            "what": f"Conversation.open / json.loads of the stored bytes (median; worst: "
            f"{worst} calls)",
            "value": hydration[worst],
            "op": "<=",
            "limit": HYDRATION_LIMIT,
            "met": hydration[worst] <= HYDRATION_LIMIT,
            "per_run": hydration,
        },
    ]


def _us(ns: float) -> str:
    return f"{ns / 1000:,.0f}" if ns >= 10_000 else f"{ns / 1000:,.1f}"


def _pair(stats: dict[str, int]) -> str:
    return f"{_us(stats['median'])} / {_us(stats['p95'])}"


def _ms_pair(stats: dict[str, int]) -> str:
    return f"{stats['median'] / 1e6:,.1f} / {stats['p95'] / 1e6:,.1f}"


def _bytes(stats: dict[str, int]) -> str:
    return f"{stats['median']:,} / {stats['p95']:,} ({stats['mean']:,})"


def format_report(report: dict[str, Any]) -> str:
    """The report as a table for people: one column per history length."""
    runs: list[dict[str, Any]] = report["runs"]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, cell: Callable[[dict[str, Any]], str]) -> None:
        rows.append((label, [cell(run) for run in runs]))

    def ratio(label: str, ours: str, base: str, key: str | None = None) -> None:
        def cell(run: dict[str, Any]) -> str:
            a, b = run[ours], run[base]
            if key is not None:
                a, b = a[key], b[key]
            return f"{_ratio(a['median'], b['median']):.3f}"

        row(label, cell)

    row("history length (calls)", lambda r: f"{r['calls']:,}")
    row("records / epochs", lambda r: f"{r['records']:,} / {r['epochs']}")
    row("live messages (contexts)", lambda r: f"{r['live_messages']:,} ({r['context_messages']})")
    row("stored KiB", lambda r: f"{r['stored_bytes'] / 1024:,.0f}")
    rows.append((f"per call, last {report['window']}: median / p95", []))
    row("  handle event, µs", lambda r: _pair(r["handle_ns"]))
    row("    CPU time, µs", lambda r: _pair(r["handle_cpu_ns"]))
    row("    amid serializing, µs", lambda r: _pair(r["handle_with_serialize_ns"]))
    row("  record bytes (mean)", lambda r: _bytes(r["record_bytes"]))
    if all(r["written_bytes"] for r in runs):
        row("  file bytes written (mean)", lambda r: _bytes(r["written_bytes"]))
    for name in report["providers"]:
        rows.append((f"  {name}", []))
        rows.append(("    body KiB", [f"{r['body_bytes'][name] / 1024:,.0f}" for r in runs]))
        for label, key in (
            ("    serialize, µs", "serialize_ns"),
            ("    naive dict + dumps, µs", "naive_ns"),
            ("    naive dumps alone, µs", "naive_encode_ns"),
        ):
            rows.append((label, [_pair(r[key][name]) for r in runs]))
        ratio("    ours / naive", "serialize_ns", "naive_ns", name)
        ratio("    ours / dumps alone", "serialize_ns", "naive_encode_ns", name)
    rows.append(("whole conversation: median / p95", []))
    row("  Conversation.open, ms", lambda r: _ms_pair(r["hydrate_ns"]))
    row("  json.loads of its bytes, ms", lambda r: _ms_pair(r["json_loads_ns"]))
    ratio("  ours / json.loads", "hydrate_ns", "json_loads_ns")
    row("  SQLiteStore.load alone, ms", lambda r: _ms_pair(r["store_load_ns"]))
    row(
        "peak RSS of the process, MiB",
        lambda r: "?" if r["rss_peak_kib"] is None else f"{r['rss_peak_kib'] / 1024:,.0f}",
    )
    row(
        "hydrated: peak / kept, MiB",
        lambda r: (
            f"{r['hydrated_peak_bytes'] / 2**20:,.1f} / {r['hydrated_retained_bytes'] / 2**20:,.1f}"
        ),
    )
    width = max(len(label) for label, _ in rows)
    widths = [max(len(cells[i]) for _, cells in rows if cells) for i in range(len(runs))]
    machine = report["machine"]
    lines = [
        f"prefixlock bench: seed {report['seed']}; providers {', '.join(report['providers'])}",
        f"machine: {machine['cpus']} CPUs, {machine['cpu_model']}; Python {machine['python']}; "
        f"SQLite {machine['sqlite']}",
        "",
    ]
    for label, cells in rows:
        if not cells:  # a section heading
            lines.append(label)
            continue
        columns = "  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True))
        lines.append(f"{label:<{width}}  {columns}")
    lines.append("")
    lines.append("targets")
    for target in report["targets"]:
        flag = "met " if target["met"] else "MISS"
        lines.append(
            f"  [{flag}] {target['what']}: {target['value']} ({target['op']} {target['limit']})"
        )
    return "\n".join(lines)


# --- the command ------------------------------------------------------------------------


def _calls(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a comma-separated list of numbers"
        ) from None
    if not values or min(values) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: every history length must be at least 2")
    return values


def _provider_names(text: str) -> list[str]:
    if text == "all":
        return list(providers.NAMES)
    names = sorted({part.strip() for part in text.split(",") if part.strip()})
    for name in names:
        providers.get(name)  # unknown: a PrefixlockError with a suggestion
    return names


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--calls",
        type=_calls,
        default=",".join(map(str, DEFAULT_CALLS)),  # argparse parses a string default
        metavar="N,N,...",
        help="history lengths to measure, in calls (default: %(default)s)",
    )
    parser.add_argument(
        "--provider",
        default="all",
        metavar="all|NAME,...",
        help="provider wire formats to serialize for (default: all)",
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of the synthetic conversations (default: 1)"
    )
    parser.add_argument("--json", action="store_true", help="print every figure as canonical JSON")


def run(args: argparse.Namespace) -> int:
    """Print the report; exit 0 whether or not the targets are met (they are figures)."""
    report = bench(
        args.calls,
        _provider_names(args.provider),
        args.seed,
        progress=lambda text: print(text, file=sys.stderr, flush=True),
    )
    if args.json:
        sys.stdout.write(canonical.dumps_pretty(report))
    else:
        print(format_report(report))
    return 0
