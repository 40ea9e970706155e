"""``prefixlock integrity``'s check of stored wire templates (:mod:`prefixlock.core.wire`).

Hydration takes a record's templates as the chain vouches for them: a flipped or spliced
byte is caught there, but a writer of the store who recomputes the (unkeyed) chain could
store a template that does not give the provider's bytes for its message. This check
proves every template: it replays the records as the writer wrote them, maps each
message again with each provider, and compares, so a body can never differ from the
history without ``integrity`` saying so.
"""

from __future__ import annotations

from ..core.errors import CheckpointError, SerializationError
from ..core.wire import assemble
from ..providers import get as get_provider
from ..store.contract import StoredConversation
from ..store.records import decode_chain
from .history import History

__all__ = ["wire_problems"]


def wire_problems(stored: StoredConversation) -> list[str]:
    """Every stored wire template of the conversation that does not give what its
    provider makes of its message at its place (one line each); empty when all do, or
    when the conversation stores none. The records are decoded the checked way."""
    cid = stored.conversation_id
    try:
        root, records, _ = decode_chain(stored.root, stored.records, cid, checked=True)
    except CheckpointError:
        return []  # the store's own integrity check reports it
    history = History(root, "")
    wires = {s.provider: get_provider(s.provider) for s in root.settings}
    problems: list[str] = []
    for record in records:
        if record.wire is not None:
            where = f"conversation {cid!r} record {record.seq}"
            request, first = history.project_with(record)
            for name, entry in sorted(record.wire.items()):
                provider = wires.get(name)
                if provider is None:
                    problems.append(f"{where}: wire templates for {name!r}, not in the root")
                    continue
                try:
                    basis, made = provider.settled_fragments(request, first)
                except SerializationError as err:
                    problems.append(f"{where}: wire templates for {name!r}, which refuses: {err}")
                    continue
                if entry[0] != basis:
                    continue  # written by another prefixlock or settings: never used
                for index, (message, (role, fragment)) in enumerate(
                    zip(record.messages, made, strict=True)
                ):
                    template = entry[index + 1]
                    parts = message.canonical_parts()
                    if template[0] != role or (
                        assemble(template, parts, 0, len(parts)) != fragment
                    ):
                        problems.append(
                            f"{where} message {message.id!r}: the {name} wire template does "
                            "not give the provider's bytes"
                        )
        history.apply(record, "")
    return problems
