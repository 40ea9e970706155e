"""What every command shares: the :class:`Command` record, output and the exit codes.

One policy for every command: :data:`OK` (0) when all is well, :data:`FINDING` (1) when
a check the command runs fails (``build --check`` drift, an invariant failure, a prefix
break, a damaged store), :data:`BAD_INPUT` (2) for bad input or usage: every
:class:`~prefixlock.core.errors.PrefixlockError` and every unreadable file.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence

import attrs

from ..core.names import hint

__all__ = ["BAD_INPUT", "FINDING", "OK", "Command", "choice", "err", "out", "safe"]

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


#: What must never reach a terminal raw: C0 controls but tab and newline, DEL, C1
#: controls (ESC and CSI start escape sequences) and the bidirectional overrides that
#: reorder what a reader sees.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe(text: str) -> str:
    """``text`` with every unsafe character as a ``\\uXXXX`` escape (valid inside a JSON
    string too, so canonical JSON output keeps its meaning)."""
    return _UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", text)


def out(text: str = "") -> None:
    """A line of the command's result, to stdout (unsafe characters escaped)."""
    print(safe(text), file=sys.stdout)


def err(text: str) -> None:
    """A line of diagnostics or progress, to stderr (unsafe characters escaped)."""
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
