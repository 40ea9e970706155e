"""``prefixlock verify`` at growing lengths: its cost per call must not grow with the
conversation (issue 15, item 3).

:func:`measure_verify` writes a generated scenario of each length
(:func:`~prefixlock.bench.scenarios.write_long_scenario`) into a temporary folder and
runs ``python -m prefixlock verify FILE --json`` on it in a process of its own: all five
providers, the replay with restarts and the hash-seed replay in a subprocess (the
defaults). Per length it reports the calls, the wall time (the best of two runs), the
time per call, the marginal time per call (past a 4-call baseline run's: see
:func:`measure_verify`), the peak resident memory of the process tree (the verify process
and its ``prefixlock replay`` subprocess: the largest of the two) and whether verify
passed. The targets (:func:`prefixlock.bench.report.verify_targets`) compare the longest
length with the shortest: marginal time per call and peak memory, each at most 1.5
times.

This stage may not start processes itself (``subprocess`` belongs to
:mod:`prefixlock.review.processes`, a later stage): the caller hands in the runner
(:class:`Runner`; the command line passes ``processes.run_measured``).
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import UsageError
from ..core.resources import python_module_command
from .scenarios import write_long_scenario

__all__ = [
    "BASELINE",
    "DEFAULT_LENGTHS",
    "MAX_REPEATS",
    "REPEATS",
    "Finished",
    "Runner",
    "measure_verify",
    "repeats_for",
]

#: The history lengths measured by default, in calls.
DEFAULT_LENGTHS: tuple[int, ...] = (200, 2000)
#: The shortest length a generated scenario can have.
MIN_LENGTH = 4
#: The length of the baseline run whose time every length's marginal time leaves out.
BASELINE = MIN_LENGTH
#: Runs of the longest length; the best time counts. A shorter run is repeated more
#: (:func:`repeats_for`), up to :data:`MAX_REPEATS` times.
REPEATS = 2
#: The most runs of one length.
MAX_REPEATS = 6


def repeats_for(
    n: int, longest: int, repeats: int = REPEATS, max_repeats: int = MAX_REPEATS
) -> int:
    """Runs of an ``n``-call length when the longest is ``longest`` calls: ``repeats``
    times as many as the longest is longer, at most ``max_repeats`` (never fewer than
    ``repeats``). The targets divide the longest length's time past the baseline by the
    shortest's, a second or two past a baseline of about two: one slow start of
    either moved the ratio by half (0.75 in one run, 1.60 in the next, the same code).
    Short runs are cheap, so they get more tries at a quiet machine."""
    return max(repeats, min(max_repeats, math.ceil(repeats * longest / n)))


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


def _timed(
    folder: Path, n: int, run: Runner, repeats: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    """verify on a generated scenario of ``n`` calls, ``repeats`` times (fewer if it
    fails: a failing verify is not timed again): the best wall time, the largest peak."""
    path = write_long_scenario(folder, n)
    finished: list[Finished] = []
    why: str | None = None
    for repeat in range(repeats):
        progress(f"verify: {n} calls" + (f" ({repeat + 1} of {repeats})" if repeats > 1 else ""))
        done = run([*python_module_command(), "verify", str(path), "--json"])
        finished.append(done)
        ok, why = _verdict(done)
        if not ok:
            break
    path.unlink()
    peaks = [d.max_rss_kib for d in finished if d.max_rss_kib is not None]
    figures: dict[str, Any] = {
        "calls": n,
        "seconds": round(min(d.seconds for d in finished), 3),
        "repeats": [round(d.seconds, 3) for d in finished],
        "rss_peak_kib": max(peaks) if peaks else None,
        "ok": why is None,
        "exit": next((d.returncode for d in finished if d.returncode), 0),
    }
    if why is not None:
        figures["error"] = why
    return figures


def measure_verify(
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    *,
    run: Runner,
    repeats: int = REPEATS,
    max_repeats: int = MAX_REPEATS,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """Time ``prefixlock verify`` on a generated scenario of each length (ascending),
    after a :data:`BASELINE`-call one; returns the JSON value under the ``verify`` key of
    ``bench --json``.

    A run's wall time holds what no length changes: two interpreter starts, the imports,
    the bundle's build. Spread over 10 times fewer calls, it made the short length's
    time per call look dearer and the ratio of the two look flat. So each length's
    ``marginal_seconds_per_call`` is its time past the baseline's, per call past the
    baseline's (``seconds_per_call`` stays: the whole time per call), and the targets
    compare those. Each is the best of its runs (a busy machine only slows one down:
    ``repeats`` runs of the longest length, more of the shorter ones and the baseline,
    :func:`repeats_for`); its peak memory the largest."""
    calls = sorted(set(lengths))
    if not calls or calls[0] <= BASELINE:
        raise UsageError(
            f"verify lengths must be more than {BASELINE} calls (a {BASELINE}-call run is"
            " the baseline)"
        )
    if repeats < 1:
        raise UsageError(f"verify repeats must be at least 1, not {repeats}")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="prefixlock-verifyscale-") as folder:
        longest = calls[-1]
        base = _timed(
            Path(folder),
            BASELINE,
            run,
            repeats_for(BASELINE, longest, repeats, max_repeats),
            progress,
        )
        for n in calls:
            figures = _timed(
                Path(folder), n, run, repeats_for(n, longest, repeats, max_repeats), progress
            )
            figures["seconds_per_call"] = round(figures["seconds"] / n, 6)
            past = (figures["seconds"] - base["seconds"]) / (n - BASELINE)
            figures["marginal_seconds_per_call"] = round(past, 6)
            runs.append(figures)
    return {
        "command": "python -m prefixlock verify FILE --json",
        "scenario": "prefixlock.bench.scenarios.write_long_scenario(folder, calls)",
        "calls": calls,
        "baseline": base,
        "repeats": repeats,
        "runs": runs,
    }
