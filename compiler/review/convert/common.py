"""What every transcript converter shares: reading JSON lines, the scenario being built,
tool-name mapping, redaction, the observed usage and the report of what was dropped.

A converter (one module per source format: :mod:`.claude_code`, :mod:`.codex`) reads a
transcript into a :class:`Builder`, which keeps the steps in the public scenario format
(``docs/scenarios.md``) and, per model call, the usage the transcript observed. The
builder never knows a source format; the converters never write a file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from ...core import canonical
from ...core.errors import CanonicalJSONError, InputError, Location, SpecError, SpecErrors
from ...core.secrets import redact_text, redact_value
from ...core.timestamps import seconds, stamp_problem

__all__ = [
    "USAGE_FORMAT",
    "Builder",
    "Converted",
    "ToolMap",
    "Usage",
    "default_tools",
    "read_lines",
]

#: The ``format`` of a usage file (``s.usage.json``).
USAGE_FORMAT = "prefixlock-usage/1"

#: The tool every unknown source tool maps to unless a mapping file says otherwise: the
#: built-in whose call shape (a free-form command with arguments) fits any tool.
FALLBACK_TOOL = "run_terminal_command"

#: The query of a user turn whose transcript line carries no text (only tool results or
#: an image): a scenario's user turn needs a query.
EMPTY_QUERY = "(no text)"

#: The text of a reply the transcript does not have (an interrupted call) or that has no
#: text and no tool call (only thinking): Anthropic and Bedrock refuse blank text blocks,
#: and a reply of thinking alone is left out of other providers' bodies.
EMPTY_REPLY = "(no reply in the transcript)"

#: The output of a tool call the transcript never answered.
NO_RESULT = "(no result in the transcript)"


def read_lines(path: Path, file: str) -> list[tuple[int, dict[str, Any]]]:
    """Every non-blank line of a JSON-lines transcript as ``(line number, object)``.

    A line that is not one JSON object (malformed, or cut off by a crash: a truncated
    last line) is an error naming ``file:line``; all of them are reported together
    (:class:`SpecErrors`), so nothing is converted from a transcript with a bad line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{file}: cannot read the transcript: {exc.strerror}") from exc
    errors: list[SpecError] = []
    out: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            value = canonical.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            errors.append(SpecError(Location(file, number), "", "not UTF-8 text"))
            continue
        except (ValueError, CanonicalJSONError) as exc:
            why = exc.msg if isinstance(exc, ValueError) and hasattr(exc, "msg") else str(exc)
            errors.append(
                SpecError(
                    Location(file, number),
                    "",
                    f"not a JSON line ({why}); a truncated or malformed transcript "
                    "line: nothing was written",
                )
            )
            continue
        if not isinstance(value, dict):
            errors.append(
                SpecError(
                    Location(file, number),
                    "",
                    f"expected a JSON object, got {type(value).__name__}: nothing was written",
                )
            )
            continue
        out.append((number, value))
    if errors:
        raise SpecErrors(errors)
    if not out:
        raise InputError(f"{file}: the transcript has no lines")
    return out


@attrs.frozen
class ToolMap:
    """Source tool name -> one of the bundle's tools. ``names``: exact names; ``prefixes``:
    a name starting with one (``mcp__``) maps to its tool; anything else: ``fallback``."""

    names: Mapping[str, str]
    prefixes: tuple[tuple[str, str], ...] = ()
    fallback: str = FALLBACK_TOOL

    def __call__(self, name: str) -> tuple[str, bool]:
        """The bundle tool of ``name``, and whether it came from the fallback."""
        if name in self.names:
            return self.names[name], False
        for prefix, tool in self.prefixes:
            if name.startswith(prefix):
                return tool, False
        return self.fallback, True

    def overridden(self, value: Mapping[str, Any]) -> ToolMap:
        """This map with a mapping file's ``tools`` and ``fallback`` over it."""
        tools = value.get("tools", {})
        return ToolMap(
            {**self.names, **tools},
            self.prefixes,
            str(value.get("fallback", self.fallback)),
        )


#: The example bundle's tools (rules/tools.yaml) and, per source format, the source tools
#: that map onto each: (bundle tool, Claude Code's, Codex's). MCP tools (``mcp__...``) map
#: onto ``mcp_call``; any other onto :data:`FALLBACK_TOOL`.
_DEFAULT_TABLE: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("read_file", ("Read",), ("read_file", "view_image")),
    ("write_file", ("Write",), ()),
    ("edit_file", ("Edit", "MultiEdit", "NotebookEdit"), ("apply_patch",)),
    (
        "run_terminal_command",
        ("Bash", "BashOutput", "KillShell"),
        ("shell", "local_shell", "exec_command", "write_stdin"),
    ),
    ("glob_search", ("Glob",), ()),
    ("grep_search", ("Grep",), ("grep_files",)),
    ("list_dir", ("LS",), ("list_dir",)),
    ("web_search", ("WebSearch", "WebFetch"), ("web_search",)),
    ("todo_write", ("TodoWrite",), ("update_plan",)),
    ("spawn_subagent", ("Task",), ()),
    ("read_skill", ("Skill",), ()),
)

_COLUMNS = {"claude-code": 1, "codex": 2}


def default_tools(source: str) -> ToolMap:
    """The default tool map of source format ``source`` (``claude-code``, ``codex``)."""
    column = _COLUMNS[source]
    names = {name: row[0] for row in _DEFAULT_TABLE for name in row[column]}
    return ToolMap(dict(sorted(names.items())), (("mcp__", "mcp_call"),))


@attrs.frozen
class Usage:
    """What one model call observed, normalized over the sources: ``uncached`` input
    tokens, ``cache_read`` tokens, tokens written to the cache for 5 minutes and for an
    hour, and ``output`` tokens (reasoning included)."""

    uncached: int
    cache_read: int
    cache_write_5m: int
    cache_write_1h: int
    output: int

    @property
    def input(self) -> int:
        """The whole prompt: uncached + read + written."""
        return self.uncached + self.cache_read + self.cache_write_5m + self.cache_write_1h

    def to_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input,
            "uncached_tokens": self.uncached,
            "cache_read_tokens": self.cache_read,
            "cache_write_5m_tokens": self.cache_write_5m,
            "cache_write_1h_tokens": self.cache_write_1h,
            "output_tokens": self.output,
        }


def count(value: Any) -> int:
    """A token count of a usage object: a non-negative integer, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


@attrs.frozen
class Converted:
    """A converted transcript: the scenario (public format, as a JSON value), the usage
    file's value, and the report (what was dropped and why, counts)."""

    scenario: dict[str, Any]
    usage: dict[str, Any]
    report: dict[str, Any]
    #: Sub-agents' conversations, each its own scenario: (agent id, converted).
    sidechains: tuple[tuple[str, Converted], ...] = ()

    def scenario_bytes(self) -> bytes:
        """The scenario file: indented canonical JSON, which is YAML too (YAML 1.2 is a
        superset of JSON), so it loads as any scenario and re-imports byte for byte."""
        header = "# yaml-language-server: $schema=scenario.schema.json\n"
        return (header + canonical.dumps_pretty(self.scenario)).encode("utf-8")

    def usage_bytes(self) -> bytes:
        return canonical.dumps_pretty(self.usage).encode("utf-8")

    def report_lines(self) -> Iterator[str]:
        """The report as the CLI prints it: counts, then every dropped item."""
        for key, value in self.report["counts"].items():
            yield f"{key}: {value}"
        for item in self.report["dropped"]:
            yield f"dropped {item['where']}: {item['what']} ({item['why']})"


class Builder:
    """The scenario being built, step by step, with the usage each model call observed.

    It keeps the scenario's conversation rules (``docs/scenarios.md``): an assistant step
    only answers a model call; tool results answer exactly the pending calls (a call the
    transcript never answers gets an error result, reported); no turn while calls wait
    (their missing results are filled first); user-turn timestamps never go backwards (an
    out-of-order stamp is raised to the latest one before it, reported). Every string is
    redacted (:func:`~prefixlock.core.secrets.redact_text`) before it is kept."""

    def __init__(self, source: str, file: str, tools: ToolMap) -> None:
        self.source = source
        self.file = file
        self.tools = tools
        self.steps: list[dict[str, Any]] = []
        self.calls: list[dict[str, Any]] = []  # one per model call, in order
        self.pending: list[str] = []  # call ids waiting for results
        self.awaiting = False  # a model call was made and its reply is not yet given
        self.gathered: list[dict[str, Any]] = []  # results of the pending calls so far
        self.gathered_line = 0
        self.events = 0
        self.notes = 0
        self.model: str | None = None
        self.latest: tuple[float, str] | None = None
        self.dropped: list[dict[str, str]] = []
        self.counts: dict[str, int] = {}
        self.unmatched: list[dict[str, Any]] = []
        self.base_context: dict[str, Any] | None = None
        self.context: dict[str, Any] | None = None

    # -- reporting -------------------------------------------------------------------

    def tally(self, key: str, by: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + by

    def drop(self, line: int, what: str, why: str) -> None:
        """Report something the scenario does not carry."""
        self.dropped.append({"where": f"{self.file}:{line}", "what": what, "why": why})
        self.tally("dropped")

    # -- context ---------------------------------------------------------------------

    def set_context(self, cwd: str | None, branch: str | None, head: str | None = None) -> None:
        """The working directory and Git branch the transcript carries at this point; the
        first becomes ``base.context``, a later change goes with the next user turn."""
        if not cwd and not branch:
            return
        context: dict[str, Any] = {}
        if cwd:
            context["environment"] = {
                "os": "unknown",
                "shell": "unknown",
                "cwd": redact_text(cwd),
                "workspace_roots": [redact_text(cwd)],
            }
        if branch:
            context["git"] = {
                "branch": redact_text(branch),
                "head": head or "unknown",
                "dirty": False,
            }
        if self.base_context is None:
            self.base_context = context
        self.context = context

    # -- steps -----------------------------------------------------------------------

    def _stamp(self, line: int, stamp: Any) -> str | None:
        if stamp is None:
            return None
        problem = stamp_problem(stamp)
        if problem is not None or not isinstance(stamp, str):
            self.drop(line, "the timestamp", problem or "not a string")
            return None
        when = seconds(stamp)
        if self.latest is not None and when < self.latest[0]:
            self.tally("out_of_order_timestamps")
            return self.latest[1]
        self.latest = (when, stamp)
        return stamp

    def _call(self, line: int, stamp: str | None) -> None:
        self.calls.append(
            {
                "call": len(self.calls) + 1,
                "step": len(self.steps) - 1,
                "line": line,
                "timestamp": stamp,
                "observed": None,
            }
        )
        self.awaiting = True

    def _batch(self, line: int) -> list[dict[str, Any]]:
        """The gathered results as a batch answering every pending call, in call order
        (a call without a result gets an error result, reported); empty if none waits."""
        if not self.pending:
            return []
        by_id = {r["call_id"]: r for r in self.gathered}
        missing = [c for c in self.pending if c not in by_id]
        if missing:
            self.tally("filled_tool_results", len(missing))
            self.drop(
                line,
                f"no result for tool call(s) {', '.join(missing)}",
                "the transcript never answered them; an error result was put in",
            )
        batch = []
        for call_id in self.pending:
            item = by_id.get(call_id) or {"call_id": call_id, "output": NO_RESULT, "is_error": True}
            batch.append(item)
        self.pending, self.gathered = [], []
        return batch

    def flush(self, line: int) -> None:
        """Send the gathered tool results (one model call), if any call waits."""
        batch = self._batch(line)
        if not batch:
            return
        self.steps.append({"tool_results": batch})
        self.tally("tool_result_batches")
        stamps = [r["timestamp"] for r in batch if "timestamp" in r]
        self._call(self.gathered_line or line, stamps[-1] if stamps else None)

    def results(
        self, line: int, results: list[dict[str, Any]], stamp: Any, *, send: bool = True
    ) -> None:
        """Tool results of one transcript record (``{call_id, output, is_error?,
        images?}``). They are gathered until every pending call has one (Claude Code
        writes parallel calls' results as one record each), then sent as one batch
        (``send``; else they wait for the user turn)."""
        at = self._stamp(line, stamp)
        for r in results:
            if r["call_id"] not in self.pending or any(
                g["call_id"] == r["call_id"] for g in self.gathered
            ):
                self.drop(line, f"tool result {r['call_id']}", "it answers no pending call")
                continue
            item: dict[str, Any] = {"call_id": r["call_id"], "output": redact_text(r["output"])}
            if r.get("is_error"):
                item["is_error"] = True
            if at is not None:
                item["timestamp"] = at
            if r.get("images"):  # {media_type, data}: the images the tool returned
                item["images"] = r["images"]
                self.tally("tool_result_images", len(r["images"]))
            if not self.gathered:
                self.gathered_line = line
            self.gathered.append(item)
        if send and self.pending and len(self.gathered) == len(self.pending):
            self.flush(line)

    def user(
        self,
        line: int,
        query: str,
        stamp: Any,
        results: list[dict[str, Any]] | None = None,
        images: list[dict[str, str]] | None = None,
    ) -> None:
        """A user turn (one model call). ``results``: tool results the turn sends first
        (``user.tool_results``); any call still pending is answered by it too.
        ``images``: ``{media_type, data}`` sent with the query (``user.images``)."""
        if results:
            self.results(line, results, stamp, send=False)
        at = self._stamp(line, stamp)
        batch = self._batch(line)
        self.events += 1
        text = redact_text(query) or EMPTY_QUERY
        body: dict[str, Any] = {"event": f"u{self.events}", "query": text}
        if at is not None:
            body["timestamp"] = at
        if self.context is not None and self.context != self.base_context:
            body["context"] = self.context
        if batch:
            body["tool_results"] = batch
            self.tally("turns_with_tool_results")
        if images:
            body["images"] = images
            self.tally("images", len(images))
        self.steps.append({"user": body})
        self.tally("user_turns")
        self._call(line, at)

    def note(self, line: int, text: str, what: str) -> None:
        """Content appended to the next request without a model call (a ``note`` step);
        where the scenario cannot take one (before the first user turn, while a call
        awaits its reply or tool calls their results) it is reported as dropped."""
        if self.events == 0 or self.awaiting or self.pending or self.gathered:
            self.drop(line, what, "a note needs a user turn before it and no call waiting")
            return
        if not text.strip():
            self.drop(line, what, "it has no text")
            return
        self.notes += 1
        self.steps.append({"note": {"event": f"n{self.notes}", "text": redact_text(text)}})
        self.tally("notes")

    def _no_reply(self, line: int) -> None:
        """The model call before has no reply in the transcript (an interruption): the
        scenario gives it an empty one."""
        self.steps.append({"assistant": {"text": EMPTY_REPLY}})
        self.awaiting = False
        self.tally("empty_replies")

    def assistant(
        self,
        line: int,
        text: str,
        calls: list[tuple[str, str, Any]],
        usage: Usage | None,
        model: str | None,
        thinking: list[dict[str, Any]] | None = None,
    ) -> None:
        """The reply to the pending model call: thinking parts (the scenario's
        ``thinking`` entries: ``provider``, ``text`` / ``summary``, ``signature`` /
        ``redacted``), text and tool calls ``(id, source name, arguments)``, and the
        usage the call observed."""
        self.flush(line)
        if not self.awaiting:
            # a reply without a call (the transcript has two replies in a row): its
            # billed call has no place in the scenario; counted beside it
            self.drop(line, "an assistant reply", "no model call of the scenario awaits it")
            if usage is not None:
                self.unmatched.append({"line": line, "observed": usage.to_json()})
            return
        body: dict[str, Any] = {}
        if thinking:
            # the visible words are redacted; the signature is opaque and kept as is
            body["thinking"] = [
                {
                    k: (redact_text(v) if k == "text" else [redact_text(t) for t in v])
                    if k in ("text", "summary")
                    else v
                    for k, v in part.items()
                }
                for part in thinking
            ]
            self.tally("thinking_parts", len(thinking))
        if text.strip():
            body["text"] = redact_text(text)
        tool_calls = []
        for call_id, name, arguments in calls:
            tool, fallback = self.tools(name)
            if fallback:
                self.tally("tools_by_fallback")
            self.tally(f"tool {name} -> {tool}")
            args = arguments if isinstance(arguments, dict) else {"input": arguments}
            tool_calls.append({"id": call_id, "name": tool, "arguments": redact_value(args)})
            self.pending.append(call_id)
        if tool_calls:
            body["tool_calls"] = tool_calls
        if "text" not in body and "tool_calls" not in body:
            body["text"] = EMPTY_REPLY
        self.steps.append({"assistant": body})
        self.awaiting = False
        self.tally("assistant_replies")
        if usage is not None:
            self.calls[-1]["observed"] = usage.to_json()
        if model:
            self.calls[-1]["model"] = model
            if self.model is not None and model != self.model:
                self.tally("model_switches")  # a switch step before the call (finish)
            self.model = model

    def compact(self, line: int, summary: str) -> None:
        """A compaction: the history becomes the summary."""
        self.flush(line)
        if self.awaiting:
            self._no_reply(line)
        if not self.steps:
            self.drop(line, "a compaction summary", "no history before it to compact")
            return
        self.steps.append({"compact": {"summary": redact_text(summary)}})
        self.tally("compactions")

    def rewind(self, line: int, turns: int) -> None:
        """Drop the last ``turns`` user turns and everything after them (a rollback:
        the transcript's history goes on from before them); their billed calls are
        counted as rewound and kept beside the scenario (``unmatched``)."""
        self.flush(line)
        starts = [i for i, step in enumerate(self.steps) if "user" in step]
        if turns <= 0 or len(starts) < turns:
            self.drop(line, f"a rollback of {turns} turn(s)", "the scenario has not that many")
            return
        cut = starts[-turns]
        gone = [c for c in self.calls if c["step"] >= cut]
        self.calls = [c for c in self.calls if c["step"] < cut]
        for call in gone:
            if call["observed"] is not None:
                self.unmatched.append({"line": call["line"], "observed": call["observed"]})
        self.tally("rewound_turns", turns)
        self.tally("rewound_billed_calls", sum(1 for c in gone if c["observed"] is not None))
        del self.steps[cut:]
        self.gathered = []
        last = self.steps[-1] if self.steps else {}
        self.awaiting = next(iter(last), None) in ("user", "tool_results")
        calls = last.get("assistant", {}).get("tool_calls", [])
        self.pending = [c["id"] for c in calls]

    def _switched(self, provider: str) -> list[dict[str, Any]]:
        """The steps with a ``switch`` to ``provider``'s model before each call whose
        model (the transcript's) is not the one before it, the first call's included: the
        replay sends each call to the model it went to, and the cache simulator prices
        it there (a new cache namespace). A call without a model keeps the one before.
        The calls' ``step`` indices follow the steps they moved with."""
        before: dict[int, str] = {}  # step index -> the model of the call it makes
        current = None
        for call in self.calls:
            model = call.get("model")
            if model is not None and model != current:
                before[call["step"]] = current = model
        steps: list[dict[str, Any]] = []
        moved: dict[int, int] = {}
        for index, step in enumerate(self.steps):
            if index in before:
                steps.append({"switch": {"provider": provider, "model": before[index]}})
            moved[index] = len(steps)
            steps.append(step)
        for call in self.calls:
            call["step"] = moved[call["step"]]
        return steps

    def finish(self, name: str, conversation: str, provider: str) -> Converted:
        if self.gathered:
            self.flush(self.gathered_line)
        if not self.steps:
            raise InputError(f"{self.file}: the transcript has no user turn to convert")
        scenario: dict[str, Any] = {"name": redact_text(name), "conversation": conversation}
        if self.base_context is not None:
            scenario["base"] = {"context": self.base_context}
        scenario["steps"] = self._switched(provider)
        observed = sum(1 for c in self.calls if c["observed"] is not None)
        self.counts["model_calls"] = len(self.calls)
        self.counts["observed_calls"] = observed
        usage: dict[str, Any] = {
            "format": USAGE_FORMAT,
            "source": self.source,
            "provider": provider,
            "calls": self.calls,
            "unmatched": self.unmatched,
        }
        report: dict[str, Any] = {
            "counts": dict(sorted(self.counts.items())),
            "dropped": self.dropped,
        }
        usage["report"] = report
        return Converted(scenario, usage, report)
