"""A spec root built as ``prefixlock build`` builds it, for the review commands.

``build`` compiles the specs, then renders a representative sample turn through every
template (:func:`~prefixlock.runtime.context.check_templates`), so a misspelled variable
in a branch no scenario reaches fails the build. A review command that judges a spec
root (``diff``, ``verify``, ``check``) runs the same two steps first and stops with the
same errors: a spec that ``build`` rejects never passes a review.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..core.errors import SpecError, SpecErrors
from ..runtime.context import check_templates
from ..spec.build import LOCK_FILE, build_bundle, locked_digest
from ..spec.bundle import Bundle

__all__ = [
    "UPDATE",
    "build_checked",
    "check_bundles",
    "has_specs",
    "shown",
    "stale_lock",
    "stale_locks",
]


def build_checked(root: Path | str) -> Bundle:
    """The bundle of ``root`` as ``prefixlock build`` makes it; raises
    :class:`SpecErrors` with every build and template error at once."""
    bundle = build_bundle(root)
    rendered = check_templates(bundle)
    if rendered:
        raise SpecErrors(rendered)
    return bundle


def has_specs(root: Path) -> bool:
    """Whether ``root`` holds a spec root (``prompt/``, ``rules/`` or a lock), as opposed
    to a folder of bodies with no specs beside them."""
    return (root / "prompt").is_dir() or (root / "rules").is_dir() or (root / LOCK_FILE).is_file()


def check_bundles(bundles: Iterable[Bundle]) -> None:
    """The build's template check on each bundle once (scenarios share one): a template
    error that ``prefixlock build`` rejects fails a review too, with the same message,
    even in a branch no scenario reaches. Raises :class:`SpecErrors` with every error."""
    found: list[SpecError] = []
    seen: set[str] = set()
    for bundle in bundles:
        if bundle.digest not in seen:
            seen.add(bundle.digest)
            found += check_templates(bundle)
    if found:
        raise SpecErrors(found)


#: What a stale lock (or stale golden files) asks for: one command rebuilds the lock and
#: rewrites the golden files.
UPDATE = "`prefixlock update`"


def shown(path: Path) -> str:
    """``path`` relative to the current folder when it lies below it, else as it is."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def stale_lock(root: Path, built: str) -> str | None:
    """Why ``root``'s lock is stale against ``built`` (the digest its specs build), or
    None: the lock records it, or there is no readable lock (``build --check`` says so)."""
    lock = locked_digest(root)
    if lock is None or lock == built:
        return None
    return (
        f"{shown(Path(root) / LOCK_FILE)} is stale: it records bundle {lock}, the specs build"
        f" {built}; run {UPDATE}"
    )


def stale_locks(roots: Iterable[tuple[Path, Bundle]]) -> list[str]:
    """:func:`stale_lock` of each spec root once, in the order given."""
    found: list[str] = []
    seen: set[Path] = set()
    for root, bundle in roots:
        if root in seen:
            continue
        seen.add(root)
        problem = stale_lock(root, bundle.digest)
        if problem is not None:
            found.append(problem)
    return found
