"""``prefixlock diff``: tail append or prefix break at a JSON path, with its spec line."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.providers import NAMES
from prefixlock.review.compare import (
    IDENTICAL,
    PREFIX_BREAK,
    TAIL_APPEND,
    block_pairs,
    compare_bodies,
    explanation,
    guess_provider,
)
from prefixlock.review.diff import revisions
from prefixlock.review.jsondiff import MISSING, Difference, first_difference
from prefixlock.review.sources import SourceIndex
from prefixlock.spec.loader import load_yaml_file

REPO = Path(__file__).resolve().parents[1]
INSTRUCTIONS = (REPO / "prompt/cursor/instructions.md").read_text(encoding="utf-8")
CC = {"type": "ephemeral"}


ROOT_CONSEQUENCE = (
    "every new conversation starts a new cached prefix (the old one goes cold fleet-wide); "
    "running conversations keep their root and their cache"
)
CONTENT_LINE = (
    "rendered-content change: only messages rendered from now on differ; running "
    "conversations keep their cache"
)


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
        ({"model": "claude-sonnet-5-5", "messages": []}, "anthropic"),
        ({"anthropic_version": "bedrock-2023-05-31", "messages": []}, "bedrock-anthropic"),
        # the Messages-API endpoint on Bedrock (endpoint: mantle): a Bedrock model id
        ({"model": "anthropic.claude-sonnet-5-5", "messages": []}, "bedrock-anthropic"),
        ({"model": "us.anthropic.claude-opus-5-v1:0", "messages": []}, "bedrock-anthropic"),
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
        "  invalidates 98.7% of the old body's prefix (6253 of 6336 bytes, cache markers aside)",
        f"deployment impact: root change at prompt/cursor/instructions.md:4: {ROOT_CONSEQUENCE}",
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
    assert run(capsys, str(one), str(two)) == (
        0,
        ["anthropic: tail append (+1 item)", f"deployment impact: {CONTENT_LINE}"],
    )
    assert run(capsys, str(one), str(one)) == (
        0,
        ["anthropic: identical", "deployment impact: none"],
    )
    # a break inside the history is rendered content: exit 0, unless --strict
    assert run(capsys, str(two), str(one), "--root", str(tmp_path))[0] == 0
    code, out = run(capsys, str(two), str(one), "--root", str(tmp_path), "--strict")
    assert code == 1
    assert out[-1] == f"deployment impact: {CONTENT_LINE}"
    assert out[0] == (
        "anthropic: PREFIX BREAK at $.messages[1]: old "
        """'{"content":[{"text":"b","type":"text"}],"role":"assistant"}' new (absent)"""
    )


def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    assert len({key for key, _ in pairs}) == len(pairs), pairs
    return dict(pairs)


def test_json_of_two_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = write(tmp_path / "one.json", anthropic("a", "b"))
    two = write(tmp_path / "two.json", anthropic("a", "B"))
    code, lines = run(capsys, str(one), str(two), "--json", "--root", str(tmp_path), "--strict")
    assert code == 1
    assert json.loads(lines[0], object_pairs_hook=no_duplicates) == {
        "format": "prefixlock.diff/1",
        "changed_parts": None,
        "stale_golden": [],
        "old_stale_golden": [],
        "old": {"given": str(one), "kind": "file", "path": str(one)},
        "new": {"given": str(two), "kind": "file", "path": str(two)},
        "provider": "anthropic",
        "verdict": "prefix break",
        "impact": "rendered-content change",
        "path": "$.messages[1].content[0].text",
        "old_value": "'b'",
        "new_value": "'B'",
        "source": None,
        "invalidated": 0.5494,  # 128 of 233 bytes, as in the folder test's call 2
        "invalidated_bytes": 128,
        "old_bytes": 233,
    }


def test_diff_of_two_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bodies = [anthropic("a"), anthropic("a", "b"), anthropic("a", "b", "c")]
    for number, body in enumerate(bodies, start=1):
        write(tmp_path / "old" / "case" / "anthropic" / f"{number:04d}.json", body)
        changed = body.replace(b'"text":"b"', b'"text":"B"')
        write(tmp_path / "new" / "case" / "anthropic" / f"{number:04d}.json", changed)
    write(tmp_path / "new" / "case" / "anthropic" / "0004.json", anthropic("a", "B", "c", "d"))
    args = [str(tmp_path / "old"), str(tmp_path / "new"), "--root", str(tmp_path)]
    assert run(capsys, *args)[0] == 0  # rendered content only
    code, out = run(capsys, *args, "--strict")
    assert code == 1
    # Below Sonnet's 1,024-token minimum nothing is cached: a call costs its tokens,
    # ceil(UTF-8 bytes / 4) per block: 19, 26, 33 (and 40 for the added fourth call).
    # Without the 37 bytes of the top-level cache_control, call 2's old body is 233 bytes;
    # from the differing "b" on, 128 of them no longer match (183 of 288 in call 3).
    assert out == [
        "case/anthropic  (simulated cost vs no caching 100.0% -> 100.0%;"
        " cost 78.00 -> 118.00, +40.00 (+51.3%))",
        "  0002-0003: PREFIX BREAK at $.messages[1].content[0].text: old 'b' new 'B'",
        "             invalidates 54.9% of the old body's prefix (128 of 233 bytes,"
        " cache markers aside)",
        "             up to 63.5% in call 0003",
        "  0004: added",
        "",
        f"old: {tmp_path / 'old'}",
        f"new: {tmp_path / 'new'}",
        "case  provider    calls  unchanged  tail-only  breaks  invalidated       cost delta",
        "case  anthropic  3 -> 4          1          0       2        63.5%  +40.00 (+51.3%)",
        "compared 4 calls: 1 unchanged, 2 prefix break, 1 added",
        f"deployment impact: {CONTENT_LINE}",
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
    broken = write(tmp_path / "new" / "case" / "anthropic" / "0001.json", b"{not json")
    write(tmp_path / "old" / "case" / "anthropic" / "0001.json", anthropic("a"))
    assert main(["diff", str(tmp_path / "old"), str(tmp_path / "new")]) == 2
    assert capsys.readouterr().err.startswith(f"prefixlock diff: {broken}: not JSON (")


# --- git revisions and the working tree ---------------------------------------------------

#: A system text whose block is exactly 4,096 estimated tokens: the block's canonical JSON
#: {"text":"s…s","type":"text"} is 25 + 16,359 = 16,384 bytes.
BIG = "s" * 16_359
LONG = "b" * 16_359  # likewise a 4,096-token message block


def wire(*texts: str, system: str = BIG) -> bytes:
    """An Anthropic body in the wire's key order (model, max_tokens, system, messages,
    cache_control), so byte prefixes mean what they mean on the wire."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": t}]}
        for i, t in enumerate(texts)
    ]
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "system": [{"type": "text", "text": system}],
        "messages": messages,
        "cache_control": CC,
    }
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    identity = ("-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false")
    git(repo, *identity, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def put(repo: Path, files: dict[str, bytes | None]) -> None:
    """Write (or, for None, delete) files below ``repo``."""
    for name, data in files.items():
        if data is None:
            (repo / name).unlink()
        else:
            write(repo / name, data)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository, the current directory."""
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    monkeypatch.chdir(root)
    return root


def test_two_revisions_tail_only_and_a_break(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(repo, {"golden/case/anthropic/0001.json": wire("a")})
    put(repo, {"golden/case/anthropic/0002.json": wire("a", LONG)})
    old = commit(repo, "old")
    put(repo, {"golden/case/anthropic/0001.json": wire("a", "z")})  # extends call 1
    put(repo, {"golden/case/anthropic/0002.json": wire("a", "B" + LONG[1:])})  # rewrites
    new = commit(repo, "new")
    assert run(capsys, "HEAD~1", "HEAD", "--golden", "golden")[0] == 0  # content only
    code, out = run(capsys, "HEAD~1", "HEAD", "--golden", "golden", "--strict")
    assert code == 1
    # Blocks: system 4,096 tokens, "a" and "z" 7 each ({"text":"a","type":"text"} is 26
    # bytes), the long message 4,096. Writes cost 1.25, reads 0.1 (claude-sonnet-4-5).
    # old: call 1 writes 4,103 (5,128.75); call 2 reads those 4,103 (410.3) and writes
    #      4,096 (5,120): 10,659.05 for 4,103 + 8,199 input tokens (86.6% of no caching).
    # new: call 1 writes 4,110 (5,137.5); call 2 shares no cached prefix with call 1 and
    #      writes all 8,199 (10,248.75): 15,386.25 (125.0%): +4,727.20, +44.3%.
    # Call 2's old body, cache marker aside, is 32,927 bytes: 16,562 before the long
    # text, its 16,359 bytes, then '"}]}]}'. From the rewritten first "b" on, 16,365 bytes
    # no longer match: 49.7%.
    assert out == [
        "case/anthropic  (simulated cost vs no caching 86.6% -> 125.0%;"
        " cost 10659.05 -> 15386.25, +4727.20 (+44.3%))",
        "  0001: tail append (+1 item)",
        "  0002: PREFIX BREAK at $.messages[1].content[0].text: old 'bbbbbbbbbbbbbbbbbbbb"
        "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb…' new 'Bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
        "bbbbbbbbbbbbbbbbbbbbbbbb…'",
        "        invalidates 49.7% of the old body's prefix (16365 of 32927 bytes,"
        " cache markers aside)",
        "",
        f"old: golden/ at HEAD~1 ({old[:12]})",
        f"new: golden/ at HEAD ({new[:12]})",
        "case  provider   calls  unchanged  tail-only  breaks  invalidated         cost delta",
        "case  anthropic      2          0          1       1        49.7%  +4727.20 (+44.3%)",
        "compared 2 calls: 1 tail-only, 1 prefix break",
        f"deployment impact: {CONTENT_LINE}",
    ]
    assert run(capsys, "HEAD~1", "HEAD", "--strict", "--allow-prefix-break")[0] == 0
    assert run(capsys, "HEAD", "HEAD")[1][-2:] == [
        "compared 2 calls: 2 unchanged",
        "deployment impact: none",
    ]

    code, lines = run(capsys, old, new, "--json", "--strict")  # shas work too
    assert code == 1 and len(lines) == 1
    report = canonical.loads(lines[0])
    assert canonical.dumps(report) == lines[0]
    assert report["old"] == {"commit": old, "given": old, "golden": "golden", "kind": "revision"}
    assert (report["prefix_stable"], report["tail_only"], report["prefix_breaks"]) == (False, 1, 1)
    (result,) = report["results"]
    assert (result["case"], result["provider"]) == ("case", "anthropic")
    assert (result["old_cost"], result["new_cost"], result["cost_delta"]) == (
        10659.05,
        15386.25,
        4727.2,
    )
    assert (result["cost_delta_share"], result["invalidated_max"]) == (0.4435, 0.497)
    assert result["calls"][0] == {
        "appended": 1,
        "impact": "rendered-content change",
        "call": 1,
        "new_cost": 5137.5,
        "old_cost": 5128.75,
        "verdict": "tail-only",
    }
    assert {k: result["calls"][1][k] for k in ("path", "invalidated_bytes", "old_bytes")} == {
        "path": "$.messages[1].content[0].text",
        "invalidated_bytes": 16365,
        "old_bytes": 32927,
    }


def test_a_revision_against_the_working_tree(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The project's spec, so that a break is explained by its file:line.
    shutil.copytree(REPO / "prompt", repo / "prompt")
    shutil.copytree(REPO / "rules", repo / "rules")
    lines = INSTRUCTIONS.split("\n")
    lines[3] = lines[3].replace("fixed", "frozen")
    changed = "\n".join(lines)
    put(repo, {"golden/case/anthropic/0001.json": wire("a", system=INSTRUCTIONS)})
    commit(repo, "old")
    assert run(capsys, "HEAD", "WORKTREE") == (
        0,
        [
            "old: golden/ at HEAD (" + git(repo, "rev-parse", "HEAD")[:12] + ")",
            "new: golden/ in the working tree",
            "case  provider   calls  unchanged  tail-only  breaks  invalidated  cost delta",
            "case  anthropic      1          1          0       0            -           0",
            "compared 1 call: 1 unchanged",
            "deployment impact: none",
        ],
    )
    # Uncommitted: the spec and the regenerated body change.
    put(repo, {"prompt/cursor/instructions.md": changed.encode("utf-8")})
    put(repo, {"golden/case/anthropic/0001.json": wire("a", system=changed)})
    for new in ("WORKTREE", "."):
        code, out = run(capsys, "HEAD", new)
        assert code == 1
        assert out[1:3] == [
            "  0001: PREFIX BREAK at $.system[0].text: old '… system message is fixed for the"
            " whole conversation.\\n- A req…' new '… system message is frozen for the whole"
            " conversation.\\n- A re…'",
            "        caused by prompt/cursor/instructions.md:4",
        ]
        # the spec roots of both sides build: the changed bundle part is named
        assert out[-1] == (
            "deployment impact: root change of instructions.md at "
            f"prompt/cursor/instructions.md:4: {ROOT_CONSEQUENCE}"
        )
    # Committed: NEW is a revision, explained by the spec as of that revision.
    commit(repo, "new")
    code, out = run(capsys, "HEAD~1", "HEAD")
    assert (code, out[2]) == (1, "        caused by HEAD:prompt/cursor/instructions.md:4")
    # A path still wins over a revision: a folder called HEAD is a folder.
    write(repo / "HEAD" / "case" / "anthropic" / "0001.json", wire("a", system=changed))
    code, out = run(capsys, "HEAD", "HEAD~1")
    assert code == 1 and out[-2] == "compared 1 call: 1 prefix break"
    assert "old: HEAD" in out and "new: golden/ at HEAD~1 (" in out[-5]


def test_added_and_removed_cases_and_calls(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    put(
        repo,
        {
            "golden/gone/anthropic/0001.json": anthropic("a"),
            "golden/kept/anthropic/0001.json": anthropic("a"),
            "golden/kept/anthropic/0002.json": anthropic("a", "b"),
        },
    )
    commit(repo, "old")
    put(
        repo,
        {
            "golden/gone/anthropic/0001.json": None,
            "golden/kept/anthropic/0002.json": None,
            "golden/kept/openai-chat/0001.json": b'{"model":"gpt-4.1","messages":[]}',
            "golden/fresh/anthropic/0001.json": anthropic("x"),
            "golden/fresh/gemini/0001.json": b'{"contents":[]}',
        },
    )
    code, out = run(capsys, "HEAD", "WORKTREE")
    assert code == 0
    assert out[:5] == [
        "fresh: case only in NEW (2 providers, 2 calls)",
        "gone: case only in OLD (1 provider, 1 call)",
        "kept/anthropic  (simulated cost vs no caching 100.0% -> 100.0%;"
        " cost 45.00 -> 19.00, -26.00 (-57.8%))",
        "  0002: removed",
        "kept/openai-chat: only in NEW (1 call)",
    ]
    # Nothing here is cacheable: a call costs its tokens (the empty bodies none).
    # Added and removed calls change the scenarios, not what a deploy sends.
    assert out[-1] == "deployment impact: none"
    assert out[-8:-1] == [
        "case   provider      calls  unchanged  tail-only  breaks  invalidated        cost delta",
        "fresh  anthropic    0 -> 1          0          0       0            -      +19.00 (new)",
        "fresh  gemini       0 -> 1          0          0       0            -       +0.00 (new)",
        "gone   anthropic    1 -> 0          0          0       0            -  -19.00 (removed)",
        "kept   anthropic    2 -> 1          1          0       0            -   -26.00 (-57.8%)",
        "kept   openai-chat  0 -> 1          0          0       0            -       +0.00 (new)",
        "compared 6 calls: 1 unchanged, 3 added, 2 removed; 1 case added; 1 case removed",
    ]
    report = canonical.loads(main_json(capsys, "HEAD", "WORKTREE"))
    assert (report["cases_added"], report["cases_removed"]) == (["fresh"], ["gone"])
    assert (report["added"], report["removed"]) == (3, 2)


def main_json(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    _code, lines = run(capsys, *argv, "--json")
    assert len(lines) == 1, lines
    return lines[0]


def test_bad_revisions_and_folders_exit_2(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    put(repo, {"golden/case/anthropic/0001.json": anthropic("a")})
    commit(repo, "one")
    cases = [
        (
            ["nope", "HEAD"],
            "prefixlock diff: cannot read OLD 'nope': no such file or folder, nor a git revision",
        ),
        (
            ["HEAD", "HEAD~5"],
            "prefixlock diff: cannot read NEW 'HEAD~5': no such file or folder, nor a git revision",
        ),
        (
            ["HEAD", "WORKTREE", "--golden", "elsewhere"],
            "prefixlock diff: no <provider>/NNNN.json bodies below elsewhere/ at HEAD ("
            + git(repo, "rev-parse", "HEAD")[:12]
            + ") or elsewhere/ in the working tree",
        ),
        (
            ["HEAD", "WORKTREE", "--golden", "../golden"],
            "prefixlock diff: --golden '../golden': give a folder relative to the repository root",
        ),
        (
            ["HEAD", "golden/case/anthropic/0001.json"],
            "prefixlock diff: compare two files or two folders, not golden/ at HEAD ("
            + git(repo, "rev-parse", "HEAD")[:12]
            + ") and golden/case/anthropic/0001.json",
        ),
    ]
    for argv, message in cases:
        assert main(["diff", *argv]) == 2, argv
        captured = capsys.readouterr()
        assert (captured.out, captured.err) == ("", message + "\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    monkeypatch.chdir(outside)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert main(["diff", "main", "WORKTREE"]) == 2
    assert capsys.readouterr().err == (
        "prefixlock diff: cannot read OLD 'main': no such file or folder (and not in a git"
        " repository, so not a revision either)\n"
    )
    assert main(["diff", str(repo / "golden"), "WORKTREE"]) == 2
    assert capsys.readouterr().err == "prefixlock diff: NEW WORKTREE: not in a git repository\n"


def test_extract_writes_blobs_without_a_checkout(repo: Path, tmp_path: Path) -> None:
    put(repo, {"golden/a/x.json": b"same", "golden/b/y.json": b"same", "other/z": b"no"})
    (repo / "golden" / "link").symlink_to("a/x.json")
    sha = commit(repo, "one")
    put(repo, {"golden/a/x.json": b"changed later"})
    top = revisions.toplevel()
    assert top is not None and top.resolve() == repo.resolve()
    assert revisions.resolve("HEAD", top) == sha
    assert revisions.resolve("--all", top) is None
    out = tmp_path / "out"
    assert revisions.extract(top, sha, ["golden", "missing"], out) == 2
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "golden/a/x.json",
        "golden/b/y.json",
    ]
    assert (out / "golden/a/x.json").read_bytes() == b"same"
    assert git(repo, "status", "--porcelain") == "M golden/a/x.json"  # untouched


# --- block level (a wire that carries same-role neighbours as blocks of one message) ------


def bedrock(*contents: list[str]) -> bytes:
    """A Bedrock body whose wire messages (alternating from user) hold these texts."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": [{"text": t} for t in texts]}
        for i, texts in enumerate(contents)
    ]
    body = {"inferenceConfig": {"maxTokens": 10}, "messages": messages}
    return json.dumps(body, separators=(",", ":")).encode()


def test_blocks_added_to_the_last_message_are_a_tail_append() -> None:
    old, new = bedrock(["ctx", "q"]), bedrock(["ctx", "q", "event"], ["reply"])
    comparison = compare_bodies("bedrock-converse", old, new)
    assert (comparison.kind, comparison.appended, comparison.blocks) == (TAIL_APPEND, 1, 1)
    assert explanation(comparison, None) == ["tail append (+1 block in the last message, +1 item)"]
    assert block_pairs(json.loads(old)["messages"]) == [
        ("user", {"text": "ctx"}),
        ("user", {"text": "q"}),
    ]


def test_a_changed_or_dropped_earlier_block_is_a_break() -> None:
    old = bedrock(["ctx", "q"], ["a"], ["r"])
    changed = compare_bodies("bedrock-converse", old, bedrock(["ctx", "Q"], ["a"], ["r", "x"]))
    assert (changed.kind, changed.difference and changed.difference.path) == (
        PREFIX_BREAK,
        "$.messages[0].content[1].text",
    )
    # blocks added to a message that is not the last one: a break
    inner = compare_bodies("bedrock-converse", old, bedrock(["ctx", "q", "x"], ["a"], ["r"]))
    assert inner.kind == PREFIX_BREAK
    dropped = compare_bodies("bedrock-converse", old, bedrock(["ctx", "q"], ["a"], []))
    assert dropped.kind == PREFIX_BREAK


def test_deployment_impact_of_a_template_edit_and_an_instructions_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0
    monkeypatch.chdir(root)
    git(root, "init", "-q")
    commit(root, "init")
    # A runtime template gains a line: only messages rendered from now on differ.
    template = root / "prompt" / "cursor" / "agent" / "runtime.md.j2"
    template.write_text(template.read_text(encoding="utf-8") + "Be brief.\n", encoding="utf-8")
    assert main(["golden", "--update"]) == 0
    capsys.readouterr()
    code, out = run(capsys, "HEAD", "WORKTREE")
    assert code == 0
    assert out[-1].startswith(
        "deployment impact: rendered-content change of templates/prompt/cursor/agent/runtime.md.j2"
    )
    assert out[-1].endswith(
        ": only messages rendered from now on differ; running conversations keep their cache"
    )
    assert run(capsys, "HEAD", "WORKTREE", "--strict")[0] == 1
    commit(root, "template")
    # The instructions change: a root change, exit 1.
    instructions = root / "prompt" / "cursor" / "instructions.md"
    text = instructions.read_text(encoding="utf-8")
    instructions.write_text(text.replace("Cursor", "Cursory", 1), encoding="utf-8")
    assert main(["golden", "--update"]) == 0
    capsys.readouterr()
    code, out = run(capsys, "HEAD", "WORKTREE")
    assert code == 1
    assert out[-1] == (
        "deployment impact: root change of instructions.md at "
        f"prompt/cursor/instructions.md:1: {ROOT_CONSEQUENCE}"
    )
    report = canonical.loads(main_json(capsys, "HEAD", "WORKTREE"))
    assert report["impact"] == "root change"
    assert report["changed_parts"] == {
        "root change": ["instructions.md"],
        "rendered-content change": [],
    }


def test_golden_files_stale_against_the_lock_are_not_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: an instructions change committed with a rebuilt lock but stale
    golden files; ``diff HEAD~1 HEAD`` must say so, not "unchanged" with exit 0."""
    root = tmp_path / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0
    monkeypatch.chdir(root)
    git(root, "init", "-q")
    commit(root, "init")
    built = json.loads((root / "prefixlock.lock").read_text(encoding="utf-8"))["digest"]
    instructions = root / "prompt" / "cursor" / "instructions.md"
    text = instructions.read_text(encoding="utf-8")
    instructions.write_text(text.replace("Cursor", "Cursory", 1), encoding="utf-8")
    assert main(["build"]) == 0
    lock = json.loads((root / "prefixlock.lock").read_text(encoding="utf-8"))["digest"]
    (root / ".gitignore").write_text("build/\n", encoding="utf-8")
    commit(root, "instructions, lock rebuilt, golden files not")
    capsys.readouterr()
    code = main(["diff", "HEAD~1", "HEAD"])
    captured = capsys.readouterr()
    assert code == 1
    out = captured.out.splitlines()
    assert out[-2:] == [
        f"HEAD: golden/identical-context was built from bundle {built}, the lock is {lock};"
        " run `prefixlock update`",
        "deployment impact: unknown: the golden files are stale against the lock",
    ]
    assert captured.err == (
        "prefixlock diff: 1 case(s) of golden files stale against the lock; run"
        " `prefixlock update` and commit the result\n"
    )
    assert main(["diff", "HEAD~1", "HEAD", "--allow-prefix-break"]) == 1
    capsys.readouterr()
    report = canonical.loads(main_json(capsys, "HEAD~1", "HEAD"))
    assert report["stale_golden"] == [out[-2]]
    assert report["impact"] == "unknown"
    # The working tree is stale in the same way, and says so without a revision prefix.
    code, out = run(capsys, "HEAD~1", "WORKTREE")
    assert code == 1
    assert out[-2].startswith("golden/identical-context was built from bundle ")
    # Once the golden files are rebuilt: a root change, as it should be.
    assert main(["golden", "--update"]) == 0
    capsys.readouterr()
    code, out = run(capsys, "HEAD~1", "WORKTREE")
    assert code == 1
    assert out[-1].startswith("deployment impact: root change of instructions.md at ")
    # Against HEAD, whose golden files are the stale ones, a note: the comparison is with
    # the bodies HEAD's files hold; the verdict is NEW's.
    code, out = run(capsys, "HEAD", "WORKTREE")
    assert code == 1
    assert out[-2] == (
        f"note: HEAD: golden/identical-context was built from bundle {built}, the lock is"
        f" {lock}; run `prefixlock update`"
    )
    # (the specs are the same on both sides: no changed part to name)
    assert out[-1].startswith("deployment impact: root change at prompt/cursor/instructions.md:1: ")
    assert canonical.loads(main_json(capsys, "HEAD", "WORKTREE"))["old_stale_golden"] == [
        out[-2].removeprefix("note: ")
    ]


def test_a_changed_part_no_golden_case_renders_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0  # one case, agent mode
    monkeypatch.chdir(root)
    git(root, "init", "-q")
    commit(root, "init")
    template = root / "prompt" / "cursor" / "plan" / "runtime.md.j2"
    template.write_text(template.read_text(encoding="utf-8") + "Plan first.\n", "utf-8")
    assert main(["build"]) == 0
    assert main(["golden", "--update"]) == 0
    capsys.readouterr()
    code, out = run(capsys, "HEAD", "WORKTREE")
    assert code == 0
    calls = 3 * len(NAMES)  # identical-context: three calls on every provider
    assert out[-2] == f"compared {calls} calls: {calls} unchanged"
    assert out[-1] == (
        "deployment impact: none in the golden cases, but no case renders the changed"
        " templates/prompt/cursor/plan/runtime.md.j2; add a scenario that does"
    )
    code, out = run(capsys, "HEAD", "WORKTREE", "--format=markdown")
    assert (code, out[:4]) == (
        0,
        [
            "### prefixlock diff: no deployment impact",
            "",
            "- no golden case renders what changed, the template"
            " `prompt/cursor/plan/runtime.md.j2`; add a scenario that does",
            "",
        ],
    )


def test_a_folder_diff_prices_the_calls_at_their_times(tmp_path: Path) -> None:
    """A case folder with its scenario.yaml: the simulated costs of both sides are
    verify's, each call at its request's time (an entry that expired between turns is
    written again); before, the diff priced every call as if it followed the last one
    at once (context-revert, anthropic: call 2 read 7,032 tokens the cache had dropped)."""
    from prefixlock.review.diff.folders import diff_folders
    from prefixlock.review.diff.sides import Side
    from prefixlock.review.replay import replay, serialize_calls
    from prefixlock.review.scenario import load_scenario
    from prefixlock.review.verify import simulate_calls

    case = REPO / "golden" / "context-revert"
    for side in ("old", "new"):  # a checkout's golden/ (the scenario's bundle: ../..)
        for spec in ("prompt", "rules"):
            shutil.copytree(REPO / spec, tmp_path / side / spec)
        shutil.copytree(case, tmp_path / side / "golden" / case.name)
    sides = [Side(s, "folder", tmp_path / s / "golden", tmp_path / s) for s in ("old", "new")]
    found = diff_folders(*sides)
    scenario = load_scenario(case / "scenario.yaml")
    calls = replay(scenario)
    bodies = serialize_calls(calls, ["anthropic"])["anthropic"]
    model = {s.provider: s.model for s in scenario.bundle.settings}["anthropic"]
    expected = [c.cost for c in simulate_calls(scenario, calls, "anthropic", bodies, model).calls]
    (pair,) = [p for p in found.pairs if p.provider == "anthropic"]
    assert [c.old_cost for c in pair.calls] == expected
    assert [c.new_cost for c in pair.calls] == expected


def test_a_folder_diff_without_a_loadable_scenario_prices_calls_back_to_back(
    tmp_path: Path,
) -> None:
    """Bodies whose scenario.yaml does not load here (its bundle is elsewhere), or that
    are fewer than its calls: compared as before, each call priced as following the
    last one at once."""
    from prefixlock.cache.simulator import simulate
    from prefixlock.review.diff.folders import diff_folders
    from prefixlock.review.diff.sides import Side

    case = REPO / "golden" / "context-revert"
    shutil.copytree(case, tmp_path / "old" / case.name)  # no prompt/, rules/ at ../..
    for spec in ("prompt", "rules"):
        shutil.copytree(REPO / spec, tmp_path / "new" / spec)
    shutil.copytree(case, tmp_path / "new" / "golden" / case.name)
    (tmp_path / "new" / "golden" / case.name / "anthropic" / "0004.json").unlink()
    old = Side("old", "folder", tmp_path / "old", tmp_path / "old")
    new = Side("new", "folder", tmp_path / "new" / "golden", tmp_path / "new")
    (pair,) = [p for p in diff_folders(old, new).pairs if p.provider == "anthropic"]
    bodies = [(case / "anthropic" / f"{n:04d}.json").read_bytes() for n in range(1, 5)]
    back_to_back = [c.cost for c in simulate("anthropic", bodies).calls]
    assert [c.old_cost for c in pair.calls] == back_to_back
    assert [c.new_cost for c in pair.calls] == [*back_to_back[:3], None]


def test_a_side_without_call_times_prices_both_sides_back_to_back_and_says_so(
    tmp_path: Path,
) -> None:
    """OLD's bodies have no loadable scenario beside them, NEW's do: priced each its own
    way, identical bodies showed a cost delta (context-revert, anthropic: call 2 reads
    7,032 tokens back to back, none after its 5-minute gap). Both sides are priced back
    to back instead, and a note names the case and the side without times."""
    from prefixlock.cache.simulator import simulate
    from prefixlock.review.diff import DiffReport, formats
    from prefixlock.review.diff.folders import diff_folders
    from prefixlock.review.diff.sides import Side

    case = REPO / "golden" / "context-revert"
    shutil.copytree(case, tmp_path / "old" / case.name)  # no prompt/, rules/ at ../..
    for spec in ("prompt", "rules"):
        shutil.copytree(REPO / spec, tmp_path / "new" / spec)
    shutil.copytree(case, tmp_path / "new" / "golden" / case.name)
    old = Side("old", "folder", tmp_path / "old", tmp_path / "old")
    new = Side("new", "folder", tmp_path / "new" / "golden", tmp_path / "new")
    found = diff_folders(old, new)
    (pair,) = [p for p in found.pairs if p.provider == "anthropic"]
    bodies = [(case / "anthropic" / f"{n:04d}.json").read_bytes() for n in range(1, 5)]
    back_to_back = [c.cost for c in simulate("anthropic", bodies).calls]
    assert [c.old_cost for c in pair.calls] == back_to_back
    assert [c.new_cost for c in pair.calls] == back_to_back
    assert all(p.old_cost == p.new_cost for p in found.pairs)
    note = (
        "context-revert: OLD's calls have no times (no scenario.yaml beside its bodies "
        "that loads here and gives their number of calls), so both sides are priced as "
        "back-to-back calls"
    )
    assert found.notes == (note,)
    assert found.to_json()["notes"] == [note]
    report = DiffReport(found)
    assert report.impact_lines()[0] == f"note: {note}"
    assert f"- note: {note}" in formats.markdown(report)
    assert any(
        line.startswith("::notice ") and "calls priced back to back" in line
        for line in formats.github(report)
    )


def _case_with_its_own_bundle(root: Path, case: str = "context-revert") -> Path:
    """A checkout at ``root`` whose golden ``case`` names a bundle of its own
    (``bundle: ../../other``: the specs with Gemini 2.0 Flash), its calls.md rebuilt from
    it, as ``golden --update`` writes it. Returns the case folder."""
    from prefixlock.review.golden import expected_case

    for spec in ("prompt", "rules"):
        shutil.copytree(REPO / spec, root / spec)
        shutil.copytree(REPO / spec, root / "other" / spec)
    shutil.copyfile(REPO / "prefixlock.lock", root / "prefixlock.lock")
    providers_yaml = root / "other" / "rules" / "providers.yaml"
    text = providers_yaml.read_text(encoding="utf-8")
    providers_yaml.write_text(text.replace("gemini-4-argon", "gemini-2.0-flash"), "utf-8")
    folder = root / "golden" / case
    shutil.copytree(REPO / "golden" / case, folder)
    scenario = folder / "scenario.yaml"
    text = scenario.read_text(encoding="utf-8")
    scenario.write_text(text.replace("bundle: ../..\n", "bundle: ../../other\n"), "utf-8")
    (folder / "calls.md").write_bytes(expected_case(scenario).page)
    return folder


def test_a_case_with_its_own_bundle_is_priced_with_that_bundle_s_models(
    tmp_path: Path,
) -> None:
    """The models come from the bundle the case's scenario names, as verify takes them,
    not from the spec root's (Gemini 2.0 Flash has no implicit cache; 2.5 Pro has)."""
    from prefixlock.review.diff.folders import diff_folders
    from prefixlock.review.diff.sides import Side

    for side in ("old", "new"):
        _case_with_its_own_bundle(tmp_path / side)
    sides = [Side(s, "folder", tmp_path / s / "golden", tmp_path / s) for s in ("old", "new")]
    (pair,) = [p for p in diff_folders(*sides).pairs if p.provider == "gemini"]
    assert pair.old_report is not None and pair.new_report is not None
    assert (pair.old_report.model, pair.new_report.model) == ("gemini-2.0-flash",) * 2
    assert pair.new_report.cache_read_tokens == 0


def test_staleness_is_judged_against_the_lock_of_the_case_s_own_bundle(tmp_path: Path) -> None:
    """golden --check compares a case's calls.md with the lock of the bundle its
    scenario names; diff did so with the spec root's lock, calling a fresh case stale
    and exiting 1 (and the `golden --update` it suggested changed nothing)."""
    from prefixlock.review.diff.sides import Side, stale_golden
    from prefixlock.spec.build import build_bundle

    folder = _case_with_its_own_bundle(tmp_path)
    side = Side("WORKTREE", "worktree", tmp_path / "golden", tmp_path)
    built = build_bundle(tmp_path).digest
    assert stale_golden(side, built) == []  # other/ has no lock: nothing to judge by
    shutil.copyfile(REPO / "prefixlock.lock", tmp_path / "other" / "prefixlock.lock")
    (line,) = stale_golden(side, built)
    assert line.startswith(f"golden/{folder.name} was built from bundle sha256:")


def test_a_folder_diff_builds_each_sides_bundle_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cases of one checkout share its bundle (``bundle: ../..``): reading their
    calls' times compiles it once per side, not once per case (the golden tree: 8.2 s
    for a diff of two revisions, 3.2 s with one bundle per side, 2.3 s without times)."""
    from prefixlock.review import scenario as scenarios
    from prefixlock.review.diff.folders import diff_folders
    from prefixlock.review.diff.sides import Side

    for side in ("old", "new"):
        for spec in ("prompt", "rules"):
            shutil.copytree(REPO / spec, tmp_path / side / spec)
        for case in ("context-revert", "midnight", "retry"):
            shutil.copytree(REPO / "golden" / case, tmp_path / side / "golden" / case)
    built: list[Path] = []
    build = scenarios.build_bundle
    monkeypatch.setattr(scenarios, "build_bundle", lambda root: built.append(root) or build(root))
    sides = [Side(s, "folder", tmp_path / s / "golden", tmp_path / s) for s in ("old", "new")]
    found = diff_folders(*sides)
    assert len(found.pairs) == 3 * len(NAMES)  # three cases, every provider
    assert sorted(built) == [tmp_path / "new", tmp_path / "old"]


def test_a_revision_side_reads_the_bundle_a_case_names_from_that_revision(
    repo: Path,
) -> None:
    """A committed case naming a bundle of its own (``bundle: ../../other``): the
    revision side extracts that bundle's specs and lock from the commit too, so both
    sides are priced at their calls' times with its models. Before, only golden/,
    prompt/, rules/ and the lock were extracted, the case's scenario could not load on
    the revision side, and both sides were priced back to back with a note."""
    import contextlib

    from prefixlock.review.diff.folders import diff_folders
    from prefixlock.review.diff.sides import resolve_side, stale_golden

    folder = _case_with_its_own_bundle(repo)
    commit(repo, "a case with its own bundle")
    with contextlib.ExitStack() as scratch:
        old, new = (
            resolve_side(given, which, golden="golden", root=repo, scratch=scratch)
            for given, which in (("HEAD", "OLD"), ("WORKTREE", "NEW"))
        )
        assert old.extracted is not None
        assert (old.extracted / "other" / "rules" / "providers.yaml").is_file()
        assert stale_golden(old, None) == []
        found = diff_folders(old, new)
    assert found.notes == ()
    (pair,) = [p for p in found.pairs if p.provider == "gemini"]
    assert pair.old_report is not None and pair.new_report is not None
    assert (pair.old_report.model, pair.new_report.model) == ("gemini-2.0-flash",) * 2
    assert [c.old_cost for c in pair.calls] == [c.new_cost for c in pair.calls]
    assert folder.name == "context-revert"


def test_a_break_behind_a_bedrock_cache_point_shows_both_values() -> None:
    """Bedrock's cache markers are blocks of their own (cachePoint): the path is found
    with them removed, and the values must be read there too. They were read from the
    bodies as sent, where the path lands on the cachePoint: "old (absent) new (absent)",
    and no template line could be named."""
    from prefixlock.review.compare import compare_bodies

    def body(text: str) -> bytes:
        content = [{"text": "a"}, {"cachePoint": {"type": "default"}}, {"text": text}]
        value = {"messages": [{"role": "user", "content": content}]}
        return json.dumps(value, separators=(",", ":")).encode()

    found = compare_bodies("bedrock-converse", body("before"), body("after"))
    assert found.difference is not None
    assert found.difference.parts == ("messages", 0, "content", 1, "text")
    assert (found.difference.old, found.difference.new) == ("before", "after")
