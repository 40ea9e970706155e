"""Invariant 6: identity and content survive checkpoints; restarts change nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from conv_helpers import (
    CONTEXT_A,
    background,
    context_b,
    context_ids,
    example_bundle,
    open_conv,
    user,
)
from prefixlock.core.errors import CheckpointError, ConflictError
from prefixlock.core.messages import MessageKind, OpaquePart, TextPart
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.tools import ToolCall, ToolResult
from prefixlock.store.contract import MemoryStore, Store
from prefixlock.store.sqlite import SQLiteStore

Step = Callable[[Conversation], object]

STEPS: list[Step] = [
    lambda c: c.handle(user("u1")),
    lambda c: c.assistant(
        "looking",
        [ToolCall("c1", "read_file", {"path": "a.py"}), ToolCall("c2", "grep_search", {})],
        parts=[OpaquePart("anthropic", '{"signature":"sig==","thinking":"hm","type":"thinking"}')],
    ),
    lambda c: c.tool_results([ToolResult("c1", "print('hi')\n"), ToolResult("c2", "", True)]),
    lambda c: c.assistant("fixed"),
    lambda c: c.handle(user("u2", context=context_b())),
    lambda c: c.handle(user("u2", context=context_b())),  # retry
    lambda c: c.assistant("ok"),
    lambda c: c.handle(background("b1", "subagent done")),
    lambda c: c.assistant("noted"),
    lambda c: c.handle(user("u3", context=CONTEXT_A)),  # revert
    lambda c: c.assistant("ok"),
    lambda c: c.handle(user("u4", context=CONTEXT_A, compact={"summary": "S1"})),
    lambda c: c.assistant("ok"),
    lambda c: c.compact("S2"),
    lambda c: c.handle(user("u5", context=CONTEXT_A)),
    lambda c: c.assistant("ok"),
    lambda c: c.handle(user("u6", context=context_b(), mode="ask")),
]

#: The seed's verification list holds under both context_updates modes.
pytestmark = pytest.mark.usefixtures("context_updates")


def _run(store_factory: Callable[[], Store], restart_every_step: bool) -> list[bytes]:
    """Run STEPS; returns the canonical JSON of the request after every step."""
    store = store_factory()
    conv = Conversation.open(store, example_bundle(), "conv-1")
    out = []
    for step in STEPS:
        step(conv)
        if restart_every_step:
            store.close()
            store = store_factory()
            conv = Conversation.open(store, example_bundle(), "conv-1")
        from prefixlock.core import canonical

        out.append(canonical.dumpb(conv.request().to_json()))
    store.close()
    return out


def test_restart_between_every_step_gives_identical_requests(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    uninterrupted = _run(MemoryStore, restart_every_step=False)
    restarted = _run(lambda: SQLiteStore(db), restart_every_step=True)
    assert restarted == uninterrupted


def test_checkpoint_round_trip_keeps_context_identity_and_content(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    conv = Conversation.open(store, example_bundle(), "conv-1")
    conv.handle(user("u1"))
    conv.assistant("a", parts=[OpaquePart("gemini", '{"thoughtSignature":"AbC="}')])
    conv.handle(user("u2", context=context_b()))
    before = conv.request()
    store.close()
    hydrated = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    after = hydrated.request()
    assert [m.id for m in after.messages] == [m.id for m in before.messages]
    assert list(after.messages) == list(before.messages)
    assert context_ids(after) == ["request-context:u1", "request-context:u2"]
    assert after.messages[2].parts[0] == OpaquePart("gemini", '{"thoughtSignature":"AbC="}')


def test_dedupe_and_retries_work_after_restart(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    conv = Conversation.open(store, example_bundle(), "conv-1")
    first = conv.handle(user("u1"))
    conv.assistant("a")
    store.close()
    conv = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    assert conv.handle(user("u1")).same_as(first)
    with pytest.raises(ConflictError):
        conv.handle(user("u1", "different"))
    second = conv.handle(user("u2"))
    assert context_ids(second) == ["request-context:u1"]


def test_retry_stays_idempotent_across_two_processes_on_one_store(tmp_path: Path) -> None:
    """Two open Conversations model two server processes sharing one SQLite file."""
    a = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    b = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    first = a.handle(user("u1"))
    # b is stale: it has not seen u1, yet handling the retry must not append again.
    assert b.handle(user("u1")).same_as(first)
    a.assistant("from a")
    second = b.handle(user("u2"))  # b catches up, then appends after a's output
    assert [m.id for m in second.messages] == [
        "request-context:u1",
        "runtime:u1",
        "assistant:1",
        "runtime:u2",
    ]
    reopened = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    assert reopened.request().same_as(second)


def test_conversation_keeps_its_root_when_a_new_bundle_is_deployed(tmp_path: Path) -> None:
    import attrs
    from prefixlock.core.model import ToolSpec

    store = MemoryStore()
    old = Conversation.open(store, example_bundle(), "conv-1")
    first = old.handle(user("u1"))
    new_bundle = attrs.evolve(
        example_bundle(),
        digest="sha256:new",
        instructions="NEW INSTRUCTIONS",
        tools=(ToolSpec("only_tool", "d", '{"type":"object"}'),),
    )
    resumed = Conversation.open(store, new_bundle, "conv-1")
    resumed.assistant("a")
    later = resumed.handle(user("u2"))
    assert later.instructions == first.instructions
    assert later.tools == first.tools
    assert resumed.history.root.bundle_digest == example_bundle().digest
    fresh = Conversation.open(store, new_bundle, "conv-2")
    assert fresh.history.root.instructions == "NEW INSTRUCTIONS"


def test_hydration_refuses_a_corrupted_record() -> None:
    store = MemoryStore()
    conv = open_conv(store)
    conv.handle(user("u1"))
    conv.assistant("hello")
    event_id, data = store._records["conv-1"][1]
    store._records["conv-1"][1] = (event_id, data.replace(b"hello", b"hellO"))
    with pytest.raises(CheckpointError, match="record 2"):
        Conversation.open(store, example_bundle(), "conv-1")


def test_runtime_messages_keep_their_exact_text_through_hydration(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    conv = Conversation.open(store, example_bundle(), "conv-1")
    conv.handle(user("u1", "  trailing spaces and\r\nCRLF kept  \n\n"))
    text = conv.request().messages[-1].text
    store.close()
    again = Conversation.open(SQLiteStore(tmp_path / "s.db"), example_bundle(), "conv-1")
    assert again.request().messages[-1].text == text
    assert again.request().messages[-1].kind is MessageKind.RUNTIME
    assert isinstance(again.request().messages[-1].parts[0], TextPart)


def _deliver_all(db: str, order: list[int]) -> None:
    """A server process: opens the conversation and delivers user events in ``order``."""
    with SQLiteStore(db) as store:
        conv = Conversation.open(store, example_bundle(), "conv-1")
        for i in order:
            context = CONTEXT_A if i % 3 else context_b()
            conv.handle(user(f"u{i}", f"query {i}", context=context))


def test_two_processes_delivering_the_same_events_store_each_once(tmp_path: Path) -> None:
    """Two server processes receive the same events (a retrying load balancer)."""
    import multiprocessing

    db = str(tmp_path / "s.db")
    Conversation.open(SQLiteStore(db), example_bundle(), "conv-1").store.close()
    ctx = multiprocessing.get_context("fork")
    events = list(range(1, 25))
    workers = [
        ctx.Process(target=_deliver_all, args=(db, events)),
        ctx.Process(target=_deliver_all, args=(db, events)),
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    with SQLiteStore(db) as store:
        stored = store.load("conv-1")
        assert stored is not None and len(stored.records) == len(events)
        assert store.integrity_check() == []
        merged = Conversation.open(store, example_bundle(), "conv-1").request()
    single = tmp_path / "single.db"
    _deliver_all(str(single), events)
    with SQLiteStore(single) as store:
        expected = Conversation.open(store, example_bundle(), "conv-1").request()
    assert merged.same_as(expected)
