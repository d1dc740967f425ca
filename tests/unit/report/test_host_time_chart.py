"""The host-time chart names the loop's lagged sync as what it is (the host waiting while
the device does its work) and keeps the forced syncs the sync locator found apart."""

from __future__ import annotations

import re

import numpy as np
import pytest

from pipecheck.report import charts
from pipecheck.report.page import render_page
from tests import page_records
from tests.unit.step_tables import table


def keys(chart):
    return re.findall(r'<span class="key"><i style="background:([^"]+)"></i>([^<]+)</span>',
                      chart.legend)


def test_a_compute_bound_runs_sync_is_named_as_waiting_for_the_device():
    steps, _ = page_records.run_steps()  # ~40 ms of each ~43 ms step in the lagged sync
    chart = charts.host_time_chart(steps)
    assert chart is not None
    names = [name for _, name in keys(chart)]
    assert names == ["checkpoint", "data_wait", "dispatch", "device wait (lagged sync)", "other"]
    assert f"device wait (lagged sync) {charts.ms(steps[5].spans['sync'])}" in chart.svg
    assert not re.search(r"[;:] sync \d", chart.svg)  # no hover calls it a plain "sync"
    assert "forced" not in chart.svg  # none located: nothing drawn for them
    assert "the device does its work" in chart.note


def test_forced_syncs_are_drawn_apart_at_their_cost_per_step():
    steps, _ = page_records.run_steps()
    forced = (charts.ForcedSync("/home/u/train.py:42", 0.012),
              charts.ForcedSync("/home/u/eval.py:7", 0.003))
    chart = charts.host_time_chart(steps, forced)
    assert chart is not None
    colors = dict((name, c) for c, name in keys(chart))
    lagged = colors["device wait (lagged sync)"]
    forced_key = [n for n in colors if n.startswith("forced sync")]
    assert forced_key == ["forced sync (sync locator): 15.0 ms per step"]
    assert colors[forced_key[0]] != lagged
    line = re.search(r'<line class="forced-sync"[^>]*y1="([\d.]+)"[^>]*>(.*?)</line>',
                     chart.svg)
    assert line is not None and "train.py:42 12.0 ms" in line[2] and "eval.py:7 3.00 ms" in line[2]
    # at 15 ms on the chart's own scale (its top: 1.05 x the ceiling of the step bars)
    top = 1.05 * charts.host_time_ceiling(np.asarray([s.time_s * 1e3 for s in steps]))
    plot_h = charts.svg.HEIGHT - charts.svg.BOTTOM - charts.svg.TOP
    assert float(line[1]) == pytest.approx(charts.svg.HEIGHT - charts.svg.BOTTOM
                                           - 15.0 / top * plot_h, abs=0.1)


def test_the_monitor_page_draws_the_located_sync_apart_from_the_lagged_one():
    record = page_records.monitor_record()  # train.py:42 waits 0.5 s over 60 steps
    page = render_page([("m.json", record)])
    assert "forced sync (sync locator): 8.33 ms per step" in page
    assert 'class="forced-sync"' in page and "train.py:42 8.33 ms" in page
    assert "device wait (lagged sync)" in page


def test_forced_syncs_of_a_step_are_drawn_under_the_tables_name():
    from pipecheck.records.common import StepRecord
    from pipecheck.records.kinds import SYNC, WALL_ROWS

    steps = [StepRecord(i, 0.010, spans={"data_wait": 0.001, "dispatch": 0.001,
                                         "sync": 0.002, "forced_sync": 0.005, "other": 0.001})
             for i in range(20)]
    chart = charts.host_time_chart(table(steps))
    assert chart is not None
    names = [name for _, name in keys(chart)]
    assert WALL_ROWS[SYNC] in names and "forced_sync" not in names
    assert f"{WALL_ROWS[SYNC]} 5.00 ms" in chart.svg and "other 1.00 ms" in chart.svg
