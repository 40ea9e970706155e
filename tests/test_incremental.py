"""Incremental encoding and cross-provider prefix properties, over random histories.

* A long-lived provider instance assembles each body from cached message fragments; the
  bytes must equal a fresh full encode (a new instance, and
  ``canonical.dumpb(wire_body)``) on every call, across compaction epochs and
  cache-marker moves. Assistant turns carry the provider's own opaque block
  (``OWN_OPAQUE``: Anthropic thinking, Responses reasoning, a Gemini thought part, a
  Bedrock reasoning block) where the wire takes one back.
* Within an epoch, the body for ``history[:k]`` is a structural prefix of the body for
  the full history once cache markers are stripped, with every other field equal.
* Only new messages (and a message whose cache marker moved) are encoded again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import attrs
import prefixlock.providers as providers
from hypothesis import given
from hypothesis import strategies as st
from prefixlock.core import canonical
from prefixlock.core.messages import (
    CanonicalMessage,
    MessageKind,
    OpaquePart,
    TextPart,
    ToolResultPart,
)
from prefixlock.core.model import CachePosition, ModelRequest
from prefixlock.providers import NAMES, get
from prefixlock.review.compare import block_pairs
from provider_cases import (
    OWN_OPAQUE,
    assistant,
    call,
    context,
    event,
    msg,
    request,
    results,
    runtime,
)

# Text every provider accepts: not blank (Anthropic refuses blank text blocks).
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=40).map(
    lambda s: f"t{s}"
)

STEP = st.one_of(
    st.tuples(st.just("user"), st.booleans(), TEXT),
    st.tuples(st.just("assistant"), st.lists(TEXT, max_size=2), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("event"), TEXT),
    st.tuples(st.just("compact"), TEXT),
)


@attrs.define
class Script:
    """Builds canonical histories from drawn steps; yields (epoch, request) per call."""

    provider: str
    history: list[CanonicalMessage] = attrs.Factory(list)
    epoch: int = 0
    n: int = 0
    pending: list[str] = attrs.Factory(list)
    context_text: str = "ctx-0"

    def fresh(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def latest_context(self) -> CanonicalMessage | None:
        for m in reversed(self.history):
            if m.kind == MessageKind.REQUEST_CONTEXT:
                return m
        return None

    def close_calls(self) -> None:
        if self.pending:
            self.history.append(
                results(
                    *(
                        ToolResultPart(c, f"out {c}\n", is_error=c.endswith("3"))
                        for c in self.pending
                    )
                )
            )
            self.pending = []

    def run(self, steps: list[tuple[Any, ...]]) -> Iterator[tuple[int, ModelRequest]]:
        for step in steps:
            kind = step[0]
            if kind == "user":
                self.close_calls()
                event_id = self.fresh("u")
                latest = self.latest_context()
                if step[1] or latest is None:
                    self.context_text = f"ctx {event_id}"
                if latest is None or latest.text != self.context_text:
                    self.history.append(context(event_id, self.context_text))
                self.history.append(runtime(event_id, step[2]))
            elif kind == "assistant":
                if self.pending or not self.history:
                    continue
                parts: list[Any] = []
                if step[3] and self.provider in OWN_OPAQUE:
                    parts.append(OpaquePart(self.provider, OWN_OPAQUE[self.provider]))
                parts.extend(TextPart(t) for t in step[1])
                for _ in range(step[2]):
                    call_id = self.fresh("call_")
                    parts.append(call(call_id, "grep", pattern=call_id))
                    self.pending.append(call_id)
                if not parts:
                    parts.append(TextPart("ok"))
                self.history.append(assistant(self.fresh("a"), *parts))
                continue  # the model produced it: no call with it as the tail yet
            elif kind == "event":
                self.close_calls()
                self.history.append(event(self.fresh("b"), step[1]))
            else:  # compact: latest context, then the summary (automatic compaction order)
                self.close_calls()
                latest = self.latest_context()
                self.epoch += 1
                summary = msg(MessageKind.SUMMARY, f"summary:{self.epoch}", TextPart(step[1]))
                self.history = [*([latest] if latest else []), summary]
            self.close_calls()
            yield self.epoch, request(*self.history, epoch=self.epoch)


def bytes_of(name: str, req: ModelRequest) -> tuple[bytes, bytes]:
    fresh = get(name)
    return fresh.serialize(req), canonical.dumpb(get(name).wire_body(req))


@given(steps=st.lists(STEP, min_size=5, max_size=80), name=st.sampled_from(NAMES))
def test_assembled_bytes_equal_a_fresh_full_encode(steps: list[tuple[Any, ...]], name: str) -> None:
    live = get(name)
    for _, req in Script(name).run(steps):
        assembled = live.serialize(req)
        fresh, from_body = bytes_of(name, req)
        assert assembled == fresh
        assert assembled == from_body


@given(steps=st.lists(STEP, min_size=5, max_size=80), name=st.sampled_from(NAMES))
def test_earlier_bodies_are_prefixes_within_an_epoch(
    steps: list[tuple[Any, ...]], name: str
) -> None:
    provider = get(name)
    key = type(provider).MESSAGES_KEY
    calls = list(Script(name).run(steps))
    for (epoch_a, a), (epoch_b, b) in itertools.pairwise(calls):
        if epoch_a != epoch_b:
            continue
        body_a = provider.strip_cache_markers(provider.body(a))
        body_b = provider.strip_cache_markers(provider.body(b))
        # Invariant 1 on the wire: (role, content block) pairs; item by item too where
        # the wire does not carry same-role neighbours as blocks of one message.
        pairs_a = block_pairs(body_a[key])
        assert block_pairs(body_b[key])[: len(pairs_a)] == pairs_a
        if not type(provider).MERGE_SAME_ROLE:
            assert body_b[key][: len(body_a[key])] == body_a[key]
        assert {k: v for k, v in body_a.items() if k != key} == {
            k: v for k, v in body_b.items() if k != key
        }


def test_long_history_every_provider() -> None:
    """A fixed, long (600 steps) history: assembled == fresh on a sample of calls."""
    steps: list[tuple[Any, ...]] = []
    for i in range(600):
        steps.append(
            [
                ("user", i % 7 == 0, f"turn {i} 漢字 🧪"),
                ("assistant", [f"r{i}"], i % 3, i % 2 == 0),
                ("event", f"bg {i}"),
                ("compact", f"summary {i}") if i % 150 == 149 else ("event", f"e{i}"),
            ][i % 4]
        )
    for name in NAMES:
        live = get(name)
        for k, (_, req) in enumerate(Script(name).run(steps)):
            assembled = live.serialize(req)
            if k % 37 == 0:
                assert assembled == bytes_of(name, req)[0]


class Counting:
    """Wraps a provider's ``_message_items`` to record which messages get encoded."""

    def __init__(self, name: str) -> None:
        self.provider = get(name)
        self.encoded: list[str] = []
        self.original = self.provider._message_items
        self.provider._message_items = self  # type: ignore[method-assign]

    def __call__(self, message: CanonicalMessage, *where: Any) -> list[Any]:
        self.encoded.append(message.id)
        return self.original(message, *where)


def test_only_new_messages_are_encoded() -> None:
    """The per-call encoding work grows with the new tail, not with the history."""
    for name in NAMES:
        live = Counting(name)
        history = [context("u1", "A"), runtime("u1", "q1")]
        live.provider.serialize(request(*history))
        assert live.encoded == ["request-context:u1", "runtime:u1"]
        for i in range(2, 30):
            live.encoded.clear()
            history.append(event(f"b{i}", f"event {i}"))
            live.provider.serialize(request(*history))
            if CachePosition.TAIL in type(live.provider).MESSAGE_MARKERS:
                # the tail marker moved off the previous tail: it is encoded again
                assert live.encoded == [history[-2].id, f"event:b{i}"], name
            else:
                assert live.encoded == [f"event:b{i}"], name
        # a new context: the new messages, plus at most the old context whose marker
        # moved and the previous tail
        live.encoded.clear()
        history += [context("u9", "B"), runtime("u9", "q9")]
        live.provider.serialize(request(*history))
        assert set(live.encoded) - {"request-context:u1", history[-3].id} == {
            "request-context:u9",
            "runtime:u9",
        }


def test_registry_names_and_did_you_mean() -> None:
    import pytest
    from prefixlock.core.errors import SerializationError

    assert tuple(sorted(providers.MODULES)) == providers.NAMES
    with pytest.raises(SerializationError, match=r"did you mean 'anthropic'\?"):
        get("antropic")
    with pytest.raises(SerializationError, match="unknown provider 'zzz'"):
        get("zzz")
    assert get("anthropic") is not get("anthropic")
    for name in NAMES:
        assert get(name).name == name


def test_mutating_a_returned_body_does_not_poison_the_caches() -> None:
    from provider_cases import tool_loop

    for name in NAMES:
        provider = get(name)
        req = tool_loop()
        before = provider.serialize(req)
        body = provider.body(req)
        for value in body.values():
            if isinstance(value, list) and value and isinstance(value[0], dict):
                value[0]["poison"] = True
            elif isinstance(value, dict):
                value["poison"] = True
        assert provider.serialize(req) == before
        assert canonical.dumpb(provider.wire_body(req)) == before
