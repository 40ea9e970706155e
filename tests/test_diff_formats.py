"""``prefixlock diff --format markdown | github``: a pull-request comment and annotations.

One project for the module: ``init`` plus a second case in ask mode, then three commits —
the start, a runtime-template edit (agent mode only) and an instructions edit — each with
its lock and golden files rebuilt.
"""

from __future__ import annotations

import re
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
from prefixlock.cache.prices import PRICE_TABLE, input_price
from prefixlock.cli.commands import main
from prefixlock.review.diff import diff
from prefixlock.review.diff.formats import _data, _dollars, _property, markdown

ROOT_CONSEQUENCE = (
    "every new conversation starts a new cached prefix (the old one goes cold fleet-wide); "
    "running conversations keep their root and their cache"
)
CONTENT_CONSEQUENCE = (
    "only messages rendered from now on differ, appended at the tail of running"
    " conversations, which keep their cache"
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


def check_cost_rows(rows: list[str], changed: str) -> list[str]:
    """The cost rows are ``| provider | model | changed | old → new tokens | change |``
    with change = new - old and its dollars at the model's list price; returns the
    providers."""
    providers = []
    for row in rows:
        cells = row.strip("|").split(" | ")
        provider, model, calls, costs, change = (cell.strip() for cell in cells)
        providers.append(provider)
        assert calls == changed
        match = re.fullmatch(r"([0-9,.]+) → ([0-9,.]+) tokens", costs)
        assert match is not None, costs
        old, new = (Fraction(m.replace(",", "")) for m in match.groups())
        price = input_price(model)
        if price is None:  # a model the price table does not know: tokens, never a guess
            tokens = change.removesuffix(" tokens (no list price for this model)")
            assert tokens != change, change
            assert abs(Fraction(tokens) - (new - old)) <= Fraction(1, 100)
            continue
        tokens, dollars = change.split(" tokens, ")
        assert abs(Fraction(tokens) - (new - old)) <= Fraction(1, 100)
        assert (
            dollars == _dollars(Fraction(tokens) * price / 1_000_000)
            or abs(float(dollars.replace("$", "")) - float(Fraction(tokens) * price / 1_000_000))
            <= float(price) / 1e8
        )  # the tokens cell is rounded
    return providers


COST_INTRO = (
    "**Cost per changed call**, simulated on the golden conversations with each provider's"
    " cache rules. Tokens: the cost in base input tokens (cache reads and writes at their"
    " price multipliers; token counts: estimate: UTF-8 bytes / 4). Dollars: at the model's"
    f" base input price in the table *{PRICE_TABLE}*."
)
COST_HEAD = [
    "| provider | model | changed calls | cost per changed call, old → new"
    " | change per changed call |",
    "| --- | --- | ---: | ---: | ---: |",
]
CASES_HEAD = [
    "| case | impact | changed calls | providers | largest share of an old body after the"
    " first difference | caused by |",
    "| --- | --- | ---: | ---: | ---: | --- |",
]
PROVIDERS = [
    "anthropic",
    "bedrock-anthropic",
    "bedrock-converse",
    "gemini",
    "openai-chat",
    "openai-responses",
]
#: every line after the cost table moves with the number of providers
N = len(PROVIDERS)
E = 8 + N


def test_markdown_of_a_template_edit_puts_the_verdict_first_and_folds_the_details(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~2", "HEAD~1", "--format=markdown")
    assert code == 0
    assert lines[:8] == [
        "### prefixlock diff: template/context change: running conversations keep their cache",
        "",
        "- **template/context change** of the template `prompt/cursor/agent/runtime.md.j2`,"
        f" caused by `HEAD~1:{TEMPLATE}:45`: {CONTENT_CONSEQUENCE}",
        "",
        COST_INTRO,
        "",
        *COST_HEAD,
    ]
    assert check_cost_rows(lines[8:E], "3 of 6") == PROVIDERS
    assert lines[E : E + 7] == [
        "",
        f"**Affected cases**: 1 of 2; {3 * N} of {6 * N} golden calls changed",
        "",
        *CASES_HEAD,
        f"| identical-context | template/context change | {3 * N} of {3 * N} | {N} | 5.7% |"
        f" `HEAD~1:{TEMPLATE}:45` |",
        "",
    ]
    assert re.fullmatch(
        r"Old: golden/ at HEAD~2 \([0-9a-f]{12}\); new: golden/ at HEAD~1 \([0-9a-f]{12}\)\.",
        lines[E + 7],
    )
    assert lines[E + 8 : E + 12] == [
        "",
        f"<details><summary>Details: each changed call ({3 * N} calls)</summary>",
        "",
        "```text",
    ]
    end = lines.index("```")
    assert lines[E + 12].startswith("identical-context/anthropic: 3 of 3 calls changed; cost ")
    assert lines[E + 13] == (
        "  0001-0003: differs at $.messages[1].content[0].text: old '…uted?\\n</user_query>"
        "\\n' new '…uted?\\n</user_query>\\nBe brief.\\n'"
    )
    assert lines[E + 14] == f"             caused by HEAD~1:{TEMPLATE}:45"
    assert lines[end:] == [
        "```",
        "",
        "</details>",
        "",
        "<details><summary>1 unchanged case</summary>",
        "",
        "ask-mode",
        "",
        "</details>",
    ]
    text = "\n".join(lines)
    for internal in ("templates/", "context-defaults.json", "prefix break", "PREFIX BREAK"):
        assert internal not in text


def test_markdown_of_an_instructions_edit_is_a_root_change_and_exits_1(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~1", "HEAD", "--format=markdown")
    assert code == 1
    assert lines[:8] == [
        "### prefixlock diff: root change: running conversations keep their cache; new"
        " conversations start a new cached prefix",
        "",
        "- **root change** of the instructions, caused by"
        f" `HEAD:prompt/cursor/instructions.md:1`: {ROOT_CONSEQUENCE}",
        "",
        COST_INTRO,
        "",
        *COST_HEAD,
    ]
    assert check_cost_rows(lines[8:E], "6 of 6") == PROVIDERS
    assert (
        lines[E : E + 4]
        == [
            "",
            f"**Affected cases**: 2 of 2; {6 * N} of {6 * N} golden calls changed",
            "",
            *CASES_HEAD,
        ][:4]
    )
    assert "unchanged case" not in "\n".join(lines)


def test_markdown_full_report_is_written_and_named(
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    report = tmp_path / "full.md"
    code, lines = _diff(
        project,
        monkeypatch,
        capsys,
        "HEAD~2",
        "HEAD~1",
        "--format=markdown",
        f"--full-report={report}",
    )
    assert code == 0
    assert lines[-2:] == ["", f"The full report: `{report}`."]
    assert report.read_text(encoding="utf-8") == "\n".join(lines[:-2]) + "\n"


def test_github_annotations_at_the_spec_lines(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~1", "HEAD", "--format=github")
    assert code == 1
    assert lines == [
        "::error file=prompt/cursor/instructions.md,line=1,title=prefixlock%3A root change::"
        f"root change of the instructions: {ROOT_CONSEQUENCE}",
        f"::notice title=prefixlock diff::{6 * N} of {6 * N} golden calls changed;"
        " deployment impact: root change",
    ]
    code, lines = _diff(project, monkeypatch, capsys, "HEAD~2", "HEAD~1", "--format=github")
    assert code == 0
    content = (
        f"file={TEMPLATE},line=45,title=prefixlock%3A template/context change::"
        f"template/context change of the template prompt/cursor/agent/runtime.md.j2:"
        f" {CONTENT_CONSEQUENCE}"
    )
    totals = (
        f"::notice title=prefixlock diff::{3 * N} of {6 * N} golden calls changed;"
        " deployment impact: template/context change"
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
            "### prefixlock diff: template/context change: running conversations keep their cache",
            "",
            f"- **template/context change**: {CONTENT_CONSEQUENCE}",
            "",
            f"`{one}` → `{two}`",
            "",
            "```text",
            "anthropic: the old body is a prefix of the new one (+1 item)",
            "```",
        ],
    )
    code, lines = _diff(tmp_path, monkeypatch, capsys, str(one), str(two), "--format=github")
    assert (code, lines) == (
        0,
        [
            "::notice title=prefixlock%3A template/context change::template/context change:"
            f" {CONTENT_CONSEQUENCE}",
            "::notice title=prefixlock diff::tail-only; deployment impact: template/context change",
        ],
    )


def test_two_body_files_with_a_break_say_where_they_differ_not_prefix_break(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "anthropic" / "old.json"
    new = tmp_path / "anthropic" / "new.json"
    old.parent.mkdir()
    body = '{"model":"m","max_tokens":1,"messages":[%s]}'
    old.write_text(body % '{"role":"user","content":"hello there"}', encoding="utf-8")
    new.write_text(body % '{"role":"user","content":"hello world"}', encoding="utf-8")
    code, lines = _diff(tmp_path, monkeypatch, capsys, str(old), str(new), "--format=markdown")
    assert (code, lines) == (
        0,
        [
            "### prefixlock diff: template/context change: running conversations keep their cache",
            "",
            f"- **template/context change**: {CONTENT_CONSEQUENCE}",
            "",
            f"`{old}` → `{new}`",
            "",
            "```text",
            "anthropic: differs at $.messages[0].content: old 'hello there' new 'hello world'",
            "  11.1% of the old body follows the first difference (9 of 81 bytes)",
            "```",
        ],
    )


def test_markdown_counts_the_details_that_do_not_fit(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    report = diff("HEAD~2", "HEAD~1")
    whole = markdown(report, limit=None)
    details = whole.index(f"<details><summary>Details: each changed call ({3 * N} calls)</summary>")
    limit = sum(len(line) + 1 for line in whole) - 400  # room for all but one or two
    short = markdown(report, limit=limit, full_report="full.md")
    assert sum(len(line) + 1 for line in short) <= limit
    assert short[:details] == whole[:details]
    shown = [line.split(":")[0] for line in short if re.match(r"identical-context/\S+: ", line)]
    assert shown == PROVIDERS_SHOWN[: len(shown)] and 0 < len(shown) < N
    end = short.index("</details>")
    assert short[end - 2 : end + 1] == [
        f"… and {N - len(shown)} more case/provider results, not shown here; the full report:"
        " `full.md`",
        "",
        "</details>",
    ]
    assert "The full report: `full.md`." not in short


PROVIDERS_SHOWN = [f"identical-context/{name}" for name in PROVIDERS]
