"""The review tools read repository files inside the repository, regular and bounded,
and write golden files only inside it (issue 43 #2).

A pull request could commit a golden file as a symbolic link to ``/proc/self/environ``
or a credentials file, and ``golden --check`` printed its content into the CI log; a
link to ``/dev/zero`` made ``diff`` read without bound; ``golden --update`` wrote
through a case folder linked outside the repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.core import files
from prefixlock.core.errors import InputError
from prefixlock.core.files import read_review_file
from prefixlock.review.diff import revisions

CASE = Path("golden") / "identical-context"
SECRET = "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI"
OUTSIDE = "outside the repository"


def _secret(tmp_path: Path) -> Path:
    """A credentials file outside the project (``project`` is ``tmp_path/agent``)."""
    path = tmp_path / "credentials"
    path.write_text(f"{SECRET}\n", encoding="utf-8")
    return path


def _refused(path: Path, target: Path, root: Path) -> str:
    return (
        f"{path}: refused: it resolves to {target.resolve()}, {OUTSIDE} {root.resolve()}"
        " (a symbolic link?)"
    )


@pytest.mark.parametrize("command", ["--check", "--update"])
def test_golden_refuses_a_body_linked_outside_the_repository(
    project: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = _secret(tmp_path)
    body = CASE / "anthropic" / "0001.json"
    body.unlink()
    body.symlink_to(secret)
    capsys.readouterr()
    assert main(["golden", command]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"prefixlock golden: {_refused(body, secret, project)}\n"
    assert SECRET not in captured.out + captured.err
    assert secret.read_text(encoding="utf-8") == f"{SECRET}\n"


def test_golden_check_refuses_proc_self_environ(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = CASE / "calls.md"
    page.unlink()
    page.symlink_to("/proc/self/environ")
    capsys.readouterr()
    assert main(["golden", "--check"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"prefixlock golden: {page}: refused: it resolves to /proc/")
    assert err.endswith(f"/environ, {OUTSIDE} {project.resolve()} (a symbolic link?)\n")
    assert "PATH=" not in err


def test_golden_check_refuses_a_fifo_without_blocking(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = CASE / "gemini" / "0002.json"
    body.unlink()
    os.mkfifo(body)
    capsys.readouterr()
    assert main(["golden", "--check"]) == 2
    assert capsys.readouterr().err == (
        f"prefixlock golden: {body}: refused: not a regular file (a FIFO)\n"
    )


def test_golden_update_never_writes_through_a_case_folder_linked_outside(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(project / CASE), elsewhere)
    (project / CASE).symlink_to(elsewhere)
    for body in (elsewhere / "anthropic").iterdir():
        body.write_bytes(b"{}")  # stale, so that an update would rewrite them
    before = {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert main(["golden", "--update"]) == 2
    # Its scenario is refused first: everything in the case lies outside.
    scenario = CASE / "scenario.yaml"
    assert capsys.readouterr().err == (
        f"prefixlock golden: {_refused(scenario, elsewhere / 'scenario.yaml', project)}\n"
    )
    assert {p: p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == before


def test_a_scenario_linked_to_a_credentials_file_is_refused(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "creds.yaml"
    secret.write_text(f"token: {SECRET}\n", encoding="utf-8")
    scenario = CASE / "scenario.yaml"
    scenario.unlink()
    scenario.symlink_to(secret)
    capsys.readouterr()
    for argv in (["verify", str(scenario)], ["report", "out.html", str(scenario)]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.err == f"prefixlock {argv[0]}: {_refused(scenario, secret, project)}\n"
        assert SECRET not in captured.out + captured.err


def test_diff_of_folders_refuses_a_link_to_dev_zero(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copytree(CASE, "old")
    body = CASE / "openai-chat" / "0001.json"
    body.unlink()
    body.symlink_to("/dev/zero")
    capsys.readouterr()
    assert main(["diff", "old", str(CASE)]) == 2
    assert capsys.readouterr().err == (
        f"prefixlock diff: {_refused(body, Path('/dev/zero'), project)}\n"
    )


def test_read_review_file_bounds_what_it_reads(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * 11)
    assert read_review_file(big, root=tmp_path, limit=11) == b"x" * 11
    with pytest.raises(InputError) as err:
        read_review_file(big, root=tmp_path, limit=10)
    assert str(err.value) == f"{big}: refused: over the limit of 10 bytes for a review file"
    inside = tmp_path / "link.json"
    inside.symlink_to(big)  # a link that stays inside is read
    assert read_review_file(inside, root=tmp_path, limit=11) == b"x" * 11


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def test_a_revision_blob_over_the_limit_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / "golden" / "c" / "anthropic").mkdir(parents=True)
    (repo / "golden" / "c" / "anthropic" / "0001.json").write_bytes(b"y" * 100)
    (repo / "golden" / "c" / "gemini").mkdir()
    (repo / "golden" / "c" / "gemini" / "0001.json").symlink_to("/proc/self/environ")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "c")
    dest = tmp_path / "dest"
    # A blob of type symlink is never written (nor followed): only the regular file is.
    assert revisions.extract(repo, "HEAD", ["golden"], dest) == 1
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*.json")) == [
        "golden/c/anthropic/0001.json"
    ]
    monkeypatch.setattr(revisions, "MAX_REVIEW_FILE", 99)
    with pytest.raises(revisions.GitError) as err:
        revisions.extract(repo, "HEAD", ["golden"], tmp_path / "dest2")
    assert str(err.value) == (
        "HEAD:golden/c/anthropic/0001.json: refused: 100 bytes, over the limit of 99 bytes"
        " for a review file"
    )
    assert files.MAX_REVIEW_FILE == 64 * 1024 * 1024


def test_a_case_folder_linked_outside_is_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefixlock.review.golden import CaseGolden

    project = tmp_path / "project"
    (project / "golden").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = project / "golden" / "case"
    link.symlink_to(elsewhere)
    monkeypatch.chdir(project)
    case = CaseGolden(folder=link, bodies={"anthropic": [b"{}"]}, page=b"# calls\n")
    with pytest.raises(InputError) as err:
        case.write()
    assert str(err.value) == _refused(link, elsewhere, project)
    assert list(elsewhere.iterdir()) == []
