"""The golden suite: every case's request bodies, pinned byte-exactly for every provider.

A case is ``golden/<case>/scenario.yaml`` with ``<provider>/0001.json`` ... (the exact
bodies) and ``calls.md`` (the readable form). Each case is replayed once per session.
``pytest --force-regen`` rewrites what differs (then fails once: rerun).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
from golden_check import check, file_problems, folder_problems, report, write_file
from prefixlock.core import canonical
from prefixlock.core.messages import MessageKind
from prefixlock.providers import NAMES, get
from prefixlock.review.render import render_calls
from prefixlock.review.replay import Call, divergence, replay, serialize_calls, write_bodies
from prefixlock.review.scenario import AssistantStep, Scenario, load_scenario
from prefixlock.review.verify import verify_scenario
from sdk_judge import assert_valid

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "golden"
CASES = sorted(p.parent.name for p in GOLDEN.glob("*/scenario.yaml"))

#: The cases the design asks for, and what each one's last request must show: its
#: request-context message ids in order (the context events of the current history).
EXPECTED_CONTEXTS: dict[str, list[str]] = {
    "identical-context": ["request-context:u1"],
    "changed-context": ["request-context:u1", "request-context:u2"],
    "context-revert": ["request-context:u1", "request-context:u2", "request-context:u3"],
    "retry": ["request-context:u1", "request-context:u2"],
    "bedrock-mantle": ["request-context:u1", "request-context:u2"],
    "checkpoint-round-trip": ["request-context:u1", "request-context:u3"],
    # context_updates: sections (the example's): u2's message carried the git section
    # only, so the compacting turn keeps one new message with the full context.
    "automatic-compaction": ["request-context:u3"],
    "runtime-without-rules": ["request-context:u1"],
    "mode-agent": ["request-context:u1"],
    "mode-ask": ["request-context:u1"],
    "mode-plan": ["request-context:u1"],
    "mode-debug": ["request-context:u1"],
    "mcp-order": ["request-context:u1"],
    "midnight": ["request-context:u1"],
    "background-event": ["request-context:u1"],
    "injected-event": ["request-context:u1"],
    "long-session": ["request-context:u5", "request-context:u6"],
    "manual-compaction": ["request-context:u2"],
    "section-every-turn": [f"request-context:u{n}" for n in range(1, 5)],
    "section-cleared": ["request-context:u1", "request-context:u2", "request-context:u4"],
    "section-revert": [f"request-context:u{n}" for n in range(1, 5)],
    "section-compaction": ["request-context:u6"],
    "imported-session": ["request-context:u1"],
    "provider-switch": ["request-context:u1"],
    "tool-result-image": ["request-context:u1"],
}


@attrs.frozen(eq=False)
class Replayed:
    scenario: Scenario
    calls: tuple[Call, ...]
    bodies: dict[str, list[bytes]]
    page: bytes


@functools.cache
def replayed(case: str) -> Replayed:
    scenario = load_scenario(GOLDEN / case / "scenario.yaml")
    calls = replay(scenario)
    bodies = serialize_calls(calls, scenario.replayed(NAMES))
    page = render_calls(scenario, calls, bodies).encode("utf-8")
    return Replayed(scenario, tuple(calls), bodies, page)


def _force_regen(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("force_regen"))


@pytest.mark.parametrize("provider", NAMES)
@pytest.mark.parametrize("case", CASES)
def test_golden_bodies(case: str, provider: str, request: pytest.FixtureRequest) -> None:
    folder = GOLDEN / case / provider
    if provider not in replayed(case).bodies:  # the case starts on other providers
        assert not folder.exists()
        return
    bodies = replayed(case).bodies[provider]
    check(
        folder,
        folder_problems(folder, bodies),
        lambda: write_bodies({provider: bodies}, GOLDEN / case),
        _force_regen(request),
    )


@pytest.mark.parametrize("case", CASES)
def test_golden_calls_md(case: str, request: pytest.FixtureRequest) -> None:
    page = replayed(case).page
    path = GOLDEN / case / "calls.md"
    check(path, file_problems(path, page), lambda: write_file(path, page), _force_regen(request))


@pytest.mark.parametrize("provider", NAMES)
@pytest.mark.parametrize("case", CASES)
def test_golden_bodies_pass_the_sdk_judge(case: str, provider: str) -> None:
    r = replayed(case)
    folder = GOLDEN / case / provider
    if provider not in r.bodies:
        return  # the case starts on other providers (test_golden_bodies)
    for number, call in enumerate(r.calls, start=1):
        path = folder / f"{number:04d}.json"
        data = path.read_bytes() if path.is_file() else r.bodies[provider][number - 1]
        body = canonical.loads(data)
        wire = call.wire(provider)  # after a provider switch, that provider's body
        # the endpoint the case's settings choose (bedrock-anthropic's mantle: the
        # Messages API on bedrock-mantle, model in the body)
        endpoint = get(wire).endpoint(call.request.settings_for(wire))
        if wire.startswith("bedrock-") and not endpoint:
            body = {"modelId": call.target(provider), **body}  # modelId travels in the URI
        assert_valid(wire, body, endpoint=endpoint)


@pytest.mark.parametrize("case", CASES)
def test_replay_is_stable(case: str) -> None:
    """black's stability check: replaying again, even restarting before every step,
    gives the same bytes."""
    r = replayed(case)
    names = list(r.bodies)
    assert serialize_calls(replay(r.scenario), names) == r.bodies
    assert serialize_calls(replay(r.scenario, restart_everywhere=True), names) == r.bodies


@pytest.mark.parametrize("case", CASES)
def test_calls_stay_prefixes_except_across_compaction(case: str) -> None:
    r = replayed(case)
    base: Call | None = None
    for call in r.calls:
        if call.kind == "retry":
            continue
        if base is not None and call.request.epoch == base.request.epoch:
            for name in r.bodies:
                if call.namespace(name) != base.namespace(name):
                    continue  # a switch: a new cache namespace, a new prefix
                old = r.bodies[name][base.index - 1]
                wire = call.wire(name)
                assert divergence(wire, old, r.bodies[name][call.index - 1]) is None
        base = call


def test_the_cases_the_design_asks_for_exist() -> None:
    assert sorted(EXPECTED_CONTEXTS) == CASES


@pytest.mark.parametrize("case", CASES)
def test_case_context_messages(case: str) -> None:
    last = replayed(case).calls[-1].request
    ids = [m.id for m in last.messages if m.kind is MessageKind.REQUEST_CONTEXT]
    assert ids == EXPECTED_CONTEXTS[case]


def test_the_long_session_is_long() -> None:
    calls = replayed("long-session").calls
    kinds = {call.kind for call in calls}
    assert len(calls) >= 30
    assert kinds == {"user", "tool_results", "background", "retry"}
    assert max(call.request.epoch for call in calls) == 1


def test_every_mode_has_a_case() -> None:
    modes = {
        call.request.messages[-1].text.split('<mode name="')[1].split('"')[0]
        for case in CASES
        if case.startswith("mode-")
        for call in replayed(case).calls
        if call.kind == "user"
    }
    assert modes == {"agent", "ask", "plan", "debug"}


@pytest.mark.parametrize("case", CASES)
def test_tool_calls_match_the_tool_schemas(case: str) -> None:
    """Realistic scenarios: every call names a bundled tool with valid arguments."""
    scenario = replayed(case).scenario
    schemas: dict[str, Any] = {t.name: t.parameters_value for t in scenario.bundle.tools}
    for step in scenario.steps:
        if isinstance(step, AssistantStep):
            for call in step.tool_calls:
                assert isinstance(call.arguments, dict)
                jsonschema.validate(call.arguments, schemas[call.name])


def test_golden_folder_holds_only_cases() -> None:
    for entry in sorted(GOLDEN.iterdir()):
        assert entry.is_dir() and (entry / "scenario.yaml").is_file(), entry
        names = sorted(p.name for p in entry.iterdir())
        scenario = replayed(entry.name).scenario
        providers = scenario.replayed(NAMES)
        # a case may hold its own bundle (golden/bedrock-mantle/bundle: its `bundle:`)
        bundle = scenario.bundle_root.resolve()
        own = [bundle.name] if bundle.parent == entry.resolve() else []
        assert names == sorted(["calls.md", "scenario.yaml", *providers, *own]), entry


def test_golden_files_are_binary_in_git() -> None:
    lines = (REPO / ".gitattributes").read_text(encoding="utf-8").splitlines()
    assert "golden/** -text" in lines


# --------------------------------------------------------------------------- the checker


def test_report_names_the_offset_the_json_path_and_a_diff() -> None:
    old = b'{"model":"m","messages":[{"role":"user","content":"a"}]}'
    new = b'{"model":"m","messages":[{"role":"user","content":"b"}]}'
    text = report("x/0001.json", old, new)
    lines = text.splitlines()
    assert (
        lines[0]
        == "x/0001.json: first differing byte at offset 51 (golden 56 bytes, replayed 56 bytes)"
    )
    assert "  JSON path: $.messages[0].content" in lines
    assert '  -      "content": "a"' in lines and '  +      "content": "b"' in lines
    assert report("x", old, old) == ""
    assert report("x", b"ab", b"abc").startswith("x: first differing byte at offset 2 ")


def test_report_keeps_the_wire_key_order() -> None:
    text = report("x", b'{"b":1,"a":2}', b'{"a":2,"b":1}')
    assert "  JSON path: $.b" in text.splitlines()


def test_check_creates_missing_golden_files_and_fails_once(tmp_path: Path) -> None:
    folder = tmp_path / "anthropic"
    bodies = [b"{}", b"[]"]
    with pytest.raises(pytest.fail.Exception, match="did not exist; created it: rerun"):
        check(
            folder,
            folder_problems(folder, bodies),
            lambda: write_bodies({"anthropic": bodies}, tmp_path),
            False,
        )
    assert folder_problems(folder, bodies) == []


def test_check_fails_on_a_difference_and_regenerates_when_forced(tmp_path: Path) -> None:
    path = tmp_path / "calls.md"
    write_file(path, b"old\n")
    problems = file_problems(path, b"new\n")
    with pytest.raises(pytest.fail.Exception, match="run `pytest --force-regen`"):
        check(path, problems, lambda: write_file(path, b"new\n"), False)
    assert path.read_bytes() == b"old\n"
    with pytest.raises(pytest.fail.Exception, match="--force-regen is set; regenerated it"):
        check(path, problems, lambda: write_file(path, b"new\n"), True)
    assert path.read_bytes() == b"new\n"


def test_stale_golden_files_are_reported(tmp_path: Path) -> None:
    write_bodies({"gemini": [b"{}", b"{}"]}, tmp_path)
    assert folder_problems(tmp_path / "gemini", [b"{}"]) == ["gemini/0002.json: stale golden file"]
    assert folder_problems(tmp_path / "gemini", [b"{}", b"{}", b"{}"]) == [
        "gemini/0003.json: missing golden file"
    ]


_BAR_FIGURES = re.compile(
    r"^- ([a-z-]+)(?: → [a-z-]+)?(?: `[^`]+`)?: .* · `[█▒░]+` ([0-9,]+) read, "
    r"([0-9,]+) written, ([0-9,]+) uncached$",
    re.MULTILINE,
)


@pytest.mark.parametrize("case", CASES)
def test_calls_md_bars_price_the_calls_as_verify_does(case: str) -> None:
    """The bars of calls.md and the verify table are one simulation: per provider, the
    tokens the bars read from the cache over all they send is verify's cached share.
    Before, the bars ignored the calls' times, so a turn after an expired entry still
    drew as a read (context-revert: 7,032 read where verify wrote all 10,017)."""
    done = replayed(case)
    totals: dict[str, list[int]] = {}
    for name, *figures in _BAR_FIGURES.findall(done.page.decode("utf-8")):
        read, written, uncached = (int(f.replace(",", "")) for f in figures)
        total = totals.setdefault(name, [0, 0])
        total[0] += read
        total[1] += read + written + uncached
    rows, _ = verify_scenario(done.scenario, list(done.bodies))
    assert sorted(totals) == sorted(done.bodies)
    for row in rows:
        read, sent = totals[row.provider]
        assert read / sent == pytest.approx(row.cached_share, abs=1e-12), row.provider
