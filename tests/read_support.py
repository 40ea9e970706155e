"""Shared drivers of the Anthropic and Gemini reader tests (not a test module): chunkings,
strict SDK validation, round trips and a tool loop against the local stub. (The OpenAI
reader tests use read_helpers.py; the two grew in parallel and are to be merged.)"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pydantic
from conv_helpers import assert_prefix, example_bundle, user
from prefixlock import Conversation, SQLiteStore, ToolResult, providers
from prefixlock.core import canonical
from prefixlock.core.model import ModelRequest
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers import reader
from prefixlock.store.contract import MemoryStore
from stub_server import Reply, StubServer

RESPONSES = Path(__file__).parent / "data" / "responses"
#: The two turns of every provider's tool loop: tool calls, then a final answer.
TURNS = ("turn1", "turn2")


def fixture(provider: str, name: str) -> bytes:
    return (RESPONSES / provider / name).read_bytes()


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


def read_stream(provider: str, chunks: Sequence[bytes]) -> ModelOutput:
    stream = reader(provider).stream_reader()
    for chunk in chunks:
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


def assert_no_extra(value: Any, path: str = "$") -> None:
    """No key of the JSON went unrecognised anywhere in a validated SDK model tree."""
    if isinstance(value, pydantic.BaseModel):
        extra = value.model_extra or {}
        assert not extra, f"{path}: keys the SDK type does not know: {sorted(extra)}"
        for name in type(value).model_fields:
            assert_no_extra(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            assert_no_extra(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            assert_no_extra(item, f"{path}.{key}")


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
        earlier = wire.wire_body(request)[wire.MESSAGES_KEY]
        later = wire.wire_body(following)[wire.MESSAGES_KEY]
        assert later[: len(earlier)] == earlier  # block level, wire bytes of each item
        request = following
        calls.append((request, wire.serialize(request)))
    return calls


def opaque_in(body: bytes, outputs: Sequence[ModelOutput]) -> tuple[int, int]:
    """(opaque parts found byte-identical exactly once in ``body``, opaque parts)."""
    parts = [p for output in outputs for p in output.opaque]
    return sum(body.count(p.data.encode()) == 1 for p in parts), len(parts)


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
) -> list[ModelOutput]:
    """Run the fixture tool loop through the stub; reopen the store after turn
    ``restart_after``. Every body the stub saw is http_request()'s exact bytes."""
    wire = providers.get(provider)
    store = SQLiteStore(db)
    conv = Conversation.open(store, example_bundle(), "conv-1")
    request = conv.handle(user("u1"))
    outputs = []
    for i, turn in enumerate(TURNS):
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
