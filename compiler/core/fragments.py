"""A request body as byte fragments, and successive bodies compared by what changed.

A provider hands a body out as fragments whose join is the body (its frame's opening,
one fragment per message, the closing), and the fragments of the messages a call shares
with the call before are the same bytes objects. :class:`Body` keeps them as they are;
the helpers here compare and hash successive bodies in time proportional to what
changed, never trusting that fragments are shared: equal fragments are found by
comparing them (an identical object compares at pointer speed, any other by its bytes),
so every answer is exactly the one the joined bytes would give.

* :func:`common_prefix` -- the longest common byte prefix of two byte strings, at
  ``memcmp`` speed and without copies;
* :func:`shared_fragments` -- how many leading fragments two bodies have in common;
* :func:`common_body_prefix` -- the longest common byte prefix of two bodies;
* :class:`RunningDigest` -- the SHA-256 of each of a sequence of bodies, hashing only
  the fragments after those it hashed for the body before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import attrs

__all__ = ["Body", "RunningDigest", "common_body_prefix", "common_prefix", "shared_fragments"]


@attrs.frozen
class Body:
    """A body as fragments: ``b"".join(parts)`` is the body, ``size`` its length."""

    parts: tuple[bytes, ...]
    size: int

    @classmethod
    def of(cls, body: bytes | Iterable[bytes]) -> Body:
        """From the bytes of a body, or from its fragments."""
        if isinstance(body, bytes | bytearray | memoryview):
            data = bytes(body)
            return cls((data,), len(data))
        parts = tuple(body)
        return cls(parts, sum(map(len, parts)))

    def join(self) -> bytes:
        """The body as one buffer (one fragment: that object itself)."""
        return b"".join(self.parts)

    def tail(self, start: int) -> bytes:
        """The bytes from offset ``start`` to the end, joining only the fragments that
        hold them (the work follows the length of the tail, not of the body)."""
        if start <= 0:
            return self.join()
        if start >= self.size:
            return b""
        parts = self.parts
        index, begin = len(parts), self.size
        while begin > start:
            index -= 1
            begin -= len(parts[index])
        if begin == start:
            return b"".join(parts[index:])
        return b"".join((parts[index][start - begin :], *parts[index + 1 :]))  # one copy

    def after(self, start: int) -> Body:
        """The bytes from offset ``start`` to the end as a body of the same fragments,
        the first of them cut (the work follows the number of fragments, nothing is
        joined)."""
        if start <= 0:
            return self
        parts, begin = self.parts, 0
        for index, part in enumerate(parts):
            end = begin + len(part)
            if end > start:
                return Body((part[start - begin :], *parts[index + 1 :]), self.size - start)
            begin = end
        return Body((), 0)


def common_prefix(a: bytes, b: bytes, a_start: int = 0, b_start: int = 0) -> int:
    """The length of the longest common prefix of ``a[a_start:]`` and ``b[b_start:]``.

    A binary search whose probes compare only the range still in doubt
    (``bytes.startswith`` over a ``memoryview``: ``memcmp``, no copy), so the bytes
    compared in all are about twice the answer."""
    n = min(len(a) - a_start, len(b) - b_start)
    if n <= 0:
        return 0
    view = memoryview(b)
    if a.startswith(view[b_start : b_start + n], a_start):
        return n
    lo, hi = 0, n  # a[..lo] == b[..lo], a[..hi] != b[..hi] (relative to the starts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a.startswith(view[b_start + lo : b_start + mid], a_start + lo):
            lo = mid
        else:
            hi = mid
    return lo


#: :func:`shared_fragments` first compares all but this many last fragments at once:
#: successive bodies of a conversation differ in their last few (the last message, whose
#: cache marker moves, and the closing).
_TAIL_GUESS = 4


def shared_fragments(a: tuple[bytes, ...], b: tuple[bytes, ...]) -> int:
    """How many leading fragments ``a`` and ``b`` have in common (equal bytes).

    Tuple comparison takes an identical object as equal at pointer speed, so the
    fragments two bodies share cost a pointer comparison each; one slice comparison of
    all but the last :data:`_TAIL_GUESS` fragments settles the usual case, else a
    binary search over ranges finds the first difference."""
    n = min(len(a), len(b))
    lo = max(n - _TAIL_GUESS, 0)
    if a[:lo] != b[:lo]:
        low, high = 0, lo  # a[:low] == b[:low], a[:high] != b[:high]
        while high - low > 1:
            mid = (low + high) // 2
            if a[low:mid] == b[low:mid]:
                low = mid
            else:
                high = mid
        return low
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def common_body_prefix(a: Body, b: Body, shared: int | None = None) -> int:
    """The length of the longest common byte prefix of two bodies; ``shared``: their
    :func:`shared_fragments`, when the caller has it."""
    if shared is None:
        shared = shared_fragments(a.parts, b.parts)
    if shared == len(a.parts) == len(b.parts):
        return a.size
    base = a.size - sum(map(len, a.parts[shared:]))
    return base + _common_after(a.parts, b.parts, shared)


def _common_after(a: tuple[bytes, ...], b: tuple[bytes, ...], first: int) -> int:
    """The common byte prefix of ``a[first:]`` and ``b[first:]`` joined, without joining
    them: fragment against fragment, each step comparing what both have left of their
    current one (the boundaries may fall in different places), up to the first byte
    that differs. A changed head (the first fragment) costs a comparison of the heads,
    not two copies of both bodies."""
    found = 0
    i = j = first
    at_a = at_b = 0  # how far into a[i] and b[j]
    while i < len(a) and j < len(b):
        x, y = a[i], b[j]
        step = min(len(x) - at_a, len(y) - at_b)
        same = common_prefix(x, y, at_a, at_b)
        found += same
        if same < step:
            return found
        at_a += step
        at_b += step
        if at_a == len(x):
            i, at_a = i + 1, 0
        if at_b == len(y):
            j, at_b = j + 1, 0
    return found


class RunningDigest:
    """SHA-256 (hex) of successive bodies (:meth:`hexdigest`), each hashed from the
    state after the fragments it shares with the body before: a body's hash costs its
    new fragments. The state is kept after all but the last two fragments of each body
    (the last message, whose cache marker may move, and the closing); a body that
    differs before that point is hashed from the start."""

    def __init__(self) -> None:
        self._parts: tuple[bytes, ...] = ()
        self._count = 0  # the fragments of _parts that _state has hashed
        self._state: Any = hashlib.sha256()

    def hexdigest(self, body: Body) -> str:
        parts = body.parts
        count, state = self._count, self._state
        if count and parts[:count] != self._parts[:count]:
            count, state = 0, hashlib.sha256()
        keep = max(len(parts) - 2, count)
        if keep > count:
            state = state.copy()
            for part in parts[count:keep]:
                state.update(part)
        self._parts, self._count, self._state = parts, keep, state
        final = state.copy()
        for part in parts[keep:]:
            final.update(part)
        return str(final.hexdigest())
