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
