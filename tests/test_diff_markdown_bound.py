"""The pull-request comment stays under GitHub's limit for any single edit of the example.

This repository's own spec root and its golden cases (every case, every provider), copied
into a git repository, then five commits, one edit each — a new rule, a template line, a
one-word instructions edit, a tool description, a typo — each with its lock and golden
files rebuilt. ``diff --format markdown`` of each commit is at most
:data:`MARKDOWN_LIMIT` characters, headed by its deployment impact; what does not fit is
counted, and ``--full-report`` writes all of it.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import prefixlock.cli.review as review_cli
import pytest
from prefixlock.cli.commands import main
from prefixlock.providers import NAMES
from prefixlock.review.diff import GOLDEN, DiffReport, diff
from prefixlock.review.diff.formats import MARKDOWN_LIMIT, markdown
from prefixlock.review.scenario import scenario_bundle_root

REPO = Path(__file__).resolve().parents[1]

CONTENT = "### prefixlock diff: template/context change: running conversations keep their cache"
ROOT = (
    "### prefixlock diff: root change: running conversations keep their cache; new"
    " conversations start a new cached prefix"
)

NEW_RULE = """  - name: logging
    kind: always
    description: How to log.
    body: |
      # Logging

      - Use the standard logging module; never print in library code.

"""

#: (commit name, file, old text, new text, headline, the changed line's text)
EDITS = [
    (
        "rule",
        "rules/rules.yaml",
        "  - name: python-style\n",
        NEW_RULE + "  - name: python-style\n",
        CONTENT,
        "- name: logging",
    ),
    (
        "template",
        "prompt/cursor/agent/runtime.md.j2",
        "<user_query>\n",
        "<user_query lang=en>\n",
        CONTENT,
        "<user_query lang=en>",
    ),
    (
        "instructions",
        "prompt/cursor/instructions.md",
        "exact symbols and strings",
        "exact strings",
        ROOT,
        "grep_search exact strings",
    ),
    (
        "tool",
        "rules/tools.yaml",
        "files show their size.",
        "files show their byte size.",
        ROOT,
        "files show their byte size.",
    ),
    (
        "typo",
        "rules/skills.yaml",
        "isolate\n      order, timing",
        "isolate\n      ordre, timing",
        CONTENT,
        "ordre, timing",
    ),
]


def _git(root: Path, *args: str) -> None:
    identity = ("-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false")
    subprocess.run(["git", "-C", str(root), *identity, *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bound") / "example"
    root.mkdir()
    for name in ("prompt", "rules", "golden"):
        shutil.copytree(REPO / name, root / name)
    for name in ("prefixlock.lock", ".gitattributes"):
        shutil.copyfile(REPO / name, root / name)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "start")
    for name, path, old, new, *_ in EDITS:
        file = root / path
        text = file.read_text(encoding="utf-8")
        assert text.count(old) == 1, (name, old)
        file.write_text(text.replace(old, new), encoding="utf-8")
        assert main(["build", "--root", str(root)]) == 0
        assert main(["golden", "--update", str(root / "golden")]) == 0
        _git(root, "add", "-A")
        _git(root, "commit", "-q", "-m", name)
    return root


#: The options the command line passes when none is given.
DEFAULTS: dict[str, Any] = {"provider": None, "root": Path("."), "golden": GOLDEN}


@functools.cache
def _diff(old: str, new: str, example: Path, **options: Any) -> DiffReport:
    """The report of ``diff old new`` in the example (a frozen value): the command's and
    ``test_what_does_not_fit_is_counted``'s of the instructions edit are one."""
    assert Path.cwd() == example
    return diff(old, new, **options)


def _line(root: Path, path: str, text: str) -> str:
    lines = (root / path).read_text(encoding="utf-8").split("\n")
    found = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, (path, text, found)
    return f"{path}:{found[0]}"


@pytest.mark.parametrize("index", range(len(EDITS)), ids=[edit[0] for edit in EDITS])
def test_markdown_of_one_edit_of_the_example_is_bounded_and_headed_by_its_impact(
    index: int,
    example: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    _, path, _, _, headline, changed = EDITS[index]
    back = len(EDITS) - index
    old, new = f"HEAD~{back}", f"HEAD~{back - 1}" if back > 1 else "HEAD"
    full = tmp_path / "report.md"
    monkeypatch.chdir(example)
    monkeypatch.setattr(review_cli, "diff", lambda a, b, **options: _diff(a, b, example, **options))
    capsys.readouterr()
    main(["diff", old, new, "--format=markdown", f"--full-report={full}"])
    out = capsys.readouterr().out
    assert len(out) <= MARKDOWN_LIMIT
    lines = out.split("\n")
    assert lines[0] == headline
    cause = f"{new}:{_line(example, path, changed)}"
    assert lines[2].startswith("- **")
    assert f", caused by `{cause}`: " in lines[2]
    assert "context-defaults.json" not in out and "prefix break" not in out.lower()
    whole = full.read_text(encoding="utf-8")
    assert whole.split("\n")[:3] == lines[:3]
    shown = re.search(r"^… and ([0-9]+) more case/provider results", out, re.M)
    if shown is None:  # all of it fits: the comment is the report, naming where it is
        assert out == whole + f"\nThe full report: `{full}`.\n"
    else:
        assert f"the full report: `{full}`" in out
        assert len(whole) > len(out)


def test_what_does_not_fit_is_counted(
    example: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The instructions edit changes every case x provider result: with room for a few,
    the others are counted, and the comment says where the rest is."""
    monkeypatch.chdir(example)
    # the cases built from the example (not one holding its own bundle, as
    # golden/bedrock-mantle: the edit does not reach it)
    cases = [
        p.parent
        for p in (REPO / "golden").glob("*/scenario.yaml")
        if scenario_bundle_root(p) == REPO.resolve()
    ]
    assert 0 < len(cases) < len(list((REPO / "golden").glob("*/scenario.yaml")))
    results = len([d for case in cases for d in case.iterdir() if d.name in NAMES])
    calls = len([f for case in cases for f in case.glob("*/*.json")])
    report = _diff("HEAD~3", "HEAD~2", example, **DEFAULTS)
    whole = markdown(report, limit=None)
    blocks = sum(1 for line in whole if re.match(r"[a-z-]+/[a-z-]+: [0-9]+ of [0-9]+ calls", line))
    assert blocks == results
    short = markdown(report, limit=12_000, full_report="report.md")
    assert len("\n".join(short)) + 1 <= 12_000
    kept = sum(1 for line in short if re.match(r"[a-z-]+/[a-z-]+: [0-9]+ of [0-9]+ calls", line))
    assert 0 < kept < results
    assert short[short.index("</details>") - 2] == (
        f"… and {results - kept} more case/provider results, not shown here; the full report:"
        " `report.md`"
    )
    details = f"<details><summary>Details: each changed call ({calls} calls)</summary>"
    assert short[: short.index(details)] == whole[: whole.index(details)]
    unbounded = markdown(report, limit=12_000)
    assert unbounded[unbounded.index("</details>") - 2].endswith(
        "not shown here; write the full report with `--full-report FILE`"
    )
