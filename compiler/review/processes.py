"""Child processes: the one module that imports :mod:`subprocess`.

``verify`` replays a scenario in a new interpreter under another hash seed, time zone and
locale; ``diff`` reads git revisions with ``git`` itself. Both start processes here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence

import attrs

__all__ = ["Completed", "run", "start_pipe"]


@attrs.frozen
class Completed:
    """A finished process: its exit code and what it wrote."""

    returncode: int
    stdout: bytes
    stderr: bytes


def run(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, stdin: bytes | None = None
) -> Completed:
    """Run ``command`` to completion; raises :class:`OSError` if it cannot start."""
    done = subprocess.run(
        list(command),
        input=stdin,
        env=dict(env) if env is not None else None,
        capture_output=True,
        check=False,
    )
    return Completed(done.returncode, done.stdout, done.stderr)


def start_pipe(command: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start ``command`` with stdin, stdout and stderr piped to us."""
    return subprocess.Popen(
        list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
