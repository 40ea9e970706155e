"""Secret redaction: values that look like credentials never reach a prompt.

The rule (documented in the README, tested):

1. In any URL (Git remotes, MCP server URLs) the userinfo part is replaced:
   ``https://user:ghp_xxx@github.com/o/r.git`` -> ``https://[REDACTED]@github.com/o/r.git``;
   query parameters whose *name* is sensitive (rule 2) get the value ``[REDACTED]``.
2. A name is sensitive when, upper-cased, it contains ``KEY``, ``TOKEN``, ``SECRET``,
   ``PASSWORD``, ``PASSWD``, ``CREDENTIAL``, ``AUTH`` (which covers ``Authorization``)
   or ``COOKIE``. MCP server ``env`` and ``headers`` entries with a sensitive name keep
   their name and get the value ``[REDACTED]``.

Redaction is deterministic and idempotent, so it never causes a spurious context change.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[REDACTED]"
_SENSITIVE = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_sensitive_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SENSITIVE)


def redact_url(url: str) -> str:
    """Remove credentials from a URL; strings that are not scheme URLs pass unchanged."""
    if not _SCHEME.match(url):
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = REDACTED + "@" + netloc.rsplit("@", 1)[1]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(is_sensitive_name(k) for k, _ in pairs):
            query = urlencode(
                [(k, REDACTED if is_sensitive_name(k) else v) for k, v in pairs], safe="[]"
            )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_mapping(values: dict[str, str]) -> dict[str, str]:
    """``env`` / ``headers``: sensitive names keep their name, lose their value."""
    return {k: (REDACTED if is_sensitive_name(k) else v) for k, v in values.items()}
