"""The HTML page of every record kind in a real browser (Debian's ``chromium``, headless;
``.ci/run`` installs it): one launch per page dumps the DOM after the script ran, logs the
console to stderr and takes a screenshot. The charts must be drawn (SVG marks in the DOM,
the zoom window set by the script), the console silent, the screenshot taken.

Records: synthetic and dataloader from real runs of the commands (their ``--html`` writes
the page), a profile of a real jax.profiler capture (``pipecheck profile --html``), import
and diff from the real MaxText test logs, compare, Monitor and a two-host profile from the
unit tests' builders with steps, spans, anomalies and two hosts added.
Set PIPECHECK_SCREENSHOTS=DIR to keep the screenshots."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from pipecheck.records import store
from pipecheck.report.page import write_page
from tests import page_records
from tests.conftest import REPO, run_cli

CHROMIUM = os.environ.get("PIPECHECK_CHROMIUM", "chromium")
CONSOLE = re.compile(r":CONSOLE[:(]")
"""How Chromium's --enable-logging=stderr prints a console message (log, warning, error
or an uncaught exception)."""


def open_in_browser(page: str, png: str) -> tuple[str, list[str]]:
    """The DOM after the page's script ran, and the console messages; the screenshot is
    written to ``png``."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is not installed: apt-get install chromium (.ci/run does)")
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0", "--window-size=1100,2600",
         f"--screenshot={png}", "--dump-dom", f"file://{page}"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [line for line in proc.stderr.splitlines() if CONSOLE.search(line)]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    out = tmp_path_factory.mktemp("pages")
    for kind, args in (("synthetic", ["synthetic", "--steps", "12"]),
                       ("dataloader", ["dataloader", "--workers", "0", "--batches", "12"]),
                       ("capture", ["profile", str(CAPTURE), "--source", "tests/data"])):
        proc = run_cli(*args, "--json", str(out / f"{kind}.json"),
                       "--html", str(out / f"{kind}.html"))
        assert proc.returncode == 0, proc.stderr
    records = page_records.every_kind()
    for kind in ("compare", "monitor", "imported", "diff", "profile"):
        write_page([(f"{kind}.json", records[kind])], out / f"{kind}.html")
    return out


CAPTURE = REPO / "tests" / "data" / "captures" / "forced_sync.xplane.pb"
"""A real capture of a loop that reads the current step's loss (a forced sync)."""

CHARTS = {"compare": 6, "monitor": 3, "synthetic": 3, "dataloader": 2, "imported": 1,
          "diff": 1, "profile": 5, "capture": 4}
"""Charts each page draws (compare: steps, host time, Gantt, hosts, tuning path, batch
times; a run with spans: steps, host time, Gantt; dataloader: tuning path, batch times;
profile: device time, steps, host time, Gantt, and hosts when it has several)."""

ZOOMED = ("compare", "monitor", "synthetic", "profile", "capture")
"""Pages with the host-time chart, whose window the script sets on load."""


@pytest.mark.parametrize("kind", sorted(CHARTS))
def test_the_page_renders_in_a_browser(pages, kind):
    png = str(pages / f"{kind}.png")
    dom, console = open_in_browser(str(pages / f"{kind}.html"), png)
    assert console == []
    charts = re.findall(r'<svg class="chart.*?</svg>', dom, flags=re.S)
    assert len(charts) == CHARTS[kind]
    for chart in charts:  # each chart has data drawn in it, not just its axes
        assert re.search(r"<(?:rect|circle|polyline|polygon)\b", chart), chart[:300]
    if kind in ZOOMED:
        assert re.search(r'data-window="0:\d+"', dom)  # the script ran and set the window
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.getsize(png) > 20_000
    keep = os.environ.get("PIPECHECK_SCREENSHOTS")
    if keep:
        shutil.copy(png, keep)


def test_the_console_check_sees_a_script_error(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<html><body><svg class='chart'></svg><script>undefinedFn();</script>"
                    "</body></html>")
    _, console = open_in_browser(str(page), str(tmp_path / "broken.png"))
    assert len(console) == 1 and "undefinedFn is not defined" in console[0]


MOVE = ('<script>var p = document.querySelector("svg.zoomed").closest(".panel");'
        'var w = p.querySelector("input.width"); w.value = 10;'
        'w.dispatchEvent(new Event("input"));'
        'var f = p.querySelector("input.from"); f.value = 20;'
        'f.dispatchEvent(new Event("input"));</script></body>')
"""What a user does: zoom the host-time window to 10 steps, then move it to step 20."""


def test_the_host_time_window_moves_and_zooms(pages, tmp_path):
    page = tmp_path / "moved.html"
    page.write_text((pages / "compare.html").read_text().replace("</body>", MOVE))
    dom, console = open_in_browser(str(page), str(tmp_path / "moved.png"))
    assert console == []
    assert re.search(r'viewBox="20 0 10 [\d.]+"', dom)
    assert ">steps 20-29<" in dom


MEASURE = ('<script>var wide = [].filter.call(document.querySelectorAll(".lines p, .lead p"),'
           'function (e) { return e.scrollWidth > e.clientWidth + 1; });'
           'document.body.dataset.overflow = wide.length + ":" + '
           '(document.documentElement.scrollWidth > window.innerWidth ? "page" : "fits");'
           '</script></body>')
"""What a reader sees of the findings: how many of their lines run past their box, and
whether the page is wider than the window."""


def test_the_profile_page_of_a_real_capture_charts_the_device_and_wraps_its_findings(
        pages, tmp_path):
    record = store.load(pages / "capture.json")
    page = tmp_path / "measured.html"
    page.write_text((pages / "capture.html").read_text().replace("</body>", MEASURE))
    png = str(tmp_path / "capture.png")
    dom, console = open_in_browser(str(page), png)
    assert console == []
    device = re.search(r'<svg class="chart device".*?</svg>', dom, flags=re.S)
    assert device is not None
    steps = re.findall(r'<g class="device-step" data-step="(\d+)">', device[0])
    assert steps == [str(s.step) for s in record.steps]
    assert len(re.findall(r'class="cause"', device[0])) >= 3  # busy, input, sync at least
    for step, bar in re.findall(r'<g class="device-step" data-step="(\d+)">(.*?)</g>',
                                device[0]):  # each step's idle drawn by the record's causes
        i = [s.step for s in record.steps].index(int(step))
        causes = {c for c, fields in (("input", ("input",)), ("sync", ("sync",)),
                                      ("compile", ("compile",)), ("dispatch", ("dispatch",)),
                                      ("other", ("checkpoint", "host")))
                  if sum(getattr(record.device_idle, f)[i] for f in fields) > 0}
        assert set(re.findall(r'data-cause="([^"]+)"', bar)) == causes
        assert 'class="idle" x=' not in bar  # no idle left unsplit
    assert "not split by cause" not in dom
    assert '<div class="lines">' in dom and 'data-overflow="0:fits"' in dom
    assert any("forced-sync" in panel for panel in dom.split('<div class="lines">')[1:])
    keep = os.environ.get("PIPECHECK_SCREENSHOTS")
    if keep:
        shutil.copy(png, keep)


def test_the_overflow_check_sees_a_line_that_runs_off(pages, tmp_path):
    page = tmp_path / "nowrap.html"
    page.write_text((pages / "capture.html").read_text()
                    .replace("</head>", "<style>.lines p{white-space:nowrap}</style></head>")
                    .replace("</body>", MEASURE))
    dom, console = open_in_browser(str(page), str(tmp_path / "nowrap.png"))
    assert console == []
    found = re.search(r'data-overflow="(\d+):', dom)
    assert found is not None and int(found[1]) >= 1
