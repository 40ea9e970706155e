"""``prefixlock check`` and ``prefixlock update``, bounded ``golden --check`` findings,
and the stale lock that ``golden --check`` and ``verify`` now name (issue 42).

The five edits are the ones a new user makes first: a new 8-line rule, a template line,
a one-word instructions edit, a tool description edit and a typo in a rule body.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from prefixlock.cli.commands import main

RULE = """
  - name: changelog
    kind: always
    description: Keep the changelog current.
    body: |
      # Changelog

      - Add a line to CHANGELOG.md for every user-visible change.
      - Write it in the imperative, present tense.
"""

TEMPLATE = "prompt/cursor/agent/runtime.md.j2"
LOCK = "prefixlock.lock"
CASE = Path("golden") / "identical-context"


def _append(path: Path, text: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + text, encoding="utf-8")


def _replace(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


#: edit -> (apply it, the JSON path of the first difference in anthropic's call 1, the
#: replayed window's text there)
EDITS: dict[str, tuple[Callable[[Path], None], str, str]] = {
    "rule": (
        lambda root: _append(root / "rules" / "rules.yaml", RULE),
        "$.messages[0].content[0].text",
        '<rule name=\\"changelog\\">\\n# Changelog',
    ),
    "template": (
        lambda root: _append(root / TEMPLATE, "Answer in at most three sentences.\n"),
        "$.messages[1].content[0].text",
        "</user_query>\\nAnswer in at most three sentences.\\n",
    ),
    "instructions": (
        lambda root: _replace(
            root / "prompt" / "cursor" / "instructions.md",
            "is fixed for the whole",
            "is frozen for the whole",
        ),
        "$.system[0].text",
        "is frozen for the whole",
    ),
    "tool": (
        lambda root: _replace(
            root / "rules" / "tools.yaml",
            "Read a text file from the workspace.",
            "Read a text file of the workspace.",
        ),
        "$.tools[8].description",
        "Read a text file of the workspace.",
    ),
    "typo": (
        lambda root: _replace(
            root / "rules" / "rules.yaml", "Never write API keys", "Nevr write API keys"
        ),
        "$.messages[0].content[0].text",
        "- Nevr write API keys",
    ),
}

#: The first line of a body's finding: the file (case, provider, call), the JSON path,
#: the byte offset and both sizes.
FINDING = re.compile(
    r"(?P<file>[a-z-]+/[a-z-]+/\d{4}\.json): differs at (?P<path>\$\S+), byte \d+"
    r" \(golden \d+ bytes, replayed \d+\)(?P<same>; the same bytes differ as in \d{4}\.json)?"
)
#: The case's stale bundle: the digest its calls.md records, the one its specs build now.
BUILT_FROM = re.compile(
    r"golden/identical-context was built from bundle (?P<recorded>sha256:[0-9a-f]{64}),"
    r" the specs build (?P<built>sha256:[0-9a-f]{64}) "
)
WINDOW = re.compile(r"  (golden|replayed): {1,3}'\u2026?[^\n]{1,160}\u2026?'")


@pytest.fixture(scope="module")
def starter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project made by ``prefixlock init``, copied by each test that edits it."""
    root = tmp_path_factory.mktemp("gate") / "agent"
    assert main(["init", str(root), "--name", "cursor"]) == 0
    return root


@pytest.fixture
def project(starter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "agent"
    shutil.copytree(starter, root)
    monkeypatch.chdir(root)
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _digest(root: Path) -> str:
    text = (root / LOCK).read_text(encoding="utf-8")
    found = re.search(r'"digest": "(sha256:[0-9a-f]{64})"', text)
    assert found is not None
    return found[1]


def _bodies(root: Path) -> list[str]:
    """The case's golden bodies as ``golden --check`` names them (case/provider/call),
    in its order: read from the files ``prefixlock init`` wrote, so a provider or a call
    more in the starter changes no line here."""
    found = sorted(path.relative_to(root / "golden") for path in (root / CASE).glob("*/*.json"))
    assert found, f"no golden bodies under {root / CASE}"
    return [path.as_posix() for path in found]


def _providers(root: Path) -> list[str]:
    """The providers of the case's golden bodies, in order."""
    return sorted({body.split("/")[1] for body in _bodies(root)})


def _clean_table(root: Path) -> str:
    return (
        "\n".join(
            [
                "step                       result  summary",
                "prefixlock build --check   ok      prefixlock.lock records the bundle the specs"
                " build",
                "prefixlock golden --check  ok      1 case: every golden file matches a fresh"
                " replay",
                f"prefixlock verify          ok      1 scenario x {len(_providers(root))}"
                " providers: every invariant holds",
            ]
        )
        + "\n"
    )


# --- bounded golden --check findings --------------------------------------------------


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_golden_check_prints_one_bounded_finding_per_stale_file(
    project: Path, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    apply, path, new_text = EDITS[edit]
    apply(project)
    code, out, err = _run(capsys, "golden", "--check")
    assert (code, out) == (1, "")
    # the goal of issue 42: one edit prints a page, not every body twice (352 KB before)
    assert len(err.encode("utf-8")) <= 20_000
    lines = err.splitlines()
    # every line is a finding's first line, a window line, or one of the case's notes
    findings = [FINDING.fullmatch(line) for line in lines]
    bodies = [m for m in findings if m is not None]
    assert [m["file"] for m in bodies] == _bodies(project)
    first = lines.index(bodies[0][0])
    assert bodies[0]["path"] == path
    assert WINDOW.fullmatch(lines[first + 1]) and lines[first + 1].startswith("  golden:   '")
    assert WINDOW.fullmatch(lines[first + 2]) and lines[first + 2].startswith("  replayed: '")
    assert new_text in lines[first + 2] and new_text not in lines[first + 1]
    # around them: the stale lock, the case's stale bundle, calls.md and the verdict
    assert lines[0].startswith(f"{LOCK} is stale: it records bundle ")
    assert lines[1].startswith("golden/identical-context was built from bundle ")
    assert all(FINDING.fullmatch(line) or WINDOW.fullmatch(line) for line in lines[2:-4])
    # calls.md first differs in its bundle line, where the two digests part: the byte
    # depends on how many leading hex digits they happen to share
    stale = BUILT_FROM.match(lines[1])
    assert stale is not None
    recorded, built = stale["recorded"], stale["built"]
    shared = next(i for i, (old, new) in enumerate(zip(recorded, built, strict=True)) if old != new)
    byte = (project / CASE / "calls.md").read_bytes().index(recorded.encode()) + shared
    assert lines[-4].startswith(f"identical-context/calls.md: differs at line 7, byte {byte} ")
    assert lines[-1] == (
        f"prefixlock golden: 1 case(s) built from another bundle, {len(bodies) + 1} stale"
        " golden file(s); review the change and run `prefixlock update`"
    )
    # with --full: the whole bodies, as before
    code, _, full = _run(capsys, "golden", "--check", "--full")
    assert code == 1 and len(full) > 4 * len(err)
    assert "identical-context/anthropic/0001.json: first differing byte at offset" in full


def test_a_window_escapes_control_characters() -> None:
    from prefixlock.review.golden import finding

    golden = b"line one\nline two\x1b[31m and \xe2\x80\xae more\n"
    replayed = b"line one\nline 2\n"
    assert finding("calls.md", golden, replayed) == [
        "calls.md: differs at line 2, byte 14 (golden 36 bytes, replayed 16)",
        "  golden:   'line one\\nline two\\u001b[31m and \\u202e more\\n'",
        "  replayed: 'line one\\nline 2\\n'",
    ]
    # a window never cuts a UTF-8 character in two
    long = "é" * 40
    text = finding("x", f"{long}a{long}".encode(), f"{long}b{long}".encode())
    assert text[1] == f"  golden:   '\u2026{'é' * 16}a{'é' * 23}\u2026'"


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_diff_text_of_one_edit_is_bounded(
    project: Path, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    identity = ("-c", "user.email=t@t", "-c", "user.name=t", "-c", "commit.gpgsign=false")
    for args in (("init", "-q"), ("add", "-A"), (*identity, "commit", "-q", "-m", "start")):
        subprocess.run(["git", *args], check=True, capture_output=True)
    EDITS[edit][0](project)
    assert main(["update"]) == 0
    code, out, err = _run(capsys, "diff", "HEAD", "WORKTREE")
    assert code in (0, 1) and len((out + err).encode("utf-8")) <= 20_000
    assert out.splitlines()[-1].startswith("deployment impact: ")
    assert "PREFIX BREAK at " + EDITS[edit][1] in out


# --- check and update -----------------------------------------------------------------


def test_check_of_a_clean_project_is_one_table(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, "check") == (0, _clean_table(project), "")


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_check_then_update_then_check(
    project: Path, capsys: pytest.CaptureFixture[str], edit: str
) -> None:
    old = _digest(project)
    EDITS[edit][0](project)
    code, out, err = _run(capsys, "check", "--no-hash-seed")
    assert code == 1 and len(out.encode("utf-8")) <= 20_000
    lines = out.splitlines()
    built = re.search(r"the specs build (sha256:[0-9a-f]{64})", out)
    assert built is not None
    new = built[1]
    assert lines[0] == (
        f"build --check: {LOCK} is stale: it records bundle {old}, the specs build {new};"
        " run `prefixlock update`"
    )
    assert lines[1] == (
        f"golden --check: golden/identical-context was built from bundle {old}, the specs"
        f" build {new} (the lock records {old}); run `prefixlock update`"
    )
    # the stale lock is the build step's finding alone
    assert sum(LOCK + " is stale" in line for line in lines) == 1
    assert lines[-5:] == [
        "",
        "step                       result   summary",
        f"prefixlock build --check   finding  {LOCK} is out of date",
        f"prefixlock golden --check  finding  1 case: {len(_bodies(project)) + 1} stale golden"
        " files, 1 built from another bundle",
        f"prefixlock verify          ok       1 scenario x {len(_providers(project))} providers:"
        " every invariant holds",
    ]
    assert err == (
        "prefixlock check: build --check, golden --check found something; review it and, if"
        " the change is intended, run `prefixlock update` and commit the result\n"
    )

    code, out, err = _run(capsys, "update")
    assert (code, err) == (0, "")
    calls: dict[str, list[str]] = {}
    for body in _bodies(project):  # e.g. anthropic 0001-0003: every call of every provider
        _, name, file = body.split("/")
        calls.setdefault(name, []).append(file.removesuffix(".json"))
    updated = ", ".join(f"{name} {found[0]}-{found[-1]}" for name, found in calls.items())
    assert out.splitlines()[0] == f"{LOCK}: bundle {old} -> {new}"
    assert out.splitlines()[1].startswith("  changed parts: ")
    assert out.splitlines()[2:] == [
        "wrote build/ (the parts and manifest.json)",
        f"updated {CASE}/: {updated}, calls.md",
        "1 golden case, 1 updated",
    ]
    assert _digest(project) == new
    assert _run(capsys, "check", "--no-hash-seed") == (0, _clean_table(project), "")
    # a second update changes nothing, and says so
    assert _run(capsys, "update") == (
        0,
        f"{LOCK}: up to date (bundle {new})\nwrote build/ (the parts and manifest.json)\n"
        "1 golden case, 0 updated\n",
        "",
    )


def test_update_after_golden_update_alone_rewrites_only_the_lock(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The trap of issue 42: `golden --update` alone left a stale lock that `golden
    --check` and `verify` passed. Now both name it, and `check` fails on it."""
    old = _digest(project)
    EDITS["template"][0](project)
    assert main(["golden", "--update"]) == 0
    code, out, err = _run(capsys, "golden", "--check")
    built = re.search(r"the specs build (sha256:[0-9a-f]{64})", err)
    assert built is not None
    stale = (
        f"{LOCK} is stale: it records bundle {old}, the specs build {built[1]};"
        " run `prefixlock update`"
    )
    assert (code, out, err) == (
        1,
        "",
        f"{stale}\nprefixlock golden: every golden file matches a fresh replay, but {LOCK}"
        " is stale\n",
    )
    code, out, _ = _run(capsys, "verify", "--no-hash-seed")
    assert code == 1
    assert out.splitlines()[-3:] == [
        stale,
        "",
        f"1 scenario(s) x {len(_providers(project))} provider(s): every invariant holds, but"
        " the lock is stale",
    ]
    code, out, _ = _run(capsys, "check", "--no-hash-seed")
    assert code == 1 and out.splitlines()[0] == f"build --check: {stale}"
    assert out.splitlines()[-2:] == [
        "prefixlock golden --check  ok       1 case: every golden file matches a fresh replay",
        f"prefixlock verify          ok       1 scenario x {len(_providers(project))} providers:"
        " every invariant holds",
    ]
    code, out, _ = _run(capsys, "update")
    assert out.splitlines()[-2:] == [
        "wrote build/ (the parts and manifest.json)",
        "1 golden case, 0 updated",
    ]
    assert _run(capsys, "check", "--no-hash-seed")[0] == 0


def test_check_and_update_of_specs_that_do_not_build_are_bad_input(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _replace(project / TEMPLATE, "{{ query }}", "{{ qeury }}")
    lock = (project / LOCK).read_bytes()
    error = (
        f"{TEMPLATE}:43: runtime template uses unknown variable 'qeury' (did you mean 'query'?"
        " runtime templates may use only: action_context, mode, open_files, query,"
        " selected_context, timestamp)"
    )
    assert _run(capsys, "check") == (2, "", f"{error}\nprefixlock check: 1 error\n")
    assert _run(capsys, "update") == (2, "", f"{error}\nprefixlock update: 1 error\n")
    assert (project / LOCK).read_bytes() == lock and not (project / "build").exists()


def test_check_reports_a_bad_scenario_as_bad_input_and_runs_every_step(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = project / CASE / "scenario.yaml"
    _replace(scenario, "mode: agent", "mode: agnet")
    code, out, err = _run(capsys, "check", "--no-hash-seed")
    assert code == 2
    lines = out.splitlines()
    problem = [line for line in lines if line.startswith("golden --check: ")]
    assert len(problem) == 1 and "unknown mode 'agnet' (did you mean 'agent'?" in problem[0]
    assert lines[-4:] == [
        "step                       result     summary",
        "prefixlock build --check   ok         prefixlock.lock records the bundle the specs build",
        "prefixlock golden --check  bad input  1 error in the input",
        "prefixlock verify          bad input  1 error in the input",
    ]
    assert err == "prefixlock check: bad input in golden --check, verify; fix the errors above\n"
    # update writes nothing when a case does not load
    lock = (project / LOCK).read_bytes()
    assert _run(capsys, "update")[0] == 2
    assert (project / LOCK).read_bytes() == lock and not (project / "build").exists()


# --- the documented CI and hooks use commands that exist --------------------------------

REPO = Path(__file__).resolve().parents[1]


def _parses(command: str) -> bool:
    from prefixlock.cli.commands import _parser

    words = command.split()
    assert words[0] == "prefixlock", command
    try:
        _parser().parse_args(words[1:])
    except SystemExit:
        return False
    return True


def test_the_hooks_and_the_ci_recipes_run_the_gate() -> None:
    hooks = (REPO / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    entries = re.findall(r"^  entry: (.+)$", hooks, re.M)
    assert entries == ["prefixlock check --no-hash-seed", "prefixlock build --check"]
    ci = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    workflow = re.findall(r"^ +- run: (prefixlock .+?)\s*(?:#.*)?$", ci, re.M)
    workflow += re.findall(r"^ +run: (prefixlock [a-z]+)$", ci, re.M)
    assert workflow[:2] == ["prefixlock check", "prefixlock update"]
    assert "\nprefixlock check\nprefixlock update > /dev/null\n" in ci  # the shell recipe
    for command in [*entries, *workflow[:2]]:
        assert _parses(command), command
    assert ".venv/bin/prefixlock check" in (REPO / ".ci" / "run").read_text(encoding="utf-8")


def test_check_and_update_without_golden_cases(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.rmtree(project / "golden")
    assert _run(capsys, "check") == (
        0,
        "step                       result   summary\n"
        "prefixlock build --check   ok       prefixlock.lock records the bundle the specs build\n"
        "prefixlock golden --check  skipped  no golden/*/scenario.yaml\n"
        "prefixlock verify          skipped  no golden/*/scenario.yaml\n",
        "",
    )
    digest = _digest(project)
    assert _run(capsys, "update") == (
        0,
        f"{LOCK}: up to date (bundle {digest})\nwrote build/ (the parts and manifest.json)\n"
        "no golden cases\n",
        "",
    )
