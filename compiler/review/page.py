"""``prefixlock report OUT.html``: one self-contained page of a verify run.

Top to bottom: the summary (cases, providers, model calls, and per provider the cached
share of the input tokens and the simulated cost against three yardsticks: no cache, the
perfect-cache bound and the naive harness), the root every call starts with (bundle
digest, instructions, the ordered tool names, the providers' settings), shown once for
all the cases that share it, and an index of the cases linking to their sections. Each
case's section has its verify figures per provider and, beside them, one lane per
provider with a stacked bar per model call: tokens read from the cache, written to it,
and sent uncached (the cache simulator's figures over the exact bodies, priced at each
call's time as ``verify`` prices it). The lanes share one axis: calls in order, with the
idle time between two calls (from the scenario's timestamps) drawn as a labelled grey
band, a call whose provider's cache entries expired in that gap shaded as cold, and a
compaction's prefix reset as a dashed line. The page is plain HTML with inline CSS and
inline SVG: no script, no external request, no font. Every text a scenario or spec
supplies is escaped (:func:`_e`).
"""

from __future__ import annotations

import collections
import hashlib
import html
import itertools
import math
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import attrs

from ..cache.simulator import CacheReport, CallCache, PerfectBound
from ..core.errors import CacheSimulationError
from ..spec.bundle import Bundle
from .replay import Call, provider_names, replay, serialize_calls
from .scenario import Scenario, golden_scenarios, load_scenario, scenario_files
from .verify import Report, Row, call_time, simulate_calls, verify

__all__ = ["CaseFigures", "page", "report_page"]

#: Bar colours: cache read, cache write, uncached.
READ, WRITE, UNCACHED = "#2e7d32", "#f9a825", "#c62828"
#: An idle gap between two calls; a call whose cache entries expired in the gap before it.
GAP, COLD, COLD_MARK = "#d6d6d6", "#bbdefb", "#1e88e5"
RESET = "#1565c0"
#: A lane's bars' height, the room above them (a cold call's mark) and the left margin
#: (the token scale's labels), in pixels.
LANE_HEIGHT, LANE_TOP, LANE_MARGIN = 28, 6, 34
#: The room one call takes at most and at least (a long conversation's calls get narrower).
CALL_PITCH_MAX, CALL_PITCH_MIN, CHART_WIDTH = 14.0, 1.5, 400.0
#: The room an idle gap's label takes on the axis; the most gaps a case's facts list.
IDLE_LABEL_WIDTH, GAPS_LISTED = 34.0, 8
AXIS_HEIGHT = 40
#: Room for the x axis's title under the shortest chart.
AXIS_MIN_WIDTH = LANE_MARGIN + 150.0


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
    bundles: dict[Path, Bundle] = {}  # the scenarios of one spec root share its bundle
    for path in files:
        scenario = load_scenario(path, bundles=bundles)
        calls = replay(scenario)
        replayed = scenario.replayed(names)
        bodies = serialize_calls(calls, replayed)
        caches = {}
        models = {s.provider: s.model for s in scenario.bundle.settings}
        for name in replayed:
            try:
                caches[name] = simulate_calls(scenario, calls, name, bodies[name], models.get(name))
            except CacheSimulationError:
                continue  # the verify table reports it
        label = path.parent.name if path.name == "scenario.yaml" else path.stem
        cases.append(CaseFigures(label, scenario, tuple(calls), caches))
    return page(report, cases)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


# --- figures ---------------------------------------------------------------------------


@attrs.frozen
class Totals:
    """Sums over calls of one provider (a case's, or every case's): the tokens and the
    simulated cost in base input-token units, beside the same calls uncached, under the
    perfect-cache bound and sent by the naive harness."""

    calls: int = 0
    input_tokens: int = 0
    read_tokens: int = 0
    cost: Fraction = Fraction(0)
    uncached: Fraction = Fraction(0)
    bound: Fraction = Fraction(0)
    naive: float = 0.0

    def plus(self, other: Totals) -> Totals:
        return Totals(
            self.calls + other.calls,
            self.input_tokens + other.input_tokens,
            self.read_tokens + other.read_tokens,
            self.cost + other.cost,
            self.uncached + other.uncached,
            self.bound + other.bound,
            self.naive + other.naive,
        )

    @property
    def cached_share(self) -> float:
        return self.read_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def vs_uncached(self) -> float:
        return float(self.cost / self.uncached) if self.uncached else 1.0

    @property
    def vs_bound(self) -> float:
        return float(self.cost / self.bound) if self.bound else 1.0

    @property
    def vs_naive(self) -> float:
        return float(self.cost) / self.naive if self.naive else 1.0


def case_totals(cache: CacheReport, row: Row | None) -> Totals:
    """One case's totals for one provider. The naive harness's cost is verify's own
    (``row.cost_vs_naive`` is the simulated cost over it); the bound is summed here from
    the calls, as verify sums it (:class:`PerfectBound`)."""
    bound = PerfectBound()
    for call in cache.calls:
        bound.add(call)
    cost = cache.cost
    naive = float(cost) / row.cost_vs_naive if row is not None and row.cost_vs_naive else 0.0
    return Totals(
        len(cache.calls),
        cache.input_tokens,
        cache.cache_read_tokens,
        cost,
        cache.uncached_cost,
        bound.cost,
        naive,
    )


def _rows(report: Report, case: CaseFigures) -> dict[str, Row]:
    # by file: a case folder's scenario.yaml and a loose file of its stem share a label
    return {row.provider: row for row in report.rows if row.file == case.scenario.file}


def provider_totals(report: Report, cases: Sequence[CaseFigures]) -> dict[str, Totals]:
    """Every case's calls summed per provider (providers in the order first seen)."""
    out: dict[str, Totals] = {}
    for case in cases:
        rows = _rows(report, case)
        for name, cache in case.caches.items():
            out[name] = out.get(name, Totals()).plus(case_totals(cache, rows.get(name)))
    return out


def times(case: CaseFigures) -> list[float | None]:
    """Each call's time in seconds: its request's timestamp; a call without one (a tool
    loop's next call, a background event) comes with the call before, as the cache
    simulator takes it; None until a call has a time."""
    out: list[float | None] = []
    last: float | None = None
    for call in case.calls:
        at = call_time(case.scenario, call)
        last = at if at is not None else last
        out.append(last)
    return out


def gaps(case: CaseFigures) -> list[float]:
    """Per call, the idle seconds since the call before (0 for the first, and where
    either has no time)."""
    at = times(case)
    return [
        (now - before) if i and now is not None and before is not None else 0.0
        for i, (before, now) in enumerate(zip([None, *at[:-1]], at, strict=True))
    ]


def cold_calls(case: CaseFigures, cache: CacheReport) -> list[int]:
    """The calls (1-based) that find the cache entries of the call before them expired:
    the idle gap before them is longer than those entries' lifetime (the simulator's
    rule: an entry is found while ``now <= until``)."""
    idle = gaps(case)
    return [
        call.index
        for before, call, gap in zip(cache.calls, cache.calls[1:], idle[1:], strict=False)
        if gap > before.lifetime
    ]


def duration(seconds: float) -> str:
    """``45 s``, ``40 min``, ``2.5 h``, ``3 d``: an idle gap as a reader says it."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f}".removesuffix(".0") + " h"
    return f"{seconds / 86400:.1f}".removesuffix(".0") + " d"


def tokens(count: float) -> str:
    """``950``, ``12k``, ``1.2M``: a scale label."""
    if count < 1000:
        return f"{count:.0f}"
    if count < 1_000_000:
        return f"{count / 1000:.1f}".removesuffix(".0") + "k"
    return f"{count / 1_000_000:.1f}".removesuffix(".0") + "M"


# --- the page --------------------------------------------------------------------------


def _root_key(bundle: Bundle) -> tuple[str, str]:
    settings = ", ".join(f"{s.provider}: {s.model}" for s in bundle.settings)
    return bundle.digest, settings


def _root(bundle: Bundle) -> list[str]:
    instructions = bundle.instructions.encode("utf-8")
    digest = hashlib.sha256(instructions).hexdigest()[:16]
    return [
        "<dl class=root>",
        f"<dt>bundle</dt><dd><code>{_e(bundle.digest)}</code></dd>",
        f"<dt>instructions</dt><dd>{len(instructions):,} bytes, sha256 {digest}…</dd>",
        f"<dt>tools ({len(bundle.tools)})</dt>"
        f"<dd>{_e(', '.join(t.name for t in bundle.tools))}</dd>",
        f"<dt>settings</dt><dd>{_e(_root_key(bundle)[1])}</dd>",
        "</dl>",
    ]


def case_ids(cases: Sequence[CaseFigures]) -> list[str]:
    """Each case's section id: ``case-`` and its label's letters, digits and dashes,
    numbered where two labels give one id."""
    out: list[str] = []
    for case in cases:
        slug = re.sub(r"[^a-z0-9]+", "-", case.label.lower()).strip("-") or "case"
        candidate, n = f"case-{slug}", 1
        while candidate in out:
            n += 1
            candidate = f"case-{slug}-{n}"
        out.append(candidate)
    return out


def _ratio(value: float) -> str:
    return f"{value:.2f}&times;"


def _summary(report: Report, cases: Sequence[CaseFigures]) -> list[str]:
    totals = provider_totals(report, cases)
    calls = sum(len(case.calls) for case in cases)
    verdict = "every invariant holds" if report.ok else f"{len(report.failures)} failure(s)"
    out = [
        "<section id=summary>",
        f'<p class="verdict {"ok" if report.ok else "fail"}">{len(cases)} case(s) · '
        f"{len(totals)} provider(s) · {calls:,} model call(s) per provider · {verdict}</p>",
    ]
    out += [f"<p class=fail>{_e(' '.join(failure.lines()))}</p>" for failure in report.failures]
    out.append(
        "<table class=summary><tr><th>provider</th><th>model calls</th>"
        "<th>cached tokens</th><th>cost vs uncached</th><th>vs perfect cache</th>"
        "<th>vs naive harness</th></tr>"
    )
    everything = Totals()
    for name, total in totals.items():
        everything = everything.plus(total)
        out.append(_summary_row(name, total))
    if len(totals) > 1:
        out.append(_summary_row("all providers", everything, css="all"))
    out += [
        "</table>",
        "<p class=note>Cost is the cache simulator's, in base input-token units at each "
        "provider's own prices, priced at each call's time; <b>vs perfect cache</b>: a "
        "multiple of the cost if every token were written once and read by every later "
        "call that sends it; <b>vs naive harness</b>: a multiple of the same conversation's "
        "cost with the context re-rendered into the system prompt on every call (below 1&times; "
        "the naive harness pays more).</p>",
        "</section>",
    ]
    return out


def _summary_row(name: str, total: Totals, css: str = "") -> str:
    opening = f"<tr class={css}>" if css else "<tr>"
    return (
        f"{opening}<td>{_e(name)}</td><td>{total.calls:,}</td><td>{total.cached_share:.1%}</td>"
        f"<td>{total.vs_uncached:.1%}</td><td>{_ratio(total.vs_bound)}</td>"
        f"<td>{_ratio(total.vs_naive)}</td></tr>"
    )


def _roots(cases: Sequence[CaseFigures], ids: Sequence[str]) -> tuple[list[str], list[str]]:
    """The roots section, each distinct root once, and per case the words naming its root."""
    groups: dict[tuple[str, str], list[int]] = {}
    for n, case in enumerate(cases):
        groups.setdefault(_root_key(case.scenario.bundle), []).append(n)
    out = ["<section id=roots>"]
    names: list[str] = [""] * len(cases)
    if len(groups) == 1:
        (members,) = groups.values()
        out += [
            "<h2>The shared root</h2>",
            "<p>Every case's calls start with it: instructions, the tools in this order and "
            "the provider settings (a change here makes every new conversation write a new "
            "cached prefix).</p>",
            *_root(cases[members[0]].scenario.bundle),
        ]
        for n in members:
            names[n] = '<a href="#roots">the shared root</a>'
    else:
        out.append("<h2>Roots</h2>")
        for number, members in enumerate(groups.values(), start=1):
            links = ", ".join(f'<a href="#{ids[n]}">{_e(cases[n].label)}</a>' for n in members)
            out += [
                f"<h3 id=root-{number}>root {number} — {len(members)} case(s): {links}</h3>",
                *_root(cases[members[0]].scenario.bundle),
            ]
            for n in members:
                names[n] = f'<a href="#root-{number}">root {number}</a>'
    out.append("</section>")
    return out, names


def _kinds(case: CaseFigures) -> str:
    counts = collections.Counter(call.kind for call in case.calls)
    words = {  # kind: (one, many)
        "user": ("user turn", "user turns"),
        "tool_results": ("tool-loop call", "tool-loop calls"),
        "background": ("background event", "background events"),
        "injected": ("injected event", "injected events"),
        "retry": ("retry", "retries"),
    }
    parts = [
        f"{counts[kind]} {one if counts[kind] == 1 else many}"
        for kind, (one, many) in words.items()
        if counts[kind]
    ]
    return ", ".join(parts)


def _compactions(case: CaseFigures) -> int:
    epochs = [call.request.epoch for call in case.calls]
    return sum(1 for a, b in itertools.pairwise(epochs) if a != b)


def _gap_words(case: CaseFigures) -> str:
    idle = [gap for gap in gaps(case) if gap > 0]
    if not idle:
        return "no idle gaps"
    if len(idle) > GAPS_LISTED:
        return f"{len(idle)} idle gaps, the longest {duration(max(idle))}"
    return "idle " + ", ".join(duration(gap) for gap in idle)


def _index(report: Report, cases: Sequence[CaseFigures], ids: Sequence[str]) -> list[str]:
    out = [
        "<nav id=cases><h2>Cases</h2>",
        "<table class=index><tr><th>case</th><th>what it plays</th><th>calls</th>"
        "<th>idle gaps</th><th>compactions</th><th>prefix-stable</th>"
        "<th>cost vs uncached</th></tr>",
    ]
    for case, anchor in zip(cases, ids, strict=True):
        rows = _rows(report, case).values()
        stable = "yes" if all(r.prefix_stable for r in rows) else "<span class=fail>NO</span>"
        costs = sorted(r.cost_ratio for r in rows)
        spread = f"{costs[0]:.1%}&ndash;{costs[-1]:.1%}" if len(costs) > 1 else ""
        spread = f"{costs[0]:.1%}" if len(costs) == 1 else spread
        idle = [gap for gap in gaps(case) if gap > 0]
        longest = f"{len(idle)} (longest {duration(max(idle))})" if idle else "none"
        out.append(
            f'<tr><td><a href="#{anchor}">{_e(case.label)}</a></td>'
            f"<td>{_e(case.scenario.name)}</td><td>{len(case.calls)}</td><td>{longest}</td>"
            f"<td>{_compactions(case)}</td><td>{stable}</td><td>{spread}</td></tr>"
        )
    out.append("</table></nav>")
    return out


_KEY = (
    "<p class=key>"
    f'<span style="background:{READ}"></span>read from cache'
    f'<span style="background:{WRITE}"></span>written to cache'
    f'<span style="background:{UNCACHED}"></span>uncached'
    f'<span style="background:{GAP}"></span>idle time between two calls (wider: longer)'
    f'<span class=cold style="background:{COLD};border-color:{COLD_MARK}"></span>'
    "cold call: its cache expired in the gap before it"
    f'<span class=dash style="border-color:{RESET}"></span>prefix reset (compaction)</p>'
)


@attrs.frozen
class _Layout:
    """Where each call's bar goes, the same for every lane of a case."""

    pitch: float
    bar: float
    x: tuple[float, ...]  # each call's bar's left edge
    gaps: tuple[tuple[float, float, float], ...]  # (left, width, seconds) of each idle band
    width: float


def _layout(case: CaseFigures) -> _Layout:
    count = len(case.calls)
    pitch = max(CALL_PITCH_MIN, min(CALL_PITCH_MAX, CHART_WIDTH / max(count, 1)))
    bar = max(1.0, pitch * 0.75)
    idle = gaps(case)
    # wider with the gap's length: 1 s → 6 px, 1 min → 13, 1 h → 20; many gaps share
    # half the chart's width between them, each at least 2 px
    widths = [6 + 4 * math.log10(max(gap, 1.0)) if gap > 0 else 0.0 for gap in idle]
    shrink = min(1.0, CHART_WIDTH / 2 / (sum(widths) or 1.0))
    x, bands = [], []
    left = float(LANE_MARGIN) + 4
    for gap, full in zip(idle, widths, strict=True):
        if gap > 0:
            width = max(2.0, full * shrink)
            bands.append((left, width, gap))
            left += width + (pitch - bar)
        x.append(left)
        left += pitch
    return _Layout(pitch, bar, tuple(x), tuple(bands), max(left + 4, AXIS_MIN_WIDTH))


def _lane(
    case: CaseFigures, cache: CacheReport | None, provider: str, layout: _Layout, tallest: int
) -> str:
    if cache is None or not cache.calls:
        return f"<span class=fail>{_e(provider)}: no simulation</span>"
    top, base = LANE_TOP, LANE_TOP + LANE_HEIGHT  # the bars stand on y = base
    out = [
        f'<svg class=lane xmlns="http://www.w3.org/2000/svg" width="{layout.width:.0f}" '
        f'height="{base + 1}" role="img" aria-label="{_e(provider)} — {_e(cache.model)}: '
        f'tokens per call, cost {cache.totals.cost_ratio:.1%} of uncached">',
        f'<line x1="{LANE_MARGIN}" y1="{top}" x2="{LANE_MARGIN}" y2="{base}" stroke="#999"/>',
        f'<text class=tick x="{LANE_MARGIN - 3}" y="{top + 8}" text-anchor="end">'
        f"{tokens(tallest)}</text>",
        f'<text class=tick x="{LANE_MARGIN - 3}" y="{base}" text-anchor="end">0</text>',
    ]
    for left, width, gap in layout.gaps:
        out.append(
            f'<rect class=gap x="{left:.1f}" y="{top}" width="{width:.1f}" '
            f'height="{LANE_HEIGHT}" fill="{GAP}"><title>idle {duration(gap)}</title></rect>'
        )
    cold = set(cold_calls(case, cache))
    epoch = 0
    for call, figures, x in zip(case.calls, cache.calls, layout.x, strict=True):
        if call.index in cold:  # shaded, and marked above its bar: a tall bar hides the shade
            why = (
                f"<title>call {call.index}: cold — the cache entries of the call before "
                "expired in the idle gap</title>"
            )
            out += [
                f'<rect class=cold x="{x - 1:.1f}" y="0" width="{layout.bar + 2:.1f}" '
                f'height="{base}" fill="{COLD}">{why}</rect>',
                f'<rect class=cold-mark x="{x - 1:.1f}" y="0" width="{layout.bar + 2:.1f}" '
                f'height="4" fill="{COLD_MARK}">{why}</rect>',
            ]
        out += _bar(call, figures, x, layout.bar, tallest)
        if call.request.epoch != epoch:
            epoch = call.request.epoch
            line = x - (layout.pitch - layout.bar) / 2
            out.append(
                f'<line class=reset x1="{line:.1f}" y1="{top}" x2="{line:.1f}" y2="{base}" '
                f'stroke="{RESET}" stroke-width="2" stroke-dasharray="4 2">'
                "<title>prefix reset (compaction)</title></line>"
            )
    out.append("</svg>")
    return "".join(out)


def _bar(call: Call, figures: CallCache, x: float, width: float, tallest: int) -> list[str]:
    out = []
    y = float(LANE_TOP + LANE_HEIGHT)
    for count, colour, what in (
        (figures.cache_read_tokens, READ, "read from cache"),
        (figures.cache_write_tokens, WRITE, "written to cache"),
        (figures.uncached_tokens, UNCACHED, "uncached"),
    ):
        height = LANE_HEIGHT * count / tallest
        y -= height
        out.append(
            f'<rect class=bar x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" '
            f'height="{height:.1f}" fill="{colour}"><title>call {call.index}: '
            f"{count:,} tokens {what}</title></rect>"
        )
    return out


def _axis(case: CaseFigures, layout: _Layout) -> str:
    """The lanes' shared x axis: call numbers, each idle gap's length, the axis title."""
    every = 1 if layout.pitch >= 14 else 2 if layout.pitch >= 9 else 5 if layout.pitch >= 5 else 10
    out = [
        f'<svg class=axis xmlns="http://www.w3.org/2000/svg" width="{layout.width:.0f}" '
        f'height="{AXIS_HEIGHT}" role="img" aria-label="x axis: model calls in order">',
        f'<line x1="{LANE_MARGIN}" y1="1" x2="{layout.width - 2:.0f}" y2="1" stroke="#999"/>',
    ]
    for call, x in zip(case.calls, layout.x, strict=True):
        if call.index == 1 or call.index % every == 0:
            out.append(
                f'<text class=tick x="{x + layout.bar / 2:.1f}" y="10" '
                f'text-anchor="middle">{call.index}</text>'
            )
    ends = [-math.inf, -math.inf]  # per row of labels, where its last label ends
    for left, width, gap in layout.gaps:
        middle = left + width / 2
        # two close labels take turns in height; where neither row has room the band's
        # tooltip alone says how long it was
        row = next((r for r in (0, 1) if middle - ends[r] >= IDLE_LABEL_WIDTH), None)
        if row is None:
            continue
        ends[row] = middle
        out.append(
            f'<text class=idle x="{middle:.1f}" y="{20 + 9 * row}" '
            f'text-anchor="middle">{duration(gap)}</text>'
        )
    out += [
        f'<text class=title x="{LANE_MARGIN}" y="{AXIS_HEIGHT - 2}">model call →'
        " (grey: idle time)</text>",
        "</svg>",
    ]
    return "".join(out)


def _case(report: Report, case: CaseFigures, anchor: str, root: str, title_file: bool) -> list[str]:
    rows = _rows(report, case)
    title = f"{case.label} — {case.scenario.name}"
    if title_file:  # two scenarios of one label: say which file
        title += f" ({case.scenario.file})"
    layout = _layout(case)
    tallest = max((c.input_tokens for r in case.caches.values() for c in r.calls), default=0)
    tallest = tallest or 1
    compactions = _compactions(case)
    facts = [
        f"{len(case.calls)} call(s): {_e(_kinds(case))}",
        _e(_gap_words(case)),
        f"{compactions} compaction{'' if compactions == 1 else 's'}",
        root,
    ]
    out = [
        f'<section class=case id="{anchor}">',
        f'<h2><a href="#{anchor}">{_e(title)}</a> <a class=up href="#cases">↑ cases</a></h2>',
        f"<p class=facts>{' · '.join(facts)}</p>",
        "<table class=lanes><tr><th>provider</th><th>prefix-stable</th><th>cached</th>"
        "<th>cost vs uncached</th><th>vs perfect cache</th><th>vs naive</th>"
        f"<th class=chart>input tokens per call<br>(scale 0&ndash;{tokens(tallest)})</th></tr>",
    ]
    for name in sorted({*rows, *case.caches}):
        row = rows.get(name)
        cells = (
            [
                "yes" if row.prefix_stable else "<span class=fail>NO</span>",
                f"{row.cached_share:.1%}",
                f"{row.cost_ratio:.1%}",
                _ratio(row.cost_vs_bound),
                _ratio(row.cost_vs_naive),
            ]
            if row is not None
            else ["", "", "", "", ""]
        )
        lane = _lane(case, case.caches.get(name), name, layout, tallest)
        out.append(
            f"<tr><td>{_e(name)}</td>{''.join(f'<td>{c}</td>' for c in cells)}"
            f"<td class=chart>{lane}</td></tr>"
        )
    out += [
        f"<tr><td colspan=6></td><td class=chart>{_axis(case, layout)}</td></tr>",
        "</table></section>",
    ]
    return out


_STYLE = f"""
body {{ font: 13px/1.4 system-ui, sans-serif; margin: 20px 24px; color: #222; }}
h1 {{ font-size: 20px; margin: 0 0 4px; }} h2 {{ font-size: 15px; margin: 18px 0 4px; }}
h3 {{ font-size: 13px; margin: 10px 0 2px; }}
table {{ border-collapse: collapse; }}
td, th {{ padding: 1px 7px; text-align: right; white-space: nowrap; }}
th {{ border-bottom: 1px solid #999; font-weight: 600; vertical-align: bottom; }}
table.lanes th {{ white-space: normal; width: 3.6em; line-height: 1.15; }}
section.case {{ width: min-content; }} table.lanes {{ width: 1px; font-size: 12px; }}
table.lanes td, table.lanes th {{ padding: 0 4px; }} table.lanes th.chart {{ white-space: nowrap; }}
td.chart svg {{ display: block; }}
table.lanes th:first-child {{ width: auto; }} table.lanes th.chart {{ width: auto; }}
table.index th:nth-child(2) {{ text-align: left; }}
td:first-child, th:first-child {{ text-align: left; }}
table.index td:nth-child(2) {{ text-align: left; white-space: normal; }}
tr.all td {{ border-top: 1px solid #999; font-weight: 600; }}
td.chart, th.chart {{ text-align: left; padding: 0 0 0 6px; }}
table.lanes td {{ vertical-align: middle; }}
.fail {{ color: {UNCACHED}; font-weight: bold; }} .verdict {{ font-size: 15px; margin: 4px 0; }}
.note, .facts {{ color: #555; margin: 2px 0 6px; max-width: 1100px; }}
dl.root {{ display: grid; grid-template-columns: max-content 1fr; gap: 1px 12px; margin: 4px 0; }}
dt {{ font-weight: bold; }} dd {{ margin: 0; }}
#cases-body {{ display: flex; flex-wrap: wrap; gap: 4px 24px; align-items: flex-start; }}
section.case h2 a {{ color: inherit; text-decoration: none; }}
a.up {{ font-size: 11px; font-weight: normal; color: #1565c0 !important; margin-left: 8px; }}
.key span {{ display: inline-block; width: 12px; height: 12px; margin: 0 4px 0 12px;
  vertical-align: -1px; }}
.key span.dash {{ width: 0; border-left: 2px dashed; }}
.key span.cold {{ height: 9px; border-top: 3px solid; }}
svg text {{ font: 9px system-ui, sans-serif; fill: #444; }}
svg text.title {{ font-size: 10px; }} svg text.idle {{ fill: #222; }}
"""


def page(report: Report, cases: Sequence[CaseFigures]) -> str:
    """The HTML of a verify report and its cases' per-call cache figures."""
    ids = case_ids(cases)
    roots, root_names = _roots(cases, ids)
    labels = collections.Counter(case.label for case in cases)
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>prefixlock report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1 id=top>prefixlock report</h1>",
        *_summary(report, cases),
        *roots,
        *_index(report, cases, ids),
        _KEY,
        "<div id=cases-body>",
    ]
    for case, anchor, root in zip(cases, ids, root_names, strict=True):
        out += _case(report, case, anchor, root, labels[case.label] > 1)
    out.append("</div></body></html>")
    return "\n".join(out) + "\n"
