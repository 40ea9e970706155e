"""Byte-exact golden files with readable failure reports (a test helper, not a test).

pytest-regressions' ``file_regression`` compares text (line endings and the final newline
are ignored) and ``data_regression`` sorts keys, so neither can pin the bytes a provider
receives. This helper compares bytes, and on a difference reports:

* the first differing byte offset, with the bytes around it;
* the JSON path of the first difference when both sides parse as JSON;
* a short unified diff of the pretty-printed JSON (wire key order kept), else of the text.

It behaves like pytest-regressions otherwise: a missing golden file or folder is written
and the test fails once ("created ..., rerun"); with ``--force-regen`` a differing one
is rewritten and the test fails ("regenerated ..., rerun").
"""

from __future__ import annotations

import difflib
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from prefixlock.core import canonical
from prefixlock.core.canonical import Ordered
from prefixlock.core.jsonpath import json_path

#: At most this many lines of unified diff per differing file.
MAX_DIFF_LINES = 40
#: Bytes shown on each side of the first difference.
SNIPPET = 40


def first_difference(expected: bytes, actual: bytes) -> int | None:
    """The offset of the first differing byte (the shorter length if one is a prefix)."""
    for offset, (a, b) in enumerate(zip(expected, actual, strict=False)):
        if a != b:
            return offset
    if len(expected) != len(actual):
        return min(len(expected), len(actual))
    return None


def _parse(data: bytes) -> Any:
    try:
        return canonical.loads(data)
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


_NOT_JSON = object()


def json_difference(a: Any, b: Any, parts: tuple[str | int, ...] = ()) -> str | None:
    """The JSON path of the first difference between two parsed values (key order counts)."""
    if isinstance(a, dict) and isinstance(b, dict):
        keys_a, keys_b = list(a), list(b)
        for i in range(max(len(keys_a), len(keys_b))):
            if i >= len(keys_a) or i >= len(keys_b) or keys_a[i] != keys_b[i]:
                key = keys_a[i] if i < len(keys_a) else keys_b[i]
                return json_path((*parts, key))
            found = json_difference(a[keys_a[i]], b[keys_b[i]], (*parts, keys_a[i]))
            if found is not None:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i in range(max(len(a), len(b))):
            if i >= len(a) or i >= len(b):
                return json_path((*parts, i))
            found = json_difference(a[i], b[i], (*parts, i))
            if found is not None:
                return found
        return None
    if type(a) is not type(b) or a != b:
        return json_path(parts)
    return None


def _ordered(value: Any) -> Any:
    """Parsed JSON with every object's key order kept by the canonical pretty printer."""
    if isinstance(value, dict):
        return Ordered((k, _ordered(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


def _lines(data: bytes, parsed: Any) -> list[str]:
    if parsed is not _NOT_JSON:
        return canonical.dumps_pretty(_ordered(parsed)).splitlines()
    return data.decode("utf-8", errors="replace").splitlines()


def report(name: str, expected: bytes, actual: bytes) -> str:
    """Why ``actual`` is not ``expected``, for a person (empty if they are equal)."""
    offset = first_difference(expected, actual)
    if offset is None:
        return ""
    lo = max(0, offset - SNIPPET)
    out = [
        f"{name}: first differing byte at offset {offset} "
        f"(golden {len(expected)} bytes, replayed {len(actual)} bytes)",
        f"  golden:   {expected[lo : offset + SNIPPET]!r}",
        f"  replayed: {actual[lo : offset + SNIPPET]!r}",
    ]
    a, b = _parse(expected), _parse(actual)
    if a is not _NOT_JSON and b is not _NOT_JSON:
        out.append(f"  JSON path: {json_difference(a, b)}")
    diff = list(
        difflib.unified_diff(
            _lines(expected, a), _lines(actual, b), "golden", "replayed", n=2, lineterm=""
        )
    )
    if len(diff) > MAX_DIFF_LINES:
        diff = [*diff[:MAX_DIFF_LINES], f"... ({len(diff) - MAX_DIFF_LINES} more diff lines)"]
    out.extend(f"  {line}" for line in diff)
    return "\n".join(out)


def folder_problems(folder: Path, bodies: Sequence[bytes]) -> list[str]:
    """Problems of ``folder`` holding exactly ``0001.json`` ... for ``bodies``."""
    expected_names = [f"{n:04d}.json" for n in range(1, len(bodies) + 1)]
    present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    problems = [
        f"{folder.name}/{name}: stale golden file" for name in present if name not in expected_names
    ]
    for name, data in zip(expected_names, bodies, strict=True):
        path = folder / name
        if not path.is_file():
            problems.append(f"{folder.name}/{name}: missing golden file")
            continue
        problem = report(f"{folder.name}/{name}", path.read_bytes(), data)
        if problem:
            problems.append(problem)
    return problems


def file_problems(path: Path, data: bytes) -> list[str]:
    if not path.is_file():
        return [f"{path.name}: missing golden file"]
    problem = report(path.name, path.read_bytes(), data)
    return [problem] if problem else []


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` atomically (a temporary file renamed over ``path``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def check(target: Path, problems: list[str], write: Callable[[], None], force_regen: bool) -> None:
    """Fail the test like pytest-regressions when ``problems`` is not empty."""
    if not problems:
        return
    if not target.exists():
        write()
        pytest.fail(f"golden {target} did not exist; created it: rerun the tests", pytrace=False)
    if force_regen:
        write()
        pytest.fail(
            f"golden {target} differed and --force-regen is set; regenerated it: rerun the "
            "tests\n" + "\n".join(problems),
            pytrace=False,
        )
    pytest.fail(
        "\n".join(problems)
        + f"\n\ngolden {target} differs from the replay; if the change is intended, run "
        "`pytest --force-regen` and review the diff (calls.md shows each call's status)",
        pytrace=False,
    )
