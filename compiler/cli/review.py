"""``replay``, ``verify`` and ``diff``: scenarios, golden bodies and their changes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..cache.tokens import NAMES as TOKENIZERS
from ..core import canonical
from ..core.atomic import replace_file
from ..core.errors import SpecError, SpecErrors, UsageError
from ..review.built import UPDATE
from ..review.compare import ROOT_CHANGE
from ..review.diff import GOLDEN, PROVIDERS, STALE_ADVICE, WORKTREE, diff
from ..review.diff.formats import UNBUILT, github, github_errors, markdown, markdown_errors
from ..review.golden import check_golden, pretty_body, update_golden
from ..review.invariants import Failure
from ..review.observed import compare_observed
from ..review.page import report_page
from ..review.policies import POLICIES, format_policies, parse_policies, scenario_policies
from ..review.preview import load_context, preview
from ..review.replay import provider_names, replay_digests, write_replay
from ..review.scenario import golden_scenarios, load_scenario, scenario_files
from ..review.verify import HEADER, Listener, Row, row_line, table_line, table_widths, verify
from ..spec.build import LOCK_FILE
from .console import (
    BAD_INPUT,
    FINDING,
    OK,
    Command,
    choice,
    err,
    error_json,
    out,
    out_commands,
    out_json,
    safe,
)

__all__ = ["COMMANDS"]


def _replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", type=Path, metavar="SCENARIO", help="scenario YAML file")
    parser.add_argument(
        "--provider",
        action="append",
        required=True,
        metavar="NAME",
        help="provider wire format, or 'all' (may be repeated)",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--out", type=Path, metavar="DIR", help="writes DIR/NAME/0001.json ...")
    target.add_argument(
        "--digests",
        type=Path,
        metavar="FILE",
        help="writes FILE: {NAME: [SHA-256 of each call's body]} (no bodies kept)",
    )
    parser.add_argument(
        "--restart-everywhere",
        action="store_true",
        help="drop all memory and hydrate from the checkpoint store before every step",
    )


def _run_replay(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    names = scenario.replayed(provider_names(args.provider))
    if not names:
        starts = ", ".join(scenario.providers)
        raise UsageError(f"{scenario.file}: the scenario starts on {starts} only (providers:)")
    if args.digests is not None:
        everywhere = args.restart_everywhere
        digests = replay_digests(scenario, names, restart=lambda _: everywhere)
        replace_file(args.digests, canonical.dumps(digests).encode("utf-8"))
        for name in names:
            out(f"{name}: {len(digests[name])} calls -> {args.digests}")
        return OK
    written = write_replay(scenario, names, args.out, restart_everywhere=args.restart_everywhere)
    for name in names:
        calls, size = len(written.paths[name]), written.sizes[name]
        out(f"{name}: {calls} calls, {size} bytes -> {args.out / name}/")
    return OK


def _verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="scenario files or folders (default: golden/*/scenario.yaml)",
    )
    parser.add_argument("--json", action="store_true", help="print the report as canonical JSON")
    parser.add_argument(
        "--provider",
        action="append",
        metavar="NAME",
        help="provider wire format, or 'all' (default; may be repeated)",
    )
    parser.add_argument(
        "--tokenizer",
        type=choice("tokenizer", TOKENIZERS),
        default="estimate",
        metavar="NAME",
        help=f"token counts of the cache simulation: {', '.join(TOKENIZERS)} (default: "
        "estimate, UTF-8 bytes / 4)",
    )
    parser.add_argument(
        "--no-hash-seed",
        action="store_true",
        help="skip the replay under another hash seed, time zone and locale",
    )
    parser.add_argument(
        "--policy",
        type=_policies,
        metavar="P,P,...",
        help="also price these cache policies on each scenario with its timestamps: "
        f"{', '.join(POLICIES)} (cost vs uncached, the perfect cache, the offline-optimal "
        "policy and the naive harness; docs/cache-policy.md)",
    )
    parser.add_argument(
        "--observed",
        type=Path,
        metavar="USAGE.json",
        help="one scenario: print per call the simulated and the observed cached share and "
        "cost (the usage file `prefixlock convert` writes), and the totals",
    )


def _policies(text: str) -> tuple[str, ...]:
    try:
        return parse_policies(text)
    except UsageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


class _Stream(Listener):
    """Prints the verify table a row at a time as each scenario is done; on a terminal,
    a progress line on stderr while one runs (never in a pipe or a CI log)."""

    def __init__(self) -> None:
        self.widths: list[int] = []
        self.progress = sys.stderr.isatty()

    def started(self, labels: Sequence[str], names: Sequence[str]) -> None:
        self.widths = table_widths(labels, names)
        out(table_line(HEADER, self.widths))
        sys.stdout.flush()

    def case_started(self, index: int, count: int, label: str) -> None:
        if self.progress:
            # \r and erase-line by hand: err() escapes control characters
            sys.stderr.write(f"\r\x1b[K[{index + 1}/{count}] verifying {safe(label)}...")
            sys.stderr.flush()

    def case_done(self, rows: Sequence[Row], failures: Sequence[Failure]) -> None:
        self.clear()
        for row in rows:
            out(row_line(row, self.widths))
        for row in rows:  # where a switch step sent the calls: a cache reset each
            for switch in row.switches:
                out(f"  {row.scenario} switch at {switch}")
        sys.stdout.flush()

    def clear(self) -> None:
        if self.progress:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()


def _run_observed(args: argparse.Namespace) -> int:
    if len(args.paths) != 1 or (args.provider and len(args.provider) != 1):
        raise UsageError("--observed compares one scenario with one provider")
    provider = args.provider[0] if args.provider else None
    report = compare_observed(args.paths[0], args.observed, provider=provider)
    if args.json:
        out_json("verify-observed", report.to_json())
    else:
        for line in report.table():
            out(line)
    return OK


def _run_verify(args: argparse.Namespace) -> int:
    if args.observed is not None:
        return _run_observed(args)
    stream = None if args.json else _Stream()
    try:
        report = verify(
            args.paths,
            args.provider or ["all"],
            hash_seed=not args.no_hash_seed,
            tokenizer=args.tokenizer,
            listener=stream,
        )
    finally:
        if stream is not None:
            stream.clear()
    policies = (
        scenario_policies(
            scenario_files(args.paths) if args.paths else golden_scenarios(),
            provider_names(args.provider or ["all"]),
            args.policy,
        )
        if args.policy
        else None
    )
    if args.json:
        value = report.to_json()
        if policies is not None:
            value["policies"] = policies
        out_json("verify", value)
        return OK if report.ok else FINDING
    for line in format_policies(policies or []):
        out(line)
    if report.failures or report.stale_locks:
        out()
    for failure in report.failures:
        for line in failure.lines():
            out(line)
    for stale in report.stale_locks:
        out(stale)
    cases = len({row.file for row in report.rows})
    names = len({row.provider for row in report.rows})
    if report.ok:
        out(f"\n{cases} scenario(s) x {names} provider(s): every invariant holds")
        return OK
    if not report.failures:  # the lock alone: what holds was replayed from the specs
        out(
            f"\n{cases} scenario(s) x {names} provider(s): every invariant holds, but the"
            " lock is stale"
        )
        return FINDING
    out(f"\n{len(report.failures)} invariant failure(s)")
    return FINDING


def _diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compare request bodies call by call: unchanged, tail-only, or a prefix break at "
        "a JSON path with the invalidated share of the prefix and the simulated cost delta."
    )
    parser.epilog = (
        "OLD and NEW are each a body file, a folder of <case>/<provider>/NNNN.json bodies, "
        f"a git revision (its --golden folder, read without a checkout), or {WORKTREE} "
        "/ . (the --golden folder of the working tree). An existing path wins over a "
        "revision. Every changed call is classed by what deploying it does: a root change "
        "(instructions, tools, settings: new conversations start a new cached prefix), a "
        "rendered-content change (only messages rendered from now on differ; running "
        "conversations keep their cache) or none. Exit 0: no root change; 1: a root change "
        "(with --strict: any prefix break; 0 with --allow-prefix-break), or NEW's golden "
        "files built from another bundle than its lock; 2: bad input."
    )
    parser.add_argument(
        "old", metavar="OLD", help="a body file, a folder of bodies, a git revision, or WORKTREE"
    )
    parser.add_argument("new", metavar="NEW", help="the same kinds as OLD (files with files)")
    parser.add_argument(
        "--provider",
        type=choice("provider", PROVIDERS),
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
        "--format",
        choices=("text", "json", "markdown", "github"),
        default="text",
        help="text (default); json (as --json); markdown: a pull-request comment, the "
        "verdict and its spec lines first, unchanged rows folded; github: workflow "
        "annotations (::error for a root change, ::notice for rendered content) at the "
        "spec lines",
    )
    parser.add_argument(
        "--full-report",
        type=Path,
        metavar="PATH",
        help="also write the whole markdown report to PATH, unbounded (the markdown comment "
        "stops at 60,000 characters and names PATH for the rest; CI uploads it as an artifact)",
    )
    parser.add_argument(
        "--allow-prefix-break", action="store_true", help="exit 0 even on a root change"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 on any prefix break of the replayed bodies, not only on a root change",
    )


def _run_diff(args: argparse.Namespace) -> int:
    """Exit 1 for a root change (with --strict: any prefix break), else 0; 2 when a
    side's specs do not build, with the build's errors in the chosen format."""
    try:
        report = diff(
            args.old, args.new, provider=args.provider, root=args.root, golden=args.golden
        )
    except SpecErrors as error:
        return _unbuilt(args, error.errors)
    failing = report.broken if args.strict else report.impact == ROOT_CHANGE
    if args.full_report is not None:
        text = "\n".join(markdown(report, limit=None)) + "\n"
        replace_file(args.full_report, text.encode("utf-8"))
    if args.json or args.format == "json":
        out_json("diff", report.to_json())
    elif args.format in ("markdown", "github"):
        full = None if args.full_report is None else str(args.full_report)
        if args.format == "github":
            out_commands(github(report, strict=args.strict))
        lines = markdown(report, full_report=full) if args.format == "markdown" else []
        for line in lines:
            out(line)
    else:
        for line in report.lines():
            out(line)
        if report.stale:
            err(
                f"prefixlock diff: {len(report.stale)} case(s) of golden files stale against"
                f" the lock; {STALE_ADVICE}"
            )
            return FINDING
        if failing and not args.allow_prefix_break:
            what = "the prefix breaks" if args.strict else "a root change"
            err(f"prefixlock diff: {what}; pass --allow-prefix-break to accept it")
    if report.stale:
        return FINDING
    return FINDING if failing and not args.allow_prefix_break else OK


def _unbuilt(args: argparse.Namespace, errors: Sequence[SpecError]) -> int:
    """A side's specs do not build: their errors in ``--format``, exit 2."""
    if args.json or args.format == "json":
        error_json("diff", errors)
    elif args.format in ("markdown", "github"):
        if args.format == "github":
            out_commands(github_errors(errors))
        for line in markdown_errors(errors) if args.format == "markdown" else []:
            out(line)
    else:
        for problem in errors:
            err(str(problem))
        count = f"{len(errors)} error{'' if len(errors) == 1 else 's'}"
        err(f"prefixlock diff: {UNBUILT} ({count}); nothing was compared")
    return BAD_INPUT


def _golden_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="cases' <case>/scenario.yaml files or folders of them (default:"
        " golden/*/scenario.yaml)",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 naming every stale file"
    )
    what.add_argument(
        "--update", action="store_true", help="rewrite the bodies and calls.md that differ"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="with --check: per differing file a unified diff of the whole pretty-printed "
        "bodies (default: one line per file, with the JSON path and byte offset of the first "
        "difference, and a short window of each side there)",
    )


def _strays(strays: Sequence[str]) -> None:
    """Each path that belongs to no case, and a line that counts them."""
    for stray in strays:
        err(stray)
    if strays:
        err(
            f"prefixlock golden: {len(strays)} path(s) in no golden case; delete them, or"
            " restore their scenario.yaml"
        )


def _run_golden(args: argparse.Namespace) -> int:
    if args.full and not args.check:
        raise UsageError("--full goes with --check (an update shows no diff)")
    if args.update:
        report = update_golden(args.paths)
        for path in report.removed:
            out(f"removed {path} (left over from an interrupted golden update)")
        for folder in report.updated:
            out(f"updated {folder}/")
        out(f"{len(report.cases)} case(s), {len(report.updated)} updated")
        _strays(report.strays)
        return FINDING if report.strays else OK
    report = check_golden(args.paths, full=args.full)
    for problem in (*report.locks, *report.bundles, *report.problems):
        err(problem)
    _strays(report.strays)
    if report.bundles:
        err(
            f"prefixlock golden: {len(report.bundles)} case(s) built from another bundle,"
            f" {len(report.problems)} stale golden file(s); review the change and run"
            f" {UPDATE}"
        )
        return FINDING
    if report.problems:
        err(
            f"prefixlock golden: {len(report.problems)} stale golden file(s); "
            f"review the change and run {UPDATE}"
        )
    elif report.locks:
        err(
            f"prefixlock golden: every golden file matches a fresh replay, but {LOCK_FILE} is stale"
        )
    if not report.ok:
        return FINDING
    out(f"{len(report.cases)} case(s): every golden file matches a fresh replay")
    return OK


def _render_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--query", required=True, help="the user's message")
    parser.add_argument("--mode", help="the mode (default: the agent's default mode)")
    parser.add_argument(
        "--context",
        type=Path,
        metavar="FILE",
        help="YAML file holding the conversation-level context (rules, skills, subagents, "
        "environment, git, mcp)",
    )
    parser.add_argument("--timestamp", help="the turn's timestamp (RFC 3339), if any")
    parser.add_argument(
        "--provider",
        default="anthropic",
        type=choice("provider", PROVIDERS),
        metavar="NAME",
        help="wire format (default: anthropic)",
    )
    parser.add_argument(
        "--root", type=Path, default=Path("."), metavar="DIR", help="spec root (default: .)"
    )
    parser.add_argument(
        "--format",
        type=choice("format", ("body", "raw", "messages")),
        default="body",
        help="body: the request body, indented, wire key order kept (default); raw: the "
        "exact bytes POSTed; messages: each canonical message's text",
    )


def _run_render(args: argparse.Namespace) -> int:
    context = load_context(args.context) if args.context is not None else None
    shown = preview(
        args.root,
        query=args.query,
        provider=args.provider,
        mode=args.mode,
        context=context,
        timestamp=args.timestamp,
    )
    if args.format == "raw":
        sys.stdout.buffer.write(shown.body)
        sys.stdout.flush()
    elif args.format == "messages":
        for message in shown.request.messages:
            out(f"--- {message.id} ({message.role})")
            out(message.text.rstrip("\n"))
    else:
        out(pretty_body(shown.body).rstrip("\n"))
    return OK


def _report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out", type=Path, metavar="OUT.html", help="the page to write")
    parser.add_argument(
        "paths",
        nargs="*",
        type=Path,
        metavar="PATH",
        help="scenario files or folders (default: golden/*/scenario.yaml)",
    )
    parser.add_argument(
        "--provider",
        action="append",
        metavar="NAME",
        help="provider wire format, or 'all' (default; may be repeated)",
    )


def _run_report(args: argparse.Namespace) -> int:
    text = report_page(args.paths, args.provider or ["all"])
    replace_file(args.out, text.encode("utf-8"))
    out(f"wrote {args.out}")
    return OK


COMMANDS = (
    Command(
        "replay",
        "write the exact request body of every model call of a scenario",
        _replay_arguments,
        _run_replay,
    ),
    Command(
        "verify",
        "replay scenarios and check every prefix invariant per provider",
        _verify_arguments,
        _run_verify,
    ),
    Command(
        "render",
        "print what one user turn sends (the first call's body), without a scenario",
        _render_arguments,
        _run_render,
    ),
    Command(
        "report",
        "write one self-contained HTML page of a verify run: a summary, the shared root once, "
        "and per case and call the cached / written / uncached tokens, idle gaps and cold calls",
        _report_arguments,
        _run_report,
    ),
    Command(
        "golden",
        "check (--check) or rewrite (--update) the golden bodies and calls.md of every case",
        _golden_arguments,
        _run_golden,
    ),
    Command(
        "diff",
        "compare two bodies, golden folders or git revisions: unchanged, tail-only or prefix break",
        _diff_arguments,
        _run_diff,
    ),
)
