"""What an operator sees of a stored conversation: ``prefixlock inspect``.

Hydrates from the store alone (no bundle needed) and prints the root, every record, the
compaction epochs and the current projected request.
"""

from __future__ import annotations

from typing import Any

from ..core import canonical
from ..core.errors import CheckpointError
from ..runtime.history import History
from ..store.contract import Store, StoredConversation
from ..store.records import Record, decode_chain

PREVIEW = 72


def _load(store: Store, conversation_id: str) -> StoredConversation:
    stored = store.load(conversation_id)
    if stored is None:
        known = ", ".join(store.conversations()) or "none"
        raise CheckpointError(f"no conversation {conversation_id!r} in the store (stored: {known})")
    return stored


def _preview(text: str) -> str:
    flat = text.replace("\n", "⏎")
    return flat if len(flat) <= PREVIEW else flat[: PREVIEW - 1] + "…"


def inspect_json(store: Store, conversation_id: str) -> dict[str, Any]:
    """Everything :func:`inspect_text` prints, as canonical-JSON-ready data."""
    stored = _load(store, conversation_id)
    root, records, head = decode_chain(stored.root, stored.records, conversation_id)
    history = History.hydrate(stored)
    return {
        "conversation": conversation_id,
        "root": root.to_json(),
        "records": [_record_json(r) for r in records],
        "head": head,
        "epochs": _epochs(records),
        "request": history.project().to_json(),
    }


def _record_json(record: Record) -> dict[str, Any]:
    return {
        "seq": record.seq,
        "type": str(record.type),
        "event_id": record.event_id,
        "reset": record.reset,
        "messages": [m.id for m in record.messages],
        "timestamp": record.timestamp,
    }


def _epochs(records: list[Record]) -> list[dict[str, Any]]:
    epochs = [{"epoch": 0, "first_record": 1}]
    for record in records:
        if record.reset:
            epochs.append({"epoch": len(epochs), "first_record": record.seq})
    return epochs


def inspect_text(store: Store, conversation_id: str) -> str:
    data = inspect_json(store, conversation_id)
    root = data["root"]
    request = data["request"]
    lines = [
        f"conversation {conversation_id}",
        "root:",
        f"  bundle digest  {root['bundle_digest']}",
        f"  instructions   {len(root['instructions'].encode())} bytes, "
        f"{canonical.sha256_hex(root['instructions'])}",
        f"  tools          {len(root['tools'])}: {', '.join(t['name'] for t in root['tools'])}",
        "  settings       " + ", ".join(f"{s['provider']}={s['model']}" for s in root["settings"]),
        f"records: {len(data['records'])} (head {data['head']})",
    ]
    for r in data["records"]:
        reset = "  RESET" if r["reset"] else ""
        sent = "" if r["timestamp"] is None else f"  at {r['timestamp']}"
        lines.append(
            f"  {r['seq']:>5}  {r['type']:<12} {r['event_id']:<28} {' '.join(r['messages'])}"
            f"{reset}{sent}"
        )
    lines.append("epochs:")
    lines += [f"  epoch {e['epoch']} from record {e['first_record']}" for e in data["epochs"]]
    lines.append(
        f"current request: epoch {request['epoch']}, {len(request['messages'])} messages, "
        f"cache key {request['cache_key']}"
    )
    for i, m in enumerate(request["messages"]):
        text = "".join(p.get("text", "") for p in m["parts"])
        others = [p["type"] for p in m["parts"] if p["type"] != "text"]
        extra = f" [{', '.join(others)}]" if others else ""
        lines.append(f"  {i:>4}  {m['id']:<28} {m['role']:<9} {_preview(text)}{extra}")
    hints = ", ".join(
        h["position"] + ("" if h["message_index"] is None else f"@{h['message_index']}")
        for h in request["cache_hints"]
    )
    lines.append(f"cache hints: {hints}")
    return "\n".join(lines) + "\n"
