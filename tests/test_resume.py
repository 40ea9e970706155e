"""Resume after a crash at every point of the agent loop, on SQLite and PostgreSQL.

The loop (docs/agent-loop.md's ``run_turn``) writes four records in a turn with one
round of tools: the event, the model's first answer (two tool calls, thinking with its
signature), the tool results, the final answer. The process is stopped before and after
each write (the store proxy raises :class:`Killed`, a ``BaseException`` nothing in
prefixlock catches, so no later line of the process runs); the conversation is reopened
from a new store connection and the loop runs again with the same event. The history
and the next request must be byte-identical to an uninterrupted run, and the model and
the tools must have been asked exactly as often as the crash point makes unavoidable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from agent_loop_code import run_turn
from conv_helpers import CONTEXT_A, example_bundle, user
from http_support import expected
from prefixlock import providers
from prefixlock.core.errors import ConflictError, HistoryError
from prefixlock.core.messages import CanonicalMessage, MessageKind, Role, TextPart
from prefixlock.core.output import ModelOutput
from prefixlock.providers.readers.base import Listener
from prefixlock.providers.transport import HttpRequest
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.tools import ToolResult
from prefixlock.store.contract import DurableStore
from prefixlock.store.urls import open_store

CID = "conv-1"
FIRST, FINAL = expected("anthropic", "turn1"), expected("anthropic", "turn2")


class Killed(BaseException):
    """The process died here."""


class KillingStore:
    """A store that dies at its ``at``-th append, ``before`` or after writing it."""

    def __init__(self, store: DurableStore, at: int, before: bool) -> None:
        self._store, self._at, self._before = store, at, before
        self.appends = 0

    def append(self, conversation_id: str, seq: int, event_id: str, record: bytes) -> Any:
        self.appends += 1
        if self.appends == self._at and self._before:
            raise Killed(f"before write {self._at}")
        head = self._store.append(conversation_id, seq, event_id, record)
        if self.appends == self._at:
            raise Killed(f"after write {self._at}")
        return head

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class Model:
    """A model of the client protocol: the first answer when the body holds no
    assistant message, else the final one; counts the calls."""

    provider = "anthropic"

    def __init__(self) -> None:
        self.calls = 0

    def send(self, call: HttpRequest) -> ModelOutput:
        self.calls += 1
        body = json.loads(call.body)
        answered = sum(m["role"] == "assistant" for m in body["messages"])
        return FIRST if answered == 0 else FINAL

    def stream(self, call: HttpRequest, on_event: Listener | None = None) -> ModelOutput:
        return self.send(call)


class Tools:
    def __init__(self) -> None:
        self.runs: list[str] = []

    def __call__(self, name: str, arguments: str) -> str:
        self.runs.append(name)
        return f"{name} ran with {arguments}"


@pytest.fixture(params=["sqlite", "postgres"])
def open_fresh(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Any]]:
    """Opens a new connection to one store (each call: another process's view)."""
    if request.param == "sqlite":
        target = str(tmp_path / "conversations.db")
    else:
        target = request.getfixturevalue("postgres_url")
    opened: list[DurableStore] = []

    def fresh() -> DurableStore:
        opened.append(open_store(target))
        return opened[-1]

    yield fresh
    for store in opened:
        store.close()


EVENT = user("u1", "read a.py", context=CONTEXT_A)

#: (write, before): model calls and tool runs the whole (crashed + resumed) turn makes.
POINTS = {
    (1, True): (2, 2),  # nothing stored: the whole turn runs after the restart
    (1, False): (2, 2),
    (2, True): (3, 2),  # the first answer was lost: asked again
    (2, False): (2, 2),  # the answer is stored: the restart runs its tools, not the model
    (3, True): (2, 4),  # the results were lost: the tools run again
    (3, False): (2, 2),
    (4, True): (3, 2),  # the final answer was lost: asked again
    (4, False): (2, 2),  # finished: the restart only reads the reply
}


def _uninterrupted(fresh: Callable[[], DurableStore]) -> tuple[list[Any], bytes]:
    conv = Conversation.open(fresh(), example_bundle(), "reference")
    event = user("u1", "read a.py", context=CONTEXT_A, conversation="reference")
    assert run_turn(conv, Model(), event, Tools()) == FINAL.text
    return _state(conv)


def _state(conv: Conversation) -> tuple[list[Any], bytes]:
    messages = [(m.kind, m.parts) for m in conv.history.messages]
    return messages, providers.get("anthropic").serialize(conv.request())


def _killed_at(
    open_fresh: Callable[[], DurableStore], write: int, before: bool
) -> tuple[tuple[list[Any], bytes], Model, Tools, KillingStore]:
    """The uninterrupted turn's state, then the same turn killed at ``write`` (before or
    after it reaches the store): the reference, and the model, tools and store it left."""
    reference = _uninterrupted(open_fresh)
    model, tools = Model(), Tools()
    store = KillingStore(open_fresh(), write, before)
    conv = Conversation.open(store, example_bundle(), CID)  # type: ignore[arg-type]
    with pytest.raises(Killed):
        run_turn(conv, model, EVENT, tools)
    return reference, model, tools, store


@pytest.mark.parametrize(("write", "before"), sorted(POINTS))
def test_the_loop_resumes_after_a_kill_at_every_write(
    open_fresh: Callable[[], DurableStore], write: int, before: bool
) -> None:
    reference, model, tools, store = _killed_at(open_fresh, write, before)
    assert store.appends == write
    resumed = Conversation.open(open_fresh(), example_bundle(), CID)
    assert run_turn(resumed, model, EVENT, tools) == FINAL.text
    assert _state(resumed) == reference
    assert (model.calls, len(tools.runs)) == POINTS[(write, before)]
    # Once more: a finished turn asks nobody.
    again = Conversation.open(open_fresh(), example_bundle(), CID)
    assert run_turn(again, model, EVENT, tools) == FINAL.text
    assert (model.calls, len(tools.runs)) == POINTS[(write, before)]
    assert again.history.seq == 4


def test_deliver_says_where_the_turn_stands(open_fresh: Callable[[], DurableStore]) -> None:
    conv = Conversation.open(open_fresh(), example_bundle(), CID)
    wire = providers.get("anthropic")
    first = conv.deliver(EVENT)
    assert (first.retry, first.outputs, first.pending_calls, first.finished) == (
        False,
        (),
        (),
        False,
    )
    assert first.request is not None
    sent = wire.serialize(first.request)

    def reopen() -> Conversation:
        return Conversation.open(open_fresh(), example_bundle(), CID)

    turn = reopen().deliver(EVENT)  # the model has not answered: the same bytes
    assert turn.retry and turn.request is not None and wire.serialize(turn.request) == sent
    assert (turn.outputs, turn.pending_calls) == ((), ())

    answer = conv.record(FIRST)
    turn = reopen().deliver(EVENT)  # answered: no stale request, the answer and its calls
    assert (turn.request, turn.outputs, turn.pending_calls) == (
        None,
        (answer,),
        FIRST.tool_calls,
    )
    assert not turn.finished and turn.text == FIRST.text

    later = conv.tool_results([ToolResult(c.call_id, "ok") for c in FIRST.tool_calls])
    turn = reopen().deliver(EVENT)  # results stored: the continuation is due
    assert turn.request is not None and wire.serialize(turn.request) == wire.serialize(later)
    assert (turn.outputs, turn.pending_calls) == ((answer,), ())

    final = conv.record(FINAL)
    turn = reopen().deliver(EVENT)
    assert (turn.request, turn.outputs, turn.pending_calls) == (None, (answer, final), ())
    assert turn.finished and turn.text == FINAL.text and not turn.superseded

    conv.user_turn("u2", "and now b.py", context=CONTEXT_A)
    turn = reopen().deliver(EVENT)  # a later turn began: this one is over
    assert (turn.request, turn.outputs, turn.superseded, turn.finished) == (
        None,
        (answer, final),
        True,
        True,
    )


def test_recording_the_same_answer_again_is_a_no_op(
    open_fresh: Callable[[], DurableStore],
) -> None:
    conv = Conversation.open(open_fresh(), example_bundle(), CID)
    conv.deliver(EVENT)
    stored = conv.record(FIRST)
    head = conv.head
    reopened = Conversation.open(open_fresh(), example_bundle(), CID)
    assert reopened.record(FIRST) == stored  # after a restart, from a queue
    assert conv.record(FIRST) == stored  # twice in one process
    assert reopened.head == head and conv.head == head
    assert Conversation.open(open_fresh(), example_bundle(), CID).history.seq == 2


def test_another_answer_for_an_answered_call_is_a_conflict(
    open_fresh: Callable[[], DurableStore],
) -> None:
    conv = Conversation.open(open_fresh(), example_bundle(), CID)
    conv.deliver(EVENT)
    stored = conv.record(FINAL)
    other = ModelOutput("anthropic", (TextPart("something else"),))
    reopened = Conversation.open(open_fresh(), example_bundle(), CID)
    with pytest.raises(ConflictError) as caught:
        reopened.record(other)
    digest = "sha256:" + caught.value.args[0].split("!= sha256:")[1].split(")")[0]
    assert str(caught.value) == (
        "model output for the call answered by 'assistant:1' was already recorded with "
        f"different content ({stored.digest} != {digest}); a model call has one answer: "
        "deliver the event again to see the recorded one"
    )
    assert digest != stored.digest
    assert reopened.history.seq == 2


def test_an_answer_with_no_call_made_is_still_refused() -> None:
    from conv_helpers import open_conv

    conv = open_conv()
    with pytest.raises(HistoryError) as caught:
        conv.record(FINAL)
    assert str(caught.value) == "assistant output without a pending model call"


# -- idempotency by the provider's response id -----------------------------------------

#: (write, before) -> the model's last answer the killed process held (it keeps its
#: outputs in its own queue and records the last one again on restart), and the calls
#: and tool runs of the whole turn then: an answer lost by the crash is not paid twice.
REPLAYED = {
    (1, True): (None, False, (2, 2)),
    (1, False): (None, False, (2, 2)),
    (2, True): (FIRST, True, (2, 2)),  # lost: recorded now, as the answer of the due call
    (2, False): (FIRST, False, (2, 2)),  # stored: a no-op
    (3, True): (FIRST, False, (2, 4)),  # stored, and no later call was made: a no-op
    (3, False): (FIRST, False, (2, 2)),  # stored, a later call is due: still a no-op
    (4, True): (FINAL, True, (2, 2)),
    (4, False): (FINAL, False, (2, 2)),
}


@pytest.mark.parametrize(("write", "before"), sorted(REPLAYED))
def test_recording_the_last_response_again_after_a_kill_is_idempotent_by_its_id(
    open_fresh: Callable[[], DurableStore], write: int, before: bool
) -> None:
    reference, model, tools, _ = _killed_at(open_fresh, write, before)
    replayed, appended, counts = REPLAYED[(write, before)]
    resumed = Conversation.open(open_fresh(), example_bundle(), CID)
    if replayed is not None:
        seq, head = resumed.history.seq, resumed.head
        message = resumed.record(replayed)
        assert resumed.history.seq == seq + appended
        if not appended:
            assert resumed.head == head
        assert resumed.history.responses[str(replayed.response_id)] == message
    assert run_turn(resumed, model, EVENT, tools) == FINAL.text
    assert _state(resumed) == reference
    assert (model.calls, len(tools.runs)) == counts
    again = Conversation.open(open_fresh(), example_bundle(), CID)
    assert [again.record(o) for o in (FIRST, FINAL)] == [
        m for m in again.history.messages if m.kind.value == "assistant"
    ]
    assert again.history.seq == 4


def test_the_same_response_id_with_other_content_is_a_conflict(
    open_fresh: Callable[[], DurableStore],
) -> None:
    conv = Conversation.open(open_fresh(), example_bundle(), CID)
    conv.deliver(EVENT)
    stored = conv.record(FINAL)
    forged = attrs.evolve(FINAL, parts=(TextPart("something else"),))
    reopened = Conversation.open(open_fresh(), example_bundle(), CID)
    with pytest.raises(ConflictError) as caught:
        reopened.record(forged)
    digest = CanonicalMessage.create(
        "assistant:1", MessageKind.ASSISTANT, Role.ASSISTANT, forged.parts
    ).digest
    assert str(caught.value) == (
        "model response 'msg_01WxYz0123456789AbCdEfGh' was already recorded as "
        f"'assistant:1' with different content ({stored.digest} != {digest}); a response "
        "is recorded once, as it came"
    )
    assert reopened.history.seq == 2


def test_another_response_for_an_answered_call_is_a_conflict_naming_both_ids(
    open_fresh: Callable[[], DurableStore],
) -> None:
    conv = Conversation.open(open_fresh(), example_bundle(), CID)
    conv.deliver(EVENT)
    conv.record(FINAL)
    # The same words from a second, paid call (a proxy that retried): another response.
    again = attrs.evolve(FINAL, response_id="msg_01SecondCallOfTheSameTurn")
    reopened = Conversation.open(open_fresh(), example_bundle(), CID)
    with pytest.raises(ConflictError) as caught:
        reopened.record(again)
    assert str(caught.value) == (
        "model response 'msg_01SecondCallOfTheSameTurn' answers a call already answered by "
        "response 'msg_01WxYz0123456789AbCdEfGh' (recorded as 'assistant:1'); a model call "
        "has one answer: deliver the event again to see the recorded one"
    )
    assert reopened.history.seq == 2


def test_an_answer_recorded_without_an_id_is_matched_by_content(
    open_fresh: Callable[[], DurableStore],
) -> None:
    """Bedrock Converse gives no response id: the content digest is the identity, as for
    an answer recorded by hand; a response with an id then matches it by content."""
    conv = Conversation.open(open_fresh(), example_bundle(), CID)
    conv.deliver(EVENT)
    anonymous = attrs.evolve(FINAL, response_id=None)
    stored = conv.record(anonymous)
    reopened = Conversation.open(open_fresh(), example_bundle(), CID)
    assert reopened.record(anonymous) == stored
    assert reopened.record(FINAL) == stored  # the same parts: the same answer
    assert reopened.history.seq == 2 and reopened.history.responses == {}
