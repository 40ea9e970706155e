"""The frame of a body: everything around the history list, encoded once.

A body is ``{<head>,"<messages key>":[<preamble>,<message items>...]<,trail>}``. The
frame (head, preamble, trail) depends only on instructions, tools, settings, cache key
and the frame-level cache positions, so :class:`~prefixlock.providers.base.Provider` encodes it once
per distinct frame; a body is handed out as :class:`BodyFragments`: the frame's opening,
one cached fragment per canonical message, and the closing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from ..core import canonical
from ..core.canonical import Ordered
from ..core.errors import CanonicalJSONError, SerializationError
from ..core.fragments import Body


@attrs.frozen
class Frame:
    """Everything around the history list, encoded once per distinct frame."""

    head: Ordered
    preamble: tuple[Any, ...]
    trail: Ordered
    #: ``{<head>,"<messages key>":[`` and, when present, the preamble items: the first
    #: fragment of every body (its two parts are not kept apart: with the instructions
    #: in the preamble, each would be as long as the whole).
    opening: bytes
    #: Whether the history list starts with preamble items (a message after them
    #: starts with ``,``).
    has_preamble: bool
    #: ``]<,trail>}``
    close_bytes: bytes
    #: What every message's bytes depend on from the settings
    #: (:meth:`~prefixlock.providers.base.Provider.message_variant`; ``()`` by default).
    variant: Any = ()
    #: What a stored template of this frame's messages must have been written under
    #: (:func:`prefixlock.core.wire.basis`; empty: none is used).
    basis: str = ""

    @classmethod
    def encode(
        cls,
        provider: str,
        messages_key: str,
        head: Ordered,
        preamble: tuple[Any, ...],
        trail: Ordered,
    ) -> Frame:
        """Encode the parts once; a value the canonical encoder refuses (a lone
        surrogate) is a :class:`SerializationError` naming ``provider``."""
        try:
            head_bytes = canonical.dumpb(head)
            trail_bytes = canonical.dumpb(trail)
            preamble_bytes = b",".join(canonical.dumpb(item) for item in preamble)
        except CanonicalJSONError as err:
            raise SerializationError(
                f"{provider}: instructions, tools or settings: {err}"
            ) from None
        head_inner = head_bytes[1:-1]
        open_bytes = (
            b"{"
            + head_inner
            + (b"," if head_inner else b"")
            + canonical.dumpb(messages_key)
            + b":["
        )
        trail_inner = trail_bytes[1:-1]
        close_bytes = b"]" + (b"," + trail_inner if trail_inner else b"") + b"}"
        return cls(head, preamble, trail, open_bytes + preamble_bytes, bool(preamble), close_bytes)


@attrs.frozen
class BodyFragments:
    """A request body as a sequence of byte fragments: ``b"".join(fragments)`` is the
    body, byte for byte (:meth:`Provider.serialize
    <prefixlock.providers.base.Provider.serialize>` returns exactly that join).

    The fragments are the frame's opening (head keys and preamble items), one fragment
    per canonical message, each starting with the separator (and, where roles merge,
    the wire-message boundary) that goes before it, then ``close`` (the history list's
    end, the trail, a streaming call's stream fields). They are cached per message and
    shared between the calls of one conversation: the first ``count`` items of
    ``settled`` (a list the provider only ever appends to, never changes below
    ``count``), then ``tail``. Where a provider's body is append-only, call N's
    :attr:`prefix` is the start of call N+1's. Iterating yields them in order: an HTTP
    client can send them as an iterable body, with :attr:`size` as its
    ``Content-Length``.
    """

    settled: Sequence[bytes]
    count: int
    tail: tuple[bytes, ...]
    close: bytes
    #: ``len`` of the joined body.
    size: int

    @classmethod
    def of(cls, prefix: Sequence[bytes], close: bytes) -> BodyFragments:
        """From the fragments before ``close``."""
        return cls(tuple(prefix), len(prefix), (), close, sum(map(len, prefix)) + len(close))

    @property
    def prefix(self) -> tuple[bytes, ...]:
        """Every fragment but ``close`` (made on each access)."""
        return tuple(itertools.islice(self.settled, self.count)) + self.tail

    def __iter__(self) -> Iterator[bytes]:
        yield from itertools.islice(self.settled, self.count)
        yield from self.tail
        yield self.close

    def __len__(self) -> int:
        return self.count + len(self.tail) + 1

    def join(self) -> bytes:
        """The body as one buffer (one copy of every byte)."""
        return b"".join(list(self))

    def as_body(self) -> Body:
        """The same fragments as a :class:`~prefixlock.core.fragments.Body` (no byte is
        copied), for comparing and hashing successive bodies by what changed."""
        return Body(
            (*itertools.islice(self.settled, self.count), *self.tail, self.close), self.size
        )

    def closed_with(self, close: bytes) -> BodyFragments:
        """The same body with another ``close`` fragment."""
        size = self.size - len(self.close) + len(close)
        return BodyFragments(self.settled, self.count, self.tail, close, size)
