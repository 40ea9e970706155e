"""``verify --observed`` of a scenario with a provider switch (issue 48): each call's
simulated side from the simulation of the provider it went to, its observed side
priced at that provider's and model's prices."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest
from prefixlock.cache.prices import PRICE_TABLE, input_price
from prefixlock.cache.simulator import CallCache, Simulation
from prefixlock.cli import main
from prefixlock.core.errors import SpecErrors
from prefixlock.review.observed import compare_observed
from prefixlock.review.policies import scenario_calls
from prefixlock.review.replay import replay_bodies
from prefixlock.review.scenario import load_scenario

REPO = Path(__file__).resolve().parents[1]
LONG = "Read the module, then its tests, then explain the failure in detail. " * 40

SCENARIO = f"""name: claude then gpt
conversation: conv-obs-switch
bundle: {REPO}
providers: [anthropic]
steps:
  - user: {{event: u1, query: "{LONG}", timestamp: "2026-03-02T09:00:00Z"}}
  - assistant:
      text: Reading.
      tool_calls: [{{id: c1, name: read_file, arguments: {{path: a.py}}}}]
  - tool_results: [{{call_id: c1, output: "x = 1", timestamp: "2026-03-02T09:00:20Z"}}]
  - assistant: {{text: Fixed.}}
  - switch: {{provider: openai-responses, model: gpt-4.1}}
  - user: {{event: u2, query: "And the tests?", timestamp: "2026-03-02T09:02:00Z"}}
  - assistant: {{text: "They pass."}}
  - user: {{event: u3, query: "Thanks.", timestamp: "2026-03-02T09:03:00Z"}}
"""

#: Calls 1-2 billed by Anthropic (claude-sonnet-5-5, the bundle's model: the 5-minute /
#: one-hour split of ``cache_creation``), calls 3-4 by OpenAI (gpt-4.1: its
#: ``cached_tokens`` as the read, its 30-minute ``cache_write_tokens`` as the short write).
USAGE = {
    "format": "prefixlock-usage/1",
    "provider": "anthropic",
    "calls": [
        {
            "observed": {
                "uncached_tokens": 10,
                "cache_read_tokens": 0,
                "cache_write_5m_tokens": 2000,
                "cache_write_1h_tokens": 1000,
                "output_tokens": 5,
            }
        },
        {
            "observed": {
                "uncached_tokens": 20,
                "cache_read_tokens": 3000,
                "cache_write_5m_tokens": 100,
                "cache_write_1h_tokens": 0,
                "output_tokens": 5,
            }
        },
        {
            "observed": {
                "uncached_tokens": 200,
                "cache_read_tokens": 0,
                "cache_write_5m_tokens": 3000,
                "output_tokens": 5,
            }
        },
        {"observed": {"uncached_tokens": 40, "cache_read_tokens": 3200, "output_tokens": 5}},
    ],
}

# The observed costs, in base input-token units of each call's model
# (compiler/cache/rules.py): claude-sonnet-5-5 writes at 1.25x for 5 minutes, 2x for an
# hour, reads at 0.05x; gpt-4.1 writes at 1x and reads at 0.25x (OpenAI's table, not
# Claude's 1.25x and 0.1x).
#   call 1: 10 + 2000 * 1.25 + 1000 * 2 = 4510
#   call 2: 20 + 3000 * 0.05 + 100 * 1.25 = 295
#   call 3: 200 + 3000 * 1 = 3200
#   call 4: 40 + 3200 * 0.25 = 840
OBSERVED = [
    {
        "input_tokens": 3010,
        "cache_read_tokens": 0,
        "cache_write_tokens": 3000,
        "cached_share": 0.0,
        "cost": 4510.0,
    },
    {
        "input_tokens": 3120,
        "cache_read_tokens": 3000,
        "cache_write_tokens": 100,
        "cached_share": 0.9615,
        "cost": 295.0,
    },
    {
        "input_tokens": 3200,
        "cache_read_tokens": 0,
        "cache_write_tokens": 3000,
        "cached_share": 0.0,
        "cost": 3200.0,
    },
    {
        "input_tokens": 3240,
        "cache_read_tokens": 3200,
        "cache_write_tokens": 0,
        "cached_share": 0.9877,
        "cost": 840.0,
    },
]


def _files(tmp_path: Path) -> tuple[Path, Path]:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    usage = tmp_path / "s.usage.json"
    usage.write_text(json.dumps(USAGE), encoding="utf-8")
    return scenario, usage


def _priced(scenario_path: Path) -> list[CallCache]:
    """Each call's simulated side as verify --policy prices it: calls 1-2 Anthropic's
    bodies in claude-sonnet-5-5's namespace, calls 3-4 OpenAI's in gpt-4.1's."""
    scenario = load_scenario(scenario_path)
    bodies = replay_bodies(scenario, ["anthropic"])["anthropic"]
    calls = scenario_calls(scenario)
    claude = Simulation("anthropic", model="claude-sonnet-5-5")
    gpt = Simulation("openai-responses", model="gpt-4.1")
    priced = [claude.add(bodies[0], calls[0].at), claude.add(bodies[1], calls[1].at)]
    priced += [gpt.add(bodies[2], calls[2].at), gpt.add(bodies[3], calls[3].at)]
    assert priced[2].cache_read_tokens == 0  # a new provider: nothing to read
    assert priced[1].cache_read_tokens > 0 and priced[3].cache_read_tokens > 0
    return priced


def _simulated(scenario_path: Path) -> list[dict[str, object]]:
    return [
        {
            "input_tokens": p.input_tokens,
            "cache_read_tokens": p.cache_read_tokens,
            "cache_write_tokens": p.cache_write_tokens,
            "cached_share": round(p.cache_read_tokens / p.input_tokens, 4),
            "cost": round(float(p.cost), 2),
        }
        for p in _priced(scenario_path)
    ]


def test_observed_prices_each_call_at_its_provider_and_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scenario, usage = _files(tmp_path)
    simulated = _simulated(scenario)
    report = compare_observed(Path("s.yaml"), usage)
    out = report.to_json()
    assert [(row["call"], row["step"], row["provider"], row["model"]) for row in out["calls"]] == [
        (1, 0, "anthropic", "claude-sonnet-5-5"),
        (2, 2, "anthropic", "claude-sonnet-5-5"),
        (3, 5, "openai-responses", "gpt-4.1"),
        (4, 7, "openai-responses", "gpt-4.1"),
    ]
    assert [row["simulated"] for row in out["calls"]] == simulated
    assert [row["observed"] for row in out["calls"]] == OBSERVED
    assert (out["scenario"], out["provider"], out["model"]) == (
        "s.yaml",
        "anthropic",
        "claude-sonnet-5-5",
    )
    assert out["observed_calls"] == 4
    assert out["totals"]["observed"] == {
        "input_tokens": 12570,
        "cache_read_tokens": 6200,
        "cache_write_tokens": 6100,
        "cached_share": 0.4932,
        "cost": 8845.0,
    }
    sim_cost = sum(float(s["cost"]) for s in simulated)  # type: ignore[arg-type]
    assert out["totals"]["simulated"]["cost"] == pytest.approx(sim_cost, abs=0.01)


def test_observed_table_names_the_provider_and_model_sequence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _, usage = _files(tmp_path)
    priced = _priced(tmp_path / "s.yaml")
    assert main(["verify", "s.yaml", "--observed", str(usage)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "s.yaml: anthropic claude-sonnet-5-5 → openai-responses gpt-4.1"
    assert lines[1] == " call  step  sim cached obs cached    sim cost   obs cost"
    rows = [(1, 0), (2, 2), (3, 5), (4, 7)]
    observed = [(0.0, 4510), (3000 / 3120, 295), (0.0, 3200), (3200 / 3240, 840)]
    for line, (call, step), sim, (share, cost) in zip(
        lines[2:6], rows, priced, observed, strict=True
    ):
        assert line == (
            f"{call:>5} {step:>5}  {sim.cache_read_tokens / sim.input_tokens:>10.1%} "
            f"{share:>10.1%}  {float(sim.cost):>10.0f} {cost:>10.0f}"
        )
    total = sum((p.cost for p in priced), Fraction(0))
    read = sum(p.cache_read_tokens for p in priced)
    size = sum(p.input_tokens for p in priced)
    assert lines[6] == (
        f"{'total':>11}  {read / size:>10.1%} {6200 / 12570:>10.1%}  "
        f"{float(total):>10.0f} {8845:>10.0f}"
    )
    assert lines[8] == (
        "4 of 4 calls observed; totals over those; costs in base input-token units at the "
        "cache prices of each call's provider and model"
    )


def test_observed_totals_in_dollars_add_each_model_at_its_list_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """After a switch the base-unit totals add two models' units; the dollar totals
    price each call at its own model's list price (compiler/cache/prices.py):
    claude-sonnet-5-5 ($2 per million base input tokens, as claude-sonnet-5) and
    gpt-4.1 ($2)."""
    monkeypatch.chdir(tmp_path)
    _, usage = _files(tmp_path)
    priced = _priced(tmp_path / "s.yaml")
    observed_usd = (Fraction(4510 + 295) * 2 + Fraction(3200 + 840) * 2) / 1_000_000
    simulated_usd = sum((p.cost * 2 for p in priced), Fraction(0)) / 1_000_000
    out = compare_observed(Path("s.yaml"), usage).to_json()
    assert out["usd"] == {
        "simulated": round(float(simulated_usd), 6),
        "observed": round(float(observed_usd), 6),
        "prices": PRICE_TABLE,
    }
    assert main(["verify", "s.yaml", "--observed", str(usage)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[7] == (
        f"{'total USD':>11}  {'':>10} {'':>10}  "
        f"{float(simulated_usd):>10.4f} {float(observed_usd):>10.4f}"
    )
    assert lines[9] == f"USD at {PRICE_TABLE}"


def test_observed_dollars_are_none_when_a_model_has_no_list_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    scenario, usage = _files(tmp_path)
    assert input_price("gpt-5.6-luna") is None  # its price was not found (prices.py)
    scenario.write_text(SCENARIO.replace("gpt-4.1", "gpt-5.6-luna"), encoding="utf-8")
    report = compare_observed(Path("s.yaml"), usage)
    assert report.dollars() is None
    assert report.to_json()["usd"] is None


def _with_models(models: list[str]) -> dict[str, object]:
    """USAGE with each row's ``model``, as the converters write it (common.py
    ``Builder.assistant``: the transcript's model of the call)."""
    calls = [dict(row, model=model) for row, model in zip(USAGE["calls"], models, strict=True)]  # type: ignore[call-overload]
    return dict(USAGE, calls=calls)


def test_observed_rows_whose_models_match_their_calls_are_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each row's model is checked against the model its own call went to (before the
    switch claude-sonnet-5-5, after it gpt-4.1), not the scenario's first one."""
    monkeypatch.chdir(tmp_path)
    _, usage = _files(tmp_path)
    models = ["claude-sonnet-5-5", "claude-sonnet-5-5", "gpt-4.1", "gpt-4.1"]
    usage.write_text(json.dumps(_with_models(models)), encoding="utf-8")
    out = compare_observed(Path("s.yaml"), usage).to_json()
    assert [row["observed"] for row in out["calls"]] == OBSERVED
    # a row without a model (null, or no key: the transcript named none) is not checked
    value = _with_models(models)
    value["calls"][0]["model"] = None  # type: ignore[index]
    del value["calls"][2]["model"]  # type: ignore[attr-defined]
    usage.write_text(json.dumps(value), encoding="utf-8")
    out = compare_observed(Path("s.yaml"), usage).to_json()
    assert [row["observed"] for row in out["calls"]] == OBSERVED


@pytest.mark.parametrize(
    ("models", "index", "call", "row_model", "went_to"),
    [
        # after the switch: a row observed on another model than gpt-4.1
        (
            ["claude-sonnet-5-5", "claude-sonnet-5-5", "gpt-5.6", "gpt-4.1"],
            2,
            3,
            "gpt-5.6",
            "gpt-4.1",
        ),
        # before it: gpt-4.1 is the scenario's later model, not this call's
        (
            ["gpt-4.1", "claude-sonnet-5-5", "gpt-4.1", "gpt-4.1"],
            0,
            1,
            "gpt-4.1",
            "claude-sonnet-5-5",
        ),
    ],
)
def test_observed_refuses_a_row_observed_on_another_model(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    models: list[str],
    index: int,
    call: int,
    row_model: str,
    went_to: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    _, usage = _files(tmp_path)
    text = json.dumps(_with_models(models), indent=2)
    usage.write_text(text, encoding="utf-8")
    line, column = _value_at(text, '"model": ', index)
    message = (
        f"{row_model!r}, but call {call} of s.yaml went to {went_to!r}: the usage file "
        "belongs to another scenario"
    )
    shown = f"{usage}:{line}:{column}: $.calls[{index}].model: {message}"
    with pytest.raises(SpecErrors) as err:
        compare_observed(Path("s.yaml"), usage)
    assert str(err.value) == shown
    assert main(["verify", "s.yaml", "--observed", str(usage)]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""  # nothing printed half-way
    assert shown in printed.err.splitlines()
    # with --json: the error alone, no report
    assert main(["verify", "s.yaml", "--observed", str(usage), "--json"]) == 2
    assert json.loads(capsys.readouterr().out) == {
        "format": "prefixlock.error/1",
        "command": "verify",
        "errors": [
            {
                "message": message,
                "file": str(usage),
                "line": line,
                "column": column,
                "path": f"$.calls[{index}].model",
            }
        ],
    }


def test_observed_names_every_row_on_another_model_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _, usage = _files(tmp_path)
    models = ["gpt-4.1", "claude-sonnet-5-5", "gpt-5.6", "gpt-4.1"]
    usage.write_text(json.dumps(_with_models(models), indent=2), encoding="utf-8")
    with pytest.raises(SpecErrors) as err:
        compare_observed(Path("s.yaml"), usage)
    assert [e.path for e in err.value.errors] == ["$.calls[0].model", "$.calls[2].model"]


def _value_at(text: str, needle: str, nth: int) -> tuple[int, int]:
    """1-based line and column of the value after ``needle``'s nth occurrence."""
    hits = [i for i, line in enumerate(text.splitlines()) if needle in line]
    line = text.splitlines()[hits[nth]]
    return hits[nth] + 1, line.index(needle) + len(needle) + 1


def test_observed_refuses_a_usage_file_with_another_number_of_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _, usage = _files(tmp_path)
    text = json.dumps(dict(USAGE, calls=USAGE["calls"][:3]), indent=2)  # type: ignore[index]
    usage.write_text(text, encoding="utf-8")
    line, column = _value_at(text, '"calls": ', 0)
    shown = (
        f"{usage}:{line}:{column}: $.calls: 3 usage rows for 4 model calls of s.yaml: "
        "the usage file belongs to another scenario"
    )
    with pytest.raises(SpecErrors) as err:
        compare_observed(Path("s.yaml"), usage)
    assert str(err.value) == shown
    assert main(["verify", "s.yaml", "--observed", str(usage)]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert shown in printed.err.splitlines()


def test_a_malformed_usage_file_names_every_problem_at_its_line_and_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand-edited usage file: every problem at once, each at its file, line, column
    and JSON path (usage.schema.json), exit 2, nothing of the table printed."""
    monkeypatch.chdir(tmp_path)
    _files(tmp_path)
    bad = json.loads(json.dumps(USAGE))
    bad["calls"][1]["observed"]["cache_read_tokens"] = "many"
    bad["calls"][2]["timestamp"] = 5
    bad["calls"][3]["observed"]["output_tokens"] = -1
    text = json.dumps(bad, indent=2)
    (tmp_path / "bad.usage.json").write_text(text, encoding="utf-8")
    lines = text.splitlines()

    def at(needle: str, nth: int = 0) -> str:
        """line:column of the value after ``needle``'s nth occurrence (1-based)."""
        hits = [i for i, line in enumerate(lines) if needle in line]
        row = hits[nth]
        return f"{row + 1}:{lines[row].index(needle) + len(needle) + 1}"

    with pytest.raises(SpecErrors) as err:
        compare_observed(Path("s.yaml"), Path("bad.usage.json"))
    assert [str(e) for e in err.value.errors] == [
        f"bad.usage.json:{at(chr(34) + 'cache_read_tokens' + chr(34) + ': ', 1)}: "
        "$.calls[1].observed.cache_read_tokens: expected an integer, got a string",
        f"bad.usage.json:{at(chr(34) + 'timestamp' + chr(34) + ': ', 0)}: "
        "$.calls[2].timestamp: expected a string or null, got an integer",
        f"bad.usage.json:{at(chr(34) + 'output_tokens' + chr(34) + ': ', 3)}: "
        "$.calls[3].observed.output_tokens: expected a number >= 0, got -1",
    ]
    assert main(["verify", "s.yaml", "--observed", "bad.usage.json"]) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.splitlines()[-1] == "prefixlock verify: 3 errors"
