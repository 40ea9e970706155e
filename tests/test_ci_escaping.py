"""Every text that reaches CI output is escaped for its format at one place,
:mod:`prefixlock.core.escaping` (issue 43 #3).

A case folder named with a newline made ``verify``, ``golden --update`` and ``diff``
print a line of its choosing (a CI runner runs ``::error``, ``::add-mask`` lines as
workflow commands), and markdown cells passed HTML, mentions and links through raw.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.core.escaping import (
    log_lines,
    markdown_code,
    markdown_fence,
    markdown_text,
    terminal,
    workflow_data,
    workflow_property,
)

CASE = Path("golden") / "identical-context"
EVIL = "x\n::error::pwned\n::add-mask::a\n  ##[error]old"


def test_log_lines_escapes_every_line_a_runner_would_run() -> None:
    assert log_lines(EVIL) == "x\n\\u003a:error::pwned\n\\u003a:add-mask::a\n  \\u0023#[error]old"
    assert log_lines("a :: b\n:x") == "a :: b\n:x"  # not at a line start, or one colon


def test_terminal_escapes_controls_and_line_separators() -> None:
    assert terminal("a\x1b[31mb\u2028c\u2029d\u202ee\tf\ng") == (
        "a\\u001b[31mb\\u2028c\\u2029d\\u202ee\tf\ng"
    )


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("<!-- hide", "&lt;!-- hide"),
        ("</details>", "&lt;/details&gt;"),
        ('<img src=x onerror="a()">', '&lt;img src=x onerror="a()"&gt;'),
        ("@octocat and @org/team", "&#64;octocat and &#64;org/team"),
        ("[x](javascript:alert(1))", "\\[x\\](javascript:alert(1))"),
        ("a|b `c` d\\e", "a\\|b \\`c\\` d\\\\e"),
        ("one\ntwo\u2028three\u2029four\r", "one\\u000atwo\\u2028three\\u2029four\\u000d"),
        ("x & y", "x &amp; y"),
    ],
)
def test_markdown_text_is_literal(text: str, escaped: str) -> None:
    assert markdown_text(text) == escaped


def test_markdown_code_and_fence_cannot_be_closed_from_inside() -> None:
    assert markdown_code("a`b|c\nd") == "``a`b\\|c\\u000ad``"
    assert markdown_code("`x") == "`` `x ``"
    assert markdown_fence(["```", "a\u2028b"]) == ["````text", "```", "a\\u2028b", "````"]


def test_workflow_command_escapes() -> None:
    assert workflow_data("50%\r\n::error::x") == "50%25%0D%0A::error::x"
    assert workflow_property("a:b,c\nd") == "a%3Ab%2Cc%0Ad"


def _evil_case(project: Path, name: str = EVIL) -> Path:
    evil = project / "golden" / name
    shutil.copytree(project / CASE, evil)
    return evil


def _no_command_lines(text: str) -> None:
    for line in text.splitlines():
        assert not line.lstrip(" \t").startswith(("::", "##[")), line


def test_golden_update_prints_no_workflow_command(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = _evil_case(project)
    (evil / "anthropic" / "0001.json").write_bytes(b"{}")
    capsys.readouterr()
    assert main(["golden", "--update"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (
        "updated golden/x\n\\u003a:error::pwned\n\\u003a:add-mask::a\n  \\u0023#[error]old/\n"
        "2 case(s), 1 updated\n"
    )
    _no_command_lines(captured.out + captured.err)


def test_verify_and_diff_print_no_workflow_command(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    evil = _evil_case(project)
    capsys.readouterr()
    assert main(["verify", str(evil)]) == 0
    captured = capsys.readouterr()
    assert "\\u003a:error::pwned" in captured.out
    _no_command_lines(captured.out + captured.err)
    shutil.copytree("golden", "old")
    (evil / "gemini" / "0002.json").write_bytes(b'{"contents":[]}')
    for fmt in ("text", "markdown", "github"):
        main(["diff", "old", "golden", "--format", fmt])
        captured = capsys.readouterr()
        if fmt != "github":
            _no_command_lines(captured.out + captured.err)
        else:  # its own commands only, one a line, the name escaped inside them
            lines = captured.out.splitlines()
            assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
            assert "pwned%0A::add-mask" in captured.out or "pwned" not in captured.out


def test_markdown_cells_escape_a_hostile_case_name(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "<!-- @admin [x](javascript:a) </details> \u2028"
    evil = _evil_case(project, name)
    shutil.copytree("golden", "old")
    (evil / "gemini" / "0002.json").write_bytes(b'{"contents":[]}')
    capsys.readouterr()
    main(["diff", "old", "golden", "--format", "markdown"])
    text = capsys.readouterr().out
    assert "&lt;!-- &#64;admin \\[x\\](javascript:a) &lt;/details&gt; \\u2028" in text
    assert "\u2028" not in text
    # Inside a fenced code block the name is literal text; outside, nothing is raw.
    prose, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            prose.append(line)
    shown = "\n".join(prose)
    for raw in ("<!--", "@admin", "[x]("):
        assert raw not in shown
    assert shown.count("</details>") == shown.count("<details>") == 2
