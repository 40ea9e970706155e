"""The naive-harness yardstick of ``prefixlock verify`` (issue 15, item 5).

A :class:`NaiveHarness` turns each call prefixlock makes into the call a typical agent
harness would make for the same conversation, as a :class:`ModelRequest` that the real
provider serializers encode and the same cache simulator prices:

* the **current context is re-rendered into the system prompt** on every call: the
  instructions, a blank line, then the text of the latest request-context message. So
  the system prompt changes whenever the context does, and every cached prefix after it
  (the whole history) is lost. The request-context messages leave the history;
* **tools in insertion order** (the order of ``rules/tools.yaml``, not sorted by name),
  stable for the whole conversation;
* the **history otherwise the same** messages, and the same cache markers prefixlock
  uses minus the context one: end of the tools, end of the system prompt, the last
  message. The yardstick so measures the context and tool placement, not a worse marker
  policy.

Under ``context_updates: sections`` a request-context message may carry only the sections
that changed; the harness then takes the whole current context of that turn
(``contexts``: message id -> text, :func:`full_contexts`), as a harness without updates
renders it. The context text is prefixlock's own canonical rendering (a real harness re-renders
from the client's data, often in the client's order, and may add a clock): the naive
cost is a lower bound on such harnesses, so ``cost_vs_naive`` errs towards 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from ..core.messages import CanonicalMessage, MessageKind
from ..core.model import FRAME_HINTS, CacheHint, CachePosition, MessageView, ModelRequest, ToolSpec
from ..runtime.context import full_context
from ..runtime.request import AgentRunRequest, RequestKind
from ..spec.bundle import Bundle
from ..spec.loader import load_yaml_file

__all__ = ["NaiveHarness", "full_contexts", "tool_file_order"]

#: Between the instructions and the re-rendered context in the naive system prompt.
CONTEXT_SEPARATOR = "\n\n"


def full_contexts(bundle: Bundle, requests: Iterable[AgentRunRequest]) -> dict[str, str]:
    """``request-context:<event id>`` -> the whole context of each user turn of
    ``requests`` (none under ``context_updates: whole``: the message is the whole)."""
    if not bundle.sections:
        return {}
    return {
        f"request-context:{r.event_id}": full_context(bundle, r)
        for r in requests
        if r.kind is RequestKind.USER
    }


def tool_file_order(root: Path) -> tuple[str, ...]:
    """The tool names in the order ``rules/tools.yaml`` of the spec root ``root`` lists
    them (empty when the file is missing or has no tool list)."""
    path = root / "rules" / "tools.yaml"
    if not path.is_file():
        return ()
    value = load_yaml_file(path).value
    tools = value.get("tools") if isinstance(value, dict) else None
    names = [t.get("name") for t in tools if isinstance(t, dict)] if isinstance(tools, list) else []
    return tuple(name for name in names if isinstance(name, str))


def _in_order(tools: Sequence[ToolSpec], order: Sequence[str]) -> tuple[ToolSpec, ...]:
    """``tools`` in ``order`` (by name); tools it does not name follow, as given."""
    rank = {name: i for i, name in enumerate(order)}
    return tuple(sorted(tools, key=lambda t: rank.get(t.name, len(rank))))


class NaiveHarness:
    """Per conversation: :meth:`request` maps each of prefixlock's calls, in call order,
    to the naive harness's call (see the module docstring). Incremental: within an epoch
    only the messages added since the previous call are scanned, and the history is a
    view of one growing list, which a provider encodes from where it left off."""

    def __init__(
        self, tool_order: Sequence[str] = (), contexts: Mapping[str, str] | None = None
    ) -> None:
        self.tool_order = tuple(tool_order)
        #: request-context message id -> the whole context of its turn (sections mode)
        self.contexts: Mapping[str, str] = {} if contexts is None else contexts
        #: The text of the latest request context seen, kept across compactions.
        self.context: str | None = None
        self._epoch: int | None = None
        self._scanned: list[CanonicalMessage] = []  # the last request's messages
        self._history: list[CanonicalMessage] = []  # the same without request contexts
        self._context_then: str | None = None  # self.context before the epoch's scan

    def request(self, request: ModelRequest) -> ModelRequest:
        messages = request.messages
        n = len(self._scanned)
        if (
            request.epoch != self._epoch
            or len(messages) < n
            or (n and messages[n - 1].id != self._scanned[-1].id)
        ):  # a new epoch, or an earlier projection (a retry): scan the epoch again
            if request.epoch != self._epoch:
                self._context_then = self.context
            self._epoch = request.epoch
            self._scanned, self._history = [], []
            self.context = self._context_then
        for index in range(len(self._scanned), len(messages)):
            message = messages[index]
            self._scanned.append(message)
            if message.kind is MessageKind.REQUEST_CONTEXT:
                self.context = self.contexts.get(message.id, message.text)
            else:
                self._history.append(message)
        instructions = request.instructions
        if self.context is not None:
            instructions = f"{instructions}{CONTEXT_SEPARATOR}{self.context}"
        # A view of the list this harness only appends to (a rescan starts a new one):
        # a provider encodes only the messages added since its previous request.
        history = MessageView(self._history, len(self._history))
        hints = list(FRAME_HINTS)
        if history:
            hints.append(CacheHint(CachePosition.TAIL, len(history) - 1))
        return attrs.evolve(
            request,
            instructions=instructions,
            tools=_in_order(request.tools, self.tool_order),
            messages=history,
            cache_hints=tuple(hints),
        )
