"""The frame of a body: everything around the history list, encoded once.

A body is ``{<head>,"<messages key>":[<preamble>,<message items>...]<,trail>}``. The
frame (head, preamble, trail) depends only on instructions, tools, settings, cache key
and the frame-level cache positions, so :class:`~prefixlock.providers.base.Provider` encodes it once
per distinct frame and :func:`join_body` puts the cached message fragments inside it.
"""

from __future__ import annotations

from typing import Any

import attrs

from ..core import canonical
from ..core.canonical import Ordered
from ..core.errors import CanonicalJSONError, SerializationError


@attrs.frozen
class Frame:
    """Everything around the history list, encoded once per distinct frame."""

    head: Ordered
    preamble: tuple[Any, ...]
    trail: Ordered
    #: ``{<head>,"<messages key>":[`` and, when present, the preamble items.
    open_bytes: bytes
    preamble_bytes: bytes
    #: ``]<,trail>}``
    close_bytes: bytes
    #: What every message's bytes depend on from the settings
    #: (:meth:`~prefixlock.providers.base.Provider.message_variant`; ``()`` by default).
    variant: Any = ()

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
        return cls(head, preamble, trail, open_bytes, preamble_bytes, close_bytes)


def join_body(frame: Frame, fragments: list[bytes]) -> bytes:
    """``open + b",".join(fragments) + close``, copying the bulk of the bytes once.

    The concatenation of the joined fragments would copy the whole body twice more;
    bodies of long conversations are megabytes, so the copy is most of what
    :meth:`Provider.serialize <prefixlock.providers.base.Provider.serialize>` costs. ``fragments``
    (built fresh by the caller) is modified.
    """
    if not fragments:
        return frame.open_bytes + frame.close_bytes
    fragments[0] = frame.open_bytes + fragments[0]
    fragments[-1] = fragments[-1] + frame.close_bytes
    return b",".join(fragments)
