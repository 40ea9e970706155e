"""Replacing a file or a folder so that a reader sees the old one or the new one, whole.

The build (outputs and the lock file), the golden files, replayed bodies and the report
page are all written through here: a file goes to a temporary file beside it, is
flushed to disk and renamed over the old one; a folder is built as a staging folder and
swapped in by two renames.

A file is written only over a regular file or at a new path (issue 43): a rename
would replace whatever is there, so a symbolic link, a device (``prefixlock report
/dev/null`` as root replaced ``/dev/null``), a FIFO, a socket or a folder at the path is
refused with an :class:`~prefixlock.core.errors.InputError` before anything is written.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import InputError

__all__ = ["check_replaceable", "replace_file", "staged_file", "staging_dir", "swap_in", "umask"]

#: What a path that is not a regular file is, by the file type bits of its ``lstat``.
_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def check_replaceable(path: Path) -> None:
    """Raise :class:`InputError` unless ``path`` is a regular file or does not exist (a
    symbolic link is refused, whatever it points to: it is not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise InputError(f"{path}: cannot write: {err.strerror or err}") from None
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    raise InputError(
        f"{path}: refusing to write over {kind}: only a regular file or a new path is replaced"
    )


def replace_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, with the mode a plain ``open`` would give
    (``mkstemp`` makes files private); the parent folder is created if missing."""
    temp = staged_file(path, data)
    try:
        check_replaceable(path)  # again: something may have appeared while writing
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def staged_file(path: Path, data: bytes) -> Path:
    """``data`` written and flushed to a new temporary file beside ``path``, with the
    mode a plain ``open`` would give, for the caller to rename over ``path`` (or
    delete): the write that can fail is done before anything is replaced. Raises
    :class:`InputError` when ``path`` is there and not a regular file."""
    check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(handle, 0o666 & ~umask())
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return Path(temp)


def staging_dir(parent: Path, prefix: str) -> Path:
    """A new empty folder in ``parent`` to build a replacement in, with the mode a plain
    ``mkdir`` would give (``mkdtemp`` makes folders private), for :func:`swap_in`."""
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    staging.chmod(0o777 & ~umask())
    return staging


def swap_in(staging: Path, out: Path, *, then: Callable[[], None] | None = None) -> None:
    """Replace folder ``out`` by ``staging`` (two renames; the old one is restored on
    failure, then deleted). ``then``: run once the new folder is in place; if it fails,
    the old folder (or none, if there was none) is put back before its error goes on."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old / "out")
    try:
        try:
            os.replace(staging, out)
        except BaseException:
            if old is not None:
                os.replace(old / "out", out)
            raise
        if then is not None:
            try:
                then()
            except BaseException:
                os.replace(out, staging)  # the caller's staging folder, to delete
                if old is not None:
                    os.replace(old / "out", out)
                raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def umask() -> int:
    """The process umask (read by setting it, then restoring it)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
