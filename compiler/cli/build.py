"""``build``, ``schema`` and ``init``: spec roots and their outputs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core import canonical
from ..core.errors import SpecErrors, UsageError
from ..review.golden import update_golden
from ..runtime.context import check_templates
from ..spec.build import (
    LOCK_FILE,
    MANIFEST,
    build_bundle,
    build_warnings,
    check_outputs,
    diff_outputs,
    write_outputs,
)
from ..spec.bundle import Bundle
from ..spec.scaffold import (
    GOLDEN,
    SCHEMAS_FOLDER,
    agent_name_for,
    init_project,
    write_schemas,
)
from ..spec.validate import SCHEMA_NAMES, schema, schema_text
from .console import FINDING, OK, Command, err, out, safe

__all__ = ["COMMANDS"]


def _build_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="spec root holding prompt/ and rules/ (default: the current directory)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="output folder (default: ROOT/build)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help=(
            f"write nothing; exit 1 if ROOT/{LOCK_FILE} (and, with an explicit --out, the"
            " output folder) differs from what would be built"
        ),
    )
    parser.add_argument(
        "--diff",
        action="store_true",
        help="with --check: print what a build would change as a unified diff: the lock "
        "file, and each changed part of the output folder (--out, else ROOT/build when it "
        "holds an earlier build), JSON parts indented",
    )


def _run_build(args: argparse.Namespace) -> int:
    root: Path = args.root
    if args.diff and not args.check:
        raise UsageError("--diff goes with --check (a build writes; it shows no diff)")
    bundle = build_bundle(root)
    for warning in build_warnings(root):  # retired or unknown models: not a failure
        err(warning)
    rendered = check_templates(bundle)  # a sample turn through every template
    if rendered:
        raise SpecErrors(rendered)
    if args.check:
        # Without an explicit --out only the committed lock file is compared: the output
        # folder is a local, ignored artefact that CI and pre-commit never see.
        problems = check_outputs(bundle, root, args.out)
        if problems and args.diff:
            sys.stdout.write(safe(diff_outputs(bundle, root, args.out)))
        if problems:
            for problem in problems:
                err(problem)
            err("prefixlock build --check: out of date; run `prefixlock build` to update")
            return FINDING
        checked = (
            f"{LOCK_FILE} matches" if args.out is None else f"{LOCK_FILE} and {args.out}/ match"
        )
        out(f"up to date: {checked} bundle {bundle.digest}")
        return OK
    folder: Path = args.out if args.out is not None else root / "build"
    write_outputs(bundle, root, folder)
    for line in _summary(bundle):
        out(line)
    out(f"wrote {folder}/ ({len(bundle.parts)} parts and {MANIFEST}) and {root / LOCK_FILE}")
    return OK


def _summary(bundle: Bundle) -> list[str]:
    """What was compiled: agent, digest, each part (size, short sha256), tools, modes."""
    width = max(len(part.name) for part in bundle.parts)
    size_width = max(len(str(part.size)) for part in bundle.parts)
    lines = [
        f"agent   {bundle.agent}",
        f"digest  {bundle.digest}",
        f"parts   {len(bundle.parts)}",
    ]
    for part in bundle.parts:
        lines.append(
            f"  {part.name:<{width}}  {part.size:>{size_width}} B  sha256:{part.sha256[:12]}"
        )
    names = ", ".join(tool.name for tool in bundle.tools)
    lines.append(f"tools   {len(bundle.tools)}: {names}")
    modes = ", ".join(
        f"{m.name} (default)" if m.name == bundle.default_mode else m.name for m in bundle.modes
    )
    lines.append(f"modes   {modes}")
    return lines


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "kind",
        nargs="?",
        choices=sorted(SCHEMA_NAMES),
        metavar="KIND",
        help=f"one schema: {', '.join(sorted(SCHEMA_NAMES))} (default: every one)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="folder to write the schemas to, side by side as KIND.schema.json (default: print"
        " to stdout: KIND's schema as shipped, or every schema as one JSON object keyed by"
        " file name)",
    )


def _run_schema(args: argparse.Namespace) -> int:
    names = [args.kind] if args.kind is not None else None
    if args.out is not None:
        for path in write_schemas(args.out, names):
            out(f"wrote {path}")
        return OK
    if args.kind is not None:
        out(schema_text(args.kind).rstrip("\n"))
        return OK
    every = {f"{name}.schema.json": schema(name) for name in sorted(SCHEMA_NAMES)}
    out(canonical.dumps_pretty(every).rstrip("\n"))
    return OK


def _init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, metavar="DIR", help="new spec root (absent or empty)")
    parser.add_argument(
        "--name",
        metavar="AGENT",
        help="the agent's name (prompt/AGENT/, rules/agent.yaml, the instructions' 'You are"
        " AGENT'); default: DIR's folder name, lowercase, other characters as '-'",
    )


def _run_init(args: argparse.Namespace) -> int:
    target: Path = args.dir
    name = args.name if args.name is not None else agent_name_for(target.resolve().name)
    bundle = init_project(target, name=name, populate=lambda root: update_golden([root / GOLDEN]))
    agent_dir = target / "prompt" / bundle.agent
    out(
        f"created {target}/ from the bundled example: agent {bundle.agent!r},"
        f" {len(bundle.tools)} tools, modes {', '.join(m.name for m in bundle.modes)}"
    )
    out(f"wrote {target / LOCK_FILE} (bundle {bundle.digest})")
    out(
        f"wrote {target / SCHEMAS_FOLDER}/ ({len(SCHEMA_NAMES)} JSON Schemas; the first line of"
        f" each {target / 'rules'}/*.yaml points at one, for editor autocompletion)"
    )
    out("")
    out("next steps:")
    out(f"  edit {target / 'rules'}/*.yaml and {agent_dir}/")
    if target.resolve() != Path.cwd().resolve():
        out(f"  cd {target}")
    steps = [
        (
            "prefixlock update",
            f"after an edit: rebuild, refresh {LOCK_FILE} and {GOLDEN}/*/ bodies",
        ),
        ("prefixlock diff HEAD WORKTREE", "what the edit does to the cache, before you commit"),
        ("prefixlock check", f"in CI and pre-commit: the lock, {GOLDEN}/ and verify"),
    ]
    width = max(len(step) for step, _ in steps)
    for step, note in steps:
        out(f"  {step:<{width}}  # {note}")
    return OK


COMMANDS = (
    Command("build", "compile a spec root into a bundle", _build_arguments, _run_build),
    Command(
        "schema",
        "print or write the JSON Schemas of the spec files",
        _schema_arguments,
        _run_schema,
    ),
    Command(
        "init", "scaffold a new spec root from the bundled example", _init_arguments, _run_init
    ),
)
