"""Where a delivered event's turn stands: what :meth:`Conversation.deliver
<prefixlock.runtime.conversation.Conversation.deliver>` returns.

An agent server that crashed somewhere in the loop (after the event was stored, after
the model answered, after the tools ran) re-delivers the event on restart and reads the
:class:`Turn`: the model call that is due (``request``), or the answers already recorded
(``outputs``) and the tool calls still waiting for results (``pending_calls``). It never
pays for a model call whose answer is already stored.
"""

from __future__ import annotations

import attrs

from ..core.messages import CanonicalMessage, ToolCallPart
from ..core.model import ModelRequest
from ..core.output import visible_text

__all__ = ["Turn"]


@attrs.frozen
class Turn:
    """The state of one event's turn after its delivery (or re-delivery)."""

    event_id: str
    #: the event had been delivered before: nothing was appended
    retry: bool
    #: the model call due now for this turn: the event's own request (byte-identical to
    #: the first delivery's) while the model has not answered, the continuation after
    #: tool results; ``None`` when no call is due (answered, or a later turn began)
    request: ModelRequest | None
    #: the model's answers recorded in this turn since the event, in order
    outputs: tuple[CanonicalMessage, ...] = ()
    #: the tool calls of this turn that have no results yet, in model order
    pending_calls: tuple[ToolCallPart, ...] = ()
    #: a later event (or a compaction) followed this turn: it is over
    superseded: bool = False

    @property
    def answered(self) -> bool:
        """The model has answered this turn at least once."""
        return bool(self.outputs)

    @property
    def finished(self) -> bool:
        """The model's last answer asked for no tool and no call is due: the turn's
        reply is ``outputs[-1]``."""
        return self.request is None and not self.pending_calls and self.answered

    @property
    def text(self) -> str:
        """The visible text of the model's last answer in this turn (``""`` if none),
        by the rule of :attr:`ModelOutput.text <prefixlock.ModelOutput.text>`."""
        return visible_text(self.outputs[-1].parts) if self.outputs else ""
