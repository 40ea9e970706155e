"""Keep-alive (issue 45, item 2): ``conv.keepalive(now)`` is the last request with only
the output limit changed, never recorded; ``conv.next_keepalive_at()`` follows
:func:`prefixlock.cache.policy.keepalive_plan`; the simulator reads the whole cached
prefix on a keep-alive."""

from __future__ import annotations

from fractions import Fraction

import pytest
from conv_helpers import open_conv, user
from hypothesis import given, settings
from hypothesis import strategies as st
from prefixlock import ToolCall, ToolResult, providers
from prefixlock.cache.policy import (
    DEFAULT_RETURN_MODEL,
    KEEPALIVE_HORIZON,
    CachedPrefix,
    ReturnModel,
    keepalive_plan,
    lognormal_fit,
    with_policy,
)
from prefixlock.cache.simulator import Simulation
from prefixlock.core.errors import UnknownNameError, UsageError
from prefixlock.core.timestamps import seconds
from prefixlock.runtime.conversation import Conversation

T0 = "2026-03-02T10:00:00Z"
AT0 = seconds(T0)

#: provider -> (the output limit as the example sends it, as a keep-alive sends it)
LIMITS = {
    "anthropic": (b'"max_tokens":8192', b'"max_tokens":1'),
    "bedrock-converse": (b'"maxTokens":8192', b'"maxTokens":1'),
    "openai-chat": (b'"max_completion_tokens":8192', b'"max_completion_tokens":16'),
    "openai-responses": (b'"max_output_tokens":8192', b'"max_output_tokens":16'),
    "gemini": (b'"maxOutputTokens":8192', b'"maxOutputTokens":1'),
}


def _turn(conv: Conversation, event: str = "u1", at: str = T0) -> list[bytes]:
    """A user turn with one tool round; the requests' Anthropic bodies."""
    wire = providers.get("anthropic")
    first = conv.handle(user(event, timestamp=at))
    conv.assistant("Reading.", [ToolCall(f"{event}-c1", "read_file", {"path": "a.py"})])
    second = conv.tool_results([ToolResult(f"{event}-c1", "print(1)\n" * 40)])
    conv.assistant("Done.")
    return [wire.serialize(first), wire.serialize(second)]


@pytest.mark.parametrize("provider", sorted(LIMITS))
def test_the_keepalive_is_the_last_request_with_only_the_output_limit_changed(
    provider: str,
) -> None:
    conv = open_conv()
    wire = providers.get(provider)
    conv.handle(user("u1", timestamp=T0))
    conv.assistant("Reading.", [ToolCall("c1", "read_file", {"path": "a.py"})])
    last = wire.serialize(conv.tool_results([ToolResult("c1", "print(1)")]))
    conv.assistant("Done.")  # the answer is recorded: the keep-alive is still the call before
    keep = conv.keepalive_request()
    assert keep is not None
    sent, cheap = LIMITS[provider]
    assert last.count(sent) == 1
    assert wire.serialize(keep) == last.replace(sent, cheap)


def test_a_conversation_without_a_call_has_no_keepalive() -> None:
    conv = open_conv()
    assert conv.keepalive_request() is None
    assert conv.next_keepalive_at("anthropic") is None
    assert conv.keepalive(AT0, "anthropic") is None


def test_a_keepalive_needs_a_timestamped_call() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    assert conv.keepalive_request() is not None
    assert conv.next_keepalive_at("anthropic") is None


def test_the_keepalive_schedule_follows_the_plan_and_stops_once_expired() -> None:
    conv = open_conv()
    _turn(conv)
    # 5-minute entries, the whole prefix lost on expiry: the plan of the default model
    plan = keepalive_plan(
        CachedPrefix(1000, 1000), Fraction("0.1"), Fraction("1.25"), 300.0, DEFAULT_RETURN_MODEL
    )
    assert plan == (270.0, 540.0, 810.0)
    assert conv.next_keepalive_at("anthropic") == AT0 + 270.0
    assert conv.keepalive(AT0 + 269.0, "anthropic") is None
    first = conv.keepalive(AT0 + 270.0, "anthropic")
    assert first is not None and first.same_as(conv.keepalive_request() or first)
    assert conv.next_keepalive_at("anthropic") == AT0 + 540.0
    assert conv.keepalive(AT0 + 400.0, "anthropic") is None  # not due yet
    assert conv.keepalive(AT0 + 540.0, "anthropic") is not None
    assert conv.next_keepalive_at("anthropic") == AT0 + 810.0
    # too late: the entries the keep-alive at 540 s refreshed expired at 840 s; after a
    # miss none is planned any more
    assert conv.keepalive(AT0 + 840.0, "anthropic") is None
    assert conv.next_keepalive_at("anthropic") is None
    assert conv.keepalive(AT0 + 900.0, "anthropic") is None


def test_a_new_call_restarts_the_schedule_from_its_time() -> None:
    conv = open_conv()
    conv.handle(user("u1", timestamp=T0))
    conv.assistant("Running the tests.", [ToolCall("c1", "run_terminal_command", {})])
    assert conv.keepalive(AT0 + 270.0, "anthropic") is not None
    conv.tool_results([ToolResult("c1", "ok\n" * 40)], timestamp="2026-03-02T10:04:40Z")
    assert conv.next_keepalive_at("anthropic") == AT0 + 280.0 + 270.0


def test_with_auto_a_later_turn_keeps_its_root_for_an_hour_and_plans_no_keepalive() -> None:
    """The example's ``cache_ttl: auto``: from the second turn on only the tool loop lives
    five minutes; a read of the whole prefix does not pay for it (docs/cache-policy.md)."""
    conv = open_conv()
    assert conv.request().settings_for("anthropic").options_value == {"cache_ttl": "auto"}
    _turn(conv)
    _turn(conv, "u2", "2026-03-02T10:20:00Z")
    assert conv.next_keepalive_at("anthropic") is None


def test_one_hour_entries_need_no_keepalive() -> None:
    conv = open_conv()
    _turn(conv)
    request = conv.keepalive_request()
    assert request is not None
    # the same prefix cached for an hour: nothing is lost in the horizon's pauses
    prefix = CachedPrefix(1000, 0)
    assert keepalive_plan(prefix, Fraction("0.1"), Fraction(2), 300.0) == ()


def test_the_provider_must_be_named_when_several_are_configured() -> None:
    conv = open_conv()
    _turn(conv)
    with pytest.raises(UsageError) as caught:
        conv.next_keepalive_at()
    assert str(caught.value) == (
        "keep-alive: name the provider, one of ['anthropic', 'bedrock-anthropic', "
        "'bedrock-converse', 'gemini', 'openai-chat', 'openai-responses'] (the "
        "conversation's root is configured for more than one)"
    )
    with pytest.raises(UnknownNameError) as unknown:
        conv.keepalive(AT0, "mistral")
    assert str(unknown.value) == (
        "keep-alive: provider 'mistral' is not configured for this conversation "
        "(configured: anthropic, bedrock-anthropic, bedrock-converse, gemini, openai-chat, "
        "openai-responses)"
    )


@pytest.mark.parametrize("provider", ["anthropic", "bedrock-converse"])
def test_the_simulator_reads_the_whole_cached_prefix_on_a_keepalive(provider: str) -> None:
    conv = open_conv()
    wire = providers.get(provider)
    model = conv.request().settings_for(provider).model
    conv.handle(user("u1", timestamp=T0))
    conv.assistant("Reading.", [ToolCall("c1", "read_file", {"path": "a.py"})])
    last = conv.tool_results([ToolResult("c1", "print(1)\n" * 400)])
    conv.assistant("Done.")
    keep = conv.keepalive_request()
    assert keep is not None
    sim = Simulation(provider, model=model)
    sim.add(wire.serialize(conv.history.project(conv.history.events["u1"])), AT0)
    written = sim.add(wire.serialize(last), AT0 + 8)
    call = sim.add(wire.serialize(keep), AT0 + 278)
    assert call.cache_write_tokens == 0
    assert call.cache_read_tokens == call.input_tokens == written.input_tokens
    # and without it the next turn, 10 minutes later, would find nothing
    late = Simulation(provider, model=model)
    late.add(wire.serialize(last), AT0)
    assert late.add(wire.serialize(keep), AT0 + 600).cache_read_tokens == 0


_OPS = st.lists(st.sampled_from(["turn", "keepalive", "next", "request"]), max_size=8)


@settings(max_examples=25, deadline=None)
@given(_OPS)
def test_keepalives_never_change_the_history(ops: list[str]) -> None:
    """The same turns with and without keep-alives in between: the same records, head and
    next request bytes."""
    plain, kept = open_conv(), open_conv()
    wire = providers.get("anthropic")
    turns = 0
    for op in ops:
        if op == "turn":
            turns += 1
            stamp = f"2026-03-02T1{turns % 10}:00:00Z"
            assert _turn(plain, f"u{turns}", stamp) == _turn(kept, f"u{turns}", stamp)
        elif op == "keepalive":
            kept.keepalive(AT0 + 270.0 + 3600.0 * turns, "anthropic")
        elif op == "next":
            kept.next_keepalive_at("anthropic")
        else:
            kept.keepalive_request()
    assert kept.head == plain.head
    assert kept.store.load(kept.id) == plain.store.load(plain.id)
    assert wire.serialize(kept.request()) == wire.serialize(plain.request())


def test_the_default_return_model_fits_the_real_gap_quantiles() -> None:
    """Median 105 s, p90 14.1 min, 24% over 5 min, 2.7% over an hour: one log-normal
    cannot hit all four; the least-squares fit is within these bounds of each."""
    model = ReturnModel(*lognormal_fit(((105.0, 0.5), (840.0, 0.9))), end=0.0)
    assert model.cdf(105.0) == pytest.approx(0.5)
    assert model.cdf(840.0) == pytest.approx(0.9)
    fit = ReturnModel(DEFAULT_RETURN_MODEL.mu, DEFAULT_RETURN_MODEL.sigma, end=0.0)
    assert fit.cdf(105.0) == pytest.approx(0.5, abs=0.04)
    assert fit.cdf(300.0) == pytest.approx(0.76, abs=0.03)
    assert fit.cdf(846.0) == pytest.approx(0.9, abs=0.02)
    assert fit.cdf(3600.0) == pytest.approx(0.973, abs=0.01)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 200_000),
    st.integers(0, 200_000),
    st.sampled_from([Fraction("0.1"), Fraction("0.05"), Fraction("0.025"), Fraction("0.5")]),
    st.sampled_from([Fraction("1.25"), Fraction(1)]),
    st.sampled_from([300.0, 1800.0]),
)
def test_the_plan_is_a_prefix_of_its_slots_within_the_horizon(
    read: int, lost: int, read_price: Fraction, write_price: Fraction, ttl: float
) -> None:
    plan = keepalive_plan(CachedPrefix(read, lost), read_price, write_price, ttl)
    step = ttl - 30.0
    assert plan == tuple(step * k for k in range(1, len(plan) + 1))
    assert all(t <= KEEPALIVE_HORIZON for t in plan)
    # a keep-alive never costs more than the whole loss it could save
    if float(read_price) * read >= float(write_price - read_price) * lost:
        assert plan == ()


def test_with_policy_sets_only_that_providers_option() -> None:
    conv = open_conv()
    request = conv.handle(user("u1"))
    changed = with_policy(request, "anthropic", "auto")
    assert changed.settings_for("anthropic").options_value == {"cache_ttl": "auto"}
    for name in ("bedrock-converse", "gemini", "openai-chat", "openai-responses"):
        assert changed.settings_for(name) == request.settings_for(name)
