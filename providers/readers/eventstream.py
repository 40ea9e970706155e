"""The AWS event-stream binary framing of Bedrock ``ConverseStream``, decoded
incrementally with both CRC checks.

A message is ``total length (4) | headers length (4) | prelude CRC32 (4) | headers |
payload | message CRC32 (4)``, big-endian; the prelude CRC covers the first 8 bytes, the
message CRC everything before it. A header is ``name length (1) | name | type (1) |
value``; Bedrock sends string headers (type 7: a 2-byte length, then UTF-8), among them
``:message-type`` (``event``, ``exception`` or ``error``), ``:event-type`` and
``:exception-type``. (The Smithy "Amazon Event Stream Specification",
smithy.io/2.0/aws/amazon-eventstream.html, and
https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html document the
framing; botocore's ``eventstream.py`` decodes the same bytes.)
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping

import attrs

from ...core.errors import ResponseError

__all__ = ["Frame", "FrameDecoder", "encode_frame"]

_PRELUDE = 12
_MIN_FRAME = _PRELUDE + 4
#: The Smithy event-stream spec (smithy.io/2.0/aws/amazon-eventstream.html, "Message
#: Format"): "The payload of a message MUST NOT exceed 25,165,824 bytes (24 MB). The
#: encoded headers of a message MUST NOT exceed 131,072 bytes (128 kB)." -- and
#: "Clients MUST NOT validate them" (services do); botocore has the same numbers
#: (``_MAX_PAYLOAD_LENGTH``, ``_MAX_HEADERS_LENGTH``). So no single part is checked here;
#: the total is bounded only to bound the memory one frame takes, at the largest message
#: the spec allows: a frame beyond it can never be legal (nor decode), so it is not
#: retry-safe.
_MAX_PAYLOAD = 24 * 1024 * 1024
_MAX_HEADERS = 128 * 1024
_MAX_FRAME = _PRELUDE + _MAX_HEADERS + _MAX_PAYLOAD + 4
#: Fixed sizes of the non-string header value types (0, 1: bool true/false, no value).
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


@attrs.frozen
class Frame:
    """One decoded message: its string headers and its payload bytes."""

    headers: Mapping[str, str]
    payload: bytes


class FrameDecoder:
    """``feed(chunk) -> [Frame, ...]`` in any chunking; a bad CRC, length or header block
    raises a :class:`ResponseError`.

    Frames are handed on in order, up to the bad one: when frames of the same chunk
    precede it, they are returned and the error is raised by the next :meth:`feed` or
    :meth:`close` (and by every one after). So a caller sees message by message what
    botocore's ``EventStream`` sees, whatever the chunking: an exception frame is
    reported before a corrupt frame behind it."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        #: where the next frame starts in ``_buffer`` (the ones before it are handed on)
        self._start = 0
        self._error: ResponseError | None = None

    def feed(self, chunk: bytes) -> list[Frame]:
        if self._error is not None:
            raise self._error
        self._buffer += chunk
        frames: list[Frame] = []
        self._start = 0
        try:
            while (frame := self._next()) is not None:
                frames.append(frame)
        except ResponseError as err:
            self._error = err
            if not frames:
                raise
        finally:
            # the frames handed on leave the buffer at once, not one by one: a chunk of
            # many small frames is copied once (linear), never once per frame
            del self._buffer[: self._start]
        return frames

    def close(self) -> None:
        if self._error is not None:
            raise self._error
        if self._buffer:
            raise ResponseError(
                f"event stream: ended inside a frame ({len(self._buffer)} bytes left)",
                retry_safe=True,
            )

    def _next(self) -> Frame | None:
        """The next whole frame of the buffer (from ``_start``, which moves past it),
        ``None`` until it is whole."""
        start = self._start
        if len(self._buffer) - start < _PRELUDE:
            return None
        total, headers_length, prelude_crc = struct.unpack_from(">III", self._buffer, start)
        if zlib.crc32(self._buffer[start : start + 8]) != prelude_crc:
            raise ResponseError("event stream: prelude CRC mismatch", retry_safe=True)
        if total > _MAX_FRAME:
            raise ResponseError(
                f"event stream: frame length {total} exceeds the largest message the "
                f"event-stream spec allows ({_MAX_FRAME} bytes)",
                retry_safe=False,
            )
        if total < _MIN_FRAME or headers_length > total - _MIN_FRAME:
            raise ResponseError(f"event stream: bad frame length {total}", retry_safe=True)
        if len(self._buffer) - start < total:
            return None
        frame = bytes(self._buffer[start : start + total])
        self._start = start + total
        (message_crc,) = struct.unpack_from(">I", frame, total - 4)
        if zlib.crc32(memoryview(frame)[:-4]) != message_crc:
            raise ResponseError("event stream: message CRC mismatch", retry_safe=True)
        headers = _headers(frame[_PRELUDE : _PRELUDE + headers_length])
        return Frame(headers, frame[_PRELUDE + headers_length : -4])


def _headers(data: bytes) -> dict[str, str]:
    """The string headers of a header block. Every header is walked: a value cut short
    (a fixed-size one too: botocore's ``struct.error``) and a name given twice ("Any
    given header name MUST only appear once in a message", the spec's "Headers Format";
    botocore's ``DuplicateHeader``) are malformed headers."""
    headers: dict[str, str] = {}
    seen: set[str] = set()
    pos = 0
    try:
        while pos < len(data):
            length = data[pos]
            name = data[pos + 1 : pos + 1 + length].decode("utf-8")
            kind = data[pos + 1 + length]
            pos += 2 + length
            if name in seen:
                raise ResponseError(
                    f"event stream: malformed headers (header {name!r} appears twice)",
                    retry_safe=False,
                )
            seen.add(name)
            if kind in (6, 7):  # bytes, string: a 2-byte length
                (size,) = struct.unpack_from(">H", data, pos)
                pos += 2
            elif kind in _FIXED:
                size = _FIXED[kind]
            else:
                raise ResponseError(f"event stream: unknown header type {kind}", retry_safe=False)
            value = data[pos : pos + size]
            if len(value) != size:
                raise IndexError
            pos += size
            if kind == 7:
                headers[name] = value.decode("utf-8")
    except (IndexError, struct.error, UnicodeDecodeError):
        raise ResponseError("event stream: malformed headers", retry_safe=False) from None
    return headers


def encode_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One frame with string headers (for tests and local stand-in servers)."""
    encoded = b"".join(
        bytes([len(name.encode())])
        + name.encode()
        + b"\x07"
        + struct.pack(">H", len(value.encode()))
        + value.encode()
        for name, value in headers.items()
    )
    total = _MIN_FRAME + len(encoded) + len(payload)
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + encoded + payload
    return body + struct.pack(">I", zlib.crc32(body))
