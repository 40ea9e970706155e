"""Explain a change between request bodies: unchanged, tail-only or prefix break, and why.

:func:`compare_bodies` classifies ``new`` against ``old`` (two bodies of one provider):

* ``identical`` -- the same bytes (or the same structure once the provider's cache
  markers are removed: only a marker moved); reported as ``unchanged``;
* ``tail append`` -- after removing cache markers, every key but the history list is
  equal and ``old``'s history is a prefix of ``new``'s: the provider cache still hits;
  reported as ``tail-only``;
* ``prefix break`` -- anything else, at the first divergent JSON path
  (``$.messages[3].content[0].text``), with the old and new values and the
  *invalidated share*: ``1 - common byte prefix / old length`` of the two bodies
  without cache markers (the part of the old body's cached prefix that no longer
  matches).

A break is attributed to the spec line that produced the text when it can be
(:class:`compiler.sources.SourceIndex`).

``prefixlock diff OLD NEW`` compares two body files, or two golden-style folders of
bodies (``<case>/<provider>/0001.json`` ... anywhere below each, as ``prefixlock replay
--out`` and the golden suite write them) call by call. Either folder may also be a git
revision (``main``, ``HEAD~1``, ``origin/main``, a sha: the ``--golden`` folder as of
that commit, read by :mod:`compiler.revisions` without a checkout) or ``WORKTREE`` /
``.`` (that folder in the working tree). An existing path wins over a revision. Each
case and provider gets its counts, the largest invalidated share and the simulated cost
delta (:func:`compiler.cachesim.simulate` of the old and the new call sequence); cases
and calls present on one side only are reported as added or removed.

This module sits at the CLI edge: it uses a provider's ``strip_cache_markers``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from compiler import canonical, revisions
from compiler.cachesim import CacheReport, simulate
from compiler.canonical import CanonicalJSONError
from compiler.errors import PrefixlockError
from compiler.jsondiff import (
    MISSING,
    Difference,
    common_prefix,
    describe,
    first_difference,
    value_at,
)
from compiler.sources import SourceIndex
from providers import NAMES, get

__all__ = [
    "ADDED",
    "IDENTICAL",
    "PREFIX_BREAK",
    "REMOVED",
    "TAIL_APPEND",
    "TAIL_ONLY",
    "UNCHANGED",
    "WORKTREE",
    "CallDiff",
    "Comparison",
    "FolderDiff",
    "PairDiff",
    "Side",
    "compare_bodies",
    "diff_folders",
    "explain",
    "guess_provider",
    "history_key",
    "resolve_side",
    "run_diff",
]

IDENTICAL = "identical"
TAIL_APPEND = "tail append"
PREFIX_BREAK = "prefix break"

#: The verdicts of ``prefixlock diff`` per call (``PREFIX_BREAK`` keeps its name).
UNCHANGED = "unchanged"
TAIL_ONLY = "tail-only"
ADDED = "added"
REMOVED = "removed"
VERDICTS = {IDENTICAL: UNCHANGED, TAIL_APPEND: TAIL_ONLY, PREFIX_BREAK: PREFIX_BREAK}

#: The special OLD / NEW values that name the ``--golden`` folder of the working tree.
WORKTREE = "WORKTREE"
WORKTREE_NAMES = (WORKTREE, ".")

#: Default ``--golden``: the golden suite's folder, relative to the repository root.
GOLDEN = "golden"


# --- structural comparison -------------------------------------------------------------


@attrs.frozen
class Comparison:
    kind: str  # IDENTICAL, TAIL_APPEND or PREFIX_BREAK
    appended: int = 0
    difference: Difference | None = None
    #: markers moved (identical otherwise), or why the bytes differ at "$"
    note: str = ""
    #: share of ``old``'s bytes after its longest common byte prefix with ``new``
    #: (both without cache markers); 0 unless a prefix break
    invalidated: float = 0.0
    #: the byte sizes behind ``invalidated``: old body, common prefix
    old_size: int = 0
    common: int = 0

    @property
    def verdict(self) -> str:
        return VERDICTS[self.kind]


def _parse(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = canonical.loads(data)
    except (CanonicalJSONError, ValueError) as err:
        raise PrefixlockError(f"{what}: not JSON ({err})") from None
    if not isinstance(value, dict):
        raise PrefixlockError(f"{what}: a request body must be a JSON object")
    return value


def _as_sent(value: Any) -> bytes:
    """``value`` encoded like the wire: compact UTF-8 JSON, keys in their parsed order
    (:func:`canonical.dumpb` would sort the keys of plain dicts)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _share(old: bytes, new: bytes) -> tuple[float, int, int]:
    """(invalidated share, old size, common prefix) of ``old`` against ``new``."""
    common = common_prefix(old, new)
    return (1 - common / len(old) if old else 0.0), len(old), common


def compare_bodies(
    provider: str, old: bytes, new: bytes, *, old_name: str = "old", new_name: str = "new"
) -> Comparison:
    """Classify ``new`` against ``old``, two exact bodies of ``provider``."""
    if old == new:
        return Comparison(IDENTICAL)
    wire = get(provider)
    old_value, new_value = _parse(old, old_name), _parse(new, new_name)
    if old_value == new_value and first_difference(old_value, new_value) is None:
        note = "same JSON value, different bytes (key order or formatting)"
        share, size, common = _share(old, new)
        return Comparison(
            PREFIX_BREAK,
            difference=Difference((), MISSING, MISSING),
            note=note,
            invalidated=share,
            old_size=size,
            common=common,
        )
    a, b = wire.strip_cache_markers(old_value), wire.strip_cache_markers(new_value)
    key = wire.MESSAGES_KEY
    history_a, history_b = a.get(key, []), b.get(key, [])
    found = first_difference(
        {k: v for k, v in a.items() if k != key}, {k: v for k, v in b.items() if k != key}
    )
    if found is None and isinstance(history_a, list) and isinstance(history_b, list):
        for index, item in enumerate(history_a):
            if index >= len(history_b):
                found = Difference((key, index), item, MISSING)
                break
            found = first_difference(item, history_b[index], (key, index))
            if found is not None:
                break
        if found is None:
            appended = len(history_b) - len(history_a)
            if appended == 0:
                return Comparison(IDENTICAL, note="only cache markers moved")
            return Comparison(TAIL_APPEND, appended=appended)
    elif found is None:
        found = first_difference(history_a, history_b, (key,))
    assert found is not None
    share, size, common = _share(_as_sent(a), _as_sent(b))
    # Report the values of the bodies as sent (markers included) at that path.
    return Comparison(
        PREFIX_BREAK,
        difference=Difference(
            found.parts, value_at(old_value, found.parts), value_at(new_value, found.parts)
        ),
        invalidated=share,
        old_size=size,
        common=common,
    )


def history_key(provider: str) -> str:
    """The key of ``provider``'s history list (``messages``, ``input``, ``contents``)."""
    return get(provider).MESSAGES_KEY


# --- bodies on disk ---------------------------------------------------------------------

_CALL_FILE = re.compile(r"\d{4}\.json")


def guess_provider(body: Mapping[str, Any], path: Path | None = None) -> str:
    """The provider of a body: its folder's name if that is a provider, else its shape."""
    if path is not None and path.parent.name in NAMES:
        return path.parent.name
    if "contents" in body:
        return "gemini"
    if "input" in body:
        return "openai-responses"
    if "inferenceConfig" in body or "toolConfig" in body:
        return "bedrock-converse"
    if "max_completion_tokens" in body or "prompt_cache_key" in body:
        return "openai-chat"
    if "messages" in body:
        return "anthropic"
    raise PrefixlockError(f"{path or 'body'}: cannot tell the provider; pass --provider")


def _call_sets(root: Path) -> dict[str, dict[int, Path]]:
    """``{"<case>/<provider>": {call number: file}}`` for every provider folder below."""
    found: dict[str, dict[int, Path]] = {}
    if not root.is_dir():
        return found
    for folder in sorted(p for p in [root, *root.rglob("*")] if p.is_dir()):
        if folder.name not in NAMES:
            continue
        calls = {int(f.stem): f for f in folder.iterdir() if _CALL_FILE.fullmatch(f.name)}
        if calls:
            relative = folder.relative_to(root).as_posix()
            found[folder.name if relative == "." else relative] = dict(sorted(calls.items()))
    return found


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise PrefixlockError(f"cannot read {path}: {err.strerror or err}") from None


# --- explanations -----------------------------------------------------------------------


def _attribute(
    provider: str, comparison: Comparison, index: SourceIndex, new: bytes, old: bytes
) -> str | None:
    """The spec ``file:line`` behind a prefix break, if known."""
    difference = comparison.difference
    if comparison.kind != PREFIX_BREAK or difference is None or comparison.note:
        return None
    return index.attribute(provider, difference, canonical.loads(new), canonical.loads(old))


def _lines(comparison: Comparison, source: str | None) -> list[str]:
    """Human lines for one comparison (the first names the verdict)."""
    if comparison.kind == IDENTICAL:
        return [IDENTICAL + (f" ({comparison.note})" if comparison.note else "")]
    if comparison.kind == TAIL_APPEND:
        n = comparison.appended
        return [f"tail append (+{n} item{'s' if n != 1 else ''})"]
    difference = comparison.difference
    assert difference is not None
    if comparison.note:
        return [f"PREFIX BREAK at {difference.path}: {comparison.note}"]
    old_text, new_text = describe(difference)
    lines = [f"PREFIX BREAK at {difference.path}: old {old_text} new {new_text}"]
    if source is not None:
        lines.append(f"  caused by {source}")
    lost = comparison.old_size - comparison.common
    lines.append(
        f"  invalidates {comparison.invalidated:.1%} of the old body's prefix"
        f" ({lost} of {comparison.old_size} bytes, cache markers aside)"
    )
    return lines


def explain(
    provider: str, comparison: Comparison, index: SourceIndex, new: bytes, old: bytes
) -> list[str]:
    """Human lines for one comparison (the first names the verdict)."""
    return _lines(comparison, _attribute(provider, comparison, index, new, old))


# --- OLD and NEW: files, folders, revisions, the working tree --------------------------


@attrs.frozen
class Side:
    """One side of a diff, resolved."""

    given: str  # as typed: a path, a revision, WORKTREE or "."
    kind: str  # "file" | "folder" | "revision" | "worktree"
    path: Path  # the body file, or the folder of bodies (may not exist)
    root: Path  # the spec root: explains a break as file:line, names Gemini's model
    golden: str = GOLDEN  # the folder inside the repository (revision / worktree)
    commit: str | None = None
    #: the folder a revision was extracted to; paths inside show as ``REV:path``
    extracted: Path | None = None

    @property
    def is_folder(self) -> bool:
        return self.kind != "file"

    @property
    def label(self) -> str:
        if self.kind == "revision":
            assert self.commit is not None
            return f"{self.golden}/ at {self.given} ({self.commit[:12]})"
        if self.kind == "worktree":
            return f"{self.golden}/ in the working tree"
        return str(self.path)

    def show(self, text: str) -> str:
        """``text`` with paths inside the extracted revision shown as ``REV:path``."""
        if self.extracted is None:
            return text
        for prefix in {str(self.extracted), os.path.relpath(self.extracted)}:
            text = text.replace(prefix + os.sep, f"{self.given}:")
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"given": self.given, "kind": self.kind}
        if self.kind in ("revision", "worktree"):
            out["golden"] = self.golden
        else:
            out["path"] = str(self.path)
        if self.commit is not None:
            out["commit"] = self.commit
        return out


def _golden_path(golden: str) -> str:
    """``--golden`` as a clean path relative to the repository root."""
    pure = PurePosixPath(golden.replace(os.sep, "/"))
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or pure == PurePosixPath("."):
        raise PrefixlockError(f"--golden {golden!r}: give a folder relative to the repository root")
    return pure.as_posix()


def resolve_side(
    given: str, which: str, *, golden: str, root: Path, scratch: contextlib.ExitStack
) -> Side:
    """Resolve OLD or NEW (``which``): ``WORKTREE``/``.``, an existing path, else a git
    revision, extracted into a temporary folder that ``scratch`` removes."""
    if given in WORKTREE_NAMES:
        top = revisions.toplevel()
        if top is not None:
            golden = _golden_path(golden)
            return Side(given, "worktree", top / golden, root, golden)
        if given == WORKTREE:
            raise PrefixlockError(f"{which} {WORKTREE}: not in a git repository")
    path = Path(given)
    if path.exists():
        return Side(given, "folder" if path.is_dir() else "file", path, root)
    top = revisions.toplevel()
    if top is None:
        raise PrefixlockError(
            f"cannot read {which} {given!r}: no such file or folder (and not in a git"
            " repository, so not a revision either)"
        )
    commit = revisions.resolve(given, top)
    if commit is None:
        raise PrefixlockError(
            f"cannot read {which} {given!r}: no such file or folder, nor a git revision"
        )
    golden = _golden_path(golden)
    folder = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="prefixlock-diff-")))
    spec = revisions.relative_to_repo(root, top)
    wanted = [golden]
    if spec is not None:
        wanted += [f"{spec}/prompt", f"{spec}/rules"] if spec != "." else ["prompt", "rules"]
    revisions.extract(top, commit, wanted, folder)
    spec_root = folder / spec if spec is not None else root
    return Side(given, "revision", folder / golden, spec_root, golden, commit, folder)


# --- folders: every case, provider and call --------------------------------------------


@attrs.frozen
class CallDiff:
    """One call number of one case and provider."""

    number: int
    verdict: str  # UNCHANGED, TAIL_ONLY, PREFIX_BREAK, ADDED or REMOVED
    comparison: Comparison | None = None
    source: str | None = None
    old_cost: Fraction | None = None
    new_cost: Fraction | None = None

    def lines(self) -> list[str]:
        if self.comparison is None:
            return [self.verdict]
        return _lines(self.comparison, self.source)

    def group(self) -> tuple[Any, ...]:
        """Consecutive calls of one group print as one range."""
        c = self.comparison
        if c is None:
            return (self.verdict,)
        return (c.kind, c.appended, c.note, c.difference.path if c.difference else None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"call": self.number, "verdict": self.verdict}
        c = self.comparison
        if c is not None and c.note:
            out["note"] = c.note
        if c is not None and c.kind == TAIL_APPEND:
            out["appended"] = c.appended
        if c is not None and c.kind == PREFIX_BREAK and c.difference is not None:
            old_text, new_text = describe(c.difference)
            out.update(
                path=c.difference.path,
                old_value=old_text,
                new_value=new_text,
                source=self.source,
                invalidated=round(c.invalidated, 4),
                invalidated_bytes=c.old_size - c.common,
                old_bytes=c.old_size,
            )
        for key, cost in (("old_cost", self.old_cost), ("new_cost", self.new_cost)):
            if cost is not None:
                out[key] = round(float(cost), 2)
        return out


def _cost(report: CacheReport | None) -> Fraction:
    return report.cost if report is not None else Fraction(0)


@attrs.frozen
class PairDiff:
    """One case x provider: its calls, and the simulated cost of each side."""

    case: str  # the folder holding the provider folder, relative ("" at the top)
    provider: str
    old_calls: int
    new_calls: int
    calls: tuple[CallDiff, ...]
    old_report: CacheReport | None
    new_report: CacheReport | None

    @property
    def key(self) -> str:
        return f"{self.case}/{self.provider}" if self.case else self.provider

    def count(self, verdict: str) -> int:
        return sum(1 for call in self.calls if call.verdict == verdict)

    @property
    def changed(self) -> bool:
        return any(call.verdict != UNCHANGED for call in self.calls)

    @property
    def invalidated_max(self) -> float | None:
        shares = [
            c.comparison.invalidated
            for c in self.calls
            if c.verdict == PREFIX_BREAK and c.comparison
        ]
        return max(shares) if shares else None

    @property
    def old_cost(self) -> Fraction:
        return _cost(self.old_report)

    @property
    def new_cost(self) -> Fraction:
        return _cost(self.new_report)

    @property
    def cost_delta(self) -> Fraction:
        return self.new_cost - self.old_cost

    @property
    def cost_delta_share(self) -> float | None:
        """``cost_delta / old_cost``; None without an old cost."""
        return float(self.cost_delta / self.old_cost) if self.old_cost else None

    def to_json(self) -> dict[str, Any]:
        share, invalidated = self.cost_delta_share, self.invalidated_max
        return {
            "case": self.case,
            "provider": self.provider,
            "old_calls": self.old_calls,
            "new_calls": self.new_calls,
            "unchanged": self.count(UNCHANGED),
            "tail_only": self.count(TAIL_ONLY),
            "prefix_breaks": self.count(PREFIX_BREAK),
            "added": self.count(ADDED),
            "removed": self.count(REMOVED),
            "invalidated_max": None if invalidated is None else round(invalidated, 4),
            "old_cost": round(float(self.old_cost), 2),
            "new_cost": round(float(self.new_cost), 2),
            "cost_delta": round(float(self.cost_delta), 2),
            "cost_delta_share": None if share is None else round(share, 4),
            "old_cost_ratio": _ratio(self.old_report),
            "new_cost_ratio": _ratio(self.new_report),
            "calls": [call.to_json() for call in self.calls],
        }


def _ratio(report: CacheReport | None) -> float | None:
    return None if report is None or not report.calls else round(report.cost_ratio, 4)


@attrs.frozen
class FolderDiff:
    old: Side
    new: Side
    pairs: tuple[PairDiff, ...]

    def count(self, verdict: str) -> int:
        return sum(pair.count(verdict) for pair in self.pairs)

    def _cases(self, side: str) -> set[str]:
        return {p.case for p in self.pairs if (p.old_calls if side == "old" else p.new_calls)}

    @property
    def cases_added(self) -> list[str]:
        return sorted(self._cases("new") - self._cases("old"))

    @property
    def cases_removed(self) -> list[str]:
        return sorted(self._cases("old") - self._cases("new"))

    def to_json(self) -> dict[str, Any]:
        counts = {v: self.count(v) for v in (UNCHANGED, TAIL_ONLY, PREFIX_BREAK, ADDED, REMOVED)}
        return {
            "old": self.old.to_json(),
            "new": self.new.to_json(),
            "prefix_stable": not counts[PREFIX_BREAK],
            "calls": sum(counts.values()),
            "unchanged": counts[UNCHANGED],
            "tail_only": counts[TAIL_ONLY],
            "prefix_breaks": counts[PREFIX_BREAK],
            "added": counts[ADDED],
            "removed": counts[REMOVED],
            "cases_added": self.cases_added,
            "cases_removed": self.cases_removed,
            "results": [pair.to_json() for pair in self.pairs],
        }


class _Indexes:
    """One :class:`SourceIndex` per spec root, built when first asked for."""

    def __init__(self) -> None:
        self._built: dict[Path, SourceIndex] = {}

    def __call__(self, root: Path) -> SourceIndex:
        index = self._built.get(root)
        if index is None:
            index = self._built[root] = SourceIndex(root)
        return index


def _simulate(
    provider: str, files: Mapping[int, Path], bodies: list[bytes], model: str | None
) -> CacheReport | None:
    """The cache simulation of one call sequence (None without calls)."""
    if not bodies:
        return None
    try:
        return simulate(provider, bodies, model=model)
    except ValueError:  # name the file, as compare_bodies would
        for path, data in zip(files.values(), bodies, strict=True):
            _parse(data, str(path))
        raise
    except PrefixlockError as err:  # e.g. more cache breakpoints than the API accepts
        folder = next(iter(files.values())).parent
        raise PrefixlockError(f"{folder}: cache simulation: {err}") from None


def diff_folders(old: Side, new: Side, indexes: _Indexes | None = None) -> FolderDiff:
    """Compare call k of every ``<case>/<provider>`` folder of ``old`` and ``new``."""
    indexes = indexes if indexes is not None else _Indexes()
    old_sets, new_sets = _call_sets(old.path), _call_sets(new.path)
    if not old_sets and not new_sets:
        raise PrefixlockError(f"no <provider>/NNNN.json bodies below {old.label} or {new.label}")
    old_index, new_index = indexes(old.root), indexes(new.root)
    pairs: list[PairDiff] = []
    for key in sorted(set(old_sets) | set(new_sets)):
        case, _, name = key.rpartition("/")
        a, b = old_sets.get(key, {}), new_sets.get(key, {})
        old_read = {n: _read(path) for n, path in a.items()}
        new_read = {n: _read(path) for n, path in b.items()}
        old_bodies, new_bodies = list(old_read.values()), list(new_read.values())
        old_model, new_model = old_index.models.get(name), new_index.models.get(name)
        before = _simulate(name, a, old_bodies, old_model)
        same = old_bodies == new_bodies and old_model == new_model
        after = before if same else _simulate(name, b, new_bodies, new_model)
        old_costs = dict(zip(a, before.calls, strict=True)) if before else {}
        new_costs = dict(zip(b, after.calls, strict=True)) if after else {}
        scenario = (new.path / key).parent / "scenario.yaml"
        sources: SourceIndex | None = None  # with the case's scenario, at the first break
        calls: list[CallDiff] = []
        for number in sorted(set(a) | set(b)):
            old_cost = old_costs[number].cost if number in old_costs else None
            new_cost = new_costs[number].cost if number in new_costs else None
            if number not in a or number not in b:
                verdict = ADDED if number in b else REMOVED
                calls.append(CallDiff(number, verdict, None, None, old_cost, new_cost))
                continue
            old_bytes, new_bytes = old_read[number], new_read[number]
            comparison = compare_bodies(
                name, old_bytes, new_bytes, old_name=str(a[number]), new_name=str(b[number])
            )
            source = None
            if comparison.kind == PREFIX_BREAK:
                if sources is None:
                    extra = [scenario] if scenario.is_file() else []
                    sources = new_index.extended(extra) if extra else new_index
                found = _attribute(name, comparison, sources, new_bytes, old_bytes)
                source = new.show(found) if found is not None else None
            calls.append(
                CallDiff(number, comparison.verdict, comparison, source, old_cost, new_cost)
            )
        pairs.append(PairDiff(case, name, len(a), len(b), tuple(calls), before, after))
    return FolderDiff(old, new, tuple(pairs))


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


def _details(pair: PairDiff) -> list[str]:
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


def _table(pairs: Sequence[PairDiff]) -> list[str]:
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
    widths = [max(len(r[i]) for r in (header, *body)) for i in range(len(header))]
    lines = []
    for cells in (header, *body):
        left = [c.ljust(w) for c, w in zip(cells[:2], widths[:2], strict=True)]
        right = [c.rjust(w) for c, w in zip(cells[2:], widths[2:], strict=True)]
        lines.append("  ".join(left + right).rstrip())
    return lines


def render(result: FolderDiff) -> Iterator[str]:
    """The text report: what changed per case x provider, the table, a summary line."""
    added, removed = set(result.cases_added), set(result.cases_removed)
    shown_cases: set[str] = set()
    details = False
    for pair in result.pairs:
        if pair.case in added or pair.case in removed:
            if pair.case not in shown_cases:
                shown_cases.add(pair.case)
                side = "NEW" if pair.case in added else "OLD"
                group = [p for p in result.pairs if p.case == pair.case]
                calls = sum(p.new_calls if side == "NEW" else p.old_calls for p in group)
                counted = f"{_plural(len(group), 'provider')}, {_plural(calls, 'call')}"
                yield f"{pair.case or '.'}: case only in {side} ({counted})"
                details = True
            continue
        if not pair.old_calls or not pair.new_calls:
            side, present = (
                ("NEW", pair.new_calls) if not pair.old_calls else ("OLD", pair.old_calls)
            )
            yield f"{pair.key}: only in {side} ({_plural(present, 'call')})"
            details = True
            continue
        if pair.changed:
            yield from _details(pair)
            details = True
    if details:
        yield ""
    yield f"old: {result.old.label}"
    yield f"new: {result.new.label}"
    yield from _table(result.pairs)
    counts = [(v, result.count(v)) for v in (UNCHANGED, TAIL_ONLY, PREFIX_BREAK, ADDED, REMOVED)]
    summary = ", ".join(f"{n} {verdict}" for verdict, n in counts if n)
    cases = [f"{_plural(len(added), 'case')} added"] if added else []
    cases += [f"{_plural(len(removed), 'case')} removed"] if removed else []
    total = sum(n for _, n in counts)
    compared = f"compared {_plural(total, 'call')}: {summary or 'nothing'}"
    yield compared + "".join(f"; {c}" for c in cases)


# --- the command ----------------------------------------------------------------------


def _file_json(
    old: Side, new: Side, provider: str, comparison: Comparison, source: str | None
) -> dict[str, Any]:
    call = CallDiff(1, comparison.verdict, comparison, source).to_json()
    del call["call"]
    return {"old": old.to_json(), "new": new.to_json(), "provider": provider, **call}


def run_diff(
    old: Path | str,
    new: Path | str,
    *,
    provider: str | None = None,
    root: Path | None = None,
    golden: str = GOLDEN,
    allow_break: bool = False,
    as_json: bool = False,
    out: Any = None,
) -> int:
    """``prefixlock diff``: print the explanation; 0 unless a prefix break (then 1)."""
    stream = out if out is not None else sys.stdout
    spec_root = root if root is not None else Path(".")
    with contextlib.ExitStack() as scratch:
        a = resolve_side(str(old), "OLD", golden=golden, root=spec_root, scratch=scratch)
        b = resolve_side(str(new), "NEW", golden=golden, root=spec_root, scratch=scratch)
        if a.is_folder != b.is_folder:
            raise PrefixlockError(f"compare two files or two folders, not {a.label} and {b.label}")
        indexes = _Indexes()
        if not a.is_folder:
            old_bytes, new_bytes = _read(a.path), _read(b.path)
            name = provider or guess_provider(_parse(new_bytes, str(b.path)), b.path)
            comparison = compare_bodies(
                name, old_bytes, new_bytes, old_name=str(a.path), new_name=str(b.path)
            )
            source = _attribute(name, comparison, indexes(spec_root), new_bytes, old_bytes)
            if as_json:
                print(canonical.dumps(_file_json(a, b, name, comparison, source)), file=stream)
            else:
                for line in _lines(comparison, source):
                    print(f"{name}: {line}" if not line.startswith(" ") else line, file=stream)
            broken = comparison.kind == PREFIX_BREAK
        else:
            result = diff_folders(a, b, indexes)
            if as_json:
                print(canonical.dumps(result.to_json()), file=stream)
            else:
                for line in render(result):
                    print(line, file=stream)
            broken = bool(result.count(PREFIX_BREAK))
    if broken and not allow_break and not as_json:
        print(
            "prefixlock diff: the prefix breaks; pass --allow-prefix-break to accept it",
            file=sys.stderr,
        )
    return 1 if broken and not allow_break else 0


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compare request bodies call by call: unchanged, tail-only, or a prefix break at "
        "a JSON path with the invalidated share of the prefix and the simulated cost delta."
    )
    parser.epilog = (
        "OLD and NEW are each a body file, a folder of <case>/<provider>/NNNN.json bodies, "
        f"a git revision (its --golden folder, read without a checkout), or {WORKTREE} "
        "/ . (the --golden folder of the working tree). An existing path wins over a "
        "revision. Exit 0: no prefix break; 1: a prefix break (0 with "
        "--allow-prefix-break); 2: bad input."
    )
    parser.add_argument(
        "old", metavar="OLD", help="a body file, a folder of bodies, a git revision, or WORKTREE"
    )
    parser.add_argument("new", metavar="NEW", help="the same kinds as OLD (files with files)")
    parser.add_argument(
        "--provider",
        choices=NAMES,
        metavar="NAME",
        help="the bodies' wire format (default: from the folder name or the body's shape)",
    )
    parser.add_argument(
        "--golden",
        default=GOLDEN,
        metavar="PATH",
        help="for a revision or WORKTREE: the folder of bodies, relative to the repository "
        f"root (default: {GOLDEN})",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="spec root that explains a break as file:line (default: the current directory;"
        " for a revision NEW, the same folder as of that revision)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as canonical JSON")
    parser.add_argument(
        "--allow-prefix-break", action="store_true", help="exit 0 even on a prefix break"
    )


def run(args: argparse.Namespace) -> int:
    """Exit 0: unchanged or tail-only; 1: a prefix break; 2: bad input."""
    try:
        return run_diff(
            args.old,
            args.new,
            provider=args.provider,
            root=args.root,
            golden=args.golden,
            allow_break=args.allow_prefix_break,
            as_json=args.json,
        )
    except (PrefixlockError, OSError) as err:
        print(f"prefixlock diff: {err}", file=sys.stderr)
        return 2
