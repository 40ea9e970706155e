"""Byte-exact golden files in pytest (a test helper, not a test).

pytest-regressions' ``file_regression`` compares text (line endings and the final newline
are ignored) and ``data_regression`` sorts keys, so neither can pin the bytes a provider
receives. The comparison and its report are the library's
(:mod:`prefixlock.review.golden`, also behind ``prefixlock golden``); this module makes
them behave like pytest-regressions: a missing golden file or folder is written
and the test fails once ("created ..., rerun"); with ``--force-regen`` a differing one
is rewritten and the test fails ("regenerated ..., rerun").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from prefixlock.core.atomic import replace_file as write_file
from prefixlock.review.golden import (
    file_problems,
    first_difference,
    folder_problems,
    json_difference,
    report,
)

__all__ = [
    "check",
    "file_problems",
    "first_difference",
    "folder_problems",
    "json_difference",
    "report",
    "write_file",
]


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
