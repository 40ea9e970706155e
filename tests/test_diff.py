"""``prefixlock diff``: tail append or prefix break at a JSON path, with its spec line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compiler import canonical
from compiler.cli import main
from compiler.diff import IDENTICAL, PREFIX_BREAK, TAIL_APPEND, compare_bodies, guess_provider
from compiler.jsondiff import MISSING, Difference, first_difference
from compiler.loader import load_yaml_file
from compiler.sources import SourceIndex

REPO = Path(__file__).resolve().parents[1]
INSTRUCTIONS = (REPO / "prompt/cursor/instructions.md").read_text(encoding="utf-8")
CC = {"type": "ephemeral"}


def anthropic(
    *texts: str, system: str = "You are a coding agent.", marker: int | None = None
) -> bytes:
    """An Anthropic body; ``marker``: index of the message whose block gets cache_control."""
    messages = []
    for i, text in enumerate(texts):
        block: dict[str, Any] = {"type": "text", "text": text}
        if i == marker:
            block["cache_control"] = CC
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": [block]})
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "system": [{"type": "text", "text": system}],
    }
    body["messages"] = messages
    body["cache_control"] = CC
    return canonical.dumpb(body)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(["diff", *argv])
    return code, capsys.readouterr().out.splitlines()


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# --- classification -----------------------------------------------------------------------


def test_tail_append_counts_the_new_items() -> None:
    comparison = compare_bodies("anthropic", anthropic("a"), anthropic("a", "b", "c"))
    assert (comparison.kind, comparison.appended) == (TAIL_APPEND, 2)


def test_a_moved_cache_marker_is_not_a_change() -> None:
    old, new = anthropic("a", "b", marker=0), anthropic("a", "b", marker=1)
    comparison = compare_bodies("anthropic", old, new)
    assert (comparison.kind, comparison.note) == (IDENTICAL, "only cache markers moved")
    assert compare_bodies("anthropic", old, old).kind == IDENTICAL


def test_a_rewritten_message_is_a_break_at_its_path() -> None:
    comparison = compare_bodies("anthropic", anthropic("a", "b"), anthropic("a", "B", "c"))
    assert comparison.kind == PREFIX_BREAK
    assert comparison.difference == Difference(("messages", 1, "content", 0, "text"), "b", "B")
    assert comparison.difference.path == "$.messages[1].content[0].text"


def test_a_shorter_history_is_a_break() -> None:
    comparison = compare_bodies("anthropic", anthropic("a", "b"), anthropic("a"))
    assert comparison.difference is not None
    assert (comparison.difference.path, comparison.difference.new) == ("$.messages[1]", MISSING)


def test_same_json_in_another_key_order_is_a_break_at_the_root() -> None:
    comparison = compare_bodies(
        "openai-chat", b'{"model":"m","messages":[]}', b'{"messages":[],"model":"m"}'
    )
    assert (comparison.kind, comparison.note) == (
        PREFIX_BREAK,
        "same JSON value, different bytes (key order or formatting)",
    )


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ({"a": 1, "b": 2}, {"a": 1}, "$.b"),
        ({"a": 1}, {"a": 1, "c": 3}, "$.c"),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, "$.a[2]"),
        ({"a": True}, {"a": 1}, "$.a"),
        ({"a": 1}, {"a": 1.0}, "$.a"),
        ({"a b": {"c": "x"}}, {"a b": {"c": "y"}}, '$["a b"].c'),
    ],
)
def test_first_difference(old: Any, new: Any, path: str) -> None:
    found = first_difference(old, new)
    assert found is not None and found.path == path
    assert first_difference(old, old) is None


@pytest.mark.parametrize(
    ("body", "provider"),
    [
        ({"contents": []}, "gemini"),
        ({"input": []}, "openai-responses"),
        ({"inferenceConfig": {}, "messages": []}, "bedrock-converse"),
        ({"messages": [], "prompt_cache_key": "k"}, "openai-chat"),
        ({"messages": [], "max_tokens": 1}, "anthropic"),
    ],
)
def test_provider_from_the_body_shape(body: dict[str, Any], provider: str) -> None:
    assert guess_provider(body) == provider
    assert guess_provider(body, Path("out/gemini/0001.json")) == "gemini"


# --- attribution --------------------------------------------------------------------------


def test_changed_instructions_point_at_their_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = INSTRUCTIONS.split("\n")
    lines[3] = lines[3].replace("fixed", "frozen")
    old = write(tmp_path / "old.json", anthropic("a", system=INSTRUCTIONS))
    new = write(tmp_path / "new.json", anthropic("a", "b", system="\n".join(lines)))
    monkeypatch.chdir(REPO)
    code, out = run(capsys, str(old), str(new))
    assert code == 1
    assert out == [
        "anthropic: PREFIX BREAK at $.system[0].text: old "
        "'… system message is fixed for the whole conversation.\\n- A req…' new "
        "'… system message is frozen for the whole conversation.\\n- A re…'",
        "  caused by prompt/cursor/instructions.md:4",
        "  invalidates 98.1% of the old body's bytes",
    ]
    assert run(capsys, str(old), str(new), "--allow-prefix-break")[0] == 0


def test_a_changed_tool_points_at_its_yaml_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    doc = load_yaml_file(REPO / "rules/tools.yaml")
    tools = [
        {"type": "function", "function": {"name": t["name"], "description": t["description"]}}
        for t in doc.value["tools"]
    ]
    old = {"model": "gpt-4.1", "tools": tools, "messages": []}
    new = canonical.loads(canonical.dumpb(old))
    new["tools"][2]["function"]["description"] += " More."
    comparison = compare_bodies("openai-chat", canonical.dumpb(old), canonical.dumpb(new))
    assert comparison.difference is not None
    assert comparison.difference.path == "$.tools[2].function.description"
    line = doc.location("$.tools[2].description").line
    source = SourceIndex(REPO).attribute("openai-chat", comparison.difference, new, old)
    assert source == f"rules/tools.yaml:{line}"


def test_runtime_text_points_at_the_template_literal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    template = "prompt/cursor/agent/runtime.md.j2"
    number = (REPO / template).read_text(encoding="utf-8").split("\n").index("<user_query>") + 1
    old = "<runtime>\n</runtime>\n\n<user_query>\nfix it\n</user_query>\n"
    new = old.replace("<user_query>\n", "<user_request>\n")
    found = SourceIndex(REPO).attribute("anthropic", Difference(("messages", 1), old, new), {})
    assert found == f"{template}:{number}"


# --- the command --------------------------------------------------------------------------


def test_diff_of_two_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = write(tmp_path / "anthropic" / "0001.json", anthropic("a"))
    two = write(tmp_path / "anthropic" / "0002.json", anthropic("a", "b"))
    assert run(capsys, str(one), str(two)) == (0, ["anthropic: tail append (+1 item)"])
    assert run(capsys, str(one), str(one)) == (0, ["anthropic: identical"])
    code, out = run(capsys, str(two), str(one), "--root", str(tmp_path))
    assert code == 1
    assert out[0] == (
        "anthropic: PREFIX BREAK at $.messages[1]: old "
        """'{"content":[{"text":"b","type":"text"}],"role":"assistant"}' new (absent)"""
    )


def test_diff_of_two_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bodies = [anthropic("a"), anthropic("a", "b"), anthropic("a", "b", "c")]
    for number, body in enumerate(bodies, start=1):
        write(tmp_path / "old" / "case" / "anthropic" / f"{number:04d}.json", body)
        changed = body.replace(b'"text":"b"', b'"text":"B"')
        write(tmp_path / "new" / "case" / "anthropic" / f"{number:04d}.json", changed)
    write(tmp_path / "new" / "case" / "anthropic" / "0004.json", anthropic("a", "B", "c", "d"))
    code, out = run(capsys, str(tmp_path / "old"), str(tmp_path / "new"), "--root", str(tmp_path))
    assert code == 1
    assert out[0].startswith("case/anthropic  (simulated cost vs no caching ")
    assert out[1:] == [
        "  0002-0003: PREFIX BREAK at $.messages[1].content[0].text: old 'b' new 'B'",
        "             invalidates 47.4% of the old body's bytes",  # 128 of 270 bytes
        "  0004: added",
        "compared 4 calls: 1 identical, 2 prefix break, 1 added",
    ]


def test_unreadable_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path / "bad.json", b"{not json")
    good = write(tmp_path / "good.json", anthropic("a"))
    assert main(["diff", str(bad), str(good), "--provider", "anthropic"]) == 2
    assert "bad.json: not JSON" in capsys.readouterr().err
    assert main(["diff", str(tmp_path), str(good)]) == 2
    assert "compare two files or two folders" in capsys.readouterr().err
    assert main(["diff", str(tmp_path / "missing.json"), str(good)]) == 2
    assert "cannot read" in capsys.readouterr().err
