"""Fragment keys that depend on earlier messages, computed once per message.

Some wires write, into one message's items, something only an earlier message holds
(Gemini's ``functionResponse.name`` is the name of the call the result answers). Such a
message's bytes depend on more than its own content and cache markers, so its
fragment-cache key must say what else: :meth:`Provider.fragment_key
<prefixlock.providers.base.Provider.fragment_key>` folds over a request's messages in order, noting
what later messages will need and returning each message's key.

:class:`KeyScan` holds the keys of one history prefix and the notes after it. Within an
epoch, each request's messages extend the previous request's, so its keys are the
previous keys plus those of the new messages: the fold visits each message once, O(1)
amortized per message. Which prefix a scan covers is checked by comparing messages
(identity first, then equality; a C-speed tuple compare), never assumed, so an instance
reused for another conversation, a retry's older (shorter) request or a new epoch get
the keys of their own messages: at worst the fold runs over the whole history again.

A scan is never changed once built; extending one builds a new one (a concurrent caller
holding the old one is unaffected).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import attrs

from ..core.messages import CanonicalMessage

#: ``(message, earlier notes) -> key``: the fold (see ``Provider.fragment_key``).
KeyFold = Callable[[CanonicalMessage, dict[str, Any]], Hashable]


@attrs.frozen
class KeyScan:
    """The fragment keys of ``messages``, one per message, and the fold's notes after
    the last of them."""

    messages: tuple[CanonicalMessage, ...] = ()
    keys: tuple[Hashable, ...] = ()
    notes: Mapping[str, Any] = attrs.field(factory=dict)

    def keys_for(
        self, messages: Sequence[CanonicalMessage], fold: KeyFold
    ) -> tuple[KeyScan, tuple[Hashable, ...]]:
        """The keys of ``messages``, and the scan to keep for the next request."""
        current = tuple(messages[:])  # a view's slice is a tuple copy at C speed
        have = len(self.messages)
        if len(current) < have and self.messages[: len(current)] == current:
            return self, self.keys[: len(current)]  # an earlier request of this history
        start = self if len(current) >= have and current[:have] == self.messages else _EMPTY
        scan = start._extended(current, fold)
        return scan, scan.keys

    def _extended(self, current: tuple[CanonicalMessage, ...], fold: KeyFold) -> KeyScan:
        have = len(self.messages)
        if len(current) == have:
            return self
        notes = dict(self.notes)
        keys = self.keys + tuple(fold(message, notes) for message in current[have:])
        return KeyScan(current, keys, notes)


_EMPTY = KeyScan()
