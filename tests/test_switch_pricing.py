"""verify --policy and the bench economics price a scenario with a ``switch`` step at
each call's (provider, model): the call after a switch starts in the new model's cache
namespace, and each call pays its own model's cache prices (compiler/cache/rules.py)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from prefixlock.bench.economics import _floors, long_session
from prefixlock.cache.rules import CLAUDE_READ_PRICES, rules_for
from prefixlock.cache.simulator import Simulation
from prefixlock.review.policies import price_session, scenario_calls
from prefixlock.review.replay import replay, serialize_calls
from prefixlock.review.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
LONG = "Read the module, then its tests, then explain the failure in detail. " * 60

SCENARIO = f"""\
name: switch pricing
conversation: conv-switch-price
bundle: {REPO}
steps:
  - user: {{event: u1, query: "{LONG}", timestamp: "2026-03-02T09:00:00Z"}}
  - assistant: {{text: "First answer."}}
  - switch: {{provider: anthropic, model: claude-opus-4-6}}
  - user: {{event: u2, query: "And now?", timestamp: "2026-03-02T09:01:00Z"}}
  - assistant: {{text: "Second answer."}}
  - user: {{event: u3, query: "Once more.", timestamp: "2026-03-02T09:02:00Z"}}
"""


def _scenario(tmp_path: Path, text: str = SCENARIO) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_price_table_reads_opus_4_6_at_twice_sonnet_5_5() -> None:
    """The figures below rest on these two entries of the price table."""
    assert rules_for("anthropic", "claude-sonnet-5-5").read_multiplier == Fraction(5, 100)
    assert rules_for("anthropic", "claude-opus-4-6").read_multiplier == Fraction(1, 10)
    assert CLAUDE_READ_PRICES["claude-sonnet-5-5"] == Fraction(5, 100)


def test_verify_policy_prices_each_call_at_its_model_after_a_switch(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario(tmp_path))
    bodies = serialize_calls(replay(scenario), ["anthropic"])["anthropic"]
    # by hand: call 1 in claude-sonnet-5-5's namespace, calls 2 and 3 in
    # claude-opus-4-6's (call 2 reads nothing: a new namespace; call 3 reads call 2's
    # prefix at opus's 0.1x)
    sonnet = Simulation("anthropic", model="claude-sonnet-5-5")
    opus = Simulation("anthropic", model="claude-opus-4-6")
    first = sonnet.add(bodies[0], 0.0)
    second, third = opus.add(bodies[1], 60.0), opus.add(bodies[2], 120.0)
    assert second.cache_read_tokens == 0 and third.cache_read_tokens > 0
    assert third.read_multiplier == Fraction(1, 10) and first.read_multiplier == Fraction(5, 100)
    expected = first.cost + second.cost + third.cost
    figures = price_session(scenario_calls(scenario), "anthropic")
    assert figures["policies"]["configured"]["cost"] == float(expected)
    # the same scenario without the switch costs otherwise (call 2 reads call 1's prefix)
    plain = load_scenario(_scenario(tmp_path, SCENARIO.replace("  - switch:", "  # - switch:")))
    unswitched = price_session(scenario_calls(plain), "anthropic")
    assert unswitched["policies"]["configured"]["cost"] != float(expected)


@pytest.mark.parametrize(
    ("name", "configured", "model"),
    [
        ("anthropic", "claude-sonnet-5-5", "claude-opus-4-6"),
        # Gemini names the model in the URL: the namespace follows the switch all the same
        ("gemini", "gemini-4-argon", "gemini-3-flash-preview"),
    ],
)
def test_bench_economics_price_each_call_at_its_model(
    tmp_path: Path, name: str, configured: str, model: str
) -> None:
    text = SCENARIO.replace(
        "provider: anthropic, model: claude-opus-4-6", f"provider: {name}, model: {model}"
    )
    scenario = load_scenario(_scenario(tmp_path, text))
    bodies = serialize_calls(replay(scenario), [name])[name]
    before, after = Simulation(name, model=configured), Simulation(name, model=model)
    first = before.add(bodies[0], 0.0)
    second, third = after.add(bodies[1], 60.0), after.add(bodies[2], 120.0)
    assert second.cache_read_tokens == 0  # a new namespace
    floors, _ = _floors(scenario, [name], "estimate")
    assert floors[name].cost == first.cost + second.cost + third.cost
    figures = long_session([name], path=scenario.path)
    assert figures["ok"] and figures["providers"][name]["calls"] == 3


def test_the_perfect_cache_bound_reads_nothing_across_a_model_switch(tmp_path: Path) -> None:
    """The bound is every prefix cached forever in its own namespace: a call after a
    switch cannot read what another model's calls wrote (call 2 here), and reads its
    own model's prefixes again after (call 3)."""
    scenario = load_scenario(_scenario(tmp_path))
    bodies = serialize_calls(replay(scenario), ["anthropic"])["anthropic"]
    simulation = Simulation("anthropic", model="claude-sonnet-5-5")
    times = (0.0, 60.0, 120.0)
    first, second, third = (simulation.add(b, at) for b, at in zip(bodies, times, strict=True))
    assert first.bound_read_tokens == 0
    assert second.bound_read_tokens == 0
    assert third.bound_read_tokens > 0
