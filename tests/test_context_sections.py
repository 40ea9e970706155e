"""``context_updates: sections``: the request context as named sections, sent per section.

Invariants 4 and 7 of DESIGN.md, per section: the first turn sends every non-empty
section in one message; a later change sends one message with only the sections whose
text changed, immediately before the runtime message; a section emptied is stated as
cleared; A -> B -> A of a section sends A again; automatic compaction keeps one message
with the full current context; identity survives checkpoints and restarts.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest
from conv_helpers import (
    CONTEXT_A,
    REPO,
    assert_prefix,
    background,
    context_b,
    context_ids,
    ids,
    mode_bundle,
    mode_root,
    user,
)
from prefixlock import providers
from prefixlock.core.errors import SpecErrors
from prefixlock.core.messages import CanonicalMessage, MessageKind
from prefixlock.review.invariants import HistoryChecker
from prefixlock.review.jsondiff import Difference
from prefixlock.review.replay import replay
from prefixlock.review.scenario import load_scenario
from prefixlock.review.sources import SourceIndex
from prefixlock.review.steps import UserStep
from prefixlock.runtime.context import section_digests
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.request import AgentRunRequest
from prefixlock.spec.build import build_bundle
from prefixlock.spec.templates import compile_template
from prefixlock.spec.variables import CONVERSATION_VARIABLES, TURN_VARIABLES
from prefixlock.store.contract import MemoryStore, Store
from prefixlock.store.records import ContextSection, decode_record
from prefixlock.store.urls import open_store

SECTIONS = ("rules", "skills", "subagents", "environment", "git", "mcp")
RULE_TEXTS = ("ALWAYS-RULE-BODY", "AUTO-RULE-BODY", "MANUAL-RULE-BODY", "migrations")


def conv(store: Store | None = None, name: str = "conv-1") -> Conversation:
    return Conversation.open(store or MemoryStore(), mode_bundle("sections"), name)


def with_git(**git: Any) -> dict[str, Any]:
    ctx = copy.deepcopy(CONTEXT_A)
    ctx["git"] = {**ctx["git"], **git}
    return ctx


def contexts(conversation: Conversation) -> list[CanonicalMessage]:
    return [m for m in conversation.request().messages if m.kind is MessageKind.REQUEST_CONTEXT]


def test_the_example_defines_its_sections_in_order() -> None:
    assert mode_bundle("sections").sections == SECTIONS
    assert mode_bundle("whole").sections == ()


def test_first_turn_sends_every_non_empty_section_in_one_message() -> None:
    c = conv()
    request = c.handle(user("u1"))
    assert ids(request) == ["request-context:u1", "runtime:u1"]
    text = request.messages[0].text
    assert text.startswith(
        "<request_context>\nWorkspace context for this conversation, in sections "
        "(rules, skills, subagents, environment, git, mcp). When a section changes, an "
        "update sends only that section again; the latest version of each section is in "
        "force.\n\n<rules>\n"
    )
    tags = ["<rules>", "<skills>", "<subagents>", "<environment>", "<git>", "<mcp_servers>"]
    at = [text.index(tag) for tag in tags]
    assert at == sorted(at)
    assert c.history.context_sections["request-context:u1"] == tuple(
        ContextSection(name, c.history.sections[name]) for name in SECTIONS
    )


def test_only_the_git_head_changes_the_update_has_the_new_head_and_no_rule_text() -> None:
    c = conv()
    first = c.handle(user("u1"))
    c.assistant("ok")
    before = c.request()
    second = c.handle(user("u2", context=with_git(head="9f8e7d6")))
    assert_prefix(before, second)
    assert_prefix(first, second)
    assert ids(second)[len(before.messages) :] == ["request-context:u2", "runtime:u2"]
    assert second.messages[-2].text == (
        "<request_context>\n"
        "Workspace context update. It replaces these sections: git. Every other section "
        "stays in force as last sent.\n\n"
        "<git>\nBranch: main\nHEAD: 9f8e7d6\nWorking tree: clean\n</git>\n"
        "</request_context>\n"
    )
    for rule_text in RULE_TEXTS:
        assert rule_text in first.messages[0].text
        assert rule_text not in second.messages[-2].text
    assert c.history.context_sections["request-context:u2"] == (
        ContextSection("git", c.history.sections["git"]),
    )


def test_two_sections_change_one_message_with_both_in_section_order() -> None:
    c = conv()
    c.handle(user("u1"))
    c.assistant("ok")
    ctx = with_git(branch="fix/x")  # git is after rules in the template
    ctx["rules"] = [*ctx["rules"], {"name": "zz-new", "kind": "always", "body": "NEW-RULE"}]
    request = c.handle(user("u2", context=ctx))
    assert context_ids(request) == ["request-context:u1", "request-context:u2"]
    text = request.messages[-2].text
    assert text.startswith(
        "<request_context>\nWorkspace context update. It replaces these sections: rules, "
        "git. Every other section stays in force as last sent.\n\n<rules>\n"
    )
    assert text.index("NEW-RULE") < text.index("<git>\nBranch: fix/x")
    for absent in ("<skills>", "<subagents>", "<environment>", "<mcp_servers>"):
        assert absent not in text
    assert [s.name for s in c.history.context_sections["request-context:u2"]] == ["rules", "git"]


def test_a_section_emptied_is_stated_as_cleared() -> None:
    c = conv()
    c.handle(user("u1"))
    c.assistant("ok")
    ctx = copy.deepcopy(CONTEXT_A)
    del ctx["environment"]
    request = c.handle(user("u2", context=ctx))
    assert request.messages[-2].text == (
        "<request_context>\n"
        "Workspace context update. It replaces these sections: environment. Cleared, so no "
        "longer in force: environment. Every other section stays in force as last sent.\n"
        "</request_context>\n"
    )
    assert c.history.context_sections["request-context:u2"] == (
        ContextSection("environment", None),
    )
    c.assistant("ok")
    # Still empty: nothing to say. Back again: sent again, as an update.
    assert ids(c.handle(user("u3", context=ctx)))[-1:] == ["runtime:u3"]
    c.assistant("ok")
    back = c.handle(user("u4"))
    assert "It replaces these sections: environment." in back.messages[-2].text
    assert "<environment>\nOS: linux" in back.messages[-2].text


def test_an_empty_section_on_the_first_turn_is_not_sent_nor_cleared_later() -> None:
    c = conv()
    ctx = copy.deepcopy(CONTEXT_A)
    del ctx["git"]
    first = c.handle(user("u1", context=ctx))
    assert "<git>" not in first.messages[0].text
    assert "(rules, skills, subagents, environment, mcp)" in first.messages[0].text
    c.assistant("ok")
    assert ids(c.handle(user("u2", context=ctx)))[-1] == "runtime:u2"


def test_a_b_a_of_one_section_while_another_changes() -> None:
    c = conv()
    c.handle(user("u1"))
    skills_b = [{"name": "pdf", "description": "Read PDF files, v2", "path": "s/pdf.md"}]
    steps = [
        ({**with_git(branch="b"), "skills": CONTEXT_A["skills"]}, ["git"]),
        ({**with_git(branch="main"), "skills": skills_b}, ["skills", "git"]),
        ({**with_git(branch="main"), "skills": CONTEXT_A["skills"]}, ["skills"]),
        ({**with_git(branch="b"), "skills": CONTEXT_A["skills"]}, ["git"]),
    ]
    for n, (ctx, changed) in enumerate(steps, start=2):
        c.assistant("ok")
        request = c.handle(user(f"u{n}", context=ctx))
        message = request.messages[-2]
        assert message.id == f"request-context:u{n}"
        assert f"It replaces these sections: {', '.join(changed)}." in message.text
        assert [s.name for s in c.history.context_sections[message.id]] == changed
    git = [m.text for m in contexts(c) if "<git>" in m.text]
    assert len(git) == 4  # u1 (main), u2 (b), u3 (main again), u5 (b again)
    main_git = "<git>\nBranch: main\nHEAD: abc1234\nWorking tree: clean\n</git>"
    assert main_git in git[0] and main_git in git[2]


def test_retry_of_a_section_update_is_idempotent() -> None:
    c = conv()
    c.handle(user("u1"))
    c.assistant("ok")
    body = providers.get("anthropic").serialize(c.handle(user("u2", context=context_b())))
    again = c.handle(user("u2", context=context_b()))
    assert providers.get("anthropic").serialize(again) == body
    assert context_ids(c.request()) == ["request-context:u1", "request-context:u2"]
    c.assistant("ok")
    assert ids(c.handle(user("u3", context=context_b())))[-1] == "runtime:u3"


def test_background_and_injected_events_never_append_context() -> None:
    c = conv()
    c.handle(user("u1"))
    c.assistant("ok")
    request = c.handle(background("b1"))
    assert context_ids(request) == ["request-context:u1"]
    c.assistant("ok")
    injected = AgentRunRequest.from_value(
        {
            "conversation_id": "conv-1",
            "event_id": "i1",
            "kind": "injected",
            "text": "build finished",
            "context": context_b(),
        }
    )
    assert context_ids(c.handle(injected)) == ["request-context:u1"]
    c.assistant("ok")
    # The next user turn compares with what is in force: git changed, only it is sent.
    request = c.handle(user("u2", context=context_b()))
    assert [s.name for s in c.history.context_sections["request-context:u2"]] == ["git"]


def test_compaction_after_many_section_updates_keeps_one_full_context() -> None:
    c = conv()
    c.handle(user("u1"))
    ctx = copy.deepcopy(CONTEXT_A)
    for n in range(2, 12):
        c.assistant("ok")
        ctx = with_git(head=f"{n:07x}")
        if n >= 6:  # the environment section is cleared at u6 and stays empty
            del ctx["environment"]
        c.handle(user(f"u{n}", context=ctx))
    assert len(contexts(c)) == 11
    c.assistant("ok")
    request = c.handle(user("u12", context=ctx, compact={"summary": "S"}))
    assert ids(request) == ["request-context:u12", "summary:1", "runtime:u12"]
    fresh = conv(name="fresh").handle(user("f1", context=ctx, conversation="fresh"))
    assert request.messages[0].text == fresh.messages[0].text
    full = request.messages[0].text
    assert "HEAD: 000000b" in full and "<environment>" not in full and "<skills>" in full
    assert [s.name for s in c.history.context_sections["request-context:u12"]] == list(SECTIONS)
    c.assistant("ok")
    following = c.handle(user("u13", context=with_git(head="000000c")))
    assert context_ids(following) == ["request-context:u12", "request-context:u13"]
    assert "It replaces these sections: environment, git." in following.messages[-2].text


def test_manual_compaction_reprojects_the_full_context_on_the_next_user_turn() -> None:
    c = conv()
    c.handle(user("u1"))
    c.assistant("ok")
    c.handle(user("u2", context=context_b()))
    c.assistant("ok")
    c.compact("S")
    request = c.handle(user("u3", context=context_b()))
    assert ids(request) == ["summary:1", "request-context:u3", "runtime:u3"]
    fresh = conv(name="fresh").handle(user("f1", context=context_b(), conversation="fresh"))
    assert request.messages[1].text == fresh.messages[0].text


def _serialized(request: Any) -> dict[str, bytes]:
    return {name: providers.get(name).serialize(request) for name in providers.NAMES}


def _reopen_between_turns(target: str) -> None:
    """Every request after reopening from ``target`` equals, byte for byte on every
    provider, the one of a process that never stopped."""
    steps: list[dict[str, Any]] = [
        CONTEXT_A,
        with_git(head="1111111"),
        with_git(head="1111111"),
        {**with_git(head="2222222"), "skills": []},
        CONTEXT_A,
    ]
    live = conv(name="c")
    for n, ctx in enumerate(steps, start=1):
        store = open_store(target)
        try:
            reopened = conv(store, "c")
            if n > 1:
                assert reopened.history.sections == live.history.sections
                assert reopened.history.context_sections == live.history.context_sections
            got = reopened.handle(user(f"u{n}", context=ctx, conversation="c"))
            want = live.handle(user(f"u{n}", context=ctx, conversation="c"))
            assert _serialized(got) == _serialized(want)
            reopened.assistant(f"answer {n}")
            live.assistant(f"answer {n}")
        finally:
            store.close()


def test_reopen_from_sqlite_between_turns_gives_the_same_bytes(tmp_path: Path) -> None:
    _reopen_between_turns(f"sqlite:///{tmp_path / 'c.db'}")


def test_reopen_from_postgres_between_turns_gives_the_same_bytes(postgres_url: str) -> None:
    _reopen_between_turns(postgres_url)


def test_a_record_with_sections_round_trips_and_whole_records_carry_none() -> None:
    store = MemoryStore()
    c = conv(store)
    c.store_wire = False  # pins the formats without wire templates
    c.handle(user("u1"))
    c.assistant("ok")
    c.handle(user("u2", context=context_b()))
    stored = store.load("conv-1")
    assert stored is not None
    first = stored.records[0]
    assert b'"format":4' in first and b'"sections":[{"digest":"sha256:' in first
    update = stored.records[2]
    assert b'"sections":[{"digest":"sha256:' in update and b'"name":"git"}]' in update
    record = decode_record(update, "conv-1", 3, _prev(stored, 3))
    assert record.sections == (ContextSection("git", c.history.sections["git"]),)
    whole_store = MemoryStore()
    w = Conversation.open(whole_store, mode_bundle("whole"), "conv-1")
    w.store_wire = False  # pins the formats without wire templates
    w.handle(user("u1"))
    whole = whole_store.load("conv-1")
    assert whole is not None and b'"sections"' not in whole.records[0]
    assert b'"format":1' in whole.records[0]


def _prev(stored: Any, seq: int) -> str:
    from prefixlock.core import canonical

    return canonical.sha256_hex(stored.records[seq - 2] if seq > 1 else stored.root)


# -- the build: sections are top-level blocks, each sees conversation-level data only ----

CONTEXT = "prompt/cursor/context.md.j2"
FRAME = "{{ update.sections }}{{ update.cleared }}\n"


def section_errors(source: str) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        compile_template(
            CONTEXT,
            source,
            CONVERSATION_VARIABLES | {"update"},
            TURN_VARIABLES,
            "turn-level",
            template_kind="request-context",
            sections=CONVERSATION_VARIABLES,
        )
    return [str(e) for e in info.value.errors]


def test_a_sectioned_template_without_blocks_is_refused() -> None:
    assert section_errors(FRAME) == [
        f"{CONTEXT}:1: context_updates: sections needs the request-context template to "
        "define its sections as top-level {% block NAME %} ... {% endblock %}; it defines none"
    ]


def test_a_section_reading_update_or_a_nested_section_is_refused_at_its_line() -> None:
    source = (
        FRAME
        + "{% block git %}{{ git }}{{ update }}{% endblock %}\n"
        + "{% block mcp %}{% block inner %}{% endblock %}{{ mcp }}{% endblock %}\n"
    )
    assert section_errors(source) == [
        f"{CONTEXT}:2: section block 'git' uses variable 'update' (the update's own variable "
        "is for the text outside the section blocks; a section may use only: environment, "
        "git, mcp, rules, skills, subagents)",
        f"{CONTEXT}:3: section block 'inner' is not at the top level of the template (inside "
        "another block, an if or a for): sections follow one another",
    ]


def test_conversation_data_outside_the_sections_and_a_bad_name_are_refused() -> None:
    source = FRAME + "{{ git.branch }}\n{% block Rules %}{{ rules }}{% endblock %}\n"
    assert section_errors(source) == [
        f"{CONTEXT}:2: text outside the section blocks uses variable 'git' (it may use only "
        "'update'; conversation-level data goes inside a section block)",
        f"{CONTEXT}:3: section name 'Rules': lowercase letters, digits and '_', starting "
        "with a letter",
    ]


def test_a_frame_that_never_says_what_an_update_replaces_is_refused() -> None:
    assert section_errors("{{ update.sections }}\n{% block git %}{{ git }}{% endblock %}\n") == [
        f"{CONTEXT}:1: the text outside the section blocks never reads update.cleared: an "
        "update must tell the model which sections it replaces (update.sections), which of "
        "them are cleared (update.cleared), and that the rest stay in force"
    ]


def test_turn_level_data_in_a_section_is_refused_like_anywhere_in_the_context() -> None:
    assert section_errors(FRAME + "{% block git %}{{ query }}{% endblock %}\n") == [
        f"{CONTEXT}:2: request-context template uses turn-level variable 'query' "
        "(request-context templates may use only: environment, git, mcp, rules, skills, "
        "subagents, update)"
    ]


def test_context_updates_is_checked_with_did_you_mean(tmp_path: Path) -> None:
    root = tmp_path / "spec"
    shutil.copytree(mode_root("sections"), root)
    agent = root / "rules" / "agent.yaml"
    agent.write_text(
        agent.read_text().replace("context_updates: sections", "context_updates: section")
    )
    line = agent.read_text().splitlines().index("context_updates: section") + 1
    with pytest.raises(SpecErrors) as info:
        build_bundle(root)
    assert [str(e) for e in info.value.errors] == [
        f"rules/agent.yaml:{line}:18: $.context_updates: expected one of whole, sections; "
        "got 'section' (did you mean 'sections'?)"
    ]


def test_sections_mode_is_in_the_digest_and_whole_keeps_the_shipped_digest() -> None:
    whole, sections = mode_bundle("whole"), mode_bundle("sections")
    assert whole.digest != sections.digest
    assert [p.name for p in whole.parts if p.name == "context-updates.json"] == []
    part = sections.part("context-updates.json")
    assert part.data == (
        b'{"context_updates":"sections","sections":'
        b'["rules","skills","subagents","environment","git","mcp"]}'
    )


# -- verify: the context invariant per section -----------------------------------------


def _replayed(case: str) -> tuple[Any, list[Any]]:
    scenario = load_scenario(
        REPO / "golden" / case / "scenario.yaml", bundle=mode_bundle("sections")
    )
    return scenario, replay(scenario)


def _expected(scenario: Any) -> dict[str, dict[str, str | None]]:
    return {
        s.request.event_id: section_digests(scenario.bundle, s.request)
        for s in scenario.steps
        if isinstance(s, UserStep)
    }


def _failures(calls: list[Any], expected: Any) -> list[str]:
    checker = HistoryChecker("case", expected=expected)
    for call in calls:
        checker.add(call)
    return [f.message for f in checker.failures]


def _with_sections(calls: list[Any], sections: dict[str, Any]) -> list[Any]:
    return [attrs.evolve(call, sections=sections) for call in calls]


def test_verify_finds_nothing_wrong_in_a_sectioned_replay() -> None:
    scenario, calls = _replayed("section-revert")
    assert calls[-1].sections  # the replay hands verify each message's sections
    assert _failures(calls, _expected(scenario)) == []


def test_verify_names_a_section_sent_again_unchanged() -> None:
    _, calls = _replayed("section-revert")
    sections = dict(calls[-1].sections)
    git_b = sections["request-context:u2"][1]
    assert git_b.name == "git"
    sections["request-context:u3"] = (git_b,)
    found = _failures(_with_sections(calls, sections), None)
    assert found[0] == (
        "'request-context:u3' carries section 'git' unchanged from 'request-context:u2' "
        "(an unchanged section must not be sent again)"
    )


def test_verify_names_a_section_whose_latest_version_is_not_in_force() -> None:
    scenario, calls = _replayed("section-revert")
    expected = _expected(scenario)
    expected["u4"] = {**expected["u4"], "git": "sha256:" + "0" * 64}
    assert _failures(calls, expected) == [
        "section 'git' in force after user turn 'u4' is the version of "
        "'request-context:u3', not the turn's own"
    ]


def test_verify_names_an_automatic_compaction_that_keeps_a_partial_context() -> None:
    scenario, calls = _replayed("section-compaction")
    assert _failures(calls, _expected(scenario)) == []
    sections = dict(calls[-1].sections)
    sections["request-context:u6"] = tuple(
        s for s in sections["request-context:u6"] if s.name == "git"
    )
    found = _failures(_with_sections(calls, sections), _expected(scenario))
    assert found[0] == (
        "automatic compaction kept 'request-context:u6', which carries the sections git, "
        "not the full context (rules, skills, subagents, environment, git, mcp)"
    )


# -- diff: which section a spec edit changes ----------------------------------------------


def test_diff_names_the_section_of_a_changed_template_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    template = "prompt/cursor/context.md.j2"
    lines = (REPO / template).read_text(encoding="utf-8").split("\n")
    number = (
        lines.index('Working tree: {{ "uncommitted changes present" if git.dirty else "clean" }}')
        + 1
    )
    old = (
        "<request_context>\n<git>\nBranch: main\nWorking tree: clean\n</git>\n</request_context>\n"
    )
    new = old.replace("Working tree:", "Worktree:")
    found = SourceIndex(REPO).attribute("anthropic", Difference(("messages", 0), old, new), {})
    assert found == f"{template}:{number} (section git)"
    # A line outside every section block names no section.
    said = (
        "Workspace context for this conversation. It is sent again only when it changes; "
        "the latest one is in force."
    )
    header = lines.index(said) + 1
    old = f"<request_context>\n{said}\n"
    new = old.replace("sent again", "resent")
    found = SourceIndex(REPO).attribute("anthropic", Difference(("messages", 0), old, new), {})
    assert found == f"{template}:{header}"


def test_init_scaffolds_an_agent_with_sections(project: Path) -> None:
    """What prefixlock init writes is what we teach: context_updates: sections."""
    bundle = build_bundle(project)
    assert bundle.context_updates == "sections"
    assert bundle.sections == SECTIONS
    assert "context_updates: sections\n" in (project / "rules" / "agent.yaml").read_text()


def test_a_new_deploy_that_switches_the_mode_sends_the_whole_context_once() -> None:
    """whole -> sections: nothing is known per section, so the next turn sends the full
    sectioned context (then updates); sections -> whole: the latest message may be an
    update, so the whole context is sent again (then deduped as always)."""
    store = MemoryStore()
    c = Conversation.open(store, mode_bundle("whole"), "c")
    c.handle(user("u1", conversation="c"))
    c.assistant("ok")
    c = Conversation.open(store, mode_bundle("sections"), "c")
    request = c.handle(user("u2", conversation="c"))
    assert context_ids(request) == ["request-context:u1", "request-context:u2"]
    assert "in sections (rules, skills" in request.messages[-2].text
    c.assistant("ok")
    request = c.handle(user("u3", context=context_b(), conversation="c"))
    assert "It replaces these sections: git." in request.messages[-2].text
    c.assistant("ok")
    c = Conversation.open(store, mode_bundle("whole"), "c")
    request = c.handle(user("u4", context=context_b(), conversation="c"))
    assert request.messages[-2].id == "request-context:u4"
    assert request.messages[-2].text.startswith(
        "<request_context>\nWorkspace context for this conversation. It is sent again only"
    )
    c.assistant("ok")
    assert ids(c.handle(user("u5", context=context_b(), conversation="c")))[-1] == "runtime:u5"


def test_a_sectioned_record_decodes_on_the_fast_path_as_on_the_checked_one() -> None:
    from prefixlock.store.records import _decode_record_checked, _scan_record

    store = MemoryStore()
    c = conv(store)
    c.store_wire = False  # pins the formats without wire templates
    c.handle(user("u1", timestamp="2026-12-02T10:00:00Z"))
    c.assistant("ok")
    ctx = copy.deepcopy(CONTEXT_A)
    del ctx["environment"]
    c.handle(user("u2", context=ctx))
    stored = store.load("conv-1")
    assert stored is not None
    for seq in (1, 3):
        data = stored.records[seq - 1]
        fast = _scan_record(data, "conv-1", seq, _prev(stored, seq))
        assert fast is not None
        assert fast == _decode_record_checked(data, "conv-1", seq, _prev(stored, seq))
    assert fast.sections == (ContextSection("environment", None),)
    # A sections member in a record of another format is left to the checked path.
    bad = stored.records[2].replace(b'"format":4', b'"format":1')
    assert _scan_record(bad, "conv-1", 3, _prev(stored, 3)) is None
