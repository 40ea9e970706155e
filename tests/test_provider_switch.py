"""A scenario that declares the providers it starts on (``providers:``) and switches
provider mid-session: from the ``switch`` on, every replay's calls go to that provider
and model, through the library's failover path (the parts follow the per-kind rules of
``prefixlock.runtime.failover``), a cache reset in ``calls.md`` and ``verify``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from prefixlock.bench.economics import long_session
from prefixlock.cache.simulator import Simulation
from prefixlock.core.errors import SpecErrors, UsageError
from prefixlock.review.compare import CONTENT_CHANGE
from prefixlock.review.diff.folders import diff_folders
from prefixlock.review.diff.sides import Side
from prefixlock.review.policies import price_session, scenario_calls
from prefixlock.review.render import render_calls
from prefixlock.review.replay import replay, replay_bodies, serialize_calls, write_bodies
from prefixlock.review.scenario import load_scenario
from prefixlock.review.verify import simulate_calls, verify_scenario

REPO = Path(__file__).resolve().parents[1]
LONG = "Read the module, then its tests, then explain the failure in detail. " * 40

STEPS = f"""
  - user: {{event: u1, query: "{LONG}", timestamp: "2026-03-02T09:00:00Z"}}
  - assistant:
      thinking: [{{provider: anthropic, text: "Check a.py.", signature: "EqQBCkYI"}}]
      text: Reading.
      tool_calls: [{{id: c1, name: read_file, arguments: {{path: a.py}}}}]
  - tool_results: [{{call_id: c1, output: "x = 1", timestamp: "2026-03-02T09:00:20Z"}}]
  - assistant: {{text: Fixed.}}
  - switch: {{provider: openai-responses, model: gpt-5.5}}
  - user: {{event: u2, query: "And the tests?", timestamp: "2026-03-02T09:02:00Z"}}
  - assistant: {{text: "They pass."}}
  - user: {{event: u3, query: "Thanks.", timestamp: "2026-03-02T09:03:00Z"}}
"""


def _scenario(tmp_path: Path, head: str = "providers: [anthropic]\n", steps: str = STEPS) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        f"name: claude then gpt\nconversation: conv-ps\nbundle: {REPO}\n{head}steps:{steps}",
        encoding="utf-8",
    )
    return path


def test_a_provider_switch_sends_later_calls_to_that_provider(tmp_path: Path) -> None:
    """Calls 1-2 are Anthropic's bodies, calls 3-4 OpenAI Responses' bodies for gpt-5.5,
    byte for byte what the Responses replay of the same conversation sends after a
    switch to gpt-5.5 (the Claude thinking dropped by the failover rule; text, call and
    result kept)."""
    scenario = load_scenario(_scenario(tmp_path))
    assert scenario.providers == ("anthropic",)
    bodies = replay_bodies(scenario, ["anthropic"])["anthropic"]
    # the same steps without `providers:`: the switch changes the Responses replay's model
    (tmp_path / "legacy").mkdir()
    legacy_path = _scenario(tmp_path / "legacy", head="")
    legacy = replay_bodies(load_scenario(legacy_path), ["anthropic", "openai-responses"])
    assert bodies[:2] == legacy["anthropic"][:2]
    assert bodies[2:] == legacy["openai-responses"][2:]
    third = json.loads(bodies[2])
    assert third["model"] == "gpt-5.5" and "input" in third
    assert "EqQBCkYI" not in bodies[2].decode() and "Check a.py." not in bodies[2].decode()
    assert "EqQBCkYI" in bodies[1].decode()  # Claude's own body keeps its thinking
    # the history is never rewritten: the thinking part is still there
    calls = replay(scenario)
    assert any(
        "EqQBCkYI" in json.dumps(part.value)
        for m in calls[2].request.messages
        for part in m.parts
        if hasattr(part, "value")
    )


def test_verify_and_calls_md_show_the_provider_switch_as_a_cache_reset(tmp_path: Path) -> None:
    scenario = load_scenario(_scenario(tmp_path))
    rows, failures = verify_scenario(scenario, ["anthropic"])
    assert failures == []
    (row,) = rows
    assert row.prefix_stable
    assert row.switches == (
        "call 3: anthropic/claude-sonnet-5-5 → openai-responses/gpt-5.5: cache namespace reset",
    )
    calls = replay(scenario)
    page = render_calls(scenario, calls, serialize_calls(calls, ["anthropic"]))
    lines = page.splitlines()
    assert (
        "- anthropic → openai-responses `gpt-5.5`: CACHE RESET (switch: "
        "anthropic/claude-sonnet-5-5 → openai-responses/gpt-5.5: cache namespace reset)"
    ) in [line.split(" · ")[0] for line in lines]
    assert any(
        line.startswith("- anthropic → openai-responses `gpt-5.5`: tail append (+")
        for line in lines
    )


def test_a_switch_to_a_provider_the_bundle_does_not_configure_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    steps = STEPS.replace("provider: openai-responses, model", "provider: openai-respones, model")
    _scenario(tmp_path, head="providers: [anthropic, gemni]\n", steps=steps)
    with pytest.raises(SpecErrors) as caught:
        load_scenario(Path("s.yaml"))
    messages = [str(e) for e in caught.value.errors]
    note = messages[0].rsplit(" (bundle: ", 1)[1]
    assert messages == [
        "s.yaml:4:24: $.providers[1]: provider 'gemni' is not configured (did you mean "
        f"'gemini'?) (bundle: {note}",
        "s.yaml:13:24: $.steps[4].switch.provider: provider 'openai-respones' is not "
        f"configured (did you mean 'openai-responses'?) (bundle: {note}",
    ]


def test_the_bench_economics_refuse_a_provider_switch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(verify --observed prices one: tests/test_observed_switch.py.)"""
    monkeypatch.chdir(tmp_path)
    _scenario(tmp_path)
    why = "does not price a provider switch yet (call 3: anthropic → openai-responses; "
    with pytest.raises(UsageError) as caught:
        long_session(["anthropic"], path=Path("s.yaml"))
    assert str(caught.value) == f"s.yaml: the bench economics {why}verify and calls.md do)"


def test_a_declared_scenarios_model_switch_is_priced_at_its_model(tmp_path: Path) -> None:
    """With `providers:`, a switch within the provider the calls are on is a model
    switch of every replay: verify --policy prices it as the same switch without
    `providers:` (the replay of that provider alone)."""
    steps = STEPS.replace(
        "provider: openai-responses, model: gpt-5.5", "provider: anthropic, model: claude-opus-4-6"
    )
    declared = load_scenario(_scenario(tmp_path, steps=steps))
    (tmp_path / "legacy").mkdir()
    legacy = load_scenario(_scenario(tmp_path / "legacy", head="", steps=steps))
    assert price_session(scenario_calls(declared), "anthropic") == price_session(
        scenario_calls(legacy), "anthropic"
    )
    unswitched = load_scenario(
        _scenario(tmp_path / "legacy", head="", steps=STEPS.replace("  - switch:", "  # - switch:"))
    )
    assert price_session(scenario_calls(unswitched), "anthropic") != price_session(
        scenario_calls(legacy), "anthropic"
    )


def test_diff_reads_a_switched_calls_bodies_as_their_providers(tmp_path: Path) -> None:
    """`prefixlock diff` of the golden provider-switch case after its last query changed:
    call 5 (an OpenAI Responses body in the anthropic folder) differs in its last
    message only: a rendered-content change, priced as verify prices it, not a root
    change read through Anthropic's keys."""
    case = REPO / "golden" / "provider-switch"
    old, new = tmp_path / "old" / "provider-switch", tmp_path / "new" / "provider-switch"
    shutil.copytree(case, old)
    shutil.copytree(case, new)
    text = (new / "scenario.yaml").read_text(encoding="utf-8")
    changed = text.replace("Thanks. Run the invoice tests.", "Thanks. Now run the tests.")
    assert changed != text
    (new / "scenario.yaml").write_text(changed, encoding="utf-8")
    scenario = load_scenario(new / "scenario.yaml")
    write_bodies(serialize_calls(replay(scenario), ["anthropic"]), new)
    sides = [Side(str(p.parent), "folder", p.parent, REPO) for p in (old, new)]
    report = diff_folders(*sides)
    ((pair,),) = [report.pairs]
    assert [call.verdict for call in pair.calls][:4] == ["unchanged"] * 4
    fifth = pair.calls[4]
    assert fifth.comparison is not None and fifth.comparison.impact == CONTENT_CHANGE
    calls = replay(scenario)
    bodies = serialize_calls(calls, ["anthropic"])["anthropic"]
    priced = simulate_calls(scenario, calls, "anthropic", bodies, "claude-sonnet-5-5")
    assert pair.new_report is not None and pair.new_report.cost == priced.cost


def test_verify_policy_prices_a_provider_switch_on_each_provider(tmp_path: Path) -> None:
    """Calls 1-2 priced as Anthropic's bodies in claude-sonnet-5-5's namespace, calls 3-4
    as OpenAI's in gpt-5.5's (call 3 reads nothing: a new provider)."""
    scenario = load_scenario(_scenario(tmp_path))
    bodies = replay_bodies(scenario, ["anthropic"])["anthropic"]
    calls = scenario_calls(scenario)
    claude = Simulation("anthropic", model="claude-sonnet-5-5")
    gpt = Simulation("openai-responses", model="gpt-5.5")
    priced = [claude.add(bodies[0], calls[0].at), claude.add(bodies[1], calls[1].at)]
    priced += [gpt.add(bodies[2], calls[2].at), gpt.add(bodies[3], calls[3].at)]
    assert priced[2].cache_read_tokens == 0 and priced[3].cache_read_tokens > 0
    figures = price_session(calls, "anthropic")
    assert figures["policies"]["configured"]["cost"] == float(sum(p.cost for p in priced))
    assert figures["uncached"] == float(sum(p.uncached_cost for p in priced))
    assert set(figures["policies"]) == {
        "configured",
        "5m",
        "1h",
        "auto",
        "keepalive",
        "auto+keepalive",
    }


def test_a_retry_after_a_switch_goes_to_the_new_provider(tmp_path: Path) -> None:
    """A gateway's retry of u1 on another provider: the same request, that provider's
    body (not the original's bytes), shown as the cache reset it is."""
    steps = f"""
  - user: {{event: u1, query: "{LONG}", timestamp: "2026-03-02T09:00:00Z"}}
  - switch: {{provider: openai-responses}}
  - retry: u1
  - assistant: {{text: Done.}}
  - user: {{event: u2, query: "Thanks.", timestamp: "2026-03-02T09:01:00Z"}}
"""
    scenario = load_scenario(_scenario(tmp_path, steps=steps))
    rows, failures = verify_scenario(scenario, ["anthropic"])
    assert failures == []
    assert rows[0].switches == (
        "call 2: anthropic/claude-sonnet-5-5 → openai-responses/gpt-5.6-sol: cache namespace reset",
    )
    calls = replay(scenario)
    bodies = serialize_calls(calls, ["anthropic"])
    assert json.loads(bodies["anthropic"][1])["model"] == "gpt-5.6-sol"
    lines = [line.split(" · ")[0] for line in render_calls(scenario, calls, bodies).splitlines()]
    assert (
        "- anthropic: retry of call 1 after a switch: CACHE RESET (switch: "
        "anthropic/claude-sonnet-5-5 → openai-responses/gpt-5.6-sol: cache namespace reset)"
    ) in lines
