"""Every review command builds its spec roots first: a side of ``diff`` whose specs do
not build is exit 2 with the build's own ``file:line:col`` errors, in every output
format, and ``verify`` runs the build's template check (a branch no scenario reaches)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from prefixlock.cli.commands import main

TEMPLATE = "prompt/cursor/agent/runtime.md.j2"
RULES = "rules/rules.yaml"

QEURY = (
    f"{TEMPLATE}:43: runtime template uses unknown variable 'qeury' (did you mean 'query'?"
    " runtime templates may use only: action_context, mode, open_files, query,"
    " selected_context, timestamp)"
)
BRACKET = (
    f"{RULES}:32:5: $: YAML syntax error: expected ',' or ']', but got '<scalar>' (while"
    " parsing a flow sequence at line 31, column 12)"
)


def _git(root: Path, *args: str) -> None:
    identity = ("-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false")
    subprocess.run(["git", "-C", str(root), *identity, *args], check=True, capture_output=True)


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


@pytest.fixture
def committed(project: Path) -> Path:
    """``project`` (tests/conftest.py) committed to a fresh git repository."""
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "start")
    return project


def _break_three_ways(root: Path) -> None:
    """The three edits of issue 42: a misspelled kind, an unclosed ``[``, ``{{ qeury }}``
    (the YAML error hides the kind, as it does from ``build``)."""
    _replace(root / RULES, "kind: always", "kind: allways")
    _replace(root / RULES, 'globs: ["**/*.py", "**/*.pyi"]', 'globs: ["**/*.py", "**/*.pyi"')
    _replace(root / TEMPLATE, "{{ query }}", "{{ qeury }}")


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_diff_of_a_worktree_that_does_not_build_is_bad_input_in_every_format(
    committed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _break_three_ways(committed)
    # what `build` says, `diff` says: the same errors, exit 2
    assert _run(capsys, "build") == (2, "", f"{QEURY}\n{BRACKET}\nprefixlock build: 2 errors\n")
    assert _run(capsys, "diff", "HEAD", "WORKTREE") == (
        2,
        "",
        f"{QEURY}\n{BRACKET}\nprefixlock diff: the specs do not build (2 errors);"
        " nothing was compared\n",
    )
    code, out, err = _run(capsys, "diff", "HEAD", "WORKTREE", "--json")
    assert (code, err) == (2, "")
    assert json.loads(out) == {
        "format": "prefixlock.error/1",
        "command": "diff",
        "errors": [
            {
                "message": QEURY.split(":43: ", 1)[1],
                "file": TEMPLATE,
                "line": 43,
                "column": None,
                "path": None,
            },
            {
                "message": BRACKET.split(": $: ", 1)[1],
                "file": RULES,
                "line": 32,
                "column": 5,
                "path": "$",
            },
        ],
    }
    assert _run(capsys, "diff", "HEAD", "WORKTREE", "--format", "json") == (2, out, "")
    assert _run(capsys, "diff", "HEAD", "WORKTREE", "--format", "markdown") == (
        2,
        "### prefixlock diff: the specs do not build\n\n"
        "Nothing was compared: `prefixlock build` rejects the specs (2 errors).\n\n"
        f"```text\n{QEURY}\n{BRACKET}\n```\n",
        "",
    )
    title = "title=prefixlock%3A the specs do not build"
    assert _run(capsys, "diff", "HEAD", "WORKTREE", "--format", "github") == (
        2,
        f"::error file={TEMPLATE},line=43,{title}::{QEURY.split(':43: ', 1)[1]}\n"
        f"::error file={RULES},line=32,col=5,{title}::{BRACKET.split(':32:5: ', 1)[1]}\n",
        "",
    )


def test_diff_names_the_errors_of_a_revision_that_does_not_build(
    committed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _replace(committed / RULES, "kind: always", "kind: allways")
    _git(committed, "commit", "-q", "-am", "broken")
    _replace(committed / RULES, "kind: allways", "kind: always")
    error = (
        f"HEAD:{RULES}:13:11: $.rules[0].kind: expected one of always, auto, agent, manual;"
        " got 'allways' (did you mean 'always'?)"
    )
    assert _run(capsys, "diff", "HEAD", "WORKTREE") == (
        2,
        "",
        f"{error}\nprefixlock diff: the specs do not build (1 error); nothing was compared\n",
    )
    # not a file of the checkout: the location goes in the message
    assert _run(capsys, "diff", "HEAD", "WORKTREE", "--format", "github") == (
        2,
        f"::error title=prefixlock%3A the specs do not build::{error}\n",
        "",
    )
    # the committed state itself compares as before
    _git(committed, "commit", "-q", "-am", "fixed")
    assert _run(capsys, "diff", "HEAD", "WORKTREE")[0] == 0


def test_diff_of_two_plain_folders_needs_no_specs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body = b'{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}]}'
    for side in ("old", "new"):
        folder = tmp_path / side / "case" / "anthropic"
        folder.mkdir(parents=True)
        (folder / "0001.json").write_bytes(body)
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, "diff", "old", "new")
    assert code == 0 and out.endswith("deployment impact: none\n")


PTH = f"{TEMPLATE}:17: undefined value: 'dict object' has no attribute 'pth' (did you mean 'path'?)"


@pytest.mark.parametrize(
    "argv",
    [
        ("verify", "--no-hash-seed"),
        ("golden", "--check"),
        ("golden", "--update"),
        ("report", "page.html"),
    ],
)
def test_a_template_error_build_rejects_fails_every_review_command(
    project: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    # a branch the starter case never reaches (it opens no files): only the build's
    # sample turn renders it
    _replace(project / TEMPLATE, "{{ file.path }}", "{{ file.pth }}")
    assert _run(capsys, "build") == (2, "", f"{PTH}\nprefixlock build: 1 error\n")
    before = sorted(p.read_bytes() for p in (project / "golden").rglob("*") if p.is_file())
    assert _run(capsys, *argv) == (2, "", f"{PTH}\nprefixlock {argv[0]}: 1 error\n")
    after = sorted(p.read_bytes() for p in (project / "golden").rglob("*") if p.is_file())
    assert after == before and not (project / "page.html").exists()


def test_verify_json_reports_the_template_error(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _replace(project / TEMPLATE, "{{ file.path }}", "{{ file.pth }}")
    code, out, _ = _run(capsys, "verify", "--json", "--no-hash-seed")
    assert code == 2
    assert json.loads(out)["errors"] == [
        {
            "message": PTH.split(":17: ", 1)[1],
            "file": TEMPLATE,
            "line": 17,
            "column": None,
            "path": None,
        }
    ]
