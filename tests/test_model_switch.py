"""A scenario's ``switch`` step: a provider's calls go to another model from there on, and
``calls.md``, ``verify`` and the cache simulator treat it as the cache reset it is (each
(provider, model) is its own cache namespace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prefixlock.cli.commands import main
from prefixlock.core.errors import SpecErrors
from prefixlock.review.render import render_calls
from prefixlock.review.replay import replay, serialize_calls
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import simulate_calls, verify_scenario
from prefixlock.spec.build import build_bundle

REPO = Path(__file__).resolve().parents[1]
NAMES = ("anthropic", "gemini", "openai-chat")
LONG = "Read the module, then its tests, then explain the failure in detail. " * 40

STEPS = f"""
  - user: {{event: u1, query: "{LONG}"}}
  - assistant: {{text: "First answer."}}
  - switch: {{provider: anthropic, model: claude-opus-4-6}}
  - switch: {{provider: gemini, model: gemini-2.5-pro}}
  - user: {{event: u2, query: "And now?"}}
  - assistant: {{text: "Second answer."}}
  - switch: {{provider: anthropic}}
  - user: {{event: u3, query: "Back again."}}
"""


def _scenario(tmp_path: Path, steps: str = STEPS, name: str = "switch.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        f"name: model switch\nconversation: conv-switch\nbundle: {REPO}\nsteps:{steps}",
        encoding="utf-8",
    )
    return path


@pytest.fixture(scope="module")
def switched(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, list[object], dict]:  # type: ignore[type-arg]
    folder = tmp_path_factory.mktemp("switch")
    scenario = load_scenario(_scenario(folder))
    calls = replay(scenario)
    return scenario, calls, serialize_calls(calls, NAMES)


def test_a_switch_changes_that_providers_model_only_and_nothing_else(
    switched: tuple,
    tmp_path: Path,  # type: ignore[type-arg]
) -> None:
    _, calls, bodies = switched
    plain_path = _scenario(tmp_path, STEPS.replace("  - switch:", "  # - switch:"), "plain.yaml")
    plain_calls = replay(load_scenario(plain_path))
    plain = serialize_calls(plain_calls, NAMES)
    models = [json.loads(b)["model"] for b in bodies["anthropic"]]
    assert models == ["claude-sonnet-5-5", "claude-opus-4-6", "claude-sonnet-5-5"]
    assert [json.loads(b)["model"] for b in bodies["openai-chat"]] == ["gpt-5.6-sol"] * 3
    assert bodies["openai-chat"] == plain["openai-chat"]
    # Gemini names its model in the URL, not the body: the body is the same.
    assert bodies["gemini"] == plain["gemini"]
    assert bodies["anthropic"][1] == plain["anthropic"][1].replace(
        b'"model":"claude-sonnet-5-5"', b'"model":"claude-opus-4-6"', 1
    )
    assert bodies["anthropic"][2] == plain["anthropic"][2]
    assert [c.target("gemini") for c in calls] == [
        "gemini-4-argon",
        "gemini-2.5-pro",
        "gemini-2.5-pro",
    ]


def test_calls_md_shows_the_switch_as_a_cache_reset(switched: tuple) -> None:  # type: ignore[type-arg]
    scenario, calls, bodies = switched
    page = render_calls(scenario, calls, bodies)
    statuses = [
        line.split(" · ")[0]
        for line in page.split("\n")
        if line.startswith(("- anthropic", "- gemini", "- openai-chat"))
    ]
    assert statuses == [
        "- anthropic: first call",
        "- gemini: first call",
        "- openai-chat: first call",
        "- anthropic `claude-opus-4-6`: CACHE RESET (switch: anthropic/claude-sonnet-5-5 →"
        " anthropic/claude-opus-4-6: cache namespace reset)",
        "- gemini `gemini-2.5-pro`: CACHE RESET (switch: gemini/gemini-4-argon →"
        " gemini/gemini-2.5-pro: cache namespace reset)",
        "- openai-chat: tail append (+2 messages)",
        "- anthropic: CACHE RESET (switch: anthropic/claude-opus-4-6 →"
        " anthropic/claude-sonnet-5-5: cache namespace reset)",
        "- gemini `gemini-2.5-pro`: tail append (+2 messages)",
        "- openai-chat: tail append (+2 messages)",
    ]
    assert (
        "Steps: 1 assistant · 2 switch anthropic → `claude-opus-4-6` · 3 switch gemini →"
        " `gemini-2.5-pro` · 4 user `u2`"
    ) in page.split("\n")
    assert "| anthropic | 0 | 2 | 0 | 0 |" in page


def test_each_provider_and_model_is_its_own_cache_namespace(switched: tuple) -> None:  # type: ignore[type-arg]
    scenario, calls, bodies = switched
    for name in ("anthropic", "gemini"):
        report = simulate_calls(scenario, calls, name, bodies[name], calls[0].target(name))
        assert report.calls[1].cache_read_tokens == 0, name  # a new model: nothing cached
        assert report.calls[2].cache_read_tokens > 0, name  # the same model again: read
    anthropic = simulate_calls(
        scenario, calls, "anthropic", bodies["anthropic"], "claude-sonnet-5-5"
    ).calls
    # Back on the first model: its entries from call 1 are read again.
    assert anthropic[2].cache_read_tokens == anthropic[0].cache_write_tokens > 0


def test_verify_passes_a_switch_and_names_each_switch(switched: tuple) -> None:  # type: ignore[type-arg]
    scenario, _, _ = switched
    rows, failures = verify_scenario(scenario, list(NAMES))
    assert failures == []
    assert [r.prefix_stable for r in rows] == [True] * len(NAMES)
    assert {r.provider: r.switches for r in rows} == {
        "anthropic": (
            "call 2: anthropic/claude-sonnet-5-5 → anthropic/claude-opus-4-6: cache namespace"
            " reset",
            "call 3: anthropic/claude-opus-4-6 → anthropic/claude-sonnet-5-5: cache namespace"
            " reset",
        ),
        "gemini": ("call 2: gemini/gemini-4-argon → gemini/gemini-2.5-pro: cache namespace reset",),
        "openai-chat": (),
    }


def test_the_verify_command_prints_the_switches_under_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _scenario(tmp_path)
    code = main(["verify", str(path), "--provider", "anthropic", "--no-hash-seed"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[2:4] == [
        "  switch switch at call 2: anthropic/claude-sonnet-5-5 → anthropic/claude-opus-4-6:"
        " cache namespace reset",
        "  switch switch at call 3: anthropic/claude-opus-4-6 → anthropic/claude-sonnet-5-5:"
        " cache namespace reset",
    ]
    assert lines[1].startswith("switch    anthropic")


def test_a_switch_to_a_provider_the_bundle_does_not_configure_is_named(tmp_path: Path) -> None:
    path = _scenario(
        tmp_path,
        '\n  - user: {event: u1, query: "hi"}\n  - switch: {provider: antropic, model: x}\n',
    )
    with pytest.raises(SpecErrors) as caught:
        load_scenario(path)
    (error,) = caught.value.errors
    digest = build_bundle(REPO).digest[: len("sha256:") + 12]
    assert str(error) == (
        f"{path}:6:24: $.steps[1].switch.provider: provider 'antropic' is not configured"
        f" (did you mean 'anthropic'?) (bundle: {REPO}, {digest})"
    )


def test_a_switch_step_is_checked_by_the_schema(tmp_path: Path) -> None:
    path = _scenario(
        tmp_path, "\n  - switch: {model: claude-opus-4-6, provider: anthropic, x: 1}\n"
    )
    with pytest.raises(SpecErrors) as caught:
        load_scenario(path)
    assert [str(e) for e in caught.value.errors] == [
        f"{path}:5:59: $.steps[0].switch: unknown key 'x' (expected one of: model, provider)"
    ]
