"""Read folders of a git revision without a checkout (for ``prefixlock diff REV ...``).

:func:`resolve` turns what ``git rev-parse --verify REV^{commit}`` accepts (``main``,
``HEAD~1``, ``origin/main``, a sha) into a commit; :func:`extract` writes the files
below some paths of that commit into a folder, from one ``git ls-tree -r -z`` and one
``git cat-file --batch`` process: no checkout, no worktree, the index untouched.

Only ``git`` itself is run, always with ``-C <repository>``; every failure is a
:class:`GitError` with git's own message.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import IO

from ...core.errors import GitError
from ...core.files import MAX_REVIEW_FILE
from .. import processes

__all__ = ["GitError", "extract", "relative_to_repo", "resolve", "toplevel"]

#: Tree entry modes written as files (regular and executable); symlinks (120000) and
#: submodules (160000) are skipped.
_FILE_MODES = frozenset({"100644", "100755"})


def _git(repo: Path | None, *args: str, stdin: bytes | None = None) -> bytes:
    command = ["git", *(("-C", str(repo)) if repo is not None else ()), *args]
    try:
        done = processes.run(command, stdin=stdin)
    except OSError as err:
        raise GitError(f"cannot run git: {err.strerror or err}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise GitError(f"git {args[0]}: {message}")
    return done.stdout


def toplevel(cwd: Path | None = None) -> Path | None:
    """The root of the working tree that holds ``cwd`` (default: the current folder),
    or None outside a git repository (or without git)."""
    try:
        out = _git(cwd, "rev-parse", "--show-toplevel")
    except GitError:
        return None
    text = out.decode("utf-8", "surrogateescape").rstrip("\n")
    return Path(text) if text else None


def resolve(revision: str, repo: Path) -> str | None:
    """The commit sha that ``revision`` names in ``repo``, or None if it names none."""
    if not revision or revision.startswith("-") or "\0" in revision:
        return None  # never let a revision be read as an option
    try:
        out = _git(repo, "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}")
    except GitError:
        return None
    sha = out.decode("ascii", "replace").strip()
    return sha or None


def _entries(repo: Path, commit: str, paths: Sequence[str]) -> list[tuple[str, str]]:
    """``(object id, path)`` of every regular file below ``paths`` at ``commit``."""
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", commit, "--", *paths)
    found: list[tuple[str, str]] = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, name = entry.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split(" ")
        if kind == "blob" and mode in _FILE_MODES:
            found.append((oid, name.decode("utf-8", "surrogateescape")))
    return found


def _feed(stream: IO[bytes] | None, data: bytes) -> None:
    assert stream is not None
    with contextlib.suppress(BrokenPipeError):  # git died: its exit status tells why
        try:
            stream.write(data)
        finally:
            stream.close()


def _safe_target(dest: Path, name: str) -> Path:
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise GitError(f"refusing the tree path {name!r}")
    return dest.joinpath(*parts)


def extract(repo: Path, commit: str, paths: Sequence[str], dest: Path) -> int:
    """Write every regular file below ``paths`` (relative to ``repo``'s root) at
    ``commit`` to ``dest/<path>``; returns how many files were written.

    A path absent at ``commit`` contributes nothing. The blobs come from one
    ``git cat-file --batch`` process (fed by a thread, read as they stream).
    """
    entries = _entries(repo, commit, paths)
    if not entries:
        return 0
    targets: dict[str, list[Path]] = {}
    for oid, name in entries:
        targets.setdefault(oid, []).append(_safe_target(dest, name))
    command = ["git", "-C", str(repo), "cat-file", "--batch"]
    try:
        process = processes.start_pipe(command)
    except OSError as err:
        raise GitError(f"cannot run git: {err.strerror or err}") from None
    request = "".join(f"{oid}\n" for oid in targets).encode("ascii")
    feeder = threading.Thread(target=_feed, args=(process.stdin, request), daemon=True)
    feeder.start()
    written = 0
    failed = True
    try:
        assert process.stdout is not None
        for _ in range(len(targets)):
            header = process.stdout.readline().decode("ascii", "replace").split()
            if len(header) != 3 or header[0] not in targets or header[1] != "blob":
                raise GitError(f"git cat-file: unexpected answer {' '.join(header)!r}")
            size = int(header[2])
            if size > MAX_REVIEW_FILE:  # a committed blob is bounded as a file on disk is
                name = targets[header[0]][0].relative_to(dest).as_posix()
                raise GitError(
                    f"{commit}:{name}: refused: {size} bytes, over the limit of "
                    f"{MAX_REVIEW_FILE} bytes for a review file"
                )
            data = process.stdout.read(size)
            if len(data) != size or process.stdout.read(1) != b"\n":
                raise GitError(f"git cat-file: object {header[0]} was cut short")
            for target in targets[header[0]]:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
                written += 1
        failed = False
    finally:
        if failed:  # stop git first: a blocked writer would never finish
            process.kill()
        feeder.join()
        if process.stdout is not None:
            process.stdout.close()
        stderr = process.stderr.read() if process.stderr is not None else b""
        if process.stderr is not None:
            process.stderr.close()
        code = process.wait()
    if code != 0:
        message = stderr.decode("utf-8", "replace").strip() or f"exit {code}"
        raise GitError(f"git cat-file: {message}")
    return written


def relative_to_repo(path: Path, repo: Path) -> str | None:
    """``path`` relative to ``repo``'s root as a posix string ("." for the root), or
    None if it lies outside."""
    try:
        relative = Path(os.path.realpath(path)).relative_to(os.path.realpath(repo))
    except ValueError:
        return None
    return relative.as_posix()
