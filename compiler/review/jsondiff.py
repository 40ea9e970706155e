"""JSON value comparison for request bodies: the first divergent path, and short renderings.

Provider-independent helpers shared by :mod:`prefixlock.review.compare` (which knows the wire
formats), :mod:`prefixlock.review.sources` and :mod:`prefixlock.review.invariants`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ..core import canonical
from ..core.jsonpath import json_path

__all__ = [
    "MISSING",
    "Difference",
    "describe",
    "first_difference",
    "first_differing_char",
    "show",
    "value_at",
]

#: Stand-in for a value that is absent on one side.
MISSING: Any = type("Missing", (), {"__repr__": lambda self: "(absent)"})()


@attrs.frozen
class Difference:
    """The first place two JSON values differ."""

    parts: tuple[str | int, ...]
    old: Any
    new: Any

    @property
    def path(self) -> str:
        return json_path(self.parts)


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (``True`` is not ``1``, ``1`` is not ``1.0``)."""
    return type(a) is type(b) and a == b


def first_difference(old: Any, new: Any, parts: tuple[str | int, ...] = ()) -> Difference | None:
    """The first differing path, depth first in ``old``'s order (then keys only in
    ``new``); None if the values are equal."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in old:
            if key not in new:
                return Difference((*parts, key), old[key], MISSING)
            found = first_difference(old[key], new[key], (*parts, key))
            if found is not None:
                return found
        for key in new:
            if key not in old:
                return Difference((*parts, key), MISSING, new[key])
        return None
    if isinstance(old, list) and isinstance(new, list):
        for index, (a, b) in enumerate(zip(old, new, strict=False)):
            found = first_difference(a, b, (*parts, index))
            if found is not None:
                return found
        if len(old) != len(new):
            at = min(len(old), len(new))
            return Difference(
                (*parts, at),
                old[at] if at < len(old) else MISSING,
                new[at] if at < len(new) else MISSING,
            )
        return None
    return None if _same(old, new) else Difference(parts, old, new)


def value_at(value: Any, parts: Sequence[str | int]) -> Any:
    """The value at ``parts``, or :data:`MISSING`."""
    for part in parts:
        if isinstance(value, list) and isinstance(part, int):
            present = 0 <= part < len(value)
        else:
            present = isinstance(value, Mapping) and isinstance(part, str) and part in value
        if not present:
            return MISSING
        value = value[part]
    return value


def first_differing_char(old: str, new: str) -> int:
    n = min(len(old), len(new))
    return next((i for i in range(n) if old[i] != new[i]), n)


def show(value: Any, around: int | None = None, width: int = 60) -> str:
    """A short quoted rendering: strings around ``around``, other values as JSON."""
    if value is MISSING:
        return "(absent)"
    if not isinstance(value, str):
        value = canonical.dumps(value)
        around = None
    start = 0 if around is None else max(0, around - width // 3)
    text = value[start : start + width]
    left = "…" if start > 0 else ""
    right = "…" if start + width < len(value) else ""
    return repr(left + text + right)


def describe(difference: Difference) -> tuple[str, str]:
    """(old, new) renderings centred on the first differing character of strings."""
    old, new = difference.old, difference.new
    around = (
        first_differing_char(old, new) if isinstance(old, str) and isinstance(new, str) else None
    )
    return show(old, around), show(new, around)
