"""The local provider stand-in answers queued replies, chunked, and records requests."""

from __future__ import annotations

import http.client
import urllib.parse

from stub_server import Reply, stub_server


def test_replies_in_order_and_records_the_request_bytes() -> None:
    with stub_server() as stub:
        stub.queue(Reply(200, [b"data: 1\n\n", b"data: 2\n\n"], "text/event-stream"))
        stub.queue(Reply(429, b'{"error":"slow down"}'))
        host = urllib.parse.urlsplit(stub.url).netloc
        connection = http.client.HTTPConnection(host)
        connection.request("POST", "/v1/messages", body=b'{"a":1}', headers={"x-k": "v"})
        first = connection.getresponse()
        assert (first.status, first.read()) == (200, b"data: 1\n\ndata: 2\n\n")
        connection.request("POST", "/again", body=b"{}")
        second = connection.getresponse()
        assert (second.status, second.read()) == (429, b'{"error":"slow down"}')
    assert [(s.path, s.body, s.headers.get("x-k")) for s in stub.seen] == [
        ("/v1/messages", b'{"a":1}', "v"),
        ("/again", b"{}", None),
    ]
