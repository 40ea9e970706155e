"""docs/agent-loop.md, run as written: the same loop for every provider, streaming and
not, against a local stand-in that replays each provider's fixtures (a rate-limit error
first, to exercise the retry)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import REPO, user
from prefixlock import providers
from prefixlock.providers.readers.eventstream import encode_frame
from prefixlock.review.compare import TAIL_APPEND, compare_bodies
from stub_server import Reply, stub_server

DOC = REPO / "docs" / "agent-loop.md"
DATA = Path(__file__).parent / "data" / "responses"

#: provider -> the fixtures of one turn (tool calls first, a final answer last), and the
#: rate-limit error body its API documents.
SCRIPTS: dict[str, tuple[list[str], bytes]] = {
    "anthropic": (
        ["turn1", "turn2"],
        b'{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}',
    ),
    "gemini": (
        ["turn1", "turn2"],
        b'{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}',
    ),
    "openai-chat": (
        ["tool_calls", "final"],
        b'{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}',
    ),
    "openai-responses": (
        ["tool_calls", "final"],
        b'{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}',
    ),
    "bedrock-converse": (
        ["turn1_reasoning_parallel_tools", "turn2_redacted_edit", "turn3_final_text"],
        b'{"message":"Too many requests, please wait before trying again."}',
    ),
}


def _code() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    namespace: dict[str, Any] = {}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    return namespace


def _stream(provider: str, name: str) -> tuple[bytes, str]:
    folder = DATA / provider
    if provider == "bedrock-converse":
        events = json.loads((folder / f"{name}.stream.json").read_text(encoding="utf-8"))
        frames = b"".join(
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
        return frames, "application/vnd.amazon.eventstream"
    return (folder / f"{name}.sse").read_bytes(), "text/event-stream"


def _pieces(data: bytes, size: int = 57) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("provider", sorted(SCRIPTS))
def test_the_documented_loop_runs_for_every_provider(
    provider: str, stream: bool, tmp_path: Path
) -> None:
    code = _code()
    names, rate_limited = SCRIPTS[provider]
    wire = providers.get(provider)
    expected = [wire.parse_response((DATA / provider / f"{n}.json").read_bytes()) for n in names]
    ran: list[tuple[str, str]] = []

    def run_tool(name: str, arguments: str) -> str:
        ran.append((name, arguments))
        return f"result of {name}"

    with stub_server() as stub:
        stub.queue(Reply(429, rate_limited))
        for name in names:
            if stream:
                data, kind = _stream(provider, name)
                stub.queue(Reply(200, _pieces(data), kind))
            else:
                stub.queue(Reply(200, (DATA / provider / f"{name}.json").read_bytes()))
        conv = code["open_conversation"](f"sqlite:///{tmp_path}/s.db", REPO, "conv-1")
        answer = code["run_turn"](conv, wire, user("u1"), run_tool, stub.url, stream=stream)
    assert answer == expected[-1].text and answer
    assert ran == [(c.name, c.arguments) for out in expected[:-1] for c in out.tool_calls]
    sent = [seen.body for seen in stub.seen]
    assert len(sent) == len(names) + 1
    assert sent[0] == sent[1]  # the retry after the rate limit sent the same bytes
    for old, new in itertools.pairwise(sent[1:]):  # each call extends the last
        assert compare_bodies(provider, old, new).kind == TAIL_APPEND
    # every opaque part the model sent comes back in the last call
    for opaque in (p for out in expected[:-1] for p in out.opaque):
        if provider == "openai-responses":
            item = json.loads(opaque.data)
            item.pop("id", None)  # stateless Responses sends items without their ids
            assert json.dumps(item, separators=(",", ":"), sort_keys=True).encode() in sent[-1]
        else:
            assert opaque.data.encode() in sent[-1]
