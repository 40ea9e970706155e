"""``prefixlock bench``'s long-session economics (issue 15): the figures are verify's, the
floor bounds them from below, and every missed target names the rule that puts it out of
reach (:mod:`prefixlock.bench.economics`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest
from prefixlock.bench import economics as econ
from prefixlock.bench.report import _long_session_targets
from prefixlock.cache.rules import rules_for
from prefixlock.review.replay import provider_names
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import verify_scenario

REPO = Path(__file__).resolve().parents[1]
PROVIDERS = provider_names(["all"])
TARGETS = (
    (econ.BOUND_TARGET, "cost_vs_bound", econ.BOUND_LIMIT),
    (econ.NAIVE_TARGET, "cost_vs_naive", econ.NAIVE_LIMIT),
)


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    return econ.long_session(PROVIDERS)


def test_the_case_ships_with_the_package_as_the_golden_one() -> None:
    shipped = econ.scenario_path()
    assert shipped.is_symlink()
    assert shipped.resolve() == REPO / "golden" / econ.SCENARIO / "scenario.yaml"
    # Not a starter case: `prefixlock init` copies only _example/golden/*.
    assert econ.SCENARIO not in {p.parent.name for p in shipped.parents[2].glob("golden/*/*")}


def test_the_figures_are_verify_s(figures: dict[str, Any]) -> None:
    rows, failures = verify_scenario(
        load_scenario(REPO / "golden" / econ.SCENARIO / "scenario.yaml"), PROVIDERS
    )
    assert figures["ok"] is True and figures["failures"] == len(failures) == 0
    assert list(figures["providers"]) == list(PROVIDERS)
    for row in rows:
        mine = figures["providers"][row.provider]
        assert mine["cost_vs_bound"] == round(row.cost_vs_bound, 4)
        assert mine["cost_vs_naive"] == round(row.cost_vs_naive, 4)
        assert mine["cost_ratio"] == round(row.cost_ratio, 4)
        assert mine["calls"] == row.calls == 31


def test_the_floor_is_at_most_the_cost_and_is_the_cost_for_implicit_caches(
    figures: dict[str, Any],
) -> None:
    for name, f in figures["providers"].items():
        assert f["floor_vs_bound"] <= f["cost_vs_bound"], name
        assert f["floor_vs_naive"] <= f["cost_vs_naive"], name
        # Expiry only ever costs: without it the floor is lower (the same where nothing
        # expires: the example's auto keeps one-hour entries, longer than every pause)
        if f["expired_calls"]:
            assert f["floor_vs_bound_without_expiry"] < f["floor_vs_bound"], name
        else:
            assert f["floor_vs_bound_without_expiry"] == f["floor_vs_bound"], name
        rules = rules_for(name, f["model"])
        if not rules.explicit and not rules.considered_breakpoints:  # GPT-5.6: breakpoints
            assert f["floor_vs_bound"] == f["cost_vs_bound"], name
        else:
            assert f["floor_vs_bound"] < f["cost_vs_bound"], name


def test_a_reason_for_every_missed_target_and_only_for_those(figures: dict[str, Any]) -> None:
    for name, f in figures["providers"].items():
        for target, key, limit in TARGETS:
            assert (target in f["reasons"]) == (f[key] > limit), (name, target)


def test_the_turn_gaps_outlast_the_lifetime_so_expiry_rules_out_the_bound(
    figures: dict[str, Any],
) -> None:
    """long-session's turns come 20-40 minutes apart: with 5-minute entries the later turns
    find their cache expired (five; four on gemini-4-argon, whose 4,096-token minimum
    leaves one of them uncached anyway), and even an ideal placement stays past 1.10x."""
    five_minutes = [n for n, f in figures["providers"].items() if f["lifetime_s"] == 300]
    assert five_minutes
    for name in five_minutes:
        f = figures["providers"][name]
        assert f["expired_calls"] == {"gemini": 4}.get(name, 5)
        assert f["floor_vs_bound"] > econ.BOUND_LIMIT >= f["floor_vs_bound_without_expiry"]
        reason = f["reasons"][econ.BOUND_TARGET]
        assert reason.startswith("unreachable with these settings: cache entries live 5 min")
        assert "prefixlock.cache.rules.DEFAULT_TTL" in reason
        assert f"{f['expired_calls']} of 31 calls come later than that" in reason
        assert f"costs {f['floor_vs_bound']:.2f}x the bound" in reason
        rules = rules_for(name, f["model"])
        if rules.write_multiplier_1h is not None:
            assert "`cache_ttl: 1h` would keep them 60 min (writes at 2x)" in reason
        elif rules.retention_ttl:
            assert "`prompt_cache_retention: 24h` would keep them about 30 min" in reason
        else:
            assert reason.endswith("the implicit cache has no lifetime setting")


def test_the_naive_target_is_out_of_reach_of_any_marker_placement(
    figures: dict[str, Any],
) -> None:
    """The naive harness also caches; it loses its cache only where its system prompt
    changes: three times in long-session, all on turns that start cold where entries
    live 5 minutes (only the one after the 40-minute pause with 30-minute entries, none
    with the one-hour entries of the example's cache_ttl: auto)."""
    for name, f in figures["providers"].items():
        expired = {300: 3, 1800: 1, 3600: 0, 43200: 0}[f["lifetime_s"]]
        if rules_for(name, f["model"]).considered_breakpoints:
            expired = 0  # auto's 12h breakpoints (the example's gpt-5.6-sol) outlive it
        assert (f["context_changes"], f["expired_context_changes"]) == (3, expired), name
        assert f["floor_vs_naive"] > econ.NAIVE_LIMIT, name
        reason = f["reasons"][econ.NAIVE_TARGET]
        assert reason.startswith("unreachable: the naive harness caches too"), name
        which = "all" if expired == 3 else str(expired)
        if expired == 0:
            assert "3 times here, 0 of them on calls whose cache had expired" in reason
            continue
        assert f"3 times here, {which} of them on calls whose cache had expired" in reason
        assert reason.endswith(f"costs {f['floor_vs_naive']:.2f}x the naive harness"), name


def _economics(**figures: Any) -> econ.ProviderEconomics:
    base = econ.ProviderEconomics(
        provider="anthropic",
        model="claude-sonnet-4-5",
        calls=10,
        cost_ratio=0.5,
        cost_vs_bound=1.0,
        cost_vs_naive=0.2,
        floor_vs_bound=1.0,
        floor_vs_naive=0.2,
        floor_vs_bound_without_expiry=1.0,
        lifetime_s=300.0,
        expired_calls=0,
        context_changes=0,
        expired_context_changes=0,
        reasons=(),
    )
    return attrs.evolve(base, **figures)


def test_a_miss_the_rules_do_not_force_says_so() -> None:
    e = _economics(cost_vs_bound=1.3, floor_vs_bound=1.05, cost_vs_naive=0.4, floor_vs_naive=0.2)
    reasons = dict(econ._reasons(e, rules_for("anthropic", e.model)))
    assert reasons[econ.BOUND_TARGET] == (
        "not ruled out by the rules: an ideal placement of cache markers costs 1.05x the "
        "bound; the rest is where the cache markers sit (4 breakpoints, 20-block lookback) "
        "and the 1.25x write price"
    )
    assert reasons[econ.NAIVE_TARGET].startswith("not ruled out by the rules: ")


def test_a_floor_past_the_limit_without_expiry_blames_the_minimum() -> None:
    e = _economics(cost_vs_bound=1.4, floor_vs_bound=1.3, floor_vs_bound_without_expiry=1.2)
    [(target, reason)] = econ._reasons(e, rules_for("openai-chat", "gpt-5"))
    assert target == econ.BOUND_TARGET
    assert reason == (
        "unreachable even if nothing expired: the 1024-token minimum; reads count in "
        "128-token steps leave an ideal placement of cache markers at 1.20x the bound"
    )


@pytest.mark.parametrize(
    ("provider", "model", "lifetime", "rule", "hint"),
    [
        ("openai-chat", "gpt-5", 1800.0, "OPENAI_RETENTION_TTL['24h']", ""),
        ("openai-chat", "gpt-5", 300.0, "DEFAULT_TTL", "`prompt_cache_retention: 24h`"),
        (
            "openai-chat",
            "gpt-5.6-sol",
            1800.0,
            "OPENAI_EXACT_TTL",
            "`cache_ttl: 1h` would keep them 720 min (writes at 1.25x)",
        ),
        ("anthropic", "claude-sonnet-4-5", 3600.0, "ONE_HOUR_TTL_SECONDS", ""),
    ],
)
def test_the_expiry_reason_names_the_lifetime_rule_and_any_longer_setting(
    provider: str, model: str, lifetime: float, rule: str, hint: str
) -> None:
    e = _economics(
        provider=provider,
        model=model,
        cost_vs_bound=1.5,
        floor_vs_bound=1.4,
        floor_vs_bound_without_expiry=1.0,
        lifetime_s=lifetime,
        expired_calls=2,
    )
    [(_, reason)] = econ._reasons(e, rules_for(provider, model))
    assert f"(prefixlock.cache.rules.{rule})" in reason
    assert (hint in reason) if hint else "would keep them" not in reason


def test_the_targets_take_the_worst_provider_and_need_the_invariants() -> None:
    figures = {
        "scenario": econ.SCENARIO,
        "ok": True,
        "providers": {
            "a": {"cost_vs_bound": 1.05, "cost_vs_naive": 0.2, "reasons": {}},
            "b": {
                "cost_vs_bound": 1.2,
                "cost_vs_naive": 0.1,
                "reasons": {econ.BOUND_TARGET: "why"},
            },
        },
    }
    [bound, naive] = _long_session_targets(figures)
    assert (bound["name"], bound["value"], bound["met"]) == (econ.BOUND_TARGET, 1.2, False)
    assert bound["per_provider"] == {"a": 1.05, "b": 1.2} and bound["reasons"] == {"b": "why"}
    assert "worst provider: b" in bound["what"]
    assert (naive["name"], naive["value"], naive["met"]) == (econ.NAIVE_TARGET, 0.2, True)
    figures["ok"] = False
    assert [t["met"] for t in _long_session_targets(figures)] == [False, False]


def test_every_cache_ttl_policy_is_priced_on_the_case(figures: dict[str, Any]) -> None:
    # The wires with a TTL setting report the case under each of its values, each
    # against its own perfect-cache bound (what verify prints with that setting) and as a
    # share of today's cost; the settings' own value is the row's figure.
    for name, f in figures["providers"].items():
        policies = f["cache_ttl"]
        if rules_for(name, f["model"]).write_multiplier_1h is None:
            assert policies == {}, name
            continue
        assert list(policies) == ["5m", "1h", "auto"], name
        today = policies["auto"]  # the example's setting
        assert today == {"cost_vs_bound": f["cost_vs_bound"], "cost_vs_today": 1.0, "today": True}
        assert not policies["1h"]["today"] and not policies["5m"]["today"]
        # On this stress case every pause outlasts five minutes: 5m pays for each, 1h for
        # none, auto for the tool loop of the turn before each pause.
        # (auto, with one-hour markers after the compaction too, now at or below 1h)
        assert policies["5m"]["cost_vs_today"] > 1.0, name
        assert f["cost_vs_bound"] < policies["5m"]["cost_vs_bound"], name
        assert policies["1h"]["cost_vs_bound"] < policies["5m"]["cost_vs_bound"], name
        # one-hour entries outlast every pause: the floor is not ruled out by expiry (met,
        # or missed for where the markers sit)
        reason = f["reasons"].get(econ.BOUND_TARGET)
        if reason is None:
            assert f["cost_vs_bound"] <= econ.BOUND_LIMIT, name
        else:
            assert reason.startswith("not ruled out by the rules"), name


def test_a_ttl_policy_replays_the_same_conversation_with_only_that_option_changed() -> None:
    scenario = load_scenario(econ.scenario_path())
    figures = econ._ttl_policies(scenario, ["anthropic", "gemini"], "estimate")
    rows, _ = verify_scenario(scenario, ["anthropic"])
    assert figures["anthropic"]["auto"]["cost_vs_bound"] == round(rows[0].cost_vs_bound, 4)
    assert figures["anthropic"]["auto"]["cost_vs_today"] == 1.0
    assert figures["gemini"] == {}  # no TTL setting
