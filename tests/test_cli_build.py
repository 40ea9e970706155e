"""The command line: ``prefixlock build`` / ``build --check`` / ``schema`` / ``init``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from prefixlock.cli.commands import COMMANDS, main
from prefixlock.core import canonical
from prefixlock.providers import NAMES
from prefixlock.spec.build import LOCK_FILE, MANIFEST, build_bundle, find_example_root
from prefixlock.spec.scaffold import GITIGNORE, point_headers_at_schemas
from prefixlock.spec.validate import SCHEMA_NAMES, schema_text
from schema_links import editor_errors, header_schema, ref_problems
from test_bundle import BROKEN, Mutation

DATA = Path(__file__).resolve().parent / "data" / "specs"
MINIMAL = DATA / "minimal"
REPO = Path(__file__).resolve().parents[1]


def spec_root(tmp_path: Path, name: str = "spec") -> Path:
    root = tmp_path / name
    shutil.copytree(MINIMAL, root)
    return root


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def break_tool_description(root: Path) -> None:
    tools = root / "rules" / "tools.yaml"
    tools.write_text(tools.read_text("utf-8").replace("Read a file.", "Read one file."), "utf-8")


# --- build --------------------------------------------------------------------------------


def test_build_writes_outputs_and_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    code, out, err = run(capsys, "build", "--root", str(root))
    assert (code, err) == (0, "")
    bundle = build_bundle(root)
    lines = out.splitlines()
    assert lines[0] == "agent   mini"
    assert lines[1] == f"digest  {bundle.digest}"
    assert lines[2] == "parts   8"
    assert lines[3].split() == [
        "context-defaults.json",
        str(bundle.parts[0].size),
        "B",
        f"sha256:{bundle.parts[0].sha256[:12]}",
    ]
    assert lines[-3] == "tools   3: edit_file, mcp_call, read_file"
    assert lines[-2] == "modes   agent (default), ask"
    assert lines[-1] == (
        f"wrote {root / 'build'}/ (8 parts and manifest.json) and {root / LOCK_FILE}"
    )
    assert (root / LOCK_FILE).read_bytes() == (root / "build" / MANIFEST).read_bytes()


def test_build_defaults_to_the_current_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = spec_root(tmp_path)
    monkeypatch.chdir(root)
    code, out, _ = run(capsys, "build")
    assert code == 0
    assert out.splitlines()[-1] == "wrote build/ (8 parts and manifest.json) and prefixlock.lock"
    assert (root / "build" / "tools.json").is_file()


def test_build_with_explicit_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = spec_root(tmp_path)
    out_dir = tmp_path / "out" / "bundle"
    assert run(capsys, "build", "--root", str(root), "--out", str(out_dir))[0] == 0
    assert (out_dir / "tools.json").is_file()
    assert not (root / "build").exists()
    assert (root / LOCK_FILE).is_file()


def test_build_error_prints_every_error_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    (root / "prompt/mini/instructions.md").unlink()
    tools = root / "rules/tools.yaml"
    tools.write_text(tools.read_text("utf-8").replace("    description: Read a file.\n", ""))
    before = tree(root)
    code, out, err = run(capsys, "build", "--root", str(root))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "rules/agent.yaml:3:15: $.instructions: file 'prompt/mini/instructions.md' does not exist",
        "rules/tools.yaml:2:5: $.tools[0]: missing required key 'description'",
        "prefixlock build: 2 errors",
    ]
    assert tree(root) == before
    assert not (root / "build").exists()
    assert not (root / LOCK_FILE).exists()


@pytest.mark.parametrize(
    ("mutation", "expected"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN]
)
def test_every_error_class_exits_2_with_its_message_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mutation: Mutation, expected: list[str]
) -> None:
    root = spec_root(tmp_path)
    mutation(root)
    before = tree(root)
    code, out, err = run(capsys, "build", "--root", str(root))
    assert (code, out) == (2, "")
    count = len(expected)
    assert err.splitlines() == [*expected, f"prefixlock build: {count} error{'s' * (count > 1)}"]
    assert tree(root) == before
    assert not (root / "build").exists()
    assert not (root / LOCK_FILE).exists()
    assert sorted(p.name for p in root.iterdir()) == ["prompt", "rules"]


def test_build_error_leaves_earlier_outputs_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    assert run(capsys, "build", "--root", str(root))[0] == 0
    before = tree(root)
    runtime = root / "prompt/mini/agent/runtime.md.j2"
    runtime.write_text("{{ query }\n", "utf-8")
    code, _, err = run(capsys, "build", "--root", str(root))
    assert code == 2
    assert "prompt/mini/agent/runtime.md.j2:1" in err
    assert "template syntax error: unexpected '}'" in err
    after = tree(root)
    del after["prompt/mini/agent/runtime.md.j2"], before["prompt/mini/agent/runtime.md.j2"]
    assert after == before
    assert sorted(p.name for p in root.iterdir()) == ["build", LOCK_FILE, "prompt", "rules"]


def test_missing_root_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "build", "--root", str(tmp_path / "nope"))
    assert code == 2
    assert err == f"prefixlock build: spec root {str(tmp_path / 'nope')!r} is not a folder\n"


def test_foreign_out_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = spec_root(tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("keep me")
    code, _, err = run(capsys, "build", "--root", str(root), "--out", str(tmp_path / "docs"))
    assert code == 2
    assert "is not empty and holds no manifest.json of an earlier build" in err
    assert (tmp_path / "docs" / "index.md").read_text() == "keep me"
    assert not (root / LOCK_FILE).exists()


# --- build --check ------------------------------------------------------------------------


def test_check_passes_right_after_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = spec_root(tmp_path)
    assert run(capsys, "build", "--root", str(root))[0] == 0
    before = tree(root)
    code, out, err = run(capsys, "build", "--root", str(root), "--check")
    digest = build_bundle(root).digest
    assert (code, out, err) == (0, f"up to date: prefixlock.lock matches bundle {digest}\n", "")
    code, out, _ = run(
        capsys, "build", "--root", str(root), "--check", "--out", str(root / "build")
    )
    assert code == 0
    assert out == f"up to date: prefixlock.lock and {root / 'build'}/ match bundle {digest}\n"
    assert tree(root) == before


def test_check_detects_drift_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    assert run(capsys, "build", "--root", str(root))[0] == 0
    break_tool_description(root)
    before = tree(root)
    code, out, err = run(capsys, "build", "--root", str(root), "--check")
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "prefixlock.lock differs: tools.json changed",
        "prefixlock build --check: out of date; run `prefixlock build` to update",
    ]
    code, _, err = run(
        capsys, "build", "--root", str(root), "--check", "--out", str(root / "build")
    )
    assert code == 1
    assert err.splitlines()[:-1] == [
        "prefixlock.lock differs: tools.json changed",
        "manifest.json differs",
        "tools.json differs",
    ]
    assert tree(root) == before


def test_check_without_lock_or_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = spec_root(tmp_path)
    code, _, err = run(capsys, "build", "--root", str(root), "--check")
    assert code == 1
    assert err.splitlines()[0] == "prefixlock.lock is missing"
    code, _, err = run(
        capsys, "build", "--root", str(root), "--check", "--out", str(root / "build")
    )
    assert code == 1
    assert err.splitlines()[:2] == ["prefixlock.lock is missing", "build/ is missing"]
    assert sorted(p.name for p in root.iterdir()) == ["prompt", "rules"]


def test_check_ignores_a_stale_default_build_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --out only the committed lock file counts: build/ is a local artefact."""
    root = spec_root(tmp_path)
    assert run(capsys, "build", "--root", str(root))[0] == 0
    (root / "build" / "tools.json").write_text("[]")
    assert run(capsys, "build", "--root", str(root), "--check")[0] == 0


def test_check_reports_spec_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = spec_root(tmp_path)
    (root / "rules/tools.yaml").unlink()
    code, _, err = run(capsys, "build", "--root", str(root), "--check")
    assert code == 2
    assert err.splitlines() == [
        "rules/tools.yaml: required file is missing",
        "prefixlock build: 1 error",
    ]


# --- usage, schema, init, python -m -------------------------------------------------------


@pytest.mark.parametrize("argv", [[], ["build", "--bogus"], ["nope"], ["schema", "nope"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "usage: prefixlock" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command.name in out


def test_schema_writes_every_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "schemas"
    code, out, _ = run(capsys, "schema", "--out", str(out_dir))
    assert code == 0
    assert sorted(p.name for p in out_dir.iterdir()) == sorted(
        f"{name}.schema.json" for name in SCHEMA_NAMES
    )
    for name in SCHEMA_NAMES:
        written = (out_dir / f"{name}.schema.json").read_text("utf-8")
        assert written == schema_text(name)
        assert isinstance(canonical.loads(written), dict)
    assert len(out.splitlines()) == len(SCHEMA_NAMES)
    assert ref_problems(out_dir) == []  # side by side, every $ref resolves among the copies


def test_schema_without_out_prints_one_schema_to_stdout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "schema", "rules")
    assert (code, err) == (0, "")
    assert out == schema_text("rules")  # exactly the bytes --out writes, to redirect


def test_schema_without_out_or_kind_prints_every_schema_by_file_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "schema")
    assert (code, err) == (0, "")
    printed = canonical.loads(out)
    assert printed == {
        f"{name}.schema.json": canonical.loads(schema_text(name)) for name in SCHEMA_NAMES
    }
    assert list(printed) == sorted(printed)


def test_schema_with_a_kind_and_out_writes_that_schema_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "schema", "tools", "--out", str(tmp_path / "s"))
    assert (code, out, err) == (0, f"wrote {tmp_path / 's' / 'tools.schema.json'}\n", "")
    assert tree(tmp_path / "s") == {"tools.schema.json": schema_text("tools").encode()}


def test_schema_refuses_an_unknown_kind(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schema", "rule")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "prefixlock schema: error: argument KIND: invalid choice: 'rule' (choose from "
        + ", ".join(repr(n) for n in sorted(SCHEMA_NAMES))
        + ")"
    )


def test_init_scaffolds_a_spec_root_that_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "my-agent"
    code, out, err = run(capsys, "init", str(target))
    assert (code, err) == (0, "")
    assert sorted(p.name for p in target.iterdir()) == [
        ".gitattributes",
        ".gitignore",
        "golden",
        LOCK_FILE,
        "prompt",
        "rules",
        "schemas",
    ]
    assert out.splitlines()[0].startswith(f"created {target}/ from the bundled example")
    assert "next steps:" in out
    # the scaffold is the example, and its lock file is current
    assert run(capsys, "build", "--root", str(target), "--check")[0] == 0
    assert run(capsys, "build", "--root", str(target))[0] == 0
    assert (target / "build" / "tools.json").is_file()


def test_init_starts_a_golden_scenario_that_verify_replays_in_the_new_project(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "my-agent"
    assert run(capsys, "init", str(target))[0] == 0
    scenario = target / "golden" / "identical-context" / "scenario.yaml"
    first, _, rest = scenario.read_bytes().partition(b"\n")
    assert first == b"# yaml-language-server: $schema=../../schemas/scenario.schema.json"
    shipped = REPO / "golden" / "identical-context" / "scenario.yaml"
    assert rest == shipped.read_bytes().partition(b"\n")[2]
    assert header_schema(scenario) == (target / "schemas" / "scenario.schema.json").resolve()
    monkeypatch.chdir(target)
    code, out, err = run(capsys, "verify", "--no-hash-seed")
    assert (code, err) == (0, "")
    # the example configures every provider
    assert out.endswith(f"1 scenario(s) x {len(NAMES)} provider(s): every invariant holds\n")


def test_init_writes_the_schemas_and_points_the_yaml_headers_at_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "my-agent"
    code, out, _ = run(capsys, "init", str(target), "--name", "cursor")  # the example's files
    assert code == 0
    assert f"wrote {target / 'schemas'}/ ({len(SCHEMA_NAMES)} JSON Schemas;" in out
    schemas = target / "schemas"
    assert tree(schemas) == {
        f"{name}.schema.json": schema_text(name).encode("utf-8") for name in SCHEMA_NAMES
    }
    assert ref_problems(schemas) == []
    example = find_example_root() / "rules"
    yaml_files = sorted((target / "rules").glob("*.yaml"))
    assert [p.name for p in yaml_files] == sorted(p.name for p in example.glob("*.yaml"))
    for path in yaml_files:
        first, _, rest = path.read_bytes().partition(b"\n")
        kind = path.stem
        assert first == f"# yaml-language-server: $schema=../schemas/{kind}.schema.json".encode()
        # only the first line is rewritten
        assert rest == (example / path.name).read_bytes().partition(b"\n")[2]
        assert header_schema(path) == (schemas / f"{kind}.schema.json").resolve()
        assert editor_errors(path) == []


def test_init_rewrites_only_headers_naming_a_shipped_schema(tmp_path: Path) -> None:
    files = {
        "a.yaml": b"# yaml-language-server: $schema=https://x.test/s/tools.schema.json\na: 1\n",
        "b.yaml": b"# yaml-language-server: $schema=nope.schema.json\nb: 1\n",
        "c.yaml": b"# just a comment\n# yaml-language-server: $schema=tools.schema.json\n",
        "d.yaml": b"# yaml-language-server: $schema=mcp.schema.json",
        "e.txt": b"# yaml-language-server: $schema=tools.schema.json\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    point_headers_at_schemas(tmp_path)
    assert tree(tmp_path) == {
        **files,
        "a.yaml": b"# yaml-language-server: $schema=../schemas/tools.schema.json\na: 1\n",
        "d.yaml": b"# yaml-language-server: $schema=../schemas/mcp.schema.json",
    }


def test_init_writes_a_gitignore_for_the_build_output_and_virtualenvs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "my-agent"
    assert run(capsys, "init", str(target))[0] == 0
    assert (target / ".gitignore").read_text(encoding="utf-8") == GITIGNORE
    assert GITIGNORE == (
        "# prefixlock build writes build/; the lock file and golden/ are committed.\n"
        "/build/\n"
        "# Python virtual environments and caches.\n"
        ".venv/\n"
        "venv/\n"
        "__pycache__/\n"
        "*.py[cod]\n"
        ".pytest_cache/\n"
        ".mypy_cache/\n"
        ".ruff_cache/\n"
    )


def test_init_with_a_name_scaffolds_that_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "helper"
    code, out, err = run(capsys, "init", str(target), "--name", "shop-helper")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        f"created {target}/ from the bundled example: agent 'shop-helper', 16 tools,"
        " modes agent, ask, debug, plan"
    )
    assert sorted(p.name for p in (target / "prompt").iterdir()) == ["shop-helper"]
    agent = (target / "rules" / "agent.yaml").read_text(encoding="utf-8")
    example = (find_example_root() / "rules" / "agent.yaml").read_text(encoding="utf-8")
    assert (
        agent.split("\n")[1:]
        == (
            example.replace("name: cursor\n", "name: shop-helper\n", 1)
            .replace("prompt/cursor/", "prompt/shop-helper/")
            .split("\n")[1:]
        )
    )
    assert "cursor" not in agent.split("\n", 1)[1].replace(".cursor/", "")
    monkeypatch.chdir(target)
    capsys.readouterr()
    assert run(capsys, "build", "--check")[0] == 0
    assert run(capsys, "golden", "--check")[0] == 0
    code, out, err = run(capsys, "verify", "--no-hash-seed")
    assert (code, err) == (0, "")
    calls = (target / "golden" / "identical-context" / "calls.md").read_text(encoding="utf-8")
    assert f"- bundle: `{build_bundle(target).digest}`" in calls


def test_init_names_the_agent_after_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "shop-helper"
    code, out, err = run(capsys, "init", str(target))
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == (
        f"created {target}/ from the bundled example: agent 'shop-helper', 16 tools,"
        " modes agent, ask, debug, plan"
    )
    assert sorted(p.name for p in (target / "prompt").iterdir()) == ["shop-helper"]
    instructions = target / "prompt" / "shop-helper" / "instructions.md"
    first = instructions.read_text(encoding="utf-8").split("\n", 1)[0]
    assert first.startswith("You are shop-helper, an AI coding agent working in")
    assert "Cursor" not in instructions.read_text(encoding="utf-8")
    assert build_bundle(target).agent == "shop-helper"


@pytest.mark.parametrize(
    ("folder", "agent"),
    [
        ("My Agent_2", "my-agent-2"),
        ("--Shop..Helper--", "shop-helper"),
        ("Ünïcode bot", "unicode-bot"),
        ("x" * 70, "x" * 64),
        ("___", "agent"),
    ],
)
def test_init_sanitizes_the_folder_name_into_an_agent_name(
    folder: str, agent: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / folder
    assert run(capsys, "init", str(target))[0] == 0
    assert build_bundle(target).agent == agent
    assert sorted(p.name for p in (target / "prompt").iterdir()) == [agent]


def test_init_of_a_relative_folder_names_the_agent_after_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert run(capsys, "init", "../Billing Bot/")[0] == 0
    assert build_bundle(tmp_path / "Billing Bot").agent == "billing-bot"


def test_init_prints_next_steps_with_update_diff_and_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "helper"
    code, out, err = run(capsys, "init", str(target))
    assert (code, err) == (0, "")
    assert out.split("next steps:\n", 1)[1].splitlines() == [
        f"  edit {target}/rules/*.yaml and {target}/prompt/helper/",
        f"  cd {target}",
        "  prefixlock update              # after an edit: rebuild, refresh prefixlock.lock and"
        " golden/*/ bodies",
        "  prefixlock diff HEAD WORKTREE  # what the edit does to the cache, before you commit",
        "  prefixlock check               # in CI and pre-commit: the lock, golden/ and verify",
    ]


@pytest.mark.parametrize("name", ["Shop", "-x", "a b", "x" * 65, ""])
def test_init_refuses_a_name_that_is_not_an_agent_name(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "helper"
    code, out, err = run(capsys, "init", str(target), f"--name={name}")
    assert (code, out) == (2, "")
    assert err == (
        f"prefixlock init: --name {name!r}: an agent name is lowercase letters, digits and"
        " '-', starting with a letter or digit (at most 64 characters)\n"
    )
    assert not target.exists()


def test_init_into_an_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    target.chmod(0o750)
    assert run(capsys, "init", str(target))[0] == 0
    assert (target / LOCK_FILE).is_file()
    assert target.stat().st_mode & 0o7777 == 0o750  # the folder's own mode, kept


def test_init_dot_fills_the_current_folder_in_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prefixlock init .`` (it failed with "[Errno 22] Invalid argument: '.'"): the
    current folder is filled in place, so a shell standing in it sees the files; the
    agent is named after the folder, as for a path."""
    here = tmp_path / "Shop Helper"
    here.mkdir()
    inode = here.stat().st_ino
    monkeypatch.chdir(here)
    code, out, err = run(capsys, "init", ".")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (
        "created ./ from the bundled example: agent 'shop-helper', 16 tools,"
        " modes agent, ask, debug, plan"
    )
    assert lines[1].startswith("wrote prefixlock.lock (bundle sha256:")
    assert out.split("next steps:\n", 1)[1].splitlines()[:2] == [
        "  edit rules/*.yaml and prompt/shop-helper/",
        "  prefixlock update              # after an edit: rebuild, refresh prefixlock.lock and"
        " golden/*/ bodies",
    ]
    assert here.stat().st_ino == inode  # the same folder, not a new one renamed over it
    assert sorted(p.name for p in Path(".").iterdir()) == [
        ".gitattributes",
        ".gitignore",
        "golden",
        "prefixlock.lock",
        "prompt",
        "rules",
        "schemas",
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Shop Helper"]  # no staging left
    assert build_bundle(Path(".")).agent == "shop-helper"
    assert run(capsys, "build", "--check")[0] == 0


def test_init_of_an_empty_folder_that_fails_leaves_it_empty(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "empty"
    target.mkdir()
    moves: list[str] = []
    real = os.replace

    def failing(src: str | Path, dst: str | Path) -> None:
        if Path(dst).parent == target:  # an entry moved out of the staging folder
            moves.append(Path(dst).name)
            if len(moves) == 3:
                raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    code, out, err = run(capsys, "init", str(target))
    assert (code, out) == (2, "")
    assert err == "prefixlock init: [Errno 28] No space left on device\n"
    assert moves == [".gitattributes", ".gitignore", "golden"]
    assert list(target.iterdir()) == []  # the two moved went back, the staging is gone


def test_init_makes_its_folder_as_mkdir_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The project is built in a private staging folder (mode 700) and moved in whole:
    it kept that mode, so other users, containers and web servers could not read it."""
    old = os.umask(0o022)
    try:
        assert run(capsys, "init", str(tmp_path / "new"))[0] == 0
    finally:
        os.umask(old)
    assert (tmp_path / "new").stat().st_mode & 0o7777 == 0o755
    assert (tmp_path / "new" / "golden").stat().st_mode & 0o7777 == 0o755


def test_init_refuses_a_non_empty_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "busy"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    code, out, err = run(capsys, "init", str(target))
    assert (code, out) == (2, "")
    assert err == (
        f"prefixlock init: refusing to init {str(target)!r}: it exists and is not empty;"
        " give a new or an empty folder\n"
    )
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["busy"]


def test_python_dash_m_compiler(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "compiler", "build", "--root", str(root), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == "prefixlock.lock is missing"


# --- determinism --------------------------------------------------------------------------

ENVIRONMENTS = [
    {"PYTHONHASHSEED": "0", "TZ": "UTC", "LC_ALL": "C"},
    {"PYTHONHASHSEED": "123", "TZ": "Asia/Kolkata", "LC_ALL": "C.UTF-8"},
    {"PYTHONHASHSEED": "random", "TZ": "America/St_Johns", "LC_ALL": "C.UTF-8"},
]


def build_in_subprocess(root: Path, out: Path, env: dict[str, str]) -> dict[str, bytes]:
    full_env = {k: v for k, v in os.environ.items() if k not in ("LANG", "LANGUAGE")}
    full_env.update(env)
    result = subprocess.run(
        [sys.executable, "-m", "compiler", "build", "--root", str(root), "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env=full_env,
    )
    assert result.returncode == 0, result.stderr
    files = {f"out/{k}": v for k, v in tree(out).items()}
    files[LOCK_FILE] = (root / LOCK_FILE).read_bytes()
    return files


@pytest.mark.parametrize("source", [MINIMAL, REPO], ids=["minimal", "example"])
def test_build_is_byte_identical_across_hash_seeds_time_zones_and_locales(
    tmp_path: Path, source: Path
) -> None:
    outputs = []
    for index, env in enumerate(ENVIRONMENTS):
        root = tmp_path.joinpath(f"root-{index}", *["nested"] * index)
        root.mkdir(parents=True)
        for folder in ("prompt", "rules"):
            shutil.copytree(source / folder, root / folder)
        outputs.append(build_in_subprocess(root, tmp_path / f"out-{index}", env))
    assert outputs[0] == outputs[1] == outputs[2]
    assert len(outputs[0]) > 5


def test_build_renders_every_template_once_with_a_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "agent"
    assert run(capsys, "init", str(target), "--name", "cursor")[0] == 0
    template = target / "prompt" / "cursor" / "ask" / "runtime.md.j2"
    lines = template.read_text(encoding="utf-8").split("\n")
    number = next(i for i, line in enumerate(lines, 1) if "{{ mode.reminder" in line)
    template.write_text(
        template.read_text(encoding="utf-8").replace("{{ mode.reminder", "{{ mode.remindr"),
        encoding="utf-8",
    )
    context = target / "prompt" / "cursor" / "context.md.j2"
    source = context.read_text(encoding="utf-8")
    branch = "Branch: {{ git.branch }}"  # inside the git section's block
    context_line = source.split("\n").index(branch) + 1
    context.write_text(source.replace(branch, branch + " {{ git.brnch }}"), encoding="utf-8")
    code, out, err = run(capsys, "build", "--root", str(target))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"prompt/cursor/ask/runtime.md.j2:{number}: undefined value: "
        "'dict object' has no attribute 'remindr' (did you mean 'reminder'?)",
        f"prompt/cursor/context.md.j2:{context_line}: undefined value: "
        "'dict object' has no attribute 'brnch' (did you mean 'branch'?)",
        "prefixlock build: 2 errors",
    ]


# --- build --check --diff ----------------------------------------------------------------


def test_check_diff_prints_the_lock_and_part_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    assert main(["build", "--root", str(root)]) == 0
    old = build_bundle(root)
    break_tool_description(root)
    new = build_bundle(root)
    capsys.readouterr()
    code, out, err = run(capsys, "build", "--root", str(root), "--check", "--diff")
    assert code == 1
    assert err.splitlines() == [
        "prefixlock.lock differs: tools.json changed",
        "prefixlock build --check: out of date; run `prefixlock build` to update",
    ]
    lock, tools = str(root / LOCK_FILE), str(root / "build" / "tools.json")
    old_tools, new_tools = old.part("tools.json"), new.part("tools.json")
    assert out.splitlines()[:7] == [
        f"--- {lock}",
        f"+++ {lock}",
        "@@ -1,6 +1,6 @@",
        " {",
        '   "agent": "mini",',
        f'-  "digest": "{old.digest}",',
        f'+  "digest": "{new.digest}",',
    ]
    assert f'-      "sha256": "{old_tools.sha256}",' in out.splitlines()
    assert f'+      "size": {new_tools.size}' in out.splitlines()
    part = out[out.index(f"--- {tools}") :].splitlines()
    assert part[1] == f"+++ {tools}"
    assert [line for line in part if line[:1] in "+-" and line[:3] not in ("---", "+++")] == [
        '-    "description": "Read a file.",',
        '+    "description": "Read one file.",',
    ]
    assert "manifest.json" not in out  # the lock file's twin


def test_check_diff_without_an_earlier_build_shows_the_lock_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    assert main(["build", "--root", str(root), "--out", str(tmp_path / "elsewhere")]) == 0
    break_tool_description(root)
    capsys.readouterr()
    code, out, _ = run(capsys, "build", "--root", str(root), "--check", "--diff")
    assert code == 1
    assert [line for line in out.splitlines() if line.startswith("---")] == [
        f"--- {root / LOCK_FILE}"
    ]


def test_check_diff_of_an_up_to_date_root_prints_no_diff(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = spec_root(tmp_path)
    assert main(["build", "--root", str(root)]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, "build", "--root", str(root), "--check", "--diff")
    assert (code, err) == (0, "")
    assert out.startswith("up to date: ")


def test_diff_without_check_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "build", "--root", str(spec_root(tmp_path)), "--diff")
    assert (code, out) == (2, "")
    assert err == "prefixlock build: --diff goes with --check (a build writes; it shows no diff)\n"
