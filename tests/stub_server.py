"""A local stand-in for a provider API on 127.0.0.1 (the real ones cannot be reached).

It records every request (method, path, headers, body bytes) and answers each with the
next queued :class:`Reply`, whose body may arrive in several chunks (a stream).
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import BinaryIO

import attrs

__all__ = ["Reply", "Seen", "StubServer", "stub_server"]


@attrs.frozen
class Reply:
    status: int
    body: bytes | Sequence[bytes]
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


_NOTHING_QUEUED = Reply(599, b'{"error":"no reply queued"}')


class StubServer:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.url = ""

    def queue(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)


def _handler(stub: StubServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                body = _read_chunked(self.rfile)
            else:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
            with stub.lock:
                stub.seen.append(
                    Seen("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                reply = (
                    stub.replies.pop(0)
                    if stub.replies
                    else Reply(599, b'{"error":"no reply queued"}')
                )
            chunks = [reply.body] if isinstance(reply.body, bytes) else list(reply.body)
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type)
            for name, value in reply.headers:
                self.send_header(name, value)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for chunk in chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    return Handler


def _read_chunked(stream: BinaryIO) -> bytes:
    """A ``Transfer-Encoding: chunked`` request body (RFC 9112 section 7.1), decoded."""
    body = bytearray()
    while True:
        size = int(stream.readline().split(b";")[0].strip(), 16)
        if size == 0:
            while stream.readline() not in (b"\r\n", b"\n", b""):  # trailer fields
                pass
            return bytes(body)
        body += stream.read(size)
        stream.readline()  # the CRLF after the chunk


@contextmanager
def stub_server() -> Iterator[StubServer]:
    """A running stub on 127.0.0.1 (``stub.url`` has the base URL, no trailing slash)."""
    stub = StubServer()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
