"""Spec errors a review found hidden or misplaced: a folder or a broken link where a spec
file belongs, schema errors behind a loader error, a mistyped default mode, and the
location of a value an alias copies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prefixlock.core.errors import SpecErrors
from prefixlock.spec.loader import DocumentErrors, load_yaml_text
from test_cli_build import run, spec_root, tree


def build_fails(capsys: pytest.CaptureFixture[str], root: Path) -> list[str]:
    """The errors ``prefixlock build`` prints; it must exit 2 and write nothing."""
    before = tree(root)
    code, out, err = run(capsys, "build", "--root", str(root))
    assert (code, out) == (2, "")
    assert tree(root) == before
    assert not (root / "build").exists()
    return err.splitlines()


# --- 1. a folder or a broken link is not an absent file ------------------------------------


@pytest.mark.parametrize("file", ["rules/rules.yaml", "rules/agent.yaml"])
def test_a_folder_at_a_spec_file_path_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    root = spec_root(tmp_path)
    (root / file).unlink()
    (root / file).mkdir()
    assert build_fails(capsys, root) == [
        f"{file}: is a folder, not a file",
        "prefixlock build: 1 error",
    ]


@pytest.mark.parametrize("file", ["rules/rules.yaml", "rules/agent.yaml"])
def test_a_broken_link_at_a_spec_file_path_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str
) -> None:
    root = spec_root(tmp_path)
    (root / file).unlink()
    os.symlink("/nonexistent/x.yaml", root / file)
    assert build_fails(capsys, root) == [
        f"{file}: broken symbolic link (to /nonexistent/x.yaml)",
        "prefixlock build: 1 error",
    ]


def test_only_a_file_without_a_directory_entry_is_absent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    (root / "rules/rules.yaml").unlink()
    assert run(capsys, "build", "--root", str(root))[0] == 0


# --- 2. schema errors are reported with the loader's -----------------------------------------

DUPLICATE_AND_SCHEMA = """\
rules:
  - name: a
    kind: sometimes
    body: x
    bdy: y
  - name: b
    kind: always
    body: x
    body: z
"""


def test_a_duplicate_key_does_not_hide_the_schema_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    (root / "rules/rules.yaml").write_text(DUPLICATE_AND_SCHEMA, "utf-8")
    assert build_fails(capsys, root) == [
        "rules/rules.yaml:3:11: $.rules[0].kind: expected one of always, auto, agent, manual;"
        " got 'sometimes'",
        "rules/rules.yaml:5:5: $.rules[0]: unknown key 'bdy' (did you mean 'body'?)",
        "rules/rules.yaml:9:5: $.rules[1].body: duplicate key 'body' (first defined at line 8)",
        "prefixlock build: 3 errors",
    ]


def test_a_refused_value_or_key_adds_no_second_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # .inf stands as a placeholder (no "expected a string, got null"); a non-string key's
    # member is left out; the other rule's schema error is still found.
    text = (
        "rules:\n"
        "  - name: a\n"
        "    kind: always\n"
        "    body: .inf\n"
        "    true: x\n"
        "  - name: b\n"
        "    kind: never\n"
        "    body: x\n"
    )
    root = spec_root(tmp_path)
    (root / "rules/rules.yaml").write_text(text, "utf-8")
    assert build_fails(capsys, root) == [
        "rules/rules.yaml:4:11: $.rules[0].body: number .inf is not finite;"
        " JSON has no infinity or NaN",
        "rules/rules.yaml:5:5: $.rules[0]: key must be a string, got a boolean: true"
        " (quote it to make it a string)",
        "rules/rules.yaml:7:11: $.rules[1].kind: expected one of always, auto, agent, manual;"
        " got 'never'",
        "prefixlock build: 3 errors",
    ]


def test_nesting_too_deep_does_not_hide_the_schema_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = "rules:\n  - name: a\n    kind: sometimes\n    body: x\n" + (
        "    globs: " + "[" * 101 + "]" * 101 + "\n"
    )
    root = spec_root(tmp_path)
    (root / "rules/rules.yaml").write_text(text, "utf-8")
    assert build_fails(capsys, root) == [
        "rules/rules.yaml:3:11: $.rules[0].kind: expected one of always, auto, agent, manual;"
        " got 'sometimes'",
        # globs[0] is an array (what is nested in it too deep is skipped, unchecked)
        "rules/rules.yaml:5:13: $.rules[0].globs[0]: expected a string, got an array",
        "rules/rules.yaml:5:109: $: nesting deeper than 100 levels",
        "prefixlock build: 3 errors",
    ]


def test_loader_errors_carry_the_partial_document() -> None:
    with pytest.raises(DocumentErrors) as info:
        load_yaml_text("a: 1\na: 2\nb: .nan\n", "x.yaml")
    assert info.value.document.value == {"a": 1, "b": None}
    assert info.value.covers("$.b") and not info.value.covers("$.a")
    # A syntax error stays fatal: there is no document.
    with pytest.raises(SpecErrors) as syntax:
        load_yaml_text("a: [\n", "x.yaml")
    assert not isinstance(syntax.value, DocumentErrors)


# --- 3. a mistyped default mode ----------------------------------------------------------------


def test_a_mistyped_default_mode_says_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    agent = root / "rules/agent.yaml"
    agent.write_text(
        agent.read_text("utf-8").replace("default_mode: agent", "default_mode: agnet"), "utf-8"
    )
    assert build_fails(capsys, root) == [
        "rules/agent.yaml:5:15: $.default_mode: default mode 'agnet' is not one of the modes"
        " (did you mean 'agent'?)",
        "prefixlock build: 1 error",
    ]


# --- 4. a value an alias copies is located at the alias ------------------------------------


def test_a_duplicate_made_by_an_alias_is_reported_at_the_alias(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        "rules:\n"
        "  - &base\n"
        "    name: a\n"
        "    kind: always\n"
        "    body: x\n"
        "  - name: b\n"
        "    kind: always\n"
        "    body: y\n"
        "  - *base\n"
    )
    root = spec_root(tmp_path)
    (root / "rules/rules.yaml").write_text(text, "utf-8")
    assert build_fails(capsys, root) == [
        "rules/rules.yaml:9:5: $.rules[2].name: duplicate rule name 'a' (also at $.rules[0])",
        "prefixlock build: 1 error",
    ]
