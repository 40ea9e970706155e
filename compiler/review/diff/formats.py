"""``prefixlock diff --format markdown | github``: the report as a pull-request comment
and as GitHub workflow annotations.

The markdown comment answers a reviewer's questions in order:

1. the headline: the deployment impact (root change, template/context change, none) and
   what it means for running conversations (they keep their cache either way: a running
   conversation keeps its root, and new context and runtime messages are appended);
2. one bullet per impact class with the changed bundle parts, named for people (never a
   build file name), and the spec ``file:line`` causes; golden files stale against
   their lock;
3. per provider, what a changed call costs before and after, in base input tokens and in
   dollars at the model's list price, the price table named (:mod:`prefixlock.cache.prices`);
4. the affected cases, one row each;
5. the details, call by call, and the unchanged cases, folded in ``<details>``.

It is bounded (:data:`MARKDOWN_LIMIT` characters, under GitHub's 65,536 for a comment):
what does not fit is counted ("N more"), and the full report, unbounded, is what
``markdown(report, limit=None)`` gives (``prefixlock diff --full-report PATH`` writes
it, for CI to upload as an artifact).

The annotations are one ``::error`` per root-change cause, one ``::notice``
(``::warning`` with ``--strict``) per template/context cause, at the spec line, one
``::error`` per stale golden case of NEW (a ``::warning`` for OLD: the comparison is
with what its files hold), and a closing ``::notice`` with the totals. Both depend on
the report only: the same diff gives the same bytes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from fractions import Fraction

from ...cache.prices import PRICE_TABLE, input_price
from ...core.errors import SpecError
from ...core.escaping import (
    markdown_code,
    markdown_fence,
    markdown_text,
    workflow_data,
    workflow_property,
)
from ..compare import (
    ADDED,
    CONTENT_CHANGE,
    NO_IMPACT,
    PREFIX_BREAK,
    ROOT_CHANGE,
    TAIL_ONLY,
    UNCHANGED,
)
from ..jsondiff import describe
from . import UNKNOWN_IMPACT, DiffReport, FileDiff, FolderDiff, PairDiff
from .folders import CallDiff

__all__ = [
    "HEADLINES",
    "MARKDOWN_LIMIT",
    "UNBUILT",
    "github",
    "github_errors",
    "markdown",
    "markdown_errors",
    "part_name",
]

#: The most characters :func:`markdown` prints by default: GitHub refuses a comment over
#: 65,536; the rest is left for what a workflow adds around it.
MARKDOWN_LIMIT = 60_000
#: The most spec lines a bullet names, and the most rows of the cases table.
_MAX_CAUSES = 8
_MAX_CASES = 40

#: How the comment names each impact class.
KIND_NAMES = {ROOT_CHANGE: "root change", CONTENT_CHANGE: "template/context change"}

#: The first line of the comment, by deployment impact.
HEADLINES = {
    ROOT_CHANGE: "root change: running conversations keep their cache; new conversations"
    " start a new cached prefix",
    CONTENT_CHANGE: "template/context change: running conversations keep their cache",
    NO_IMPACT: "no deployment impact",
    UNKNOWN_IMPACT: "impact unknown: the golden files are stale against the lock",
}

#: What each impact class does when deployed (the comment's wording).
CONSEQUENCES = {
    ROOT_CHANGE: "every new conversation starts a new cached prefix (the old one goes cold"
    " fleet-wide); running conversations keep their root and their cache",
    CONTENT_CHANGE: "only messages rendered from now on differ, appended at the tail of"
    " running conversations, which keep their cache",
}

#: Bundle parts as people know them (the build's file names are internal).
_PART_NAMES = {
    "instructions.md": "the instructions",
    "tools.json": "the tool list",
    "settings.json": "the provider settings",
    "context-defaults.json": "the built-in rules, skills, subagents and MCP servers",
    "modes.json": "the modes and their reminders",
}
_TEMPLATES = "templates/"

_LOCATION = re.compile(r"(?P<file>.+?):(?P<line>[0-9]+)(?::[0-9]+)?")


def part_name(part: str, code: str = "`") -> str:
    """A bundle part as people know it: ``the instructions``, ``the template `x.j2```."""
    if part.startswith(_TEMPLATES):
        return f"the template {code}{part.removeprefix(_TEMPLATES)}{code}"
    return _PART_NAMES.get(part, f"{code}{part}{code}")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _cell(text: str) -> str:
    return markdown_text(text)


def _pipe_table(
    rows: Sequence[Sequence[str]], numbers: Sequence[int] = (), formatted: Sequence[int] = ()
) -> list[str]:
    """A pipe table; the columns ``numbers`` are right-aligned. Every cell is escaped
    (:func:`_cell`) but those of the columns ``formatted``, which the caller built from
    escaped pieces (:func:`_code`)."""
    header, *body = rows
    align = ["---:" if i in numbers else "---" for i in range(len(header))]
    lines = [f"| {' | '.join(_cell(c) for c in header)} |", f"| {' | '.join(align)} |"]
    lines += [
        f"| {' | '.join(c if i in formatted else _cell(c) for i, c in enumerate(row))} |"
        for row in body
    ]
    return lines


def _code(text: str) -> str:
    return markdown_code(text)


def _causes(sources: Sequence[str]) -> str:
    shown = ", ".join(_code(s) for s in sources[:_MAX_CAUSES])
    more = len(sources) - _MAX_CAUSES
    return shown + (f" and {more} more" if more > 0 else "")


def _summary(report: DiffReport) -> list[str]:
    """One bullet per impact class present (parts and causes), then stale golden cases."""
    bullets = []
    if report.impact == NO_IMPACT and report.parts:
        changed = ", ".join(part_name(part) for part in report.parts)
        bullets.append(
            f"- no golden case renders what changed, {changed}; add a scenario that does"
        )
    for kind in (ROOT_CHANGE, CONTENT_CHANGE) if report.impact != NO_IMPACT else ():
        sources = _sources(report, kind)
        parts = report.parts_of(kind)
        if report.impact_of(kind) or parts:
            of = f" of {', '.join(part_name(p) for p in parts)}" if parts else ""
            at = f", caused by {_causes(sources)}" if sources else ""
            bullets.append(f"- **{KIND_NAMES[kind]}**{of}{at}: {CONSEQUENCES[kind]}")
    bullets += [f"- **stale golden files**: {_cell(stale)}" for stale in report.stale]
    bullets += [
        f"- note, OLD's golden files are stale: {_cell(stale)}" for stale in report.old_stale
    ]
    if isinstance(report.result, FolderDiff):
        bullets += [f"- note: {_cell(note)}" for note in report.result.notes]
    return bullets or ["- no golden call changed"]


def _sources(report: DiffReport, kind: str) -> list[str]:
    result = report.result
    if isinstance(result, FolderDiff):
        return result.sources(kind)
    return [result.source] if result.source and result.comparison.impact == kind else []


# --- cost per changed call ------------------------------------------------------------


def _tokens(value: Fraction, sign: str = "") -> str:
    return f"{float(value):{sign},.2f}"


def _dollars(value: Fraction) -> str:
    """``+$0.000042``: two significant digits below a cent, else cents."""
    amount = abs(float(value))
    sign = "-" if value < 0 else "+"
    if amount == 0:
        return "$0"
    digits = 2 if amount >= 0.01 else min(12, 1 - math.floor(math.log10(amount)))
    return f"{sign}${amount:.{digits}f}"


def _changed(call: CallDiff) -> bool:
    return call.verdict != UNCHANGED


def _priced(call: CallDiff) -> bool:
    return call.verdict in (PREFIX_BREAK, TAIL_ONLY) and None not in (
        call.old_cost,
        call.new_cost,
    )


def _cost_table(result: FolderDiff) -> list[str]:
    """Per provider: the changed calls and what one costs, old -> new, and the change."""
    rows = [
        (
            "provider",
            "model",
            "changed calls",
            "cost per changed call, old → new",
            "change per changed call",
        )
    ]
    tokenizers: dict[str, None] = {}
    for provider in sorted({pair.provider for pair in result.pairs}):
        pairs = [pair for pair in result.pairs if pair.provider == provider]
        calls = [call for pair in pairs for call in pair.calls]
        priced = [call for call in calls if _priced(call)]
        if not priced:
            continue
        reports = [r for pair in pairs for r in (pair.new_report, pair.old_report) if r]
        model = reports[0].model if reports else ""
        tokenizers.update((r.tokenizer, None) for r in reports)
        old = sum((c.old_cost or Fraction(0) for c in priced), Fraction(0)) / len(priced)
        new = sum((c.new_cost or Fraction(0) for c in priced), Fraction(0)) / len(priced)
        price = input_price(model) if model else None
        change = f"{_tokens(new - old, '+')} tokens"
        change += (
            f", {_dollars((new - old) * price / 1_000_000)}"
            if price is not None
            else " (no list price for this model)"
        )
        rows.append(
            (
                provider,
                model or "-",
                f"{sum(1 for c in calls if _changed(c))} of {len(calls)}",
                f"{_tokens(old)} → {_tokens(new)} tokens",
                change,
            )
        )
    if len(rows) == 1:
        return []
    counted = ", ".join(
        "estimate: UTF-8 bytes / 4" if name == "estimate" else name for name in tokenizers
    )
    return [
        "**Cost per changed call**, simulated on the golden conversations with each"
        " provider's cache rules. Tokens: the cost in base input tokens (cache reads and"
        f" writes at their price multipliers; token counts: {counted}). Dollars: at the"
        f" model's base input price in the table *{PRICE_TABLE}*.",
        "",
        *_pipe_table(rows, numbers=(2, 3, 4)),
        "",
    ]


# --- the affected cases -------------------------------------------------------------


def _cases(result: FolderDiff) -> tuple[list[str], list[str]]:
    """(the table of affected cases, the unchanged cases)."""
    names = sorted({pair.case for pair in result.pairs})
    added, removed = set(result.cases_added), set(result.cases_removed)
    rows = []
    unchanged = []
    for case in names:
        pairs = [pair for pair in result.pairs if pair.case == case]
        calls = [call for pair in pairs for call in pair.calls]
        changed = [call for call in calls if _changed(call)]
        if not changed and case not in added and case not in removed:
            unchanged.append(case or ".")
            continue
        if case in added or case in removed:
            impact = "case added" if case in added else "case removed"
        else:
            kinds = [k for k in (ROOT_CHANGE, CONTENT_CHANGE) if any(c.impact == k for c in calls)]
            impact = KIND_NAMES[kinds[0]] if kinds else "calls added or removed"
        shares = [p.invalidated_max for p in pairs if p.invalidated_max is not None]
        sources = list(dict.fromkeys(c.source for c in calls if c.source))
        cause = "-"
        if sources:
            more = len(sources) - 1
            cause = _code(sources[0]) + (f" and {more} more" if more else "")
        rows.append(
            (
                case or ".",
                impact,
                f"{len(changed)} of {len(calls)}",
                str(len(pairs)),
                f"{max(shares):.1%}" if shares else "-",
                cause,
            )
        )
    if not rows:
        return [], unchanged
    header = (
        "case",
        "impact",
        "changed calls",
        "providers",
        "largest share of an old body after the first difference",
        "caused by",
    )
    shown = rows[:_MAX_CASES]
    table = _pipe_table([header, *shown], numbers=(2, 3, 4), formatted=(5,))
    if len(rows) > len(shown):
        table.append("")
        table.append(f"… and {len(rows) - len(shown)} more affected cases (in the full report)")
    changed_calls = sum(1 for p in result.pairs for c in p.calls if _changed(c))
    all_calls = sum(len(p.calls) for p in result.pairs)
    title = (
        f"**Affected cases**: {len(rows)} of {len(names)}; {changed_calls} of"
        f" {_plural(all_calls, 'golden call')} changed"
    )
    return [title, "", *table, ""], unchanged


# --- the details ----------------------------------------------------------------------


def _runs(pair: PairDiff) -> list[list[CallDiff]]:
    runs: list[list[CallDiff]] = []
    for call in pair.calls:
        last = runs[-1][-1] if runs else None
        if last is not None and last.group() == call.group() and last.number == call.number - 1:
            runs[-1].append(call)
        else:
            runs.append([call])
    return [run for run in runs if run[0].verdict != UNCHANGED]


def _explain(run: list[CallDiff]) -> list[str]:
    """The lines of one run of calls changed alike (no "prefix break": the comment's
    reader asks what deploying does, and the headline says it)."""
    first = run[0]
    c = first.comparison
    if c is None:
        return [f"call {'added' if first.verdict == ADDED else 'removed'}"]
    if first.verdict == TAIL_ONLY:
        return [f"the old body is a prefix of the new one (+{_plural(c.appended, 'item')})"]
    if c.difference is None:
        return ["differs"]
    if c.note:
        return [f"differs at {c.difference.path}: {c.note}"]
    old_text, new_text = describe(c.difference)
    lines = [f"differs at {c.difference.path}: old {old_text} new {new_text}"]
    if first.source is not None:
        lines.append(f"caused by {first.source}")
    after = c.old_size - c.common
    share = f"{c.invalidated:.1%} of the old body follows the first difference"
    worst = max(run, key=lambda call: call.comparison.invalidated if call.comparison else 0.0)
    upto = ""
    if worst is not first and worst.comparison is not None:
        upto = f", up to {worst.comparison.invalidated:.1%} in call {worst.number:04d}"
    lines.append(f"{share} ({after} of {c.old_size} bytes{upto})")
    return lines


def _pair_details(pair: PairDiff) -> list[str]:
    if not pair.old_calls or not pair.new_calls:
        side = "NEW" if not pair.old_calls else "OLD"
        return [f"{pair.key}: only in {side} ({_plural(pair.new_calls or pair.old_calls, 'call')})"]
    changed = sum(1 for call in pair.calls if _changed(call))
    lines = [
        f"{pair.key}: {changed} of {_plural(len(pair.calls), 'call')} changed; cost"
        f" {_tokens(pair.old_cost)} -> {_tokens(pair.new_cost)} tokens"
        f" ({_tokens(pair.cost_delta, '+')})"
    ]
    for run in _runs(pair):
        numbers = f"{run[0].number:04d}" + (f"-{run[-1].number:04d}" if len(run) > 1 else "")
        explained = _explain(run)
        lines.append(f"  {numbers}: {explained[0]}")
        lines += [f"  {' ' * len(numbers)}  {line}" for line in explained[1:]]
    return lines


def _fenced(lines: list[str]) -> list[str]:
    """A ``text`` code block whose fence is longer than any backtick run inside."""
    return markdown_fence(lines)


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def markdown(
    report: DiffReport, *, limit: int | None = MARKDOWN_LIMIT, full_report: str | None = None
) -> list[str]:
    """A pull-request comment (see the module docstring) of at most ``limit`` characters
    (None: everything); ``full_report`` names where the whole report was written."""
    lines = [f"### prefixlock diff: {HEADLINES[report.impact]}", "", *_summary(report), ""]
    result = report.result
    if isinstance(result, FileDiff):
        lines += [f"{_code(result.old.label)} → {_code(result.new.label)}", ""]
        call = CallDiff(1, result.comparison.verdict, result.comparison, result.source)
        if call.verdict == UNCHANGED:
            explained = ["unchanged" + (f" ({c})" if (c := result.comparison.note) else "")]
        else:
            explained = _explain([call])
        shown = [f"{result.provider}: {explained[0]}", *(f"  {line}" for line in explained[1:])]
        return [*lines, *_fenced(shown)]
    lines += _cost_table(result)
    cases, unchanged = _cases(result)
    lines += cases
    lines.append(f"Old: {_cell(result.old.label)}; new: {_cell(result.new.label)}.")
    tail: list[str] = []
    if unchanged:
        shown = unchanged[:_MAX_CASES]
        more = f", and {len(unchanged) - len(shown)} more" if len(unchanged) > len(shown) else ""
        noun = _plural(len(unchanged), "unchanged case")
        tail = ["", f"<details><summary>{noun}</summary>", ""]
        tail.append(", ".join(_cell(case) for case in shown) + more)
        tail += ["", "</details>"]
    blocks = [_pair_details(pair) for pair in result.pairs if pair.changed]
    budget = None if limit is None else limit - _size(lines) - _size(tail) - 1_000
    details: list[str] = []
    kept = 0
    for block in blocks:
        if budget is not None and _size(details) + _size(block) > budget:
            break
        details += block
        kept += 1
    left = len(blocks) - kept
    if blocks:
        calls = sum(1 for p in result.pairs for c in p.calls if _changed(c))
        summary = f"Details: each changed call ({_plural(calls, 'call')})"
        lines += ["", f"<details><summary>{summary}</summary>", ""]
        lines += [*_fenced(details or ["(none fits; see the full report)"]), ""]
        if left:
            where = (
                f"the full report: {_code(full_report)}"
                if full_report is not None
                else "write the full report with `--full-report FILE`"
            )
            lines += [f"… and {left} more case/provider results, not shown here; {where}", ""]
        lines.append("</details>")
    lines += tail
    if full_report is not None and not left:
        lines += ["", f"The full report: {_code(full_report)}."]
    return lines


# --- GitHub workflow annotations -----------------------------------------------------


_data = workflow_data
_property = workflow_property


def _annotation(level: str, title: str, message: str, source: str | None = None) -> str:
    props = []
    match = _LOCATION.fullmatch(source) if source is not None else None
    if match is not None:
        props += [f"file={_property(match['file'])}", f"line={match['line']}"]
    elif source is not None:
        props.append(f"file={_property(source)}")
    props.append(f"title={_property(title)}")
    return f"::{level} {','.join(props)}::{_data(message)}"


def github(report: DiffReport, *, strict: bool = False) -> list[str]:
    """GitHub workflow annotations: errors for root changes and stale golden files,
    notices (warnings with ``strict``) for rendered-content changes, at the spec lines."""
    lines = []
    revision = report.result.new.given + ":" if report.result.new.kind == "revision" else ""
    for kind, level in (
        (ROOT_CHANGE, "error"),
        (CONTENT_CHANGE, "warning" if strict else "notice"),
    ):
        if not report.impact_of(kind):
            continue
        parts = report.parts_of(kind)
        of = f" of {', '.join(part_name(p, code='') for p in parts)}" if parts else ""
        message = f"{KIND_NAMES[kind]}{of}: {CONSEQUENCES[kind]}"
        sources: list[str | None] = [s.removeprefix(revision) for s in _sources(report, kind)]
        for source in sources or [None]:
            lines.append(_annotation(level, f"prefixlock: {KIND_NAMES[kind]}", message, source))
    for stale in report.stale:
        lines.append(_annotation("error", "prefixlock: stale golden files", stale))
    for stale in report.old_stale:
        lines.append(_annotation("warning", "prefixlock: OLD's golden files are stale", stale))
    if isinstance(report.result, FolderDiff):
        for note in report.result.notes:
            lines.append(_annotation("notice", "prefixlock: calls priced back to back", note))
    result = report.result
    if isinstance(result, FolderDiff):
        calls = [call for pair in result.pairs for call in pair.calls]
        changed = sum(1 for call in calls if _changed(call))
        totals = f"{changed} of {_plural(len(calls), 'golden call')} changed"
    else:
        totals = result.comparison.verdict
    impact = KIND_NAMES.get(report.impact, report.impact)
    lines.append(_annotation("notice", "prefixlock diff", f"{totals}; deployment impact: {impact}"))
    return lines


# --- a side that does not build ------------------------------------------------------

#: The heading of the comment and the title of the annotations when a side's specs do
#: not build (``diff`` then compares nothing and exits 2).
UNBUILT = "the specs do not build"


def markdown_errors(errors: Sequence[SpecError]) -> list[str]:
    """The comment when a side's specs do not build: the heading, then the build's own
    ``file:line:col`` errors as ``prefixlock build`` prints them, in a code block."""
    count = f"{len(errors)} error{'' if len(errors) == 1 else 's'}"
    return [
        f"### prefixlock diff: {UNBUILT}",
        "",
        f"Nothing was compared: `prefixlock build` rejects the specs ({count}).",
        "",
        *_fenced([str(error) for error in errors]),
    ]


def github_errors(errors: Sequence[SpecError]) -> list[str]:
    """One ``::error`` per build error at its file, line and column (a file of a
    revision, ``REV:path``, is not in the checkout: its location goes in the message)."""
    lines = []
    for error in errors:
        where = error.location
        if ":" in where.file or not where.file:
            lines.append(
                f"::error title={_property(f'prefixlock: {UNBUILT}')}::{_data(str(error))}"
            )
            continue
        props = [f"file={_property(where.file)}"]
        props += [f"line={where.line}"] if where.line > 0 else []
        props += [f"col={where.column}"] if where.column > 0 else []
        props.append(f"title={_property(f'prefixlock: {UNBUILT}')}")
        message = f"{error.path}: {error.message}" if error.path else error.message
        lines.append(f"::error {','.join(props)}::{_data(message)}")
    return lines
