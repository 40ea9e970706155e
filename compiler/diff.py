"""``prefixlock diff OLD NEW``: the command, its text report and its exit code.

OLD and NEW are two body files, or two golden-style folders of bodies compared call by
call; either folder may be a git revision or ``WORKTREE`` / ``.``
(:mod:`compiler.diff_sides`). Each call is unchanged, tail-only or a prefix break at a
JSON path, with the invalidated share and the spec line behind it
(:mod:`compiler.comparison`); each case and provider gets its counts, the largest
invalidated share and the simulated cost delta (:mod:`compiler.folderdiff`).

This module only renders: :func:`render` writes the text report of two folders (what
changed per case x provider, the table, a summary line); ``--json`` prints the results'
own ``to_json``. :func:`run_diff` is the library entry point, :func:`arguments` and
:func:`run` wire it into the CLI. Exit 0: no prefix break; 1: a prefix break (0 with
``--allow-prefix-break``); 2: bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from compiler import canonical
from compiler.comparison import (
    CALL_VERDICTS,
    PREFIX_BREAK,
    PROVIDERS,
    TAIL_ONLY,
    UNCHANGED,
    Comparison,
    attribute,
    compare_bodies,
    explanation,
    guess_provider,
    parse_body,
)
from compiler.diff_sides import GOLDEN, WORKTREE, Side, read_body, resolve_side
from compiler.errors import PrefixlockError
from compiler.folderdiff import CallDiff, FolderDiff, PairDiff, SourceIndexes, diff_folders
from compiler.tables import align

__all__ = ["arguments", "render", "run", "run_diff"]


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
    return align((header, *body))


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
    counts = [(v, result.count(v)) for v in CALL_VERDICTS]
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
        indexes = SourceIndexes()
        if not a.is_folder:
            old_bytes, new_bytes = read_body(a.path), read_body(b.path)
            name = provider or guess_provider(parse_body(new_bytes, str(b.path)), b.path)
            comparison = compare_bodies(
                name, old_bytes, new_bytes, old_name=str(a.path), new_name=str(b.path)
            )
            source = attribute(name, comparison, indexes(spec_root), new_bytes, old_bytes)
            if as_json:
                print(canonical.dumps(_file_json(a, b, name, comparison, source)), file=stream)
            else:
                for line in explanation(comparison, source):
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
        choices=PROVIDERS,
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
