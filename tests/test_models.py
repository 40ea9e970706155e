"""Current models (issue 45, item 6): a retired or unknown ``model`` in
``rules/providers.yaml`` is a build warning naming the current ones; the bundled example
names current models."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from prefixlock.cli import main
from prefixlock.core.models import model_warning
from prefixlock.spec.build import build_warnings

ROOT = Path(__file__).resolve().parent.parent
CLAUDE = "claude-opus-5-5, claude-sonnet-5-5, claude-haiku-5-5"


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("anthropic", "claude-sonnet-5-5"),
        ("anthropic", "claude-opus-5-5-20261001"),
        ("bedrock-converse", "anthropic.claude-sonnet-5-5"),
        ("bedrock-converse", "us.anthropic.claude-sonnet-5-5-v1:0"),
        ("bedrock-converse", "arn:aws:bedrock:us-east-1:1:application-inference-profile/x"),
        ("gemini", "gemini-4-argon"),
        ("openai-responses", "gpt-5.6-2026-08-01"),
        ("openai-chat", "gpt-4.1"),
    ],
)
def test_a_current_or_opaque_model_has_no_warning(provider: str, model: str) -> None:
    assert model_warning(provider, model) is None


def test_a_retired_model_is_named_with_its_date_and_the_current_ones() -> None:
    assert model_warning("anthropic", "claude-sonnet-4-5-20250929") == (
        "'claude-sonnet-4-5-20250929' was retired (2026-11-30; Anthropic model deprecations "
        f"(issue 45)): requests to it fail; current models: {CLAUDE}"
    )
    assert model_warning("bedrock-converse", "anthropic.claude-sonnet-4-5-20250929-v1:0") == (
        "'anthropic.claude-sonnet-4-5-20250929-v1:0' was retired (2026-11-30; Anthropic "
        "model deprecations (issue 45); on Bedrock NOT VERIFIED): requests to it fail; "
        "current models: anthropic.claude-opus-5-5, anthropic.claude-sonnet-5-5, "
        "anthropic.claude-haiku-5-5"
    )
    assert model_warning("gemini", "gemini-2.5-pro") == (
        "'gemini-2.5-pro' was retired (2026; issue 45 (shut down)): requests to it fail; "
        "current models: gemini-4-argon, gemini-3.8-flash"
    )
    # a minor version is another model: Sonnet 4.6 is neither retired Sonnet 4 nor current
    assert model_warning("anthropic", "claude-sonnet-4-6") == (
        "'claude-sonnet-4-6' is not a model prefixlock knows for anthropic (its cache rules "
        f"fall back to the provider's defaults); current models: {CLAUDE}"
    )


def test_the_bundled_example_names_current_models() -> None:
    assert build_warnings(ROOT) == []


def test_build_warns_and_still_builds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for part in ("rules", "prompt"):
        shutil.copytree(ROOT / part, tmp_path / part)
    path = tmp_path / "rules" / "providers.yaml"
    text = path.read_text(encoding="utf-8").replace(
        "model: claude-sonnet-5-5", "model: claude-sonnet-4-5"
    )
    path.write_text(text, encoding="utf-8")
    line = text.splitlines().index("    model: claude-sonnet-4-5") + 1
    assert main(["build", "--root", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert err.splitlines()[0] == (
        f"{path}:{line}:12: warning: $.providers.anthropic.model: 'claude-sonnet-4-5' was "
        "retired (2026-11-30; Anthropic model deprecations (issue 45)): requests to it "
        f"fail; current models: {CLAUDE}"
    )


def _spec_with(tmp_path: Path, old: str, new: str) -> Path:
    for part in ("rules", "prompt"):
        shutil.copytree(ROOT / part, tmp_path / part)
    path = tmp_path / "rules" / "providers.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path


def test_api_version_2026_10_21_refuses_the_sampling_parameters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _spec_with(
        tmp_path,
        "      cache_ttl: auto\n\n  # OpenAI",
        "      cache_ttl: auto\n      anthropic_version: '2026-10-21'\n"
        "      temperature: 1.0\n      top_k: 5\n\n  # OpenAI",
    )
    assert path.is_file()
    assert main(["build", "--root", str(tmp_path)]) == 2
    lines = path.read_text(encoding="utf-8").splitlines()
    err = capsys.readouterr().err.splitlines()
    why = (
        "Anthropic API version 2026-10-21 removes {key!r}: the service answers 400 ('Extra "
        "inputs are not permitted', even at its default value); remove it, or set "
        "anthropic_version: 2023-06-01"
    )
    for key in ("temperature", "top_k"):
        line = next(i for i, text in enumerate(lines, 1) if text.startswith(f"      {key}:"))
        column = len(f"      {key}: ") + 1
        where = f"rules/providers.yaml:{line}:{column}"
        assert f"{where}: $.providers.anthropic.options.{key}: {why.format(key=key)}" in err


def test_the_api_version_option_is_never_sent(tmp_path: Path) -> None:
    from prefixlock import providers
    from prefixlock.spec.build import build_bundle

    _spec_with(
        tmp_path,
        "      cache_ttl: auto\n\n  # OpenAI",
        "      cache_ttl: auto\n      anthropic_version: '2026-10-21'\n\n  # OpenAI",
    )
    from conv_helpers import user
    from prefixlock.runtime.conversation import Conversation
    from prefixlock.store.contract import MemoryStore

    conv = Conversation.open(MemoryStore(), build_bundle(tmp_path), "c")
    body = providers.get("anthropic").serialize(conv.handle(user("u1", conversation="c")))
    assert b"anthropic_version" not in body and b"2026-10-21" not in body
