"""The compare page's what-if chart: the loader model's predicted D against the worker
count (with its interval), beside the D measured at the same read settings."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from pipecheck.analysis.loader import loader_model as lm
from pipecheck.records.common import Estimate
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.whatif import Interval, WhatIfCheck
from pipecheck.report import svg
from pipecheck.report.charts import GOAL_COLOR, MARK_COLOR, RUN_COLORS, Chart
from pipecheck.units import ms

PREDICTED_COLOR = "#2ca02c"

CURVE_WORKERS = 8
"""The curve runs to at least 8 workers (the tuner's default ceiling on 2-4 cores)."""


def _same_reads(s: GrainSettings, like: GrainSettings) -> bool:
    return (s.threads, s.prefetch) == (like.threads, like.prefetch) and \
        (s.workers == 0 or s.per_worker_buffer == like.per_worker_buffer)


def predicted_curve_chart(settings: Sequence[LoaderSetting], like: GrainSettings,
                          cores: int, goal_s: float | None,
                          ram_budget_mb: float | None = None,
                          check: WhatIfCheck | None = None) -> Chart | None:
    """D predicted for 0..N workers at ``like``'s read settings, the measured points at
    those read settings, and the self-check's setting when it has them; None when the
    model cannot be fitted to ``settings``."""
    try:
        model = lm.fit_loader_model(settings, cores, ram_budget_mb)
    except lm.NotPredictable:
        return None
    top_w = max(CURVE_WORKERS, 2 * max(s.workers for s in settings))
    ws = np.arange(0, top_w + 1, dtype=float)
    preds = [lm.predict_loader(model, GrainSettings(int(w), like.per_worker_buffer,
                                                    like.threads, like.prefetch), cores)
             for w in ws]
    value = np.asarray([p.interval.value for p in preds]) * 1e3
    low = np.asarray([p.interval.low for p in preds]) * 1e3
    high = np.asarray([p.interval.high for p in preds]) * 1e3
    points: list[tuple[int, Estimate | Interval]] = [
        (s.workers, s.loader_time) for s in settings if _same_reads(s.settings, like)]
    if check is not None and _same_reads(check.setting.grain(), like):
        points.append((check.setting.workers, check.measured_loader_s))
    top = max([float(high.max()), (goal_s or 0.0) * 1e3]
              + [p[1].high * 1e3 for p in points if math.isfinite(p[1].high)]) * 1.1
    x = svg.Scale(-0.5, top_w + 0.5, svg.LEFT, svg.WIDTH - svg.RIGHT)
    y = svg.Scale(0.0, top or 1.0, svg.HEIGHT - svg.BOTTOM, svg.TOP)
    body = svg.frame(x, y, f"workers (threads={like.threads}, prefetch={like.prefetch})",
                     "D: ms per batch")
    body.append(svg.polygon(x.many(ws), y.many(low), y.many(high), PREDICTED_COLOR, 0.15))
    body.append(svg.polyline(x.many(ws), y.many(value), PREDICTED_COLOR, cls="line predicted"))
    for w, p in zip(ws.tolist(), preds, strict=True):
        body.append(svg.marker(x(w), y(p.interval.value * 1e3), PREDICTED_COLOR,
                               f"{int(w)} workers: predicted {ms(p.interval.value)} "
                               f"({ms(p.interval.low)} .. {ms(p.interval.high)}); binds: "
                               f"{p.binding}", cls="mark predicted", radius=2.5))
    if goal_s is not None:
        gy = y(goal_s * 1e3)
        body.append(f'<line class="goal" stroke="{GOAL_COLOR}" x1="{svg.LEFT}" '
                    f'x2="{svg.WIDTH - svg.RIGHT}" y1="{gy:.1f}" y2="{gy:.1f}">'
                    f"<title>goal: D &lt;= {ms(goal_s)}</title></line>")
    for i, (w, est) in enumerate(points):
        checked = check is not None and i == len(points) - 1 and \
            _same_reads(check.setting.grain(), like)
        px = x(w)
        body.append(f'<line class="whisker" x1="{px:.1f}" x2="{px:.1f}" '
                    f'y1="{y(est.low * 1e3):.1f}" y2="{y(est.high * 1e3):.1f}"/>')
        body.append(svg.marker(px, y(est.value * 1e3), MARK_COLOR if checked else RUN_COLORS[0],
                               f"{w} workers: measured {ms(est.value)}"
                               + (" (the self-check)" if checked else ""), cls="mark measured"))
    keys = [("predicted D (interval)", PREDICTED_COLOR), ("measured D", RUN_COLORS[0])]
    if check is not None:
        keys.append(("self-check, measured", MARK_COLOR))
    if goal_s is not None:
        keys.append((f"goal: D <= {ms(goal_s)}", GOAL_COLOR))
    return Chart(svg.svg(body, "predicted loader time against workers"), svg.legend(keys),
                 f"The loader model fitted to the {model.settings_fitted} settings tried "
                 f"(docs/whatif.md), at the chosen read settings on {cores} cores; hover a "
                 "point for its numbers and what binds.")
