"""A quick look at what one turn sends: ``prefixlock render``.

Builds the spec root, opens a fresh in-memory conversation and handles one user turn
(mode, query and conversation-level context as given), then serializes the first model
call for a provider. Nothing is written; no scenario is needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .. import providers as registry
from ..core.model import ModelRequest
from ..runtime.conversation import Conversation
from ..runtime.request import AgentRunRequest
from ..spec.build import build_bundle
from ..spec.loader import LoadedDocument, load_yaml_file
from ..store.contract import MemoryStore

__all__ = ["Preview", "load_context", "preview"]

CONVERSATION = "preview"
EVENT = "u1"


@attrs.frozen(eq=False)
class Preview:
    """The first model call of a turn: the request and its exact body."""

    provider: str
    request: ModelRequest
    body: bytes


def load_context(path: Path) -> LoadedDocument:
    """A YAML file holding a request's ``context`` mapping, located as ``$.context...``
    so that errors name the file, line and the request path."""
    doc = load_yaml_file(path)

    def under(json_path: str) -> str:
        return "$.context" + json_path[1:]

    return LoadedDocument(
        doc.file,
        {"context": doc.value},
        {under(k): v for k, v in doc.locations.items()} | {"$": doc.location("$")},
        {under(k): v for k, v in doc.key_locations.items()},
    )


def preview(
    root: Path,
    *,
    query: str,
    provider: str = "anthropic",
    mode: str | None = None,
    context: LoadedDocument | None = None,
    timestamp: str | None = None,
) -> Preview:
    """Handle one user turn on the spec root ``root``; the first call's body."""
    bundle = build_bundle(root)
    wire = registry.get(provider)
    value: dict[str, Any] = {
        "conversation_id": CONVERSATION,
        "event_id": EVENT,
        "kind": "user",
        "query": query,
    }
    if mode is not None:
        value["mode"] = mode
    if timestamp is not None:
        value["timestamp"] = timestamp
    doc = None
    if context is not None:
        given = context.value["context"]
        value["context"] = dict(given) if isinstance(given, Mapping) else given
        doc = attrs.evolve(context, value=value)
    request = AgentRunRequest.from_value(
        value, file=context.file if context else "<render>", doc=doc
    )
    conversation = Conversation.open(MemoryStore(), bundle, CONVERSATION)
    model_request = conversation.handle(request)
    return Preview(provider, model_request, wire.serialize(model_request))
