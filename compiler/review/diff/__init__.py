"""``prefixlock diff OLD NEW``: compare request bodies call by call.

OLD and NEW are two body files, or two golden-style folders of bodies compared call by
call; either folder may be a git revision or ``WORKTREE`` / ``.``
(:mod:`prefixlock.review.diff.sides`). Each call is unchanged, tail-only or a prefix break at a
JSON path, with the invalidated share and the spec line behind it
(:mod:`prefixlock.review.compare`); each case and provider gets its counts, the largest
invalidated share and the simulated cost delta (:mod:`prefixlock.review.diff.folders`).

:func:`diff` is the entry point; it returns a :class:`DiffReport` whose ``lines()`` are
the text report (what changed per case x provider, the table, a summary line) and whose
``to_json()`` is the machine form. The CLI prints them and picks the exit code.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs

from ...core.errors import SpecError, SpecErrors, UsageError
from ...spec.bundle import Bundle
from ..built import build_checked, has_specs
from ..compare import (
    CALL_VERDICTS,
    CONTENT_CHANGE,
    NO_IMPACT,
    PREFIX_BREAK,
    PROVIDERS,
    ROOT_CHANGE,
    TAIL_ONLY,
    UNCHANGED,
    Comparison,
    attribute,
    compare_bodies,
    explanation,
    guess_provider,
    parse_body,
)
from ..tables import align
from .folders import CallDiff, FolderDiff, PairDiff, SourceIndexes, diff_folders
from .sides import GOLDEN, WORKTREE, Side, read_body, resolve_side, stale_golden

__all__ = [
    "GOLDEN",
    "PROVIDERS",
    "STALE_ADVICE",
    "UNKNOWN_IMPACT",
    "WORKTREE",
    "DiffReport",
    "FileDiff",
    "FolderDiff",
    "PairDiff",
    "details",
    "diff",
    "render",
    "table_rows",
]


# --- text --------------------------------------------------------------------------------


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _money(value: Fraction, sign: str = "") -> str:
    """A cost in base input-token units, to the hundredth."""
    return f"{float(value):{sign}.2f}"


def _delta(pair: PairDiff) -> str:
    """``+12.50 (+3.1%)``; ``0`` when equal; ``(new)`` / ``(removed)`` for one side only."""
    delta = pair.cost_delta
    if not pair.old_calls:
        return f"{_money(delta, '+')} (new)"
    if not pair.new_calls:
        return f"{_money(delta, '+')} (removed)"
    if delta == 0:
        return "0"
    share = pair.cost_delta_share
    return _money(delta, "+") + (f" ({share:+.1%})" if share is not None else "")


def details(pair: PairDiff) -> list[str]:
    """The lines of one changed case x provider: a header, then each run of calls."""
    before, after = pair.old_report, pair.new_report
    cost = ""
    if before is not None and after is not None:
        cost = (
            f"  (simulated cost vs no caching {before.cost_ratio:.1%} -> "
            f"{after.cost_ratio:.1%}; cost {_money(pair.old_cost)} -> "
            f"{_money(pair.new_cost)}, {_delta(pair)})"
        )
    lines = [f"{pair.key}{cost}"]
    runs: list[list[CallDiff]] = []
    for call in pair.calls:
        last = runs[-1][-1] if runs else None
        if last is not None and last.group() == call.group() and last.number == call.number - 1:
            runs[-1].append(call)
        else:
            runs.append([call])
    for run in runs:
        first = run[0]
        if first.verdict == UNCHANGED:
            continue
        explained = first.lines()
        if len(run) > 1 and first.verdict == PREFIX_BREAK:
            worst = max(run, key=lambda c: c.comparison.invalidated if c.comparison else 0.0)
            if worst.comparison is not None and worst is not first:
                explained.append(
                    f"  up to {worst.comparison.invalidated:.1%} in call {worst.number:04d}"
                )
        numbers = f"{first.number:04d}" + (f"-{run[-1].number:04d}" if len(run) > 1 else "")
        lines.append(f"  {numbers}: {explained[0]}")
        lines.extend(f"  {' ' * len(numbers)}  {line.strip()}" for line in explained[1:])
    return lines


def table_rows(pairs: Sequence[PairDiff]) -> list[tuple[str, ...]]:
    """The summary table: a header, then one row per case x provider."""
    header = (
        "case",
        "provider",
        "calls",
        UNCHANGED,
        TAIL_ONLY,
        "breaks",
        "invalidated",
        "cost delta",
    )
    body = []
    for pair in pairs:
        counts = (
            f"{pair.old_calls}"
            if pair.old_calls == pair.new_calls
            else (f"{pair.old_calls} -> {pair.new_calls}")
        )
        share = pair.invalidated_max
        body.append(
            (
                pair.case or ".",
                pair.provider,
                counts,
                str(pair.count(UNCHANGED)),
                str(pair.count(TAIL_ONLY)),
                str(pair.count(PREFIX_BREAK)),
                "-" if share is None else f"{share:.1%}",
                _delta(pair),
            )
        )
    return [header, *body]


def _table(pairs: Sequence[PairDiff]) -> list[str]:
    return align(table_rows(pairs))


def render(result: FolderDiff) -> Iterator[str]:
    """The text report: what changed per case x provider, the table, a summary line."""
    added, removed = set(result.cases_added), set(result.cases_removed)
    shown_cases: set[str] = set()
    shown = False
    for pair in result.pairs:
        if pair.case in added or pair.case in removed:
            if pair.case not in shown_cases:
                shown_cases.add(pair.case)
                side = "NEW" if pair.case in added else "OLD"
                group = [p for p in result.pairs if p.case == pair.case]
                calls = sum(p.new_calls if side == "NEW" else p.old_calls for p in group)
                counted = f"{_plural(len(group), 'provider')}, {_plural(calls, 'call')}"
                yield f"{pair.case or '.'}: case only in {side} ({counted})"
                shown = True
            continue
        if not pair.old_calls or not pair.new_calls:
            side, present = (
                ("NEW", pair.new_calls) if not pair.old_calls else ("OLD", pair.old_calls)
            )
            yield f"{pair.key}: only in {side} ({_plural(present, 'call')})"
            shown = True
            continue
        if pair.changed:
            yield from details(pair)
            shown = True
    if shown:
        yield ""
    yield f"old: {result.old.label}"
    yield f"new: {result.new.label}"
    yield from _table(result.pairs)
    counts = [(v, result.count(v)) for v in CALL_VERDICTS]
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts if n)
    cases = [f"{_plural(len(added), 'case')} added"] if added else []
    cases += [f"{_plural(len(removed), 'case')} removed"] if removed else []
    total = sum(n for _, n in counts)
    compared = f"compared {_plural(total, 'call')}: {summary or 'nothing'}"
    yield compared + "".join(f"; {c}" for c in cases)


# --- the report ---------------------------------------------------------------------


@attrs.frozen
class FileDiff:
    """Two body files compared: the verdict and the spec line behind a break."""

    old: Side
    new: Side
    provider: str
    comparison: Comparison
    source: str | None

    @property
    def broken(self) -> bool:
        return self.comparison.kind == PREFIX_BREAK

    def to_json(self) -> dict[str, Any]:
        call = CallDiff(1, self.comparison.verdict, self.comparison, self.source).to_json()
        del call["call"]
        return {
            "old": self.old.to_json(),
            "new": self.new.to_json(),
            "provider": self.provider,
            **call,
        }

    def lines(self) -> Iterator[str]:
        for line in explanation(self.comparison, self.source):
            yield f"{self.provider}: {line}" if not line.startswith(" ") else line


#: The impact when a side's golden files were not built from its lock: the bodies
#: compared are not what the specs send.
UNKNOWN_IMPACT = "unknown"
STALE_ADVICE = "run `prefixlock update` and commit the result"

#: Bundle parts whose change is a root change; every other part is rendered content.
ROOT_PARTS = frozenset({"instructions.md", "tools.json", "settings.json"})

_CONSEQUENCE = {
    ROOT_CHANGE: "every new conversation starts a new cached prefix (the old one goes cold "
    "fleet-wide); running conversations keep their root and their cache",
    CONTENT_CHANGE: "only messages rendered from now on differ; running conversations keep "
    "their cache",
}


@attrs.frozen
class DiffReport:
    """What :func:`diff` found: one file pair or two folders of bodies, and what deploying
    the change does to conversations (:attr:`impact`)."""

    result: FileDiff | FolderDiff
    #: bundle parts that differ between the two spec roots (None: not both buildable)
    parts: tuple[str, ...] | None = None
    #: NEW's cases whose golden files record another bundle than its specs build
    stale: tuple[str, ...] = ()
    #: the same of OLD: a note (the comparison is with the bodies OLD's files hold)
    old_stale: tuple[str, ...] = ()

    @property
    def broken(self) -> bool:
        """Whether any call's prefix breaks."""
        if isinstance(self.result, FileDiff):
            return self.result.broken
        return bool(self.result.count(PREFIX_BREAK))

    @property
    def impact(self) -> str:
        """``root change``, ``rendered-content change``, ``none``, or ``unknown`` when
        golden files are stale against their lock."""
        if self.stale:
            return UNKNOWN_IMPACT
        if isinstance(self.result, FileDiff):
            return self.result.comparison.impact
        return self.result.impact

    def impact_of(self, impact: str) -> bool:
        """Whether any compared call has this deployment impact."""
        if isinstance(self.result, FileDiff):
            return self.result.comparison.impact == impact
        return any(call.impact == impact for pair in self.result.pairs for call in pair.calls)

    @staticmethod
    def consequence(impact: str) -> str:
        """What deploying a change of this class does to conversations."""
        return _CONSEQUENCE[impact]

    def parts_of(self, impact: str) -> list[str]:
        """The changed bundle parts of one impact class."""
        root = impact == ROOT_CHANGE
        return [p for p in self.parts or () if (p in ROOT_PARTS) == root]

    def impact_lines(self) -> list[str]:
        impact = self.impact
        notes = [f"note: {stale}" for stale in self.old_stale]
        if isinstance(self.result, FolderDiff):
            notes += [f"note: {note}" for note in self.result.notes]
        return notes + self._impact_lines(impact)

    def _impact_lines(self, impact: str) -> list[str]:
        if impact == UNKNOWN_IMPACT:
            return [
                *self.stale,
                "deployment impact: unknown: the golden files are stale against the lock",
            ]
        if impact == NO_IMPACT:
            if self.parts:  # the specs changed where no golden call looks
                return [
                    "deployment impact: none in the golden cases, but no case renders the"
                    f" changed {', '.join(self.parts)}; add a scenario that does"
                ]
            return ["deployment impact: none"]
        lines = []
        for kind in (ROOT_CHANGE, CONTENT_CHANGE):
            sources = self.result.sources(kind) if isinstance(self.result, FolderDiff) else []
            if isinstance(self.result, FileDiff) and self.result.comparison.impact == kind:
                sources = [self.result.source] if self.result.source else []
            parts = self.parts_of(kind)
            if kind != impact and not parts:
                continue
            of = f" of {', '.join(parts)}" if parts else ""
            at = f" at {', '.join(sources)}" if sources else ""
            lines.append(f"deployment impact: {kind}{of}{at}: {_CONSEQUENCE[kind]}")
        return lines

    def to_json(self) -> dict[str, Any]:
        out = self.result.to_json()
        out["impact"] = self.impact
        out["stale_golden"] = list(self.stale)
        out["old_stale_golden"] = list(self.old_stale)
        out["changed_parts"] = (
            None
            if self.parts is None
            else {
                ROOT_CHANGE: self.parts_of(ROOT_CHANGE),
                CONTENT_CHANGE: self.parts_of(CONTENT_CHANGE),
            }
        )
        return out

    def lines(self) -> Iterator[str]:
        """The text report, then the deployment impact."""
        if isinstance(self.result, FileDiff):
            yield from self.result.lines()
        else:
            yield from render(self.result)
        yield from self.impact_lines()


def _bundle(side: Side) -> Bundle | None:
    """The bundle of a side's spec root, built as ``prefixlock build`` builds it; None
    when the root holds no specs (a folder of bodies compared on their own).

    Raises :class:`SpecErrors` with the build's own errors when the specs do not build,
    the files of a revision named ``REV:path``: bodies beside a spec that does not
    build are not what it sends, so they are not compared.
    """
    if not has_specs(side.root):
        return None
    try:
        return build_checked(side.root)
    except SpecErrors as error:
        if side.extracted is None:
            raise
        spec = os.path.relpath(side.root, side.extracted)
        prefix = f"{side.given}:" + ("" if spec == "." else f"{Path(spec).as_posix()}/")
        raise SpecErrors(
            attrs.evolve(e, location=attrs.evolve(e.location, file=prefix + e.location.file))
            for e in error.errors
        ) from None


def _bundles(a: Side, b: Side) -> tuple[Bundle | None, Bundle | None]:
    """Both sides' bundles (:func:`_bundle`; a root shared by both is built once), every
    error of both at once."""
    errors: list[SpecError] = []
    built: dict[Path, Bundle | None] = {}
    for side in (a, b):
        key = side.root.resolve()
        if key in built:
            continue
        try:
            built[key] = _bundle(side)
        except SpecErrors as error:
            errors += error.errors
            built[key] = None
    if errors:
        raise SpecErrors(errors)
    return built[a.root.resolve()], built[b.root.resolve()]


def _changed_parts(before: Bundle | None, after: Bundle | None) -> tuple[str, ...] | None:
    """The bundle parts that differ between the two sides' spec roots, or None when
    either does not build."""
    if before is None or after is None:
        return None
    a = {part.name: part.sha256 for part in before.parts}
    b = {part.name: part.sha256 for part in after.parts}
    return tuple(sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name)))


def diff(
    old: Path | str,
    new: Path | str,
    *,
    provider: str | None = None,
    root: Path | None = None,
    golden: str = GOLDEN,
) -> DiffReport:
    """Compare two bodies, two folders of bodies or two git revisions of ``golden``.

    ``root`` is the spec root that explains a break as ``file:line`` (default: ``.``).
    Raises :class:`~prefixlock.core.errors.PrefixlockError` for input it cannot read.
    """
    spec_root = root if root is not None else Path(".")
    with contextlib.ExitStack() as scratch:
        a = resolve_side(str(old), "OLD", golden=golden, root=spec_root, scratch=scratch)
        b = resolve_side(str(new), "NEW", golden=golden, root=spec_root, scratch=scratch)
        if a.is_folder != b.is_folder:
            raise UsageError(f"compare two files or two folders, not {a.label} and {b.label}")
        # Both sides build first, as `prefixlock build` does: a side that does not build
        # is bad input (exit 2 with the build's errors), never "unchanged".
        before, after = _bundles(a, b)
        indexes = SourceIndexes()
        if a.is_folder:
            result = diff_folders(a, b, indexes)
            changed = _changed_parts(before, after)
            old_stale = stale_golden(a, before.digest if before is not None else None)
            stale = stale_golden(b, after.digest if after is not None else None)
            return DiffReport(result, changed, tuple(stale), tuple(old_stale))
        old_bytes, new_bytes = read_body(a.path), read_body(b.path)
        name = provider or guess_provider(parse_body(new_bytes, str(b.path)), b.path)
        comparison = compare_bodies(
            name, old_bytes, new_bytes, old_name=str(a.path), new_name=str(b.path)
        )
        source = attribute(name, comparison, indexes(spec_root), new_bytes, old_bytes)
        return DiffReport(FileDiff(a, b, name, comparison, source))
