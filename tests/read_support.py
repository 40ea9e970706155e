"""Shared drivers of the response-reader tests (not a test module): fixtures, chunkings,
strict SDK validation, round trips, and a tool loop through an official SDK client
against the local stub."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import openai
import pydantic
from conv_helpers import assert_prefix, example_bundle, user
from prefixlock import Conversation, SQLiteStore, ToolResult, providers
from prefixlock.core import canonical
from prefixlock.core.model import ModelRequest
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers import reader
from prefixlock.store.contract import MemoryStore
from stub_server import Reply, StubServer, stub_server

DATA = Path(__file__).parent / "data" / "responses"
#: The two turns of every provider's tool loop: tool calls, then a final answer.
TURNS = ("turn1", "turn2")


def fixture(provider: str, name: str) -> bytes:
    return (DATA / provider / name).read_bytes()


def chunkings(data: bytes) -> Iterator[tuple[str, list[bytes]]]:
    """The whole body, byte by byte, and random sizes (seeded) that split events."""
    yield "whole", [data]
    yield "bytes", [data[i : i + 1] for i in range(len(data))]
    for seed in range(4):
        rng = random.Random(seed)
        chunks, i = [], 0
        while i < len(data):
            n = rng.randint(1, 97)
            chunks.append(data[i : i + n])
            i += n
        yield f"random-{seed}", chunks


def read_stream(provider: str, chunks: bytes | Sequence[bytes]) -> ModelOutput:
    """Feed a whole stream (``bytes``) or its chunks to a fresh stream reader."""
    stream = reader(provider).stream_reader()
    for chunk in [chunks] if isinstance(chunks, bytes) else chunks:
        stream.feed(chunk)
    return stream.result()


def sse_events(body: bytes) -> list[tuple[str, Any]]:
    """(event name, parsed data) of a fixture stream (plain ``\\n`` lines, one data line)."""
    out = []
    for block in body.decode().split("\n\n"):
        if not block.strip():
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        out.append((fields.get("event", "message"), canonical.loads(fields["data"])))
    return out


def sse_data(stream: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of a fixture stream's ``data:`` lines (``[DONE]`` skipped)."""
    for line in stream.decode("utf-8").split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            value = json.loads(line[len("data: ") :])
            assert isinstance(value, dict)
            yield value


def unknown_keys(value: Any, path: str = "$") -> list[str]:
    """Every key of the JSON that a validated SDK model tree does not declare (pydantic
    keeps them as extras)."""
    found: list[str] = []
    if isinstance(value, pydantic.BaseModel):
        found += [f"{path}.{key}" for key in sorted(value.model_extra or {})]
        for name in type(value).model_fields:
            found += unknown_keys(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found += unknown_keys(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            found += unknown_keys(item, f"{path}.{key}")
    return found


def assert_no_extra(value: Any) -> None:
    """No key of the JSON went unrecognised anywhere in a validated SDK model tree."""
    extra = unknown_keys(value)
    assert not extra, f"keys the SDK type does not know: {extra}"


def strict(model: type[pydantic.BaseModel] | pydantic.TypeAdapter[Any], data: Any) -> Any:
    """Validate ``data`` with an SDK response type; unknown keys fail too."""
    raw = canonical.dumpb(data)  # JSON mode: bytes fields must be base64, as on the wire
    if isinstance(model, pydantic.TypeAdapter):
        value = model.validate_json(raw)
    else:
        value = model.model_validate_json(raw)
    assert_no_extra(value)
    return value


# -- record round trip -----------------------------------------------------------------


def results_for(output: ModelOutput) -> list[ToolResult]:
    return [ToolResult(c.call_id, f"output of {c.name} {c.arguments}") for c in output.tool_calls]


def round_trip(provider: str, outputs: Sequence[ModelOutput]) -> list[tuple[ModelRequest, bytes]]:
    """parse -> record -> tool_results (or, after an output without calls, a new user
    turn) -> next request, for each output in turn; returns every request with its body,
    and checks each earlier request is a prefix of the next (messages and wire items)."""
    wire = providers.get(provider)
    conv = Conversation.open(MemoryStore(), example_bundle(), "conv-1")
    request = conv.handle(user("u1"))
    calls: list[tuple[ModelRequest, bytes]] = [(request, wire.serialize(request))]
    for i, output in enumerate(outputs):
        conv.record(output)
        results = results_for(output)
        following = (
            conv.tool_results(results) if results else conv.handle(user(f"u{i + 2}", "thanks"))
        )
        assert_prefix(request, following)
        # block level, wire items of each message, with the cache markers removed: under
        # cache_ttl auto (the example's) a turn's first call moves its one-hour marker
        # onto the previous turn's opening message, as the prefix checks of verify allow
        earlier = wire.strip_cache_markers(wire.wire_body(request))[wire.MESSAGES_KEY]
        later = wire.strip_cache_markers(wire.wire_body(following))[wire.MESSAGES_KEY]
        assert later[: len(earlier)] == earlier
        request = following
        calls.append((request, wire.serialize(request)))
    return calls


def opaque_in(body: bytes, outputs: Sequence[ModelOutput]) -> tuple[int, int]:
    """(opaque parts found byte-identical exactly once in ``body``, opaque parts)."""
    parts = [p for output in outputs for p in output.opaque]
    return sum(body.count(p.data.encode()) == 1 for p in parts), len(parts)


def messages_end(body: bytes) -> bytes:
    """An OpenAI body up to the end of its message array (the trail after it repeats)."""
    return body[: body.rindex(b'],"prompt_cache_key"')]


def _wire_form(provider: str, data: str) -> bytes:
    """An opaque part as the serializer sends it back: verbatim, except that stateless
    OpenAI Responses (``store: false``, the default) sends items without their ``id``
    (docs: providers/openai_responses.py, "Store policy")."""
    if provider == "openai-responses":
        item = canonical.loads(data)
        assert isinstance(item, dict)
        return canonical.dumpb({k: v for k, v in item.items() if k != "id"})
    return data.encode("utf-8")


def opaque_in_next_body(provider: str, output: ModelOutput) -> tuple[int, int, bytes]:
    """Record ``output`` after a user turn, answer its tool calls, and count how many of
    its opaque parts appear byte-identical in the next request body."""
    wire = providers.get(provider)
    conv = Conversation.open(MemoryStore(), example_bundle(), "conv-1")
    opening = conv.handle(user("u1"))
    first = wire.serialize(opening)
    conv.record(output)
    results = [ToolResult(c.call_id, "ok") for c in output.tool_calls]
    request = conv.tool_results(results) if results else conv.handle(user("u2", "and now?"))
    body = wire.serialize(request)
    if results:  # the same turn: the first body's messages, byte for byte
        assert body.startswith(messages_end(first))
    # A new turn under cache_ttl auto (the example's gpt-5.6-sol) moves its 12h breakpoint
    # onto the previous turn's opening message (and makes the root's 12h): every earlier
    # item is kept, but for its breakpoint member.
    earlier = wire.strip_cache_markers(wire.wire_body(opening))[wire.MESSAGES_KEY]
    later = wire.strip_cache_markers(wire.wire_body(request))[wire.MESSAGES_KEY]
    assert later[: len(earlier)] == earlier
    found = sum(1 for part in output.opaque if _wire_form(provider, part.data) in body)
    for part in output.opaque:
        assert part.data == canonical.dumps(canonical.loads(part.data))
    return found, len(output.opaque), body


# -- end to end ------------------------------------------------------------------------

#: send(stub, http_request) -> the response bytes as the client received them (chunks)
Sender = Callable[[StubServer, Any, bool], list[bytes]]


def tool_loop(
    provider: str,
    stub: StubServer,
    db: Path,
    send: Sender,
    *,
    stream: bool,
    restart_after: int | None,
    content_type: str,
    turns: Sequence[str] = TURNS,
) -> list[ModelOutput]:
    """Run the fixture tool loop (``turns``: the fixture names of the tool calls, then of
    the final answer) through the stub; reopen the store after turn ``restart_after``.
    Every body the stub saw is http_request()'s exact bytes."""
    wire = providers.get(provider)
    store = SQLiteStore(db)
    conv = Conversation.open(store, example_bundle(), "conv-1")
    request = conv.handle(user("u1"))
    outputs = []
    for i, turn in enumerate(turns):
        http = wire.http_request(request, stream=stream)
        body = fixture(provider, f"{turn}.sse" if stream else f"{turn}.json")
        chunks = [body[j : j + 61] for j in range(0, len(body), 61)] if stream else [body]
        stub.queue(Reply(200, chunks, content_type if stream else "application/json"))
        received = send(stub, http, stream)
        seen = stub.seen[-1]
        assert (seen.method, seen.path, seen.body) == (http.method, http.path, http.body)
        for name, value in http.headers.items():
            assert seen.headers[name] == value
        if stream:
            output = read_stream(provider, received)
        else:
            output = wire.parse_response(b"".join(received))
        outputs.append(output)
        conv.record(output)
        if restart_after == i:
            store.close()
            store = SQLiteStore(db)
            conv = Conversation.open(store, example_bundle(), "conv-1")
        if not output.tool_calls:
            break
        request = conv.tool_results(results_for(output))
    store.close()
    return outputs


# -- the OpenAI client as the transport ------------------------------------------------


_Event = TypeVar("_Event")


class _TeeStream(openai.Stream[_Event], Generic[_Event]):
    """The SDK's own stream (its SSE decoder and event types), keeping the bytes it read
    so prefixlock's reader can be fed the very same response."""

    raw: list[bytes]

    def _iter_events(self) -> Iterator[Any]:
        self.raw = []

        def tee() -> Iterator[bytes]:
            for chunk in self.response.iter_bytes():
                self.raw.append(chunk)
                yield chunk

        yield from self._decoder.iter_bytes(tee())


def openai_sender(cast_to: type[pydantic.BaseModel], event: Any, parsed: list[Any]) -> Sender:
    """A :data:`Sender` through ``openai.OpenAI``: ``client.post(path, content=body)``
    sends http_request()'s bytes as they are (``content=``, where ``body=`` would
    re-encode a dict), and the SDK parses the reply into ``cast_to`` (or a list of
    ``event`` for a stream), appended to ``parsed``. The ``X-Stainless-Raw-Response``
    header makes ``post`` return the SDK's raw response, whose ``parse()`` is the same
    path ``client.chat.completions.with_raw_response.create`` takes."""

    def send(stub: StubServer, http: Any, stream: bool) -> list[bytes]:
        client = openai.OpenAI(base_url=stub.url, api_key="test-key", max_retries=0)
        if not stream:
            headers = {**http.headers, "X-Stainless-Raw-Response": "true"}
            raw: Any = client.post(
                http.path, cast_to=cast_to, content=http.body, options={"headers": headers}
            )
            parsed.append(raw.parse())
            return [raw.content]
        events = client.post(
            http.path,
            cast_to=cast_to,
            content=http.body,
            options={"headers": dict(http.headers)},
            stream=True,
            stream_cls=_TeeStream[event],
        )
        assert isinstance(events, _TeeStream)
        parsed.append(list(events))
        return events.raw

    return send


def openai_sdk_tool_loop(
    name: str,
    tmp_path: Path,
    *,
    stream: bool,
    path: str,
    turns: Sequence[str],
    cast_to: type[pydantic.BaseModel],
    event: Any,
) -> list[bytes]:
    """The tool loop twice through the official OpenAI client (once straight, once with a
    restart from SQLite after the first call) against the stand-in; checks what both
    OpenAI APIs share and returns the straight run's request bodies.

    Checked: both runs read the fixtures' outputs and send the same bytes; every request
    goes to ``path`` with the SDK's accept header and bearer key; the SDK parsed every
    reply into its own types field for field."""
    parsed: list[Any] = []
    send = openai_sender(cast_to, event, parsed)
    sse = "text/event-stream"
    with stub_server() as stub:
        plain = tool_loop(
            name,
            stub,
            tmp_path / "a.db",
            send,
            stream=stream,
            restart_after=None,
            content_type=sse,
            turns=turns,
        )
        straight = [s.body for s in stub.seen]
        restarted = tool_loop(
            name,
            stub,
            tmp_path / "b.db",
            send,
            stream=stream,
            restart_after=0,
            content_type=sse,
            turns=turns,
        )
        after = [s.body for s in stub.seen[len(straight) :]]
        seen = list(stub.seen)
    parse = providers.get(name).parse_response
    assert plain == restarted == [parse(fixture(name, f"{t}.json")) for t in turns]
    assert len(straight) == 2
    assert after == straight
    assert [s.path for s in seen] == [path] * 4
    accept = "text/event-stream" if stream else "application/json"
    assert {s.headers["accept"] for s in seen} == {accept}
    assert {s.headers["authorization"] for s in seen} == {"Bearer test-key"}  # the SDK's auth
    for got, turn in zip(parsed, [*turns, *turns], strict=True):
        if stream:
            events = [e.model_dump(mode="json", exclude_unset=True) for e in got]
            assert events == list(sse_data(fixture(name, f"{turn}.sse")))
        else:
            sdk = got.model_dump(mode="json", exclude_unset=True)
            assert sdk == json.loads(fixture(name, f"{turn}.json"))
    return straight
