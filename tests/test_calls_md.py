"""``calls.md``: the root section it starts with and the cache bar of every call."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefixlock.cache.simulator import simulate
from prefixlock.providers import NAMES
from prefixlock.review.render import BAR_WIDTH, cache_bar, recorded_bundle, render_calls
from prefixlock.review.replay import replay, serialize_calls
from prefixlock.review.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
RETRY = REPO / "golden" / "retry" / "scenario.yaml"


def _page(path: Path = RETRY) -> str:
    scenario = load_scenario(path)
    calls = replay(scenario)
    return render_calls(scenario, calls, serialize_calls(calls, NAMES))


def test_calls_md_starts_with_the_root_section() -> None:
    scenario = load_scenario(RETRY)
    bundle = scenario.bundle
    instructions = next(p for p in bundle.parts if p.name == "instructions.md")
    lines = _page().split("\n")
    assert lines[:15] == [
        "# retry of a runtime event",
        "",
        "## Root",
        "",
        "Every call of this case starts with it; a change here is a root change (a new cached"
        " prefix for every new conversation).",
        "",
        f"- bundle: `{bundle.digest}`",
        f"- instructions: {len(bundle.instructions.encode('utf-8')):,} bytes,"
        f" sha256 `{instructions.sha256}`",
        "- tools (16): codebase_search, delete_file, edit_file, fetch_rule, glob_search,"
        " grep_search, list_dir, mcp_call, read_file, read_lints, read_skill,"
        " run_terminal_command, spawn_subagent, todo_write, web_search, write_file",
        '- settings anthropic: `claude-sonnet-5-5`, max_tokens 8192, options `{"cache_ttl":'
        '"auto"}`',
        "- settings bedrock-anthropic: `anthropic.claude-sonnet-5-5`, max_tokens 8192, options "
        '`{"cache_ttl":"auto"}`',
        "- settings bedrock-converse: `anthropic.claude-sonnet-5-5`, max_tokens 8192, options "
        '`{"cache_ttl":"auto"}`',
        "- settings gemini: `gemini-4-argon`, max_tokens 8192",
        "- settings openai-chat: `gpt-5.6-sol`, max_tokens 8192, options "
        '`{"cache_ttl":"auto","prompt_cache_retention":"24h"}`',
        "- settings openai-responses: `gpt-5.6-sol`, max_tokens 8192, options "
        '`{"cache_ttl":"auto","prompt_cache_retention":"24h","reasoning":{"effort":"medium"}}`',
    ]
    assert lines[15:18] == ["", "## Calls", ""]
    assert recorded_bundle(_page().encode("utf-8")) == bundle.digest


def test_recorded_bundle_is_none_without_a_root_section() -> None:
    assert recorded_bundle(b"# old page\n\nno root here\n") is None


def test_every_provider_status_carries_the_simulated_cache_bar() -> None:
    scenario = load_scenario(RETRY)
    calls = replay(scenario)
    bodies = serialize_calls(calls, NAMES)
    models = {s.provider: s.model for s in scenario.bundle.settings}
    cache = simulate("anthropic", bodies["anthropic"], model=models["anthropic"]).calls
    page = render_calls(scenario, calls, bodies)
    status = [line for line in page.split("\n") if line.startswith("- anthropic: ")]
    assert len(status) == len(calls)
    first, second = cache[0], cache[1]
    assert status[0] == (
        f"- anthropic: first call · `{cache_bar(first)}` {first.cache_read_tokens:,} read,"
        f" {first.cache_write_tokens:,} written, {first.uncached_tokens:,} uncached"
    )
    assert status[1].startswith("- anthropic: tail append (+2 messages) · `")
    assert status[1].endswith(
        f"` {second.cache_read_tokens:,} read, {second.cache_write_tokens:,} written,"
        f" {second.uncached_tokens:,} uncached"
    )
    assert "Bars: █ read from the cache, ▒ written to it, ░ sent uncached" in page


class _Figures:
    def __init__(self, read: int, write: int, total: int) -> None:
        self.cache_read_tokens = read
        self.cache_write_tokens = write
        self.input_tokens = total
        self.uncached_tokens = total - read - write


@pytest.mark.parametrize(
    ("read", "write", "total", "bar"),
    [
        (0, 0, 0, "░" * BAR_WIDTH),
        (0, 900, 1000, "▒" * 18 + "░" * 2),
        (950, 0, 1000, "█" * 19 + "░"),
        (500, 250, 1000, "█" * 10 + "▒" * 5 + "░" * 5),
        # half a cell rounds up, at the running total: always BAR_WIDTH cells
        (25, 50, 1000, "█" + "▒" + "░" * 18),
        (1, 0, 1000, "░" * BAR_WIDTH),
    ],
)
def test_cache_bar(read: int, write: int, total: int, bar: str) -> None:
    assert cache_bar(_Figures(read, write, total)) == bar  # type: ignore[arg-type]
    assert len(bar) == BAR_WIDTH
