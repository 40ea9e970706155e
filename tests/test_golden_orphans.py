"""``prefixlock golden``: what lies in the golden folders but belongs to no case, and
scenario files that are no case.

``prefixlock diff`` compares every ``<case>/<provider>`` folder below ``golden/``, so a case
folder that lost its ``scenario.yaml``, a folder named like no provider or a staging folder
an interrupted update left behind must not pass ``golden --check`` unnoticed; ``--update``
removes only what it made itself. A golden case is ``<case>/scenario.yaml``: a scenario
file by another name would write its golden files over its neighbours.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.providers import NAMES
from test_cli_golden import CASE

PROVIDERS = ", ".join(NAMES)  # the message lists the registry, in its order
NO_SCENARIOS = "prefixlock golden: no scenarios: golden/*/scenario.yaml is empty; pass PATH\n"


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _orphan(project: Path) -> Path:
    """A second case whose scenario.yaml was removed, its golden files kept."""
    orphan = project / "golden" / "removed"
    shutil.copytree(project / CASE, orphan)
    (orphan / "scenario.yaml").unlink()
    return orphan


ORPHAN = (
    "golden/removed: no scenario.yaml, so no golden case checks it; restore"
    " golden/removed/scenario.yaml, or delete the folder"
)


def _strays(count: int) -> str:
    return (
        f"prefixlock golden: {count} path(s) in no golden case; delete them, or restore"
        " their scenario.yaml"
    )


def test_check_names_a_case_folder_without_its_scenario(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _orphan(project)
    capsys.readouterr()
    assert main(["golden", "--check"]) == 1
    assert capsys.readouterr().err == f"{ORPHAN}\n{_strays(1)}\n"
    assert main(["golden", "--check", "golden"]) == 1  # a folder of cases is scanned too
    assert capsys.readouterr().err == f"{ORPHAN}\n{_strays(1)}\n"
    assert main(["golden", "--check", str(CASE)]) == 0  # one case: its own folder only


def test_update_keeps_an_orphaned_case_and_says_so(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    orphan = _orphan(project)
    kept = _files(orphan)
    capsys.readouterr()
    assert main(["golden", "--update"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "1 case(s), 0 updated\n"
    assert captured.err == f"{ORPHAN}\n{_strays(1)}\n"
    assert _files(orphan) == kept


def test_check_names_a_folder_named_like_no_provider(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / CASE / "openai").mkdir()
    shutil.copy(project / CASE / "openai-chat" / "0001.json", project / CASE / "openai")
    (project / CASE / ".notes").mkdir()
    capsys.readouterr()
    assert main(["golden", "--check", str(CASE)]) == 1
    expected = (
        f"golden/identical-context/.notes: not a provider folder ({PROVIDERS}), so nothing"
        " checks it; delete it\n"
        f"golden/identical-context/openai: not a provider folder ({PROVIDERS}), so nothing"
        " checks it; delete it\n"
        f"{_strays(2)}\n"
    )
    assert capsys.readouterr().err == expected
    assert main(["golden", "--update"]) == 1  # not of its making: kept, reported
    assert capsys.readouterr().err == expected
    assert (project / CASE / "openai" / "0001.json").is_file()
    assert (project / CASE / ".notes").is_dir()


def test_check_names_the_leftovers_of_an_interrupted_update_and_update_removes_them(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = project / CASE
    (case / ".anthropic.replay-x8k2_q0").mkdir()
    shutil.copy(case / "anthropic" / "0001.json", case / ".anthropic.replay-x8k2_q0")
    (case / ".gemini.old-3hd7").mkdir()
    shutil.copytree(case / "gemini", case / ".gemini.old-3hd7" / "out")
    (case / ".calls.md.q1w2e3r4").write_bytes(b"# half a page")
    capsys.readouterr()
    assert main(["golden", "--check"]) == 1
    left = [".anthropic.replay-x8k2_q0", ".calls.md.q1w2e3r4", ".gemini.old-3hd7"]
    assert capsys.readouterr().err == "".join(
        [
            *(
                f"golden/identical-context/{name}: left over from an interrupted golden update;"
                " delete it, or run `prefixlock update` (it removes it)\n"
                for name in left
            ),
            f"{_strays(3)}\n",
        ]
    )
    assert main(["golden", "--update"]) == 0
    assert capsys.readouterr().out == "".join(
        [
            *(
                f"removed golden/identical-context/{name} (left over from an interrupted"
                " golden update)\n"
                for name in left
            ),
            "1 case(s), 0 updated\n",
        ]
    )
    assert not any((case / name).exists() for name in left)
    assert main(["golden", "--check"]) == 0


@pytest.mark.parametrize("option", ["--check", "--update"])
def test_no_golden_cases_is_an_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    option: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["golden", option]) == 2
    assert capsys.readouterr().err == NO_SCENARIOS
    (tmp_path / "golden").mkdir()
    assert main(["golden", option]) == 2
    assert capsys.readouterr().err == NO_SCENARIOS
    assert main(["verify"]) == 2  # the same words as verify's
    assert capsys.readouterr().err == NO_SCENARIOS.replace("golden:", "verify:", 1)


def _loose(path: str) -> str:
    return (
        f"prefixlock golden: {path}: a golden case is <case>/scenario.yaml, its golden files"
        " beside it; move the scenario to a folder of its own as scenario.yaml (`prefixlock"
        " verify` and `prefixlock replay` take it as it is)\n"
    )


@pytest.mark.parametrize("option", ["--check", "--update"])
def test_a_scenario_not_named_scenario_yaml_is_no_golden_case(
    project: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    scenario = (project / CASE / "scenario.yaml").read_text(encoding="utf-8")
    variant = project / CASE / "variant.yaml"
    variant.write_text(scenario.replace("query:", "query: again", 1), encoding="utf-8")
    loose = project / "golden" / "extra.yaml"
    loose.write_text(scenario, encoding="utf-8")
    before = _files(project / "golden")
    capsys.readouterr()
    assert main(["golden", option, str(CASE / "variant.yaml")]) == 2
    assert capsys.readouterr().err == _loose("golden/identical-context/variant.yaml")
    assert main(["golden", option, str(CASE), "golden/extra.yaml"]) == 2
    assert capsys.readouterr().err == _loose("golden/extra.yaml")
    assert _files(project / "golden") == before
    assert main(["verify", "--no-hash-seed", "golden/extra.yaml"]) == 0
