"""Observed against predicted cache hits: ``prefixlock inspect STORE CONV --cache``.

For every model call whose output was recorded with usage
(:meth:`Conversation.record <prefixlock.runtime.conversation.Conversation.record>`), the
request that call sent is rebuilt from the stored records alone (the history as it stood
just before the output) and serialized for the provider that answered. The cache
simulator (:mod:`prefixlock.cache.simulator`) replays those bodies and predicts, per call,
the share of the prompt the prefix made cacheable. Applied to the prompt size the provider
reported, that share is the **predicted** cached tokens; the provider's own cache-read
and cache-write figures are the **observed** ones.

Each call is priced at its time, as verify prices a scenario's calls: the ``timestamp``
its request carried, which the user or background record that made the call keeps
(record format 3), or the one a tool-loop call was given
(``Conversation.tool_results(..., timestamp=)``). A call with none comes right after the
call before it. So an entry expires over an idle gap longer than its lifetime, and
reading nothing after it is predicted, not flagged. While no call carried a timestamp
(or for a store written before timestamps were kept), nothing expires, and the table
says so. A time before the previous call's (the clocks of two hosts of a fleet disagree)
is priced as the previous call's time, and the call is listed in ``earlier``: a store
is read whatever its clients' clocks did, where a scenario with such times is refused.

A Gemini call in explicit-cache mode (the settings option ``cachedContent``) is priced
with the cache the deployment created for the conversation's root, as verify prices it:
its body is made from the stored root (``Gemini.cached_content_body``).

A call is flagged when the provider read fewer tokens from the cache than predicted,
beyond ``slack`` (default 10%, for tokenizer and block-rounding differences): a prefix
the server believes stable did not hit, which a server can alert on. Calls whose
provider reports no cache figure (``None``) are shown and never flagged.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from .. import providers as registry
from ..cache.simulator import Simulation
from ..core import canonical
from ..core.errors import CheckpointError, PrefixlockError
from ..core.messages import CanonicalMessage
from ..core.output import Usage
from ..core.timestamps import seconds
from ..runtime.failover import opaque_providers, retarget
from ..runtime.history import History
from ..store.contract import Store
from ..store.records import RecordType, Root, decode_record
from .verify import RootCaches, name_caches

__all__ = [
    "DEFAULT_SLACK",
    "CacheUse",
    "CallCacheUse",
    "Unreadable",
    "cache_use",
    "summary_rows",
    "sweep",
]

#: How far below the prediction an observed cache read may fall before it is flagged.
DEFAULT_SLACK = 0.10


@attrs.frozen
class CallCacheUse:
    """One recorded model call: what the prefix predicts and what the provider saw."""

    call: int
    seq: int
    provider: str
    #: the request's timestamp (None: it came right after the call before it)
    timestamp: str | None
    predicted_share: float
    predicted_tokens: int | None
    input_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None
    flagged: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "call": self.call,
            "seq": self.seq,
            "provider": self.provider,
            "timestamp": self.timestamp,
            "predicted_share": round(self.predicted_share, 4),
            "predicted_cached_tokens": self.predicted_tokens,
            "input_tokens": self.input_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "flagged": self.flagged,
        }


@attrs.frozen
class CacheUse:
    """Every recorded call of one conversation."""

    conversation: str
    slack: float
    calls: tuple[CallCacheUse, ...]
    #: the calls whose timestamp came before the previous call's (priced at that one's)
    earlier: tuple[int, ...] = ()

    @property
    def flagged(self) -> tuple[CallCacheUse, ...]:
        return tuple(call for call in self.calls if call.flagged)

    def to_json(self) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "slack": self.slack,
            "calls": [call.to_json() for call in self.calls],
            "flagged": [call.call for call in self.flagged],
            "earlier": list(self.earlier),
        }

    def summary(self) -> dict[str, Any]:
        """One conversation's line of a store-wide sweep (``inspect STORE --cache``)."""
        return {
            "conversation": self.conversation,
            "calls": len(self.calls),
            "timed": self.timed,
            "predicted_cached_tokens": sum(c.predicted_tokens or 0 for c in self.calls),
            "cache_read_tokens": sum(c.cache_read_tokens or 0 for c in self.calls),
            "flagged": [call.call for call in self.flagged],
            "earlier": list(self.earlier),
        }

    def rows(self) -> list[list[str]]:
        """A table: header, then one row per call."""
        header = ["call", "seq", "provider", "sent", "prompt", "predicted", "read", "written", ""]
        body = [
            [
                str(c.call),
                str(c.seq),
                c.provider,
                "-" if c.timestamp is None else c.timestamp,
                _figure(c.input_tokens),
                _figure(c.predicted_tokens),
                _figure(c.cache_read_tokens),
                _figure(c.cache_write_tokens),
                "FEWER CACHED THAN PREDICTED" if c.flagged else "",
            ]
            for c in self.calls
        ]
        return [header, *body]

    @property
    def timed(self) -> bool:
        """Whether any call's request carried a timestamp (else nothing expires)."""
        return any(call.timestamp is not None for call in self.calls)


def _figure(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


@attrs.frozen
class Unreadable:
    """A conversation of a sweep that could not be read or priced, and why."""

    conversation: str
    error: str

    def summary(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "error": self.error}


def sweep(store: Store, *, slack: float = DEFAULT_SLACK) -> list[CacheUse | Unreadable]:
    """:func:`cache_use` of every conversation of ``store``, in its order. A conversation
    that cannot be read or priced (a damaged record, a usage of an unknown provider) is
    an :class:`Unreadable` with the error, and the sweep goes on: one such conversation
    must not hide the others from an operator."""
    reports: list[CacheUse | Unreadable] = []
    for name in store.conversations():
        try:
            reports.append(cache_use(store, name, slack=slack))
        except PrefixlockError as err:
            reports.append(Unreadable(name, str(err)))
    return reports


def summary_rows(reports: list[CacheUse | Unreadable]) -> list[list[str]]:
    """A table of a store-wide sweep: header, then one row per conversation."""
    header = ["conversation", "calls", "predicted", "read", "flagged", ""]
    body = []
    for report in reports:
        if isinstance(report, Unreadable):
            body.append(
                [report.conversation, "-", "-", "-", "-", f"cannot be read: {report.error}"]
            )
            continue
        line = report.summary()
        notes = []
        if line["calls"] and not line["timed"]:
            notes.append("no timestamps: nothing expires")
        if line["earlier"]:
            notes.append(f"{len(line['earlier'])} call(s) timed before the call before")
        note = "; ".join(notes)
        body.append(
            [
                report.conversation,
                str(line["calls"]),
                _figure(line["predicted_cached_tokens"]),
                _figure(line["cache_read_tokens"]),
                str(len(line["flagged"])),
                note,
            ]
        )
    return [header, *body]


def cache_use(store: Store, conversation_id: str, *, slack: float = DEFAULT_SLACK) -> CacheUse:
    """Observed against predicted cache reads for every recorded call of a conversation."""
    stored = store.load(conversation_id)
    if stored is None:
        known = ", ".join(store.conversations()) or "none"
        raise CheckpointError(f"no conversation {conversation_id!r} in the store (stored: {known})")
    root = Root.decode(stored.root, conversation_id)
    history = History(root, canonical.sha256_hex(stored.root))
    # One provider instance and one simulation per answering provider, fed each call's
    # body as fragments and dropping it: nothing grows with the bodies (a 3,000-call
    # conversation's bodies are gigabytes together). The model is the root's, as verify
    # passes it: Gemini and Bedrock bodies do not name theirs, and their rules depend on it.
    sims: dict[str, tuple[registry.Provider, Simulation, RootCaches]] = {}
    stamp: str | None = None  # the timestamp of the record that made the next call
    last: float | None = None  # the latest call time so far, in seconds
    earlier: list[int] = []  # calls whose time came before the one before
    calls: list[CallCacheUse] = []
    # The providers of the epoch's opaque parts, read once per message (as the runtime
    # reads them): a call is priced on the body its provider was sent, another
    # provider's thinking carried or left out by the failover rule (runtime/failover.py).
    scanned: tuple[list[CanonicalMessage] | None, int, set[str]] = (None, 0, set())
    for seq, data in enumerate(stored.records, start=1):
        record = decode_record(data, conversation_id, seq, history.head)
        used = record.usage
        if record.type is RecordType.ASSISTANT and used is not None and used.provider:
            name = used.provider
            if name not in sims:
                model = _model(root, name)
                simulation = Simulation(name, model=model, keep_calls=False)
                sims[name] = (registry.get(name), simulation, RootCaches(name))
            wire, simulation, roots = sims[name]
            # An untimed call is sent right after the conversation's call before it,
            # whichever provider answered that one (not on its own provider's clock).
            moment = last if stamp is None else seconds(stamp)
            if moment is not None and last is not None and moment < last:
                earlier.append(len(calls) + 1)
                moment = last
            last = moment
            messages = history.messages
            if scanned[0] is not messages:
                scanned = (messages, 0, set())
            opaque = scanned[2]
            opaque.update(opaque_providers(messages[scanned[1] :]))
            scanned = (messages, len(messages), opaque)
            request = retarget(history.project(), name, opaque=opaque)
            name_caches(simulation, roots(request))
            figures = simulation.add_fragments(wire.fragments(request), moment)
            share = (
                figures.cache_read_tokens / figures.input_tokens if figures.input_tokens else 0.0
            )
            calls.append(_call(len(calls) + 1, seq, name, stamp, share, used, slack))
        stamp = record.timestamp
        history.apply(record, canonical.sha256_hex(data))
    return CacheUse(conversation_id, slack, tuple(calls), tuple(earlier))


def _model(root: Root, provider: str) -> str | None:
    """The model the conversation's root names for ``provider`` (None if it names none)."""
    for settings in root.settings:
        if settings.provider == provider:
            return settings.model
    return None


def _call(
    number: int, seq: int, name: str, stamp: str | None, share: float, used: Usage, slack: float
) -> CallCacheUse:
    predicted = None if used.input_tokens is None else math.floor(share * used.input_tokens)
    flagged = (
        predicted is not None
        and used.cache_read_tokens is not None
        and predicted > 0
        and used.cache_read_tokens < predicted * (1 - slack)
    )
    return CallCacheUse(
        number,
        seq,
        name,
        stamp,
        share,
        predicted,
        used.input_tokens,
        used.cache_read_tokens,
        used.cache_write_tokens,
        flagged,
    )
