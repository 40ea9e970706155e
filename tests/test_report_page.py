"""``prefixlock report OUT.html``: a self-contained page, looked at in headless Chromium."""

from __future__ import annotations

import html
import html.parser
import itertools
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conv_helpers import REPO
from prefixlock.cli.commands import main
from prefixlock.core.atomic import umask
from prefixlock.review.page import COLD_MARK, GAP, READ, UNCACHED, WRITE

CASE = REPO / "golden" / "automatic-compaction"

#: Why the screenshot test did not run; with pytest's ``-ra`` (pyproject's addopts) the
#: reason is one line of the run's summary.
NO_CHROMIUM = (
    "chromium is not installed (apt-get install chromium): the report page was not screenshotted"
)
#: In CI (``CI=true``, as GitHub Actions and ``.ci/run`` set it) the screenshot is required.
NO_CHROMIUM_IN_CI = (
    "chromium is not installed, and CI=true requires the report screenshot (.ci/run installs it)"
)


def chromium() -> str:
    """The headless browser: missing, the test fails in CI and skips elsewhere, saying why."""
    found = shutil.which("chromium")
    if found is not None:
        return found
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(NO_CHROMIUM_IN_CI)
    pytest.skip(NO_CHROMIUM)


class _Links(html.parser.HTMLParser):
    """Every element and attribute that would make the browser fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            in_page = name == "href" and value is not None and value.startswith("#")
            if name in ("src", "href", "srcset", "poster", "data", "action") and value:
                if in_page:  # a link to an id of the page itself fetches nothing
                    continue
                self.fetches.append(f"<{tag} {name}={value}>")


def test_the_page_is_self_contained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(out), str(CASE)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    text = out.read_text(encoding="utf-8")
    parser = _Links()
    parser.feed(text)
    assert parser.fetches == []
    assert not parser.tags & {"script", "link", "img", "iframe", "object", "embed", "base"}
    assert "url(" not in text and "@import" not in text
    assert (
        text.count("<rect class=bar ") == 6 * 8 * 3
    )  # providers x calls x (read, write, uncached)
    assert text.count("class=reset") == 6  # the compaction, once per provider
    assert "automatic-compaction — automatic compaction keeps only the latest context" in text


def _pixels(png: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, bytes per pixel, raw rows) of an 8-bit RGB or RGBA PNG."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, data, header = 8, b"", b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        chunk = png[pos + 8 : pos + 8 + length]
        header = chunk if kind == b"IHDR" else header
        data += chunk if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw, rows, stride, previous = (
        zlib.decompress(data),
        bytearray(),
        width * bpp,
        bytearray(width * bpp),
    )
    for y in range(height):
        kind, line = (
            raw[y * (stride + 1)],
            bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]),
        )
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = previous[i]
            c = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows += line
        previous = line
    return width, height, bpp, bytes(rows)


def _count(pixels: tuple[int, int, int, bytes], colour: str) -> int:
    width, height, bpp, rows = pixels
    rgb = bytes.fromhex(colour[1:])
    return sum(1 for i in range(0, width * height * bpp, bpp) if rows[i : i + 3] == rgb)


def test_without_chromium_the_screenshot_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception) as failed:
        chromium()
    assert str(failed.value) == NO_CHROMIUM_IN_CI


def test_without_chromium_the_screenshot_skips_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        chromium()
    assert str(skipped.value) == NO_CHROMIUM


def test_the_skip_reason_is_a_line_of_the_run_summary(tmp_path: Path) -> None:
    """Run the screenshot test where no chromium is on PATH: pytest's summary (``-ra``)
    names the test and says why in one line."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(tmp_path)  # an empty folder: no chromium on it
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
         f"{__file__}::test_a_screenshot_in_headless_chromium_shows_the_bars"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    summary = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED [1] ")]
    assert len(summary) == 1, done.stdout[-2000:]
    assert summary[0].endswith(f": {NO_CHROMIUM}")


def test_ci_sets_ci_and_installs_chromium_before_the_tests() -> None:
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    tests = next(i for i, line in enumerate(lines) if line.startswith(".venv/bin/pytest"))
    assert lines.index("export CI=true") < tests
    install = [i for i, line in enumerate(lines) if "apt-get install -y -qq chromium" in line]
    assert install and install[-1] < tests


def test_a_screenshot_in_headless_chromium_shows_the_bars(tmp_path: Path) -> None:
    browser = chromium()
    page = tmp_path / "report.html"
    assert main(["report", str(page), str(CASE), "--provider", "anthropic"]) == 0
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=900,1000", f"--screenshot={shot}", page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    pixels = _pixels(shot.read_bytes())
    assert pixels[:2] == (900, 1000)
    # the bars (summary, root and index above them): cache reads after the first call,
    # the writes of the turns that start cold, the key's swatches
    assert _count(pixels, READ) > 600
    assert _count(pixels, WRITE) > 400
    assert _count(pixels, UNCACHED) > 50  # at least the colour key
    assert _count(pixels, GAP) > 600  # the two idle gaps (20 and 25 minutes)
    assert _count(pixels, COLD_MARK) > 60  # calls 4 and 6 start cold, and the key


def test_the_page_is_written_with_the_mode_a_plain_open_gives(tmp_path: Path) -> None:
    # written atomically through a private temporary file, then given the umask's mode
    out = tmp_path / "report.html"
    assert main(["report", str(out), str(CASE), "--provider", "anthropic"]) == 0
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask()


@pytest.mark.parametrize("case", ["automatic-compaction", "long-session"])
def test_the_charts_price_the_calls_as_the_table_does(tmp_path: Path, case: str) -> None:
    """Each chart's caption gives the same cost as its provider's row of the verify table
    above it: the bars are simulated with the calls' times too, so an entry that expired
    between two turns is written again in the bars as in the table (before, the charts
    ignored the times: automatic-compaction's anthropic chart said 34.5% of uncached
    under a table that said 54.9%)."""
    out = tmp_path / "report.html"
    assert main(["report", str(out), str(REPO / "golden" / case)]) == 0
    text = out.read_text(encoding="utf-8")
    section = text.split("<section class=case ", 1)[1]
    # a lane's row: provider, prefix-stable, cached, cost vs uncached (verify's), ... lane
    rows = re.findall(
        r"<tr><td>([a-z-]+)</td><td>yes</td><td>[0-9.]+%</td><td>([0-9.]+%)</td>.*?"
        r'<svg class=lane [^>]* aria-label="([a-z-]+) — [^"]+: tokens per call, cost '
        r'([0-9.]+%) of uncached">',
        section,
    )
    assert len(rows) == 6
    for provider, table_cost, lane_provider, lane_cost in rows:
        assert (lane_provider, lane_cost) == (provider, table_cost)


def test_two_scenarios_with_one_label_keep_their_own_rows(tmp_path: Path) -> None:
    """A case folder's scenario.yaml and a loose scenario file of the same stem share a
    label: each section of the page shows its own scenario's table rows, not both."""
    loose = tmp_path / "mode-ask.yaml"
    shutil.copyfile(REPO / "golden" / "mode-ask" / "scenario.yaml", loose)
    out = tmp_path / "report.html"
    args = ["report", str(out), str(REPO / "golden" / "mode-ask"), str(loose), "--provider"]
    assert main([*args, "anthropic"]) == 0
    sections = out.read_text(encoding="utf-8").split("<section class=case ")[1:]
    assert len(sections) == 2
    assert sections[0].startswith('id="case-mode-ask">\n<h2><a href="#case-mode-ask">mode-ask')
    assert sections[1].startswith(
        f'id="case-mode-ask-2">\n<h2><a href="#case-mode-ask-2">mode-ask — ask mode ({loose})</a>'
    )
    for section in sections:
        assert section.count("<tr><td>anthropic</td>") == 1


# --- the page's structure: summary, one root, navigation, axis, idle gaps, cold calls ---

STRUCTURE_CASES = ("automatic-compaction", "long-session")


@pytest.fixture(scope="module")
def structure_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("structure") / "report.html"
    assert main(["report", str(out), *(str(REPO / "golden" / c) for c in STRUCTURE_CASES)]) == 0
    return out.read_text(encoding="utf-8")


def _cells(row: str) -> list[str]:
    return re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)


def _expected_summary() -> dict[str, list[str]]:
    """The summary's rows worked out here from the replays, the simulator's calls and
    verify's rows: sums over the cases, ratios of the sums."""
    from fractions import Fraction

    from prefixlock.review.replay import provider_names, replay, serialize_calls
    from prefixlock.review.scenario import load_scenario
    from prefixlock.review.verify import simulate_calls, verify

    files = [REPO / "golden" / c / "scenario.yaml" for c in STRUCTURE_CASES]
    rows = {(r.file, r.provider): r for r in verify(files, ("all",), hash_seed=False).rows}
    sums: dict[str, list[Fraction | float | int]] = {}
    for path in files:
        scenario = load_scenario(path)
        calls = replay(scenario)
        names = provider_names(("all",))
        bodies = serialize_calls(calls, names)
        models = {s.provider: s.model for s in scenario.bundle.settings}
        for name in names:
            cache = simulate_calls(scenario, calls, name, bodies[name], models.get(name))
            cost = sum((c.cost for c in cache.calls), Fraction(0))
            uncached = sum((c.input_tokens * c.price_factor for c in cache.calls), Fraction(0))
            bound = sum(
                (
                    (c.bound_read_tokens * c.read_multiplier
                     + (c.input_tokens - c.bound_read_tokens) * c.write_multiplier)
                    * c.price_factor
                    for c in cache.calls
                ),
                Fraction(0),
            )  # fmt: skip
            naive = float(cost) / rows[(str(path), name)].cost_vs_naive
            read = sum(c.cache_read_tokens for c in cache.calls)
            total = sum(c.input_tokens for c in cache.calls)
            figures = [len(calls), read, total, cost, uncached, bound, naive]
            old = sums.get(name, [0, 0, 0, Fraction(0), Fraction(0), Fraction(0), 0.0])
            sums[name] = [a + b for a, b in zip(old, figures, strict=True)]  # type: ignore[operator]
    sums["all providers"] = [sum(col) for col in zip(*sums.values(), strict=True)]  # type: ignore[arg-type]

    def cells(calls: int, read: int, total: int, cost: Fraction, uncached: Fraction,
              bound: Fraction, naive: float) -> list[str]:  # fmt: skip
        return [
            f"{calls:,}",
            f"{read / total:.1%}",
            f"{float(cost / uncached):.1%}",
            f"{float(cost / bound):.2f}&times;",
            f"{float(cost) / naive:.2f}&times;",
        ]

    return {name: cells(*figures) for name, figures in sums.items()}  # type: ignore[arg-type]


def test_the_summary_heads_the_page_with_the_sums_of_every_case(structure_page: str) -> None:
    body = structure_page.split("<body>", 1)[1]
    assert body.startswith("\n<h1 id=top>prefixlock report</h1>\n<section id=summary>\n")
    assert (
        '<p class="verdict ok">2 case(s) · 6 provider(s) · 39 model call(s) per provider · '
        "every invariant holds</p>" in body
    )
    table = re.search(r"<table class=summary>(.*?)</table>", body, re.S)
    assert table is not None and body.index("<table class=summary>") < body.index("id=roots")
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)
    assert _cells(rows[0]) == [
        "provider", "model calls", "cached tokens", "cost vs uncached", "vs perfect cache",
        "vs naive harness",
    ]  # fmt: skip
    found = {cells[0]: cells[1:] for cells in map(_cells, rows[1:])}
    assert list(found) == [
        "anthropic", "bedrock-anthropic", "bedrock-converse", "gemini", "openai-chat",
        "openai-responses", "all providers",
    ]  # fmt: skip
    assert found == _expected_summary()


def test_the_shared_root_is_shown_once(structure_page: str) -> None:
    tools = re.search(r"<dt>tools \(16\)</dt><dd>(.*?)</dd>", structure_page)
    assert tools is not None and tools.group(1).startswith("codebase_search, delete_file, ")
    assert structure_page.count(tools.group(1)) == 1
    assert structure_page.count("<dl class=root>") == 1
    assert structure_page.count("<dt>bundle</dt>") == 1
    roots = structure_page.index("<section id=roots>\n<h2>The shared root</h2>")
    assert roots < structure_page.index("<nav id=cases>")
    for case in STRUCTURE_CASES:  # each case points to it
        section = structure_page.split(f'<section class=case id="case-{case}">', 1)[1]
        facts = section.split("<p class=facts>", 1)[1].split("</p>", 1)[0]
        assert facts.endswith('<a href="#roots">the shared root</a>')


def test_cases_of_two_roots_show_each_root_once_naming_its_cases(tmp_path: Path) -> None:
    other = tmp_path / "other"
    assert main(["init", str(other), "--name", "shop-helper"]) == 0
    (starter,) = sorted(other.glob("golden/*/scenario.yaml"))
    out = tmp_path / "report.html"
    args = ["report", str(out), str(REPO / "golden" / "mode-ask"), str(starter)]
    assert main([*args, "--provider", "anthropic"]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.count("<dl class=root>") == 2
    label = starter.parent.name
    assert '<h3 id=root-1>root 1 — 1 case(s): <a href="#case-mode-ask">mode-ask</a></h3>' in text
    assert f'<h3 id=root-2>root 2 — 1 case(s): <a href="#case-{label}">{label}</a></h3>' in text
    assert '<a href="#root-1">root 1</a></p>' in text
    assert '<a href="#root-2">root 2</a></p>' in text


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name == "id" and value:
                self.ids.append(value)
            if name == "href" and value:
                self.links.append(value)


def test_every_link_goes_to_an_id_of_the_page_and_the_index_reaches_each_case(
    structure_page: str,
) -> None:
    anchors = _Anchors()
    anchors.feed(structure_page)
    assert len(anchors.ids) == len(set(anchors.ids))
    assert anchors.links and all(link.startswith("#") for link in anchors.links)
    assert {link[1:] for link in anchors.links} <= set(anchors.ids)
    index = structure_page.split("<nav id=cases>", 1)[1].split("</nav>", 1)[0]
    sections = re.findall(r'<section class=case id="([^"]+)">', structure_page)
    assert sections == [f"case-{c}" for c in STRUCTURE_CASES]
    assert re.findall(r'<a href="#([^"]+)">', index) == sections
    row = re.search(r'<tr><td><a href="#case-long-session">.*?</tr>', index)
    assert row is not None
    assert _cells(row.group(0))[1:6] == [
        "long session with tool loops, restart, compaction and a context revert",
        "31",
        "5 (longest 40 min)",
        "1",
        "yes",
    ]


def _case(page: str, case: str) -> str:
    return page.split(f'<section class=case id="case-{case}">', 1)[1].split("</section>", 1)[0]


def test_the_lanes_share_a_labelled_axis_with_the_idle_gaps(structure_page: str) -> None:
    section = _case(structure_page, "long-session")
    assert "<th class=chart>input tokens per call<br>(scale 0&ndash;11.5k)</th>" in section
    lanes = re.findall(r"<svg class=lane .*?</svg>", section)
    assert len(lanes) == 6
    for lane in lanes:  # the token scale: its top and its zero
        ticks = re.findall(r"<text class=tick [^>]*>([^<]*)</text>", lane)
        assert ticks == ["11.5k", "0"]
        gaps = re.findall(r"<rect class=gap [^>]*><title>idle ([^<]*)</title>", lane)
        assert gaps == ["40 min", "25 min", "25 min", "30 min", "20 min"]
    (axis,) = re.findall(r"<svg class=axis .*?</svg>", section)
    # the scenario's user turns at 09:00, 09:40, 10:05, 10:30, 11:00, 11:20
    assert re.findall(r"<text class=idle [^>]*>([^<]*)</text>", axis) == [
        "40 min", "25 min", "25 min", "30 min", "20 min",
    ]  # fmt: skip
    numbers = re.findall(r"<text class=tick [^>]*>([^<]*)</text>", axis)
    assert numbers[0] == "1" and numbers[-1] == "30"  # 31 calls: every second one numbered
    assert re.search(r"<text class=title [^>]*>model call → \(grey: idle time\)</text>", axis)
    facts = section.split("<p class=facts>", 1)[1].split("</p>", 1)[0]
    assert facts.startswith(
        "31 call(s): 6 user turns, 23 tool-loop calls, 1 background event, 1 retry · "
        "idle 40 min, 25 min, 25 min, 30 min, 20 min · 1 compaction · "
    )


def _cold(lane: str) -> list[int]:
    return [int(n) for n in re.findall(r"<rect class=cold-mark [^>]*><title>call (\d+):", lane)]


def test_cold_calls_are_marked_where_the_cache_expired_in_the_gap(structure_page: str) -> None:
    """A call is marked cold where the entries of the call before it expired in the gap.
    Anthropic's and Bedrock's entries (``cache_ttl: auto``) are five-minute on a
    conversation's first turn and one-hour from then on, a compacted history's too:
    automatic-compaction's 20-minute gap after its first turn finds them expired (call
    4); long-session's pauses (20-40 minutes) all come after one-hour entries, so none of
    its calls is cold (call 28, after the compaction, was before ``auto`` kept one-hour
    markers there). Gemini's implicit entries live five minutes: every gap is cold.
    OpenAI's GPT-5.6 calls under ``auto`` end their root, context and turn entries with
    12h breakpoints, as the one-hour markers of the Claude wires: no gap of either case
    outlasts them (only the implicit tail's 30-minute entry expires in long-session's
    40-minute gap, as the Claude wires' 5-minute ones do), so none is cold."""
    lanes = {}
    for case in STRUCTURE_CASES:
        section = _case(structure_page, case)
        found = re.findall(r"<tr><td>([a-z-]+)</td>.*?(<svg class=lane .*?</svg>)", section)
        lanes[case] = {name: _cold(lane) for name, lane in found}
    marker_wires = ("anthropic", "bedrock-anthropic", "bedrock-converse")
    for name in marker_wires:
        assert lanes["automatic-compaction"][name] == [4], name
        assert lanes["long-session"][name] == [], name
    assert lanes["automatic-compaction"]["gemini"] == [4, 6]
    assert lanes["long-session"]["gemini"] == [14, 17, 21, 25, 28]
    for name in ("openai-chat", "openai-responses"):
        assert lanes["automatic-compaction"][name] == [], name
        assert lanes["long-session"][name] == [], name
    # the first turn's calls are back to back: nothing before them to expire
    assert all(n > 13 for n in itertools.chain(*lanes["long-session"].values()))


def test_every_text_the_scenario_supplies_is_escaped(tmp_path: Path) -> None:
    nasty = '<script>alert("x")</script> & <u>'
    source = (REPO / "golden" / "mode-ask" / "scenario.yaml").read_text(encoding="utf-8")
    loose = tmp_path / "a&b<i>.yaml"
    loose.write_text(source.replace("name: ask mode", f"name: '{nasty}'"), encoding="utf-8")
    out = tmp_path / "report.html"
    assert main(["report", str(out), str(loose), "--provider", "anthropic"]) == 0
    text = out.read_text(encoding="utf-8")
    assert "<script" not in text and "<u>" not in text and "<i>" not in text
    escaped = html.escape(nasty, quote=True)
    assert f'<h2><a href="#case-a-b-i">a&amp;b&lt;i&gt; — {escaped}</a>' in text
    assert f'<a href="#case-a-b-i">a&amp;b&lt;i&gt;</a></td><td>{escaped}</td>' in text


def _page_height(browser: str, page: Path, width: int, folder: Path) -> int:
    """The laid-out height of ``page`` in a window ``width`` pixels wide: a copy of it with
    a script that writes the height into the DOM chromium dumps (the page itself has no
    script)."""
    probe = folder / "probe.html"
    script = "<script>document.body.dataset.height = document.documentElement.scrollHeight"
    text = page.read_text(encoding="utf-8").replace("</body>", f"{script}</script></body>")
    probe.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={folder / 'profile'}", f"--window-size={width},800",
            "--dump-dom", probe.as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    found = re.search(r'data-height="(\d+)"', done.stdout)
    assert found is not None, done.stdout[-500:]
    return int(found.group(1))


#: Six short golden cases: their sections go two abreast in a 1280-pixel window.
SHORT_CASES = (
    "background-event", "changed-context", "checkpoint-round-trip", "context-revert",
    "identical-context", "mode-ask",
)  # fmt: skip


def test_short_cases_fit_a_reasonable_page(tmp_path: Path) -> None:
    """Six golden cases, every provider, in a 1280-pixel window: the summary, the root, the
    index, then the cases two abreast (4,350 px before: the root and a wide chart per
    provider repeated for every case, one case under the other; all 17 cases 12,000 px)."""
    browser = chromium()
    page = tmp_path / "report.html"
    assert main(["report", str(page), *(str(REPO / "golden" / c) for c in SHORT_CASES)]) == 0
    height = _page_height(browser, page, 1280, tmp_path)
    assert height <= 2200, height


def test_a_case_s_facts_count_its_calls_by_kind(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(out), str(REPO / "golden" / "retry"), "--provider", "gemini"]) == 0
    section = _case(out.read_text(encoding="utf-8"), "retry")
    facts = section.split("<p class=facts>", 1)[1].split("</p>", 1)[0]
    assert facts == (
        "9 call(s): 3 user turns, 2 tool-loop calls, 1 background event, 3 retries · "
        'idle 70 s, 2 min · 0 compactions · <a href="#roots">the shared root</a>'
    )


def test_many_idle_gaps_are_summed_up_and_their_labels_never_overlap(tmp_path: Path) -> None:
    turns = "".join(
        f'  - user: {{event: u{n}, query: "q{n}", timestamp: "2026-03-09T15:{2 * n:02d}:00Z"}}\n'
        f'  - assistant: {{text: "a{n}"}}\n'
        for n in range(12)
    )
    scenario = tmp_path / "chatty.yaml"
    scenario.write_text(f"name: chatty\nconversation: c\nbase: {{mode: agent}}\nsteps:\n{turns}")
    out = tmp_path / "report.html"
    assert main(["report", str(out), str(scenario), "--provider", "anthropic"]) == 0
    section = _case(out.read_text(encoding="utf-8"), "chatty")
    facts = section.split("<p class=facts>", 1)[1].split("</p>", 1)[0]
    assert facts.startswith("12 call(s): 12 user turns · 11 idle gaps, the longest 2 min · ")
    (axis,) = re.findall(r"<svg class=axis .*?</svg>", section)
    labels = re.findall(r'<text class=idle x="([0-9.]+)" y="([0-9]+)"', axis)
    assert 0 < len(labels) <= 11
    for row in {y for _, y in labels}:  # in each row, labels stand apart
        xs = [float(x) for x, y in labels if y == row]
        assert all(b - a >= 34 for a, b in itertools.pairwise(xs))
