"""Explain a change between two request bodies: tail append or prefix break, and why.

:func:`compare_bodies` classifies ``new`` against ``old`` (two bodies of one provider):

* ``identical`` -- the same bytes (or the same structure once the provider's cache
  markers are removed: only a marker moved);
* ``tail append`` -- after removing cache markers, every key but the history list is
  equal and ``old``'s history is a prefix of ``new``'s: the provider cache still hits;
* ``prefix break`` -- anything else, at the first divergent JSON path
  (``$.messages[3].content[0].text``), with the old and new values.

A break is attributed to the spec line that produced the text when it can be
(:class:`compiler.sources.SourceIndex`).

``prefixlock diff OLD NEW`` compares two body files, or two folders of bodies
(``<provider>/0001.json`` ... anywhere below each, as ``prefixlock replay --out`` and
the golden suite write them), call by call, with the simulated cost of each side.
This module sits at the CLI edge: it uses a provider's ``strip_cache_markers``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from compiler import canonical
from compiler.cachesim import simulate
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
    "IDENTICAL",
    "PREFIX_BREAK",
    "TAIL_APPEND",
    "Comparison",
    "compare_bodies",
    "explain",
    "guess_provider",
    "history_key",
    "run_diff",
]

IDENTICAL = "identical"
TAIL_APPEND = "tail append"
PREFIX_BREAK = "prefix break"


# --- structural comparison -------------------------------------------------------------


@attrs.frozen
class Comparison:
    kind: str  # IDENTICAL, TAIL_APPEND or PREFIX_BREAK
    appended: int = 0
    difference: Difference | None = None
    #: markers moved (identical otherwise), or why the bytes differ at "$"
    note: str = ""
    #: share of ``old``'s bytes after its longest common byte prefix with ``new``
    invalidated: float = 0.0


def _parse(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = canonical.loads(data)
    except (CanonicalJSONError, ValueError) as err:
        raise PrefixlockError(f"{what}: not JSON ({err})") from None
    if not isinstance(value, dict):
        raise PrefixlockError(f"{what}: a request body must be a JSON object")
    return value


def compare_bodies(
    provider: str, old: bytes, new: bytes, *, old_name: str = "old", new_name: str = "new"
) -> Comparison:
    """Classify ``new`` against ``old``, two exact bodies of ``provider``."""
    if old == new:
        return Comparison(IDENTICAL)
    wire = get(provider)
    old_value, new_value = _parse(old, old_name), _parse(new, new_name)
    invalidated = 1 - common_prefix(old, new) / len(old) if old else 0.0
    if old_value == new_value and first_difference(old_value, new_value) is None:
        note = "same JSON value, different bytes (key order or formatting)"
        return Comparison(
            PREFIX_BREAK,
            difference=Difference((), MISSING, MISSING),
            note=note,
            invalidated=invalidated,
        )
    a, b = wire.strip_cache_markers(old_value), wire.strip_cache_markers(new_value)
    key = wire.MESSAGES_KEY
    history_a, history_b = a.pop(key, []), b.pop(key, [])
    found = first_difference(a, b)
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
    # Report the values of the bodies as sent (markers included) at that path.
    return Comparison(
        PREFIX_BREAK,
        difference=Difference(
            found.parts, value_at(old_value, found.parts), value_at(new_value, found.parts)
        ),
        invalidated=invalidated,
    )


def history_key(provider: str) -> str:
    """The key of ``provider``'s history list (``messages``, ``input``, ``contents``)."""
    return get(provider).MESSAGES_KEY


# --- the command ----------------------------------------------------------------------

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


def explain(
    provider: str, comparison: Comparison, index: SourceIndex, new: bytes, old: bytes
) -> list[str]:
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
    source = index.attribute(provider, difference, canonical.loads(new), canonical.loads(old))
    if source is not None:
        lines.append(f"  caused by {source}")
    lines.append(f"  invalidates {comparison.invalidated:.1%} of the old body's bytes")
    return lines


def run_diff(
    old: Path,
    new: Path,
    *,
    provider: str | None = None,
    root: Path | None = None,
    allow_break: bool = False,
    out: Any = None,
) -> int:
    """``prefixlock diff``: print the explanation; 0 unless a prefix break (then 1)."""
    stream = out if out is not None else sys.stdout
    index = SourceIndex(root if root is not None else Path("."))
    if old.is_dir() != new.is_dir():
        raise PrefixlockError(f"compare two files or two folders, not {old} and {new}")
    if not old.is_dir():
        old_bytes, new_bytes = _read(old), _read(new)
        name = provider or guess_provider(_parse(new_bytes, str(new)), new)
        comparison = compare_bodies(
            name, old_bytes, new_bytes, old_name=str(old), new_name=str(new)
        )
        for line in explain(name, comparison, index, new_bytes, old_bytes):
            print(f"{name}: {line}" if not line.startswith(" ") else line, file=stream)
        return 1 if comparison.kind == PREFIX_BREAK and not allow_break else 0
    return _diff_folders(old, new, index, allow_break, stream)


def _diff_folders(old: Path, new: Path, index: SourceIndex, allow_break: bool, stream: Any) -> int:
    """Compare call k of every ``<case>/<provider>`` folder under ``old`` and ``new``.

    Consecutive calls with the same verdict (kind and path) print as one range, with
    the details of its first call.
    """
    old_sets, new_sets = _call_sets(old), _call_sets(new)
    if not old_sets and not new_sets:
        raise PrefixlockError(f"no <provider>/NNNN.json bodies below {old} or {new}")
    counts = {IDENTICAL: 0, TAIL_APPEND: 0, PREFIX_BREAK: 0, "added": 0, "removed": 0}
    for key in sorted(set(old_sets) | set(new_sets)):
        name = key.rpartition("/")[2]
        a, b = old_sets.get(key, {}), new_sets.get(key, {})
        if not a or not b:  # a whole case or provider on one side only
            side, present = ("NEW", b) if not a else ("OLD", a)
            counts["added" if not a else "removed"] += len(present)
            print(f"{key}: only in {side} ({len(present)} calls)", file=stream)
            continue
        # (first call, last call, grouping key, explanation lines)
        runs: list[tuple[int, int, tuple[Any, ...], list[str]]] = []
        scenario = (new / key).parent / "scenario.yaml"
        sources = index.extended([scenario]) if scenario.is_file() else index
        old_read = {n: _read(path) for n, path in a.items()}
        new_read = {n: _read(path) for n, path in b.items()}
        old_bodies, new_bodies = list(old_read.values()), list(new_read.values())
        for number in sorted(set(a) | set(b)):
            if number not in a or number not in b:
                verdict = "added" if number in b else "removed"
                counts[verdict] += 1
                group: tuple[Any, ...] = (verdict,)
                explained = [verdict]
            else:
                old_bytes, new_bytes = old_read[number], new_read[number]
                comparison = compare_bodies(
                    name, old_bytes, new_bytes, old_name=str(a[number]), new_name=str(b[number])
                )
                counts[comparison.kind] += 1
                difference = comparison.difference
                group = (
                    comparison.kind,
                    comparison.appended,
                    difference.path if difference is not None else None,
                )
                explained = (
                    []
                    if comparison.kind == IDENTICAL
                    else explain(name, comparison, sources, new_bytes, old_bytes)
                )
            if runs and runs[-1][2] == group and runs[-1][1] == number - 1:
                runs[-1] = (runs[-1][0], number, group, runs[-1][3])
            else:
                runs.append((number, number, group, explained))
        shown = [run for run in runs if run[3]]
        if not shown:
            continue
        model = index.models.get(name)
        cost = ""
        if old_bodies and new_bodies:
            before = simulate(name, old_bodies, model=model)
            after = simulate(name, new_bodies, model=model)
            cost = (
                f"  (simulated cost vs no caching {before.cost_ratio:.1%} -> "
                f"{after.cost_ratio:.1%})"
            )
        print(f"{key}{cost}", file=stream)
        for first, last, _group, explained in shown:
            calls = f"{first:04d}" if first == last else f"{first:04d}-{last:04d}"
            print(f"  {calls}: {explained[0]}", file=stream)
            for line in explained[1:]:
                print(f"  {' ' * len(calls)}  {line.strip()}", file=stream)
    summary = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    print(f"compared {sum(counts.values())} calls: {summary or 'nothing'}", file=stream)
    return 1 if counts[PREFIX_BREAK] and not allow_break else 0


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("old", type=Path, metavar="OLD", help="a request body, or a folder of them")
    parser.add_argument("new", type=Path, metavar="NEW", help="the same kind as OLD")
    parser.add_argument(
        "--provider",
        choices=NAMES,
        metavar="NAME",
        help="the bodies' wire format (default: from the folder name or the body's shape)",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="spec root that explains a break as file:line (default: the current directory)",
    )
    parser.add_argument(
        "--allow-prefix-break", action="store_true", help="exit 0 even on a prefix break"
    )


def run(args: argparse.Namespace) -> int:
    """Exit 0: identical or tail append; 1: a prefix break; 2: unreadable input."""
    try:
        return run_diff(
            args.old,
            args.new,
            provider=args.provider,
            root=args.root,
            allow_break=args.allow_prefix_break,
        )
    except PrefixlockError as err:
        print(f"prefixlock diff: {err}", file=sys.stderr)
        return 2
