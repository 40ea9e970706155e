"""``prefixlock check`` and ``prefixlock update``: the review gate in one command each.

:func:`check_project` is what CI runs: the specs build (as ``prefixlock build`` builds
them, or nothing else runs), then three steps, each run even when an earlier one found
something: ``build --check`` (the lock records the bundle the specs build),
``golden --check`` (every golden file matches a fresh replay) and ``verify`` (every
invariant of every golden scenario). Each step is a :class:`Step` with its status, a
one-line summary and its findings; the worst status decides the exit code.

:func:`update_project` is what an author runs after an edit: it builds, rewrites the
golden files that differ, then the build folder and the lock, and reports what changed
(:class:`UpdateReport`). Every case is replayed before anything is written, so a spec
or scenario error writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from ..core import canonical
from ..core.errors import CanonicalJSONError, PrefixlockError, SpecErrors
from ..spec.build import LOCK_FILE, MANIFEST, check_outputs, locked_digest, write_outputs
from ..spec.bundle import Bundle
from ..spec.outputs import read_lock
from .built import build_checked, shown, stale_lock
from .golden import GoldenReport, check_golden, update_golden
from .scenario import golden_scenarios
from .tables import align
from .verify import verify

__all__ = [
    "BAD_INPUT",
    "FINDING",
    "OK",
    "SKIPPED",
    "CheckReport",
    "Step",
    "UpdateReport",
    "check_project",
    "update_project",
]

#: A step's status, best first (the CLI maps them to exit codes 0, 0, 1, 2).
OK = "ok"
SKIPPED = "skipped"
FINDING = "finding"
BAD_INPUT = "bad input"
_RANK = {OK: 0, SKIPPED: 0, FINDING: 1, BAD_INPUT: 2}


@attrs.frozen
class Step:
    """One step of :func:`check_project`: the command it stands for, its status, one
    line of summary, and its findings (each may span lines) or input errors."""

    command: str
    status: str
    summary: str
    findings: tuple[str, ...] = ()


@attrs.frozen
class CheckReport:
    """The steps of :func:`check_project`, in order."""

    digest: str  # the bundle the specs build
    steps: tuple[Step, ...]

    @property
    def status(self) -> str:
        """The worst status of any step."""
        return max((step.status for step in self.steps), key=_RANK.__getitem__, default=OK)

    @property
    def rank(self) -> int:
        """0 ok, 1 a finding, 2 bad input: the exit code the status stands for."""
        return _RANK[self.status]

    def table(self) -> list[str]:
        """One line per step: the command, its status and its summary."""
        rows = [("step", "result", "summary")]
        rows += [(f"prefixlock {s.command}", s.status, s.summary) for s in self.steps]
        return align(rows, left=3)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _errors(error: PrefixlockError) -> tuple[str, ...]:
    if isinstance(error, SpecErrors):
        return tuple(str(problem) for problem in error.errors)
    return (str(error),)


def _guarded(command: str, run: Callable[[], Step]) -> Step:
    """``run``'s step; bad input (a scenario that does not load, ...) is the step's
    status, so the other steps still run and report."""
    try:
        return run()
    except PrefixlockError as error:
        found = _errors(error)
        return Step(command, BAD_INPUT, f"{_plural(len(found), 'error')} in the input", found)


def _lock_step(bundle: Bundle, root: Path) -> Step:
    command = "build --check"
    problems = check_outputs(bundle, root, None)
    if not problems:
        return Step(command, OK, f"{LOCK_FILE} records the bundle the specs build")
    stale = stale_lock(root, bundle.digest)
    return Step(
        command, FINDING, f"{LOCK_FILE} is out of date", (stale,) if stale else (*problems,)
    )


def _golden_step(root: Path, full: bool) -> Step:
    # the lock's own staleness is the build step's finding; not repeated here
    report = check_golden(root=root, full=full)
    findings = (*report.bundles, *report.problems, *report.strays)
    cases = _plural(len(report.cases), "case")
    if not findings:
        return Step("golden --check", OK, f"{cases}: every golden file matches a fresh replay")
    parts = [f"{_plural(len(report.problems), 'stale golden file')}"]
    parts += [f"{len(report.bundles)} built from another bundle"] if report.bundles else []
    parts += [f"{_plural(len(report.strays), 'path')} in no case"] if report.strays else []
    return Step("golden --check", FINDING, f"{cases}: {', '.join(parts)}", findings)


def _verify_step(files: Sequence[Path], hash_seed: bool) -> Step:
    report = verify(files, hash_seed=hash_seed)
    cases = len({row.file for row in report.rows})
    names = len({row.provider for row in report.rows})
    size = f"{_plural(cases, 'scenario')} x {_plural(names, 'provider')}"
    if not report.failures:
        return Step("verify", OK, f"{size}: every invariant holds")
    findings = tuple("\n".join(failure.lines()) for failure in report.failures)
    return Step(
        "verify", FINDING, f"{size}: {_plural(len(findings), 'invariant failure')}", findings
    )


def check_project(
    root: Path = Path("."), *, hash_seed: bool = True, full: bool = False
) -> CheckReport:
    """Run the gate on the spec root ``root`` and its ``golden/`` cases.

    Raises :class:`SpecErrors` when the specs do not build (nothing else can be judged);
    any other bad input is the status of the step that met it.
    """
    bundle = build_checked(root)
    steps = [_guarded("build --check", lambda: _lock_step(bundle, root))]
    files = golden_scenarios(root)
    if not files:
        why = f"no {shown(root / 'golden')}/*/scenario.yaml"
        steps += [Step("golden --check", SKIPPED, why), Step("verify", SKIPPED, why)]
    else:
        steps.append(_guarded("golden --check", lambda: _golden_step(root, full)))
        steps.append(_guarded("verify", lambda: _verify_step(files, hash_seed)))
    return CheckReport(bundle.digest, tuple(steps))


@attrs.frozen
class UpdateReport:
    """What :func:`update_project` changed."""

    root: Path
    out: Path  # the build folder written
    old_digest: str | None  # the bundle the lock recorded (None: no readable lock)
    digest: str  # the bundle the specs build, now in the lock
    #: bundle parts whose bytes changed against the old lock (added and removed too)
    parts: tuple[str, ...]
    golden: GoldenReport | None  # None: no golden cases

    @property
    def changed(self) -> bool:
        return self.old_digest != self.digest or bool(self.golden and self.golden.updated)

    def lines(self) -> list[str]:
        """What changed, for a person: the lock, the build folder, each updated case."""
        lock = shown(self.root / LOCK_FILE)
        if self.old_digest == self.digest:
            lines = [f"{lock}: up to date (bundle {self.digest})"]
        else:
            was = self.old_digest if self.old_digest is not None else "none"
            lines = [f"{lock}: bundle {was} -> {self.digest}"]
            if self.parts:
                lines.append(f"  changed parts: {', '.join(self.parts)}")
        lines.append(f"wrote {shown(self.out)}/ (the parts and {MANIFEST})")
        golden = self.golden
        if golden is None:
            lines.append("no golden cases")
            return lines
        for path in golden.removed:
            lines.append(f"removed {path} (left over from an interrupted golden update)")
        for folder, files in zip(golden.updated, golden.changed, strict=True):
            lines.append(f"updated {shown(Path(folder))}/: {_files(files)}")
        lines.append(f"{_plural(len(golden.cases), 'golden case')}, {len(golden.updated)} updated")
        return lines


def _files(files: Sequence[str]) -> str:
    """``anthropic 0001-0003, gemini 0002, calls.md``: per provider folder, its changed
    calls as runs of numbers."""
    folders: dict[str, list[str]] = {}
    loose = []
    for file in files:
        folder, _, name = file.rpartition("/")
        if folder:
            folders.setdefault(folder, []).append(name.removesuffix(".json"))
        else:
            loose.append(file)
    return ", ".join([*(f"{k} {_runs(v)}" for k, v in folders.items()), *loose])


def _runs(names: Sequence[str]) -> str:
    """``0001-0003 0005``: runs of consecutive call numbers (other names as they are)."""
    runs: list[list[str]] = []
    for name in names:
        last = runs[-1][-1] if runs else None
        if last is not None and last.isdigit() and name.isdigit() and int(name) == int(last) + 1:
            runs[-1].append(name)
        else:
            runs.append([name])
    return " ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def _locked_parts(root: Path) -> dict[str, str] | None:
    """Part name -> sha256 as the lock records them; None without a readable lock."""
    data = read_lock(root)  # a lock linked out of the repository: an InputError
    try:
        lock = canonical.loads(data) if data is not None else None
    except (ValueError, CanonicalJSONError):
        return None
    parts = lock.get("parts") if isinstance(lock, dict) else None
    if not isinstance(parts, list):
        return None
    return {
        str(part.get("name")): str(part.get("sha256")) for part in parts if isinstance(part, dict)
    }


def update_project(root: Path = Path("."), *, out: Path | None = None) -> UpdateReport:
    """Build ``root``, rewrite its golden files that differ, then write the build folder
    (``out``, default ``root/build``) and the lock.

    Raises :class:`SpecErrors` when the specs do not build, and any error of a golden
    case, before anything is written.
    """
    bundle = build_checked(root)
    old_digest = locked_digest(root)
    before = _locked_parts(root) or {}
    after = {part.name: part.sha256 for part in bundle.parts}
    parts = tuple(sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n)))
    golden = update_golden(root=root) if golden_scenarios(root) else None
    folder = out if out is not None else root / "build"
    write_outputs(bundle, root, folder)
    return UpdateReport(root, folder, old_digest, bundle.digest, parts, golden)
