"""The README's promises: two set-up commands that CI runs verbatim, a working example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _setup_commands() -> list[str]:
    head = README.split("\n---\n", 1)[0]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", head, re.S)]


def test_readme_starts_with_exactly_two_setup_commands() -> None:
    commands = _setup_commands()
    assert len(commands) == 2
    assert all("\n" not in c for c in commands)
    assert commands[0].endswith("prefixlock build")
    assert "pytest" in commands[1]
    assert README.startswith("# prefixlock\n\n```sh\n" + commands[0])


def test_ci_runs_the_readme_commands_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in _setup_commands():
        assert command in ci


def test_library_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the example builds the bundle in "."
    code = re.search(r"## Library use.*?```python\n(.*?)```", README, re.S)
    assert code is not None
    source = code.group(1).replace('"conversations.db"', repr(str(tmp_path / "c.db")))
    namespace: dict[str, object] = {}
    exec(compile(source, "README.md", "exec"), namespace)
    body = namespace["body"]
    assert isinstance(body, bytes) and body.startswith(b"{")


def test_readme_is_a_product_page_and_the_lab_notes_live_in_docs() -> None:
    """At most 250 lines; measured figures name no commit and no session: their history
    is docs/bench.md's, which the README links."""
    assert len(README.splitlines()) <= 250
    assert re.findall(r"`[0-9a-f]{7,40}`", README) == []
    # the lab-note history ("this session's run", "an earlier session", "stop 40"), not
    # the user's own agent sessions, which the README teaches to measure
    lab = r"\b(?:this|that|an? earlier|the previous|the last|the next) session\b|\bstop \d+\b"
    assert re.findall(lab, README.lower()) == []
    assert "(docs/bench.md)" in README


def test_readme_states_the_test_time_and_the_install_lines() -> None:
    text = " ".join(README.split())
    assert "about 6 minutes on a 2-core machine in two workers (5 min 33 s for 4,100 tests)" in text
    assert "pip wheel --no-deps -w dist . && pip install dist/prefixlock-" in README
    assert "pip install 'prefixlock @ git+https://" in README
