"""Server-sent events, decoded incrementally from bytes in any chunking.

Follows the WHATWG event-stream rules: lines end in ``\\n``, ``\\r\\n`` or ``\\r``; a
line starting with ``:`` is a comment; ``field: value`` drops one leading space of the
value; ``data`` lines of one event join with ``\\n``; a blank line dispatches the event
(an event without ``data`` is dropped). A ``\\r`` at the end of a chunk waits for the
next byte, so a ``\\r\\n`` split across chunks is one line end, not two; at the end of
the stream it is a line end. One leading byte order mark is ignored.
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)

Linear in the bytes fed, whatever the chunking: the unfinished line is kept in one
``bytearray`` that chunks are appended to, and a search for a line end starts where the
previous one stopped, so no byte is scanned or copied twice (``scanned`` counts the work,
for the tests). A line longer than :data:`MAX_LINE_BYTES` and an event whose data is
longer than that are refused (:class:`~prefixlock.core.errors.ResponseLimitError`) as
soon as they pass it, before they are held in memory whole.
"""

from __future__ import annotations

import re

import attrs

from ...core.errors import ResponseError, ResponseLimitError
from ...core.limits import MAX_RESPONSE_LINE_BYTES

__all__ = ["MAX_LINE_BYTES", "Event", "SSEDecoder"]

#: U+FEFF in UTF-8: "One leading U+FEFF BYTE ORDER MARK character must be ignored if any
#: are present" (the WHATWG stream's grammar).
BOM = b"\xef\xbb\xbf"

#: The longest line, and the most data one event may join, in bytes (see
#: :data:`prefixlock.core.limits.MAX_RESPONSE_LINE_BYTES`).
MAX_LINE_BYTES = MAX_RESPONSE_LINE_BYTES

_LINE_END = re.compile(rb"[\r\n]")


@attrs.frozen
class Event:
    """One dispatched event: its type (``message`` when none is named) and its data."""

    event: str
    data: str


class SSEDecoder:
    """``feed(chunk) -> [Event, ...]``; :meth:`close` reports an event left unfinished."""

    def __init__(self, *, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        #: the unfinished line (and a possible BOM before the first one)
        self._buffer = bytearray()
        #: bytes of ``_buffer`` already searched for a line end (none there)
        self._searched = 0
        self._event = ""
        self._data: list[str] = []
        self._data_bytes = 0
        self._pending = False  # a field line was seen since the last dispatch
        self._started = False  # the stream's first bytes (a possible BOM) are behind us
        #: bytes searched, copied or decoded so far: the decoder's work, for the tests
        #: that hold it linear in the bytes fed
        self.scanned = 0

    def feed(self, chunk: bytes) -> list[Event]:
        buffer = self._buffer
        buffer += chunk
        self.scanned += len(chunk)
        if not self._started:
            if len(buffer) < len(BOM) and BOM.startswith(buffer):
                return []  # could still be a BOM split across chunks
            self._started = True
            if buffer.startswith(BOM):
                del buffer[: len(BOM)]
        events: list[Event] = []
        start = 0
        pos = self._searched
        while True:
            found = _LINE_END.search(buffer, pos)
            if found is None:
                self.scanned += len(buffer) - pos
                break
            end = found.start()
            self.scanned += end + 1 - pos
            if buffer[end] == 0x0D:  # "\r"
                if end + 1 == len(buffer):
                    self._searched_to(start, end)  # "\r" last: wait for a possible "\n"
                    return self._cut(start, events)
                next_start = end + 2 if buffer[end + 1] == 0x0A else end + 1
            else:
                next_start = end + 1
            self._check_line(end - start)
            event = self._line(bytes(buffer[start:end]))
            if event is not None:
                events.append(event)
            start = pos = next_start
        self._searched_to(start, len(buffer))
        self._check_line(len(buffer) - start)
        return self._cut(start, events)

    def _searched_to(self, start: int, end: int) -> None:
        self._searched = end - start

    def _cut(self, start: int, events: list[Event]) -> list[Event]:
        """Drop the finished lines off the buffer: what stays is the unfinished line, all
        of it from this chunk once a line ended in it, so the copy is bounded by the chunk."""
        if start:
            self.scanned += len(self._buffer) - start
            del self._buffer[:start]
        return events

    def _check_line(self, size: int) -> None:
        if size > self.max_line:
            raise ResponseLimitError(
                f"the event stream has a line of more than {self.max_line} bytes "
                "(the limit of a response line)",
                retry_safe=False,
            )

    def close(self) -> list[Event]:
        """The stream ended: the events a last ``\\r`` completes (it was waiting for a
        possible ``\\n``); a last event that was never terminated is refused."""
        events = self.feed(b"\n") if self._buffer.endswith(b"\r") else []
        if self._buffer.strip() or self._pending:
            raise ResponseError(
                "the event stream ended inside an event (truncated)", retry_safe=True
            )
        return events

    def _line(self, raw: bytes) -> Event | None:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ResponseError("the event stream is not UTF-8", retry_safe=False) from None
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "event":
            self._event = value
            self._pending = True
        elif field == "data":
            self._data_bytes += len(raw) + 1
            if self._data_bytes > self.max_line:
                raise ResponseLimitError(
                    f"the event stream has an event of more than {self.max_line} bytes of "
                    "data (the limit of a response line)",
                    retry_safe=False,
                )
            self._data.append(value)
            self._pending = True
        # "id", "retry" and unknown fields carry nothing a model response needs
        return None

    def _dispatch(self) -> Event | None:
        event, data = self._event or "message", self._data
        self._event, self._data, self._pending, self._data_bytes = "", [], False, 0
        if not data:
            return None
        return Event(event, "\n".join(data))
