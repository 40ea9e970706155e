"""``prefixlock verify`` at growing lengths: its cost per call must not grow with the
conversation (issue 15, item 3).

:func:`measure_verify` writes a generated scenario of each length
(:func:`~prefixlock.bench.scenarios.write_long_scenario`) into a temporary folder and
runs ``python -m prefixlock verify FILE --json`` on it in a process of its own: all five
providers, the replay with restarts and the hash-seed replay in a subprocess (the
defaults). Per length it reports the calls, the wall time, the time per call, the peak
resident memory of the process tree (the verify process and its ``prefixlock replay``
subprocess: the largest of the two) and whether verify passed. The targets
(:func:`prefixlock.bench.report.verify_targets`) compare the longest length with the
shortest: time per call and peak memory, each at most 1.5 times.

This stage may not start processes itself (``subprocess`` belongs to
:mod:`prefixlock.review.processes`, a later stage): the caller hands in the runner
(:class:`Runner`; the command line passes ``processes.run_measured``).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import UsageError
from ..core.resources import python_module_command
from .scenarios import write_long_scenario

__all__ = ["DEFAULT_LENGTHS", "Finished", "Runner", "measure_verify"]

#: The history lengths measured by default, in calls.
DEFAULT_LENGTHS: tuple[int, ...] = (200, 2000)
#: The shortest length a generated scenario can have.
MIN_LENGTH = 4


class Finished(Protocol):
    """What a :class:`Runner` reports of a finished process."""

    @property
    def returncode(self) -> int: ...
    @property
    def stdout(self) -> bytes: ...
    @property
    def stderr(self) -> bytes: ...
    @property
    def seconds(self) -> float: ...
    @property
    def max_rss_kib(self) -> int | None: ...


#: Runs a command to completion: its exit code, output, wall time and the peak resident
#: memory of its process tree.
Runner = Callable[[Sequence[str]], Finished]


def _verdict(done: Finished) -> tuple[bool, str | None]:
    """verify's own verdict (exit 0 and ``"ok": true`` in its JSON report), and why not."""
    try:
        report = json.loads(done.stdout)
    except ValueError:
        report = None
    if done.returncode == 0 and isinstance(report, dict) and report.get("ok") is True:
        return True, None
    failures = report.get("failures") if isinstance(report, dict) else None
    if isinstance(failures, list) and failures and isinstance(failures[0], dict):
        return False, f"{len(failures)} failure(s), the first: {failures[0].get('message')}"
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return False, lines[-1] if lines else f"exit {done.returncode}"


def measure_verify(
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    *,
    run: Runner,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Time ``prefixlock verify`` on a generated scenario of each length (ascending);
    returns the JSON value under the ``verify`` key of ``bench --json``."""
    calls = sorted(set(lengths))
    if not calls or calls[0] < MIN_LENGTH:
        raise UsageError(f"verify lengths must be at least {MIN_LENGTH} calls")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="prefixlock-verifyscale-") as folder:
        for n in calls:
            path = write_long_scenario(Path(folder), n)
            progress(f"verify: {n} calls")
            done = run([*python_module_command(), "verify", str(path), "--json"])
            ok, why = _verdict(done)
            figures: dict[str, Any] = {
                "calls": n,
                "seconds": round(done.seconds, 3),
                "seconds_per_call": round(done.seconds / n, 6),
                "rss_peak_kib": done.max_rss_kib,
                "ok": ok,
                "exit": done.returncode,
            }
            if why is not None:
                figures["error"] = why
            runs.append(figures)
            path.unlink()
    return {
        "command": "python -m prefixlock verify FILE --json",
        "scenario": "prefixlock.bench.scenarios.write_long_scenario(folder, calls)",
        "calls": calls,
        "runs": runs,
    }
