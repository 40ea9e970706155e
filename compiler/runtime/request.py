"""AgentRunRequest: one incoming event of a conversation, validated at the edge.

A request is loaded from JSON or YAML (or a plain mapping), validated against the
``agent_run_request`` JSON Schema, and frozen. Conversation-level data (``context``) and
turn-level data (everything else) stay apart so each compiles into its own message.
The timestamp is whatever the client sent: prefixlock never reads a clock.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any

import attrs

from ..core import canonical
from ..core.errors import CanonicalJSONError, Location, SpecError, SpecErrors
from ..core.messages import ImagePart
from ..core.timestamps import timestamp_problem
from ..spec.loader import LoadedDocument, load_yaml_file
from ..spec.validate import validate_value


class RequestKind(StrEnum):
    USER = "user"  # a user turn
    BACKGROUND = "background"  # a background completion (e.g. a finished subagent)
    INJECTED = "injected"  # a runtime event the harness injects


@attrs.frozen
class AgentRunRequest:
    """A validated request. Nested JSON values are kept as canonical JSON text.

    ``conversation_id`` is ``None`` when the event left it out: a
    :class:`~prefixlock.runtime.conversation.Conversation` fills in its own id (and checks
    a given one against it)."""

    conversation_id: str | None
    event_id: str
    kind: RequestKind
    mode: str | None = None
    query: str | None = None
    #: canonical JSON text of the list of ``{path, start_line?, end_line?, text}``
    selected_context: str = "[]"
    #: canonical JSON text of the list of ``{path, cursor_line?}``
    open_files: str = "[]"
    #: canonical JSON text of a free-form object
    action_context: str = "{}"
    timestamp: str | None = None
    #: canonical JSON text of the conversation-level context object
    context: str = "{}"
    text: str | None = None
    compact_summary: str | None = None
    #: canonical JSON text of the list of ``{media_type, data}`` (user turns only)
    images: str = "[]"

    @classmethod
    def from_value(
        cls,
        value: Any,
        *,
        file: str = "<request>",
        doc: LoadedDocument | None = None,
        context_fields: Mapping[str, Any] | None = None,
    ) -> AgentRunRequest:
        """Validate a plain JSON value; raises :class:`SpecErrors` naming every problem.

        ``context_fields``: the declared context fields of the bundle the request is for
        (``bundle.context_schemas()``), accepted in ``context`` and validated against
        their schemas; any other unknown key stays an error, with "did you mean".

        The value is first held to the canonical encoder's rules with NUL refused in
        strings (:func:`prefixlock.core.canonical.check`): nesting, keys, surrogates and
        integer sizes are refused at their JSON path before anything else reads them.
        """
        try:
            canonical.check(value, strings_without_nul=True)
        except CanonicalJSONError as err:
            where = doc.location(err.path) if doc is not None else Location(file)
            raise SpecErrors([SpecError(where, err.path, err.reason)]) from None
        errors = validate_value(
            value, "agent_run_request", doc, file, context_fields=context_fields
        )
        if errors:
            raise SpecErrors(errors)
        assert isinstance(value, Mapping)
        stamp = value.get("timestamp")
        problem = timestamp_problem(stamp) if isinstance(stamp, str) else None
        if problem is not None:
            where = doc.location("$.timestamp") if doc is not None else Location(file)
            raise SpecErrors([SpecError(where, "$.timestamp", problem)])
        compact = value.get("compact")
        return cls(
            conversation_id=value.get("conversation_id"),
            event_id=value["event_id"],
            kind=RequestKind(value["kind"]),
            mode=value.get("mode"),
            query=value.get("query"),
            selected_context=canonical.dumps(value.get("selected_context", [])),
            open_files=canonical.dumps(value.get("open_files", [])),
            action_context=canonical.dumps(value.get("action_context", {})),
            timestamp=value.get("timestamp"),
            context=canonical.dumps(value.get("context", {})),
            text=value.get("text"),
            compact_summary=compact["summary"] if compact is not None else None,
            images=canonical.dumps(value.get("images", [])),
        )

    @classmethod
    def load(cls, path: Path | str) -> AgentRunRequest:
        """Load a request from a JSON or YAML file (JSON is read as YAML: same positions)."""
        doc = load_yaml_file(Path(path), str(path))
        return cls.from_value(doc.value, file=doc.file, doc=doc)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event_id": self.event_id, "kind": str(self.kind)}
        if self.conversation_id is not None:
            out["conversation_id"] = self.conversation_id
        optional: dict[str, Any] = {
            "mode": self.mode,
            "query": self.query,
            "timestamp": self.timestamp,
            "text": self.text,
            "compact": None if self.compact_summary is None else {"summary": self.compact_summary},
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        for key in ("selected_context", "open_files", "action_context", "context", "images"):
            value = canonical.loads(getattr(self, key))
            if value:
                out[key] = value
        return out

    @property
    def turn_bytes(self) -> int:
        """UTF-8 size of the turn's own text (what :class:`Limits` bounds)."""
        texts = (self.query or "", self.text or "", self.compact_summary or "")
        nested = (self.selected_context, self.open_files, self.action_context)
        given = [t for t in nested if t not in ("[]", "{}")]  # absent: nothing was sent
        return sum(len(t.encode("utf-8")) for t in (*texts, *given))

    @functools.cached_property
    def digest(self) -> str:
        """Content digest: two deliveries of one event must have the same digest.
        Computed once per request (a turn reads it twice: the retry check, the record)."""
        return canonical.digest(self.to_json())

    @property
    def image_parts(self) -> tuple[ImagePart, ...]:
        """The turn's images as message parts, in order."""
        if self.images == "[]":
            return ()
        return tuple(ImagePart(i["media_type"], i["data"]) for i in canonical.loads(self.images))

    @property
    def context_value(self) -> dict[str, Any]:
        value = canonical.loads(self.context)
        assert isinstance(value, dict)
        return value
