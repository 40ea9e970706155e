"""Replay: model calls, exact bytes per provider, restarts, retries, the CLI, calls.md."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import attrs
import prefixlock.providers as providers
import prefixlock.review.replay as replay_module
import pytest
from conv_helpers import REPO, mode_bundle
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.atomic import umask
from prefixlock.core.errors import PrefixlockError, SerializationError, SpecErrors
from prefixlock.core.messages import CanonicalMessage, MessageKind, Role, TextPart
from prefixlock.core.model import MessageView, ModelRequest
from prefixlock.providers import NAMES
from prefixlock.review.render import fold, render_calls
from prefixlock.review.replay import (
    STORE_FILE,
    divergence,
    history_blocks,
    history_length,
    provider_names,
    replay,
    replay_bodies,
    serialize_calls,
    write_bodies,
    write_replay,
)
from prefixlock.review.scenario import AssistantStep, Scenario, load_scenario
from prefixlock.runtime.conversation import Conversation
from prefixlock.spec.build import build_bundle
from prefixlock.store.sqlite import SQLiteStore

SCENARIO = """\
name: replay test
conversation: conv-replay
base:
  mode: agent
  context:
    git: {branch: main, head: abc1234, dirty: false}
steps:
  - user: {event: u1, query: Read a.py, timestamp: "2026-03-02T09:00:00Z"}
  - assistant:
      tool_calls:
        - {id: c1, name: read_file, arguments: {path: a.py}}
        - {id: c2, name: read_file, arguments: {path: b.py}}
  - tool_results:
      - {call_id: c1, output: "x = 1"}
      - {call_id: c2, output: "y = 2"}
  - assistant: {text: Both read.}
  - restart: true
  - user: {event: u2, query: Again, timestamp: "2026-03-02T09:01:00Z"}
  - retry: u2
  - assistant: {text: Done.}
  - background: {event: b1, text: The build finished.}
  - retry: u1
  - assistant: {text: Noted.}
  - user:
      event: u3
      query: New branch
      context: {git: {branch: dev, head: abc1234, dirty: true}}
  - assistant: {text: Ok.}
  - compact: {summary: We read a.py and b.py.}
  - user: {event: u4, query: After compaction}
"""


def encode(body: object) -> bytes:
    """A parsed body re-encoded with its key order kept (as the wire has it)."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    path = tmp_path_factory.mktemp("scenario") / "scenario.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    return load_scenario(path)


# --------------------------------------------------------------------------- replay


def test_calls_are_numbered_with_their_step_kind_and_event(scenario: Scenario) -> None:
    calls = replay(scenario)
    assert [(c.index, c.step, c.kind, c.event) for c in calls] == [
        (1, 0, "user", "u1"),
        (2, 2, "tool_results", "tool-results:c1"),
        (3, 5, "user", "u2"),
        (4, 6, "retry", "u2"),
        (5, 8, "background", "b1"),
        (6, 9, "retry", "u1"),
        (7, 11, "user", "u3"),
        (8, 14, "user", "u4"),
    ]


def test_requests_follow_the_history(scenario: Scenario) -> None:
    calls = replay(scenario)
    ids = [[m.id for m in c.request.messages] for c in calls]
    assert ids[0] == ["request-context:u1", "runtime:u1"]
    assert ids[1] == [*ids[0], "assistant:1", "tool-results:c1"]
    assert ids[2] == [*ids[1], "assistant:2", "runtime:u2"]  # same context: none appended
    assert ids[4] == [*ids[2], "assistant:3", "event:b1"]
    assert ids[6] == [*ids[4], "assistant:4", "request-context:u3", "runtime:u3"]
    # Manual compaction: the summary alone, then the next turn reprojects the context.
    assert ids[7] == ["summary:1", "request-context:u4", "runtime:u4"]
    assert calls[7].request.epoch == 1


def test_a_retry_is_the_original_call(scenario: Scenario) -> None:
    calls = replay(scenario)
    bodies = serialize_calls(calls, NAMES)
    for retry, original in ((4, 3), (6, 1)):
        assert calls[retry - 1].request.same_as(calls[original - 1].request)
        for name in NAMES:
            assert bodies[name][retry - 1] == bodies[name][original - 1]


def test_bodies_are_exactly_what_the_provider_serializes(scenario: Scenario) -> None:
    calls = replay(scenario)
    bodies = replay_bodies(scenario, NAMES)
    assert list(bodies) == list(NAMES)
    for name in NAMES:
        assert len(bodies[name]) == len(calls)
        for call, data in zip(calls, bodies[name], strict=True):
            fresh = providers.get(name)  # no incremental cache
            assert data == fresh.serialize(call.request)
            assert data == canonical.dumpb(fresh.wire_body(call.request))


def test_calls_are_frozen_when_made(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    """A later in-place rewrite of the history list must not reach calls already made:
    it then shows as a prefix break instead of rewriting every earlier call too."""
    live: list[ModelRequest] = []
    real_run = replay_module._run

    def spying_run(*args: Any) -> tuple[str, str, ModelRequest] | None:
        made = real_run(*args)
        if made is not None:
            live.append(made[2])  # the request as the conversation returned it
        return made

    monkeypatch.setattr(replay_module, "_run", spying_run)
    calls = replay(scenario)
    sent = serialize_calls(calls, NAMES)
    first, second = calls[0].request, calls[1].request
    for frozen, sent_view in ((first, live[0]), (second, live[1])):  # not the history list
        assert frozen.messages._items is not sent_view.messages._items  # type: ignore[attr-defined]
    assert [m.id for m in first.messages] == ["request-context:u1", "runtime:u1"]

    # Simulate a bug: rewrite the first message of the underlying append-only list.
    history = live[0].messages._items  # type: ignore[attr-defined]
    assert history is live[1].messages._items  # type: ignore[attr-defined]
    original = history[0]
    history[0] = history[1]
    assert live[0].messages[0] is history[1]  # the live view changed with the list ...
    assert history[1] != original
    assert first.messages[0] == original  # ... the frozen calls did not (after the
    assert second.messages[0] == original  # scenario's restart: the hydrated copy)
    assert serialize_calls(calls, NAMES) == sent

    # The frozen first call against the second call built from the rewritten history is
    # a prefix break; two live views would both carry the rewrite and hide it.
    for name in NAMES:
        old = providers.get(name).serialize(first)
        new = providers.get(name).serialize(live[1])
        assert divergence(name, old, new) is not None, name
        assert divergence(name, providers.get(name).serialize(live[0]), new) is None, name


def test_replay_keeps_one_copy_of_the_history_across_restarts(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a restart the frozen calls hold the hydrated messages, not the objects of
    the conversation before it: the replay keeps one copy of the history, and the next
    restart hydrates beside that copy alone (verify's peak memory)."""
    live: list[ModelRequest] = []
    real_run = replay_module._run

    def spying_run(*args: Any) -> tuple[str, str, ModelRequest] | None:
        made = real_run(*args)
        if made is not None:
            live.append(made[2])
        return made

    monkeypatch.setattr(replay_module, "_run", spying_run)
    calls = replay(scenario, restart_everywhere=True)
    assert len(live) == len(calls)
    lists: dict[int, int] = {}  # a frozen list -> its last call
    for index, call in enumerate(calls):
        lists[id(call.request.messages._items)] = index  # type: ignore[attr-defined]
    assert len(lists) == 2  # the epochs before and after the compaction
    first_epoch = lists[id(calls[0].request.messages._items)]  # type: ignore[attr-defined]
    assert first_epoch > 2
    assert live[0].messages[0] is not live[first_epoch].messages[0]  # restarts hydrate
    for index, call in enumerate(calls):
        # the objects of the conversation that made the last call of its list
        last = live[lists[id(call.request.messages._items)]].messages  # type: ignore[attr-defined]
        assert all(m is last[i] for i, m in enumerate(call.request.messages)), index
    assert serialize_calls(calls, NAMES) == serialize_calls(replay(scenario), NAMES)


def _message(mid: str, text: str) -> CanonicalMessage:
    return CanonicalMessage.create(mid, MessageKind.RUNTIME, Role.USER, (TextPart(text),))


def test_snapshots_extend_one_list_until_the_history_is_rewritten() -> None:
    """Calls that extend the one before share one growing list (a provider encodes only
    the new messages); a retry's shorter projection is a view of its start; equal copies
    (a restart's hydrated history) keep the list; a rewrite starts a new one, and no
    call made before changes."""
    a, b, c = _message("a", "1"), _message("b", "2"), _message("c", "3")
    snapshots = replay_module._Snapshots()
    history = [a, b]
    first = snapshots.freeze(MessageView(history, 2))
    history.append(c)
    second = snapshots.freeze(MessageView(history, 3))
    assert second.shared_with(first) == 2 and list(second) == [a, b, c]
    retry = snapshots.freeze(MessageView(history, 2))
    assert retry.shared_with(second) == 2 and list(retry) == [a, b]
    hydrated = [_message("a", "1"), _message("b", "2"), _message("c", "3")]
    after_restart = snapshots.freeze(MessageView(hydrated, 3))
    assert after_restart.shared_with(second) == 3
    hydrated[0] = _message("a", "rewritten")  # a bug rewrites the history in place
    rewritten = snapshots.freeze(MessageView(hydrated, 3))
    assert rewritten.shared_with(second) == 0 and rewritten[0].text == "rewritten"
    assert list(first) == [a, b] and list(second) == [a, b, c]


def test_restart_hydrates_from_the_sqlite_store(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    real_open = Conversation.open.__func__  # type: ignore[attr-defined]

    def counting_open(cls: type[Conversation], store: object, *args: object) -> Conversation:
        assert isinstance(store, SQLiteStore)
        opened.append(type(store).__name__)
        result: Conversation = real_open(cls, store, *args)
        return result

    monkeypatch.setattr(Conversation, "open", classmethod(counting_open))
    plain = replay(scenario)
    assert len(opened) == 2  # the start, and the one restart step
    opened.clear()
    everywhere = replay(scenario, restart_everywhere=True)
    assert len(opened) == 1 + len(scenario.steps)
    assert serialize_calls(everywhere, NAMES) == serialize_calls(plain, NAMES)


def test_the_store_in_a_workdir_holds_every_record(scenario: Scenario, tmp_path: Path) -> None:
    replay(scenario, workdir=tmp_path)
    store = SQLiteStore(tmp_path / STORE_FILE)
    try:
        stored = store.load("conv-replay")
        assert stored is not None
        # user, assistant, tool results, assistant, user, assistant, background,
        # assistant, user, assistant, compact, user: retries add no record.
        assert len(stored.records) == 12
    finally:
        store.close()
    with pytest.raises(PrefixlockError, match="a replay needs a new checkpoint store"):
        replay(scenario, workdir=tmp_path)


def test_an_operation_the_history_refuses_is_located_at_its_step(scenario: Scenario) -> None:
    # load_scenario refuses this; a hand-built scenario reaches the history itself.
    steps = (scenario.steps[0], AssistantStep(scenario.steps[3].location, "x", ()))
    broken = attrs.evolve(scenario, steps=(*steps, steps[1]))
    with pytest.raises(SpecErrors) as info:
        replay(broken)
    (error,) = info.value.errors
    assert error.path == "$.steps[2].assistant"
    assert error.location == scenario.steps[3].location
    root, digest = scenario.bundle_root, scenario.bundle.digest
    assert error.message == (
        f"assistant output without a pending model call (bundle: {root}, sha256:{digest[7:19]})"
    )


# --------------------------------------------------------------------------- writing


def test_write_replay_writes_numbered_bodies(scenario: Scenario, tmp_path: Path) -> None:
    written = write_replay(scenario, ["anthropic", "gemini"], tmp_path)
    bodies = replay_bodies(scenario, ["anthropic", "gemini"])
    assert list(written.paths) == ["anthropic", "gemini"]
    assert written.sizes == {name: sum(map(len, bodies[name])) for name in bodies}
    for name, paths in written.paths.items():
        assert [p.name for p in paths] == [f"{n:04d}.json" for n in range(1, 9)]
        assert sorted((tmp_path / name).iterdir()) == paths
        assert [p.read_bytes() for p in paths] == bodies[name]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["anthropic", "gemini"]


def test_write_replay_writes_each_body_as_it_is_made(
    scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Streaming: when call N's body is asked for, calls 1..N-1 are already on disk in
    # the provider's staging folder (no body waits in memory for the others), and
    # nothing is in place under ``out`` until the last call is written.
    seen: list[tuple[str, int, list[str]]] = []
    made = replay_module.fragments_at

    def watching(sc: Scenario, call: Any, provider: Any) -> Any:
        staged = [p for p in tmp_path.iterdir() if p.name.startswith(f".{provider.name}.")]
        assert len(staged) == 1 and not (tmp_path / provider.name).exists()
        seen.append((provider.name, call.index, sorted(p.name for p in staged[0].iterdir())))
        return made(sc, call, provider)

    monkeypatch.setattr(replay_module, "fragments_at", watching)
    written = write_replay(scenario, ["anthropic", "gemini"], tmp_path)
    assert [(name, index) for name, index, _ in seen] == [
        (name, n) for n in range(1, 9) for name in ("anthropic", "gemini")
    ]
    for _, index, files in seen:
        assert files == [f"{n:04d}.json" for n in range(1, index)]
    assert written.sizes == {
        name: sum(p.stat().st_size for p in paths) for name, paths in written.paths.items()
    }


def test_write_replay_failure_writes_nothing(
    scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "gemini").mkdir()
    (tmp_path / "gemini" / "0001.json").write_bytes(b"old")
    made = replay_module.fragments_at

    def failing(sc: Scenario, call: Any, provider: Any) -> Any:
        if call.index == 5:
            raise SerializationError("call 5 cannot be sent")
        return made(sc, call, provider)

    monkeypatch.setattr(replay_module, "fragments_at", failing)
    with pytest.raises(SerializationError, match="call 5 cannot be sent"):
        write_replay(scenario, ["anthropic", "gemini"], tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gemini"]
    assert [p.name for p in (tmp_path / "gemini").iterdir()] == ["0001.json"]
    assert (tmp_path / "gemini" / "0001.json").read_bytes() == b"old"


def test_write_bodies_replaces_a_provider_folder_whole(tmp_path: Path) -> None:
    (tmp_path / "openai-chat").mkdir()
    for name in ("0001.json", "0002.json", "0003.json"):
        (tmp_path / "openai-chat" / name).write_bytes(b"old")
    (tmp_path / "scenario.yaml").write_bytes(b"kept")
    write_bodies({"openai-chat": [b"{}", b'{"a":1}']}, tmp_path)
    assert sorted(p.name for p in (tmp_path / "openai-chat").iterdir()) == [
        "0001.json",
        "0002.json",
    ]
    assert (tmp_path / "openai-chat" / "0002.json").read_bytes() == b'{"a":1}'
    assert (tmp_path / "scenario.yaml").read_bytes() == b"kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["openai-chat", "scenario.yaml"]


def test_write_bodies_gives_folders_the_mode_mkdir_would(tmp_path: Path) -> None:
    # mkdtemp makes staging folders private (0700); once swapped in, a replayed
    # provider folder must be readable like any folder the user creates.
    write_bodies({"openai-chat": [b"{}"]}, tmp_path)
    assert (tmp_path / "openai-chat").stat().st_mode & 0o777 == 0o777 & ~umask()


def test_provider_names() -> None:
    assert provider_names(["all"]) == NAMES
    assert provider_names(["openai-chat", "anthropic", "anthropic"]) == (
        "anthropic",
        "openai-chat",
    )
    with pytest.raises(SerializationError, match="did you mean 'gemini'"):
        provider_names(["gemeni"])


# --------------------------------------------------------------------------- prefixes


def test_divergence_accepts_tail_appends_and_finds_breaks(scenario: Scenario) -> None:
    calls = replay(scenario)
    bodies = serialize_calls(calls, NAMES)
    for name in NAMES:
        first, second = bodies[name][0], bodies[name][1]
        assert divergence(name, first, second) is None
        assert divergence(name, first, first) is None
        assert divergence(name, second, first) is not None  # shorter: not an extension
        assert history_length(name, second) > history_length(name, first)
    # An edited earlier message is a break at its path.
    body = canonical.loads(bodies["anthropic"][1])
    body["messages"][0]["content"][0]["text"] += " (edited)"
    assert (
        divergence("anthropic", bodies["anthropic"][0], encode(body))
        == "$.messages[0].content[0].text"
    )
    # So is changed instructions.
    body = canonical.loads(bodies["openai-responses"][1])
    body["instructions"] = "other"
    assert divergence("openai-responses", bodies["openai-responses"][0], encode(body)) == (
        "$.instructions"
    )


# --------------------------------------------------------------------------- readable form


def test_fold_keeps_short_texts_and_folds_long_ones() -> None:
    assert fold("a\nb") == ["a", "b"]
    text = "\n".join(f"line {n}" for n in range(1, 31))
    assert fold(text) == [
        *(f"line {n}" for n in range(1, 9)),
        "… 18 lines …",
        *(f"line {n}" for n in range(27, 31)),
    ]
    assert fold("x" * 170) == ["x" * 160 + "… (+10 chars)"]


def test_render_marks_each_call(scenario: Scenario) -> None:
    calls = replay(scenario)
    bodies = serialize_calls(calls, NAMES)
    page = render_calls(scenario, calls, bodies)
    assert page == render_calls(scenario, replay(scenario), serialize_calls(calls, NAMES))
    assert page.startswith("# replay test\n")
    assert page.endswith("\n") and not page.endswith("\n\n")
    assert "## Call 2: tool_results `tool-results:c1`\n\nSteps: 1 assistant · 2 tool_results\n" in (
        page
    )
    # each status, then the call's cache bar (read / written / uncached)
    assert "- anthropic: first call · `" in page
    assert "- openai-responses: tail append (+4 messages) · `" in page  # 2 calls + 2 outputs
    assert "Re-delivered `u2`: appends nothing; the request of call 3." in page
    assert "- gemini: retry: identical to call 3 · `" in page
    assert "- bedrock-converse: PREFIX RESET (compaction) · `" in page
    assert '  - call `c1` read_file `{"path":"a.py"}`\n' in page
    assert "PREFIX BREAK" not in page.split("| PREFIX BREAKS |")[1]
    # A sectioned update names the sections it carries, then shows its text.
    assert "- `request-context:u1` · request_context · user\n  full context, sections: " in page
    assert "- `request-context:u3` · request_context · user\n  update, sections: git\n" in page
    assert "  Working tree: uncommitted changes present\n  </git>\n  </request_context>\n" in page
    # Under context_updates: whole a changed context is shown as a diff against the latest.
    whole = load_scenario(scenario.path, bundle=mode_bundle("whole"))
    calls = replay(whole)
    page = render_calls(whole, calls, serialize_calls(calls, NAMES))
    assert "  --- request-context:u1\n  +++ request-context:u3\n" in page
    assert "  -Working tree: clean\n  +Working tree: uncommitted changes present\n" in page


def test_render_shows_a_prefix_break_at_its_path(scenario: Scenario) -> None:
    calls = replay(scenario)
    bodies = serialize_calls(calls, NAMES)
    body = canonical.loads(bodies["anthropic"][2])
    body["messages"][1]["content"][0]["text"] = "rewritten runtime"
    bodies["anthropic"][2] = encode(body)
    page = render_calls(scenario, calls, bodies)
    assert "- anthropic: PREFIX BREAK at $.messages[1].content[0].text · `" in page
    # Call 3 breaks; its retry differs from it; call 5 breaks against the edited call 3.
    assert "| anthropic | 2 | 1 | 1 | 3 |" in page
    assert "- anthropic: RETRY MISMATCH: differs from call 3 · `" in page
    assert "- gemini: tail append (+2 messages) · `" in page


# --------------------------------------------------------------------------- CLI


def test_cli_replay_writes_every_provider(
    scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["replay", str(scenario.path), "--provider", "all", "--out", str(out)]) == 0
    bodies = replay_bodies(scenario, NAMES)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"{name}: 8 calls, {sum(map(len, bodies[name]))} bytes -> {out / name}/" for name in NAMES
    ]
    for name in NAMES:
        files = sorted((out / name).iterdir())
        assert [f.read_bytes() for f in files] == bodies[name]


def test_cli_replay_one_provider_with_restarts(scenario: Scenario, tmp_path: Path) -> None:
    args = ["replay", str(scenario.path), "--provider", "gemini", "--out", str(tmp_path)]
    assert main([*args, "--restart-everywhere"]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["gemini"]
    files = sorted((tmp_path / "gemini").iterdir())
    assert [f.read_bytes() for f in files] == replay_bodies(scenario, ["gemini"])["gemini"]


def test_cli_replay_reports_every_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("bad.yaml").write_text(
        textwrap.dedent(
            """\
            name: bad
            conversation: c
            steps:
              - assistant: {text: early}
              - retry: u1
            """
        ),
        encoding="utf-8",
    )
    assert main(["replay", "bad.yaml", "--provider", "all", "--out", "out"]) == 2
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "bad.yaml:4:5: $.steps[0].assistant: assistant step before any user turn",
        "bad.yaml:5:5: $.steps[1].retry: retry of unknown event 'u1' (delivered so far: none)",
        "prefixlock replay: 2 errors",
    ]
    assert captured.out == ""
    assert not Path("out").exists()


def test_cli_replay_refuses_an_unknown_provider(
    scenario: Scenario, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["replay", str(scenario.path), "--provider", "antropic", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    assert capsys.readouterr().err == (
        "prefixlock replay: unknown provider 'antropic' (did you mean 'anthropic'?)\n"
    )
    assert main(["replay", str(scenario.path), "--out", str(tmp_path)]) == 2


def test_golden_scenarios_hold_each_kind_of_message() -> None:
    # A smoke check that replay sees every canonical message kind somewhere.
    root = Path(__file__).resolve().parents[1] / "golden"
    kinds: set[MessageKind] = set()
    for name in ("long-session", "manual-compaction"):
        for call in replay(load_scenario(root / name / "scenario.yaml")):
            kinds.update(m.kind for m in call.request.messages)
    assert kinds == set(MessageKind)


def test_divergence_lets_only_the_last_wire_message_gain_blocks() -> None:
    def body(*contents: list[str]) -> bytes:
        messages = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": t} for t in c]}
            for i, c in enumerate(contents)
        ]
        return canonical.dumpb({"inferenceConfig": {"maxTokens": 1}, "messages": messages})

    name = "bedrock-converse"
    old = body(["ctx", "q"], ["a"], ["r"])
    assert divergence(name, old, body(["ctx", "q"], ["a"], ["r", "event"])) is None
    assert divergence(name, old, body(["ctx", "q", "x"], ["a"], ["r"])) == (
        "$.messages[0].content[2]"
    )
    assert divergence(name, old, body(["ctx", "q"], ["a"], [])) == "$.messages[2].content[0]"
    assert (history_length(name, old), history_blocks(name, old)) == (3, 4)


def test_a_step_the_conversation_refuses_names_its_line_path_and_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool output past the size limit passes the loader and is refused at replay: the
    error names the step's ``file:line:col``, its ``$.steps[N]`` and the bundle."""
    path = tmp_path / "case" / "scenario.yaml"
    path.parent.mkdir()
    big = "x" * (4 * 1024 * 1024 + 1)
    path.write_text(
        f"name: big\nconversation: c\nbundle: {REPO}\nsteps:\n"
        "  - user: {event: u1, query: q}\n"
        "  - assistant: {tool_calls: [{id: c1, name: read_file, arguments: {path: a}}]}\n"
        f"  - tool_results: [{{call_id: c1, output: {big}}}]\n",
        encoding="utf-8",
    )
    digest = build_bundle(REPO).digest
    assert (
        main(["replay", str(path), "--provider", "gemini", "--digests", str(tmp_path / "d")]) == 2
    )
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:7:5: $.steps[2].tool_results: tool result for call 'c1': output is 4194305 "
        "bytes, over the limit of 4194304 bytes (Limits.max_tool_output_bytes) "
        f"(bundle: {REPO}, sha256:{digest[7:19]})",
        "prefixlock replay: 1 error",
    ]


@pytest.mark.parametrize("command", ["replay", "verify"])
def test_a_call_the_provider_cannot_express_names_its_step_and_bundle(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The minimal spec root has no gemini settings: the first call fails to serialize,
    at the step that made it, and the error says which bundle lacks them."""
    root = tmp_path / "root"
    shutil.copytree(Path(__file__).parent / "data" / "specs" / "minimal", root)
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: t\nconversation: c\nbundle: root\nsteps:\n"
        "  - user: {event: u1, query: q}\n"
        "  - assistant: {text: ok}\n"
        "  - user: {event: u2, query: again}\n",
        encoding="utf-8",
    )
    digest = build_bundle(root).digest
    args = {
        "replay": ["--digests", str(tmp_path / "d")],
        "verify": ["--no-hash-seed"],
    }[command]
    assert main([command, str(path), "--provider", "gemini", *args]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{path}:5:5: $.steps[0].user: call 1: gemini: the request has no settings for "
        f"provider 'gemini' (bundle: {root}, sha256:{digest[7:19]})",
        f"prefixlock {command}: 1 error",
    ]
