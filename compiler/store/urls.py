"""Opening a checkpoint store by URL, and keeping credentials out of every message.

Accepted forms (:func:`open_store`):

* ``sqlite:///abs/path/to.db`` or ``sqlite://relative/to.db`` (``sqlite://`` followed by
  the file path), or a plain path (``conversations.db``): :class:`~.sqlite.SQLiteStore`;
* ``postgresql://user:password@host:5432/dbname?...`` or ``postgres://...``:
  :class:`~.postgres.PostgresStore`, which needs the optional extra
  ``pip install 'prefixlock[postgres]'`` (psycopg 3, imported only here, lazily, so
  ``import prefixlock`` works without it).

A URL's password (in the userinfo or a ``password=`` or ``sslpassword=`` query parameter)
is replaced by ``***`` by :func:`redact_url` wherever a store names itself. The URL is read
as libpq reads it: the userinfo ends at the first ``@`` met before any ``/`` (a ``?`` or
``#`` does not end it: ``postgresql://u:pa?ss@h/db`` has the password ``pa?ss``), a query
parameter's name is percent-decoded (``pass%77ord=`` is ``password=``) and its value runs
to the next ``&`` (``#`` has no meaning to libpq). An unencoded ``@`` in the password
(``u:p@ss@h``, whose password libpq ends at the first ``@``) is hidden up to the last ``@``
before the query (``u:p@w/x@h/db``: ``/`` included); so is an unencoded ``/`` in it
(``u:pa/ss@h/db``, which libpq reads as host ``u``, port ``pa`` and database
``ss@h/db``): everything from the first ``:`` to the last ``@`` before the query. Each
piece of such a password is scrubbed from a server's messages (:func:`url_password`).
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
#: Query parameters (percent-decoded, any case) whose values are secrets.
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
_MASK = "***"

_INSTALL_HINT = "pip install 'prefixlock[postgres]'"


def _scheme(target: str) -> str | None:
    match = _SCHEME.match(target)
    return match.group(1).lower() if match else None


def _first(text: str, chars: str) -> int:
    """The index of the first of ``chars`` in ``text``, or its length."""
    return min((i for i in map(text.find, chars) if i != -1), default=len(text))


def _split_url(url: str) -> tuple[str, str | None, list[str], str, str | None]:
    """``(scheme and ://, user, passwords, host to query, query)`` of a URL with a scheme,
    as libpq reads it. ``user`` is None without a userinfo. ``passwords`` is empty without a
    ``:`` in the userinfo, else libpq's password (after the ``:``, up to the first ``@``),
    after the text up to the last ``@`` before the host's end (a ``/`` or ``?``) if there
    is one more. ``query`` is None without a ``?``."""
    head, _, tail = url.partition("://")
    user: str | None = None
    passwords: list[str] = []
    at = _first(tail, "@/")
    slash, end = tail.find("/"), _first(tail, "?")
    last = tail.rfind("@", 0, end)
    if tail[at : at + 1] == "/" and last > slash and ":" in tail[:slash]:
        # An unencoded '/' in the password ("u:pa/ss@h/db"): libpq reads "u" as the host,
        # "pa" as the port and "ss@h/db" as the database, and may quote any of them in an
        # error; the author meant a password up to the last '@', which is hidden whole.
        user, _, password = tail[:last].partition(":")
        passwords = [password, password[: password.find("/")]]
        host, mark, query = tail[last + 1 :].partition("?")
        return f"{head}://", user, passwords, host, query if mark else None
    if tail[at : at + 1] == "@":  # libpq: the userinfo ends at the first '@' before a '/'
        userinfo, rest = tail[:at], tail[at + 1 :]
        user, colon, password = userinfo.partition(":")
        if colon:
            passwords = [password]
            # an unencoded '@' in the password, a '/' after it too ("p@w/x@h/db"): hidden
            # up to the last '@' before the query (a database name holding an '@' is
            # hidden with it: a name shown short beats a password shown)
            last = rest.rfind("@", 0, _first(rest, "?"))
            if last != -1:
                passwords.insert(0, f"{password}@{rest[:last]}")
                rest = rest[last + 1 :]
    else:
        rest = tail
    host, mark, query = rest.partition("?")
    return f"{head}://", user, passwords, host, query if mark else None


def _params(query: str) -> list[tuple[str, str, bool]]:
    """``(name and =, value, secret)`` of each ``&``-separated parameter of ``query``."""
    found = []
    for param in query.split("&"):
        name, eq, value = param.partition("=")
        found.append((name + eq, value, bool(eq) and unquote(name).lower() in _SECRET_PARAMS))
    return found


def redact_url(target: str) -> str:
    """``target`` with any password replaced by ``***``; paths come back unchanged.

    ``postgresql://app:s3cret@db:5432/x?password=y`` ->
    ``postgresql://app:***@db:5432/x?password=***``.
    """
    if _scheme(target) is None:
        return target
    prefix, user, passwords, host, query = _split_url(target)
    shown = prefix
    if user is not None:
        shown += f"{user}:{_MASK}@" if passwords else f"{user}@"
    shown += host
    if query is not None:
        params = _params(query)
        shown += "?" + "&".join(
            name + (_MASK if secret else value) for name, value, secret in params
        )
    return shown


def url_password(target: str) -> list[str]:
    """Every password spelled in ``target`` (raw and percent-decoded), for scrubbing."""
    if _scheme(target) is None:
        return []
    _, _, found, _, query = _split_url(target)
    if query is not None:
        found += [value for _, value, secret in _params(query) if secret]
    # libpq reads a password holding an unencoded '@' or '/' as pieces of the host, port
    # and database names, and may quote any of them in an error: each piece is scrubbed
    found += [piece for v in found for piece in re.split("[@/]", v)]
    values = {v for v in found if v} | {unquote(v) for v in found if v}
    return sorted(values, key=lambda v: (-len(v), v))


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


def open_store(target: str | os.PathLike[str], *, read_only: bool = False) -> DurableStore:
    """Open (creating if needed) the checkpoint store a URL or path names; ``read_only``:
    an SQLite file is opened for reading only (it must exist and hold a store)."""
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

    return SQLiteStore(sqlite_path(target), read_only=read_only)
