"""Shared builders for the prefixlock.http tests (not a test module): each provider's
replies on the stand-in server (fixtures as JSON, SSE or AWS event-stream frames, its
documented error bodies and mid-stream errors) and clients that never wait."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from prefixlock import providers
from prefixlock.core.output import ModelOutput
from prefixlock.http import AsyncClient, Client, Retry, Timeouts
from prefixlock.providers.readers.eventstream import encode_frame
from prefixlock.providers.readers.sse import SSEDecoder
from prefixlock.providers.transport import HttpRequest
from stub_server import Reply, Seen

DATA = Path(__file__).parent / "data" / "responses"
PROVIDERS = sorted(providers.NAMES)

#: A key that must never show: in errors, reprs, logs.
API_KEY = "sk-test-SECRET-0123456789"
AWS_KEY_ID = "AKIDEXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI-SECRET-K7MDENG+bPxRfiCYEXAMPLEKEY"
REGION = "us-east-1"

#: provider -> the fixtures of one tool loop (tool calls first, the final answer last)
TURNS: dict[str, list[str]] = {
    "anthropic": ["turn1", "turn2"],
    "bedrock-anthropic": ["turn1", "turn2"],
    "gemini": ["turn1", "turn2"],
    "openai-chat": ["tool_calls", "final"],
    "openai-responses": ["tool_calls", "final"],
    "bedrock-converse": [
        "turn1_reasoning_parallel_tools",
        "turn2_redacted_edit",
        "turn3_final_text",
    ],
}

#: provider -> (status 429 body, headers): each API's documented rate-limit error
RATE_LIMITED: dict[str, tuple[bytes, tuple[tuple[str, str], ...]]] = {
    "anthropic": (
        b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
        (("request-id", "req_011CRate"),),
    ),
    "gemini": (
        b'{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}',
        (),
    ),
    "openai-chat": (
        b'{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}',
        (("x-request-id", "req_chat429"),),
    ),
    "openai-responses": (
        b'{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}',
        (("x-request-id", "req_resp429"),),
    ),
    "bedrock-converse": (
        b'{"message":"Too many requests, please wait before trying again."}',
        (
            ("x-amzn-errortype", "ThrottlingException:http://internal.amazon.com/coral/"),
            ("x-amzn-requestid", "0f4c-rate"),
        ),
    ),
}
RATE_LIMITED["bedrock-anthropic"] = RATE_LIMITED["bedrock-converse"]

#: provider -> (status 400 body, headers): a refused request (not retry-safe)
REFUSED: dict[str, tuple[bytes, tuple[tuple[str, str], ...]]] = {
    "anthropic": (
        b'{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: bad"}}',
        (("request-id", "req_011CBad"),),
    ),
    "gemini": (
        b'{"error":{"code":400,"message":"bad field","status":"INVALID_ARGUMENT"}}',
        (),
    ),
    "openai-chat": (
        b'{"error":{"message":"bad field","type":"invalid_request_error","code":null}}',
        (("x-request-id", "req_chat400"),),
    ),
    "openai-responses": (
        b'{"error":{"message":"bad field","type":"invalid_request_error","code":null}}',
        (("x-request-id", "req_resp400"),),
    ),
    "bedrock-converse": (
        b'{"message":"Malformed input request"}',
        (
            ("x-amzn-errortype", "ValidationException:http://internal.amazon.com/coral/"),
            ("x-amzn-requestid", "0f4c-bad"),
        ),
    ),
}
REFUSED["bedrock-anthropic"] = REFUSED["bedrock-converse"]

#: The fixtures folder of each provider (Bedrock's Claude Messages answers as Anthropic's).
FOLDERS = {name: name for name in PROVIDERS} | {"bedrock-anthropic": "anthropic"}
#: The Bedrock wires: SigV4 (or a Bedrock API key), a region, event-stream responses.
BEDROCK = frozenset({"bedrock-anthropic", "bedrock-converse"})
EVENTSTREAM = "application/vnd.amazon.eventstream"


def botocore_signature(url: str, seen: Seen, service: str, signed: Collection[str]) -> str:
    """The SigV4 signature botocore's ``SigV4Auth`` computes, with :data:`AWS_KEY_ID` /
    :data:`AWS_SECRET` in :data:`REGION` for ``service``, over the request the stand-in
    server at ``url`` received (``seen``: its path, the ``signed`` headers as received, the
    body's bytes, at the request's own ``x-amz-date``)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    request = AWSRequest(
        method="POST",
        url=url + seen.path,
        headers={k: v for k, v in seen.headers.items() if k in signed},
        data=seen.body,  # botocore hashes the whole body itself
    )
    request.context["timestamp"] = seen.headers["x-amz-date"]
    auth = SigV4Auth(Credentials(AWS_KEY_ID, AWS_SECRET), service, REGION)
    signature: str = auth.signature(
        auth.string_to_sign(request, auth.canonical_request(request)), request
    )
    return signature


def frames(events: Sequence[dict[str, Any]]) -> bytes:
    return b"".join(
        encode_frame(
            {
                ":event-type": e["event"],
                ":content-type": "application/json",
                ":message-type": "event",
            },
            json.dumps(e["payload"]).encode(),
        )
        for e in events
    )


def chunk_frame(data: bytes, pad: str = "abcdefghij") -> bytes:
    """One InvokeModelWithResponseStream ``chunk`` frame carrying an Anthropic event
    (``data``, its JSON) as ``{"bytes": base64, "p": padding}``."""
    payload = {"bytes": base64.b64encode(data).decode("ascii"), "p": pad}
    return encode_frame(
        {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"},
        json.dumps(payload).encode(),
    )


def chunk_frames(sse: bytes) -> bytes:
    """An Anthropic SSE stream as InvokeModelWithResponseStream sends the same events."""
    decoder = SSEDecoder()
    events = decoder.feed(sse) + decoder.close()
    return b"".join(chunk_frame(event.data.encode("utf-8")) for event in events)


def stream_bytes(provider: str, name: str) -> tuple[bytes, str]:
    folder = DATA / FOLDERS[provider]
    if provider == "bedrock-converse":
        events = json.loads((folder / f"{name}.stream.json").read_text(encoding="utf-8"))
        return frames(events), EVENTSTREAM
    if provider == "bedrock-anthropic":
        return chunk_frames((folder / f"{name}.sse").read_bytes()), EVENTSTREAM
    return (folder / f"{name}.sse").read_bytes(), "text/event-stream"


def pieces(data: bytes, size: int = 57) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def success(provider: str, name: str, stream: bool) -> Reply:
    """The fixture ``name`` as the API sends it (a stream in 57-byte chunks)."""
    if stream:
        data, kind = stream_bytes(provider, name)
        return Reply(200, pieces(data), kind)
    return Reply(200, (DATA / FOLDERS[provider] / f"{name}.json").read_bytes())


def expected(provider: str, name: str) -> ModelOutput:
    body = (DATA / FOLDERS[provider] / f"{name}.json").read_bytes()
    return providers.get(provider).parse_response(body)


def overloaded_midstream(provider: str) -> Reply:
    """HTTP 200, a few events, then the provider's overloaded error in the stream."""
    folder = DATA / provider
    if provider in BEDROCK:
        kind = EVENTSTREAM
        if provider == "bedrock-converse":
            head = frames([{"event": "messageStart", "payload": {"role": "assistant"}}])
        else:
            start = (DATA / "anthropic" / "turn1.sse").read_bytes().split(b"\n\n")[0]
            head = chunk_frames(start + b"\n\n")
        error = encode_frame(
            {
                ":exception-type": "serviceUnavailableException",
                ":content-type": "application/json",
                ":message-type": "exception",
            },
            b'{"message":"The service is overloaded"}',
        )
        return Reply(200, pieces(head + error), kind)
    name = {
        "anthropic": "error_overloaded",
        "gemini": "error_unavailable",
        "openai-chat": "error",
        "openai-responses": "error",
    }[provider]
    return Reply(200, pieces((folder / f"{name}.sse").read_bytes()), "text/event-stream")


def cut_short(reply: Reply) -> Reply:
    """The same reply's first half, then a clean end (no final event)."""
    body = reply.body if isinstance(reply.body, bytes) else b"".join(reply.body)
    return Reply(200, [body[: len(body) // 2]], reply.content_type)


def reset_midway(reply: Reply) -> Reply:
    """The same reply's first half, then the connection reset."""
    body = reply.body if isinstance(reply.body, bytes) else b"".join(reply.body)
    return Reply(200, [body[: len(body) // 2]], reply.content_type, reset=True)


def bad_crc(reply: Reply) -> Reply:
    """A Bedrock stream whose second frame has one payload byte flipped."""
    body = reply.body if isinstance(reply.body, bytes) else b"".join(reply.body)
    first = int.from_bytes(body[:4], "big")
    corrupt = bytearray(body)
    corrupt[first + 20] ^= 0x01  # inside frame 2's headers/payload, under its message CRC
    return Reply(200, pieces(bytes(corrupt)), reply.content_type)


def credentials(provider: str) -> dict[str, Any]:
    if provider in BEDROCK:
        return {
            "region": REGION,
            "aws_access_key_id": AWS_KEY_ID,
            "aws_secret_access_key": AWS_SECRET,
        }
    return {"api_key": API_KEY}


class Waits(list[float]):
    """An injected sleep: records each wait, never waits."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.append(seconds)


FAST = Timeouts(connect=2.0, read=0.15, write=2.0, total=30.0)


def client(
    kind: str, provider: str, url: str, waits: Waits, retry: Retry | None = None, **more: Any
) -> Client | AsyncClient:
    options: dict[str, Any] = {
        "base_url": url,
        "retry": retry or Retry(seed=7),
        "timeouts": FAST,
        "env": {},
        **credentials(provider),
        **more,
    }
    if kind == "async":
        return AsyncClient(provider, sleep=waits.asleep, **options)
    return Client(provider, sleep=waits, **options)


def run(
    kind: str,
    make: Callable[[], Client | AsyncClient],
    call: HttpRequest,
    stream: bool,
) -> ModelOutput:
    """Send ``call`` with a fresh client of ``kind`` (sync or async) and close it."""
    if kind == "async":

        async def go() -> ModelOutput:
            c = make()
            assert isinstance(c, AsyncClient)
            async with c:
                return await (c.stream(call) if stream else c.send(call))

        return asyncio.run(go())
    c = make()
    assert isinstance(c, Client)
    with c:
        return c.stream(call) if stream else c.send(call)
