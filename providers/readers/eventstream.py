"""The AWS event-stream binary framing of Bedrock ``ConverseStream``, decoded
incrementally with both CRC checks.

A message is ``total length (4) | headers length (4) | prelude CRC32 (4) | headers |
payload | message CRC32 (4)``, big-endian; the prelude CRC covers the first 8 bytes, the
message CRC everything before it. A header is ``name length (1) | name | type (1) |
value``; Bedrock sends string headers (type 7: a 2-byte length, then UTF-8), among them
``:message-type`` (``event``, ``exception`` or ``error``), ``:event-type`` and
``:exception-type``. (https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html
documents the framing; botocore's ``eventstream.py`` decodes the same bytes.)
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
#: Bedrock's documented limit is 16 MiB per message; anything larger is a corrupt length.
_MAX_FRAME = 16 * 1024 * 1024
#: Fixed sizes of the non-string header value types (0, 1: bool true/false, no value).
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


@attrs.frozen
class Frame:
    """One decoded message: its string headers and its payload bytes."""

    headers: Mapping[str, str]
    payload: bytes


class FrameDecoder:
    """``feed(chunk) -> [Frame, ...]`` in any chunking; a bad CRC or length raises."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[Frame]:
        self._buffer += chunk
        frames: list[Frame] = []
        while len(self._buffer) >= _PRELUDE:
            total, headers_length, prelude_crc = struct.unpack_from(">III", self._buffer)
            if zlib.crc32(self._buffer[:8]) != prelude_crc:
                raise ResponseError("event stream: prelude CRC mismatch", retry_safe=True)
            if not _MIN_FRAME <= total <= _MAX_FRAME or headers_length > total - _MIN_FRAME:
                raise ResponseError(f"event stream: bad frame length {total}", retry_safe=True)
            if len(self._buffer) < total:
                break
            frame = bytes(self._buffer[:total])
            del self._buffer[:total]
            (message_crc,) = struct.unpack_from(">I", frame, total - 4)
            if zlib.crc32(frame[:-4]) != message_crc:
                raise ResponseError("event stream: message CRC mismatch", retry_safe=True)
            headers = _headers(frame[_PRELUDE : _PRELUDE + headers_length])
            frames.append(Frame(headers, frame[_PRELUDE + headers_length : -4]))
        return frames

    def close(self) -> None:
        if self._buffer:
            raise ResponseError(
                f"event stream: ended inside a frame ({len(self._buffer)} bytes left)",
                retry_safe=True,
            )


def _headers(data: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    pos = 0
    try:
        while pos < len(data):
            length = data[pos]
            name = data[pos + 1 : pos + 1 + length].decode("utf-8")
            kind = data[pos + 1 + length]
            pos += 2 + length
            if kind in (6, 7):  # bytes, string: a 2-byte length
                (size,) = struct.unpack_from(">H", data, pos)
                value = data[pos + 2 : pos + 2 + size]
                if len(value) != size:
                    raise IndexError
                pos += 2 + size
                if kind == 7:
                    headers[name] = value.decode("utf-8")
            elif kind in _FIXED:
                pos += _FIXED[kind]
            else:
                raise ResponseError(f"event stream: unknown header type {kind}", retry_safe=False)
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
