"""Stored wire templates: each message's provider fragment, kept where hydration finds it.

A provider encodes each canonical message into a *fragment* (its wire items, after the
separator that goes before them), cached per message (:mod:`prefixlock.providers.base`).
A worker that has not served a conversation has none of them: its first serialize of a
just-hydrated history maps and encodes every message again (issue 47: a cold worker).
So the writer, which knows where each new message lands, stores with the record, for
every provider of the root, what each new message's fragment is made of, and hydration
hands it on: the cold serialize of a stored message is a join of stored bytes.

A fragment is not stored whole: most of its bytes are the message's own texts, which the
record already holds, escaped exactly as the wire escapes them (one canonical encoder for
everything). A *template* is the fragment with every long run it shares with the
message's canonical parts bytes (:attr:`CanonicalMessage.parts_json
<prefixlock.core.messages.CanonicalMessage.parts_json>`, the ``"parts"`` member of the
record) replaced by that run's span there, so a provider costs the record only the bytes
of its own structure (ids, type names, roles), and no provider needs code of its own:
:func:`derive` finds the runs by comparing bytes, whatever the wire does with them.

A template, as stored (JSON): ``[role, text0, start1, end1, text1, ..., startN, endN,
textN]``; the fragment is ``text0 + parts[start1:end1] + text1 + ... + textN`` (texts
UTF-8 encoded). ``role`` is the message's wire role where roles merge
(``MERGE_SAME_ROLE``), else ``""``. A record holds, per provider, ``[basis, template of
its first message, template of its second, ...]``; ``basis`` (:func:`basis`) names
everything besides the message and its place that the bytes depend on: the provider's
code, its settings, the frame's cache positions.

Trust: a template is part of its record's bytes, so the hash chain covers it as it covers
the messages (a flipped or spliced byte is an error, never a wrong body); its spans point
into the message's own, digest-checked parts bytes; a template is used only for the
history list and position it was written for (:meth:`StoredWire.fragment`); ``prefixlock
integrity`` maps every stored message again and refuses a template that does not give
the provider's bytes (:func:`prefixlock.runtime.wirecheck.wire_problems`). Like the
messages themselves, it is not protected against a writer of the store who recomputes
the chain (the chain is unkeyed).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "MIN_RUN",
    "StoredWire",
    "assemble",
    "basis",
    "derive",
    "quoted_runs",
    "well_formed",
]

#: Runs of the parts bytes shorter than this stay in a template's texts: a span costs
#: about as many bytes in the record as a short run, and a join piece of its own.
MIN_RUN = 24


def basis(fingerprint: str, provider: str, *facts: str) -> str:
    """A short tag of what a provider's fragments depend on besides message and place:
    its code (``fingerprint``), its name and ``facts`` (settings, frame positions). A
    template is used only under an equal basis; 16 hex digits (64 bits): a tag against
    staleness, not a security claim."""
    hasher = hashlib.sha256()
    for item in (fingerprint, provider, *facts):
        data = item.encode("utf-8", "surrogatepass")
        hasher.update(b"%d:" % len(data))
        hasher.update(data)
    return hasher.hexdigest()[:16]


#: A JSON string of canonical JSON: a ``"``, then anything but a quote or a backslash, or
#: a backslash and the character it escapes, then a ``"``.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def quoted_runs(parts_json: bytes) -> list[tuple[int, int]]:
    """The spans of the JSON strings of ``parts_json`` at least :data:`MIN_RUN` bytes
    long, quotes included, longest first."""
    runs = [m.span() for m in _STRING.finditer(parts_json) if m.end() - m.start() >= MIN_RUN]
    runs.sort(key=lambda run: run[0] - run[1])
    return runs


def derive(
    role: str, fragment: bytes, parts_json: bytes, runs: Sequence[tuple[int, int]] | None = None
) -> list[Any]:
    """The template of ``fragment`` over ``parts_json`` (see the module docstring): each
    long string of the parts bytes found in the fragment becomes a span, left to right,
    never overlapping. ``runs``: :func:`quoted_runs` of ``parts_json``, when the caller
    has them (one message, every provider). ``assemble(derive(r, f, p), p) == f`` always
    (the caller checks it all the same)."""
    if runs is None:
        runs = quoted_runs(parts_json)
    found: list[tuple[int, int, int]] = []  # (at in fragment, start in parts, end in parts)
    taken: list[tuple[int, int]] = []
    for start, end in runs:
        run = parts_json[start:end]
        at = fragment.find(run)
        while at >= 0:
            stop = at + (end - start)
            if all(stop <= a or at >= b for a, b in taken):
                found.append((at, start, end))
                taken.append((at, stop))
            at = fragment.find(run, stop)
    found.sort()
    template: list[Any] = [role]
    last = 0
    for at, start, end in found:
        template.append(fragment[last:at].decode("utf-8"))
        template.append(start)
        template.append(end)
        last = at + (end - start)
    template.append(fragment[last:].decode("utf-8"))
    return template


def assemble(template: Sequence[Any], data: bytes, offset: int, length: int) -> bytes | None:
    """The fragment a template makes with parts bytes ``data[offset:offset + length]``,
    or None when the template is not well formed (odd items, a span outside the parts):
    then the caller encodes the message itself."""
    count = len(template)
    if count < 2 or count % 3 != 2:
        return None
    first = template[1]
    if type(first) is not str:
        return None
    if count == 2:
        return first.encode("utf-8")
    view = memoryview(data)
    pieces: list[Any] = [first.encode("utf-8")]
    for i in range(2, count, 3):
        start, end, text = template[i], template[i + 1], template[i + 2]
        if (
            type(start) is not int
            or type(end) is not int
            or type(text) is not str
            or not 0 <= start <= end <= length
        ):
            return None
        pieces.append(view[offset + start : offset + end])
        pieces.append(text.encode("utf-8"))
    return b"".join(pieces)


class StoredWire:
    """What hydration leaves on one stored message: the templates of its record (per
    provider, ``[basis, template, ...]``), its index among the record's messages, and
    where its parts bytes are (``data[offset:offset + length]``: the record's bytes, or
    the message's own parts bytes).

    :meth:`bind` ties it to the history list and position the message was applied at;
    :meth:`fragment` serves only that place."""

    __slots__ = ("data", "index", "length", "lineage", "offset", "position", "wire")

    def __init__(
        self, wire: Mapping[str, Any], index: int, data: bytes, offset: int, length: int
    ) -> None:
        self.wire = wire
        self.index = index
        self.data = data
        self.offset = offset
        self.length = length
        self.lineage: int | None = None
        self.position = -1

    def bind(self, lineage: int, position: int) -> None:
        """Tie to the list (:meth:`MessageView.lineage
        <prefixlock.core.model.MessageView.lineage>`) and index the message was applied
        at; once only (a message object that is put elsewhere later, as compaction may,
        keeps its first place)."""
        if self.lineage is None:
            self.lineage = lineage
            self.position = position

    def fragment(
        self, provider: str, basis: str, lineage: int | None, position: int
    ) -> tuple[str, bytes] | None:
        """The stored wire role and fragment of this message for ``provider`` under
        ``basis``, at ``position`` of the list ``lineage``; None when there is none for
        that (another place, basis or provider, or a malformed template)."""
        if lineage is None or lineage != self.lineage or position != self.position:
            return None
        entry = self.wire.get(provider)
        if type(entry) is not list or len(entry) <= self.index + 1 or entry[0] != basis:
            return None
        template = entry[self.index + 1]
        if type(template) is not list or not template or type(template[0]) is not str:
            return None
        made = assemble(template, self.data, self.offset, self.length)
        return None if made is None else (template[0], made)


def well_formed(wire: Any, messages: int) -> bool:
    """Whether ``wire`` (a record's ``wire`` member, parsed) has the stored shape:
    provider names mapping to ``[basis, template per message]``, each template a role
    and alternating texts and spans. The checked decoder refuses a record whose wire is
    not; the fast path leaves the check to :meth:`StoredWire.fragment`."""
    if type(wire) is not dict:
        return False
    for name, entry in wire.items():
        if type(name) is not str or type(entry) is not list or len(entry) != messages + 1:
            return False
        if type(entry[0]) is not str:
            return False
        for template in entry[1:]:
            if not _template_shape(template):
                return False
    return True


def _template_shape(template: Any) -> bool:
    if type(template) is not list or len(template) < 2 or len(template) % 3 != 2:
        return False
    if type(template[0]) is not str or type(template[1]) is not str:
        return False
    for i in range(2, len(template), 3):
        start, end, text = template[i : i + 3]
        if type(start) is not int or type(end) is not int or type(text) is not str:
            return False
        if not 0 <= start <= end:
            return False
    return True
