"""``prefixlock diff --format markdown | github``: a pull-request comment and annotations.

One project for the module: ``init`` plus a second case in ask mode, then three commits —
the start, a runtime-template edit (agent mode only) and an instructions edit — each with
its lock and golden files rebuilt.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.review.diff.formats import _data, _property

ROOT_CONSEQUENCE = (
    "every new conversation starts a new cached prefix (the old one goes cold fleet-wide); "
    "running conversations keep their root and their cache"
)
CONTENT_CONSEQUENCE = (
    "only messages rendered from now on differ; running conversations keep their cache"
)
TEMPLATE = "prompt/cursor/agent/runtime.md.j2"
TABLE_HEAD = [
    "| case | provider | calls | unchanged | tail-only | breaks | invalidated | cost delta |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
]


def _git(root: Path, *args: str) -> None:
    identity = ("-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false")
    subprocess.run(["git", "-C", str(root), *identity, *args], check=True, capture_output=True)


def _rebuild_and_commit(root: Path, message: str) -> None:
    assert main(["build", "--root", str(root)]) == 0
    assert main(["golden", "--update", str(root / "golden")]) == 0
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", message)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("formats") / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0
    start = root / "golden" / "identical-context" / "scenario.yaml"
    ask = root / "golden" / "ask-mode" / "scenario.yaml"
    ask.parent.mkdir()
    ask.write_text(
        start.read_text(encoding="utf-8").replace("mode: agent", "mode: ask"), encoding="utf-8"
    )
    _git(root, "init", "-q")
    _rebuild_and_commit(root, "start")
    template = root / TEMPLATE
    template.write_text(template.read_text(encoding="utf-8") + "Be brief.\n", encoding="utf-8")
    _rebuild_and_commit(root, "template")
    instructions = root / "prompt" / "cursor" / "instructions.md"
    text = instructions.read_text(encoding="utf-8")
    instructions.write_text(text.replace("Cursor", "Cursory", 1), encoding="utf-8")
    _rebuild_and_commit(root, "instructions")
    return root


def _diff(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *argv: str,
) -> tuple[int, list[str]]:
    monkeypatch.chdir(project)
    capsys.readouterr()
    code = main(["diff", *argv])
    return code, capsys.readouterr().out.split("\n")[:-1]


def test_markdown_of_a_template_edit_puts_the_verdict_first_and_folds_unchanged_rows(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~2", "HEAD~1", "--format=markdown")
    assert code == 0
    assert lines[:4] == [
        "### prefixlock diff: rendered-content change, running conversations unaffected",
        "",
        "- **rendered-content change** of `templates/prompt/cursor/agent/runtime.md.j2`,"
        f" caused by `HEAD~1:{TEMPLATE}:45`: {CONTENT_CONSEQUENCE}",
        "",
    ]
    assert lines[4].startswith("compared 30 calls: 15 unchanged, 15 prefix break (old: golden/")
    assert lines[5:8] == ["", *TABLE_HEAD]
    changed = lines[8:13]
    assert [row.split(" | ")[:2] for row in changed] == [
        ["| identical-context", name]
        for name in ("anthropic", "bedrock-converse", "gemini", "openai-chat", "openai-responses")
    ]
    assert lines[13:17] == [
        "",
        "<details><summary>what changed, call by call</summary>",
        "",
        "```text",
    ]
    end = lines.index("```")
    assert lines[17].startswith("identical-context/anthropic  (simulated cost")
    assert f"             caused by HEAD~1:{TEMPLATE}:45" in lines[17:end]
    assert lines[end : end + 6] == [
        "```",
        "",
        "</details>",
        "",
        "<details><summary>5 unchanged rows</summary>",
        "",
    ]
    assert lines[end + 6 : end + 8] == TABLE_HEAD
    assert lines[end + 8] == "| ask-mode | anthropic | 3 | 3 | 0 | 0 | - | 0 |"
    assert lines[end + 13 :] == ["", "</details>"]


def test_markdown_of_an_instructions_edit_is_a_root_change_and_exits_1(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~1", "HEAD", "--format=markdown")
    assert code == 1
    assert lines[:4] == [
        "### prefixlock diff: root change: new conversations start a new cached prefix",
        "",
        "- **root change** of `instructions.md`, caused by"
        f" `HEAD:prompt/cursor/instructions.md:1`: {ROOT_CONSEQUENCE}",
        "",
    ]
    assert "unchanged rows</summary>" not in "\n".join(lines)


def test_github_annotations_at_the_spec_lines(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~1", "HEAD", "--format=github")
    assert code == 1
    assert lines == [
        "::error file=prompt/cursor/instructions.md,line=1,title=prefixlock%3A root change::"
        f"root change of instructions.md: {ROOT_CONSEQUENCE}",
        "::notice title=prefixlock diff::compared 30 calls: 30 prefix break;"
        " deployment impact: root change",
    ]
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~2", "HEAD~1", "--format=github")
    assert code == 0
    content = (
        f"file={TEMPLATE},line=45,title=prefixlock%3A rendered-content change::"
        f"rendered-content change of templates/prompt/cursor/agent/runtime.md.j2:"
        f" {CONTENT_CONSEQUENCE}"
    )
    totals = (
        "::notice title=prefixlock diff::compared 30 calls: 15 unchanged, 15 prefix break;"
        " deployment impact: rendered-content change"
    )
    assert lines == [f"::notice {content}", totals]
    code, lines = _diff(
        project, monkeypatch, capsys, "HEAD~2", "HEAD~1", "--format=github", "--strict"
    )
    assert (code, lines) == (1, [f"::warning {content}", totals])


def test_github_stale_golden_files_are_errors(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(project), str(clone)], check=True)
    instructions = clone / "prompt" / "cursor" / "instructions.md"
    instructions.write_text(instructions.read_text(encoding="utf-8") + "More.\n", "utf-8")
    assert main(["build", "--root", str(clone)]) == 0
    code, lines = _diff(clone, monkeypatch, capsys, "HEAD", "WORKTREE", "--format=github")
    assert code == 1
    assert [line.split("::")[1] for line in lines] == [
        "error title=prefixlock%3A stale golden files",
        "error title=prefixlock%3A stale golden files",
        "notice title=prefixlock diff",
    ]
    assert lines[0].split("::")[2].startswith("golden/ask-mode was built from bundle sha256:")


def test_workflow_command_escaping() -> None:
    assert _data("50% of\r\nit") == "50%25 of%0D%0Ait"
    assert _property("a:b,c%") == "a%3Ab%2Cc%25"


def test_two_body_files_in_both_formats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "anthropic" / "0001.json"
    two = tmp_path / "anthropic" / "0002.json"
    one.parent.mkdir()
    body = '{"model":"m","max_tokens":1,"messages":[%s]}'
    one.write_text(body % '{"role":"user","content":"a"}', encoding="utf-8")
    two.write_text(
        body % '{"role":"user","content":"a"},{"role":"assistant","content":"b"}',
        encoding="utf-8",
    )
    code, lines = _diff(tmp_path, monkeypatch, capsys, str(one), str(two), "--format=markdown")
    assert (code, lines) == (
        0,
        [
            "### prefixlock diff: rendered-content change, running conversations unaffected",
            "",
            f"- **rendered-content change**: {CONTENT_CONSEQUENCE}",
            "",
            f"`{one}` → `{two}`",
            "",
            "```text",
            "anthropic: tail append (+1 item)",
            "```",
        ],
    )
    code, lines = _diff(tmp_path, monkeypatch, capsys, str(one), str(two), "--format=github")
    assert (code, lines) == (
        0,
        [
            "::notice title=prefixlock%3A rendered-content change::rendered-content change:"
            f" {CONTENT_CONSEQUENCE}",
            "::notice title=prefixlock diff::tail-only; deployment impact: rendered-content change",
        ],
    )
