"""A loaded scenario and its steps: the values :mod:`~prefixlock.review.scenario` builds
from a scenario file and :mod:`~prefixlock.review.replay` plays."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

import attrs

from ..core.errors import Location
from ..core.messages import Part
from ..runtime.request import AgentRunRequest
from ..runtime.tools import ToolCall, ToolResult
from ..spec.bundle import Bundle

__all__ = [
    "STEP_KINDS",
    "AssistantStep",
    "BackgroundStep",
    "CompactStep",
    "InjectedStep",
    "NoteStep",
    "RestartStep",
    "RetryStep",
    "Scenario",
    "Step",
    "SwitchStep",
    "ToolResultsStep",
    "UserStep",
    "bundle_note",
]

#: The step kinds, in the order the format lists them.
STEP_KINDS = (
    "user",
    "assistant",
    "tool_results",
    "background",
    "injected",
    "note",
    "retry",
    "restart",
    "compact",
    "switch",
)


@attrs.frozen
class UserStep:
    """A user turn: the complete request (``base`` merged in). Makes one model call."""

    kind: ClassVar[str] = "user"
    location: Location
    event: str
    request: AgentRunRequest
    #: Results of the pending tool calls sent with the turn (results first, then the
    #: query), in one model call; and the latest of their timestamps.
    results: tuple[ToolResult, ...] = ()
    results_timestamp: str | None = None


@attrs.frozen
class AssistantStep:
    """The model's output for the pending model call."""

    kind: ClassVar[str] = "assistant"
    location: Location
    text: str | None
    tool_calls: tuple[ToolCall, ...]
    #: The reply's thinking / reasoning parts (``thinking:``), recorded before its text
    #: and tool calls: provider-opaque parts as that provider's reader would make them.
    parts: tuple[Part, ...] = ()


@attrs.frozen
class ToolResultsStep:
    """Results for every pending tool call, in one batch. Makes one model call."""

    kind: ClassVar[str] = "tool_results"
    location: Location
    results: tuple[ToolResult, ...]
    #: When the batch is sent: the latest of its results' timestamps (None: right after
    #: the call before). Not sent to the model; the cache simulator dates the call by it.
    timestamp: str | None = None

    @property
    def event(self) -> str:
        """The event id the history gives the batch."""
        return f"tool-results:{self.results[0].call_id}"


@attrs.frozen
class BackgroundStep:
    """A background completion. Makes one model call."""

    kind: ClassVar[str] = "background"
    location: Location
    event: str
    request: AgentRunRequest


@attrs.frozen
class InjectedStep(BackgroundStep):
    """A runtime event the harness injects (e.g. a terminal finished, a file changed on
    disk). Makes one model call; like a background completion, it never compiles or
    appends request context."""

    kind: ClassVar[str] = "injected"


@attrs.frozen
class NoteStep(BackgroundStep):
    """Content the harness appends to the next request without a model call of its own
    (an attachment, a file-change note, a reminder): recorded like an injected event,
    sent with the next call."""

    kind: ClassVar[str] = "note"


@attrs.frozen
class RetryStep:
    """Re-deliver an earlier user or background event unchanged. Makes one model call."""

    kind: ClassVar[str] = "retry"
    location: Location
    event: str


@attrs.frozen
class RestartStep:
    """Drop all memory; hydrate from the checkpoint store."""

    kind: ClassVar[str] = "restart"
    location: Location


@attrs.frozen
class CompactStep:
    """Manual compaction between turns."""

    kind: ClassVar[str] = "compact"
    location: Location
    summary: str


@attrs.frozen
class SwitchStep:
    """From here on, ``provider``'s model calls go to ``model``: a model switch (a user's
    ``/model``, a gateway's failover to another model) is a new cache namespace, so the
    call after it starts a new cached prefix. Makes no model call; a replay for another
    provider is not affected -- unless the scenario declares the providers it starts on
    (:attr:`Scenario.providers`): then every replay's later calls go to ``provider`` and
    ``model`` (a provider switch, through the failover path)."""

    kind: ClassVar[str] = "switch"
    location: Location
    provider: str
    model: str


Step = (
    UserStep
    | AssistantStep
    | ToolResultsStep
    | BackgroundStep
    | InjectedStep
    | NoteStep
    | RetryStep
    | RestartStep
    | CompactStep
    | SwitchStep
)


@attrs.frozen(eq=False)
class Scenario:
    """A loaded, checked scenario: every step valid, every request built."""

    #: the scenario file, and its name in messages (the path as given)
    path: Path
    file: str
    name: str
    conversation: str
    #: the spec root the bundle was built from, and the bundle
    bundle_root: Path
    bundle: Bundle
    steps: tuple[Step, ...]
    #: ``providers:``, the providers the calls start on (empty: every provider, each
    #: replay its own story). Given, the replays are these alone and a ``switch`` is
    #: absolute: every replay's later calls go to its provider and model.
    providers: tuple[str, ...] = ()

    @property
    def bundle_note(self) -> str:
        """``bundle: /spec/root, sha256:0123456789ab``: which bundle the scenario ran
        against, for its error messages (:func:`bundle_note`)."""
        return bundle_note(self.bundle_root, self.bundle)

    def replayed(self, names: Sequence[str]) -> tuple[str, ...]:
        """The providers of ``names`` this scenario is replayed on: all of them, or
        those it declares it starts on (:attr:`providers`)."""
        if not self.providers:
            return tuple(names)
        return tuple(name for name in names if name in self.providers)

    def step_location(self, index: int) -> str:
        """``scenario.yaml:12:5 $.steps[3].user``: where step ``index`` is written."""
        return f"{self.steps[index].location} {self.step_path(index)}"

    def step_path(self, index: int) -> str:
        """``$.steps[3].user``: the JSON path of step ``index``'s content."""
        return f"$.steps[{index}].{self.steps[index].kind}"

    def delivered_by(self, event: str) -> int:
        """The index of the user or background step that delivered ``event``."""
        for index, step in enumerate(self.steps):
            if isinstance(step, UserStep | BackgroundStep) and step.event == event:
                return index
        raise KeyError(event)


def bundle_note(root: Path, bundle: Bundle) -> str:
    """``bundle: /spec/root, sha256:0123456789ab``: a bundle as error messages name it
    (a scenario without ``bundle:`` uses the spec root above it, else the example)."""
    return f"bundle: {root}, {bundle.digest[: len('sha256:') + 12]}"
