"""Server-sent events, decoded incrementally from bytes in any chunking.

Follows the WHATWG event-stream rules: lines end in ``\\n``, ``\\r\\n`` or ``\\r``; a
line starting with ``:`` is a comment; ``field: value`` drops one leading space of the
value; ``data`` lines of one event join with ``\\n``; a blank line dispatches the event
(an event without ``data`` is dropped). A ``\\r`` at the end of a chunk waits for the
next byte, so a ``\\r\\n`` split across chunks is one line end, not two; at the end of
the stream it is a line end. One leading byte order mark is ignored.
(https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation)
"""

from __future__ import annotations

import attrs

from ...core.errors import ResponseError

__all__ = ["Event", "SSEDecoder"]

#: U+FEFF in UTF-8: "One leading U+FEFF BYTE ORDER MARK character must be ignored if any
#: are present" (the WHATWG stream's grammar).
BOM = b"\xef\xbb\xbf"


@attrs.frozen
class Event:
    """One dispatched event: its type (``message`` when none is named) and its data."""

    event: str
    data: str


class SSEDecoder:
    """``feed(chunk) -> [Event, ...]``; :meth:`close` reports an event left unfinished."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []
        self._pending = False  # a field line was seen since the last dispatch
        self._started = False  # the stream's first bytes (a possible BOM) are behind us

    def feed(self, chunk: bytes) -> list[Event]:
        buffer = self._buffer + chunk
        if not self._started:
            if len(buffer) < len(BOM) and BOM.startswith(buffer):
                self._buffer = buffer  # could still be a BOM split across chunks
                return []
            self._started = True
            buffer = buffer.removeprefix(BOM)
        events: list[Event] = []
        start = 0
        while True:
            cr = buffer.find(b"\r", start)
            lf = buffer.find(b"\n", start)
            if cr == -1 and lf == -1:
                break
            if cr != -1 and (lf == -1 or cr < lf):
                if cr + 1 == len(buffer):
                    break  # "\r" last: wait for a possible "\n"
                end, next_start = cr, cr + 2 if buffer[cr + 1 : cr + 2] == b"\n" else cr + 1
            else:
                end, next_start = lf, lf + 1
            event = self._line(buffer[start:end])
            if event is not None:
                events.append(event)
            start = next_start
        self._buffer = buffer[start:]
        return events

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
            self._data.append(value)
            self._pending = True
        # "id", "retry" and unknown fields carry nothing a model response needs
        return None

    def _dispatch(self) -> Event | None:
        event, data = self._event or "message", self._data
        self._event, self._data, self._pending = "", [], False
        if not data:
            return None
        return Event(event, "\n".join(data))
