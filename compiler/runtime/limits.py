"""Size limits a conversation holds every turn and tool output to, before saving.

A provider refuses a request past its size limit; prefixlock refuses the input first, so
a stored conversation can always be serialized again (DESIGN: nothing is persisted that a
configured provider would refuse). The defaults sit well below every provider's limit;
an agent server passes its own :class:`Limits` to ``Conversation.open``.
"""

from __future__ import annotations

import attrs

from ..core.errors import LimitError

__all__ = ["Limits"]

MIB = 1024 * 1024


@attrs.frozen
class Limits:
    """Byte limits (UTF-8) on what one event adds to a conversation."""

    #: a turn's own text: query, selected context, open files, action context, event text
    max_turn_bytes: int = 4 * MIB
    #: one tool result's output
    max_tool_output_bytes: int = 4 * MIB

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
