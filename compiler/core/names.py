"""The one "did you mean" hint of every unknown key, mode, tool, provider or file name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["closest", "hint"]


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (difflib's ratio >= 0.6), or None."""
    # get_close_matches ranks by (ratio, name): the answer does not depend on the order
    close = difflib.get_close_matches(name, list(known), n=1)
    return close[0] if close else None


def hint(name: str, known: Iterable[str], label: str = "expected one of") -> str:
    """``did you mean 'x'?`` for a close known name, else ``LABEL: a, b, c`` (in the
    given order)."""
    names = list(dict.fromkeys(known))
    close = closest(name, names)
    if close is not None:
        return f"did you mean {close!r}?"
    return f"{label}: {', '.join(names)}" if names else "none are defined"
