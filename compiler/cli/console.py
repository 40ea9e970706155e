"""What every command shares: the :class:`Command` record, output and the exit codes.

One policy for every command: :data:`OK` (0) when all is well, :data:`FINDING` (1) when
a check the command runs fails (``build --check`` drift, an invariant failure, a prefix
break, a damaged store), :data:`BAD_INPUT` (2) for bad input or usage: every
:class:`~prefixlock.core.errors.PrefixlockError` and every unreadable file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ..core import canonical, escaping
from ..core.errors import SpecError
from ..core.names import hint

__all__ = [
    "BAD_INPUT",
    "ERROR_FORMAT",
    "FINDING",
    "FORMATS",
    "OK",
    "Command",
    "choice",
    "err",
    "error_json",
    "out",
    "out_commands",
    "out_json",
    "safe",
]

OK = 0
FINDING = 1
BAD_INPUT = 2

#: The ``format`` of every ``--json`` output, ``prefixlock.<output>/<version>``: the
#: version goes up when a key is removed or changes meaning (added keys keep it). Each
#: shape is documented in ``docs/json.md``.
FORMATS = {
    "verify": "prefixlock.verify/1",
    "verify-observed": "prefixlock.verify-observed/1",
    "diff": "prefixlock.diff/1",
    "inspect": "prefixlock.inspect/1",
    "inspect-list": "prefixlock.inspect-list/1",
    "inspect-cache": "prefixlock.inspect-cache/1",
    "inspect-cache-list": "prefixlock.inspect-cache-list/1",
    "bench": "prefixlock.bench/1",
    "bench-store": "prefixlock.bench-store/1",
    "bench-soak": "prefixlock.bench-soak/1",
    "bench-cold": "prefixlock.bench-cold/1",
}
#: The ``format`` of what any ``--json`` command prints instead when its input is bad
#: (exit 2): ``{"format", "command", "errors": [{message, file, line, column, path}]}``.
ERROR_FORMAT = "prefixlock.error/1"


@attrs.frozen
class Command:
    """One subcommand: ``arguments`` configures its parser, ``run`` executes it."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def safe(text: str) -> str:
    """``text`` as a terminal and a CI log may show it: unsafe characters escaped, and no
    line a runner would take for a workflow command (:mod:`prefixlock.core.escaping`,
    the one place that escapes text for its format)."""
    return escaping.log_lines(escaping.terminal(text))


def out(text: str = "") -> None:
    """A line of the command's result, to stdout (escaped by :func:`safe`)."""
    print(safe(text), file=sys.stdout)


def out_commands(lines: Sequence[str]) -> None:
    """Workflow command lines, built with :func:`~prefixlock.core.escaping.workflow_data`
    and :func:`~prefixlock.core.escaping.workflow_property`, to stdout: their own
    ``::`` is kept; whatever they carry was escaped when they were built."""
    for line in lines:
        print(escaping.terminal(line), file=sys.stdout)


def out_json(output: str, value: Mapping[str, Any], *, pretty: bool = False) -> None:
    """An output's canonical JSON with its ``format`` (``output`` keys :data:`FORMATS`)."""
    tagged = {**value, "format": FORMATS[output]}
    out(canonical.dumps_pretty(tagged).rstrip("\n") if pretty else canonical.dumps(tagged))


def error_json(command: str | None, errors: Sequence[SpecError | str]) -> None:
    """Bad input as JSON on stdout, where a ``--json`` reader looks (:data:`ERROR_FORMAT`).

    A :class:`SpecError` keeps its file, line, column and JSON path; any other error is
    a message alone (the other keys null).
    """
    items: list[dict[str, Any]] = []
    for error in errors:
        if isinstance(error, SpecError):
            where = error.location
            items.append(
                {
                    "message": error.message,
                    "file": where.file or None,
                    "line": where.line or None,
                    "column": where.column or None,
                    "path": error.path or None,
                }
            )
        else:
            items.append(
                {"message": error, "file": None, "line": None, "column": None, "path": None}
            )
    out(canonical.dumps({"format": ERROR_FORMAT, "command": command, "errors": items}))


def err(text: str) -> None:
    """A line of diagnostics or progress, to stderr (escaped by :func:`safe`)."""
    print(safe(text), file=sys.stderr, flush=True)


def choice(what: str, names: Sequence[str]) -> Callable[[str], str]:
    """An argparse ``type`` accepting one of ``names``; any other value is a usage error
    with a "did you mean" (argparse's own ``choices`` lists them all, unranked)."""

    def check(value: str) -> str:
        if value not in names:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {value!r} ({hint(value, names, 'choose from')})"
            )
        return value

    check.__name__ = what  # argparse names the type in its messages
    return check
