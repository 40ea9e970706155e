"""Stored wire templates (issue 47 item 6): a worker that opens a conversation cold
serializes it from the bytes its records store, to the bytes a warm serializer sends.

The golden cases are written by one process and read by two others, each with its own
``PYTHONHASHSEED``; every projected request of every case, for every provider of its
root, is serialized by a fresh serializer from the stored templates and compared with
the same request serialized without them, and with a second (warm) serialize."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefixlock import providers
from prefixlock.core import canonical
from prefixlock.core.errors import CheckpointError, SerializationError
from prefixlock.core.model import MessageView, ModelRequest
from prefixlock.core.wire import assemble, derive
from prefixlock.runtime.conversation import Conversation
from prefixlock.runtime.failover import retarget
from prefixlock.runtime.history import History
from prefixlock.runtime.wirecheck import wire_problems
from prefixlock.store.contract import MemoryStore, Store
from prefixlock.store.records import FORMAT_SECTIONS, FORMAT_WIRE, decode_chain
from prefixlock.store.sqlite import SQLiteStore

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
GOLDEN = sorted((ROOT / "golden").glob("*/scenario.yaml"))
STORE_FILE = "checkpoints.sqlite"


def _write_golden(out: str, paths: list[str]) -> None:
    """Replay every golden case into a store of its own (run in a subprocess)."""
    from prefixlock.review.replay import replay
    from prefixlock.review.scenario import load_scenario

    bundles: dict[Any, Any] = {}
    for index, path in enumerate(paths):
        replay(load_scenario(path, bundles=bundles), workdir=Path(out) / str(index))


def _requests(history: History) -> Iterator[tuple[str, ModelRequest]]:
    """The longest request of each epoch (the last event's projection in it): together
    they hold every message of the history at its place."""
    last: dict[int, tuple[int, str]] = {}
    for event_id, info in history.events.items():
        if info.length and info.length >= last.get(info.epoch, (0, ""))[0]:
            last[info.epoch] = (info.length, event_id)
    for epoch in sorted(last):
        event_id = last[epoch][1]
        yield event_id, history.project(history.events[event_id])


def _mapped(provider: providers.Provider) -> list[int]:
    """Make ``provider`` note the index of every message it maps (encodes afresh)."""
    seen: list[int] = []
    original = provider._message_items

    def spy(message: Any, index: int, *rest: Any) -> Any:
        seen.append(index)
        return original(message, index, *rest)

    provider._message_items = spy  # type: ignore[method-assign]
    return seen


def _expected_mapped(provider: providers.Provider, request: ModelRequest) -> list[int]:
    """The messages a cold serialize must still map: those with a cache marker on them,
    and those whose templates were written under another frame (another cache policy
    state: the epoch's first turn)."""
    frame, markers = provider._frame_and_markers(request)
    out = []
    for index, message in enumerate(request.messages):
        stored = message.wire
        entry = None if stored is None else stored.wire.get(provider.name)
        if markers.get(index) or entry is None or entry[0] != frame.basis:
            out.append(index)
    return out


def cold_report(db: str, bundle_root: str | None = None) -> dict[str, Any]:
    """For the conversation in ``db``: per provider and request, the SHA-256 of the cold
    bytes, whether they equal the bytes without templates and a warm second serialize,
    and whether exactly the expected messages were mapped."""
    del bundle_root
    with SQLiteStore(db) as store:
        (cid,) = store.conversations()
        stored = store.load(cid)
        assert stored is not None
        cold = History.hydrate(stored)
        plain = History.hydrate(stored)
    for epoch in plain.epochs:
        for message in epoch:
            object.__setattr__(message, "wire", None)
    report: dict[str, Any] = {}
    for (event_id, request), (_, slow) in zip(_requests(cold), _requests(plain), strict=True):
        for settings in request.settings:
            name = settings.provider
            # As a call on that provider sends it: parts another provider produced (the
            # imported session's thinking) follow the failover rule.
            target, slow_target = retarget(request, name), retarget(slow, name)
            try:
                expected = providers.get(name).serialize(slow_target)
            except SerializationError:
                continue
            provider = providers.get(name)
            must_map = _expected_mapped(provider, target)
            seen = _mapped(provider)
            body = provider.serialize(target)
            report[f"{event_id}/{name}"] = {
                "sha256": hashlib.sha256(body).hexdigest(),
                "equal": body == expected,
                "warm_equal": provider.serialize(target) == body,
                # A request the failover rule rewrote holds new messages: which of them
                # are mapped is not this test's concern (the bytes are).
                "mapped_as_expected": seen == must_map if target is request else None,
                "stored": len(target.messages) - len(must_map),
            }
    return report


def _run(code: str, seed: str, *args: str) -> str:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=TESTS,
    )
    return done.stdout


@pytest.fixture(scope="module")
def golden_stores(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("golden-stores")
    code = "import sys, test_cold_wire as t; t._write_golden(sys.argv[1], sys.argv[2:])"
    _run(code, "7", str(out), *map(str, GOLDEN))
    return [out / str(index) / STORE_FILE for index in range(len(GOLDEN))]


def test_cold_bytes_equal_warm_bytes_for_every_golden_case_and_provider(
    golden_stores: list[Path],
) -> None:
    code = (
        "import json, sys, test_cold_wire as t; "
        "print(json.dumps([t.cold_report(p) for p in sys.argv[1:]]))"
    )
    reports = {
        seed: json.loads(_run(code, seed, *map(str, golden_stores))) for seed in ("0", "4242")
    }
    here = reports["0"]
    assert here == reports["4242"]  # the same bytes under every hash seed
    stored = 0
    for path, report in zip(GOLDEN, here, strict=True):
        assert report, path.parent.name
        for key, figures in report.items():
            assert figures["equal"], (path.parent.name, key)
            assert figures["warm_equal"], (path.parent.name, key)
            assert figures["mapped_as_expected"] is not False, (path.parent.name, key)
            stored += figures["stored"]
    assert stored > 1000  # the templates are used, not only present


# -- one conversation, every store --------------------------------------------------


def _play(conv: Conversation) -> None:
    from conv_helpers import user
    from prefixlock.runtime.tools import ToolCall, ToolResult

    conv.handle(user("u1", conversation=conv.id))
    for n in range(3):
        conv.assistant(
            text=f"step {n} \u00e9\u00e8 \u2014 " + "x" * 40,
            tool_calls=[ToolCall(f"c{n}", "read_file", {"path": f"src/m{n}.py"})],
        )
        conv.tool_results([ToolResult(f"c{n}", f"print('{n}')\n" * 20 + '"quoted" \\ done')])
    conv.assistant(text="done")
    conv.handle(user("u2", query="and now?", conversation=conv.id))


def _bundle() -> Any:
    from conv_helpers import example_bundle

    return example_bundle()


def _cold_equals_slow(store: Store, cid: str) -> int:
    """Open ``cid`` twice; serialize cold from the templates and without them; return
    how many messages came from templates (over all providers)."""
    bundle = _bundle()
    cold = Conversation.open(store, bundle, cid).request()
    plain = Conversation.open(store, bundle, cid).request()
    for message in plain.messages:
        object.__setattr__(message, "wire", None)
    used = 0
    for settings in cold.settings:
        provider = providers.get(settings.provider)
        seen = _mapped(provider)
        assert provider.serialize(cold) == providers.get(settings.provider).serialize(plain)
        used += len(cold.messages) - len(seen)
    return used


def test_sqlite_records_store_templates_and_hydration_uses_them(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        _play(Conversation.open(store, _bundle(), "conv-w"))
    with SQLiteStore(db) as store:
        stored = store.load("conv-w")
        assert stored is not None
        assert all(b'"format":%d' % FORMAT_WIRE in r for r in stored.records)
        assert _cold_equals_slow(store, "conv-w") > 0
        assert wire_problems(stored) == []


def test_postgres_records_store_templates_and_hydration_uses_them(postgres_url: str) -> None:
    from prefixlock.store.postgres import PostgresStore

    with PostgresStore(postgres_url) as store:
        _play(Conversation.open(store, _bundle(), "conv-pg"))
        assert _cold_equals_slow(store, "conv-pg") > 0


def test_records_without_templates_hydrate_the_slow_way_to_the_same_bytes() -> None:
    """Records written before format 6 (or by a writer with ``store_wire`` off) carry
    no templates: every message is mapped again, and the bytes are the same."""
    old, new = MemoryStore(), MemoryStore()
    writer = Conversation.open(old, _bundle(), "c")
    writer.store_wire = False
    _play(writer)
    _play(Conversation.open(new, _bundle(), "c"))
    stored_old, stored_new = old.load("c"), new.load("c")
    assert stored_old is not None and stored_new is not None
    assert all(b'"wire"' not in r for r in stored_old.records)
    assert max(canonical.loads(r)["format"] for r in stored_old.records) <= FORMAT_SECTIONS
    assert _cold_equals_slow(old, "c") == 0
    assert _cold_equals_slow(new, "c") > 0
    a = Conversation.open(old, _bundle(), "c").request()
    b = Conversation.open(new, _bundle(), "c").request()
    for settings in a.settings:
        assert providers.get(settings.provider).serialize(a) == providers.get(
            settings.provider
        ).serialize(b)


def test_the_fast_path_and_the_checked_path_read_a_wire_record_alike() -> None:
    from prefixlock.store.records import _decode_record_checked, _scan_record

    store = MemoryStore()
    conv = Conversation.open(store, _bundle(), "c")
    _play(conv)
    stored = store.load("c")
    assert stored is not None
    prev = canonical.sha256_hex(stored.root)
    for seq, data in enumerate(stored.records, start=1):
        fast = _scan_record(data, "c", seq, prev)
        checked = _decode_record_checked(data, "c", seq, prev)
        assert fast is not None and fast == checked and fast.wire == checked.wire, seq
        prev = canonical.sha256_hex(data)


# -- trust ------------------------------------------------------------------------------


def _wired_store() -> tuple[MemoryStore, list[bytes]]:
    store = MemoryStore()
    _play(Conversation.open(store, _bundle(), "c"))
    stored = store.load("c")
    assert stored is not None
    return store, list(stored.records)


def _rechained(root: bytes, records: list[bytes]) -> MemoryStore:
    """A store holding ``records`` with every ``prev`` recomputed: what a writer of the
    store who forges a record can make (the chain is unkeyed)."""
    store = MemoryStore()
    store.create_root("c", root)
    prev = canonical.sha256_hex(root)
    for seq, data in enumerate(records, start=1):
        value = canonical.loads(data)
        value["prev"] = prev
        data = canonical.dumpb(value)
        store.append("c", seq, value["event_id"], data)
        prev = canonical.sha256_hex(data)
    return store


def _forge(data: bytes, provider: str) -> bytes:
    """The record with ``provider``'s template of its last message telling a lie."""
    value = canonical.loads(data)
    template = value["wire"][provider][-1]
    template[1] = template[1].replace('"text"', '"text","forged":true', 1)
    if '"forged"' not in template[1]:
        template[-1] = template[-1] + " "
    return canonical.dumpb(value)


def test_a_changed_template_byte_breaks_the_chain() -> None:
    store, records = _wired_store()
    stored = store.load("c")
    assert stored is not None
    records[1] = _forge(records[1], "openai-chat")
    with pytest.raises(CheckpointError, match="record 3: hash chain broken"):
        decode_chain(stored.root, records, "c")


def test_integrity_finds_a_forged_template_hydration_would_take() -> None:
    store, records = _wired_store()
    stored = store.load("c")
    assert stored is not None
    index = next(i for i, r in enumerate(records) if b'"assistant"' in r and b'"wire"' in r)
    records[index] = _forge(records[index], "anthropic")
    forged = _rechained(stored.root, records)
    again = forged.load("c")
    assert again is not None
    problems = wire_problems(again)
    assert len(problems) == 1
    assert problems[0].startswith(f"conversation 'c' record {index + 1} message 'assistant:")
    assert problems[0].endswith("the anthropic wire template does not give the provider's bytes")
    assert wire_problems(stored) == []


def test_a_template_serves_only_its_own_list_and_place() -> None:
    store, _ = _wired_store()
    request = Conversation.open(store, _bundle(), "c").request()
    messages = list(request.messages)
    moved = ModelRequest(
        conversation_id=request.conversation_id,
        instructions=request.instructions,
        tools=request.tools,
        settings=request.settings,
        messages=MessageView(messages, len(messages)),  # another list: nothing is stored for it
        cache_hints=request.cache_hints,
        cache_key=request.cache_key,
    )
    provider = providers.get("openai-responses")
    seen = _mapped(provider)
    provider.serialize(moved)
    assert seen == list(range(len(messages)))


def test_derive_cuts_the_runs_the_parts_hold_and_assembles_back() -> None:
    parts = canonical.dumpb([{"text": "a" * 30 + '"q"\\', "type": "text"}])
    text = canonical.dumpb("a" * 30 + '"q"\\')
    fragment = b'{"role":"user","content":' + text + b"}"
    template = derive("", fragment, parts)
    assert template[0] == "" and template[1] == '{"role":"user","content":'
    assert parts[template[2] : template[3]] == text and template[4] == "}"
    assert assemble(template, parts, 0, len(parts)) == fragment
    assert assemble(["", "x", 0, len(parts) + 1, ""], parts, 0, len(parts)) is None


# -- the bench ---------------------------------------------------------------------------


def test_bench_cold_reports_cold_and_warm_per_provider_with_and_without_templates() -> None:
    from prefixlock.bench.cold import cold_bench, format_cold

    names = ["anthropic", "openai-chat"]
    report = cold_bench((8, 12), names, bundle=lambda _: _bundle(), repeats=1)
    assert report["bench"] == "prefixlock-cold"
    assert [run["messages"] for run in report["runs"]] == [8, 12]
    for run in report["runs"]:
        assert run["live_messages"] >= run["messages"]
        for kind in ("stored", "plain"):
            assert sorted(run[kind]["cold_ms"]) == names == sorted(run[kind]["warm_ms"])
            assert run[kind]["hydrated_retained_bytes"] > 0
        assert run["stored"]["stored_bytes"] > run["plain"]["stored_bytes"]
    assert report["target"]["value"] is None  # no 1,000-message run
    table = format_cold(report)
    assert "cold / warm serialize, ms (median)" in table and "  openai-chat " in table
    assert "without templates (format <= 4): cold, ms" in table


def test_bench_cold_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from prefixlock.cli.commands import main

    assert main(["bench", "--cold", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["format"] == "prefixlock.bench-cold/1"
    assert sorted(report["runs"][0]["stored"]["cold_ms"]) == sorted(providers.NAMES)


def test_store_wire_names_the_providers_whose_templates_are_stored() -> None:
    store = MemoryStore()
    conv = Conversation.open(store, _bundle(), "c")
    conv.store_wire = frozenset({"gemini"})
    _play(conv)
    stored = store.load("c")
    assert stored is not None
    assert {tuple(canonical.loads(r)["wire"]) for r in stored.records} == {("gemini",)}
    request = Conversation.open(store, _bundle(), "c").request()
    for name, expect_stored in (("gemini", True), ("anthropic", False)):
        provider = providers.get(name)
        seen = _mapped(provider)
        provider.serialize(request)
        assert (len(seen) < len(request.messages)) is expect_stored, name


def test_the_integrity_command_names_a_forged_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from prefixlock.cli.commands import main

    store, records = _wired_store()
    stored = store.load("c")
    assert stored is not None
    index = next(i for i, r in enumerate(records) if b'"assistant"' in r and b'"wire"' in r)
    records[index] = _forge(records[index], "gemini")
    forged = _rechained(stored.root, records).load("c")
    assert forged is not None
    db = tmp_path / "forged.db"
    with SQLiteStore(db) as target:
        target.create_root("c", forged.root)
        for seq, data in enumerate(forged.records, start=1):
            target.append("c", seq, canonical.loads(data)["event_id"], data)
    assert main(["integrity", str(db)]) == 1
    err = capsys.readouterr().err
    assert "the gemini wire template does not give the provider's bytes" in err
    assert err.endswith(f"prefixlock integrity: 1 problem(s) in {db}\n")
