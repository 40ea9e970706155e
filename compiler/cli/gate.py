"""``check`` and ``update``: the review gate in one command each (:mod:`prefixlock.review.gate`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..review.gate import BAD_INPUT as BAD_STEP
from ..review.gate import FINDING as FOUND
from ..review.gate import check_project, update_project
from .console import BAD_INPUT, FINDING, OK, Command, err, out

__all__ = ["COMMANDS"]


def _root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="spec root holding prompt/, rules/, the lock and golden/ (default: the current"
        " directory)",
    )


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "The one CI command: build the specs (exit 2 with the build's errors if they do not"
        " build), then build --check (the lock), golden --check and verify, each run even"
        " when an earlier one found something; each step's findings, then one summary"
        " table. Exit: the worst step's (0 ok, 1 a finding, 2 bad input)."
    )
    _root(parser)
    parser.add_argument(
        "--full",
        action="store_true",
        help="golden --check's whole-body diffs (default: one line per stale file and a"
        " short window of each side)",
    )
    parser.add_argument(
        "--no-hash-seed",
        action="store_true",
        help="verify: skip the replay under another hash seed, time zone and locale",
    )


def _run_check(args: argparse.Namespace) -> int:
    report = check_project(args.root, hash_seed=not args.no_hash_seed, full=args.full)
    shown = False
    for step in report.steps:
        for finding in step.findings:
            out(f"{step.command}: {finding}")
            shown = True
    if shown:
        out()
    for line in report.table():
        out(line)
    failed = [step for step in report.steps if step.status in (FOUND, BAD_STEP)]
    if not failed:
        return OK
    names = ", ".join(step.command for step in failed)
    if report.status == BAD_STEP:
        err(f"prefixlock check: bad input in {names}; fix the errors above")
        return BAD_INPUT
    err(
        f"prefixlock check: {names} found something; review it and, if the change is"
        " intended, run `prefixlock update` and commit the result"
    )
    return FINDING


def _update_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "After an edit of the specs: build them, rewrite the golden files that differ, then"
        " the build folder (ROOT/build) and the lock, and print what changed. A spec or"
        " scenario error writes nothing (exit 2)."
    )
    _root(parser)


def _run_update(args: argparse.Namespace) -> int:
    report = update_project(args.root)
    for line in report.lines():
        out(line)
    for stray in report.golden.strays if report.golden is not None else ():
        err(stray)
    return OK


COMMANDS = (
    Command(
        "check",
        "the one CI command: build --check (the lock), golden --check and verify, one"
        " summary table, the worst exit code",
        _check_arguments,
        _run_check,
    ),
    Command(
        "update",
        "rebuild, then refresh the lock and the golden files in one step, printing what changed",
        _update_arguments,
        _run_update,
    ),
)
