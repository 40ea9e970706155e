"""Child processes: the one module that imports :mod:`subprocess`.

``verify`` replays a scenario in a new interpreter under another hash seed, time zone and
locale; ``diff`` reads git revisions with ``git`` itself; ``bench`` times ``verify`` in
a process of its own and reads the peak memory of its process tree
(:func:`run_measured`, handed to :mod:`prefixlock.bench` by the command line). All start
processes here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence

import attrs

__all__ = ["Completed", "Measured", "run", "run_measured", "start_pipe"]


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


@attrs.frozen
class Measured:
    """A finished process, its wall time and the peak memory of its process tree."""

    returncode: int
    stdout: bytes
    stderr: bytes
    seconds: float
    #: The largest peak resident set (KiB) of the process and of every descendant it
    #: waited for (``wait4``'s ``ru_maxrss``: the kernel folds in each reaped child's);
    #: None where the system does not report it.
    max_rss_kib: int | None


def run_measured(command: Sequence[str], *, env: Mapping[str, str] | None = None) -> Measured:
    """Run ``command`` to completion (output to temporary files, so no pipe can fill up)
    and measure it; raises :class:`OSError` if it cannot start."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=dict(env) if env is not None else None,
        )
        peak: int | None = None
        if hasattr(os, "wait4"):
            try:
                _, status, usage = os.wait4(process.pid, 0)
            except BaseException:
                process.kill()
                process.wait()
                raise
            process.returncode = os.waitstatus_to_exitcode(status)
            # macOS reports bytes, Linux and the BSDs KiB.
            peak = usage.ru_maxrss // 1024 if sys.platform == "darwin" else usage.ru_maxrss
        else:
            process.wait()
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        return Measured(process.returncode, out.read(), err.read(), seconds, peak)
