"""What every command shares: the :class:`Command` record, output and the exit codes.

One policy for every command: :data:`OK` (0) when all is well, :data:`FINDING` (1) when
a check the command runs fails (``build --check`` drift, an invariant failure, a prefix
break, a damaged store), :data:`BAD_INPUT` (2) for bad input or usage: every
:class:`~prefixlock.core.errors.PrefixlockError` and every unreadable file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

import attrs

__all__ = ["BAD_INPUT", "FINDING", "OK", "Command", "err", "out"]

OK = 0
FINDING = 1
BAD_INPUT = 2


@attrs.frozen
class Command:
    """One subcommand: ``arguments`` configures its parser, ``run`` executes it."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def out(text: str = "") -> None:
    """A line of the command's result, to stdout."""
    print(text, file=sys.stdout)


def err(text: str) -> None:
    """A line of diagnostics or progress, to stderr."""
    print(text, file=sys.stderr, flush=True)
