"""The cache simulation fed body after body as fragments (``Simulation.add_fragments``,
what ``verify`` uses) gives exactly the figures of the whole-body path (``simulate``,
``Simulation.add``), on every golden case, for every provider and for the naive
harness's bodies (whose system prompt changes with the context)."""

from __future__ import annotations

import hashlib
import math
import random
import sys
from fractions import Fraction
from pathlib import Path

import attrs
import pytest
from conv_helpers import REPO, open_conv, user
from prefixlock import ToolCall, ToolResult
from prefixlock import providers as registry
from prefixlock.cache.simulator import _HASH, Simulation, _Expiries, _Prompt, _Seen, simulate
from prefixlock.core import canonical
from prefixlock.core.errors import CanonicalJSONError
from prefixlock.providers.frame import BodyFragments
from prefixlock.review.naive import NaiveHarness, tool_file_order
from prefixlock.review.replay import Call, call_request, iter_replay
from prefixlock.review.scenario import Scenario, golden_scenarios, load_scenario
from prefixlock.review.verify import _model, call_time

CASES = golden_scenarios()


def _streams(scenario: Scenario, calls: list[Call], name: str) -> dict[str, list[BodyFragments]]:
    provider = registry.get(name)
    harness = NaiveHarness(tool_file_order(scenario.bundle_root))
    own, naive = [], []
    for call in calls:
        # as a call on this provider sends it (another provider's thinking carried or
        # dropped by the failover rule), as verify serializes it
        request = call_request(call, name)
        own.append(provider.fragments(request))
        naive.append(provider.fragments(harness.request(request)))
    return {"own": own, "naive": naive}


@pytest.mark.parametrize("path", CASES, ids=[p.parent.name for p in CASES])
def test_fragments_give_the_figures_of_whole_bodies(path: Path) -> None:
    scenario = load_scenario(path)
    calls = list(iter_replay(scenario))
    times = [call_time(scenario, call) for call in calls]
    for name, kind, stream in [
        (provider, kind, stream)
        for provider in registry.NAMES
        for kind, stream in _streams(scenario, calls, provider).items()
    ]:
        model = _model(calls, name)
        bodies = [fragments.join() for fragments in stream]
        untimed = Simulation(name, model=model)
        for fragments in stream:
            untimed.add_fragments(fragments.as_body())
        assert untimed.report() == simulate(name, bodies, model=model), (name, kind)
        whole, pieces, joined = (Simulation(name, model=model) for _ in range(3))
        for fragments, body, at in zip(stream, bodies, times, strict=True):
            expected = whole.add(body, at)
            assert pieces.add_fragments(fragments.as_body(), at) == expected, (name, kind)
            assert joined.add_fragments(body, at) == expected, (name, kind)
        assert pieces.report() == whole.report() == joined.report()


def test_a_body_the_scanner_cannot_read_is_read_whole() -> None:
    """Whitespace, a body after it and a refusal: the same figures and errors as add."""
    stream = Simulation("openai-chat")
    whole = Simulation("openai-chat")
    bodies = [
        b'{"model":"gpt-5","messages":[{"content":"' + b"x" * 4000 + b'","role":"user"}]}',
        b'{"model": "gpt-5", "messages": [{"content": "' + b"x" * 4000 + b'", "role": "user"}]}',
        b'{"model":"gpt-5","messages":[{"content":"' + b"x" * 4000 + b'","role":"user"},1]}',
    ]
    for body in bodies:
        assert stream.add_fragments(body) == whole.add(body)
    with pytest.raises(CanonicalJSONError):
        stream.add_fragments(b'{"model":"gpt-5","messages":[NaN]}')
    with pytest.raises(CanonicalJSONError):
        whole.add(b'{"model":"gpt-5","messages":[NaN]}')
    assert stream.add_fragments(bodies[0]) == whole.add(bodies[0])


@pytest.mark.parametrize("provider", ["anthropic", "bedrock-converse"])
def test_one_hour_markers_price_the_same_when_streamed(provider: str) -> None:
    """The one-hour write price reads the frame's markers once per frame and the last
    message's every call; switching the TTL mid-conversation changes the frame."""
    conv = open_conv()
    requests = [conv.handle(user("u1"))]
    conv.assistant("Reading.", [ToolCall("c1", "read_file", {"path": "a.py"})])
    requests.append(conv.tool_results([ToolResult("c1", "print(1)")]))
    conv.assistant("Done.")
    requests.append(conv.handle(user("u2")))
    ttls = ["1h", "1h", "5m"]
    wire = registry.get(provider)
    model = requests[0].settings_for(provider).model
    whole, stream = Simulation(provider, model=model), Simulation(provider, model=model)
    for request, ttl in zip(requests, ttls, strict=True):
        settings = tuple(
            attrs.evolve(s, options=canonical.dumps({**s.options_value, "cache_ttl": ttl}))
            if s.provider == provider
            else s
            for s in request.settings
        )
        fragments = wire.fragments(attrs.evolve(request, settings=settings))
        expected = whole.add(fragments.join(), 0.0)
        assert stream.add_fragments(fragments.as_body(), 0.0) == expected
    assert [c.write_multiplier for c in stream.report().calls] == [2, 2, Fraction("1.25")]


def test_forgetting_expired_entries_gives_their_memory_back() -> None:
    """A dict's table never shrinks when entries are deleted: the expiry map is made
    again when it drops expired entries, so it is the size of what is alive, not of the
    most it ever held (a naive harness's context change sends a whole new history)."""
    entries = _Expiries()
    for n in range(20_000):
        entries.keep(n.to_bytes(16, "big"), float(n), 5.0)
    entries.forget_expired(19_990.0)  # alive: written at 19,985 .. 19,999
    alive = {n.to_bytes(16, "big"): n + 5.0 for n in range(19_985, 20_000)}
    assert dict(entries) == alive
    assert entries.lifetimes == dict.fromkeys(alive, 5.0)
    assert list(entries) == list(alive)  # the order they were written in
    assert sys.getsizeof(entries) <= sys.getsizeof(dict(alive)) + sys.getsizeof(_Expiries())
    assert sys.getsizeof(entries.lifetimes) == sys.getsizeof(dict.fromkeys(alive, 5.0))


#: The OpenAI models with an implicit cache only (the example's before gpt-5.6-sol, whose
#: explicit breakpoints the simulator reads as markers).
IMPLICIT_MODELS = {"openai-chat": "gpt-4.1", "openai-responses": "gpt-5"}


@pytest.mark.parametrize("name", ["gemini", "openai-chat", "openai-responses"])  # implicit
def test_a_streamed_simulation_keeps_one_copy_of_the_prefix_hashes(name: str) -> None:
    """The stream makes each body's prefix hashes from the previous body's, and the
    implicit cache keeps that same object as the chain of its latest call: one copy
    of the hashes per conversation, not one in the stream and one in the cache."""
    scenario = load_scenario(REPO / "golden" / "long-session" / "scenario.yaml")
    calls = list(iter_replay(scenario))
    provider = registry.get(name)
    model = IMPLICIT_MODELS.get(name) or _model(calls, name)
    simulation = Simulation(name, model=model)
    assert not simulation.rules.considered_breakpoints  # an implicit cache only
    for call in calls:
        settings = tuple(
            attrs.evolve(s, model=model) if s.provider == name else s for s in call.request.settings
        )
        request = attrs.evolve(call.request, settings=settings)
        simulation.add_fragments(provider.fragments(request).as_body(), None)
        (seen,) = simulation.implicit_seen.values()
        assert seen.chain is simulation._stream.packed
    assert len(seen.chain) > _HASH * 30  # long enough to matter


def _chain(blocks: list[str]) -> bytes:
    """Prefix hashes end to end, as a stream packs them (``_HASH`` bytes per block)."""
    out, state = bytearray(), b""
    for block in blocks:
        state = hashlib.blake2b(state + block.encode(), digest_size=_HASH).digest()
        out += state
    return bytes(out)


def _check_seen(calls: list[tuple[list[str], float, float]]) -> tuple[int, bool]:
    """Send each (blocks, time, TTL) to a ``_Seen`` and to a map from every prefix sent
    to its latest expiry, and check that both find the same longest prefix. Returns how
    many calls found a prefix the call before did not send, and whether a superseded
    chain was ever kept as a segment."""
    seen, reference = _Seen(), {}
    earlier, segmented = 0, False
    for number, (blocks, now, ttl) in enumerate(calls):
        prompt = _Prompt(list(range(1, len(blocks) + 1)), (), _chain(blocks), ())
        found, shared, until = seen.longest(prompt, now)
        alive = [i for i in range(len(blocks)) if reference.get(prompt.hash_at(i), -1.0) >= now]
        assert found == (max(alive) if alive else -1), number
        # ... and when the entry it found expires
        assert until == (reference[prompt.hash_at(found)] if alive else -math.inf), number
        earlier += found >= shared
        seen.sent(prompt, now + ttl, shared, now)
        segmented = segmented or bool(seen.segments)
        for i in range(len(blocks)):
            reference[prompt.hash_at(i)] = now + ttl
    return earlier, segmented


@pytest.mark.parametrize("seed", range(12))
def test_the_implicit_cache_answers_as_a_map_of_every_prefix_sent(seed: int) -> None:
    """``_Seen`` (a chain, ``left`` entries and segments of superseded chains) finds
    exactly what a map from every prefix ever sent to its latest expiry finds, across
    system prompts that change and come back (a naive harness's context changes, so
    whole chains are superseded), retries that shorten the history, TTLs of five
    minutes and an hour, and idle gaps that expire entries."""
    rng = random.Random(seed)
    calls = []
    history: list[str] = []
    system = "s0"
    now = 0.0
    for call in range(400):
        roll = rng.random()
        if roll < 0.1:
            system = f"s{rng.randrange(3)}"  # a context change, often back to an earlier one
        elif roll < 0.14 and history:
            del history[rng.randrange(len(history)) :]  # a retry of an earlier projection
        history.extend(f"b{call}.{i}" for i in range(rng.randrange(4)))
        now += 4000.0 if rng.random() < 0.02 else rng.choice([1.0, 10.0, 30.0, 120.0, 400.0])
        calls.append((["tools", system, *history], now, rng.choice([300.0, 3600.0])))
    earlier, segmented = _check_seen(calls)
    assert segmented and earlier  # whole chains were superseded, and found again


def test_a_chain_superseded_whole_takes_its_prefixes_from_earlier_entries() -> None:
    """Two prefixes left behind by a retry (an hour's entry), sent again, then
    superseded with the whole chain (five minutes): the later write is the one that
    counts, so after five minutes neither is found."""
    chain = ["tools", "s0", *(f"b{i}" for i in range(70))]
    calls = [
        (chain, 0.0, 3600.0),
        (chain[:-2], 10.0, 300.0),  # a retry: the last two prefixes are left behind
        (chain, 20.0, 300.0),  # found again, and sent with five minutes
        (["tools", "s1", *chain[2:]], 30.0, 300.0),  # the whole chain superseded
        (chain, 1000.0, 300.0),  # back: everything of it expired at 320
    ]
    _, segmented = _check_seen(calls)
    assert segmented
