"""The ``prefixlock`` command line: parse arguments, call the library, print, exit.

Each subcommand is one :class:`Command` in :data:`COMMANDS`: a function that adds its
arguments and a function that runs it and returns the exit code. A new subcommand is a
new entry; no existing one changes.

Exit codes: 0 success; 1 a :class:`~compiler.errors.PrefixlockError` (every problem is
printed to stderr, nothing is written) or ``build --check`` found drift; 2 usage error.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

import attrs

from compiler import bench, canonical, diff, verify
from compiler.bundle import (
    LOCK_FILE,
    MANIFEST,
    Bundle,
    build_bundle,
    check_outputs,
    find_example_root,
    write_lock,
    write_outputs,
)
from compiler.errors import CheckpointError, PrefixlockError, SpecErrors
from compiler.inspection import inspect_json, inspect_text
from compiler.jsonl import export_jsonl, import_jsonl, read_jsonl
from compiler.replay import provider_names, replay_bodies, write_bodies
from compiler.scenario import load_scenario
from compiler.sqlite_store import SQLiteStore
from compiler.validate import SCHEMA_NAMES, schema_text

__all__ = ["COMMANDS", "Command", "main"]


@attrs.frozen
class Command:
    """One subcommand: ``arguments`` configures its parser, ``run`` executes it."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _out(text: str = "") -> None:
    print(text, file=sys.stdout)


def _err(text: str) -> None:
    print(text, file=sys.stderr)


# --- build --------------------------------------------------------------------------------


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


def _run_build(args: argparse.Namespace) -> int:
    root: Path = args.root
    bundle = build_bundle(root)
    if args.check:
        # Without an explicit --out only the committed lock file is compared: the output
        # folder is a local, ignored artefact that CI and pre-commit never see.
        problems = check_outputs(bundle, root, args.out)
        if problems:
            for problem in problems:
                _err(problem)
            _err("prefixlock build --check: out of date; run `prefixlock build` to update")
            return 1
        checked = (
            f"{LOCK_FILE} matches" if args.out is None else f"{LOCK_FILE} and {args.out}/ match"
        )
        _out(f"up to date: {checked} bundle {bundle.digest}")
        return 0
    out: Path = args.out if args.out is not None else root / "build"
    write_outputs(bundle, root, out)
    for line in _summary(bundle):
        _out(line)
    _out(f"wrote {out}/ ({len(bundle.parts)} parts and {MANIFEST}) and {root / LOCK_FILE}")
    return 0


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


# --- schema -------------------------------------------------------------------------------


def _schema_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="folder to write the schemas to"
    )


def _write_schemas(out: Path) -> list[Path]:
    """Write every schema into ``out``, side by side: their relative ``$ref``s resolve there."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted(SCHEMA_NAMES):
        path = out / f"{name}.schema.json"
        path.write_bytes(schema_text(name).encode("utf-8"))
        written.append(path)
    return written


def _run_schema(args: argparse.Namespace) -> int:
    for path in _write_schemas(args.out):
        _out(f"wrote {path}")
    return 0


# --- init ---------------------------------------------------------------------------------


def _init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, metavar="DIR", help="new spec root (absent or empty)")


#: Where ``init`` writes the schemas, and how a ``rules/*.yaml`` file reaches them.
_INIT_SCHEMAS = "schemas"
_HEADER = re.compile(rb"# yaml-language-server: \$schema=(?:\S*/)?(?P<kind>[a-z_]+)\.schema\.json")


def _point_headers_at_schemas(rules: Path) -> None:
    """Rewrite each YAML file's ``$schema`` first line to ``../schemas/<kind>.schema.json``.

    Only a first line naming a shipped schema changes; every other byte is kept.
    """
    for path in sorted(rules.glob("*.yaml")):
        data = path.read_bytes()
        first, newline, rest = data.partition(b"\n")
        match = _HEADER.fullmatch(first)
        kind = match["kind"].decode() if match is not None else ""
        if kind not in SCHEMA_NAMES:
            continue
        header = f"# yaml-language-server: $schema=../{_INIT_SCHEMAS}/{kind}.schema.json"
        path.write_bytes(header.encode() + newline + rest)


def _run_init(args: argparse.Namespace) -> int:
    target: Path = args.dir
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise PrefixlockError(f"refusing to init {str(target)!r}: it exists and is not empty")
    example = find_example_root()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build in a staging folder next to the target and move it in complete.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.init-", dir=target.parent))
    try:
        ignore = shutil.ignore_patterns(".*", "__pycache__", "*.pyc")
        for folder in ("prompt", "rules"):
            shutil.copytree(example / folder, staging / folder, ignore=ignore)
        _write_schemas(staging / _INIT_SCHEMAS)
        _point_headers_at_schemas(staging / "rules")
        bundle = build_bundle(staging)
        write_lock(bundle, staging)
        if target.exists():
            target.rmdir()
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    agent_dir = target / "prompt" / bundle.agent
    _out(
        f"created {target}/ from the bundled example: agent {bundle.agent!r},"
        f" {len(bundle.tools)} tools, modes {', '.join(m.name for m in bundle.modes)}"
    )
    _out(f"wrote {target / LOCK_FILE} (bundle {bundle.digest})")
    _out(
        f"wrote {target / _INIT_SCHEMAS}/ ({len(SCHEMA_NAMES)} JSON Schemas; the first line of"
        f" each {target / 'rules'}/*.yaml points at one, for editor autocompletion)"
    )
    _out("")
    _out("next steps:")
    steps = [
        (f"edit {target / 'rules'}/*.yaml and {agent_dir}/", ""),
        (f"prefixlock build --root {target}", f"compile; updates {LOCK_FILE}"),
        (f"prefixlock build --root {target} --check", "in CI and pre-commit"),
    ]
    width = max(len(step) for step, note in steps if note)
    for step, note in steps:
        _out(f"  {step:<{width}}  # {note}" if note else f"  {step}")
    return 0


# --- stores: inspect, integrity, export, import ------------------------------------------


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", type=Path, help="the SQLite checkpoint store")


def _open_store(path: Path) -> SQLiteStore:
    if not path.is_file():
        raise CheckpointError(f"{path}: no such store")
    return SQLiteStore(path)


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    _store_arguments(parser)
    parser.add_argument("conversation", nargs="?", help="conversation id (default: list them)")
    parser.add_argument("--json", action="store_true", help="print canonical JSON")


def _run_inspect(args: argparse.Namespace) -> int:
    with _open_store(args.store) as store:
        if args.conversation is None:
            for conversation in store.conversations():
                _out(conversation)
            return 0
        if args.json:
            _out(canonical.dumps_pretty(inspect_json(store, args.conversation)).rstrip("\n"))
        else:
            sys.stdout.write(inspect_text(store, args.conversation))
    return 0


def _run_integrity(args: argparse.Namespace) -> int:
    with _open_store(args.store) as store:
        problems = store.integrity_check()
        count = len(store.conversations())
    for problem in problems:
        _err(problem)
    if problems:
        _err(f"prefixlock integrity: {len(problems)} problem(s) in {args.store}")
        return 1
    _out(f"{args.store}: ok ({count} conversation{'s' if count != 1 else ''})")
    return 0


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    _store_arguments(parser)
    parser.add_argument("conversation", help="conversation id")
    parser.add_argument("--out", type=Path, required=True, help="the JSONL file to write")


def _run_export(args: argparse.Namespace) -> int:
    with _open_store(args.store) as store:
        export_jsonl(store, args.conversation, args.out)
    _out(f"wrote {args.out}")
    return 0


def _import_arguments(parser: argparse.ArgumentParser) -> None:
    _store_arguments(parser)
    parser.add_argument("jsonl", type=Path, help="a file written by `prefixlock export`")


def _run_import(args: argparse.Namespace) -> int:
    read_jsonl(args.jsonl)  # verify everything first: a bad file creates no store
    with SQLiteStore(args.store) as store:
        conversation = import_jsonl(args.jsonl, store)
    _out(f"imported {conversation} into {args.store}")
    return 0


# --- replay -------------------------------------------------------------------------------


def _replay_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("scenario", type=Path, metavar="SCENARIO", help="scenario YAML file")
    parser.add_argument(
        "--provider",
        action="append",
        required=True,
        metavar="NAME",
        help="provider wire format, or 'all' (may be repeated)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, metavar="DIR", help="writes DIR/NAME/0001.json ..."
    )
    parser.add_argument(
        "--restart-everywhere",
        action="store_true",
        help="drop all memory and hydrate from the checkpoint store before every step",
    )


def _run_replay(args: argparse.Namespace) -> int:
    names = provider_names(args.provider)
    scenario = load_scenario(args.scenario)
    bodies = replay_bodies(scenario, names, restart_everywhere=args.restart_everywhere)
    written = write_bodies(bodies, args.out)
    for name in names:
        size = sum(len(body) for body in bodies[name])
        _out(f"{name}: {len(written[name])} calls, {size} bytes -> {args.out / name}/")
    return 0


# --- main ---------------------------------------------------------------------------------

COMMANDS: tuple[Command, ...] = (
    Command("build", "compile a spec root into a bundle", _build_arguments, _run_build),
    Command("schema", "write the JSON Schemas of the spec files", _schema_arguments, _run_schema),
    Command(
        "init", "scaffold a new spec root from the bundled example", _init_arguments, _run_init
    ),
    Command(
        "inspect",
        "print a stored conversation: root, records, epochs, current request",
        _inspect_arguments,
        _run_inspect,
    ),
    Command(
        "integrity",
        "check a checkpoint store (PRAGMA integrity_check, hash chains, heads)",
        _store_arguments,
        _run_integrity,
    ),
    Command("export", "export a stored conversation as JSONL", _export_arguments, _run_export),
    Command("import", "import a JSONL conversation into a store", _import_arguments, _run_import),
    Command(
        "replay",
        "write the exact request body of every model call of a scenario",
        _replay_arguments,
        _run_replay,
    ),
    Command(
        "verify",
        "replay scenarios and check every prefix invariant per provider",
        verify.arguments,
        verify.run,
    ),
    Command(
        "diff",
        "compare two bodies, golden folders or git revisions: unchanged, tail-only or prefix break",
        diff.arguments,
        diff.run,
    ),
    Command(
        "bench",
        "measure per-call cost against history length, next to naive baselines",
        bench.arguments,
        bench.run,
    ),
)


def _version() -> str:
    try:
        return metadata.version("prefixlock")
    except metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prefixlock",
        description="Compile coding-agent prompt specs into a byte-exact, append-only history.",
    )
    parser.add_argument("--version", action="version", version=f"prefixlock {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(sub)
        sub.set_defaults(run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``prefixlock``; returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # usage errors (2), --help and --version (0)
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        code: int = args.run(args)
    except SpecErrors as err:
        for error in err.errors:
            _err(str(error))
        count = len(err.errors)
        _err(f"prefixlock {args.command}: {count} error{'s' if count != 1 else ''}")
        return 1
    except PrefixlockError as err:
        _err(f"prefixlock {args.command}: {err}")
        return 1
    except OSError as err:
        _err(f"prefixlock {args.command}: {err}")
        return 1
    return code
