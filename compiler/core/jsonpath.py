"""JSON paths as errors print them: ``$.rules[2].kind``, ``$["a b"]``, ``$.x[0]``.

Every error that points into a document (a YAML file, a request, a wire body) names the
place with :func:`json_path`, and names the kind of value found with :func:`type_name`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["json_path", "parent_path", "type_name"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_LAST_SEGMENT = re.compile(r'(?:\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\]|\["(?:[^"\\]|\\.)*"\])\Z')


def json_path(parts: Sequence[str | int]) -> str:
    """``("rules", 2, "kind")`` -> ``$.rules[2].kind``; other keys quoted: ``$["a b"]``."""
    out = ["$"]
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENTIFIER.match(part):
            out.append(f".{part}")
        else:
            out.append(f"[{json.dumps(part, ensure_ascii=False)}]")
    return "".join(out)


def parent_path(path: str) -> str | None:
    """``$.rules[2].kind`` -> ``$.rules[2]``; ``None`` for ``$``."""
    match = _LAST_SEGMENT.search(path)
    if match is None or match.start() == 0:
        return None
    return path[: match.start()]


def type_name(value: Any) -> str:
    """A value's JSON type with its article: ``an object``, ``a string``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence):
        return "an array"
    return f"a {type(value).__name__}"
