"""The real-timing workload (issue 45, item 4): seeded sessions with real pauses, each
cache policy priced against the perfect cache, the offline optimum and the naive
harness."""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs
import pytest
from conv_helpers import example_bundle
from prefixlock import providers
from prefixlock.bench import realtime as rt
from prefixlock.cache.policy import plan_for, with_policy
from prefixlock.cli import main
from prefixlock.review.policies import SHORTEST_SLOT


@pytest.fixture(scope="module")
def calls() -> list[rt.SessionCall]:
    return rt.session(example_bundle(), 16, 0.1, 1)


def test_a_session_is_seeded_and_has_real_pauses(calls: list[rt.SessionCall]) -> None:
    again = rt.session(example_bundle(), 16, 0.1, 1)
    wire = providers.get("anthropic")
    assert [wire.serialize(c.request) for c in again] == [wire.serialize(c.request) for c in calls]
    assert [c.at for c in again] == [c.at for c in calls]
    assert len(calls) == 16 and calls[0].at == 0.0
    gaps = [b.at - a.at for a, b in itertools.pairwise(calls)]
    assert all(g > 0 for g in gaps)
    # each call's request is the one before plus its tail (append-only)
    for a, b in itertools.pairwise(calls):
        assert list(b.request.messages[: len(a.request.messages)]) == list(a.request.messages)


def test_every_policy_is_priced_against_the_three_yardsticks(
    calls: list[rt.SessionCall],
) -> None:
    figures = rt.price_session(calls, "anthropic")
    assert list(figures["policies"]) == list(rt.POLICIES)
    assert figures["calls"] == 16
    for policy, f in figures["policies"].items():
        for key, base in (
            ("vs_uncached", "uncached"),
            ("vs_bound", "bound"),
            ("vs_oracle", "oracle"),
            ("vs_naive", "naive"),
        ):
            assert math.isclose(f[key], f["cost"] / figures[base]), (policy, key)
    # the oracle's choices include letting entries expire: never above the configured cost
    assert figures["oracle"] <= figures["policies"]["configured"]["cost"]
    # the example configures auto
    assert figures["policies"]["configured"] == figures["policies"]["auto"]


def test_keepalives_follow_the_plan_of_each_gap(calls: list[rt.SessionCall]) -> None:
    figures = rt.price_session(calls, "anthropic")
    wire = providers.get("anthropic")
    model = calls[0].request.settings_for("anthropic").model
    expected = 0
    for i, call in enumerate(calls):
        nxt = calls[i + 1].at if i + 1 < len(calls) else math.inf
        if nxt - call.at <= SHORTEST_SLOT:
            continue
        five = with_policy(call.request, "anthropic", "5m")  # keepalive: 5m markers
        plan, _ = plan_for("anthropic", model, wire.serialize(five))
        expected += sum(1 for offset in plan if call.at + offset < nxt)
    assert figures["policies"]["keepalive"]["keepalives"] == expected > 0


def test_an_implicit_cache_has_no_ttl_policies(calls: list[rt.SessionCall]) -> None:
    """gpt-4.1 (no breakpoints): configured and keep-alive only; the example's
    gpt-5.6-sol has breakpoint TTLs to choose: every policy."""

    def on(model: str, request: Any) -> Any:
        settings = tuple(
            attrs.evolve(s, model=model) if s.provider == "openai-chat" else s
            for s in request.settings
        )
        return attrs.evolve(request, settings=settings)

    old = [attrs.evolve(c, request=on("gpt-4.1", c.request)) for c in calls[:4]]
    figures = rt.price_session(old, "openai-chat")
    assert list(figures["policies"]) == ["configured", "keepalive"]
    assert list(rt.price_session(calls[:4], "openai-chat")["policies"]) == list(rt.POLICIES)


def _figures(**values: float) -> dict[str, Any]:
    def row(oracle: float, naive: float) -> dict[str, Any]:
        policies = {
            "configured": {"vs_oracle": oracle, "vs_naive": naive},
            "keepalive": {"vs_oracle": oracle, "vs_naive": naive},
        }
        return {
            "default_policy": "keepalive",
            "all": {"policies": policies, "naive_vs_oracle": 1.1},
        }

    return {"providers": {name: row(v, v) for name, v in values.items()}}


def test_the_targets_take_the_worst_providers_default_policy() -> None:
    checks = rt.targets(_figures(gemini=1.02, **{"openai-chat": 0.84}))
    assert [(c["name"], c["value"], c["met"]) for c in checks] == [
        ("real_timing_vs_oracle", 1.02, True),
        ("real_timing_vs_naive", 1.02, False),
    ]
    assert checks[1]["per_provider"] == {"gemini": 1.02, "openai-chat": 0.84}
    assert list(checks[1]["reasons"]) == ["gemini"]
    assert checks[1]["reasons"]["gemini"].startswith(
        "the naive harness caches too (it costs 1.10x the offline optimum)"
    )


def test_the_default_policy_of_a_model_without_one_hour_entries_is_the_keepalive() -> None:
    assert rt.default_policy("anthropic", "claude-sonnet-4-6") == "auto+keepalive"
    assert rt.default_policy("bedrock-converse", "anthropic.claude-3-7-sonnet-v1:0") == "keepalive"
    assert rt.default_policy("openai-responses", "gpt-5") == "configured"


def test_the_cli_refuses_a_bad_real_timing_length(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--real-timing", "x"]) == 2
    assert "'x' is not a comma-separated list of numbers" in capsys.readouterr().err
