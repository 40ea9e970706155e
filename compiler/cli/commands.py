"""The ``prefixlock`` command line: parse arguments, call the library, print, exit.

Each subcommand is one :class:`~prefixlock.cli.console.Command`, listed by the module of
its topic (``build``, ``store``, ``review``, ``bench``); :data:`COMMANDS` joins them. The
exit codes follow one policy (:mod:`prefixlock.cli.console`): 0 ok, 1 a finding, 2 bad
input or usage. A closed output pipe (``prefixlock verify | head -3``) ends the command
quietly with 141, as a shell reports a process ended by ``SIGPIPE``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from ..core.errors import Location, PrefixlockError, SpecError, SpecErrors
from ..core.names import hint
from ..core.resources import PACKAGE
from . import bench, build, convert, gate, review, store
from .console import BAD_INPUT, Command, err, error_json

__all__ = ["COMMANDS", "Command", "main"]

COMMANDS: tuple[Command, ...] = (
    *build.COMMANDS,
    *store.COMMANDS,
    *review.COMMANDS,
    *gate.COMMANDS,
    *convert.COMMANDS,
    *bench.COMMANDS,
)

_NAMES = tuple(command.name for command in COMMANDS)

#: The exit status of a command whose output pipe closed (128 + SIGPIPE).
CLOSED_PIPE = 141
#: Every command's help ends with this.
EXIT_CODES = (
    "Exit codes: 0 ok; 1 a finding (a check the command runs failed); 2 bad input or usage; "
    "141 the output pipe closed."
)


def _version() -> str:
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="prefixlock",
        description="Compile coding-agent prompt specs into a byte-exact, append-only history.",
    )
    parser.add_argument("--version", action="version", version=f"prefixlock {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        sub = commands.add_parser(command.name, help=command.help, description=command.help)
        command.arguments(sub)
        sub.epilog = f"{sub.epilog} {EXIT_CODES}" if sub.epilog else EXIT_CODES
        sub.set_defaults(run=command.run)
    return parser


def _run(args: argparse.Namespace) -> int:
    as_json = bool(getattr(args, "json", False))
    try:
        code: int = args.run(args)
    except SpecErrors as error:
        if as_json:
            error_json(args.command, error.errors)
            return BAD_INPUT
        for problem in error.errors:
            err(str(problem))
        count = len(error.errors)
        err(f"prefixlock {args.command}: {count} error{'s' if count != 1 else ''}")
        return BAD_INPUT
    except BrokenPipeError:
        raise  # our reader went away: not bad input (see main)
    except (PrefixlockError, OSError) as error:
        if as_json:
            error_json(args.command, [_problem(error)])
        else:
            err(f"prefixlock {args.command}: {error}")
        return BAD_INPUT
    return code


def _problem(error: Exception) -> SpecError | str:
    """An error as :func:`error_json` reports it: an OS error names its file."""
    if isinstance(error, OSError) and error.filename is not None:
        return SpecError(Location(str(error.filename)), "", error.strerror or str(error))
    return str(error)


class _UsageError(Exception):
    """An argparse usage error, held back so that ``--json`` can report it as JSON."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise _UsageError(self, message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``prefixlock``; returns the exit code."""
    parser = _parser()
    given = list(sys.argv[1:] if argv is None else argv)
    if given and not given[0].startswith("-") and given[0] not in _NAMES:
        # argparse's own message lists every command, unranked
        message = f"unknown command {given[0]!r} ({hint(given[0], _NAMES, 'commands')})"
        if "--json" in given:
            error_json(None, [message])
        else:
            parser.print_usage(sys.stderr)
            err(f"prefixlock: error: {message}")
        return BAD_INPUT
    try:
        args = parser.parse_args(given)
    except SystemExit as exit_:  # --help and --version (0)
        return exit_.code if isinstance(exit_.code, int) else BAD_INPUT
    except _UsageError as usage:
        if "--json" in given:
            error_json(None if given[0].startswith("-") else given[0], [usage.message])
        else:
            usage.parser.print_usage(sys.stderr)
            err(f"{usage.parser.prog}: error: {usage.message}")
        return BAD_INPUT
    try:
        code = _run(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`| head`). Point stdout at /dev/null so that the flush at
        # interpreter exit does not raise again, and end quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return CLOSED_PIPE
    return code
