"""Every unknown key, mode, tool, provider, tokenizer, format, command and spec file name
gets a "did you mean" when a known name is close (difflib), else the list of known ones."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from conv_helpers import REPO
from prefixlock.cli.commands import main
from prefixlock.core.errors import SpecErrors, UnknownNameError
from prefixlock.core.names import hint
from prefixlock.review.scenario import load_scenario
from prefixlock.spec.build import build_bundle
from prefixlock.spec.loader import load_yaml_text
from prefixlock.spec.validate import validate_document


def test_hint_names_the_closest_or_lists_the_known_in_order() -> None:
    assert hint("reveiw", ["plan", "review"]) == "did you mean 'review'?"
    assert hint("zzz", ["plan", "ask"], "modes") == "modes: plan, ask"
    assert hint("zzz", []) == "none are defined"


def _problems(text: str, schema: str, file: str) -> list[str]:
    return [str(e) for e in validate_document(load_yaml_text(text, file), schema)]


def test_an_unknown_spec_key_close_to_a_known_one() -> None:
    text = "rules:\n  - name: a\n    kind: always\n    body: x\n    descripton: d\n"
    assert _problems(text, "rules", "rules/rules.yaml") == [
        "rules/rules.yaml:5:5: $.rules[0]: unknown key 'descripton' (did you mean 'description'?)"
    ]


def test_an_unknown_enum_value_close_to_a_known_one() -> None:
    text = "rules:\n  - name: a\n    kind: alwyas\n    body: x\n"
    assert _problems(text, "rules", "rules/rules.yaml") == [
        "rules/rules.yaml:3:11: $.rules[0].kind: expected one of always, auto, agent, manual; "
        "got 'alwyas' (did you mean 'always'?)"
    ]


def _scenario_errors(tmp_path: Path, steps: str) -> list[str]:
    path = tmp_path / "s.yaml"
    text = f"name: t\nconversation: c\nbundle: {REPO}\nsteps:\n{steps}"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecErrors) as info:
        load_scenario(path)
    return [str(e).replace(path.as_posix(), "s.yaml") for e in info.value.errors]


def test_an_unknown_scenario_mode_and_step_kind(tmp_path: Path) -> None:
    errors = _scenario_errors(
        tmp_path, "  - user: {event: u1, query: q, mode: plna}\n  - usr: {event: u2, query: q}\n"
    )
    assert errors == [
        "s.yaml:5:39: $.steps[0].user.mode: unknown mode 'plna' (did you mean 'plan'?) "
        f"(bundle: {REPO}, sha256:{build_bundle(REPO).digest[7:19]})",
        "s.yaml:6:5: $.steps[1]: unknown key 'usr' (did you mean 'user'?)",
    ]


def test_an_unknown_bundle_mode() -> None:
    with pytest.raises(UnknownNameError) as info:
        build_bundle(REPO).mode("aks")
    assert str(info.value) == "unknown mode 'aks' (did you mean 'ask'?)"


def test_render_with_an_unknown_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["render", "--root", str(REPO), "--query", "q", "--mode", "debgu"]) == 2
    assert capsys.readouterr().err == (
        "prefixlock render: unknown mode 'debgu' (did you mean 'debug'?)\n"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["render", "--query", "q", "--provider", "gemeni"],
            "prefixlock render: error: argument --provider: "
            "unknown provider 'gemeni' (did you mean 'gemini'?)",
        ),
        (
            ["diff", "a", "b", "--provider", "openai_chat"],
            "prefixlock diff: error: argument --provider: "
            "unknown provider 'openai_chat' (did you mean 'openai-chat'?)",
        ),
        (
            ["verify", "--tokenizer", "tiktokn"],
            "prefixlock verify: error: argument --tokenizer: "
            "unknown tokenizer 'tiktokn' (did you mean 'tiktoken'?)",
        ),
        (
            ["render", "--query", "q", "--format", "messages2"],
            "prefixlock render: error: argument --format: "
            "unknown format 'messages2' (did you mean 'messages'?)",
        ),
    ],
)
def test_an_unknown_cli_name_is_a_usage_error_with_a_hint(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    assert capsys.readouterr().err.splitlines()[-1] == message


def test_an_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verfy"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("usage: prefixlock")
    assert err[-1] == "prefixlock: error: unknown command 'verfy' (did you mean 'verify'?)"


def test_an_unknown_replay_provider(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = REPO / "golden" / "context-revert" / "scenario.yaml"
    assert main(["replay", str(scenario), "--provider", "bedrock", "--digests", "x.json"]) == 2
    assert capsys.readouterr().err == (
        "prefixlock replay: unknown provider 'bedrock' (did you mean 'bedrock-converse'?)\n"
    )


def test_an_unknown_subagent_tool_in_the_spec(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(Path(__file__).parent / "data" / "specs" / "minimal", root)
    (root / "rules" / "subagents.yaml").write_text(
        "subagents:\n  - name: x\n    description: d\n    tools: [read_file, edit_fiel]\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecErrors) as info:
        build_bundle(root)
    assert [str(e) for e in info.value.errors] == [
        "rules/subagents.yaml:4:24: $.subagents[0].tools[1]: unknown tool 'edit_fiel' "
        "(did you mean 'edit_file'?)"
    ]


def test_an_unknown_subagent_tool_in_a_scenario(tmp_path: Path) -> None:
    errors = _scenario_errors(
        tmp_path,
        "  - user: {event: u1, query: q}\n"
        "  - assistant: {text: ok}\n"
        "  - user:\n"
        "      event: u2\n"
        "      query: q\n"
        "      context: {subagents: [{name: x, description: d, tools: [grep_serch]}]}\n",
    )
    assert errors == [
        "s.yaml:10:63: $.steps[2].user.context.subagents[0].tools[0]: unknown tool "
        "'grep_serch' (did you mean 'grep_search'?) "
        f"(bundle: {REPO}, sha256:{build_bundle(REPO).digest[7:19]})"
    ]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (
            "{{ mode.remindr }}\n{{ query }}\n",
            "prompt/mini/agent/runtime.md.j2:1: undefined value: 'dict object' has no "
            "attribute 'remindr' (did you mean 'reminder'?)",
        ),
        (
            "{{ mode.reminder }}\n{{ qeury }}\n",
            "prompt/mini/agent/runtime.md.j2:2: runtime template uses unknown variable "
            "'qeury' (did you mean 'query'? runtime templates may use only: action_context, "
            "mode, open_files, query, selected_context, timestamp)",
        ),
    ],
)
def test_a_misspelt_template_name_fails_the_build_with_a_hint(
    template: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    root = tmp_path / "root"
    shutil.copytree(Path(__file__).parent / "data" / "specs" / "minimal", root)
    (root / "prompt" / "mini" / "agent" / "runtime.md.j2").write_text(template, "utf-8")
    monkeypatch.chdir(root)
    assert main(["build", "--check"]) == 2
    assert capsys.readouterr().err.splitlines() == [message, "prefixlock build: 1 error"]
