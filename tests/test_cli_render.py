"""``prefixlock render``: what one user turn sends, without a scenario."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conv_helpers import REPO
from prefixlock import AgentRunRequest, Conversation, MemoryStore, build_bundle, providers
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.review.preview import load_context, preview

CONTEXT = """\
git: {branch: feature/login, head: 9c1d2e3, dirty: true}
rules:
  - {name: tabs, kind: always, body: "Indent with tabs."}
"""


def test_the_raw_body_is_what_a_conversation_sends(tmp_path: Path) -> None:
    context = tmp_path / "ctx.yaml"
    context.write_text(CONTEXT, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable, "-m", "prefixlock", "render", "--root", str(REPO),
            "--query", "Why does login fail?", "--mode", "ask", "--context", str(context),
            "--provider", "openai-responses", "--format", "raw",
        ],
        capture_output=True,
        check=False,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, b"")
    conversation = Conversation.open(MemoryStore(), build_bundle(REPO), "preview")
    request = conversation.handle(
        AgentRunRequest.from_value(
            {
                "conversation_id": "preview",
                "event_id": "u1",
                "kind": "user",
                "mode": "ask",
                "query": "Why does login fail?",
                "context": canonical.loads(canonical.dumps(_yaml(context))),
            }
        )
    )
    assert done.stdout == providers.get("openai-responses").serialize(request)


def _yaml(path: Path) -> object:
    return load_context(path).value["context"]


def test_messages_format_shows_the_context_and_the_runtime_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    context = tmp_path / "ctx.yaml"
    context.write_text(CONTEXT, encoding="utf-8")
    args = ["render", "--root", str(REPO), "--query", "Q-123", "--context", str(context)]
    assert main([*args, "--format", "messages"]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("--- ")]
    assert headers == ["--- request-context:u1 (user)", "--- runtime:u1 (user)"]
    assert "Indent with tabs." in out.split("--- runtime:u1")[0]
    assert "Q-123" in out.split("--- runtime:u1")[1]


def test_body_format_is_the_indented_body_in_wire_key_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["render", "--root", str(REPO), "--query", "hi", "--provider", "gemini"]) == 0
    out = capsys.readouterr().out
    shown = preview(REPO, query="hi", provider="gemini")
    assert canonical.loads(out) == canonical.loads(shown.body)
    assert out.startswith('{\n  "generationConfig": {')


def test_a_bad_context_file_is_located(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    context = tmp_path / "ctx.yaml"
    context.write_text("rules:\n  - {name: x, kind: sometimes, body: b}\n", encoding="utf-8")
    args = ["render", "--root", str(REPO), "--query", "q", "--context", str(context)]
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{context.as_posix()}:2:")
    assert "$.context.rules[0].kind" in err[0]
    assert err[-1] == "prefixlock render: 1 error"


def test_an_unknown_mode_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--root", str(REPO), "--query", "q", "--mode", "reveiw"]) == 2
    assert "unknown mode 'reveiw'" in capsys.readouterr().err
