"""Every file the review tools read or write in a repository: inside it, regular, bounded
(and the files of a spec tree: regular, bounded, see :mod:`prefixlock.spec.loader`).

``golden --check`` used to print a golden file that a pull request had committed as a
symbolic link to ``/proc/self/environ`` (the CI job's whole environment, tokens
included), and ``diff`` read a link to ``/dev/zero`` without bound (issue 43). The
review tools read repository files only through :func:`read_review_file`, which refuses,
with an :class:`~prefixlock.core.errors.InputError` naming the path and never its
content:

* a path that resolves outside the repository (:func:`repository_root`), through a
  symbolic link anywhere on the way;
* anything but a regular file (a device, a FIFO, a folder);
* a file over :data:`MAX_REVIEW_FILE` bytes (read at most one byte past the limit, so a
  file that grows while it is read is refused too).

Every file they read goes through it: golden files and pages, scenarios, the lock (the
gate's and ``build --check``'s reads too), usage files, and the spec files a ``diff``
attributes a change to. :func:`read_regular_file` is the same read without the
repository rule, for a caller that holds the path inside its own tree (the spec build).

:func:`check_inside` holds a folder the tools write into (``golden --update``) to the
same rule, so an update never writes through a case folder linked elsewhere.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import InputError

__all__ = [
    "MAX_REVIEW_FILE",
    "check_inside",
    "read_regular_file",
    "read_review_file",
    "repository_root",
]

#: The largest file a review tool reads (a golden body is kilobytes; a whole
#: conversation's page, a few megabytes).
MAX_REVIEW_FILE = 64 * 1024 * 1024
#: The installed ``prefixlock`` package.
_PACKAGE = Path(os.path.abspath(__file__)).parent.parent


def repository_root(path: Path) -> Path:
    """The repository ``path`` belongs to: its nearest folder (by name, links not
    followed) that holds ``.git``; outside one, the current folder if ``path`` is below
    it, else the folder ``path`` is in (or ``path`` itself, a folder). A file of the
    installed package itself belongs to the folder that holds the package."""
    absolute = Path(os.path.abspath(path))
    if absolute.is_relative_to(_PACKAGE):
        # The example that ships in the package: in a source checkout its files are
        # links into the project beside the package (a wheel holds copies).
        return _PACKAGE.parent
    for folder in absolute.parents:
        if (folder / ".git").exists():
            return folder
    here = Path.cwd()
    if absolute.is_relative_to(here):
        return here
    return absolute if absolute.is_dir() and not absolute.is_symlink() else absolute.parent


def check_inside(path: Path, root: Path | None = None) -> Path:
    """``path`` resolved, if it lies inside the repository (``root``, default
    :func:`repository_root`); an :class:`InputError` naming both otherwise."""
    top = Path(os.path.realpath(repository_root(path) if root is None else root))
    resolved = Path(os.path.realpath(path))
    if not resolved.is_relative_to(top):
        raise InputError(
            f"{path}: refused: it resolves to {resolved}, outside the repository {top}"
            " (a symbolic link?)"
        )
    return resolved


def read_review_file(
    path: Path,
    *,
    root: Path | None = None,
    limit: int = MAX_REVIEW_FILE,
    what: str = "a review file",
    name: str | None = None,
) -> bytes:
    """The bytes of the regular file ``path`` inside the repository (``root``, default
    :func:`repository_root`), at most ``limit`` of them; an :class:`InputError` naming
    ``path`` (or ``name``) otherwise (see the module)."""
    resolved = check_inside(path, root)
    # the resolved path, not followed again: nothing can be swapped in on the way
    return _read(resolved, os.O_NOFOLLOW, limit, what, str(path) if name is None else name)


def read_regular_file(path: Path, *, limit: int, what: str, name: str | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes (a link
    is followed: the caller holds it inside its tree); an :class:`InputError` starting
    with ``name`` (default: the path) otherwise. ``what`` names the kind of file in the
    limit's message (``a review file``, ``a spec file``)."""
    return _read(path, 0, limit, what, str(path) if name is None else name)


def _read(path: Path, flags: int, limit: int, what: str, shown: str) -> bytes:
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | flags)
    except OSError as err:
        raise InputError(f"cannot read {shown}: {err.strerror or err}") from None
    with os.fdopen(fd, "rb") as stream:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(f"{shown}: refused: not a regular file ({_kind(mode)})")
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"{shown}: refused: over the limit of {limit} bytes for {what}")
    return data


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "an unknown kind of file"
