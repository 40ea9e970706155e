"""OLD and NEW of ``prefixlock diff``, resolved, and the request bodies found on them.

A side is a body file, a golden-style folder of bodies (``<case>/<provider>/0001.json``
... anywhere below it, as ``prefixlock replay --out`` and the golden suite write them),
a git revision (``main``, ``HEAD~1``, ``origin/main``, a sha: the ``--golden`` folder as
of that commit, read by :mod:`~prefixlock.review.diff.revisions` without a checkout) or
``WORKTREE`` / ``.`` (that folder in the working tree). An existing path wins over a revision.

:func:`resolve_side` turns what was typed into a :class:`Side`; :func:`call_sets` lists
the call files of every ``<case>/<provider>`` folder below one, :func:`read_body` reads
one.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import attrs

from ...core.errors import InputError, UsageError
from ...core.files import read_review_file
from ...spec.build import LOCK_FILE, locked_digest
from ..compare import PROVIDERS
from ..golden import CALLS_MD, stale_bundle
from ..render import recorded_bundle
from ..scenario import scenario_bundle_root
from . import revisions

__all__ = [
    "GOLDEN",
    "WORKTREE",
    "Side",
    "call_sets",
    "read_body",
    "resolve_side",
    "stale_golden",
]

#: The special OLD / NEW values that name the ``--golden`` folder of the working tree.
WORKTREE = "WORKTREE"
WORKTREE_NAMES = (WORKTREE, ".")

#: Default ``--golden``: the golden suite's folder, relative to the repository root.
GOLDEN = "golden"

_CALL_FILE = re.compile(r"\d{4}\.json")


@attrs.frozen
class Side:
    """One side of a diff, resolved."""

    given: str  # as typed: a path, a revision, WORKTREE or "."
    kind: str  # "file" | "folder" | "revision" | "worktree"
    path: Path  # the body file, or the folder of bodies (may not exist)
    root: Path  # the spec root: explains a break as file:line, names Gemini's model
    golden: str = GOLDEN  # the folder inside the repository (revision / worktree)
    commit: str | None = None
    #: the folder a revision was extracted to; paths inside show as ``REV:path``
    extracted: Path | None = None

    @property
    def is_folder(self) -> bool:
        return self.kind != "file"

    @property
    def label(self) -> str:
        if self.kind == "revision":
            assert self.commit is not None
            return f"{self.golden}/ at {self.given} ({self.commit[:12]})"
        if self.kind == "worktree":
            return f"{self.golden}/ in the working tree"
        return str(self.path)

    def show(self, text: str) -> str:
        """``text`` with paths inside the extracted revision shown as ``REV:path``."""
        if self.extracted is None:
            return text
        for prefix in {str(self.extracted), os.path.relpath(self.extracted)}:
            text = text.replace(prefix + os.sep, f"{self.given}:")
        return text

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"given": self.given, "kind": self.kind}
        if self.kind in ("revision", "worktree"):
            out["golden"] = self.golden
        else:
            out["path"] = str(self.path)
        if self.commit is not None:
            out["commit"] = self.commit
        return out


def _golden_path(golden: str) -> str:
    """``--golden`` as a clean path relative to the repository root."""
    pure = PurePosixPath(golden.replace(os.sep, "/"))
    if pure.is_absolute() or ".." in pure.parts or not pure.parts or pure == PurePosixPath("."):
        raise UsageError(f"--golden {golden!r}: give a folder relative to the repository root")
    return pure.as_posix()


def resolve_side(
    given: str, which: str, *, golden: str, root: Path, scratch: contextlib.ExitStack
) -> Side:
    """Resolve OLD or NEW (``which``): ``WORKTREE``/``.``, an existing path, else a git
    revision, extracted into a temporary folder that ``scratch`` removes."""
    if given in WORKTREE_NAMES:
        top = revisions.toplevel()
        if top is not None:
            golden = _golden_path(golden)
            return Side(given, "worktree", top / golden, root, golden)
        if given == WORKTREE:
            raise InputError(f"{which} {WORKTREE}: not in a git repository")
    path = Path(given)
    if path.exists():
        return Side(given, "folder" if path.is_dir() else "file", path, root)
    top = revisions.toplevel()
    if top is None:
        raise InputError(
            f"cannot read {which} {given!r}: no such file or folder (and not in a git"
            " repository, so not a revision either)"
        )
    commit = revisions.resolve(given, top)
    if commit is None:
        raise InputError(
            f"cannot read {which} {given!r}: no such file or folder, nor a git revision"
        )
    golden = _golden_path(golden)
    folder = Path(scratch.enter_context(tempfile.TemporaryDirectory(prefix="prefixlock-diff-")))
    spec = revisions.relative_to_repo(root, top)
    revisions.extract(top, commit, [golden, *_spec_parts([spec] if spec else [])], folder)
    named = sorted(_named_bundles(folder, folder / golden) - {spec})
    if named:  # the bundles the revision's cases name: their specs and lock, as of then
        revisions.extract(top, commit, _spec_parts(named), folder)
    spec_root = folder / spec if spec is not None else root
    return Side(given, "revision", folder / golden, spec_root, golden, commit, folder)


def _spec_parts(roots: Sequence[str]) -> list[str]:
    """The paths of each spec root's ``prompt/``, ``rules/`` and lock (roots relative to
    the repository, posix; ``.`` its top)."""
    kept = ("prompt", "rules", LOCK_FILE)
    return [f"{root}/{name}" if root != "." else name for root in roots for name in kept]


def _named_bundles(folder: Path, golden: Path) -> set[str]:
    """The folders (relative to ``folder``, posix) of the bundles that the scenarios
    extracted below ``golden`` name with ``bundle:`` and that lie inside ``folder``."""
    top = folder.resolve()
    found: set[str] = set()
    for scenario in sorted(golden.rglob("scenario.yaml")) if golden.is_dir() else ():
        named = scenario_bundle_root(scenario)
        if named is None:
            continue
        try:
            found.add(named.relative_to(top).as_posix())
        except ValueError:  # outside the repository (or the bundled example): as it is
            continue
    return found


# --- bodies on disk ---------------------------------------------------------------------


def call_sets(root: Path) -> dict[str, dict[int, Path]]:
    """``{"<case>/<provider>": {call number: file}}`` for every provider folder below."""
    found: dict[str, dict[int, Path]] = {}
    if not root.is_dir():
        return found
    for folder in sorted(p for p in [root, *root.rglob("*")] if p.is_dir()):
        if folder.name not in PROVIDERS:
            continue
        calls = {int(f.stem): f for f in folder.iterdir() if _CALL_FILE.fullmatch(f.name)}
        if calls:
            relative = folder.relative_to(root).as_posix()
            found[folder.name if relative == "." else relative] = dict(sorted(calls.items()))
    return found


def stale_golden(side: Side, built: str | None) -> list[str]:
    """For a revision or the working tree: each case whose ``calls.md`` records another
    bundle than its specs build (``built``; None: the lock's), as
    ``REV: golden/<case> was built from bundle A, the lock is B; run ...``."""
    if side.kind not in ("revision", "worktree") or not side.path.is_dir():
        return []
    lock = locked_digest(side.root)
    own = side.root.resolve()
    where = f"{side.given}: " if side.kind == "revision" else ""
    found = []
    for page in sorted(side.path.rglob(CALLS_MD)):
        case = page.parent.relative_to(side.path).as_posix()
        label = side.golden if case == "." else f"{side.golden}/{case}"
        # as golden --check judges it: by the lock of the bundle the case's scenario names
        scenario = page.parent / "scenario.yaml"
        root = scenario_bundle_root(scenario) if scenario.is_file() else None
        if root is None or root == own:
            case_lock, case_built = lock, built
        else:
            case_lock, case_built = locked_digest(root), None
        stale = stale_bundle(label, recorded_bundle(read_body(page)), case_lock, case_built)
        if stale is not None:
            found.append(where + stale)
    return found


def read_body(path: Path) -> bytes:
    """The bytes of ``path``; a :class:`PrefixlockError` if it cannot be read, or is not
    a regular file inside its repository within the size limit (:mod:`..files`)."""
    return read_review_file(path)
