"""The seeded synthetic conversations that ``prefixlock bench`` plays.

:func:`generate` builds one conversation as a list of :class:`Call` values, from the
bundled example spec root's point of view: user turns that run tool loops (2-10 rounds,
sometimes parallel calls) with 2-8 KB tool outputs shaped like what each tool returns
(files, grep hits, pytest lines, search snippets, edits), background events, a change of
the request context every ~:data:`CONTEXT_EVERY` calls, and optionally one automatic
compaction. The same seed gives the same conversation, and every conversation of a seed
can end with the same tail script, so per-call figures over that tail compare the same
work at different history lengths. :func:`play` feeds one call to a
:class:`~prefixlock.runtime.conversation.Conversation`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import UsageError
from ..core.messages import TextPart
from ..core.model import ModelRequest
from ..core.output import ModelOutput, Usage
from ..runtime.conversation import Conversation
from ..runtime.request import AgentRunRequest
from ..runtime.tools import ToolCall, ToolResult

__all__ = ["COMPACT_AT", "CONTEXT_EVERY", "Call", "Output", "generate", "play"]

#: The automatic compaction of a compacting conversation comes with its first user turn
#: at or after this fraction of its calls.
COMPACT_AT = 1 / 3
#: Context changes come every CONTEXT_EVERY calls (give or take 10), at a user turn.
CONTEXT_EVERY = 50


#: The token usage every output reports (Anthropic's usage object, as its response
#: parser stores it): the figures do not matter to what is measured, their bytes do.
USAGE = Usage(
    input_tokens=52_410,
    cache_read_tokens=51_200,
    cache_write_tokens=1_130,
    output_tokens=412,
    raw=canonical.dumps(
        {
            "cache_creation_input_tokens": 1_130,
            "cache_read_input_tokens": 51_200,
            "input_tokens": 80,
            "output_tokens": 412,
            "service_tier": "standard",
        }
    ),
)


def _model_output(output: Output) -> ModelOutput:
    text = () if output.text is None else (TextPart(output.text),)
    calls = tuple(call.to_part() for call in output.tool_calls)
    stop = "tool_use" if calls else "end_turn"
    return ModelOutput("anthropic", text + calls, stop, USAGE, "claude-sonnet-4-5")


@attrs.frozen
class Output:
    """Model output, recorded before the next call."""

    text: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    #: What a provider's response parser gives for it (parts in model order, the call's
    #: usage): :func:`play` records it with :meth:`Conversation.record`, as a server that
    #: reads provider responses does, so every assistant record carries usage.
    model: ModelOutput = attrs.field(
        default=attrs.Factory(_model_output, takes_self=True), eq=False, repr=False
    )


@attrs.frozen
class Call:
    """One model call: the previous call's output, then the event that makes this call."""

    output: Output | None
    kind: str  # "user", "background" or "tool_results"
    request: AgentRunRequest | None = None
    results: tuple[ToolResult, ...] = ()


def play(conv: Conversation, call: Call) -> ModelRequest:
    """Record the previous output (:meth:`Conversation.record`), then handle this call's
    event."""
    if call.output is not None:
        conv.record(call.output.model)
    if call.kind == "tool_results":
        return conv.tool_results(call.results)
    assert call.request is not None
    return conv.handle(call.request)


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


def _pieces(rng: random.Random, size: int, piece: Callable[[random.Random], str]) -> list[str]:
    """Pieces made by ``piece`` until they and a separator each come to ``size`` chars."""
    out: list[str] = []
    total = 0
    while total < size:
        out.append(piece(rng))
        total += len(out[-1]) + 1
    return out


def _prose(rng: random.Random, size: int) -> str:
    return " ".join(_pieces(rng, size, lambda r: _sentence(r, r.randint(6, 16))))


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
    return "\n".join(_pieces(rng, size, line)) + "\n"


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
        raise UsageError(f"{calls} calls cannot end with a tail of {tail}")
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
