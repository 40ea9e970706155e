"""``prefixlock report OUT.html``: a self-contained page, looked at in headless Chromium."""

from __future__ import annotations

import html.parser
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
from prefixlock.review.page import READ, UNCACHED, WRITE

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
            if name in ("src", "href", "srcset", "poster", "data", "action") and value:
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
    assert text.count("<rect ") == 5 * 8 * 3  # providers x calls x (read, write, uncached)
    assert text.count("class=reset") == 5  # the compaction, once per provider
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
    tests = lines.index(".venv/bin/pytest")
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
            "--window-size=900,700", f"--screenshot={shot}", page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-500:]
    pixels = _pixels(shot.read_bytes())
    assert pixels[:2] == (900, 700)
    # the bars: cache reads dominate after the first call, writes show, the key too
    assert _count(pixels, READ) > 2000
    assert _count(pixels, WRITE) > 500
    assert _count(pixels, UNCACHED) > 50  # at least the colour key


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
    rows = dict(re.findall(r"<tr><td>([a-z-]+)</td>.*?<td>([0-9.]+%)</td></tr>", text))
    captions = dict(re.findall(r"<figcaption>([a-z-]+) — [^,]+, cost ([0-9.]+%) of", text))
    assert len(rows) == 5
    assert captions == rows


def test_two_scenarios_with_one_label_keep_their_own_rows(tmp_path: Path) -> None:
    """A case folder's scenario.yaml and a loose scenario file of the same stem share a
    label: each section of the page shows its own scenario's table rows, not both."""
    loose = tmp_path / "mode-ask.yaml"
    shutil.copyfile(REPO / "golden" / "mode-ask" / "scenario.yaml", loose)
    out = tmp_path / "report.html"
    args = ["report", str(out), str(REPO / "golden" / "mode-ask"), str(loose), "--provider"]
    assert main([*args, "anthropic"]) == 0
    sections = out.read_text(encoding="utf-8").split("<h2>")[1:]
    assert len(sections) == 2
    assert sections[1].startswith(f"mode-ask — ask mode ({loose})</h2>")
    for section in sections:
        assert section.count("<tr><td>anthropic</td>") == 1
