"""A local stand-in for a provider API on 127.0.0.1 (the real ones cannot be reached).

It records every request (method, path, headers, body bytes, the client's port) and
answers each with the next queued :class:`Reply`, whose body may arrive in several chunks
(a stream); a reply may also wait before its body (a slow server) or reset the
connection after its chunks (a connection cut mid-body). A :attr:`StubServer.responder`
answers instead of the queue, from the request (many conversations at once).
"""

from __future__ import annotations

import http.server
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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
    #: seconds to wait after the headers, before the first chunk
    delay: float = 0.0
    #: reset the connection (TCP RST) after the chunks, before the body's end
    reset: bool = False


@attrs.frozen
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: the client's port: one per connection, so a reused connection repeats it
    port: int = 0


_NOTHING_QUEUED = Reply(599, b'{"error":"no reply queued"}')


class StubServer:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.url = ""
        self.responder: Callable[[Seen], Reply] | None = None

    def queue(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)


def _handler(stub: StubServer) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # each chunk goes out at once (no 40 ms stalls)

        def do_POST(self) -> None:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                body = _read_chunked(self.rfile)
            else:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            seen = Seen("POST", self.path, headers, body, self.client_address[1])
            with stub.lock:
                stub.seen.append(seen)
                if stub.responder is not None:
                    reply = stub.responder(seen)
                else:
                    reply = stub.replies.pop(0) if stub.replies else _NOTHING_QUEUED
            chunks = [reply.body] if isinstance(reply.body, bytes) else list(reply.body)
            try:
                self.send_response(reply.status)
                self.send_header("content-type", reply.content_type)
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                if reply.delay:
                    time.sleep(reply.delay)
                for chunk in chunks:
                    if chunk:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                        self.wfile.flush()
                if reply.reset:
                    # SO_LINGER 0: close() sends RST, as a dropped connection does
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.close_connection = True
                    self.connection.close()
                    return
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:  # the client gave up (a read timeout): nothing to answer
                self.close_connection = True

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
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
