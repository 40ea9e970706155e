"""``prefixlock report OUT.html``: one self-contained page of a verify run.

Per case and provider, a stacked bar per model call: tokens read from the cache, written
to it, and sent uncached (the cache simulator's figures over the exact bodies), with the
calls where a compaction resets the prefix marked; above them, the root every call of the
case shares (bundle digest, instructions digest and size, the ordered tool names, the
providers' settings) and the verify table with every invariant's verdict. The page is
plain HTML with inline CSS and inline SVG: no script, no external request, no font.
"""

from __future__ import annotations

import collections
import hashlib
import html
from collections.abc import Sequence
from pathlib import Path

import attrs

from ..cache.simulator import CacheReport
from ..core.errors import CacheSimulationError
from .replay import Call, provider_names, replay, serialize_calls
from .scenario import Scenario, golden_scenarios, load_scenario, scenario_files
from .verify import Report, simulate_calls, verify

__all__ = ["CaseFigures", "page", "report_page"]

#: Bar colours: cache read, cache write, uncached.
READ, WRITE, UNCACHED = "#2e7d32", "#f9a825", "#c62828"
BAR_WIDTH, BAR_GAP, CHART_HEIGHT = 14, 4, 120


@attrs.frozen(eq=False)
class CaseFigures:
    """One scenario's calls and, per provider, the simulated cache use of each call."""

    label: str
    scenario: Scenario
    calls: tuple[Call, ...]
    caches: dict[str, CacheReport]


def report_page(paths: Sequence[Path] = (), providers: Sequence[str] = ("all",)) -> str:
    """Verify the scenarios (default: ``golden/*/scenario.yaml``) and render the page."""
    files = scenario_files(paths) if paths else golden_scenarios()
    report = verify(files, providers, hash_seed=False)
    names = provider_names(providers)
    cases = []
    for path in files:
        scenario = load_scenario(path)
        calls = replay(scenario)
        bodies = serialize_calls(calls, names)
        caches = {}
        models = {s.provider: s.model for s in scenario.bundle.settings}
        for name in names:
            try:
                caches[name] = simulate_calls(scenario, calls, name, bodies[name], models.get(name))
            except CacheSimulationError:
                continue  # the verify table reports it
        label = path.parent.name if path.name == "scenario.yaml" else path.stem
        cases.append(CaseFigures(label, scenario, tuple(calls), caches))
    return page(report, cases)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _root(case: CaseFigures) -> list[str]:
    bundle = case.scenario.bundle
    instructions = bundle.instructions.encode("utf-8")
    digest = hashlib.sha256(instructions).hexdigest()[:16]
    settings = ", ".join(f"{s.provider}: {s.model}" for s in bundle.settings)
    return [
        "<dl class=root>",
        f"<dt>bundle</dt><dd><code>{_e(bundle.digest)}</code></dd>",
        f"<dt>instructions</dt><dd>{len(instructions):,} bytes, sha256 {digest}…</dd>",
        f"<dt>tools ({len(bundle.tools)})</dt>"
        f"<dd>{_e(', '.join(t.name for t in bundle.tools))}</dd>",
        f"<dt>settings</dt><dd>{_e(settings)}</dd>",
        "</dl>",
    ]


def _chart(case: CaseFigures, provider: str) -> list[str]:
    cache = case.caches.get(provider)
    if cache is None or not cache.calls:
        return [f"<p>{_e(provider)}: no simulation</p>"]
    tallest = max(c.input_tokens for c in cache.calls) or 1
    width = len(cache.calls) * (BAR_WIDTH + BAR_GAP) + BAR_GAP
    out = [
        f"<figure><figcaption>{_e(provider)} — {_e(cache.model)}, cost "
        f"{cache.cost_ratio:.1%} of uncached</figcaption>",
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{CHART_HEIGHT + 14}"'
        f' role="img" aria-label="{_e(provider)} cache use per call">',
    ]
    epoch = 0
    for i, (call, figures) in enumerate(zip(case.calls, cache.calls, strict=True)):
        x = BAR_GAP + i * (BAR_WIDTH + BAR_GAP)
        y = float(CHART_HEIGHT)
        for tokens, colour, what in (
            (figures.cache_read_tokens, READ, "read from cache"),
            (figures.cache_write_tokens, WRITE, "written to cache"),
            (figures.uncached_tokens, UNCACHED, "uncached"),
        ):
            height = CHART_HEIGHT * tokens / tallest
            y -= height
            out.append(
                f'<rect x="{x}" y="{y:.1f}" width="{BAR_WIDTH}" height="{height:.1f}" '
                f'fill="{colour}"><title>call {call.index}: {tokens:,} tokens {what}'
                "</title></rect>"
            )
        if call.request.epoch != epoch:
            epoch = call.request.epoch
            out.append(
                f'<line class=reset x1="{x - BAR_GAP / 2}" y1="0" x2="{x - BAR_GAP / 2}" '
                f'y2="{CHART_HEIGHT}" stroke="#1565c0" stroke-width="2" '
                'stroke-dasharray="4 2"><title>prefix reset (compaction)</title></line>'
            )
        out.append(
            f'<text x="{x + BAR_WIDTH / 2}" y="{CHART_HEIGHT + 11}" font-size="8" '
            f'text-anchor="middle">{call.index}</text>'
        )
    out += ["</svg></figure>"]
    return out


_STYLE = f"""
body {{ font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 28px; }}
table {{ border-collapse: collapse; }} td, th {{ padding: 2px 8px; text-align: right; }}
th {{ border-bottom: 1px solid #999; }} td:first-child, td:nth-child(2) {{ text-align: left; }}
.fail {{ color: {UNCACHED}; font-weight: bold; }}
dl.root {{ display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; }}
dt {{ font-weight: bold; }} dd {{ margin: 0; }}
figure {{ display: inline-block; margin: 8px 16px 8px 0; vertical-align: top; }}
figcaption {{ font-size: 12px; }}
.key span {{ display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px; }}
"""


def page(report: Report, cases: Sequence[CaseFigures]) -> str:
    """The HTML of a verify report and its cases' per-call cache figures."""
    verdict = "every invariant holds" if report.ok else f"{len(report.failures)} failure(s)"
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>prefixlock report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>prefixlock verify</h1>",
        f'<p class="{"ok" if report.ok else "fail"}">{len(cases)} scenario(s): {verdict}</p>',
        "<p class=key>per call, tokens:"
        f'<span style="background:{READ}"></span>read from cache'
        f'<span style="background:{WRITE}"></span>written to cache'
        f'<span style="background:{UNCACHED}"></span>uncached'
        " · dashed line: prefix reset (compaction)</p>",
    ]
    for failure in report.failures:
        out.append(f"<p class=fail>{_e(' '.join(failure.lines()))}</p>")
    labels = collections.Counter(case.label for case in cases)
    for case in cases:
        # by file: a case folder's scenario.yaml and a loose file of its stem share a label
        rows = [row for row in report.rows if row.file == case.scenario.file]
        title = f"{case.label} — {case.scenario.name}"
        if labels[case.label] > 1:  # two scenarios of one label: say which file
            title += f" ({case.scenario.file})"
        out += [f"<h2>{_e(title)}</h2>", *_root(case)]
        out.append(
            "<table><tr><th>provider</th><th>prefix-stable</th><th>calls</th>"
            "<th>bytes reused</th><th>cached tokens</th><th>cost vs uncached</th></tr>"
        )
        for row in rows:
            stable = "yes" if row.prefix_stable else "<span class=fail>NO</span>"
            out.append(
                f"<tr><td>{_e(row.provider)}</td><td>{stable}</td><td>{row.calls}</td>"
                f"<td>{row.bytes_reused:.1%}</td><td>{row.cached_share:.1%}</td>"
                f"<td>{row.cost_ratio:.1%}</td></tr>"
            )
        out.append("</table><div>")
        for name in sorted(case.caches):
            out += _chart(case, name)
        out.append("</div>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
