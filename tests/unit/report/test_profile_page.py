"""The page of a ``profile`` record read from real jax.profiler captures
(``tests/data/captures/``): a bar per step on the device (busy, the rest idle), the steady
step's idle split by cause, and findings that wrap with the page."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from pipecheck.cli import main
from pipecheck.records import store
from pipecheck.report import charts
from pipecheck.report.page import render_page

CAPTURES = pathlib.Path(__file__).resolve().parents[2] / "data" / "captures"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("profiles")
    found = {}
    for name in ("compute_bound", "input_bound", "forced_sync"):
        path = out / f"{name}.json"
        assert main(["profile", str(CAPTURES / f"{name}.xplane.pb"), "--source",
                     str(CAPTURES.parent), "--json", str(path), "--quiet"]) == 0
        found[name] = store.load(path)
    return found


def bars(chart_svg):
    """(step, busy height, idle height, hover) of each step's bar."""
    out = []
    for m in re.finditer(r'<g class="device-step" data-step="(\d+)"><title>([^<]*)</title>'
                         r'(.*?)</g>', chart_svg):
        h = dict(re.findall(r'<rect class="(busy|idle)"[^>]*height="([\d.]+)"', m[3]))
        out.append((int(m[1]), float(h["busy"]), float(h["idle"]), m[2]))
    return out


@pytest.mark.parametrize("name", ["compute_bound", "input_bound", "forced_sync"])
def test_one_bar_per_step_split_into_device_busy_and_idle(records, name):
    r = records[name]
    chart = charts.device_time_chart(r.steps, r.device_busy_s, r.device_time)
    assert chart is not None
    drawn = bars(chart.svg)
    assert [b[0] for b in drawn] == [s.step for s in r.steps]
    times = np.asarray([s.time_s for s in r.steps])
    busy = np.asarray(r.device_busy_s)
    cut = 'class="cut"' in chart.svg
    heights = np.asarray([b[1] + b[2] for b in drawn])
    whole = np.flatnonzero(heights < heights.max() - 0.01) if cut else np.arange(len(drawn))
    px_per_s = heights[whole] / times[whole]  # one scale for every bar not cut at the top
    assert np.allclose(px_per_s, px_per_s[0], rtol=0.01)
    for i in whole.tolist():
        assert drawn[i][1] == pytest.approx(busy[i] * px_per_s[0], abs=0.02)
        assert drawn[i][2] == pytest.approx((times[i] - busy[i]) * px_per_s[0], abs=0.02)
        assert f"device busy {charts.ms(busy[i])}" in drawn[i][3]


def test_the_steady_step_splits_the_idle_by_cause(records):
    r = records["input_bound"]
    split = dict((label, s) for label, s, _ in charts.device_split(r.device_time))
    n = r.device_time.steps
    rows = {row.category: row.seconds for row in r.device_time.rows}
    assert split["device busy"] == pytest.approx(rows["device busy"] / n)
    assert split["idle: input"] == pytest.approx(rows["idle: input wait"] / n)
    assert split["idle: other"] == pytest.approx(
        (rows["idle: checkpoint"] + rows["idle: host work"]) / n)
    assert sum(split.values()) == pytest.approx(r.device_time.wall_s / n)  # the mean step
    chart = charts.device_time_chart(r.steps, r.device_busy_s, r.device_time)
    assert chart is not None
    steady = re.search(r'<g class="steady-device">(.*?)</g>', chart.svg, flags=re.S)
    assert steady is not None
    titles = re.findall(r"<title>([^<]*)</title>", steady[1])
    assert titles[:2] == [f"device busy: {charts.ms(split['device busy'])} per steady step "
                          f"({100 * split['device busy'] / sum(split.values()):.0f}%)",
                          f"idle: input: {charts.ms(split['idle: input'])} per steady step "
                          f"({100 * split['idle: input'] / sum(split.values()):.0f}%)"]
    assert split["idle: input"] > 3 * split["device busy"]  # the capture is input-bound


def test_the_profile_page_draws_the_device_first_and_its_findings_wrap(records):
    r = records["forced_sync"]
    page = render_page([("p.json", r)])
    titles = re.findall(r'<div class="panel"><h3>([^<]*)</h3>', page)
    assert titles[:2] == ["device time per step", "step times"]
    assert "device wait (syncs: lagged and forced)" in page  # the thread in any sync
    finding = next(f for f in r.findings if f.kind == "forced-sync")
    per_step = charts.ms(finding.numbers["seconds_per_step"])
    assert f"forced sync (sync locator): {per_step} per step" in page
    lines = re.search(r'<div class="lines">(.*?)</div>', page)
    assert lines is not None and finding.message in lines[1]
    assert not re.search(r"<pre>[^<]*forced-sync", page)  # no longer a scrolling <pre>
    assert re.search(r"<pre>where the device&#x27;s time went", page)  # a text table stays
