"""The readable form of a replay: a Markdown page reviewers diff next to the exact bytes.

The page starts with the root every call shares (bundle digest, instructions digest and
size, the ordered tool names, each provider's settings), one fact a line, so a root change
is a short diff of that section; :func:`recorded_bundle` reads the bundle digest back.

Per model call: a header (call number, the steps since the previous call, the call's
kind and event), then only what the call appended (message id, kind, role and text,
long texts folded by :func:`fold`; a request context that replaces an earlier one is
shown as a diff against it), then one status per provider, computed from the bytes by
comparing the call's body with the previous call's (cache markers stripped):

* ``first call``;
* ``tail append (+N messages)``: the previous body is an exact prefix (N wire items),
  or ``tail append (+K blocks in the last message)`` when only the last wire message
  gained content blocks (Bedrock: same-role neighbours are blocks of one message);
* ``PREFIX BREAK at <json path>``: the first place where it is not;
* ``PREFIX RESET (compaction)``: a compaction started a new history on purpose;
* ``CACHE RESET (switch: P/old → P/new: cache namespace reset)``: a ``switch`` step sent
  the call to another model, whose cache shares nothing with the old one's (each
  (provider, model) is its own namespace); after a switch each status names the model;
* ``retry: identical to call K`` / ``RETRY MISMATCH: differs from call K``.

Each status ends with a bar of BAR_WIDTH cells: tokens read from the cache (█), written
to it (▒) and sent uncached (░), from the cache simulator as ``verify`` runs it
(:func:`prefixlock.review.verify.simulate_calls`: UTF-8 bytes / 4 tokens, each call at
its request's time, so an entry that expired between turns is written again), and the
figures.

Whatever a scenario's texts and ids hold, the page keeps its structure for a Markdown
reader, which ends a line at CR LF, CR or LF: a text's block ends a line at each of them,
showing a CR as ``␍`` (``␍␊`` for CR LF), so no line of it leaves the block's indent; ids
and tool-call arguments are code spans (:func:`code_span`), so ``<int:pk>``, ``\\(`` or
``__init__`` show as written, and an id's CR or LF shows as ``\\r`` or ``\\n``.

A retry re-sends an earlier (shorter) request, so the call after it is compared with
the last call before it. The page depends on the scenario, the requests and the bytes
only: the same replay renders the same text.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

from ..cache.simulator import CallCache
from ..core.errors import CacheSimulationError
from ..core.messages import (
    CanonicalMessage,
    ImagePart,
    MessageKind,
    OpaquePart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from ..store.records import ContextSection
from .replay import Call, divergence, history_blocks, history_length
from .scenario import BackgroundStep, RetryStep, Scenario, SwitchStep, UserStep
from .verify import simulate_calls

__all__ = [
    "BAR_WIDTH",
    "DIFF_FOLD",
    "FOLD_HEAD",
    "FOLD_LINES",
    "FOLD_TAIL",
    "LINE_WIDTH",
    "cache_bar",
    "code_span",
    "fold",
    "recorded_bundle",
    "render_calls",
]

#: Texts longer than FOLD_LINES lines show their first FOLD_HEAD and last FOLD_TAIL lines.
FOLD_LINES = 14
FOLD_HEAD = 8
FOLD_TAIL = 4
#: A context diff is folded the same way, with more room: it is what reviewers look for.
DIFF_FOLD = (40, 32, 6)
#: Longer lines are cut at this many characters.
LINE_WIDTH = 160

_BACKTICKS = re.compile(r"`{3,}")
_BACKTICK_RUN = re.compile(r"`+")
#: A Markdown reader's line endings (CommonMark): each ends a line of a block.
_LINE_ENDING = re.compile(r"\r\n|\r|\n")
#: How a block shows the line ending it broke a line at (LF alone: nothing).
_SHOWN_ENDING = {"\r\n": "␍␊", "\r": "␍", "\n": ""}

#: Cells of a call's cache bar: read from the cache, written to it, sent uncached.
BAR_WIDTH = 20
BAR_READ, BAR_WRITE, BAR_UNCACHED = "█", "▒", "░"
_BUNDLE_LINE = re.compile(rb"^- bundle: `(sha256:[0-9a-f]{64})`$", re.M)


def recorded_bundle(page: bytes) -> str | None:
    """The bundle digest a ``calls.md`` page was rendered from (None: no root section)."""
    match = _BUNDLE_LINE.search(page)
    return match[1].decode("ascii") if match is not None else None


def _cells(tokens: int, total: int) -> int:
    """``BAR_WIDTH * tokens / total`` rounded half up, in integers (no float ties)."""
    return (2 * BAR_WIDTH * tokens + total) // (2 * total) if total else 0


def cache_bar(figures: CallCache) -> str:
    """BAR_WIDTH cells: read, written, uncached; rounded at the running total so the
    cells always add up."""
    total = figures.input_tokens
    read = _cells(figures.cache_read_tokens, total)
    written = _cells(figures.cache_read_tokens + figures.cache_write_tokens, total) - read
    return BAR_READ * read + BAR_WRITE * written + BAR_UNCACHED * (BAR_WIDTH - read - written)


def _bar_text(figures: CallCache) -> str:
    return (
        f" · `{cache_bar(figures)}` {figures.cache_read_tokens:,} read,"
        f" {figures.cache_write_tokens:,} written, {figures.uncached_tokens:,} uncached"
    )


def code_span(text: str) -> str:
    """``text`` as a Markdown code span that shows it as written (CommonMark): fenced by
    more backticks than any run inside, with a space inside each fence when ``text``
    starts or ends with a backtick or starts and ends with a space (a reader strips one
    each side); CR and LF as ``\\r`` and ``\\n`` (a span shows a line ending as a space,
    and the line after it could start a heading). ``(empty)`` for the empty text."""
    shown = _one_line(text)
    if not shown:
        return "(empty)"
    longest = max((len(run) for run in _BACKTICK_RUN.findall(shown)), default=0)
    fence = "`" * (longest + 1)
    padded = shown.startswith("`") or shown.endswith("`")
    padded = padded or (shown.startswith(" ") and shown.endswith(" ") and shown.strip(" ") != "")
    pad = " " if padded else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def _one_line(text: str) -> str:
    """``text`` with each CR and LF shown as ``\\r`` and ``\\n``."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _cut_span(text: str) -> str:
    """:func:`code_span` of ``text`` cut at LINE_WIDTH characters, ``… (+N chars)`` after."""
    if len(text) <= LINE_WIDTH:
        return code_span(text)
    return f"{code_span(text[:LINE_WIDTH])}… (+{len(text) - LINE_WIDTH} chars)"


def _block_lines(text: str) -> list[str]:
    """The lines of ``text`` as a block shows them: a line ends at each CR LF, CR or LF
    (every line ending a Markdown reader knows), a CR shown as ``␍`` (``␍␊`` for CR LF)."""
    lines: list[str] = []
    start = 0
    for match in _LINE_ENDING.finditer(text):
        lines.append(text[start : match.start()] + _SHOWN_ENDING[match.group()])
        start = match.end()
    lines.append(text[start:])
    return lines


def fold(text: str, limit: tuple[int, int, int] = (FOLD_LINES, FOLD_HEAD, FOLD_TAIL)) -> list[str]:
    """``text`` in at most ``limit[0]`` lines (:func:`_block_lines`); a longer one as its
    first ``limit[1]`` lines, ``… N lines …`` and its last ``limit[2]``; each line cut at
    LINE_WIDTH characters with ``… (+N chars)``."""
    lines = _block_lines(text)
    most, head, tail = limit
    if len(lines) > most:
        hidden = len(lines) - head - tail
        lines = [*lines[:head], f"… {hidden} lines …", *lines[-tail:]]
    return [_cut(line) for line in lines]


def _cut(line: str) -> str:
    if len(line) <= LINE_WIDTH:
        return line
    return f"{line[:LINE_WIDTH]}… (+{len(line) - LINE_WIDTH} chars)"


def _block(lines: Sequence[str], info: str = "text") -> list[str]:
    """A fenced block, indented to sit in a list item; the fence outgrows any inside."""
    longest = max((len(m.group()) for line in lines for m in _BACKTICKS.finditer(line)), default=2)
    fence = "`" * max(3, longest + 1)
    return [f"  {fence}{info}", *(f"  {line}" if line else "" for line in lines), f"  {fence}"]


class _Page:
    def __init__(
        self, scenario: Scenario, calls: Sequence[Call], bodies: Mapping[str, list[bytes]]
    ):
        self.scenario = scenario
        self.calls = calls
        self.bodies = bodies
        self.names = list(bodies)
        self.lines: list[str] = []
        self.latest_context: CanonicalMessage | None = None
        #: ``context_updates: sections``: context message id -> the sections it carries
        #: (the last call's map holds every earlier one's)
        self.sections = calls[-1].sections if calls else {}
        #: the epoch whose full sectioned context was shown (an update follows it)
        self.sectioned_epoch: int | None = None
        self.epoch = 0
        self.tally = {
            name: {"append": 0, "break": 0, "reset": 0, "retry": 0} for name in self.names
        }
        models = {s.provider: s.model for s in scenario.bundle.settings}
        self.caches: dict[str, tuple[CallCache, ...]] = {}
        for name in self.names:
            try:
                report = simulate_calls(scenario, calls, name, bodies[name], models.get(name))
            except CacheSimulationError:
                continue  # no bar; verify reports why
            self.caches[name] = report.calls

    def bar(self, name: str, call: Call) -> str:
        calls = self.caches.get(name)
        return _bar_text(calls[call.index - 1]) if calls is not None else ""

    def render(self) -> str:
        base: Call | None = None  # the last call that was not a retry
        previous_step = -1
        for call in self.calls:
            self.header(call, previous_step)
            previous_step = call.step
            if call.kind == "retry":
                self.retry(call)
            else:
                self.appended(call, base)
                self.statuses(call, base)
                base = call
        calls, self.lines = self.lines, []
        self.intro()  # its table counts what the calls found
        return "\n".join([*self.lines, *calls]).rstrip("\n") + "\n"

    # -- page parts ----------------------------------------------------------------

    def intro(self) -> None:
        s = self.scenario
        add = self.lines.append
        add(f"# {_one_line(s.name)}")
        add("")
        self.root()
        add("## Calls")
        add("")
        add(
            f"Conversation {code_span(s.conversation)}: {len(s.steps)} steps,"
            f" {len(self.calls)} model calls. Each call lists only what it appended; each"
            " provider's status compares its body with the previous call's, cache markers"
            " stripped. Bars:"
            f" {BAR_READ} read from the cache, {BAR_WRITE} written to it, {BAR_UNCACHED} sent"
            " uncached (the cache simulator's figures, UTF-8 bytes / 4 tokens)."
        )
        add("")
        add("| provider | tail appends | prefix resets | retries | PREFIX BREAKS |")
        add("| --- | ---: | ---: | ---: | ---: |")
        for name in self.names:
            t = self.tally[name]
            add(f"| {name} | {t['append']} | {t['reset']} | {t['retry']} | {t['break']} |")
        add("")

    def root(self) -> None:
        """What every call starts with, one fact a line: a root change is a short diff."""
        bundle = self.scenario.bundle
        add = self.lines.append
        add("## Root")
        add("")
        add(
            "Every call of this case starts with it; a change here is a root change (a new"
            " cached prefix for every new conversation)."
        )
        add("")
        add(f"- bundle: `{bundle.digest}`")
        size = len(bundle.instructions.encode("utf-8"))
        digest = next((p.sha256 for p in bundle.parts if p.name == "instructions.md"), "")
        add(f"- instructions: {size:,} bytes, sha256 `{digest}`")
        tools = ", ".join(tool.name for tool in bundle.tools)
        add(f"- tools ({len(bundle.tools)}): {tools or '(none)'}")
        for settings in bundle.settings:
            options = "" if settings.options == "{}" else f", options `{settings.options}`"
            add(
                f"- settings {settings.provider}: `{settings.model}`,"
                f" max_tokens {settings.max_tokens}{options}"
            )
        add("")

    def header(self, call: Call, previous_step: int) -> None:
        add = self.lines.append
        add(f"## Call {call.index}: {call.kind} {code_span(call.event)}")
        add("")
        steps = []
        for index in range(previous_step + 1, call.step + 1):
            step = self.scenario.steps[index]
            label = (
                code_span(step.event)
                if isinstance(step, UserStep | BackgroundStep | RetryStep)
                else f"{step.provider} → {code_span(step.model)}"
                if isinstance(step, SwitchStep)
                else ""
            )
            steps.append(f"{index} {step.kind} {label}".rstrip())
        add(f"Steps: {' · '.join(steps)}")
        add("")

    def retry(self, call: Call) -> None:
        add = self.lines.append
        original = next(
            c
            for c in self.calls
            if c.kind != "retry" and c.event == call.event and c.index < call.index
        )
        add(
            f"Re-delivered {code_span(call.event)}: appends nothing; the request of call"
            f" {original.index}."
        )
        add("")
        for name in self.names:
            same = self.bodies[name][call.index - 1] == self.bodies[name][original.index - 1]
            if call.namespace(name) != original.namespace(name):  # a switch came between
                self.tally[name]["reset"] += 1
                was, now = "/".join(original.namespace(name)), "/".join(call.namespace(name))
                status = (
                    f"retry of call {original.index} after a switch: CACHE RESET (switch: "
                    f"{was} → {now}: cache namespace reset)"
                )
            elif same:
                self.tally[name]["retry"] += 1
                status = f"retry: identical to call {original.index}"
            else:
                self.tally[name]["break"] += 1
                status = f"RETRY MISMATCH: differs from call {original.index}"
            add(f"- {name}: {status}{self.bar(name, call)}")
        add("")

    def appended(self, call: Call, base: Call | None) -> None:
        request = call.request
        reset = base is None or request.epoch != base.request.epoch
        start = 0 if reset else len(base.request.messages) if base is not None else 0
        new = list(request.messages[start:])
        add = self.lines.append
        self.epoch = request.epoch
        if reset and base is not None:
            add(f"Compaction: a new history (epoch {request.epoch}) of {len(new)} messages:")
        else:
            add(f"Appended {len(new)} message{'s' if len(new) != 1 else ''}:")
        add("")
        for message in new:
            self.message(message)
        add("")

    def message(self, message: CanonicalMessage) -> None:
        add = self.lines.append
        add(f"- {code_span(message.id)} · {message.kind} · {message.role}")
        if message.kind is MessageKind.REQUEST_CONTEXT:
            self.context(message)
            return
        for part in message.parts:
            if isinstance(part, TextPart):
                self.lines.extend(_block(fold(part.text)))
            elif isinstance(part, ToolCallPart):
                add(f"  - call {code_span(part.call_id)} {part.name} {_cut_span(part.arguments)}")
            elif isinstance(part, ToolResultPart):
                error = " (error)" if part.is_error else ""
                add(f"  - result {code_span(part.call_id)}{error}")
                self.lines.extend(_block(fold(part.output)))
                for image in part.images:  # the tool's images, after its output
                    add(f"  - image {image.media_type} ({len(image.data)} base64 characters)")
            elif isinstance(part, OpaquePart):
                add(f"  - opaque {part.provider} data ({len(part.data)} characters)")
            elif isinstance(part, ImagePart):
                add(f"  - image {part.media_type} ({len(part.data)} base64 characters)")

    def context(self, message: CanonicalMessage) -> None:
        """A request context: whole (folded) the first time, else its diff to the latest."""
        add = self.lines.append
        latest, self.latest_context = self.latest_context, message
        carried = self.sections.get(message.id)
        if carried is not None:
            self.sectioned(message, carried, latest)
            return
        if latest is None:
            self.lines.extend(_block(fold(message.text)))
        elif latest.digest == message.digest:
            same = "the same message" if latest.id == message.id else f"as {code_span(latest.id)}"
            add(f"  (unchanged: {same})")
        else:
            diff = difflib.unified_diff(
                _block_lines(latest.text),
                _block_lines(message.text),
                _one_line(latest.id),
                _one_line(message.id),
                n=1,
                lineterm="",
            )
            self.lines.extend(_block(fold("\n".join(diff), DIFF_FOLD), "diff"))

    def sectioned(
        self,
        message: CanonicalMessage,
        carried: Sequence[ContextSection],
        latest: CanonicalMessage | None,
    ) -> None:
        """A sectioned request context: the sections it carries, then its text (an
        update holds only the sections that changed, so it is shown whole)."""
        add = self.lines.append
        full = self.sectioned_epoch != self.epoch
        self.sectioned_epoch = self.epoch
        gone = "empty" if full else "cleared"
        names = ", ".join(s.name if s.digest is not None else f"{s.name} ({gone})" for s in carried)
        add(f"  {'full context' if full else 'update'}, sections: {names}")
        if latest is not None and latest.digest == message.digest:
            same = "the same message" if latest.id == message.id else f"as {code_span(latest.id)}"
            add(f"  (unchanged: {same})")
        else:
            self.lines.extend(_block(fold(message.text)))

    def statuses(self, call: Call, base: Call | None) -> None:
        add = self.lines.append
        for name in self.names:
            body = self.bodies[name][call.index - 1]
            switched = call.models.get(name)
            wire = call.wire(name)
            if base is None:
                status = "first call"
            elif call.namespace(name) != base.namespace(name):
                self.tally[name]["reset"] += 1
                was, now = "/".join(base.namespace(name)), "/".join(call.namespace(name))
                status = f"CACHE RESET (switch: {was} → {now}: cache namespace reset)"
            elif call.request.epoch != base.request.epoch:
                self.tally[name]["reset"] += 1
                status = "PREFIX RESET (compaction)"
            else:
                old = self.bodies[name][base.index - 1]
                path = divergence(wire, old, body)
                if path is None:
                    self.tally[name]["append"] += 1
                    grown = history_length(wire, body) - history_length(wire, old)
                    status = f"tail append (+{grown} message{'s' if grown != 1 else ''})"
                    if grown == 0:  # only the last wire message gained blocks (Bedrock)
                        blocks = history_blocks(wire, body) - history_blocks(wire, old)
                        status = (
                            f"tail append (+{blocks} block{'s' if blocks != 1 else ''} "
                            "in the last message)"
                        )
                else:
                    self.tally[name]["break"] += 1
                    status = f"PREFIX BREAK at {path}"
            # After a switch step, the call names where it went: (provider, model).
            if call.route is not None and wire != name:
                shown = f"{name} → {wire} {code_span(call.target(name))}"
            elif call.route is not None:
                shown = f"{name} {code_span(call.target(name))}"
            else:
                shown = name if switched is None else f"{name} {code_span(switched)}"
            add(f"- {shown}: {status}{self.bar(name, call)}")
        add("")


def render_calls(
    scenario: Scenario, calls: Sequence[Call], bodies: Mapping[str, list[bytes]]
) -> str:
    """The Markdown page of a replay: ``calls`` and each provider's ``bodies`` of them."""
    return _Page(scenario, calls, bodies).render()
