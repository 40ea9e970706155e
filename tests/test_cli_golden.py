"""``prefixlock golden --check | --update`` and the golden case ``init`` starts with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.providers import NAMES
from prefixlock.review.render import recorded_bundle
from prefixlock.spec.build import build_bundle

CASE = Path("golden") / "identical-context"


# ``project``: tests/conftest.py


def test_init_writes_the_starter_case_with_its_bodies_and_calls_md(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = project / CASE
    assert sorted(p.name for p in case.iterdir()) == sorted([*NAMES, "calls.md", "scenario.yaml"])
    calls = ["0001.json", "0002.json", "0003.json"]
    assert sorted(p.name for p in (case / "anthropic").iterdir()) == calls
    capsys.readouterr()
    assert main(["golden", "--check"]) == 0
    assert capsys.readouterr().out == "1 case(s): every golden file matches a fresh replay\n"


def test_check_names_each_stale_file_and_update_rewrites_them(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = project / CASE / "gemini" / "0002.json"
    original = body.read_bytes()
    body.write_bytes(original.replace(b'"role":"model"', b'"role":"user"', 1))
    (project / CASE / "openai-chat" / "0009.json").write_bytes(b"{}")
    capsys.readouterr()
    assert main(["golden", "--check"]) == 1
    err = capsys.readouterr().err
    # one line per file: where (JSON path, byte offset), then a short window of each side
    assert err.splitlines()[:4] == [
        "identical-context/gemini/0002.json: differs at $.contents[2].role, byte 28329"
        " (golden 29048 bytes, replayed 29049)",
        """  golden:   '…?\\n</user_query>\\n"}]},{"role":"user","parts":[{"text":"I'll"""
        """ search the codebase…'""",
        """  replayed: '…?\\n</user_query>\\n"}]},{"role":"model","parts":[{"text":"I'll"""
        """ search the codebas…'""",
        "identical-context/openai-chat/0009.json: stale golden file",
    ]
    assert err.endswith(
        "prefixlock golden: 2 stale golden file(s); review the change and run `prefixlock update`\n"
    )
    assert main(["golden", "--check", "--full"]) == 1
    full = capsys.readouterr().err
    assert "identical-context/gemini/0002.json: first differing byte at offset 28329" in full
    assert '  -      "role": "user",' in full and '  +      "role": "model",' in full
    assert main(["golden", "--update"]) == 0
    assert capsys.readouterr().out == f"updated {CASE}/\n1 case(s), 1 updated\n"
    assert body.read_bytes() == original
    assert not (project / CASE / "openai-chat" / "0009.json").exists()
    assert main(["golden", "--check", str(CASE)]) == 0


def test_update_writes_nothing_when_a_scenario_is_bad(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = project / CASE / "anthropic" / "0001.json"
    body.write_bytes(b"{}")
    broken = project / "golden" / "broken" / "scenario.yaml"
    broken.parent.mkdir()
    broken.write_text("name: x\nconversation: c\nsteps:\n  - retry: u9\n", encoding="utf-8")
    capsys.readouterr()
    assert main(["golden", "--update"]) == 2
    assert "retry of unknown event 'u9'" in capsys.readouterr().err
    assert body.read_bytes() == b"{}"


def test_check_or_update_is_required(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["golden"]) == 2
    assert "one of the arguments --check --update is required" in capsys.readouterr().err


def _lock_digest(project: Path) -> str:
    digest = json.loads((project / "prefixlock.lock").read_text(encoding="utf-8"))["digest"]
    assert isinstance(digest, str)
    return digest


def _edit_instructions(project: Path) -> None:
    instructions = project / "prompt" / "cursor" / "instructions.md"
    text = instructions.read_text(encoding="utf-8")
    instructions.write_text(text.replace("Cursor", "Cursory", 1), encoding="utf-8")


def test_check_names_the_bundle_the_golden_files_were_built_from(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = _lock_digest(project)
    assert f"- bundle: `{built}`\n" in (project / CASE / "calls.md").read_text(encoding="utf-8")
    _edit_instructions(project)
    assert main(["build"]) == 0
    lock = _lock_digest(project)
    assert lock != built
    capsys.readouterr()
    assert main(["golden", "--check"]) == 1
    err = capsys.readouterr().err.split("\n")
    assert err[0] == (
        f"golden/identical-context was built from bundle {built}, the lock is {lock};"
        " run `prefixlock update`"
    )
    assert err[-2].startswith("prefixlock golden: 1 case(s) built from another bundle, ")
    assert err[-2].endswith(" stale golden file(s); review the change and run `prefixlock update`")
    assert main(["golden", "--update"]) == 0
    assert main(["golden", "--check"]) == 0


def test_check_names_the_specs_bundle_when_the_lock_is_stale_too(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = _lock_digest(project)
    _edit_instructions(project)
    capsys.readouterr()
    assert main(["golden", "--check"]) == 1  # neither the lock nor the golden files rebuilt
    err = capsys.readouterr().err.split("\n")
    new = build_bundle(project).digest
    stale = (
        f"prefixlock.lock is stale: it records bundle {built}, the specs build {new};"
        " run `prefixlock update`"
    )
    assert err[:2] == [
        stale,
        f"golden/identical-context was built from bundle {built}, the specs build {new}"
        f" (the lock records {built}); run `prefixlock update`",
    ]
    # Golden files that follow the specs match, and the stale lock is still named.
    assert main(["golden", "--update"]) == 0
    capsys.readouterr()
    assert main(["golden", "--check"]) == 1
    assert capsys.readouterr().err == (
        f"{stale}\nprefixlock golden: every golden file matches a fresh replay, but"
        " prefixlock.lock is stale\n"
    )
    assert recorded_bundle((project / CASE / "calls.md").read_bytes()) == new
    assert main(["build", "--check"]) == 1
    assert main(["build"]) == 0
    assert main(["golden", "--check"]) == 0
