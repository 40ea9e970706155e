"""Building the bundle (prefixlock.spec.bundle): validation of a whole spec root, parts, digests."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prefixlock.core import canonical
from prefixlock.core.errors import BuildError, Location, PrefixlockError, SpecErrors
from prefixlock.spec.build import (
    LOCK_FILE,
    MANIFEST,
    build_bundle,
    check_outputs,
    find_example_root,
    write_outputs,
)
from prefixlock.spec.bundle import Bundle

DATA = Path(__file__).resolve().parent / "data" / "specs"
MINIMAL = DATA / "minimal"
REPO = Path(__file__).resolve().parents[1]

RUNTIME_MAY_USE = "action_context, mode, open_files, query, selected_context, timestamp"
CONTEXT_MAY_USE = "environment, git, mcp, rules, skills, subagents, update"

Mutation = Callable[[Path], None]


def at(name: str, line: int) -> str:
    """How a template location prints (the format belongs to prefixlock.core.errors.Location)."""
    return str(Location(name, line))


def spec_root(tmp_path: Path, name: str = "spec") -> Path:
    root = tmp_path / name
    shutil.copytree(MINIMAL, root)
    return root


def edit(file: str, old: str, new: str) -> Mutation:
    def mutate(root: Path) -> None:
        path = root / file
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{old!r} not in {file}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")

    return mutate


def write(file: str, data: str | bytes) -> Mutation:
    def mutate(root: Path) -> None:
        (root / file).write_bytes(data.encode("utf-8") if isinstance(data, str) else data)

    return mutate


def delete(file: str) -> Mutation:
    def mutate(root: Path) -> None:
        (root / file).unlink()

    return mutate


def symlink_outside(file: str) -> Mutation:
    def mutate(root: Path) -> None:
        outside = root.parent / "outside.md"
        outside.write_text("secret\n", encoding="utf-8")
        (root / file).unlink()
        os.symlink(outside, root / file)

    return mutate


ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]\n"
    for prev, name in zip("abcdefg", "bcdefgh", strict=True)
)
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + ALIAS_BOMB


# (id, mutation, exact errors)
BROKEN: list[tuple[str, Mutation, list[str]]] = [
    (
        "yaml-syntax",
        edit("rules/tools.yaml", "  - name: edit_file", "  - name: [edit_file"),
        [
            "rules/tools.yaml:11:16: $: YAML syntax error: expected ',' or ']', but got ':'"
            " (while parsing a flow sequence at line 10, column 11)"
        ],
    ),
    (
        "duplicate-key",
        edit("rules/agent.yaml", "default_mode: agent", "default_mode: agent\nname: other"),
        ["rules/agent.yaml:6:1: $.name: duplicate key 'name' (first defined at line 2)"],
    ),
    (
        "schema-missing-key",
        edit("rules/tools.yaml", "    description: Read a file.\n", ""),
        ["rules/tools.yaml:2:5: $.tools[0]: missing required key 'description'"],
    ),
    (
        "schema-unknown-key",
        edit("rules/providers.yaml", "max_tokens: 4096}", "max_tokens: 4096, temperature: 0}"),
        [
            "rules/providers.yaml:3:59: $.providers.anthropic: unknown key 'temperature'"
            " (expected one of: max_tokens, model, options)"
        ],
    ),
    (
        "schema-type",
        edit("rules/providers.yaml", "max_tokens: 4096}", "max_tokens: lots}"),
        [
            "rules/providers.yaml:3:53: $.providers.anthropic.max_tokens:"
            " expected an integer, got a string"
        ],
    ),
    (
        "schema-cache-ttl",
        edit(
            "rules/providers.yaml",
            "max_tokens: 4096}",
            "max_tokens: 4096, options: {cache_ttl: hourly}}",
        ),
        [
            "rules/providers.yaml:3:80: $.providers.anthropic.options.cache_ttl:"
            " expected one of 5m, 1h, turn; got 'hourly'"
        ],
    ),
    (
        "duplicate-tool",
        edit("rules/tools.yaml", "  - name: edit_file", "  - name: read_file"),
        [
            "rules/tools.yaml:10:11: $.tools[1].name: duplicate tool name 'read_file'"
            " (also at $.tools[0])"
        ],
    ),
    (
        "alias-bomb",
        write("rules/rules.yaml", ALIAS_BOMB),
        [
            "rules/rules.yaml:4:36: $: expanding alias *c exceeds the limit of 10000 values"
            " produced by aliases in one file (a 'billion laughs' document?)"
        ],
    ),
    (
        "non-utf8-yaml",
        write("rules/skills.yaml", b"skills:\n  - name: pdf\n    description: \xff\n"),
        [
            "rules/skills.yaml:3:18: invalid UTF-8: byte 0xff at byte offset 39 cannot be"
            " decoded (files must be UTF-8)"
        ],
    ),
    (
        "non-utf8-instructions",
        write("prompt/mini/instructions.md", b"You are\nMini \xe9.\n"),
        [
            "prompt/mini/instructions.md:2:6: invalid UTF-8: byte 0xe9 at byte offset 13"
            " cannot be decoded (files must be UTF-8)"
        ],
    ),
    (
        "bom",
        write("prompt/mini/instructions.md", b"\xef\xbb\xbfYou are Mini.\n"),
        [
            "prompt/mini/instructions.md:1:1: file starts with a UTF-8 byte order mark (BOM);"
            " spec files are UTF-8 without a BOM (save it without one)"
        ],
    ),
    (
        "carriage-return",
        write("prompt/mini/agent/runtime.md.j2", "{{ mode.reminder }}\r\n{{ query }}\r\n"),
        [
            "prompt/mini/agent/runtime.md.j2:1:20: carriage return (\\r) found:"
            " line endings must be \\n (2 carriage returns in this file)"
        ],
    ),
    (
        "template-syntax",
        write("prompt/mini/agent/runtime.md.j2", "{% if query %}\n\n{{ query }\n{% endif %}\n"),
        [f"{at('prompt/mini/agent/runtime.md.j2', 3)}: template syntax error: unexpected '}}'"],
    ),
    (
        "runtime-uses-conversation-variable",
        edit(
            "prompt/mini/agent/runtime.md.j2",
            "{{ query }}",
            "{{ query }}\n{% for r in rules %}{{ r.body }}{% endfor %}",
        ),
        [
            f"{at('prompt/mini/agent/runtime.md.j2', 3)}: runtime template uses"
            " conversation-level variable 'rules'"
            f" (runtime templates may use only: {RUNTIME_MAY_USE})"
        ],
    ),
    (
        "context-uses-turn-variable",
        edit("prompt/mini/context.md.j2", "</context>", "{{ timestamp }}\n</context>"),
        [
            f"{at('prompt/mini/context.md.j2', 11)}: request-context template uses"
            " turn-level variable 'timestamp'"
            f" (request-context templates may use only: {CONTEXT_MAY_USE})"
        ],
    ),
    (
        "unknown-variable",
        edit("prompt/mini/ask/runtime.md.j2", "{{ query }}", "{{ user }}"),
        [
            f"{at('prompt/mini/ask/runtime.md.j2', 3)}: runtime template uses unknown"
            f" variable 'user' (did you mean 'query'? runtime templates may use only:"
            f" {RUNTIME_MAY_USE})"
        ],
    ),
    (
        "sandbox-escape",
        edit("prompt/mini/agent/runtime.md.j2", "{{ query }}", "{{ ''.__class__.__mro__ }}"),
        [
            f"{at('prompt/mini/agent/runtime.md.j2', 2)}: template uses attribute '__class__'"
            " (names starting with '_' are refused)",
            f"{at('prompt/mini/agent/runtime.md.j2', 2)}: template uses attribute '__mro__'"
            " (names starting with '_' are refused)",
        ],
    ),
    (
        "missing-instructions",
        delete("prompt/mini/instructions.md"),
        [
            "rules/agent.yaml:3:15: $.instructions:"
            " file 'prompt/mini/instructions.md' does not exist"
        ],
    ),
    (
        "path-leaves-root",
        edit("rules/agent.yaml", "prompt/mini/instructions.md", "../outside.md"),
        [
            "rules/agent.yaml:3:15: $.instructions: expected a relative path inside the spec"
            " root (forward slashes, no leading '/', no '..'), got '../outside.md'"
        ],
    ),
    (
        "path-absolute",
        edit("rules/agent.yaml", "prompt/mini/instructions.md", "/etc/hostname"),
        [
            "rules/agent.yaml:3:15: $.instructions: expected a relative path inside the spec"
            " root (forward slashes, no leading '/', no '..'), got '/etc/hostname'"
        ],
    ),
    (
        "path-symlink-leaves-root",
        symlink_outside("prompt/mini/instructions.md"),
        [
            "rules/agent.yaml:3:15: $.instructions: path 'prompt/mini/instructions.md'"
            " leads outside the spec root (symbolic link)"
        ],
    ),
    (
        "spec-file-symlink-leaves-root",
        symlink_outside("rules/rules.yaml"),
        ["rules/rules.yaml: file leads outside the spec root (symbolic link)"],
    ),
    (
        "required-spec-file-symlink-leaves-root",
        symlink_outside("rules/tools.yaml"),
        ["rules/tools.yaml: file leads outside the spec root (symbolic link)"],
    ),
    (
        "path-is-a-folder",
        edit("rules/agent.yaml", "prompt/mini/instructions.md", "prompt/mini"),
        ["rules/agent.yaml:3:15: $.instructions: path 'prompt/mini' is not a file"],
    ),
    (
        "missing-runtime-template",
        delete("prompt/mini/ask/runtime.md.j2"),
        [
            "rules/agent.yaml:8:14: $.modes.ask.runtime:"
            " file 'prompt/mini/ask/runtime.md.j2' does not exist"
        ],
    ),
    (
        "mode-without-runtime",
        edit("rules/agent.yaml", "    runtime: prompt/mini/ask/runtime.md.j2\n", ""),
        ["rules/agent.yaml:8:5: $.modes.ask: missing required key 'runtime'"],
    ),
    (
        "default-mode-not-a-mode",
        edit("rules/agent.yaml", "default_mode: agent", "default_mode: debug"),
        [
            "rules/agent.yaml:5:15: $.default_mode: default mode 'debug' is not one of the"
            " modes (expected one of: agent, ask)"
        ],
    ),
    (
        "required-file-missing",
        delete("rules/tools.yaml"),
        ["rules/tools.yaml: required file is missing"],
    ),
    (
        "empty-agent",
        write("rules/agent.yaml", ""),
        ["rules/agent.yaml:1:1: $: expected an object, got null"],
    ),
]


def build_errors(root: Path) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        build_bundle(root)
    return [str(e) for e in info.value.errors]


@pytest.mark.parametrize(
    ("mutation", "expected"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN]
)
def test_broken_spec_root_is_refused_with_exact_errors(
    tmp_path: Path, mutation: Mutation, expected: list[str]
) -> None:
    root = spec_root(tmp_path)
    mutation(root)
    assert build_errors(root) == expected


def test_errors_of_every_file_are_reported_together(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    edit("rules/agent.yaml", "default_mode: agent", "default_mode: debug")(root)
    edit("rules/tools.yaml", "    description: Read a file.\n", "")(root)
    edit("prompt/mini/agent/runtime.md.j2", "{{ query }}", "{{ rules }}")(root)
    edit("prompt/mini/context.md.j2", "</context>", "{{ mode }}\n</context>")(root)
    delete("prompt/mini/instructions.md")(root)
    write("rules/skills.yaml", "skills: [\n")(root)
    assert build_errors(root) == [
        f"{at('prompt/mini/agent/runtime.md.j2', 2)}: runtime template uses conversation-level"
        f" variable 'rules' (runtime templates may use only: {RUNTIME_MAY_USE})",
        f"{at('prompt/mini/context.md.j2', 11)}: request-context template uses turn-level"
        f" variable 'mode' (request-context templates may use only: {CONTEXT_MAY_USE})",
        "rules/agent.yaml:3:15: $.instructions: file 'prompt/mini/instructions.md' does not exist",
        "rules/agent.yaml:5:15: $.default_mode: default mode 'debug' is not one of the modes"
        " (expected one of: agent, ask)",
        "rules/skills.yaml:2:1: $: YAML syntax error: expected the node content, but found"
        " '<stream end>' (while parsing a flow node at line 2, column 1)",
        "rules/tools.yaml:2:5: $.tools[0]: missing required key 'description'",
    ]


def test_spec_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"^spec root '.*nope' is not a folder$"):
        build_bundle(tmp_path / "nope")


# --- the bundle ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle() -> Bundle:
    return build_bundle(MINIMAL)


def test_bundle_holds_the_compiled_specs(bundle: Bundle) -> None:
    assert bundle.agent == "mini"
    assert bundle.instructions == (MINIMAL / "prompt/mini/instructions.md").read_text("utf-8")
    assert [t.name for t in bundle.tools] == ["edit_file", "mcp_call", "read_file"]
    assert [s.provider for s in bundle.settings] == ["anthropic", "openai-responses"]
    assert bundle.settings[1].options == '{"reasoning":{"effort":"low"}}'
    assert [m.name for m in bundle.modes] == ["agent", "ask"]
    assert bundle.default_mode == "agent"
    assert bundle.mode("ask").reminder == "You are in ask mode. Only read.\n"
    assert bundle.mode("ask").runtime.name == "prompt/mini/ask/runtime.md.j2"
    assert bundle.context_template.name == "prompt/mini/context.md.j2"


def test_tool_parameters_are_canonical_json(bundle: Bundle) -> None:
    read_file = bundle.tools[2]
    assert read_file.parameters == (
        '{"additionalProperties":false,"properties":{"path":{"description":"The file to read.",'
        '"type":"string"}},"required":["path"],"type":"object"}'
    )
    assert bundle.tool_prefix_json() == canonical.dumps([t.to_json() for t in bundle.tools])
    assert bundle.part("tools.json").data == bundle.tool_prefix_json().encode("utf-8")


def test_defaults_hold_the_conversation_level_specs(bundle: Bundle) -> None:
    assert sorted(bundle.defaults) == ["mcp", "rules", "skills", "subagents"]
    assert [r["name"] for r in bundle.defaults["rules"]] == ["style", "tests"]
    assert bundle.defaults["skills"][0]["path"] == ".cursor/skills/pdf/SKILL.md"
    assert bundle.defaults["subagents"][0]["name"] == "explorer"
    assert [s["name"] for s in bundle.defaults["mcp"]["servers"]] == ["tickets"]
    assert bundle.part("context-defaults.json").data == canonical.dumpb(dict(bundle.defaults))


def test_missing_default_files_are_empty(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    for name in ("rules", "skills", "subagents", "mcp"):
        (root / "rules" / f"{name}.yaml").unlink()
    defaults = build_bundle(root).defaults
    assert dict(defaults) == {"rules": [], "skills": [], "subagents": [], "mcp": {"servers": []}}


def test_unknown_mode_is_refused(bundle: Bundle) -> None:
    with pytest.raises(PrefixlockError) as info:
        bundle.mode("debug")
    assert str(info.value) == "unknown mode 'debug' (modes: agent, ask)"


def test_parts_are_sorted_and_pinned_by_the_manifest(bundle: Bundle) -> None:
    names = [p.name for p in bundle.parts]
    assert names == [
        "context-defaults.json",
        "instructions.md",
        "modes.json",
        "settings.json",
        "templates/prompt/mini/agent/runtime.md.j2",
        "templates/prompt/mini/ask/runtime.md.j2",
        "templates/prompt/mini/context.md.j2",
        "tools.json",
    ]
    listed = [{"name": p.name, "sha256": p.sha256, "size": p.size} for p in bundle.parts]
    assert dict(bundle.manifest) == {
        "format": 1,
        "agent": "mini",
        "digest": bundle.digest,
        "parts": listed,
        "tools": ["edit_file", "mcp_call", "read_file"],
    }
    assert bundle.digest == canonical.digest(listed)
    assert bundle.digest.startswith("sha256:")


def test_template_parts_are_the_sources(bundle: Bundle) -> None:
    source = (MINIMAL / "prompt/mini/ask/runtime.md.j2").read_bytes()
    assert bundle.part("templates/prompt/mini/ask/runtime.md.j2").data == source


def test_modes_part(bundle: Bundle) -> None:
    assert canonical.loads(bundle.part("modes.json").data) == {
        "default_mode": "agent",
        "modes": [
            {
                "name": "agent",
                "reminder": "You are in agent mode.\n",
                "template": "templates/prompt/mini/agent/runtime.md.j2",
            },
            {
                "name": "ask",
                "reminder": "You are in ask mode. Only read.\n",
                "template": "templates/prompt/mini/ask/runtime.md.j2",
            },
        ],
    }


def test_every_mode_sees_the_same_tool_prefix(bundle: Bundle) -> None:
    """Tools are mode-independent: a mode switch never changes the tool list."""
    from prefixlock.runtime.conversation import Conversation
    from prefixlock.runtime.request import AgentRunRequest
    from prefixlock.store.contract import MemoryStore

    conv = Conversation.open(MemoryStore(), bundle, "conv-modes")
    requests = [
        conv.handle(
            AgentRunRequest.from_value(
                {
                    "conversation_id": "conv-modes",
                    "event_id": f"u{i}",
                    "kind": "user",
                    "mode": mode.name,
                    "query": f"q{i}",
                }
            )
        )
        for i, mode in enumerate(bundle.modes)
    ]
    prefixes = {canonical.dumps([t.to_json() for t in r.tools]) for r in requests}
    assert prefixes == {bundle.tool_prefix_json()}
    assert {r.instructions for r in requests} == {bundle.instructions}


def test_rendering_through_the_bundle(bundle: Bundle) -> None:
    mode = bundle.mode("ask")
    out = mode.runtime.render(
        {
            "query": "why?",
            "mode": {"name": mode.name, "reminder": mode.reminder},
            "selected_context": [],
            "open_files": [],
            "action_context": {},
            "timestamp": None,
        }
    )
    assert out == "You are in ask mode. Only read.\n(read only)\nwhy?\n"


# --- determinism --------------------------------------------------------------------------

FILES_OF_MINIMAL = sorted(
    p.relative_to(MINIMAL).as_posix() for p in MINIMAL.rglob("*") if p.is_file()
)


def copy_in_order(root: Path, order: list[str]) -> None:
    for name in order:
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes((MINIMAL / name).read_bytes())


def test_digest_ignores_file_order_and_location_on_disk(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "deeper" / "b"
    copy_in_order(first, FILES_OF_MINIMAL)
    copy_in_order(second, list(reversed(FILES_OF_MINIMAL)))
    one, two = build_bundle(first), build_bundle(second)
    assert one.digest == two.digest == build_bundle(MINIMAL).digest
    assert [(p.name, p.data) for p in one.parts] == [(p.name, p.data) for p in two.parts]


def test_digest_ignores_yaml_order_of_tools_and_modes(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    tools = root / "rules/tools.yaml"
    text = tools.read_text("utf-8")
    head, *items = text.split("  - name: ")
    tools.write_text(head + "".join("  - name: " + i for i in reversed(items)), "utf-8")
    assert build_bundle(root).digest == build_bundle(MINIMAL).digest


def test_digest_changes_with_a_tool_description(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    edit("rules/tools.yaml", "Read a file.", "Read one file.")(root)
    assert build_bundle(root).digest != build_bundle(MINIMAL).digest


# --- writing and checking -----------------------------------------------------------------


def tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_write_outputs_writes_parts_manifest_and_lock(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    bundle = build_bundle(root)
    write_outputs(bundle, root, root / "build")
    written = tree(root / "build")
    assert sorted(written) == sorted([p.name for p in bundle.parts] + [MANIFEST])
    for part in bundle.parts:
        assert written[part.name] == part.data
    lock = (root / LOCK_FILE).read_bytes()
    assert lock == written[MANIFEST] == canonical.dumps_pretty(dict(bundle.manifest)).encode()
    assert lock.endswith(b"}\n")
    assert check_outputs(bundle, root, root / "build") == []
    # nothing else is left next to the outputs
    assert sorted(p.name for p in root.iterdir()) == ["build", LOCK_FILE, "prompt", "rules"]


def test_rewrite_replaces_stale_files(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    bundle = build_bundle(root)
    write_outputs(bundle, root, root / "build")
    (root / "build" / "stale.txt").write_text("old")
    write_outputs(bundle, root, root / "build")
    assert "stale.txt" not in tree(root / "build")


def test_check_outputs_names_what_differs(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    write_outputs(build_bundle(root), root, root / "build")
    edit("rules/tools.yaml", "Read a file.", "Read one file.")(root)
    (root / "build" / "instructions.md").unlink()
    (root / "build" / "extra.json").write_text("{}")
    bundle = build_bundle(root)
    assert check_outputs(bundle, root, None) == ["prefixlock.lock differs: tools.json changed"]
    assert check_outputs(bundle, root, root / "build") == [
        "prefixlock.lock differs: tools.json changed",
        "extra.json is not part of the bundle",
        "instructions.md is missing",
        "manifest.json differs",
        "tools.json differs",
    ]
    assert check_outputs(bundle, root, tmp_path / "elsewhere") == [
        "prefixlock.lock differs: tools.json changed",
        "elsewhere/ is missing",
    ]
    (root / LOCK_FILE).unlink()
    assert check_outputs(bundle, root, None) == ["prefixlock.lock is missing"]


def test_failed_write_keeps_the_earlier_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import prefixlock.spec.outputs

    root = spec_root(tmp_path)
    write_outputs(build_bundle(root), root, root / "build")
    before_out, before_lock = tree(root / "build"), (root / LOCK_FILE).read_bytes()
    edit("rules/tools.yaml", "Read a file.", "Read one file.")(root)
    bundle = build_bundle(root)

    calls = []

    def failing_write(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    monkeypatch.setattr(prefixlock.spec.outputs, "_write_file", failing_write)
    with pytest.raises(OSError, match="No space left"):
        write_outputs(bundle, root, root / "build")
    assert tree(root / "build") == before_out
    assert (root / LOCK_FILE).read_bytes() == before_lock
    assert sorted(p.name for p in root.iterdir()) == ["build", LOCK_FILE, "prompt", "rules"]


def test_a_lock_that_cannot_be_written_keeps_the_earlier_outputs(tmp_path: Path) -> None:
    """A lock file that cannot be replaced (here a folder in its place) fails the build
    before the output folder changes: never a new build beside an old lock."""
    root = spec_root(tmp_path)
    write_outputs(build_bundle(root), root, root / "build")
    before_out = tree(root / "build")
    (root / LOCK_FILE).unlink()
    (root / LOCK_FILE).mkdir()
    edit("rules/tools.yaml", "Read a file.", "Read one file.")(root)
    with pytest.raises(BuildError) as raised:
        write_outputs(build_bundle(root), root, root / "build")
    assert str(raised.value) == (
        f"{str(root / LOCK_FILE)!r} is a folder, not a lock file: remove it"
    )
    assert tree(root / "build") == before_out
    assert sorted(p.name for p in root.iterdir()) == ["build", LOCK_FILE, "prompt", "rules"]


def test_a_lock_folder_that_refuses_the_temporary_file_names_the_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The error names the lock file, not the temporary file beside it."""
    import prefixlock.core.atomic

    root = spec_root(tmp_path)
    real = prefixlock.core.atomic.tempfile.mkstemp

    def mkstemp(prefix: str, dir: Path) -> tuple[int, str]:
        if prefix == f".{LOCK_FILE}.":
            raise PermissionError(1, "Operation not permitted", f"{dir}/{prefix}x1")
        return real(prefix=prefix, dir=dir)

    monkeypatch.setattr(prefixlock.core.atomic.tempfile, "mkstemp", mkstemp)
    with pytest.raises(BuildError) as raised:
        write_outputs(build_bundle(root), root, root / "build")
    assert str(raised.value) == (f"cannot write {str(root / LOCK_FILE)!r}: Operation not permitted")
    assert sorted(p.name for p in root.iterdir()) == ["prompt", "rules"]


def test_a_failed_lock_rename_puts_the_earlier_outputs_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lock is renamed into place last; if that rename fails, the earlier output
    folder goes back and the temporary lock is removed."""
    import prefixlock.spec.outputs

    root = spec_root(tmp_path)
    write_outputs(build_bundle(root), root, root / "build")
    before_out, before_lock = tree(root / "build"), (root / LOCK_FILE).read_bytes()
    edit("rules/tools.yaml", "Read a file.", "Read one file.")(root)
    bundle = build_bundle(root)
    real_replace = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst).name == LOCK_FILE:
            raise OSError(30, "Read-only file system")
        real_replace(src, dst)

    monkeypatch.setattr(prefixlock.spec.outputs.os, "replace", replace)
    with pytest.raises(OSError, match="Read-only"):
        write_outputs(bundle, root, root / "build")
    monkeypatch.undo()
    assert tree(root / "build") == before_out
    assert (root / LOCK_FILE).read_bytes() == before_lock
    assert sorted(p.name for p in root.iterdir()) == ["build", LOCK_FILE, "prompt", "rules"]


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (".", "must not be the spec root or contain it"),
        ("..", "must not be the spec root or contain it"),
        ("rules/build", "must not be inside rules/"),
        ("prompt", "must not be inside prompt/"),
    ],
)
def test_output_folder_may_not_clobber_specs(tmp_path: Path, out: str, message: str) -> None:
    root = spec_root(tmp_path)
    with pytest.raises(BuildError, match=message):
        write_outputs(build_bundle(root), root, root / out)
    assert not (root / LOCK_FILE).exists()


def test_foreign_output_folder_is_not_replaced(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    (root / "build").mkdir()
    (root / "build" / "notes.txt").write_text("mine")
    with pytest.raises(BuildError) as info:
        write_outputs(build_bundle(root), root, root / "build")
    assert str(info.value) == (
        f"refusing to replace {str(root / 'build')!r}: it is not empty and holds no"
        " manifest.json of an earlier build"
    )
    assert (root / "build" / "notes.txt").read_text() == "mine"


# --- the project's own example ------------------------------------------------------------


def test_example_root_is_found() -> None:
    root = find_example_root()
    assert (root / "rules" / "agent.yaml").is_file()


def test_project_example_builds() -> None:
    bundle = build_bundle(REPO)
    assert {"agent", "ask", "plan", "debug"} <= {m.name for m in bundle.modes}
    assert len(bundle.tools) >= 10
    assert "mcp_call" in [t.name for t in bundle.tools]
    assert len(bundle.instructions.encode("utf-8")) > 2000


def test_project_lock_file_is_up_to_date() -> None:
    if not (REPO / LOCK_FILE).exists():
        pytest.skip("the repository has no prefixlock.lock yet (run `prefixlock build`)")
    assert check_outputs(build_bundle(REPO), REPO, None) == []


def test_example_root_is_the_package_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import prefixlock

    package = tmp_path / "site-packages" / "prefixlock"
    (package / "_example" / "rules").mkdir(parents=True)
    (package / "_example" / "prompt").mkdir()
    (package / "_example" / "rules" / "agent.yaml").write_text("name: x\n")
    monkeypatch.setattr(prefixlock, "__file__", str(package / "__init__.py"))
    assert find_example_root() == (package / "_example").resolve()
    shutil.rmtree(package / "_example")
    with pytest.raises(BuildError, match="the bundled example spec root is not installed"):
        find_example_root()


def test_checkout_example_links_to_the_top_level_spec_root() -> None:
    assert find_example_root() == REPO
    assert (REPO / "compiler" / "_example" / "rules").resolve() == REPO / "rules"
    assert (REPO / "compiler" / "_example" / "prompt").resolve() == REPO / "prompt"


def test_check_names_parts_added_and_removed_and_unreadable_locks(tmp_path: Path) -> None:
    root = spec_root(tmp_path)
    bundle = build_bundle(root)
    write_outputs(bundle, root, root / "build")
    lock = json.loads((root / LOCK_FILE).read_text(encoding="utf-8"))
    lock["parts"] = [p for p in lock["parts"] if p["name"] != "settings.json"]
    lock["parts"].append({"name": "old.json", "sha256": "0" * 64, "size": 1})
    (root / LOCK_FILE).write_text(json.dumps(lock), encoding="utf-8")
    assert check_outputs(bundle, root, None) == [
        "prefixlock.lock differs: old.json removed, settings.json added"
    ]
    (root / LOCK_FILE).write_text("not json", encoding="utf-8")
    assert check_outputs(bundle, root, None) == [
        "prefixlock.lock differs: it is not a lock file prefixlock can read"
    ]


def test_misnamed_and_stray_spec_files_are_errors(tmp_path: Path) -> None:
    root = tmp_path / "spec"
    shutil.copytree(MINIMAL, root)
    (root / "rules" / "subagents.yaml").rename(root / "rules" / "subagents.yml")
    (root / "rules" / "mytools.yaml").write_text("tools: []\n", encoding="utf-8")
    (root / "rules" / "README.md").write_text("notes\n", encoding="utf-8")
    (root / "prompt" / "mini" / "review").mkdir()
    (root / "prompt" / "mini" / "review" / "runtime.md.j2").write_text("x\n", encoding="utf-8")
    (root / "prompt" / "mini" / "instruction.md").write_text("x\n", encoding="utf-8")
    with pytest.raises(SpecErrors) as info:
        build_bundle(root)
    assert [str(e) for e in info.value.errors] == [
        "prompt/mini/instruction.md: not used by rules/agent.yaml "
        "(did you mean 'prompt/mini/instructions.md'?)",
        "prompt/mini/review/runtime.md.j2: not used by rules/agent.yaml "
        "(the runtime template of a mode 'review' that it does not declare)",
        "rules/mytools.yaml: not a spec file (did you mean 'rules/tools.yaml'?)",
        "rules/subagents.yml: not a spec file (did you mean 'rules/subagents.yaml'?)",
    ]
