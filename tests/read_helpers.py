"""Shared drivers for the response-reader tests (not a test module): fixtures, chunked
feeding, strict SDK validation, and a short tool loop against the local stub."""

from __future__ import annotations

import http.client
import json
import random
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from conv_helpers import example_bundle, user
from prefixlock import Conversation, SQLiteStore, ToolResult, providers
from prefixlock.core import canonical
from prefixlock.core.output import ModelOutput
from pydantic import BaseModel
from stub_server import Reply, StubServer

DATA = Path(__file__).parent / "data" / "responses"


def fixture(provider: str, name: str) -> bytes:
    return (DATA / provider / name).read_bytes()


def unknown_keys(model: Any, path: str = "$") -> list[str]:
    """Every key the SDK type does not declare (pydantic keeps them as extras)."""
    found: list[str] = []
    if isinstance(model, BaseModel):
        found += [f"{path}.{key}" for key in sorted(model.__pydantic_extra__ or {})]
        for key in type(model).model_fields:
            found += unknown_keys(getattr(model, key), f"{path}.{key}")
    elif isinstance(model, list):
        for i, item in enumerate(model):
            found += unknown_keys(item, f"{path}[{i}]")
    return found


def sse_data(stream: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of a fixture stream's ``data:`` lines (``[DONE]`` skipped)."""
    for line in stream.decode("utf-8").split("\n"):
        if line.startswith("data: ") and line != "data: [DONE]":
            value = json.loads(line[len("data: ") :])
            assert isinstance(value, dict)
            yield value


def read_stream(provider: str, stream: bytes, sizes: str | int = "whole") -> ModelOutput:
    """Feed ``stream`` whole, byte by byte (``1``) or in seeded random sizes (an int
    seed given as ``"seed:N"``)."""
    reader = providers.get(provider).stream_reader()
    if sizes == "whole":
        reader.feed(stream)
    elif sizes == 1:
        for i in range(len(stream)):
            reader.feed(stream[i : i + 1])
    else:
        rng = random.Random(int(str(sizes).split(":")[1]))
        i = 0
        while i < len(stream):
            step = rng.randint(1, 97)
            reader.feed(stream[i : i + step])
            i += step
    return reader.result()


def messages_end(body: bytes) -> bytes:
    """The body up to the end of its message array (the trail after it repeats)."""
    return body[: body.rindex(b'],"prompt_cache_key"')]


def post(stub: StubServer, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(stub.url).netloc)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def tool_loop(
    provider: str, stub: StubServer, db: Path, *, stream: bool, restart: bool
) -> list[bytes]:
    """user -> tool calls (fixture) -> results -> final answer (fixture); with
    ``restart`` the conversation is reopened from SQLite between the model's tool calls
    and their results. Returns the request bodies sent."""
    ext = "sse" if stream else "json"
    kind = "text/event-stream" if stream else "application/json"
    stub.queue(
        Reply(200, _chunks(fixture(provider, f"tool_calls.{ext}")), kind),
        Reply(200, _chunks(fixture(provider, f"final.{ext}")), kind),
    )
    p = providers.get(provider)
    conv = Conversation.open(SQLiteStore(db), example_bundle(), "conv-1")
    request = conv.handle(user("u1"))
    sent: list[bytes] = []
    for step in range(2):
        call = p.http_request(request, stream=stream)
        sent.append(call.body)
        status, body = post(stub, call.path, dict(call.headers), call.body)
        assert status == 200
        if stream:
            reader = p.stream_reader()
            reader.feed(body)
            output = reader.result()
        else:
            output = p.parse_response(body)
        conv.record(output)
        if step == 0:
            if restart:
                conv = Conversation.open(SQLiteStore(db), example_bundle(), "conv-1")
            results = [ToolResult(c.call_id, f"contents of {c.call_id}") for c in output.tool_calls]
            request = conv.tool_results(results)
    return sent


def _chunks(body: bytes) -> list[bytes]:
    """Split in uneven pieces, so the client reads a stream across chunk borders."""
    return [body[i : i + 113] for i in range(0, len(body), 113)]


def _wire_form(provider: str, data: str) -> bytes:
    """An opaque part as the serializer sends it back: verbatim, except that stateless
    OpenAI Responses (``store: false``, the default) sends items without their ``id``
    (docs: providers/openai_responses.py, "Store policy")."""
    if provider == "openai-responses":
        item = canonical.loads(data)
        return canonical.dumpb({k: v for k, v in item.items() if k != "id"})
    return data.encode("utf-8")


def opaque_in_next_body(provider: str, output: ModelOutput) -> tuple[int, int, bytes]:
    """Record ``output`` after a user turn, answer its tool calls, and count how many of
    its opaque parts appear byte-identical in the next request body."""
    from prefixlock.store.contract import MemoryStore

    conv = Conversation.open(MemoryStore(), example_bundle(), "conv-1")
    first = providers.get(provider).serialize(conv.handle(user("u1")))
    conv.record(output)
    results = [ToolResult(c.call_id, "ok") for c in output.tool_calls]
    request = conv.tool_results(results) if results else conv.handle(user("u2", "and now?"))
    body = providers.get(provider).serialize(request)
    assert body.startswith(messages_end(first))
    found = sum(1 for part in output.opaque if _wire_form(provider, part.data) in body)
    for part in output.opaque:
        assert part.data == canonical.dumps(canonical.loads(part.data))
    return found, len(output.opaque), body
