"""Opening a checkpoint store by URL, and keeping credentials out of every message.

Accepted forms (:func:`open_store`):

* ``sqlite:///abs/path/to.db`` or ``sqlite://relative/to.db`` (``sqlite://`` followed by
  the file path), or a plain path (``conversations.db``): :class:`~.sqlite.SQLiteStore`;
* ``postgresql://user:password@host:5432/dbname?...`` or ``postgres://...``:
  :class:`~.postgres.PostgresStore`, which needs the optional extra
  ``pip install 'prefixlock[postgres]'`` (psycopg 3, imported only here, lazily, so
  ``import prefixlock`` works without it).

A URL's password (in the userinfo or a ``password=`` query parameter) is replaced by
``***`` by :func:`redact_url` wherever a store names itself.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote

from ..core.errors import UsageError
from .contract import DurableStore

__all__ = [
    "POSTGRES_SCHEMES",
    "is_postgres_url",
    "open_store",
    "redact_url",
    "sqlite_path",
    "url_password",
]

#: URL schemes that name a PostgreSQL server (libpq accepts both).
POSTGRES_SCHEMES = ("postgresql", "postgres")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_PASSWORD_PARAM = re.compile(r"([?&](?:password|sslpassword)=)[^&#]*", re.IGNORECASE)
_MASK = "***"

_INSTALL_HINT = "pip install 'prefixlock[postgres]'"


def _scheme(target: str) -> str | None:
    match = _SCHEME.match(target)
    return match.group(1).lower() if match else None


def _split_netloc(url: str) -> tuple[str, str, str]:
    """``(scheme and ://, netloc, rest)`` of a URL with a scheme."""
    head, _, tail = url.partition("://")
    end = len(tail)
    for sep in "/?#":
        index = tail.find(sep)
        if index != -1:
            end = min(end, index)
    return f"{head}://", tail[:end], tail[end:]


def redact_url(target: str) -> str:
    """``target`` with any password replaced by ``***``; paths come back unchanged.

    ``postgresql://app:s3cret@db:5432/x?password=y`` ->
    ``postgresql://app:***@db:5432/x?password=***``.
    """
    if _scheme(target) is None:
        return target
    prefix, netloc, rest = _split_netloc(target)
    userinfo, at, hostport = netloc.rpartition("@")
    if at and ":" in userinfo:
        user = userinfo.partition(":")[0]
        netloc = f"{user}:{_MASK}@{hostport}"
    return prefix + netloc + _PASSWORD_PARAM.sub(lambda m: m.group(1) + _MASK, rest)


def url_password(target: str) -> list[str]:
    """Every password spelled in ``target`` (raw and percent-decoded), for scrubbing."""
    if _scheme(target) is None:
        return []
    _, netloc, rest = _split_netloc(target)
    found: list[str] = []
    userinfo, at, _ = netloc.rpartition("@")
    if at and ":" in userinfo:
        found.append(userinfo.partition(":")[2])
    for match in re.finditer(r"[?&](?:password|sslpassword)=([^&#]*)", rest, re.IGNORECASE):
        found.append(match.group(1))
    values = {v for v in found if v} | {unquote(v) for v in found if v}
    return sorted(values, key=len, reverse=True)


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    return isinstance(target, str) and _scheme(target) in POSTGRES_SCHEMES


def sqlite_path(target: str | os.PathLike[str]) -> Path:
    """The file a ``sqlite://`` URL or plain path names; other URLs are a UsageError."""
    if not isinstance(target, str):
        return Path(target)
    scheme = _scheme(target)
    if scheme is None:
        return Path(target)
    if scheme != "sqlite":
        raise UsageError(
            f"{redact_url(target)}: unknown store URL scheme {scheme!r} (use "
            "sqlite:///path/to.db, postgresql://... or a file path)"
        )
    path = target[len("sqlite://") :]
    if not path:
        raise UsageError(f"{target}: the sqlite URL names no file (use sqlite:///path/to.db)")
    return Path(path)


def open_store(target: str | os.PathLike[str]) -> DurableStore:
    """Open (creating if needed) the checkpoint store a URL or path names."""
    if is_postgres_url(target):
        assert isinstance(target, str)
        try:
            from .postgres import PostgresStore
        except ModuleNotFoundError as err:
            if (err.name or "").partition(".")[0] != "psycopg":
                raise
            raise UsageError(
                f"{redact_url(target)}: a PostgreSQL store needs psycopg 3, which is not "
                f"installed: {_INSTALL_HINT}"
            ) from None
        return PostgresStore(target)
    from .sqlite import SQLiteStore

    return SQLiteStore(sqlite_path(target))
