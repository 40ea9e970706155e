"""Successive request bodies parsed by what changed: new history items only.

A body is a JSON object with one history list member:
``{<head members>,"<key>":[<item>,<item>,...]<,trail members>}``. The bodies of one
conversation share their head and most of their history byte for byte, so
:meth:`HistoryScanner.scan` finds, from the longest common byte prefix with the body
before (:func:`~prefixlock.core.fragments.common_body_prefix`), how many leading history
items are byte-identical to the previous body's (the delimiter after each included), and
parses only the rest: the items after those and the trail members. A changed head is
parsed again, and the history is then compared from where it starts in each body, so
items the head only moved still count as the same.

Values are read by :func:`~prefixlock.core.canonical.decoder`, the rules of
:func:`~prefixlock.core.canonical.loads`. Only the compact form the canonical encoder
writes is read: a body that is not an object with a history list, has whitespace between
tokens, a duplicate member or any value :func:`canonical.loads` refuses scans as None,
and the caller reads that body whole with :func:`canonical.loads`, which accepts or
refuses it exactly as before.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import attrs

from . import canonical
from .errors import CanonicalJSONError
from .fragments import Body, common_body_prefix

__all__ = ["LAZY_TEXT", "HistoryScanner", "Scan"]

#: Bytes of history from which a scan keeps where the items are instead of the items
#: (:class:`_Lazy`): a rewritten history (a naive harness's system prompt is its first
#: item) is read item by item, not held whole, and decoded :data:`_WINDOW` bytes at a
#: time, not as one text beside its bytes.
LAZY_TEXT = 1 << 16
#: Bytes of a long history decoded at a time.
_WINDOW = 1 << 16


class _Shape(Exception):
    """The text is not in the compact form the scanner reads."""


def _text(data: bytes) -> str:
    # json.loads decodes UTF-8 bytes with "surrogatepass"; the scanner reads the same.
    return data.decode("utf-8", "surrogatepass")


def _byte_offsets(text: str, offsets: Sequence[int]) -> list[int]:
    """UTF-8 byte offsets of the ascending character offsets ``offsets`` of ``text``."""
    if text.isascii():
        return list(offsets)
    out: list[int] = []
    chars = size = 0
    for offset in offsets:
        size += len(text[chars:offset].encode("utf-8", "surrogatepass"))
        chars = offset
        out.append(size)
    return out


class _Lazy(Sequence[Any]):
    """History items decoded from the UTF-8 bytes ``data`` each time they are read:
    item ``i`` is ``data[starts[i]:stops[i]]``."""

    __slots__ = ("_data", "_starts", "_stops")

    def __init__(self, data: bytes, starts: Sequence[int], stops: Sequence[int]) -> None:
        self._data, self._starts, self._stops = data, array("q", starts), array("q", stops)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        text = _text(self._data[self._starts[index] : self._stops[index]])
        return canonical.decoder().raw_decode(text)[0]

    def __iter__(self) -> Iterator[Any]:
        decode, data = canonical.decoder().raw_decode, self._data
        for start, stop in zip(self._starts, self._stops, strict=True):
            yield decode(_text(data[start:stop]))[0]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Lazy | tuple | list):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a list

    def __repr__(self) -> str:
        return f"<{len(self)} history items, decoded when read>"


@attrs.frozen
class Scan:
    """What :meth:`HistoryScanner.scan` read of one body, against the body before.

    ``frame`` holds the values of every member but the history list; values the
    previous scan read from unchanged bytes are the same objects: read them, never
    change them.
    """

    #: Every member's key in order, the history list's included.
    members: tuple[str, ...]
    frame: Mapping[str, Any]
    #: The bytes before the first history item equal the previous body's.
    head_same: bool
    #: The bytes after the history list equal the previous body's.
    trail_same: bool
    #: Leading history items byte-identical to the previous body's, delimiters included.
    common: int
    #: History items in this body.
    count: int
    #: This body's history items from ``common`` on, parsed (a tuple; past
    #: :data:`LAZY_TEXT` bytes of them, a sequence that decodes each item as it is
    #: read, so that a long rewritten history is never held whole).
    items: Sequence[Any]
    #: Longest common byte prefix with the previous body (0 without one).
    common_bytes: int
    #: The last history item (None when there is none: see ``count``).
    last: Any
    #: Where the previous body's items from ``common`` on are, to parse on demand.
    old_body: Body | None = None
    old_start: int = 0
    old_count: int = 0

    def old_items(self) -> list[Any]:
        """The previous body's history items from ``common`` on, parsed."""
        if self.old_body is None or not self.old_count:
            return []
        text = _text(self.old_body.tail(self.old_start))
        decoder = canonical.decoder()
        items: list[Any] = []
        position = 0
        while len(items) < self.old_count:
            value, position = decoder.raw_decode(text, position)
            items.append(value)
            position += 1  # the "," or "]" after it, read before
        return items


@attrs.define
class _State:
    """The layout of the previous body."""

    body: Body
    #: Byte offset of the history list's first item (just after its ``[``).
    start: int
    head: dict[str, Any]
    #: Per history item, relative to ``start``: where it starts, and where the
    #: delimiter after it (``,`` or the list's ``]``) ends.
    offsets: array[int]
    ends: array[int]
    #: Relative offset of the history list's ``]``.
    close: int
    trail: dict[str, Any]
    trail_text: str
    last: Any


class HistoryScanner:
    """:meth:`scan` one body after another of one wire (history list ``key``)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._decoder = canonical.decoder()
        self._state: _State | None = None

    def reset(self) -> None:
        """Forget the previous body: the next one is read whole."""
        self._state = None

    def scan(self, body: Body) -> Scan | None:
        """``body`` against the body before; None when it is not in the compact form
        (see the module docstring), and the next body is then read whole."""
        try:
            return self._scan(body)
        except (_Shape, ValueError, CanonicalJSONError, RecursionError):
            # ValueError: JSONDecodeError, UnicodeDecodeError. canonical.loads decides.
            self._state = None
            return None

    def _scan(self, body: Body) -> Scan:
        previous = self._state
        decode = self._decoder.raw_decode
        data: bytes | None = None
        if previous is not None:
            common_bytes = common_body_prefix(previous.body, body)
            if common_bytes >= previous.start:
                start, head, head_same = previous.start, previous.head, True
                relative = common_bytes - start
            else:  # the head changed: read it again, compare the histories where they start
                head, start, data = self._head_of(body)
                head_same = False
                relative = common_body_prefix(
                    previous.body.after(previous.start), body.after(start)
                )
            common = bisect_right(previous.ends, relative)
            old = len(previous.offsets)
            begin = previous.offsets[common] if common < old else previous.close
        else:
            common_bytes = common = old = begin = 0
            data = body.join()
            head, start = self._head(data)
            head_same = False
        at = start + begin
        raw = data[at:] if data is not None else body.tail(at)
        after_comma = 0 < common < old
        lazy = len(raw) > LAZY_TEXT  # then each item is decoded when read
        items, starts, ends, close_at = self._items(raw, after_comma, keep=not lazy)
        found: Sequence[Any] = tuple(items)
        if lazy and starts:
            found = _Lazy(raw, starts, [end - 1 for end in ends])
        tail = _text(raw[close_at:])
        del raw
        trail: dict[str, Any] = {}
        position = 1  # after the list's "]"
        while not tail.startswith("}", position):
            if not tail.startswith(',"', position):
                raise _Shape
            key, position = decode(tail, position + 1)
            if not tail.startswith(":", position):
                raise _Shape
            value, position = decode(tail, position + 1)
            if key == self.key or key in head or key in trail:
                raise _Shape  # a duplicate member: canonical.loads refuses the body
            trail[key] = value
        if position + 1 != len(tail):
            raise _Shape
        trail_text = tail[1:]
        offsets = [begin + o for o in starts]
        delimited = [begin + o for o in ends]
        count = common + len(starts)
        if items:
            last = items[-1]
        elif count and previous is not None:
            last = previous.last
        else:
            last = None
        state = _State(
            body,
            start,
            head,
            (previous.offsets[:common] if previous is not None else array("q"))
            + array("q", offsets),
            (previous.ends[:common] if previous is not None else array("q"))
            + array("q", delimited),
            begin + close_at,
            trail,
            trail_text,
            last,
        )
        self._state = state
        return Scan(
            members=(*head, self.key, *trail),
            frame={**head, **trail},
            head_same=head_same,
            trail_same=previous is not None and trail_text == previous.trail_text,
            common=common,
            count=count,
            items=found,
            common_bytes=common_bytes,
            last=last,
            old_body=previous.body if previous is not None else None,
            old_start=previous.start + begin if previous is not None else 0,
            old_count=old - common,
        )

    def _head_of(self, body: Body) -> tuple[dict[str, Any], int, bytes | None]:
        """:meth:`_head` of ``body`` read from its first fragment (a provider's frame
        opening holds the whole head), else from the joined body, which is then returned
        too. A head read from a prefix of the body is the head read from the body: every
        member is followed by a delimiter and the list by ``[``, so a value cut short by
        the end of the fragment refuses, and only then is the body joined."""
        if len(body.parts) > 1:
            try:
                head, start = self._head(body.parts[0])
                return head, start, None
            except (_Shape, ValueError):
                pass
        data = body.join()
        head, start = self._head(data)
        return head, start, data

    def _head(self, data: bytes) -> tuple[dict[str, Any], int]:
        """The members before the history list, and the byte offset of its first item."""
        text = _text(data)
        decode = self._decoder.raw_decode
        if not text.startswith('{"'):
            raise _Shape
        head: dict[str, Any] = {}
        position = 1
        while True:
            key, position = decode(text, position)
            if not text.startswith(":", position):
                raise _Shape
            if key == self.key:
                if not text.startswith("[", position + 1):
                    raise _Shape
                (start,) = _byte_offsets(text, [position + 2])
                return head, start
            if key in head:
                raise _Shape
            head[key], position = decode(text, position + 1)
            if not text.startswith(',"', position):
                raise _Shape  # "}": no history list
            position += 1

    def _items(
        self, raw: bytes, after_comma: bool, *, keep: bool
    ) -> tuple[list[Any], list[int], list[int], int]:
        """The history items from the start of the UTF-8 bytes ``raw`` to the list's
        ``]``: the items (not ``keep``: the last only), and the byte offsets of each
        item's start, of the end of the delimiter after it, and of the ``]``. Decoded a
        window of :data:`_WINDOW` bytes at a time (more for an item longer than that),
        never whole (a history up to :data:`LAZY_TEXT` bytes is one window); an item
        that runs to the end of a window (it may be cut short there) is read again from
        the next one."""
        decode = self._decoder.raw_decode
        items: list[Any] = []
        starts: list[int] = []
        ends: list[int] = []
        if not after_comma and raw.startswith(b"]"):
            return items, starts, ends, 0
        base, size = 0, _WINDOW
        while True:
            cut = min(len(raw), base + size)
            while cut < len(raw) and raw[cut] & 0xC0 == 0x80:
                cut -= 1  # not inside a character
            text = _text(raw[base:cut])
            whole = cut == len(raw)
            found: list[int] = []  # character offsets in this window: start, end, ...
            position = 0
            closed = False
            while True:
                try:
                    value, after = decode(text, position)
                except ValueError:
                    if whole:
                        raise
                    break
                if after >= len(text):
                    if whole:
                        raise _Shape  # the list does not close
                    break
                delimiter = text[after]
                if delimiter not in ",]":
                    raise _Shape
                found += (position, after + 1)
                if keep or delimiter == "]":
                    items.append(value)
                position = after + 1
                if delimiter == "]":
                    closed = True
                    break
            marks = _byte_offsets(text, [*found, position])  # position: where reading stopped
            starts += (base + b for b in marks[0:-1:2])
            ends += (base + b for b in marks[1:-1:2])
            if closed:
                return items, starts, ends, base + marks[-1] - 1  # "]" is one byte
            moved = base + marks[-1]
            if moved == base:
                size *= 2  # one item longer than the window
            base = moved
