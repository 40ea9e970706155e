"""The conversation rules of a scenario, checked by walking its steps.

:class:`Walk` keeps the state the history will have after each step (delivered events,
pending tool calls, whether a model call awaits its reply) and reports each step that
the history would refuse, at that step: a retry of an unknown event, an event id
delivered twice, a tool result for an unknown call id or a call left without its
result, an assistant step before any user turn or without a model call to answer, a
turn started while tool calls are pending.

After a report the walk applies the step's intended effect anyway, so one mistake is
reported once rather than echoed by every later step. Once a step cannot be read at
all (:meth:`Walk.lost`), the state is unknown and the walk stops judging.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..runtime.tools import ToolResult
from .steps import (
    AssistantStep,
    BackgroundStep,
    CompactStep,
    RestartStep,
    RetryStep,
    Step,
    SwitchStep,
    ToolResultsStep,
    UserStep,
)

__all__ = ["Walk"]


class Fail(Protocol):
    def __call__(self, path: str, message: str, *, at_key: bool = False) -> None: ...


class Walk:
    """The conversation state the steps will produce, to check each step against it."""

    def __init__(self, fail: Fail) -> None:
        self.fail = fail
        self.live = True  # False once a step could not be read: the state is unknown
        self.delivered: dict[str, tuple[int, str | None]] = {}  # event id -> (step, digest)
        self.user_turns = 0
        self.awaiting = False  # a model call was made and not answered yet
        self.pending: dict[str, str] = {}  # call id -> where it was made
        self.calls: dict[str, str] = {}  # every call id -> where it was made
        self.answered: dict[str, str] = {}  # call id -> where its result is
        self.notes: set[str] = set()  # the event ids of notes (no call to retry)

    def lost(self) -> None:
        self.live = False

    def step(self, index: int, step: Step) -> None:
        if not self.live:
            return
        path = f"$.steps[{index}].{step.kind}"
        handler = getattr(self, f"_{step.kind}")
        handler(index, path, step)

    def _no_pending(self, path: str, what: str) -> None:
        if self.pending:
            calls = ", ".join(self.pending)
            self.fail(
                path,
                f"{what} while tool calls {calls} have no results "
                "(a tool_results step must answer them first)",
                at_key=True,
            )

    def _user(self, index: int, path: str, step: UserStep) -> None:
        if step.results:
            self._answer(f"{path}.tool_results", step.results)
        self.turn(index, "user", step.event, step.request.digest)

    def _background(self, index: int, path: str, step: BackgroundStep) -> None:
        self.turn(index, step.kind, step.event, step.request.digest)

    _injected = _background

    def _note(self, index: int, path: str, step: BackgroundStep) -> None:
        if self.awaiting:
            self.fail(
                path,
                "note while a model call awaits its reply (a note goes with the next call)",
                at_key=True,
            )
        awaiting = self.awaiting
        self.turn(index, "note", step.event, step.request.digest)
        self.notes.add(step.event)
        self.awaiting = awaiting

    def turn(self, index: int, kind: str, event: str, digest: str | None) -> None:
        """A user turn or background event delivering ``event`` (``digest``: its
        request's, None if the request is invalid)."""
        if not self.live:
            return
        path = f"$.steps[{index}].{kind}"
        what = {"user": "user turn", "injected": "injected event", "note": "note"}.get(
            kind, "background event"
        )
        if kind != "user" and self.user_turns == 0:
            self.fail(path, f"{what} before any user turn", at_key=True)
        self._no_pending(path, what)
        earlier = self.delivered.get(event)
        if earlier is None:
            self.delivered[event] = (index, digest)
        else:
            first, known = earlier
            if known is not None and digest is not None and known != digest:
                message = (
                    f"event {event!r} conflicts with $.steps[{first}], which delivered it "
                    f"with different content; a retry must use 'retry: {event}'"
                )
            else:
                message = (
                    f"event {event!r} was already delivered by $.steps[{first}]; "
                    f"re-deliver it with 'retry: {event}'"
                )
            self.fail(f"{path}.event", message)
        if kind == "user":
            self.user_turns += 1
        self.awaiting = True

    def _assistant(self, index: int, path: str, step: AssistantStep) -> None:
        if self.user_turns == 0:
            self.fail(path, "assistant step before any user turn", at_key=True)
        elif not self.awaiting:
            self.fail(
                path,
                "assistant step without a model call to answer "
                "(the last model call already has its reply)",
                at_key=True,
            )
        seen: set[str] = set()
        for j, call in enumerate(step.tool_calls):
            where = f"{path}.tool_calls[{j}]"
            if call.id in self.calls:
                self.fail(
                    f"{where}.id",
                    f"tool call id {call.id!r} was already used at {self.calls[call.id]}",
                )
            elif call.id in seen:
                self.fail(f"{where}.id", f"tool call id {call.id!r} appears twice in this step")
            seen.add(call.id)
            self.calls.setdefault(call.id, where)
            self.pending[call.id] = where
        self.awaiting = False

    def _tool_results(self, index: int, path: str, step: ToolResultsStep) -> None:
        self._answer(path, step.results)

    def _answer(self, path: str, results: Sequence[ToolResult]) -> None:
        """A batch of results at ``path``: exactly the pending calls, each once."""
        batch: dict[str, str] = {}
        for j, result in enumerate(results):
            where = f"{path}[{j}]"
            call_id = result.call_id
            if call_id in batch:
                self.fail(
                    f"{where}.call_id",
                    f"tool call {call_id!r} is answered twice (also at {batch[call_id]})",
                )
            elif call_id in self.pending:
                pass
            elif call_id in self.answered:
                self.fail(
                    f"{where}.call_id",
                    f"tool call {call_id!r} already has a result (at {self.answered[call_id]})",
                )
            else:
                pending = ", ".join(self.pending) or "none"
                self.fail(
                    f"{where}.call_id",
                    f"tool result for unknown call id {call_id!r} (pending calls: {pending})",
                )
            batch.setdefault(call_id, where)
        missing = [c for c in self.pending if c not in batch]
        if missing:
            self.fail(
                path,
                f"tool results must answer every pending call; missing: {', '.join(missing)}",
                at_key=True,
            )
        for call_id, where in batch.items():
            if call_id in self.pending:
                del self.pending[call_id]
                self.answered[call_id] = where
        self.pending.clear()
        self.awaiting = True

    def _retry(self, index: int, path: str, step: RetryStep) -> None:
        if step.event in self.notes:
            self.fail(
                path, f"retry of note {step.event!r}: a note makes no model call", at_key=True
            )
        elif step.event not in self.delivered:
            so_far = ", ".join(self.delivered) or "none"
            self.fail(
                path,
                f"retry of unknown event {step.event!r} (delivered so far: {so_far})",
                at_key=True,
            )

    def _restart(self, index: int, path: str, step: RestartStep) -> None:
        pass

    def _switch(self, index: int, path: str, step: SwitchStep) -> None:
        pass  # allowed anywhere: it names where the next model calls go

    def _compact(self, index: int, path: str, step: CompactStep) -> None:
        self._no_pending(path, "manual compaction")
        self.pending.clear()
        self.awaiting = False
