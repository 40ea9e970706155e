"""A hypothesis state machine over whole conversations, checking every invariant each step.

Run longer with ``HYPOTHESIS_PROFILE=long pytest tests/test_history_stateful.py``
(10,000 examples); CI runs the ``ci`` profile (200 examples).
"""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest
from conv_helpers import CONTEXT_A, background, context_b, mode_bundle, user
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from prefixlock.core import canonical
from prefixlock.core.errors import ConflictError
from prefixlock.core.messages import MessageKind
from prefixlock.core.model import ModelRequest
from prefixlock.runtime.context import request_sections
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.store.contract import MemoryStore


def _context_c() -> dict[str, Any]:
    ctx = copy.deepcopy(CONTEXT_A)
    ctx["rules"] = list(reversed(ctx["rules"][:2]))  # fewer rules, another order
    return ctx


def _without(ctx: dict[str, Any], key: str) -> dict[str, Any]:
    ctx = copy.deepcopy(ctx)
    del ctx[key]
    return ctx


#: Contexts that differ in one section (git, rules, environment cleared) or in two.
CONTEXTS = [
    CONTEXT_A,
    context_b(),
    _context_c(),
    _without(CONTEXT_A, "environment"),
    _without(context_b(), "environment"),
]
MODES = ["agent", "ask", "plan", "debug"]


def _bytes(request: ModelRequest) -> bytes:
    return canonical.dumpb(request.to_json())


class ConversationMachine(RuleBasedStateMachine):
    #: ``context_updates`` of the bundle the conversation runs on.
    MODE = "whole"

    def __init__(self) -> None:
        super().__init__()
        self.store = MemoryStore()
        self.bundle = mode_bundle(self.MODE)
        self.conv = Conversation.open(self.store, self.bundle, "conv-1")
        #: sections: the model of what is in force, each section's text ("" for none);
        #: None when the epoch has no request context yet
        self.in_force: dict[str, str] | None = None
        self.n = 0
        self.delivered: dict[str, tuple[AgentRunRequest, bytes]] = {}
        self.results_delivered: list[tuple[list[ToolResult], bytes]] = []
        self.pending: list[str] = []
        self.awaiting = False
        self.turns = 0
        self.last: ModelRequest | None = None  # the previous model call
        self.last_user_context: int | None = None

    def _call(self, request: ModelRequest) -> None:
        """Invariant 1: every model call extends the previous one, unless compacted."""
        if self.last is not None and self.last.epoch == request.epoch:
            n = len(self.last.messages)
            assert list(request.messages[:n]) == list(self.last.messages)
        assert request.instructions == self.bundle.instructions
        assert request.tools == self.bundle.tools
        self.last = request

    def _fresh(self) -> str:
        self.n += 1
        return f"e{self.n}"

    @precondition(lambda self: not self.pending)
    @rule(
        ctx=st.integers(0, len(CONTEXTS) - 1),
        mode=st.sampled_from(MODES),
        compact=st.integers(0, 9),
    )
    def user_turn(self, ctx: int, mode: str, compact: int) -> None:
        eid = self._fresh()
        fields: dict[str, Any] = {"mode": mode, "timestamp": f"2026-12-02T10:{self.n % 60:02d}:00Z"}
        auto = compact == 0 and self.turns > 0
        if auto:
            fields["compact"] = {"summary": f"summary before {eid}"}
        request = user(eid, f"query {eid}", context=CONTEXTS[ctx], **fields)
        before = self.conv.request()
        result = self.conv.handle(request)
        self.delivered[eid] = (request, _bytes(result))
        new = list(result.messages)[len(before.messages) :] if not auto else list(result.messages)
        kinds = [m.kind for m in new]
        texts = request_sections(self.bundle, request) if self.MODE == "sections" else {}
        if auto:
            assert kinds == [MessageKind.REQUEST_CONTEXT, MessageKind.SUMMARY, MessageKind.RUNTIME]
            if texts:
                self._expect_carried(new[0], texts, list(texts), full=True)
        elif texts:
            if self.in_force is None:
                changed_names = list(texts)
            else:
                in_force = self.in_force
                changed_names = [n for n in texts if texts[n] != in_force[n]]
            expected = [MessageKind.RUNTIME]
            if changed_names:
                expected.insert(0, MessageKind.REQUEST_CONTEXT)
                self._expect_carried(new[0], texts, changed_names, full=self.in_force is None)
            assert kinds == expected
            self._call(result)
        else:
            changed = self.last_user_context != ctx or not any(
                m.kind is MessageKind.REQUEST_CONTEXT for m in before.messages
            )
            expected = [MessageKind.RUNTIME]
            if changed:
                expected.insert(0, MessageKind.REQUEST_CONTEXT)
            assert kinds == expected
            self._call(result)
        self.last = result
        self.last_user_context = ctx
        if texts:
            self.in_force = dict(texts)
        self.turns += 1
        self.awaiting = True

    def _expect_carried(
        self, message: Any, texts: dict[str, str], names: list[str], *, full: bool
    ) -> None:
        """The one request-context message holds exactly the sections ``names`` (the
        non-empty ones' texts, in section order), says which it replaces and clears."""
        assert message.kind is MessageKind.REQUEST_CONTEXT
        carried = [n for n in names if texts[n]]
        at = [message.text.index(texts[n]) for n in carried]
        assert at == sorted(at)
        for name, text in texts.items():
            if text and name not in carried:
                assert text not in message.text, f"{name} sent again without a change"
        if full:
            assert f"in sections ({', '.join(carried)})" in message.text
        else:
            assert f"It replaces these sections: {', '.join(names)}." in message.text
            cleared = [n for n in names if not texts[n]]
            if cleared:
                assert f"no longer in force: {', '.join(cleared)}." in message.text
            else:
                assert "no longer in force" not in message.text

    @precondition(lambda self: self.awaiting)
    @rule(calls=st.integers(0, 3), text=st.booleans())
    def assistant(self, calls: int, text: bool) -> None:
        tool_calls = [
            ToolCall(f"call{self.n}-{i}", "read_file", {"path": f"f{i}.py"}) for i in range(calls)
        ]
        self.n += 1
        self.conv.assistant("answer" if text or not calls else None, tool_calls)
        self.pending = [c.id for c in tool_calls]
        self.awaiting = False

    @precondition(lambda self: bool(self.pending))
    @rule(error=st.booleans())
    def tool_results(self, error: bool) -> None:
        results = [ToolResult(c, f"output of {c}\n" * 3, error) for c in self.pending]
        request = self.conv.tool_results(results)
        self._call(request)
        self.results_delivered.append((results, _bytes(request)))
        self.pending = []
        self.awaiting = True

    @precondition(lambda self: self.turns > 0 and not self.pending)
    @rule()
    def background_event(self) -> None:
        eid = self._fresh()
        request = background(eid, f"background {eid}")
        before = len(self.conv.request().messages)
        result = self.conv.handle(request)
        self._call(result)
        assert [m.kind for m in list(result.messages)[before:]] == [MessageKind.EVENT]
        self.delivered[eid] = (request, _bytes(result))
        self.awaiting = True

    @precondition(lambda self: bool(self.delivered))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        eid = data.draw(st.sampled_from(sorted(self.delivered)))
        request, expected = self.delivered[eid]
        before = _bytes(self.conv.request())
        assert _bytes(self.conv.handle(request)) == expected
        assert _bytes(self.conv.request()) == before

    @precondition(lambda self: bool(self.results_delivered))
    @rule(data=st.data())
    def retry_tool_results(self, data: st.DataObject) -> None:
        results, expected = data.draw(st.sampled_from(self.results_delivered))
        before = _bytes(self.conv.request())
        assert _bytes(self.conv.tool_results(results)) == expected
        assert _bytes(self.conv.request()) == before

    @precondition(lambda self: any(r.kind.value == "user" for r, _ in self.delivered.values()))
    @rule(data=st.data())
    def conflicting_retry(self, data: st.DataObject) -> None:
        users = sorted(e for e, (r, _) in self.delivered.items() if r.kind.value == "user")
        eid = data.draw(st.sampled_from(users))
        before = _bytes(self.conv.request())
        with pytest.raises(ConflictError):
            self.conv.handle(user(eid, "something else entirely"))
        assert _bytes(self.conv.request()) == before

    @rule()
    def restart(self) -> None:
        before = _bytes(self.conv.request())
        self.conv = Conversation.open(self.store, self.bundle, "conv-1")
        assert _bytes(self.conv.request()) == before

    @precondition(lambda self: self.turns > 0 and not self.pending)
    @rule()
    def manual_compaction(self) -> None:
        self.conv.compact(f"manual summary {self.n}")
        assert [m.kind for m in self.conv.request().messages] == [MessageKind.SUMMARY]
        self.n += 1
        self.last_user_context = None
        self.in_force = None
        self.awaiting = False

    @invariant()
    def history_is_well_formed(self) -> None:
        request = self.conv.request()
        messages = list(request.messages)
        ids = [m.id for m in messages]
        assert len(ids) == len(set(ids)), "identities are unique within an epoch"
        contexts = [i for i, m in enumerate(messages) if m.kind is MessageKind.REQUEST_CONTEXT]
        for a, b in itertools.pairwise(contexts):
            assert messages[a].digest != messages[b].digest, "consecutive contexts differ"
        if self.MODE == "sections":
            self._sections_in_force(messages, contexts)
        for i in contexts:
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            assert nxt is not None and nxt.kind in (MessageKind.RUNTIME, MessageKind.SUMMARY)
        summaries = [i for i, m in enumerate(messages) if m.kind is MessageKind.SUMMARY]
        assert len(summaries) <= 1 and (not summaries or summaries[0] in (0, 1))
        if summaries and summaries[0] == 1:
            assert len(contexts) >= 1 and contexts[0] == 0  # auto: context, summary, turn
        hint = {h.position.value: h.message_index for h in request.cache_hints}
        assert hint.get("context") == (contexts[-1] if contexts else None)

    def _sections_in_force(self, messages: list[Any], contexts: list[int]) -> None:
        """Per section: what the history's context messages leave in force is the model's
        (latest version of each section), and no message repeats a section unchanged."""
        carried_by = self.conv.history.context_sections
        in_force: dict[str, str | None] = {}
        for i in contexts:
            carried = carried_by[messages[i].id]
            for section in carried:
                if i != contexts[0]:
                    assert in_force.get(section.name) != section.digest, (
                        f"section {section.name} repeated without a change"
                    )
                in_force[section.name] = section.digest
        if self.in_force is None:
            assert not contexts
            return
        assert contexts, "a user turn left a request context in force"
        model = {n: canonical.sha256_hex(t) if t else None for n, t in self.in_force.items()}
        assert {n: in_force.get(n) for n in model} == model
        assert self.conv.history.sections == model


class SectionsConversationMachine(ConversationMachine):
    MODE = "sections"


#: Each machine's examples are run in this many parts, each drawing its own random
#: conversations, so that xdist's workers share them out: one machine was a single test
#: of 40 s, run by one worker while the other sat idle at the end of the suite.
PARTS = 4


@pytest.mark.parametrize("part", range(PARTS))
@pytest.mark.parametrize(
    "machine", [ConversationMachine, SectionsConversationMachine], ids=["whole", "sections"]
)
def test_random_conversations_keep_every_invariant(
    machine: type[ConversationMachine], part: int
) -> None:
    """The profile's ``max_examples`` in all (200 in ``ci``, 10,000 in ``long``), a
    ``PARTS``-th of them per part."""
    examples = -(-settings.default.max_examples // PARTS)
    run_state_machine_as_test(machine, settings=settings(max_examples=examples))
