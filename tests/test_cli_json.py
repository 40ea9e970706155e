"""``--json`` outputs: each carries its ``format``, documented in docs/json.md, and bad
input under ``--json`` is JSON on stdout too (``prefixlock.error/1``, exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conv_helpers import REPO, example_bundle, user
from prefixlock.cli.commands import main
from prefixlock.cli.console import ERROR_FORMAT, FORMATS
from prefixlock.core import canonical
from prefixlock.runtime.conversation import Conversation
from prefixlock.spec.build import build_bundle
from prefixlock.store.sqlite import SQLiteStore

CASE = REPO / "golden" / "context-revert"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object]]:
    code = main(list(argv))
    captured = capsys.readouterr()
    value = json.loads(captured.out)
    assert isinstance(value, dict)
    return code, value


def test_every_format_is_documented_with_its_command() -> None:
    page = (REPO / "docs" / "json.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `([^`]+)` \| `(prefixlock\.[a-z-]+/\d+)` \|$", page, re.M))
    assert sorted(table.values()) == sorted(FORMATS.values())
    for name in (*FORMATS.values(), ERROR_FORMAT):
        assert re.search(rf"^## .*`{re.escape(name)}`", page, re.M), name


def test_verify_json_has_its_format(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["verify", str(CASE), "--provider", "gemini", "--no-hash-seed", "--json"]
    code, value = run(capsys, *args)
    assert code == 0
    assert value["format"] == "prefixlock.verify/1" and value["ok"] is True


def test_diff_json_has_its_format(capsys: pytest.CaptureFixture[str]) -> None:
    one, two = CASE / "anthropic" / "0001.json", CASE / "anthropic" / "0002.json"
    code, value = run(capsys, "diff", str(one), str(two), "--json", "--root", str(REPO))
    assert code == 0
    assert value["format"] == "prefixlock.diff/1" and value["verdict"] == "tail-only"


def test_inspect_json_outputs_have_their_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    with SQLiteStore(db) as store:
        Conversation.open(store, example_bundle(), "conv-1").handle(user("u1"))
    code, value = run(capsys, "inspect", str(db), "--json")
    assert (code, value) == (0, {"conversations": ["conv-1"], "format": FORMATS["inspect-list"]})
    code, value = run(capsys, "inspect", str(db), "conv-1", "--json")
    assert (code, value["format"], value["conversation"]) == (0, FORMATS["inspect"], "conv-1")
    code, value = run(capsys, "inspect", str(db), "conv-1", "--cache", "--json")
    assert (code, value["format"], value["calls"]) == (0, FORMATS["inspect-cache"], [])


def test_a_scenario_error_is_json_with_its_location(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: t\nconversation: c\nbundle: {REPO}\nsteps:\n"
        "  - user: {event: u1, query: q, mode: plna}\n",
        encoding="utf-8",
    )
    code = main(["verify", str(path), "--json"])
    captured = capsys.readouterr()
    assert (code, captured.err) == (2, "")
    assert (
        captured.out
        == canonical.dumps(
            {
                "format": "prefixlock.error/1",
                "command": "verify",
                "errors": [
                    {
                        "message": "unknown mode 'plna' (did you mean 'plan'?) "
                        f"(bundle: {REPO}, sha256:{build_bundle(REPO).digest[7:19]})",
                        "file": path.as_posix(),
                        "line": 5,
                        "column": 39,
                        "path": "$.steps[0].user.mode",
                    }
                ],
            }
        )
        + "\n"
    )


def test_a_missing_file_is_json_with_its_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.json"
    code, value = run(capsys, "diff", str(missing), str(missing), "--json")
    assert code == 2
    assert value["format"] == ERROR_FORMAT and value["command"] == "diff"
    (error,) = value["errors"]  # type: ignore[misc]
    assert error["message"].startswith(f"cannot read OLD {str(missing)!r}: no such file")
    assert (error["file"], error["line"], error["column"], error["path"]) == (None,) * 4


def test_a_missing_store_is_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, value = run(capsys, "inspect", str(tmp_path / "no.db"), "--json")
    assert code == 2
    assert value["errors"] == [
        {
            "message": f"{tmp_path / 'no.db'}: no such store",
            "file": None,
            "line": None,
            "column": None,
            "path": None,
        }
    ]


def test_a_bench_usage_error_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, value = run(capsys, "bench", "--calls", "1", "--json")
    assert (code, value["format"], value["command"]) == (2, ERROR_FORMAT, "bench")


def test_an_argument_error_is_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, value = run(capsys, "verify", "--json", "--tokenizer", "tiktokn")
    assert code == 2
    assert value == {
        "format": ERROR_FORMAT,
        "command": "verify",
        "errors": [
            {
                "message": "argument --tokenizer: unknown tokenizer 'tiktokn' "
                "(did you mean 'tiktoken'?)",
                "file": None,
                "line": None,
                "column": None,
                "path": None,
            }
        ],
    }


def test_without_json_errors_stay_text_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--tokenizer", "tiktokn"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("usage: prefixlock verify")
