"""The compare page's predicted D-vs-workers curve, on a real compare record."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pipecheck.records import store
from pipecheck.records.compare import CompareResult
from pipecheck.report.page import render_page
from pipecheck.report.whatif_chart import CURVE_WORKERS, predicted_curve_chart

RECORD = Path(__file__).parents[2] / "data" / "whatif" / "compare_calibrated_load40_cpu2.json"


def test_the_curve_spans_the_worker_counts_beside_the_measured_points():
    r = store.load(RECORD, expect=CompareResult)
    like = dataclasses.replace(r.tuning.chosen, threads=1, prefetch=2)  # 0, 1, 3, 4 workers
    chart = predicted_curve_chart(r.loader, like, 2, 0.012)
    assert chart is not None
    assert chart.svg.count('class="mark predicted"') == CURVE_WORKERS + 1
    assert chart.svg.count('class="mark measured"') == 4
    assert "binds: MapMapDataset(transform=CalibratedBatches)" in chart.svg
    assert "goal: D &lt;= 12.0 ms" in chart.svg


def test_no_curve_where_the_model_cannot_be_fitted_and_the_page_leaves_it_out():
    r = store.load(RECORD, expect=CompareResult)
    one = dataclasses.replace(r, loader=r.loader[:1])
    assert predicted_curve_chart(one.loader, r.tuning.chosen, 2, 0.012) is None
    page = render_page([("c.json", one)])  # the chart left out, the rest drawn
    assert "loader time against workers: predicted and measured" not in page
    assert "loader settings tried: the tuning path" in page
