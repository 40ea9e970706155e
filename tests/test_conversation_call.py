"""Conversation.call / acall: build the current request for the client's provider, send
it, record the output, return it; nothing recorded when the call fails; the client is
any object of the runtime's protocol."""

from __future__ import annotations

import asyncio

import pytest
from conv_helpers import open_conv, user
from http_support import API_KEY, expected
from prefixlock import providers
from prefixlock.core.errors import HistoryError, ProviderError
from prefixlock.core.output import ModelOutput
from prefixlock.http import AsyncClient, Client
from prefixlock.providers.readers.base import Listener
from prefixlock.providers.transport import HttpRequest
from prefixlock.runtime.calling import AsyncModelClient, ModelClient
from prefixlock.runtime.tools import ToolResult


class Recorder:
    """A client of the protocol alone: answers with fixed outputs, keeps the calls."""

    provider = "anthropic"

    def __init__(self, *outputs: ModelOutput) -> None:
        self.outputs = list(outputs)
        self.calls: list[tuple[str, HttpRequest]] = []

    def send(self, call: HttpRequest) -> ModelOutput:
        self.calls.append(("send", call))
        return self.outputs.pop(0)

    def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput:
        self.calls.append(("stream", call))
        return self.outputs.pop(0)


def test_call_sends_the_current_request_records_and_returns_the_output() -> None:
    conv = open_conv()
    request = conv.handle(user("u1"))
    first, second = expected("anthropic", "turn1"), expected("anthropic", "turn2")
    client = Recorder(first, second)
    assert conv.call(client) == first
    assert conv.pending_calls == first.tool_calls and len(first.tool_calls) == 2
    assert not conv.awaiting_output
    conv.tool_results([ToolResult(c.call_id, "ok") for c in first.tool_calls])
    assert conv.pending_calls == ()
    assert conv.call(client, stream=True) == second
    wire = providers.get("anthropic")
    assert [(how, c.body) for how, c in client.calls] == [
        ("send", wire.http_request(request).body),
        ("stream", client.calls[1][1].body),
    ]
    assert client.calls[1][1].body.endswith(b',"stream":true}')
    assert conv.history.messages[-1].parts == second.parts


def test_call_when_no_model_call_is_due_is_refused() -> None:
    conv = open_conv()
    conv.handle(user("u1"))
    first = expected("anthropic", "turn1")
    conv.call(Recorder(first))
    with pytest.raises(HistoryError) as info:
        conv.call(Recorder(first))
    ids = ", ".join(c.call_id for c in first.tool_calls)
    assert str(info.value) == (
        f"conversation 'conv-1': no model call is due (tool calls {ids} have no results yet)"
    )
    conv.tool_results([ToolResult(c.call_id, "ok") for c in first.tool_calls])
    conv.call(Recorder(expected("anthropic", "turn2")))
    with pytest.raises(HistoryError) as info:
        conv.call(Recorder(first))
    assert str(info.value) == (
        "conversation 'conv-1': no model call is due (the last model output is recorded; "
        "handle the next event first)"
    )


def test_a_failed_call_records_nothing_and_can_be_made_again() -> None:
    from stub_server import Reply, stub_server

    conv = open_conv()
    conv.handle(user("u1"))
    head = conv.head
    with stub_server() as stub:
        stub.queue(Reply(400, b'{"type":"error","error":{"type":"invalid_request_error"}}'))
        with Client("anthropic", api_key=API_KEY, base_url=stub.url) as client:
            with pytest.raises(ProviderError):
                conv.call(client)
            assert conv.head == head and conv.awaiting_output
            from http_support import success

            stub.queue(success("anthropic", "turn1", False))
            assert conv.call(client) == expected("anthropic", "turn1")
    assert stub.seen[0].body == stub.seen[1].body


def test_acall_awaits_an_async_client() -> None:
    class AsyncRecorder:
        provider = "gemini"

        async def send(self, call: HttpRequest) -> ModelOutput:
            return expected("gemini", "turn1")

        async def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput:
            raise AssertionError("not streamed")

    conv = open_conv()
    conv.handle(user("u1"))
    output = asyncio.run(conv.acall(AsyncRecorder()))
    assert output == expected("gemini", "turn1")
    assert conv.history.messages[-1].parts == output.parts


def test_the_http_clients_satisfy_the_runtime_protocols() -> None:
    assert isinstance(Client("anthropic", api_key="k"), ModelClient)
    assert isinstance(AsyncClient("anthropic", api_key="k"), AsyncModelClient)
    assert isinstance(Recorder(), ModelClient)
