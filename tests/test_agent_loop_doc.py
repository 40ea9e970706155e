"""docs/agent-loop.md, run as written: the same loop for every provider, sync and async,
streaming and not, against a local stand-in that replays each provider's fixtures (a
rate-limit error first, to exercise the retry), with a crash and a restart from SQLite
in the middle; then 30 turns per provider, and 50 conversations at once on one
AsyncClient, every history byte-identical to the sequential run."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import REPO, example_bundle, user
from http_support import (
    AWS_KEY_ID,
    AWS_SECRET,
    PROVIDERS,
    RATE_LIMITED,
    REGION,
    TURNS,
    expected,
    success,
)
from prefixlock import providers
from prefixlock.review.compare import TAIL_APPEND, compare_bodies
from prefixlock.runtime.conversation import Conversation
from prefixlock.store.contract import MemoryStore
from stub_server import Reply, Seen, StubServer, stub_server

DOC = REPO / "docs" / "agent-loop.md"
KIND = pytest.mark.parametrize("kind", ["sync", "async"])


def _code() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


CODE = _code()


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The integrator's whole provider configuration: keys in the environment (the base
    URL is the stand-in's, given to open_client)."""
    for name in ("GOOGLE_API_KEY", "AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "ANTHROPIC_API_KEY": "sk-ant-test",
        "OPENAI_API_KEY": "sk-openai-test",
        "GEMINI_API_KEY": "gemini-test",
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
    }.items():
        monkeypatch.setenv(name, value)


class Crash(Exception):
    """The process dies while a tool runs."""


def _turn(
    kind: str,
    conv: Conversation,
    provider: str,
    url: str,
    event: Any,
    run_tool: Callable[[str, str], str],
    stream: bool,
) -> str:
    """The page's run_turn (or arun_turn on an AsyncClient) with the page's client."""
    if kind == "sync":
        with CODE["open_client"](provider, base_url=url) as client:
            answer: str = CODE["run_turn"](conv, client, event, run_tool, stream=stream)
            return answer

    async def tool(name: str, arguments: str) -> str:
        return run_tool(name, arguments)

    async def go() -> str:
        async with CODE["open_client"](provider, base_url=url, asynchronous=True) as client:
            answer: str = await CODE["arun_turn"](conv, client, event, tool, stream=stream)
            return answer

    return asyncio.run(go())


def _loop(
    kind: str, provider: str, stream: bool, db: Path, stub: StubServer, crash: bool
) -> tuple[str, list[tuple[str, str]]]:
    ran: list[tuple[str, str]] = []
    crashes = [crash]

    def run_tool(name: str, arguments: str) -> str:
        if crashes[0]:
            crashes[0] = False
            raise Crash
        ran.append((name, arguments))
        return f"result of {name}"

    url = f"sqlite:///{db}"
    conv = CODE["open_conversation"](url, REPO, "conv-1")
    try:
        answer = _turn(kind, conv, provider, stub.url, user("u1"), run_tool, stream)
    except Crash:
        conv.store.close()  # the process is gone; a new one opens the store
        conv = CODE["open_conversation"](url, REPO, "conv-1")
        answer = _turn(kind, conv, provider, stub.url, user("u1"), run_tool, stream)
    conv.store.close()
    return answer, ran


@KIND
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_documented_loop_runs_and_resumes_after_a_restart(
    provider: str, stream: bool, kind: str, tmp_path: Path
) -> None:
    names = TURNS[provider]
    outputs = [expected(provider, n) for n in names]
    body, headers = RATE_LIMITED[provider]
    sent: dict[bool, list[bytes]] = {}
    for crash in (False, True):
        with stub_server() as stub:
            stub.queue(Reply(429, body, headers=(("retry-after", "0"), *headers)))
            stub.queue(*[success(provider, n, stream) for n in names])
            answer, ran = _loop(kind, provider, stream, tmp_path / f"{crash}.db", stub, crash)
        assert answer == outputs[-1].text and answer
        assert ran == [(c.name, c.arguments) for out in outputs[:-1] for c in out.tool_calls]
        sent[crash] = [seen.body for seen in stub.seen]
    # the crash and restart changed no byte of any call
    assert sent[True] == sent[False]
    calls = sent[False]
    assert len(calls) == len(names) + 1
    assert calls[0] == calls[1]  # the retry after the rate limit sent the same bytes
    for old, new in itertools.pairwise(calls[1:]):  # each call extends the last
        assert compare_bodies(provider, old, new).kind == TAIL_APPEND
    # every opaque part the model sent comes back in the last call
    for opaque in (p for out in outputs[:-1] for p in out.opaque):
        if provider == "openai-responses":
            item = json.loads(opaque.data)
            item.pop("id", None)  # stateless Responses sends items without their ids
            assert json.dumps(item, separators=(",", ":"), sort_keys=True).encode() in calls[-1]
        else:
            assert opaque.data.encode() in calls[-1]


# -- long conversations, many at once --------------------------------------------------

_ID = re.compile(rb'"((?:toolu_|call[-_]|tooluse_|fc_)(?!id")[A-Za-z0-9_]+)"')
#: The fixtures' response ids (tests/test_response_ids.py): a provider never sends one
#: twice, and record() is idempotent by it, so each reply gets its own.
_RESPONSE_ID = re.compile(
    rb'"((?:msg_01AbCdEfGhIjKlMnOpQrStUv|msg_01WxYz0123456789AbCdEfGh|chatcmpl-C1a2b[34]'
    rb'|resp_68e1a2b3c4d5e6f[78]|mGIbaOqNJ5y3nvgP0cXJgAw|nWIbaKqdL8y3nvgP1cXJgAw))"'
)
_CONV = re.compile(rb"task for (c[0-9]+)")


def _unique(reply: Reply, suffix: str) -> Reply:
    """The fixture with every tool call id made unique to one conversation and call."""
    body = reply.body if isinstance(reply.body, bytes) else b"".join(reply.body)
    body = _ID.sub(lambda m: b'"' + m.group(1) + suffix.encode() + b'"', body)
    body = _RESPONSE_ID.sub(lambda m: b'"' + m.group(1) + suffix.encode() + b'"', body)
    if reply.content_type == "application/vnd.amazon.eventstream":
        return Reply(200, [body], reply.content_type)  # (frames were re-encoded below)
    return Reply(200, [body], reply.content_type)


def _responder(provider: str) -> Callable[[Seen], Reply]:
    """Each conversation's calls answered in turn with the provider's fixtures: tool
    calls, then the final answer, again for every user turn."""
    counts: dict[bytes, int] = {}
    names = TURNS[provider]

    def respond(seen: Seen) -> Reply:
        conv = _CONV.findall(seen.body)[0]
        n = counts.get(conv, 0)
        counts[conv] = n + 1
        stream = not seen.path.endswith(("/converse", ":generateContent")) and (
            b'"stream":true' in seen.body or "stream" in seen.path.lower()
        )
        reply = success(provider, names[n % len(names)], stream)
        suffix = f"x{conv.decode()}n{n}"
        if provider == "bedrock-converse" and stream:
            return _bedrock_stream(names[n % len(names)], suffix)
        if provider == "bedrock-anthropic" and stream:  # ids inside base64 chunks
            return _bedrock_anthropic_stream(names[n % len(names)], suffix)
        return _unique(reply, suffix)

    return respond


def _bedrock_stream(name: str, suffix: str) -> Reply:
    from http_support import DATA, frames

    events = json.loads((DATA / "bedrock-converse" / f"{name}.stream.json").read_bytes())
    text = _ID.sub(
        lambda m: b'"' + m.group(1) + suffix.encode() + b'"', json.dumps(events).encode()
    )
    return Reply(200, [frames(json.loads(text))], "application/vnd.amazon.eventstream")


def _bedrock_anthropic_stream(name: str, suffix: str) -> Reply:
    from http_support import DATA, chunk_frames

    sse = (DATA / "anthropic" / f"{name}.sse").read_bytes()
    for pattern in (_ID, _RESPONSE_ID):
        sse = pattern.sub(lambda m: b'"' + m.group(1) + suffix.encode() + b'"', sse)
    return Reply(200, [chunk_frames(sse)], "application/vnd.amazon.eventstream")


def _conversation(cid: str) -> Conversation:
    return Conversation.open(MemoryStore(), example_bundle(), cid)


def _tool(name: str, arguments: str) -> str:
    return f"result of {name}"


async def _atool(name: str, arguments: str) -> str:
    return f"result of {name}"


def _sequential(
    provider: str, url: str, cids: list[str], turns: int, stream: bool
) -> dict[str, list[bytes]]:
    """Every conversation's calls, one after the other, on one sync Client."""
    bodies: dict[str, list[bytes]] = {}
    with CODE["open_client"](provider, base_url=url) as client:
        for cid in cids:
            conv = _conversation(cid)
            for t in range(turns):
                event = user(f"e{t}", f"task for {cid}", conversation=cid)
                CODE["run_turn"](conv, client, event, _tool, stream=stream)
            bodies[cid] = [providers.get(provider).serialize(conv.request())]
    return bodies


async def _concurrent(
    provider: str, url: str, cids: list[str], turns: int, stream: bool
) -> dict[str, list[bytes]]:
    """The same conversations all at once on one AsyncClient."""

    async def one(client: Any, cid: str) -> list[bytes]:
        conv = _conversation(cid)
        for t in range(turns):
            event = user(f"e{t}", f"task for {cid}", conversation=cid)
            await CODE["arun_turn"](conv, client, event, _atool, stream=stream)
        return [providers.get(provider).serialize(conv.request())]

    async with CODE["open_client"](provider, base_url=url, asynchronous=True) as client:
        found = await asyncio.gather(*(one(client, cid) for cid in cids))
    return dict(zip(cids, found, strict=True))


def _per_conversation(seen: list[Seen]) -> dict[str, list[bytes]]:
    out: dict[str, list[bytes]] = {}
    for s in seen:
        out.setdefault(_CONV.findall(s.body)[0].decode(), []).append(s.body)
    return out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_fifty_conversations_at_once_on_one_async_client_match_the_sequential_run(
    provider: str,
) -> None:
    cids = [f"c{i}" for i in range(50)]
    with stub_server() as stub:
        stub.responder = _responder(provider)
        sequential = _sequential(provider, stub.url, cids, 1, True)
        calls_sequential = _per_conversation(stub.seen)
        ports_sequential = {s.port for s in stub.seen}
        stub.seen.clear()
        stub.responder = _responder(provider)
        concurrent = asyncio.run(_concurrent(provider, stub.url, cids, 1, True))
        calls_concurrent = _per_conversation(stub.seen)
        ports = {s.port for s in stub.seen}
    assert concurrent == sequential  # every history, byte for byte
    assert calls_concurrent == calls_sequential  # and every call on the way
    assert len(calls_concurrent) == 50
    assert {len(c) for c in calls_concurrent.values()} == {len(TURNS[provider])}
    assert len(ports_sequential) == 1  # one connection, reused for all 50 conversations
    assert 1 < len(ports) <= 50  # at once: pooled, never more than the conversations


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_thirty_turns_need_no_provider_specific_line(provider: str, kind: str) -> None:
    """The figure of the issue: 30 user turns, streamed, through the
    page's loop with only the provider's name, key and base URL; every call extends the
    one before it (no prefix break) and every opaque part goes back verbatim."""
    with stub_server() as stub:
        stub.responder = _responder(provider)
        if kind == "sync":
            final = _sequential(provider, stub.url, ["c0"], 30, True)
        else:
            final = asyncio.run(_concurrent(provider, stub.url, ["c0"], 30, True))
        calls = [s.body for s in stub.seen]
    assert len(calls) == 30 * len(TURNS[provider])
    for old, new in itertools.pairwise(calls):
        assert compare_bodies(provider, old, new).kind == TAIL_APPEND
    # the history holds every tool call made: each call's ids carry its number
    per_turn = len(TURNS[provider])
    made = {n for n in range(len(calls)) if n % per_turn < per_turn - 1}
    assert {int(n) for n in re.findall(rb"xc0n([0-9]+)", final["c0"][0])} == made
