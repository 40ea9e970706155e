"""Gemini's explicit-cache mode (``cachedContent: cachedContents/...`` in
rules/providers.yaml) in the review tools: verify, calls.md, report, diff and
``inspect --cache`` price the cache the deployment creates from the scenario's (or the
store's) root with ``Gemini.cached_content_body``; before, every one of them stopped
at "pass the body that created it" (exit 2) or drew no Gemini bars."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conv_helpers import user
from prefixlock import Conversation, SQLiteStore, providers
from prefixlock.bench.economics import long_session
from prefixlock.cache.simulator import CacheReport, Simulation, simulate
from prefixlock.cli.commands import main
from prefixlock.core import canonical
from prefixlock.core.messages import TextPart
from prefixlock.core.output import ModelOutput, Usage
from prefixlock.providers.gemini import Gemini
from prefixlock.review.cacheuse import cache_use
from prefixlock.review.diff.folders import diff_folders
from prefixlock.review.diff.sides import Side
from prefixlock.review.naive import NaiveHarness, full_contexts, tool_file_order
from prefixlock.review.render import cache_bar, render_calls
from prefixlock.review.replay import Call, replay, serialize_calls
from prefixlock.review.scenario import Scenario, UserStep, load_scenario
from prefixlock.review.verify import call_time, simulate_calls, verify_scenario
from prefixlock.spec.build import build_bundle

REPO = Path(__file__).resolve().parents[1]
CACHE = "cachedContents/root-1"
GEMINI = "  gemini:\n    model: gemini-2.5-pro\n    max_tokens: 8192\n"

#: Two turns 20 minutes apart (the implicit cache's 5 minutes expire between them), a
#: tool loop and a context change (the naive harness's system prompt changes with it).
SCENARIO = """\
name: explicit cache
conversation: conv-explicit
base:
  mode: agent
  context:
    environment: {os: linux, shell: bash, cwd: /home/dev/app, workspace_roots: [/home/dev/app]}
    git: {branch: main, head: abc1234, dirty: false}
steps:
  - user: {event: u1, query: "fix the bug", timestamp: "2025-01-01T10:00:00Z"}
  - assistant: {text: "Reading.", tool_calls: [{id: c1, name: read_file, arguments: {path: a.py}}]}
  - tool_results: [{call_id: c1, output: "print(1)"}]
  - assistant: {text: "Done."}
  - user:
      event: u2
      query: "now on a branch"
      timestamp: "2025-01-01T10:20:00Z"
      context: {git: {branch: feature/x, head: abc1234, dirty: false}}
"""


def _spec(root: Path) -> Path:
    """A copy of the example spec at ``root`` whose gemini entry names the explicit
    cache, and a case ``golden/explicit`` of :data:`SCENARIO`; returns the scenario."""
    for folder in ("prompt", "rules"):
        shutil.copytree(REPO / folder, root / folder)
    path = root / "rules" / "providers.yaml"
    text = path.read_text(encoding="utf-8")
    assert GEMINI in text
    option = f"    options:\n      cachedContent: {CACHE}\n"
    path.write_text(text.replace(GEMINI, GEMINI + option), encoding="utf-8")
    case = root / "golden" / "explicit"
    case.mkdir(parents=True)
    scenario = case / "scenario.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    return scenario


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    return _spec(tmp_path)


def _calls(path: Path) -> tuple[Scenario, list[Call], list[bytes], str]:
    scenario = load_scenario(path)
    calls = replay(scenario)
    bodies = serialize_calls(calls, ["gemini"])["gemini"]
    models = {s.provider: s.model for s in scenario.bundle.settings}
    return scenario, calls, bodies, models["gemini"]


def _without_cache(body: bytes) -> dict[str, Any]:
    value = json.loads(body)
    assert value["cachedContent"] == CACHE
    return {k: v for k, v in value.items() if k != "cachedContent"}


def _expected(path: Path) -> tuple[CacheReport, CacheReport, int]:
    """The scenario's gemini calls priced with the root cache (given to the simulator
    by hand), without it, and the cache's tokens."""
    scenario, calls, bodies, model = _calls(path)
    wire = providers.get("gemini")
    assert isinstance(wire, Gemini)
    root = wire.cached_content_body(calls[0].request)
    times = [call_time(scenario, c) for c in calls]
    cached = simulate("gemini", bodies, model=model, cached_contents={CACHE: root}, times=times)
    plain = simulate("gemini", [_without_cache(b) for b in bodies], model=model, times=times)
    return cached, plain, cached.calls[0].input_tokens - plain.calls[0].input_tokens


def test_simulate_calls_prices_the_root_cache_the_deployment_creates(spec: Path) -> None:
    scenario, calls, bodies, model = _calls(spec)
    report = simulate_calls(scenario, calls, "gemini", bodies, model)
    cached, plain, root_tokens = _expected(spec)
    assert report.calls == cached.calls
    assert root_tokens > 1000  # the instructions and the tool declarations
    first, *later = report.calls
    assert first.cache_write_tokens - plain.calls[0].cache_write_tokens == root_tokens
    # read on every later call, also after the 20-minute pause (never expired)
    reads = [
        c.cache_read_tokens - p.cache_read_tokens
        for c, p in zip(later, plain.calls[1:], strict=True)
    ]
    assert reads == [root_tokens] * len(later)


def test_verify_passes_and_the_gemini_line_reports_the_cached_reads(
    spec: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cached, plain, _ = _expected(spec)
    assert main(["verify", str(spec), "--provider", "gemini"]) == 0
    out = capsys.readouterr().out.splitlines()
    (line,) = [line for line in out if line.split()[:2] == ["explicit", "gemini"]]
    assert line.split()[6] == f"{cached.cached_share:.1%}"
    assert cached.cached_share > plain.cached_share
    assert out[-1] == "1 scenario(s) x 1 provider(s): every invariant holds"
    assert main(["verify", str(spec), "--provider", "gemini", "--json", "--no-hash-seed"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["results"]
    assert (row["provider"], row["cached_share"]) == ("gemini", round(cached.cached_share, 4))
    assert row["cost_ratio"] == round(cached.cost_ratio, 4)


def test_the_bench_economics_price_the_root_cache_as_verify_does(spec: Path) -> None:
    """``bench``'s long-session economics run the same case through floors of their own:
    they name the root cache to each simulation as verify does (before, they stopped at
    "pass the body that created it")."""
    cached, _, _ = _expected(spec)
    (row,) = verify_scenario(load_scenario(spec), ["gemini"])[0]
    out = long_session(["gemini"], path=spec)
    assert out["ok"] is True
    gemini = out["providers"]["gemini"]
    assert gemini["cost_ratio"] == round(cached.cost_ratio, 4) == round(row.cost_ratio, 4)
    assert gemini["cost_vs_bound"] == round(row.cost_vs_bound, 4)
    # the floor holds the root cache too: no placement reads less than the real bodies
    assert gemini["floor_vs_bound"] <= gemini["cost_vs_bound"]


def test_the_naive_harness_writes_a_cache_for_each_root_it_sends(spec: Path) -> None:
    """The naive harness re-renders the context into its system prompt, so its cache
    body changes with the context: each new one is written again, then read."""
    scenario, calls, _, model = _calls(spec)
    wire = providers.get("gemini")
    assert isinstance(wire, Gemini)
    requests = [s.request for s in scenario.steps if isinstance(s, UserStep)]
    harness = NaiveHarness(
        tool_file_order(scenario.bundle_root), full_contexts(scenario.bundle, requests)
    )
    naive = Simulation("gemini", model=model)
    roots: list[str] = []
    for call in calls:
        request = harness.request(call.request)
        root = wire.cached_content_body(request)
        roots.append(canonical.dumps(root))
        naive.name_cache(CACHE, root)
        naive.add(wire.serialize(request), call_time(scenario, call))
    assert len(set(roots)) == 2  # the git context changed before the last call
    (row,), failures = verify_scenario(scenario, ["gemini"])
    assert failures == []
    own = simulate_calls(scenario, calls, "gemini", _calls(spec)[2], model)
    assert row.cost_vs_naive == float(own.cost / naive.report().cost)


def test_a_cache_named_again_with_another_body_is_written_again() -> None:
    """:meth:`Simulation.name_cache`: the same body is read, another one under the
    same name is a new cache, written by the next call that names it."""
    body = canonical.dumpb({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
    named = canonical.dumpb({**json.loads(body), "cachedContent": CACHE})
    first = {
        "model": "models/gemini-2.5-pro",
        "systemInstruction": {"parts": [{"text": "a" * 400}]},
    }
    second = {
        "model": "models/gemini-2.5-pro",
        "systemInstruction": {"parts": [{"text": "b" * 800}]},
    }
    simulation = Simulation("gemini", model="gemini-2.5-pro")
    plain = simulation.add(body)
    figures = []
    for root in (first, first, second, second):
        simulation.name_cache(CACHE, root)
        figures.append(simulation.add(named))
    tokens = [f.input_tokens - plain.input_tokens for f in figures]
    assert tokens[0] == tokens[1] and tokens[2] == tokens[3] > tokens[0] > 0
    assert [(f.cache_read_tokens, f.cache_write_tokens) for f in figures] == [
        (0, tokens[0]),
        (tokens[0], 0),
        (0, tokens[2]),
        (tokens[2], 0),
    ]


def test_calls_md_draws_the_gemini_bars(spec: Path) -> None:
    scenario, calls, bodies, _ = _calls(spec)
    cached, _, _ = _expected(spec)
    page = render_calls(scenario, calls, {"gemini": bodies})
    lines = [line for line in page.splitlines() if line.startswith("- gemini: ")]
    assert len(lines) == len(calls)
    for line, figures in zip(lines, cached.calls, strict=True):
        assert line.endswith(
            f" · `{cache_bar(figures)}` {figures.cache_read_tokens:,} read,"
            f" {figures.cache_write_tokens:,} written, {figures.uncached_tokens:,} uncached"
        )


def test_report_writes_the_page(
    spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(out), str(spec), "--provider", "gemini"]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")


def _bodies_beside(scenario: Path) -> list[bytes]:
    """The scenario's gemini bodies written beside it, as ``golden --update`` does."""
    bodies = _calls(scenario)[2]
    for number, body in enumerate(bodies, start=1):
        path = scenario.parent / "gemini" / f"{number:04d}.json"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(body)
    return bodies


def test_diff_prices_the_root_cache_of_the_scenario_beside_the_bodies(tmp_path: Path) -> None:
    sides = []
    for name in ("old", "new"):
        _bodies_beside(_spec(tmp_path / name))
        sides.append(Side(name, "folder", tmp_path / name / "golden", tmp_path / name))
    found = diff_folders(*sides)
    cached, _, _ = _expected(tmp_path / "new" / "golden" / "explicit" / "scenario.yaml")
    (pair,) = found.pairs
    assert [c.old_cost for c in pair.calls] == [c.cost for c in cached.calls]
    assert [c.new_cost for c in pair.calls] == [c.cost for c in cached.calls]
    assert found.notes == ()


def test_diff_of_bodies_alone_prices_them_without_the_cache_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bodies = _bodies_beside(_spec(tmp_path / "spec"))
    for name in ("old", "new"):
        shutil.copytree(
            tmp_path / "spec" / "golden" / "explicit" / "gemini", tmp_path / name / "gemini"
        )
    old = Side("old", "folder", tmp_path / "old", tmp_path / "old")
    new = Side("new", "folder", tmp_path / "new", tmp_path / "new")
    found = diff_folders(old, new)
    plain = simulate("gemini", [_without_cache(b) for b in bodies], model="gemini-2.5-pro")
    (pair,) = found.pairs
    assert [c.old_cost for c in pair.calls] == [c.cost for c in plain.calls]
    assert [c.new_cost for c in pair.calls] == [c.cost for c in plain.calls]
    note = (
        f".: the gemini calls of OLD and NEW name the explicit cache {CACHE!r} (option "
        "cachedContent), whose contents only a scenario.yaml beside their bodies gives, so "
        "both sides are priced without that cache's tokens"
    )
    assert found.notes == (note,)
    assert main(["diff", str(tmp_path / "old"), str(tmp_path / "new")]) == 0
    assert f"note: {note}" in capsys.readouterr().out.splitlines()


def test_inspect_cache_predicts_the_root_cache_of_the_store(spec: Path, tmp_path: Path) -> None:
    """A store keeps the root (instructions, tools, settings): the cache body is made
    from it, as the deployment made it."""
    db = tmp_path / "s.db"
    conv = Conversation.open(SQLiteStore(db), build_bundle(spec.parents[2]), "g")
    sent = [conv.handle(user("u1", conversation="g"))]
    used = Usage(20_000, 0, 20_000, 30, None, '{"source":"test"}')
    conv.record(ModelOutput("gemini", (TextPart("One."),), "STOP", used))
    sent.append(conv.handle(user("u2", conversation="g")))
    conv.record(ModelOutput("gemini", (TextPart("Two."),), "STOP", used))
    wire = providers.get("gemini")
    assert isinstance(wire, Gemini)
    model = sent[0].settings_for("gemini").model
    root = wire.cached_content_body(sent[0])
    bodies = [wire.serialize(request) for request in sent]
    expected = simulate("gemini", bodies, model=model, cached_contents={CACHE: root})
    with SQLiteStore(db) as store:
        report = cache_use(store, "g")
    assert [c.predicted_share for c in report.calls] == [
        c.cache_read_tokens / c.input_tokens for c in expected.calls
    ]
    assert report.calls[1].predicted_share > 0.5
