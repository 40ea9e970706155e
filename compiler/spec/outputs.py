"""Writing a built bundle to disk atomically, and comparing it with what is there.

Re-exported by :mod:`prefixlock.spec.build`. The output folder holds every part of the bundle
plus ``manifest.json``; the lock file ``<root>/prefixlock.lock`` holds the same manifest.
A build swaps a complete new output folder in and replaces the lock file with
:func:`os.replace`, so an interrupted or failed write leaves the earlier outputs intact.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shutil
from pathlib import Path

from ..core import canonical
from ..core.atomic import replace_file, staged_file, staging_dir, swap_in
from ..core.errors import BuildError, CanonicalJSONError
from ..core.files import read_review_file
from .bundle import Bundle

__all__ = [
    "LOCK_FILE",
    "MANIFEST",
    "check_outputs",
    "diff_outputs",
    "locked_digest",
    "read_lock",
    "write_lock",
    "write_outputs",
]

#: The lock file at the spec root: the manifest, pretty-printed.
LOCK_FILE = "prefixlock.lock"
#: The manifest's name under the output folder.
MANIFEST = "manifest.json"


def _outputs(bundle: Bundle) -> dict[str, bytes]:
    """Every file of the output folder: the parts and the manifest."""
    files = {part.name: part.data for part in bundle.parts}
    files[MANIFEST] = bundle.manifest_bytes()
    return files


def _check_out(root: Path, out: Path) -> None:
    """Refuse an output folder whose replacement would destroy specs or foreign files."""
    resolved_root, resolved_out = root.resolve(), out.resolve()
    if resolved_root.is_relative_to(resolved_out):
        raise BuildError(f"output folder {str(out)!r} must not be the spec root or contain it")
    for folder in ("prompt", "rules"):
        if resolved_out.is_relative_to(resolved_root / folder):
            raise BuildError(f"output folder {str(out)!r} must not be inside {folder}/")
    if out.exists():
        if not out.is_dir():
            raise BuildError(f"output folder {str(out)!r} exists and is not a folder")
        if any(out.iterdir()) and not (out / MANIFEST).is_file():
            raise BuildError(
                f"refusing to replace {str(out)!r}: it is not empty and holds no {MANIFEST}"
                " of an earlier build"
            )


def write_outputs(bundle: Bundle, root: Path, out: Path) -> None:
    """Write the parts and the manifest to ``out`` and the lock file to ``root``.

    The output folder is written complete into a temporary folder next to ``out``, and
    the lock file into a temporary file next to it; then the folder is swapped in and
    the lock renamed over the old one (if that rename fails, the old folder goes back).
    A failure leaves the earlier outputs and lock in place, never one without the other.
    """
    root, out = Path(root), Path(out)
    _check_out(root, out)
    lock_path = root / LOCK_FILE
    if lock_path.is_dir():
        raise BuildError(f"{str(lock_path)!r} is a folder, not a lock file: remove it")
    try:
        lock = staged_file(lock_path, bundle.manifest_bytes())
    except OSError as err:
        raise BuildError(f"cannot write {str(lock_path)!r}: {err.strerror or err}") from None
    staging: Path | None = None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = staging_dir(out.parent, f".{out.name}.new-")
        for name, data in sorted(_outputs(bundle).items()):
            _write_file(staging / name, data)
        swap_in(staging, out, then=lambda: os.replace(lock, lock_path))
    except BaseException:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        lock.unlink(missing_ok=True)
        raise


def write_lock(bundle: Bundle, root: Path) -> None:
    """Replace ``<root>/prefixlock.lock`` atomically (temporary file, then rename)."""
    replace_file(Path(root) / LOCK_FILE, bundle.manifest_bytes())


def read_lock(root: Path) -> bytes | None:
    """The bytes of ``<root>/prefixlock.lock``, None if there is none. Read as the review
    tools read a repository file (:func:`prefixlock.core.files.read_review_file`): a lock
    committed as a symbolic link out of the repository (to a credentials file, whose
    text a stale lock's message or ``build --check --diff`` would print), a FIFO or a
    file over the limit is an :class:`~prefixlock.core.errors.InputError`."""
    path = Path(root) / LOCK_FILE
    if not os.path.lexists(path):
        return None
    return read_review_file(path)


def locked_digest(root: Path) -> str | None:
    """The bundle digest ``<root>/prefixlock.lock`` records; None without a lock or with
    one that is no JSON object (``build --check`` says why); see :func:`read_lock`."""
    data = read_lock(root)
    try:
        lock = canonical.loads(data) if data is not None else None
    except (ValueError, CanonicalJSONError):
        return None
    digest = lock.get("digest") if isinstance(lock, dict) else None
    return digest if isinstance(digest, str) else None


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _lock_changes(lock: bytes, bundle: Bundle) -> str:
    """Which parts a stale lock file disagrees on, e.g. ``tools.json changed``."""
    try:
        old = canonical.loads(lock)
        old_parts = {p["name"]: p["sha256"] for p in old["parts"]}
    except (ValueError, TypeError, KeyError, CanonicalJSONError):
        return "it is not a lock file prefixlock can read"
    new_parts = {p.name: p.sha256 for p in bundle.parts}
    changes = []
    for name in sorted(old_parts.keys() | new_parts.keys()):
        if name not in old_parts:
            changes.append(f"{name} added")
        elif name not in new_parts:
            changes.append(f"{name} removed")
        elif old_parts[name] != new_parts[name]:
            changes.append(f"{name} changed")
    if b"\r\n" in lock:
        # A checkout with core.autocrlf: the content may be right, the bytes are not.
        endings = "its line endings: CRLF (\\r\\n) where prefixlock writes LF"
        if lock.replace(b"\r\n", b"\n") == bundle.manifest_bytes():
            return f"{endings} (git core.autocrlf? .gitattributes `eol=lf` prevents it)"
        changes.append(endings)
    return ", ".join(changes) or "its layout (re-run prefixlock build)"


def check_outputs(bundle: Bundle, root: Path, out: Path | None) -> list[str]:
    """What differs from ``bundle`` on disk, one line per problem, sorted; empty if none.

    The lock file ``<root>/prefixlock.lock`` is always compared; the output folder only
    if ``out`` is given. Lines name the file: ``prefixlock.lock differs``,
    ``tools.json is missing``, ``templates/x.md.j2 is not part of the bundle``,
    ``build/ is missing``.
    """
    problems: list[str] = []
    lock = read_lock(root)
    if lock is None:
        problems.append(f"{LOCK_FILE} is missing")
    elif lock != bundle.manifest_bytes():
        problems.append(f"{LOCK_FILE} differs: {_lock_changes(lock, bundle)}")
    if out is None:
        return problems
    out = Path(out)
    if not out.is_dir():
        problems.append(f"{out.name}/ is missing")
        return problems
    expected = _outputs(bundle)
    present = {
        path.relative_to(out).as_posix()
        for path in sorted(out.rglob("*"))
        if path.is_file() or path.is_symlink()
    }
    for name in sorted(expected.keys() | present):
        if name not in present:
            problems.append(f"{name} is missing")
        elif name not in expected:
            problems.append(f"{name} is not part of the bundle")
        elif read_review_file(out / name) != expected[name]:
            problems.append(f"{name} differs")
    return problems


def _readable(name: str, data: bytes | None) -> list[str]:
    """A file's lines for a diff: JSON parts pretty-printed (a part is one long line),
    other text as it is; an absent file has none."""
    if data is None:
        return []
    if name.endswith(".json"):
        with contextlib.suppress(ValueError, CanonicalJSONError):  # else shown as it is
            data = canonical.dumps_pretty(canonical.loads(data)).encode("utf-8")
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def _unified(name: str, old: bytes | None, new: bytes | None, shown: str) -> list[str]:
    lines = difflib.unified_diff(
        _readable(name, old),
        _readable(name, new),
        fromfile=shown if old is not None else "/dev/null",
        tofile=shown if new is not None else "/dev/null",
    )
    # a last line without a newline still ends its diff line
    return [line if line.endswith("\n") else line + "\n" for line in lines]


def diff_outputs(bundle: Bundle, root: Path, out: Path | None) -> str:
    """What a build would change, as a unified diff (empty if nothing): the lock file,
    then each part that differs in the output folder (``out``, else ``<root>/build``
    when it holds an earlier build; its manifest is the lock's twin, not repeated),
    JSON parts pretty-printed."""
    root = Path(root)
    chunks: list[str] = []
    lock = root / LOCK_FILE
    old_lock = read_lock(root)
    if old_lock != bundle.manifest_bytes():
        chunks += _unified(LOCK_FILE, old_lock, bundle.manifest_bytes(), str(lock))
    folder = Path(out) if out is not None else root / "build"
    if not (folder / MANIFEST).is_file():
        return "".join(chunks)
    expected = _outputs(bundle)
    present = {
        path.relative_to(folder).as_posix()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }
    for name in sorted((expected.keys() | present) - {MANIFEST}):  # the manifest: the lock
        old = read_review_file(folder / name) if name in present else None
        new = expected.get(name)
        if old != new:
            chunks += _unified(name, old, new, str(folder / name))
    return "".join(chunks)
