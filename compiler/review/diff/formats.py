"""``prefixlock diff --format markdown | github``: the report as a pull-request comment
and as GitHub workflow annotations.

The markdown comment puts the verdict first — a heading with the deployment impact, one
bullet per impact class with the changed bundle parts and the spec ``file:line`` causes,
golden files stale against their lock — then the cases and providers whose calls
changed, with their call details folded, and the unchanged rows collapsed in a
``<details>`` block. The annotations are one ``::error`` per root-change cause, one
``::notice`` (``::warning`` with ``--strict``) per rendered-content cause, at the spec
line, one ``::error`` per stale golden case of NEW (a ``::warning`` for OLD: the
comparison is with what its files hold), and a closing ``::notice`` with the totals.
Both depend on the report only: the same diff gives the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...core.errors import SpecError
from ...core.escaping import (
    markdown_code,
    markdown_fence,
    markdown_text,
    workflow_data,
    workflow_property,
)
from ..compare import CALL_VERDICTS, CONTENT_CHANGE, NO_IMPACT, ROOT_CHANGE
from . import UNKNOWN_IMPACT, DiffReport, FileDiff, FolderDiff, PairDiff, details, table_rows

__all__ = ["HEADLINES", "UNBUILT", "github", "github_errors", "markdown", "markdown_errors"]

#: The first line of the comment, by deployment impact.
HEADLINES = {
    ROOT_CHANGE: "root change: new conversations start a new cached prefix",
    CONTENT_CHANGE: "rendered-content change, running conversations unaffected",
    NO_IMPACT: "no deployment impact",
    UNKNOWN_IMPACT: "golden files stale against the lock",
}

_LOCATION = re.compile(r"(?P<file>.+?):(?P<line>[0-9]+)(?::[0-9]+)?")


def _cell(text: str) -> str:
    return markdown_text(text)


def _pipe_table(rows: Sequence[Sequence[str]]) -> list[str]:
    header, *body = rows
    numeric = ["---" if i < 2 else "---:" for i in range(len(header))]
    lines = [f"| {' | '.join(_cell(c) for c in header)} |", f"| {' | '.join(numeric)} |"]
    lines += [f"| {' | '.join(_cell(c) for c in row)} |" for row in body]
    return lines


def _code(text: str) -> str:
    return markdown_code(text)


def _summary(report: DiffReport) -> list[str]:
    """One bullet per impact class present (parts and causes), then stale golden cases."""
    bullets = []
    if report.impact == NO_IMPACT and report.parts:
        changed = ", ".join(_code(part) for part in report.parts)
        bullets.append(f"- no golden case renders the changed {changed}; add a scenario that does")
    for kind in (ROOT_CHANGE, CONTENT_CHANGE) if report.impact != NO_IMPACT else ():
        sources = _sources(report, kind)
        parts = report.parts_of(kind)
        if report.impact_of(kind) or parts:
            of = f" of {', '.join(_code(p) for p in parts)}" if parts else ""
            at = f", caused by {', '.join(_code(s) for s in sources)}" if sources else ""
            bullets.append(f"- **{kind}**{of}{at}: {report.consequence(kind)}")
    bullets += [f"- **stale golden files**: {_cell(stale)}" for stale in report.stale]
    bullets += [
        f"- note, OLD's golden files are stale: {_cell(stale)}" for stale in report.old_stale
    ]
    if isinstance(report.result, FolderDiff):
        bullets += [f"- note: {_cell(note)}" for note in report.result.notes]
    return bullets or ["- no call changed"]


def _sources(report: DiffReport, kind: str) -> list[str]:
    result = report.result
    if isinstance(result, FolderDiff):
        return result.sources(kind)
    return [result.source] if result.source and result.comparison.impact == kind else []


def _totals(result: FolderDiff) -> str:
    counts = [(v, result.count(v)) for v in CALL_VERDICTS]
    total = sum(n for _, n in counts)
    found = ", ".join(f"{n} {verdict}" for verdict, n in counts if n)
    return f"compared {total} call{'' if total == 1 else 's'}: {found or 'nothing'}"


def markdown(report: DiffReport) -> list[str]:
    """A pull-request comment: the verdict and its causes first, unchanged rows folded."""
    lines = [f"### prefixlock diff: {HEADLINES[report.impact]}", "", *_summary(report), ""]
    result = report.result
    if isinstance(result, FileDiff):
        lines += [f"{_code(result.old.label)} → {_code(result.new.label)}", ""]
        return [*lines, *_fenced(list(result.lines()))]
    lines += [
        f"{_totals(result)} (old: {_cell(result.old.label)}, new: {_cell(result.new.label)})",
        "",
    ]
    changed = [p for p in result.pairs if p.changed or p.old_calls != p.new_calls]
    unchanged = [p for p in result.pairs if p not in changed]
    if changed:
        lines += _pipe_table(table_rows(changed))
        lines += ["", "<details><summary>what changed, call by call</summary>", ""]
        lines += [*_fenced(_call_details(changed)), "", "</details>"]
    if unchanged:
        noun = "row" if len(unchanged) == 1 else "rows"
        lines += ["", f"<details><summary>{len(unchanged)} unchanged {noun}</summary>", ""]
        lines += [*_pipe_table(table_rows(unchanged)), "", "</details>"]
    return lines


def _fenced(lines: list[str]) -> list[str]:
    """A ``text`` code block whose fence is longer than any backtick run inside."""
    return markdown_fence(lines)


def _call_details(pairs: Sequence[PairDiff]) -> list[str]:
    out: list[str] = []
    for pair in pairs:
        if pair.old_calls and pair.new_calls:
            out += details(pair)
        else:
            side = "NEW" if not pair.old_calls else "OLD"
            present = pair.new_calls or pair.old_calls
            out.append(f"{pair.key}: only in {side} ({present} call{'' if present == 1 else 's'})")
    return out


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
        of = f" of {', '.join(parts)}" if parts else ""
        message = f"{kind}{of}: {report.consequence(kind)}"
        sources: list[str | None] = [s.removeprefix(revision) for s in _sources(report, kind)]
        for source in sources or [None]:
            lines.append(_annotation(level, f"prefixlock: {kind}", message, source))
    for stale in report.stale:
        lines.append(_annotation("error", "prefixlock: stale golden files", stale))
    for stale in report.old_stale:
        lines.append(_annotation("warning", "prefixlock: OLD's golden files are stale", stale))
    if isinstance(report.result, FolderDiff):
        for note in report.result.notes:
            lines.append(_annotation("notice", "prefixlock: calls priced back to back", note))
    result = report.result
    totals = _totals(result) if isinstance(result, FolderDiff) else result.comparison.verdict
    lines.append(
        _annotation("notice", "prefixlock diff", f"{totals}; deployment impact: {report.impact}")
    )
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
