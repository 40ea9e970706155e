"""``calls.md`` stays the page it claims to be whatever the scenario's texts and ids hold.

Markdown ends a line at CR LF, CR or LF (CommonMark, "line ending"): a lone CR in a text
must not end its indented block, and ids and tool-call arguments are code spans (a fence
longer than any backtick run inside; CR and LF shown as ``\\r`` and ``\\n``), so
``<int:pk>``, ``\\(``, ``__init__`` or a backtick render as written and no id starts a
heading of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conv_helpers import mode_bundle
from hypothesis import given
from hypothesis import strategies as st
from prefixlock.providers import NAMES
from prefixlock.review.render import code_span, fold, render_calls
from prefixlock.review.replay import replay, serialize_calls
from prefixlock.review.scenario import load_scenario
from prefixlock.spec.bundle import Bundle

#: CommonMark's line endings: what a Markdown reader splits the page at.
_LINE_ENDING = re.compile(r"\r\n|\r|\n")

SCENARIO = r"""name: "escapes\n# injected title"
conversation: "conv`x"
base:
  mode: agent
  context:
    rules:
      - {name: r, kind: always, body: "one\rtwo"}
steps:
  - user:
      event: "u`1\n# injected"
      timestamp: "2026-03-04T08:30:00Z"
      query: "hello"
  - assistant:
      text: "Done.\r# INJECTED HEADING\r\nnext"
      tool_calls:
        - id: "c1"
          name: read_file
          arguments: {path: "<int:pk> __init__ \\( `x`"}
  - tool_results:
      - call_id: "c1"
        output: "line one\r## FAKE: Call 99\r- anthropic: tail append"
  - user:
      event: "u2"
      timestamp: "2026-03-04T08:31:00Z"
      query: "again"
      context:
        rules:
          - {name: r, kind: always, body: "one\rthree"}
"""


def _page(tmp_path: Path, bundle: Bundle | None = None) -> str:
    path = tmp_path / "case" / "scenario.yaml"
    path.parent.mkdir()
    path.write_text(SCENARIO, encoding="utf-8")
    scenario = load_scenario(path, bundle=bundle)
    calls = replay(scenario)
    return render_calls(scenario, calls, serialize_calls(calls, NAMES))


def _decode_span(text: str) -> str:
    """What a CommonMark reader shows for ``text``, which must be one whole code span."""
    fence = re.match(r"`+", text)
    assert fence is not None, text
    n = len(fence.group())
    assert text.endswith("`" * n) and len(text) > 2 * n, text
    content = text[n:-n]
    runs = [len(run) for run in re.findall(r"`+", content)]
    assert n not in runs, text  # a run of n backticks inside would close the span early
    assert not content.startswith("`") and not content.endswith("`"), text
    content = _LINE_ENDING.sub(" ", content)
    if content.startswith(" ") and content.endswith(" ") and content.strip(" "):
        content = content[1:-1]
    return content


def test_the_page_keeps_its_structure_for_a_markdown_reader(tmp_path: Path) -> None:
    lines = _LINE_ENDING.split(_page(tmp_path))
    headings = [line for line in lines if line.startswith("#")]
    assert headings[:3] == ["# escapes\\n# injected title", "## Root", "## Calls"]
    assert all(re.fullmatch(r"## Call \d+: \w+ .+", line) for line in headings[3:]), headings
    fence = None
    for line in lines:
        if fence is None:
            opened = re.fullmatch(r"  (`{3,})(text|diff)", line)
            fence = opened.group(1) if opened else None
        elif line == f"  {fence}":
            fence = None
        else:  # every line of a block keeps the list item's indent
            assert line == "" or line.startswith("  "), line
    assert fence is None


def test_a_carriage_return_ends_its_line_in_a_block_and_shows(tmp_path: Path) -> None:
    page = _page(tmp_path)
    assert "\r" not in page
    lines = page.split("\n")
    start = lines.index("- `assistant:1` · assistant · assistant")
    assert lines[start : start + 10] == [
        "- `assistant:1` · assistant · assistant",
        "  ```text",
        "  Done.␍",
        "  # INJECTED HEADING␍␊",
        "  next",
        "  ```",
        '  - call `c1` read_file ``{"path":"<int:pk> __init__ \\\\( `x`"}``',
        "- `tool-results:c1` · tool_result · tool",
        "  - result `c1`",
        "  ```text",
    ]
    assert lines[start + 10 : start + 14] == [
        "  line one␍",
        "  ## FAKE: Call 99␍",
        "  - anthropic: tail append",
        "  ```",
    ]


def test_a_context_diff_is_made_of_the_lines_the_block_shows(tmp_path: Path) -> None:
    # A whole context is shown as a diff to the one before (context_updates: whole).
    lines = _page(tmp_path, mode_bundle("whole")).split("\n")
    start = lines.index("- `request-context:u2` · request_context · user")
    assert lines[start + 1 : start + 4] == [
        "  ```diff",
        "  --- request-context:u`1\\n# injected",
        "  +++ request-context:u2",
    ]
    hunk = lines.index("   one␍", start)
    assert lines[hunk : hunk + 3] == ["   one␍", "  -two", "  +three"]


def test_ids_and_arguments_are_code_spans(tmp_path: Path) -> None:
    lines = _page(tmp_path).split("\n")
    event = "``u`1\\n# injected``"
    assert f"## Call 1: user {event}" in lines
    assert f"Steps: 0 user {event}" in lines
    assert "- ``request-context:u`1\\n# injected`` · request_context · user" in lines
    assert any(
        line.startswith("Conversation ``conv`x``: 4 steps, 3 model calls.") for line in lines
    )
    call = next(line for line in lines if line.startswith("  - call "))
    arguments = call.removeprefix("  - call `c1` read_file ")
    assert _decode_span(arguments) == '{"path":"<int:pk> __init__ \\\\( `x`"}'


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("u1", "`u1`"),
        ("<int:pk> __init__ \\(", "`<int:pk> __init__ \\(`"),
        ("a`b", "``a`b``"),
        ("`x", "`` `x ``"),
        ("x``", "``` x`` ```"),
        ("``", "``` `` ```"),
        (" a ", "`  a  `"),
        (" a", "` a`"),
        ("  ", "`  `"),
        ("a\nb\rc\r\n", "`a\\nb\\rc\\r\\n`"),
        ("", "(empty)"),
    ],
)
def test_code_span(text: str, span: str) -> None:
    assert code_span(text) == span


@given(st.text(alphabet=st.sampled_from("`a \n\r\\<_*#|"), min_size=1))
def test_a_code_span_shows_its_text(text: str) -> None:
    span = code_span(text)
    assert "\n" not in span and "\r" not in span
    assert _decode_span(span) == text.replace("\r", "\\r").replace("\n", "\\n")


def test_fold_ends_a_line_at_each_carriage_return_and_shows_it() -> None:
    assert fold("a\rb\r\nc\nd\r") == ["a␍", "b␍␊", "c", "d␍", ""]
    long = "\r".join(str(n) for n in range(20))
    assert fold(long) == [*(f"{n}␍" for n in range(8)), "… 8 lines …", "16␍", "17␍", "18␍", "19"]
