"""The request context is rendered once per bundle and context, not once per user turn.

The context template sees only the bundle and the conversation-level ``context`` the
client sent (canonical JSON text), so its output is a function of the two: a turn that
sends the context of an earlier turn gets the text rendered then. Rendering it again
(merge, canonical order, redaction, the template) was most of what a user turn cost.
"""

from __future__ import annotations

from unittest import mock

import pytest
from conv_helpers import CONTEXT_A, context_b, example_bundle, user
from prefixlock.runtime import context as context_module
from prefixlock.runtime.conversation import Conversation
from prefixlock.spec.templates import CompiledTemplate
from prefixlock.store.contract import MemoryStore

#: Under both context_updates modes (whole renders the template, sections each block).
pytestmark = pytest.mark.usefixtures("context_updates")


@pytest.fixture(autouse=True)
def _empty_cache() -> None:
    context_module.rendered_context.cache_clear()


def _method() -> str:
    """The method a context render calls: once per context, or once per section."""
    return "render_section" if example_bundle().sections else "render"


def _context_renders(calls: list[mock._Call], template: CompiledTemplate) -> int:
    """How many contexts were rendered (a sectioned one: each of its sections once)."""
    found = sum(1 for c in calls if c.args[0] is template)
    sections = len(example_bundle().sections)
    if sections:
        assert found % sections == 0
        return found // sections
    return found


def test_an_unchanged_context_is_rendered_once_across_turns_and_conversations() -> None:
    bundle = example_bundle()
    real = getattr(CompiledTemplate, _method())
    with mock.patch.object(CompiledTemplate, _method(), autospec=True, side_effect=real) as spy:
        one = Conversation.open(MemoryStore(), bundle, "one")
        one.handle(user("u1", conversation="one"))
        one.assistant("ok")
        one.handle(user("u2", "and again", conversation="one"))
        two = Conversation.open(MemoryStore(), bundle, "two")
        two.handle(user("u1", conversation="two"))
        assert _context_renders(spy.call_args_list, bundle.context_template) == 1
        # a changed context is rendered, and going back to the first is not
        one.handle(user("u3", context=context_b(), conversation="one"))
        one.handle(user("u4", context=CONTEXT_A, conversation="one"))
        assert _context_renders(spy.call_args_list, bundle.context_template) == 2


def test_a_remembered_context_is_the_text_a_fresh_render_gives() -> None:
    bundle = example_bundle()
    conv = Conversation.open(MemoryStore(), bundle, "c")
    conv.handle(user("u1", conversation="c"))
    conv.assistant("ok")
    conv.handle(user("u2", context=context_b(), conversation="c"))
    conv.assistant("ok")
    remembered = conv.handle(user("u3", context=CONTEXT_A, conversation="c"))
    context_module.rendered_context.cache_clear()
    fresh = Conversation.open(MemoryStore(), bundle, "c")
    for event, context in (("u1", CONTEXT_A), ("u2", context_b()), ("u3", CONTEXT_A)):
        context_module.rendered_context.cache_clear()
        fresh.handle(user(event, context=context, conversation="c"))
        fresh.assistant("ok")
    (reverted,) = [m for m in remembered.messages if m.id == "request-context:u3"]
    (rendered,) = [m for m in fresh.request().messages if m.id == "request-context:u3"]
    assert reverted.parts == rendered.parts
    assert reverted.digest == rendered.digest


def test_a_context_the_template_refuses_is_refused_every_time() -> None:
    """A refusal is not remembered as a text: each turn that sends it is refused."""
    bundle = example_bundle()
    conv = Conversation.open(MemoryStore(), bundle, "c")
    bad = {**CONTEXT_A, "rules": [{"name": "r", "kind": "always", "body": "x" * 10}] * 1}
    broken = mock.patch.object(
        CompiledTemplate, _method(), autospec=True, side_effect=RuntimeError("boom")
    )
    for _ in range(2):
        with broken, pytest.raises(RuntimeError, match="boom"):
            conv.handle(user("u1", context=bad, conversation="c"))
    conv.handle(user("u1", context=bad, conversation="c"))
    assert [m.id for m in conv.request().messages] == ["request-context:u1", "runtime:u1"]


def test_the_remembered_renderings_stay_within_their_count_and_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each context turns into one more remembered rendering until the count or the size
    is reached; then the least recently used go, and a rendering larger than allowed is
    not kept at all (it is rendered again on the next turn that sends it)."""
    bundle = example_bundle()
    renderings = context_module.rendered_context
    conv = Conversation.open(MemoryStore(), bundle, "c")
    conv.handle(user("u0", conversation="c"))
    conv.assistant("ok")
    count, one = renderings.size
    assert count == 1 and one > 1000
    monkeypatch.setattr(renderings, "count", 3)
    monkeypatch.setattr(renderings, "chars", 10 * one)
    for n in range(1, 6):
        context = {**CONTEXT_A, "git": {"branch": f"topic-{n}", "head": "abc1234", "dirty": False}}
        conv.handle(user(f"u{n}", context=context, conversation="c"))
        conv.assistant("ok")
        kept, chars = renderings.size
        assert kept == min(n + 1, 3)
        assert chars <= 10 * one
    monkeypatch.setattr(renderings, "chars", int(2.5 * one))
    conv.handle(user("u6", conversation="c"))  # CONTEXT_A again, evicted: rendered anew
    conv.assistant("ok")
    assert renderings.size[0] == 2  # what fits in two and a half renderings' size
    monkeypatch.setattr(renderings, "largest", one // 2)
    real = getattr(CompiledTemplate, _method())
    with mock.patch.object(CompiledTemplate, _method(), autospec=True, side_effect=real) as spy:
        big = {**CONTEXT_A, "git": {"branch": "huge", "head": "abc1234", "dirty": False}}
        for n in (7, 8):
            conv.handle(user(f"u{n}", context=big, conversation="c"))
            conv.assistant("ok")
        assert _context_renders(spy.call_args_list, bundle.context_template) == 2
