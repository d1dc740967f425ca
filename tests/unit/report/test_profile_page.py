"""The page of a ``profile`` record read from real jax.profiler captures
(``tests/data/captures/``): a bar per step on the device (busy, its idle split by cause as
the record keeps it; in one piece for a record written before it kept it), the steady
step's idle split by cause, and findings that wrap with the page."""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

from pipecheck.analysis import steady_state
from pipecheck.cli import main
from pipecheck.records import store
from pipecheck.report import charts, plot
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
    """(step, busy height, idle height, hover, {cause: height}) of each step's bar (the
    idle segments a record does not split by cause under ``"none"``)."""
    out = []
    for m in re.finditer(r'<g class="device-step" data-step="(\d+)"><title>([^<]*)</title>'
                         r'(.*?)</g>', chart_svg):
        busy = re.findall(r'<rect class="busy"[^>]*height="([\d.]+)"', m[3])
        idle = {cause or "none": float(h) for cause, h in re.findall(
            r'<rect class="idle"(?: data-cause="([^"]+)")?[^>]*height="([\d.]+)"', m[3])}
        assert len(busy) == 1
        out.append((int(m[1]), float(busy[0]), sum(idle.values()), m[2], idle))
    return out


CAUSES = {"input": ("input",), "sync": ("sync",), "compile": ("compile",),
          "dispatch": ("dispatch",), "other": ("checkpoint", "host")}
"""The causes a step's bar is drawn in, and the record's ``device_idle`` columns of each."""


def scale_of(chart_svg, times):
    """Pixels per second, one scale for every bar not cut at the top, and those bars."""
    drawn = bars(chart_svg)
    heights = np.asarray([b[1] + b[2] for b in drawn])
    cut = 'class="cut"' in chart_svg
    whole = np.flatnonzero(heights < heights.max() - 0.01) if cut else np.arange(len(drawn))
    px_per_s = heights[whole] / times[whole]
    assert np.allclose(px_per_s, px_per_s[0], rtol=0.01)
    return float(px_per_s[0]), whole.tolist()


@pytest.mark.parametrize("name", ["compute_bound", "input_bound", "forced_sync"])
def test_one_bar_per_step_split_into_device_busy_and_idle(records, name):
    r = records[name]
    chart = charts.device_time_chart(r.steps, r.device_busy_s, r.device_time, r.device_idle)
    assert chart is not None
    drawn = bars(chart.svg)
    assert [b[0] for b in drawn] == [s.step for s in r.steps]
    times = np.asarray([s.time_s for s in r.steps])
    busy = np.asarray(r.device_busy_s)
    px_per_s, whole = scale_of(chart.svg, times)
    for i in whole:
        assert drawn[i][1] == pytest.approx(busy[i] * px_per_s, abs=0.02)
        assert drawn[i][2] == pytest.approx((times[i] - busy[i]) * px_per_s, abs=0.05)
        assert f"device busy {charts.ms(busy[i])}" in drawn[i][3]


@pytest.mark.parametrize("name", ["compute_bound", "input_bound", "forced_sync"])
def test_each_steps_idle_is_drawn_by_cause_as_the_record_keeps_it(records, name):
    r = records[name]
    idle = r.device_idle
    assert idle is not None and all(len(getattr(idle, f)) == len(r.steps)
                                    for fields in CAUSES.values() for f in fields)
    chart = charts.device_time_chart(r.steps, r.device_busy_s, r.device_time, idle)
    assert chart is not None
    drawn = bars(chart.svg)
    px_per_s, whole = scale_of(chart.svg, np.asarray([s.time_s for s in r.steps]))
    for i in whole:
        seconds = {c: sum(getattr(idle, f)[i] for f in fields) for c, fields in CAUSES.items()}
        expected = {c: v * px_per_s for c, v in seconds.items() if v > 0}
        assert drawn[i][4].keys() == expected.keys()  # every idle piece has its cause
        for cause, height in expected.items():
            assert drawn[i][4][cause] == pytest.approx(height, abs=0.02)
        for cause, v in seconds.items():
            if v > 0:
                assert f"{cause} {charts.ms(v)}" in drawn[i][3]
    legend = re.findall(r'</i>([^<]*)</span>', chart.legend)
    assert "device idle (not split by cause)" not in legend
    assert "idle: input" in legend


@pytest.mark.parametrize("name", ["compute_bound", "input_bound", "forced_sync"])
def test_the_records_per_step_idle_adds_up_to_its_steps_and_its_device_time(records, name):
    r = records[name]
    idle = {f: np.asarray(getattr(r.device_idle, f)) for fs in CAUSES.values() for f in fs}
    times = np.asarray([s.time_s for s in r.steps])
    assert sum(idle.values()) == pytest.approx(times - np.asarray(r.device_busy_s), abs=1e-9)
    steady = steady_state.steady_mask(r.steps)
    assert steady.sum() == r.device_time.steps
    for field, row in (("input", "idle: input wait"), ("sync", "idle: sync"),
                       ("compile", "idle: compile"), ("checkpoint", "idle: checkpoint"),
                       ("dispatch", "idle: dispatch"), ("host", "idle: host work")):
        assert idle[field][steady].sum() == pytest.approx(r.device_time.seconds(row), abs=1e-9)


def test_a_record_written_before_the_per_step_split_loads_and_draws_idle_whole(
        records, tmp_path):
    r = records["forced_sync"]
    data = r.to_dict()
    del data["device_idle"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    loaded = store.load(old)
    assert loaded.device_idle is None and loaded.steps == r.steps
    chart = charts.device_time_chart(loaded.steps, loaded.device_busy_s, loaded.device_time,
                                     loaded.device_idle)
    assert chart is not None
    drawn = bars(chart.svg)
    assert all(set(b[4]) == {"none"} for b in drawn if b[2] > 0)  # one grey idle piece
    assert "device idle (not split by cause)" in chart.legend
    assert "does not keep each step's idle by cause" in chart.note
    page = render_page([("old.json", loaded)])
    assert 'data-cause="input"' not in page.split('class="steady-device"')[0]


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
    report = page[page.index('<div class="panel words-rest">'):]  # after the gains' panel
    lines = re.search(r'<div class="lines">(.*?)</div>', report)
    assert lines is not None and finding.message in lines[1]
    assert not re.search(r"<pre>[^<]*forced-sync", page)  # no longer a scrolling <pre>
    assert re.search(r"<pre>where the device&#x27;s time went", page)  # a text table stays


def test_a_profiles_sync_lane_reads_any_sync_on_the_page_and_in_the_plot(
        records, tmp_path, monkeypatch):
    r = records["forced_sync"]
    page = render_page([("p.json", r)])
    gantt = re.search(r'aria-label="gantt".*?</svg>', page, flags=re.S)
    assert gantt is not None
    lanes = re.findall(r'<text class="lane"[^>]*>(.*?)</text>', gantt[0])
    assert ("<tspan" in lanes[2] and "device wait</tspan>" in lanes[2]
            and "(syncs: lagged and forced)</tspan>" in lanes[2])
    assert not any(re.search(r">sync<", lane) for lane in lanes)
    path = tmp_path / "p.json"
    store.save(r, path)
    labels = []
    real = plot.render_png

    def spy(*args, **kwargs):
        labels.append(kwargs["sync_label"])
        return real(*args, **kwargs)

    monkeypatch.setattr(plot, "render_png", spy)
    plot.plot_run(path, tmp_path / "p.png")
    assert labels == [plot.ANY_SYNC]
