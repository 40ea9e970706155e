"""Child processes: the one module that imports :mod:`subprocess`.

``verify`` replays a scenario in a new interpreter under another hash seed, time zone and
locale; ``diff`` reads git revisions with ``git`` itself; ``bench`` times ``verify`` in
a process of its own and reads the peak memory of its process tree
(:func:`run_measured`, handed to :mod:`prefixlock.bench` by the command line). All start
processes here.
"""

from __future__ import annotations

import contextlib
import os
import signal
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


#: Started as ``python -c _SPAWNER REPORT COMMAND...``: runs COMMAND, then writes its
#: exit code and ``wait4``'s ``ru_maxrss`` to the file REPORT. Linux records, when a
#: process execs, the peak resident set of the memory it leaves, and a child forked (or
#: vforked) from us leaves ours: measured straight from a bench process of 900 MiB, a
#: 44 MiB ``verify`` reported 897 MiB. A spawner of its own is a fresh, small process, so
#: the command's peak is its own (and its descendants'), not its parent's.
_SPAWNER = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
with open(sys.argv[1], "w", encoding="ascii") as report:
    report.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def run_measured(command: Sequence[str], *, env: Mapping[str, str] | None = None) -> Measured:
    """Run ``command`` to completion (output to temporary files, so no pipe can fill up)
    and measure it; raises :class:`OSError` if it cannot start. Where the system has
    ``wait4``, the command runs under a small spawner process of its own
    (:data:`_SPAWNER`), which reports the peak memory of the command's process tree."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory(prefix="prefixlock-measure-") as folder,
    ):
        report = os.path.join(folder, "report")
        measured = hasattr(os, "wait4")
        argv = [sys.executable, "-c", _SPAWNER, report, *command] if measured else [*command]
        start = time.perf_counter()
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            env=dict(env) if env is not None else None,
            start_new_session=measured,  # so an interrupted run stops the command too
        )
        try:
            returncode = process.wait()
        except BaseException:
            if measured:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            process.kill()
            process.wait()
            raise
        seconds = time.perf_counter() - start
        peak: int | None = None
        if measured:
            try:
                with open(report, encoding="ascii") as f:
                    code, rss = f.read().split()
            except (OSError, ValueError):
                pass  # the spawner failed: its own exit code and stderr say why
            else:
                returncode = int(code)
                # macOS reports bytes, Linux and the BSDs KiB.
                peak = int(rss) // 1024 if sys.platform == "darwin" else int(rss)
        out.seek(0)
        err.seek(0)
        return Measured(returncode, out.read(), err.read(), seconds, peak)
