"""``prefixlock diff`` blames the spec line that changed, for every kind of spec edit.

One project made by ``init`` and committed; each test copies it, makes one edit (a rule
added, removed, moved to another kind, a field changed, a skill, a subagent, an MCP
server, a tool, the instructions, a template, a provider option), rebuilds the lock and
the golden files, and reads ``diff HEAD WORKTREE`` in text, markdown and GitHub
annotations: every cause each names is the edited line of the new file.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.review.sources import changed_lines


def _git(root: Path, *args: str) -> None:
    identity = ("-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false")
    subprocess.run(["git", "-C", str(root), *identity, *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("blame") / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "start")
    return root


Edit = Callable[[Path], None]


def replace(path: str, old: str, new: str) -> Edit:
    def edit(root: Path) -> None:
        file = root / path
        text = file.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{old!r} is not once in {path}"
        file.write_text(text.replace(old, new), encoding="utf-8")

    return edit


def line_of(root: Path, path: str, text: str) -> str:
    """``path:N`` of the one line of ``path`` that holds ``text``."""
    lines = (root / path).read_text(encoding="utf-8").split("\n")
    found = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, f"{text!r} is on lines {found} of {path}"
    return f"{path}:{found[0]}"


def causes(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, set[str]]:
    """Every spec line each output format names as a cause. The three commands render
    one report: the CLI computes ``diff HEAD WORKTREE`` once (a frozen value) and each
    command still parses its arguments and prints its format as before."""
    import prefixlock.cli.review as review_cli

    monkeypatch.chdir(root)
    monkeypatch.setattr(review_cli, "diff", functools.cache(review_cli.diff))
    found: dict[str, set[str]] = {}
    for fmt in ("text", "markdown", "github"):
        capsys.readouterr()
        main(["diff", "HEAD", "WORKTREE", f"--format={fmt}"])
        out = capsys.readouterr().out
        if fmt == "text":
            found[fmt] = set(re.findall(r"caused by (\S+)", out))
        elif fmt == "markdown":
            found[fmt] = set(re.findall(r"`((?:prompt|rules)/[^`]+:[0-9]+)`", out))
        else:
            found[fmt] = {f"{f}:{n}" for f, n in re.findall(r"file=([^,]+),line=([0-9]+)", out)}
    return found


def edited(base: Path, tmp_path: Path, *edits: Edit) -> Path:
    root = tmp_path / "agent"
    shutil.copytree(base, root, symlinks=True)
    for edit in edits:
        edit(root)
    assert main(["build", "--root", str(root)]) == 0
    assert main(["golden", "--update", str(root / "golden")]) == 0
    return root


NEW_RULE = """  - name: logging
    kind: always
    description: How to log.
    body: |
      # Logging

      - Use the standard logging module; never print in library code.

"""
NEW_SERVER = """
  - name: docs
    transport: http
    url: https://docs.example.test/mcp/
    tools:
      - name: search_docs
        description: Search the product documentation by keyword.
        input_schema:
          type: object
          properties:
            query: {type: string, description: Words to look for.}
          required: [query]
          additionalProperties: false
"""


def _insert_rule(root: Path) -> None:
    replace("rules/rules.yaml", "  - name: python-style\n", NEW_RULE + "  - name: python-style\n")(
        root
    )


def _remove_first_rule(root: Path) -> None:
    path = root / "rules" / "rules.yaml"
    text = path.read_text(encoding="utf-8")
    start, end = text.index("  - name: no-secrets\n"), text.index("  - name: python-style\n")
    path.write_text(text[:start] + text[end:], encoding="utf-8")


def _append_server(root: Path) -> None:
    path = root / "rules" / "mcp.yaml"
    path.write_text(path.read_text(encoding="utf-8") + NEW_SERVER, encoding="utf-8")


# (edit, file, a text on the changed line of the new file)
EDITS: dict[str, tuple[Edit, str, str]] = {
    "rule added": (_insert_rule, "rules/rules.yaml", "- name: logging"),
    "rule removed": (_remove_first_rule, "rules/rules.yaml", "- name: python-style"),
    "rule moved to another kind": (
        replace("rules/rules.yaml", "    kind: manual\n", "    kind: always  # was manual\n"),
        "rules/rules.yaml",
        "# was manual",
    ),
    "rule field changed": (
        replace("rules/rules.yaml", "(tables, columns, indexes, constraints)", "(tables, views)"),
        "rules/rules.yaml",
        "(tables, views)",
    ),
    "rule body typo": (
        replace("rules/rules.yaml", "the terminal to debug", "the termnial to debug"),
        "rules/rules.yaml",
        "termnial",
    ),
    "skill": (
        replace("rules/skills.yaml", "order, timing and shared-state", "order, timing, locale"),
        "rules/skills.yaml",
        "timing, locale",
    ),
    "subagent": (
        replace("rules/subagents.yaml", "model: claude-haiku-4-5", "model: claude-haiku-4-6"),
        "rules/subagents.yaml",
        "claude-haiku-4-6",
    ),
    "MCP server added": (_append_server, "rules/mcp.yaml", "- name: docs"),
    "MCP tool field": (
        replace("rules/mcp.yaml", "Sort field. Defaults to best match.", "Sort by this field."),
        "rules/mcp.yaml",
        "Sort by this field.",
    ),
    "tool": (
        replace("rules/tools.yaml", "files show their size.", "files show their byte size."),
        "rules/tools.yaml",
        "byte size",
    ),
    "tool parameter": (
        replace(
            "rules/tools.yaml",
            "description: Maximum number of lines to return. Defaults to the rest of the file.",
            "description: Maximum number of lines to return, by default to the end.",
        ),
        "rules/tools.yaml",
        "by default to the end",
    ),
    "instructions": (
        replace("prompt/cursor/instructions.md", "exact symbols and strings", "exact strings"),
        "prompt/cursor/instructions.md",
        "exact strings",
    ),
    "template": (
        replace("prompt/cursor/agent/runtime.md.j2", "<user_query>\n", "<user_query lang=en>\n"),
        "prompt/cursor/agent/runtime.md.j2",
        "<user_query lang=en>",
    ),
    "provider option": (
        replace("rules/providers.yaml", "reasoning: {effort: medium}", "reasoning: {effort: high}"),
        "rules/providers.yaml",
        "effort: high",
    ),
}


@pytest.mark.parametrize("kind", list(EDITS))
def test_every_format_blames_the_changed_line(
    kind: str,
    base: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    edit, path, text = EDITS[kind]
    root = edited(base, tmp_path, edit)
    expected = line_of(root, path, text)
    assert causes(root, monkeypatch, capsys) == {
        "text": {expected},
        "markdown": {expected},
        "github": {expected},
    }


def test_the_issue_case_a_new_rule_at_line_29_is_blamed_on_line_29(
    base: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = edited(base, tmp_path, _insert_rule)
    lines = (root / "rules" / "rules.yaml").read_text(encoding="utf-8").split("\n")
    assert lines[28] == "  - name: logging"  # line 29, as in the issue
    monkeypatch.chdir(root)
    capsys.readouterr()
    assert main(["diff", "HEAD", "WORKTREE"]) == 0
    out = capsys.readouterr().out.split("\n")
    assert out[1:3] == [
        "  0001-0003: PREFIX BREAK at $.messages[0].content[0].text: old '…y task.\\n<rule"
        " name=\"no-secrets\">\\n# Secrets\\n\\n- Never write AP…' new '…y task.\\n<rule"
        ' name="logging">\\n# Logging\\n\\n- Use the standard …\'',
        "             caused by rules/rules.yaml:29",
    ]
    assert "rules/rules.yaml:12" not in "\n".join(out)


def test_a_rule_moved_within_its_file_changes_nothing_and_blames_nothing(
    base: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Rules reach the context sorted by name: moving one in the file is no change."""

    def move(root: Path) -> None:
        path = root / "rules" / "rules.yaml"
        text = path.read_text(encoding="utf-8")
        start, end = text.index("  - name: no-secrets\n"), text.index("  - name: python-style\n")
        path.write_text(text[:start] + text[end:] + "\n" + text[start:end], encoding="utf-8")

    root = edited(base, tmp_path, move)
    assert causes(root, monkeypatch, capsys) == {"text": set(), "markdown": set(), "github": set()}


def test_changed_lines_of_two_roots(tmp_path: Path) -> None:
    """New lines where they are; a removed line at the new file's line now in its place;
    files compared in path order; a symbolic link is not followed."""
    old, new = tmp_path / "old", tmp_path / "new"
    for root in (old, new):
        (root / "rules").mkdir(parents=True)
        (root / "prompt").mkdir()
    (old / "rules" / "a.yaml").write_text("one\ntwo\nthree\n", encoding="utf-8")
    (new / "rules" / "a.yaml").write_text("one\nTWO\nthree\nfour\n", encoding="utf-8")
    (old / "prompt" / "x.md").write_text("keep\ndrop\nlast\n", encoding="utf-8")
    (new / "prompt" / "x.md").write_text("keep\nlast\n", encoding="utf-8")
    outside = tmp_path / "outside.md"
    outside.write_text("secret\n", encoding="utf-8")
    (new / "prompt" / "link.md").symlink_to(outside)
    found = [
        (c.location.file.rpartition("new/")[2], c.location.line, c.text, c.removed)
        for c in changed_lines(old, new)
    ]
    assert found == [
        ("prompt/x.md", 2, "drop", True),
        ("rules/a.yaml", 2, "TWO", False),
        ("rules/a.yaml", 2, "two", True),
        ("rules/a.yaml", 4, "four", False),
    ]
