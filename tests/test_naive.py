"""The naive-harness yardstick of ``verify`` (issue 15, item 5): the same conversation
with the current context re-rendered into the system prompt every call and the tools in
the order of ``rules/tools.yaml``, encoded by the real serializers and priced by the
same cache simulation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conv_helpers import mode_bundle
from prefixlock import providers as registry
from prefixlock.cache.simulator import PerfectBound, Simulation
from prefixlock.core.messages import MessageKind
from prefixlock.core.model import CachePosition
from prefixlock.review.naive import (
    CONTEXT_SEPARATOR,
    NaiveHarness,
    full_contexts,
    tool_file_order,
)
from prefixlock.review.replay import iter_replay, provider_names
from prefixlock.review.scenario import Scenario, UserStep, load_scenario
from prefixlock.review.verify import call_time, verify_scenario
from prefixlock.runtime.context import full_context

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "golden"


def _whole(scenario: Scenario) -> dict[str, str]:
    """The whole context of each user turn, as the naive harness resends it."""
    requests = [s.request for s in scenario.steps if isinstance(s, UserStep)]
    return full_contexts(scenario.bundle, requests)


def test_the_naive_harness_resends_the_whole_context_of_a_sectioned_update() -> None:
    """changed-context's second turn sends an update with rules and git only; a harness
    without updates renders the whole context into its system prompt, every section."""
    scenario = load_scenario(GOLDEN / "changed-context" / "scenario.yaml")
    calls = list(iter_replay(scenario))
    update = calls[2].request.messages[-2]
    assert update.id == "request-context:u2" and "<skills>" not in update.text
    harness = NaiveHarness(tool_file_order(scenario.bundle_root), _whole(scenario))
    for call in calls[:2]:
        harness.request(call.request)
    system = harness.request(calls[2].request).instructions
    whole = full_context(scenario.bundle, scenario.steps[4].request)  # type: ignore[attr-defined]
    assert system == calls[2].request.instructions + CONTEXT_SEPARATOR + whole
    assert "<skills>" in whole and "Branch: fix/cart-rounding" in whole


PROVIDERS = provider_names(["all"])


def _scenario(tmp_path: Path, turns: int, *, change_context: bool) -> Path:
    """``turns`` user turns one minute apart (well within every TTL), each with a tool
    call whose long output grows the history; the git head changes every turn when
    ``change_context``."""
    lines = [
        "name: one tool loop per turn",
        "conversation: conv-naive",
        "base:",
        "  mode: agent",
        "  context:",
        "    environment: {os: linux, shell: bash, cwd: /w, workspace_roots: [/w]}",
        "    git: {branch: main, head: h0, dirty: false}",
        "steps:",
    ]
    output = " ".join(f"line{i} of a long file" for i in range(600))
    for turn in range(1, turns + 1):
        lines.append("  - user:")
        lines.append(f"      event: u{turn}")
        lines.append(f'      timestamp: "2026-03-02T10:{turn:02d}:00Z"')
        lines.append(f"      query: step {turn}")
        if change_context:
            lines.append(f"      context: {{git: {{branch: main, head: h{turn}, dirty: true}}}}")
        lines.append("  - assistant:")
        lines.append(
            f"      tool_calls: [{{id: c{turn}, name: read_file, arguments: {{path: f{turn}}}}}]"
        )
        lines.append(f"  - tool_results: [{{call_id: c{turn}, output: {json.dumps(output)}}}]")
        lines.append(f"  - assistant: {{text: done {turn}}}")
    path = tmp_path / ("changing" if change_context else "steady") / "scenario.yaml"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_naive_call_moves_the_current_context_into_the_system_prompt() -> None:
    scenario = load_scenario(GOLDEN / "changed-context" / "scenario.yaml")
    harness = NaiveHarness(tool_file_order(scenario.bundle_root))
    for call in iter_replay(scenario):
        ours = call.request
        naive = harness.request(ours)
        contexts = [m for m in ours.messages if m.kind is MessageKind.REQUEST_CONTEXT]
        # The latest context, after the instructions; no context message in the history.
        assert naive.instructions == ours.instructions + CONTEXT_SEPARATOR + contexts[-1].text
        assert [m.id for m in naive.messages] == [
            m.id for m in ours.messages if m.kind is not MessageKind.REQUEST_CONTEXT
        ]
        # The same markers but the context one; the tail moves to the last message.
        assert [(h.position, h.message_index) for h in naive.cache_hints] == [
            (CachePosition.TOOLS, None),
            (CachePosition.INSTRUCTIONS, None),
            (CachePosition.TAIL, len(naive.messages) - 1),
        ]
        assert sorted(t.name for t in naive.tools) == [t.name for t in ours.tools]
        assert (naive.epoch, naive.cache_key, naive.settings) == (
            ours.epoch,
            ours.cache_key,
            ours.settings,
        )


def test_tools_go_in_the_order_of_the_tool_file() -> None:
    order = tool_file_order(REPO)
    assert order[:3] == ("read_file", "list_dir", "glob_search")  # rules/tools.yaml
    assert list(order) != sorted(order)
    call = next(iter_replay(load_scenario(GOLDEN / "mode-agent" / "scenario.yaml")))
    naive = NaiveHarness(order).request(call.request)
    assert [t.name for t in naive.tools] == [n for n in order if n in {t.name for t in naive.tools}]
    body = json.loads(registry.get("anthropic").serialize(naive))
    assert [t["name"] for t in body["tools"]] == [t.name for t in naive.tools]
    assert [t["name"] for t in body["tools"]] != sorted(t["name"] for t in body["tools"])


def test_a_context_change_every_turn_makes_the_naive_harness_costlier(tmp_path: Path) -> None:
    """Turns within the TTL: the naive system prompt changes every turn, so each turn
    writes the whole history again; prefixlock appends the new context and reads the
    rest. Strictly costlier for every provider."""
    scenario = load_scenario(_scenario(tmp_path, 6, change_context=True))
    rows, failures = verify_scenario(scenario, PROVIDERS)
    assert not failures
    for row in rows:
        assert row.cost_vs_naive < 1.0, row.provider


def test_without_a_context_change_the_naive_harness_caches_the_same_calls(tmp_path: Path) -> None:
    """One context for the whole conversation: the naive system prompt never changes, so
    it reads from the cache on exactly the calls prefixlock does, and costs about the same."""
    scenario = load_scenario(_scenario(tmp_path, 4, change_context=False))
    harness = NaiveHarness(tool_file_order(scenario.bundle_root))
    calls = list(iter_replay(scenario))
    models = {name: calls[0].request.settings_for(name).model for name in PROVIDERS}
    ours = {name: Simulation(name, model=models[name]) for name in PROVIDERS}
    naive = {name: Simulation(name, model=models[name]) for name in PROVIDERS}
    wires = {name: (registry.get(name), registry.get(name)) for name in PROVIDERS}
    for call in calls:
        at = call_time(scenario, call)
        request = harness.request(call.request)
        for name, (mine, theirs) in wires.items():
            ours[name].add(mine.serialize(call.request), at)
            naive[name].add(theirs.serialize(request), at)
    for name in PROVIDERS:
        a, b = ours[name].calls, naive[name].calls
        assert [c.cache_read_tokens > 0 for c in a] == [c.cache_read_tokens > 0 for c in b]
        # The naive prompt holds the same context without a message around it.
        assert all(y.input_tokens <= x.input_tokens for x, y in zip(a, b, strict=True)), name
    rows, _ = verify_scenario(scenario, PROVIDERS)
    for row in rows:
        assert row.cost_vs_naive == pytest.approx(1.0, abs=0.05), row.provider


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cost_vs_naive_is_the_ratio_of_the_two_simulations(provider: str) -> None:
    scenario = load_scenario(GOLDEN / "changed-context" / "scenario.yaml")
    [row], _ = verify_scenario(scenario, [provider])
    harness = NaiveHarness(tool_file_order(scenario.bundle_root), _whole(scenario))
    wire_ours, wire_naive = registry.get(provider), registry.get(provider)
    calls = list(iter_replay(scenario))
    model = calls[0].request.settings_for(provider).model
    ours, naive = Simulation(provider, model=model), Simulation(provider, model=model)
    for call in calls:
        at = call_time(scenario, call)
        ours.add(wire_ours.serialize(call.request), at)
        naive.add(wire_naive.serialize(harness.request(call.request)), at)
    assert row.cost_vs_naive == pytest.approx(float(ours.report().cost / naive.report().cost))


def test_on_long_session_the_ttl_is_what_keeps_the_perfect_bound_out_of_reach() -> None:
    """long-session's user turns are 20-40 minutes apart. The 40-minute pause outlasts
    every lifetime in play (5 minutes; 30 with OpenAI's 24h retention), so expiry costs
    every provider something, and where entries live 5 minutes every turn starts cold:
    the simulated cost is well above the perfect-cache bound (issue 15's target: within
    1.10x). The same bodies without times (nothing expires) come within it. And the
    naive harness's system-prompt changes fall on those cold turns, so they cost it
    nothing extra: there it is cheaper than prefixlock, whose history carries every
    changed context as a message of its own -- under ``context_updates: whole``; with
    ``sections`` only the changed sections, and the gap narrows on every provider. Where
    ``cache_ttl: auto`` writes one-hour entries (the example's Anthropic and Bedrock),
    they outlive the pauses and prefixlock is cheaper than the naive harness even under
    ``whole``."""
    scenario = load_scenario(GOLDEN / "long-session" / "scenario.yaml")
    rows, failures = verify_scenario(scenario, PROVIDERS)
    assert not failures
    whole = load_scenario(scenario.path, bundle=mode_bundle("whole"))
    whole_rows, failures = verify_scenario(whole, PROVIDERS)
    assert not failures
    calls = list(iter_replay(scenario))
    harness = NaiveHarness(tool_file_order(scenario.bundle_root), _whole(scenario))
    naive = [harness.request(c.request) for c in calls]
    for row in rows:
        model = calls[0].request.settings_for(row.provider).model
        wire = registry.get(row.provider)
        timed, untimed = (
            Simulation(row.provider, model=model),
            Simulation(row.provider, model=model),
        )
        bound = PerfectBound()
        for call in calls:
            body = wire.serialize(call.request)
            timed.add(body, call_time(scenario, call))
            bound.add(untimed.add(body))
        if row.provider in ("bedrock-converse", "bedrock-anthropic"):
            # auto's one-hour entries (the compacted history's too) outlive every pause,
            # and what a turn adds after its one-hour marker is shorter than Bedrock's
            # minimum per checkpoint (either API: CacheRules.min_tokens_per_checkpoint),
            # so it is never cached and its expiry loses nothing (Anthropic loses it)
            assert timed.report().cost == untimed.report().cost, row.provider
        else:
            assert timed.report().cost > untimed.report().cost, row.provider
        if max(c.lifetime for c in timed.report().calls) < 20 * 60:
            assert row.cost_vs_bound > 1.10, row.provider
        # Without expiry the cost comes within 1.10x of the bound, but on Bedrock: its
        # checkpoints must each reach the model's minimum, so the short increments of a
        # tool loop go uncached where a perfect cache reads them (1.16x, Converse and the
        # Messages body on InvokeModel alike).
        # GPT-5.6 (the example's OpenAI model) matches only at breakpoints where the
        # perfect cache reads every prefix; Responses' root breakpoint sits on its
        # developer item, as Chat's on its developer message: both reach the bound
        # (1.000x; Responses was 1.102x when its instructions went as the top-level
        # string, which takes none).
        limit = {"bedrock-converse": 1.20, "bedrock-anthropic": 1.20, "openai-responses": 1.0}
        limit = limit.get(row.provider, 1.10)
        assert bound.ratio(untimed.report().cost) <= limit, row.provider
        (whole_row,) = [r for r in whole_rows if r.provider == row.provider]
        longer = any(c.cache_write_1h_tokens for c in timed.report().calls)
        if max(c.lifetime for c in timed.report().calls) < 60 * 60 and not longer:
            assert whole_row.cost_vs_naive > 1.0, row.provider  # the 40-minute pause
        else:  # auto's one-hour (Anthropic, Bedrock) or 12h (OpenAI GPT-5.6) entries outlive it
            assert whole_row.cost_vs_naive < 1.0, row.provider
        assert row.cost_vs_naive < whole_row.cost_vs_naive, row.provider
        # prefixlock sends more tokens: one request-context message per change
        theirs = Simulation(row.provider, model=model)
        other = registry.get(row.provider)
        for request in naive:
            theirs.add(other.serialize(request))
        assert untimed.report().input_tokens > theirs.report().input_tokens
