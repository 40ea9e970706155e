"""Plain-text tables for the reports people read (``prefixlock verify``, ``prefixlock diff``)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["align"]


def align(rows: Sequence[Sequence[str]], left: int = 2) -> list[str]:
    """``rows`` (the header first) as lines: columns two spaces apart, the first ``left``
    left-aligned (names), the others right-aligned (numbers), no trailing spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for cells in rows:
        names = [c.ljust(w) for c, w in zip(cells[:left], widths[:left], strict=True)]
        numbers = [c.rjust(w) for c, w in zip(cells[left:], widths[left:], strict=True)]
        lines.append("  ".join(names + numbers).rstrip())
    return lines
