"""Size limits a conversation holds every turn and tool output to, before saving.

A provider refuses a request past its size limit; prefixlock refuses the input first, so
a stored conversation can always be serialized again (DESIGN: nothing is persisted that a
configured provider would refuse). The defaults sit well below every provider's limit;
an agent server passes its own :class:`Limits` to ``Conversation.open``. The limits
that are fixed (instructions, responses) are in :mod:`prefixlock.core.limits`; all of
them are listed in ``docs/limits.md``.
"""

from __future__ import annotations

import attrs

from ..core.errors import LimitError

__all__ = ["Limits", "utf8_size"]

MIB = 1024 * 1024


@attrs.frozen
class Limits:
    """Byte limits (UTF-8) on what one event adds to a conversation."""

    #: a turn's own text: query, selected context, open files, action context, event text
    max_turn_bytes: int = 4 * MIB
    #: one tool result's output
    max_tool_output_bytes: int = 4 * MIB
    #: a compaction summary (``compact(summary)``, a turn's ``compact.summary``)
    max_summary_bytes: int = 4 * MIB
    #: the text parts of one model output (``assistant``, ``record``), together
    max_assistant_text_bytes: int = 4 * MIB
    #: one tool call's argument text
    max_tool_arguments_bytes: int = 4 * MIB

    def check_turn(self, event_id: str, size: int) -> None:
        if size > self.max_turn_bytes:
            raise LimitError(
                f"event {event_id!r}: the turn's text is {size} bytes, over the limit of "
                f"{self.max_turn_bytes} bytes (Limits.max_turn_bytes)"
            )

    def check_tool_output(self, call_id: str, size: int) -> None:
        if size > self.max_tool_output_bytes:
            raise LimitError(
                f"tool result for call {call_id!r}: output is {size} bytes, over the limit "
                f"of {self.max_tool_output_bytes} bytes (Limits.max_tool_output_bytes)"
            )

    def check_summary(self, where: str, size: int) -> None:
        if size > self.max_summary_bytes:
            raise LimitError(
                f"{where}: the summary is {size} bytes, over the limit of "
                f"{self.max_summary_bytes} bytes (Limits.max_summary_bytes)"
            )

    def check_assistant_text(self, size: int) -> None:
        if size > self.max_assistant_text_bytes:
            raise LimitError(
                f"assistant output: its text is {size} bytes, over the limit of "
                f"{self.max_assistant_text_bytes} bytes (Limits.max_assistant_text_bytes)"
            )

    def check_tool_arguments(self, call_id: str, size: int) -> None:
        if size > self.max_tool_arguments_bytes:
            raise LimitError(
                f"tool call {call_id!r}: arguments are {size} bytes, over the limit of "
                f"{self.max_tool_arguments_bytes} bytes (Limits.max_tool_arguments_bytes)"
            )


def utf8_size(text: str) -> int:
    """The UTF-8 size of ``text`` (a lone surrogate counts as its replacement)."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "replace"))
