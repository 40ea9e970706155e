"""A body as byte fragments (``Provider.fragments``) and as an iterable HTTP body.

Every golden case is replayed on live conversations (requests whose messages are views
of the history, as a server gets them, restarts and retries included): the joined
fragments are the golden bytes, byte for byte, for every provider; within an epoch the
fragments of a call are the start of the next call's wherever the body is append-only;
only the new messages (and those whose cache marker moved) are visited; and a stdlib
``http.client`` sends the fragments to a server on 127.0.0.1, which receives exactly
``serialize()``'s bytes.
"""

from __future__ import annotations

import functools
import http.client
import itertools
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import prefixlock.providers as providers
import pytest
from prefixlock.cache.policy import with_policy
from prefixlock.core.model import MessageView, ModelRequest
from prefixlock.providers import NAMES
from prefixlock.providers.frame import BodyFragments
from prefixlock.providers.transport import ENDPOINT_ROUTES, ROUTES
from prefixlock.review.replay import Carrier, _run
from prefixlock.review.scenario import RestartStep, SwitchStep, load_scenario
from prefixlock.runtime.conversation import Conversation
from prefixlock.store.sqlite import SQLiteStore
from stub_server import Reply, stub_server

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
#: The golden cases whose calls go where their folders say (a case with a ``switch``
#: sends later calls elsewhere: test_golden.py pins its bodies through the replay).
CASES = sorted(
    p.parent.name
    for p in GOLDEN.glob("*/scenario.yaml")
    if not any(isinstance(step, SwitchStep) for step in load_scenario(p).steps)
)
#: Wires whose body never changes an earlier message's bytes within an epoch (no cache
#: marker inside a message moves): every call's fragments start with the previous ones.
#: The OpenAI wires are not among them on GPT-5.6 (the example's gpt-5.6-sol): their
#: ``prompt_cache_breakpoint`` markers go where Anthropic's ``cache_control`` goes and
#: move as it does (the context marker onto a new request context).
APPEND_ONLY = ("gemini",)
#: The wires with cache markers in their messages, all under the example's ``cache_ttl``.
MARKER_WIRES = (
    "anthropic",
    "bedrock-anthropic",
    "bedrock-converse",
    "openai-chat",
    "openai-responses",
)


def live_requests(case: str) -> Iterator[ModelRequest]:
    """The model calls of a golden case as a server makes them: live requests (views of
    the history, not frozen copies), one process until a ``restart`` step."""
    scenario = load_scenario(GOLDEN / case / "scenario.yaml")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "c.sqlite"
        store = SQLiteStore(db)
        try:
            conv = Conversation.open(store, scenario.bundle, scenario.conversation)
            for step in scenario.steps:
                if isinstance(step, RestartStep):
                    store.close()
                    store = SQLiteStore(db)
                    conv = Conversation.open(store, scenario.bundle, scenario.conversation)
                    continue
                made = _run(scenario, conv, step)
                if made is not None:
                    yield made[2]
        finally:
            store.close()


def carried(requests: Iterable[ModelRequest], name: str) -> Iterator[ModelRequest]:
    """The requests as a call on provider ``name`` sends them: another provider's opaque
    parts (a scenario's thinking) carried or dropped by the failover rule, in that
    provider's body only (:class:`~prefixlock.review.replay.Carrier`, as the replay and
    ``verify`` carry them); still views of one append-only list per history list."""
    carrier = Carrier()
    for request in requests:
        yield carrier.request(request, name)


@functools.cache
def golden_bodies(case: str, name: str) -> tuple[bytes, ...]:
    return tuple(p.read_bytes() for p in sorted((GOLDEN / case / name).glob("*.json")))


@pytest.mark.parametrize("case", CASES)
def test_joined_fragments_are_the_golden_bytes_for_every_provider(case: str) -> None:
    live = {name: providers.get(name) for name in NAMES}
    carriers = {name: Carrier() for name in NAMES}
    counts = dict.fromkeys(NAMES, 0)
    for k, live_request in enumerate(live_requests(case)):
        assert isinstance(live_request.messages, MessageView)
        for name, provider in live.items():
            request = carriers[name].request(live_request, name)
            assert isinstance(request.messages, MessageView)
            fragments = provider.fragments(request)
            body = b"".join(fragments)
            assert body == golden_bodies(case, name)[k], (case, name, k + 1)
            assert fragments.size == len(body)
            assert len(fragments) == len(request.messages) + 2  # opening, messages, close
            assert provider.serialize(request) == body
            assert providers.get(name).serialize(request) == body  # a fresh instance
            counts[name] += 1
    for name in NAMES:
        assert counts[name] == len(golden_bodies(case, name)) > 0


@pytest.mark.parametrize("case", CASES)
def test_stream_bodies_from_fragments(case: str) -> None:
    """The streaming body is the non-streaming one with the stream fields last; sent
    from fragments it is the same bytes, and the fragments before the close are the
    non-streaming call's. Every provider from one replay of the case (as
    ``test_joined_fragments_are_the_golden_bytes_for_every_provider``), each with its
    own carrier: a replay per provider made this 132 replays on SQLite."""
    live = {name: providers.get(name) for name in NAMES}
    carriers = {name: Carrier() for name in NAMES}
    counts = dict.fromkeys(NAMES, 0)
    for k, live_request in enumerate(live_requests(case)):
        for name, provider in live.items():
            where = (case, name, k + 1)
            request = carriers[name].request(live_request, name)
            plain = golden_bodies(case, name)[k]
            call = provider.http_request(request, stream=True)
            # the route of the call's endpoint (bedrock-anthropic's mantle streams in the body)
            route = ENDPOINT_ROUTES[name, call.endpoint] if call.endpoint else ROUTES[name]
            fields = route.stream_fields
            expected = plain[:-1] + b"," + fields + b"}" if fields else plain
            assert call.body == expected, where
            assert b"".join(call.iter_body()) == expected, where
            assert call.content_length == len(expected), where
            assert call.fragments.prefix == provider.fragments(request).prefix, where
            assert provider.http_request(request).body == plain, where
            counts[name] += 1
    for name in NAMES:
        assert counts[name] == len(golden_bodies(case, name)) > 0, name


def _five_minute(requests: Iterable[ModelRequest]) -> Iterator[ModelRequest]:
    """The requests with ``cache_ttl: 5m`` on the marker wires. The example's ``auto``
    turns the root marker one-hour from an epoch's second user turn on: that call
    encodes its body afresh once (the system block's bytes change; OpenAI's developer
    message's breakpoint takes ``"ttl": "12h"``); what these tests pin is the reuse
    between calls of one marker policy."""
    for request in requests:
        for name in MARKER_WIRES:
            request = with_policy(request, name, "5m")
        yield request


def pairs_within_epochs(case: str, name: str) -> Iterator[tuple[ModelRequest, ModelRequest]]:
    """Consecutive calls of one epoch, as provider ``name`` is sent them, where the later
    one extends the earlier (a retry answers with the earlier, shorter request: not an
    extension)."""
    for a, b in itertools.pairwise(_five_minute(carried(live_requests(case), name))):
        if a.epoch == b.epoch and len(b.messages) >= len(a.messages):
            yield a, b


@pytest.mark.parametrize("name", NAMES)
def test_fragments_of_a_call_start_the_next_calls_where_the_body_is_append_only(
    name: str,
) -> None:
    checked = 0
    for case in CASES:
        provider = providers.get(name)
        for a, b in pairs_within_epochs(case, name):
            frags_a, frags_b = provider.fragments(a), provider.fragments(b)
            body_a, body_b = frags_a.join(), frags_b.join()
            shared = frags_b.prefix[: len(frags_a.prefix)]
            if body_b.startswith(body_a[: -len(frags_a.close)]):
                assert shared == frags_a.prefix, (case, name)
                # the same objects: taken over, not encoded again
                assert all(x is y for x, y in zip(shared, frags_a.prefix, strict=True))
                checked += 1
            else:  # a cache marker moved: every fragment before it is kept
                assert name not in APPEND_ONLY, (case, name)
                pairs = zip(shared, frags_a.prefix, strict=True)
                moved = next(i for i, (x, y) in enumerate(pairs) if x != y)
                assert moved >= 1  # the opening (head keys, instructions, tools) is kept
                assert all(x is y for x, y in zip(shared[:moved], frags_a.prefix, strict=False))
    if name != "bedrock-converse":  # its tail cachePoint is a block of the last message
        assert checked > 50


class CountingCache(dict[Any, Any]):
    """A fragment cache that counts its look-ups: one per message visited."""

    lookups = 0

    def get(self, key: Any, default: Any = None) -> Any:
        self.lookups += 1
        return super().get(key, default)


@pytest.mark.parametrize("name", NAMES)
def test_a_call_visits_only_its_new_messages(name: str) -> None:
    """Per call, the messages visited are the new ones plus at most the two whose cache
    marker moved (the previous tail; the previous context) -- not the history."""
    provider = providers.get(name)
    cache = CountingCache()
    provider._fragments = cache
    provider._blocks = cache
    previous: ModelRequest | None = None
    longest = 0
    for request in _five_minute(live_requests("long-session")):
        cache.lookups = 0
        provider.fragments(request)
        before = previous.messages if previous is not None else ()
        assert isinstance(request.messages, MessageView)
        if before and request.messages.shared_with(before) == len(before):
            # the same history list (no restart, no compaction in between) extended
            new = len(request.messages) - len(before)
            assert cache.lookups <= new + 2, (name, len(request.messages))
            longest = max(longest, len(request.messages))
        previous = request
    assert longest > 20  # long enough that visiting the history would show


def test_a_call_extends_its_lineages_fold_notes_without_copying_them() -> None:
    """Gemini's fragment keys fold the history's call names into notes; a call that
    extends the previous call's history extends that same dict (a copy per call would
    grow with the history), and the bodies stay the golden bytes."""
    provider = providers.get("gemini")
    previous: ModelRequest | None = None
    notes: object = None
    extended = 0
    for index, request in enumerate(live_requests("long-session")):
        body = b"".join(provider.fragments(request))
        assert body == golden_bodies("long-session", "gemini")[index]
        assert isinstance(request.messages, MessageView)
        chain = provider._chains[request.messages.lineage()]
        assert chain.notes is not None
        before = previous.messages if previous is not None else ()
        if before and request.messages.shared_with(before) == len(before):
            assert chain.notes is notes
            extended += 1
        notes, previous = chain.notes, request
    assert extended > 20
    assert isinstance(notes, dict) and "call_24" in notes  # the last epoch's calls


def test_body_fragments_close_with_another_end() -> None:
    body = BodyFragments.of((b'{"a":[', b"1", b",2"), b"]}")
    assert body.size == len(body.join())
    assert b"".join(body) == body.join() == b'{"a":[1,2]}'
    streamed = body.closed_with(b'],"stream":true}')
    assert streamed.join() == b'{"a":[1,2],"stream":true}'
    assert streamed.size == len(streamed.join())
    assert list(streamed)[:-1] == list(body.prefix)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_http_client_sends_the_fragments_as_the_exact_body(name: str, chunked: bool) -> None:
    """stdlib http.client POSTs the iterable body (with the Content-Length from the
    fragments, or chunked) to a server on 127.0.0.1, which receives serialize()'s bytes."""
    requests = list(live_requests("long-session"))
    provider = providers.get(name)
    with stub_server() as stub:
        host, port = stub.url.removeprefix("http://").split(":")
        for request in (requests[0], requests[-1]):
            call = provider.http_request(request)
            headers = dict(call.headers)
            if not chunked:
                headers["content-length"] = str(call.content_length)
            stub.queue(Reply(200, b"{}"))
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                conn.request(
                    call.method,
                    call.path,
                    body=call.iter_body(),
                    headers=headers,
                    encode_chunked=chunked,
                )
                conn.getresponse().read()
            finally:
                conn.close()
            seen = stub.seen[-1]
            assert seen.body == providers.get(name).serialize(request)
            assert seen.path == call.path
            if chunked:
                assert seen.headers["transfer-encoding"] == "chunked"
            else:
                assert seen.headers["content-length"] == str(len(seen.body))


@pytest.mark.parametrize("name", NAMES)
def test_frames_are_kept_least_recently_used_first(name: str) -> None:
    """An instance keeps at most ``frame_limit`` frames and drops the one used longest
    ago: a frame in use every call (the conversation's) survives a stream of new ones
    (the naive harness's system prompt at each context change), and is the same object,
    so the call's chain goes on from where it was."""
    provider = providers.get(name)
    provider.frame_limit = 2
    request = next(live_requests("long-session"))
    other = [attrs.evolve(request, instructions=f"{request.instructions}\n{n}") for n in range(3)]
    kept = provider.fragments(request)
    frame = provider._frames[next(iter(provider._frames))]
    for extra in other:
        provider.fragments(extra)
        assert provider.fragments(request) == kept
        assert any(held is frame for held in provider._frames.values())
        assert len(provider._frames) == 2
    assert list(provider._frames.values())[-1] is frame  # the most recently used, last
    provider.fragments(other[0])  # made again: it was dropped
    assert len(provider._frames) == 2
    assert any(held is frame for held in provider._frames.values())


@pytest.mark.parametrize("name", ["anthropic", "bedrock-converse"])  # the marker wires
def test_equal_sets_of_cache_positions_are_one_object(name: str) -> None:
    """Every message's fragment-cache key holds its set of cache positions: equal sets
    are one shared object, not a new frozenset per marked message per call."""
    provider = providers.get(name)
    seen: dict[frozenset[Any], frozenset[Any]] = {}
    for request in itertools.islice(live_requests("long-session"), 8):
        frame, per_message = provider._markers(request)
        for positions in [frame, *per_message.values()]:
            assert seen.setdefault(positions, positions) is positions
    assert len(seen) >= 2
