"""The HTML page's charts: step times, host time per step, a Gantt of a window of steps,
hosts, loader settings. Pure functions from record parts to SVG (``report/svg.py``).

Long runs are binned as ``pipecheck plot`` bins them (``plot.binned_band``): the series
of a run over ``plot.BAND_MIN_STEPS`` steps is drawn as a band per bin, the stacked host
time as one bar per bin of consecutive steps (their mean); each chart says so under it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import Mapping, Sequence

import numpy as np

from pipecheck.records.common import Anomaly, Breakdown, Distribution, StepRecord
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.hosts import HostSummary, Straggler
from pipecheck.records.kinds import (
    COMPILE,
    DEVICE_BUSY_ROW,
    DISPATCH,
    IDLE_ROWS,
    INPUT,
    SYNC,
    TimeKind,
)
from pipecheck.records.profile import DeviceIdle
from pipecheck.records.steps import StepTable
from pipecheck.report import svg
from pipecheck.report.plot import (
    BAND_MIN_STEPS,
    COLORS,
    INTERVAL_ORDER,
    LAGGED_SYNC,
    binned_band,
    default_window,
    gantt_bars,
    lane_label,
    span_label,
)
from pipecheck.units import ms, short_location

MAX_MARKERS = 1500
"""Tagged or anomalous steps drawn one by one (the slowest first): more would not be told
apart on a chart ~900 pixels wide, and each costs ~150 bytes of page."""

MAX_BARS = 600
"""Bars of the stacked host-time chart; a longer run gets one bar per bin of steps (the
bins' mean): 600 bars x 9 spans keeps the chart near 0.5 MB and quick to redraw."""

MANY_MARKS = 100
"""Above this many marked steps the markers are drawn smaller, so the line stays visible."""

HOST_TIME_TYPICAL = 0.9
"""The quantile of the host-time bars taken as a typical tall bar (the steps kept out of
the steady state are usually well under a tenth of a run)."""

HOST_TIME_CLIP = 3.0
"""Bars over this many times the typical tall bar are cut at that height: room for a
2x stall to show as one, while a 25x compile step no longer squeezes every other bar
into the bottom few pixels."""

RUN_COLORS = ("#1f77b4", "#ff7f0e")
"""Run A and run B in an overlay."""

MARK_COLOR, GOAL_COLOR = "#d62728", "#9467bd"


@dataclasses.dataclass(frozen=True)
class Chart:
    """A chart's SVG, its legend and the sentence under it (what was binned, how to read)."""

    svg: str
    legend: str = ""
    note: str = ""


@dataclasses.dataclass(frozen=True)
class SeriesRun:
    """One run's steps in the step-time chart, with the steady state the record holds."""

    label: str
    steps: StepTable[StepRecord]
    steady: Distribution
    anomalies: Sequence[Anomaly] = ()


def _tagged_index(steps: StepTable[StepRecord]) -> np.ndarray:
    return np.asarray(sorted(steps.tagged()), dtype=np.int64)


def _marks(run: SeriesRun, numbers: np.ndarray, times: np.ndarray
           ) -> tuple[int, list[tuple[int, float, str]]]:
    """How many steps are tagged or anomalous, and (step, ms, hover text) of the
    ``MAX_MARKERS`` slowest of them."""
    causes = {a.step: a for a in run.anomalies}
    index = np.union1d(_tagged_index(run.steps),
                       np.flatnonzero(np.isin(numbers, np.fromiter(causes, np.int64))))
    shown = index[np.argsort(-times[index], kind="stable")][:MAX_MARKERS]
    out = []
    for i in shown.tolist():
        step = int(numbers[i])
        tags = getattr(run.steps[i], "tags", ())
        text = f"{run.label}step {step}: {ms(times[i] / 1e3)}"
        if tags:
            text += f"; tags: {', '.join(tags)}"
        if step in causes:
            a = causes[step]
            text += f"; likely cause: {a.cause} ({a.evidence})"
        out.append((step, float(times[i]), text))
    return int(index.size), out


def _y_scale(runs: Sequence[tuple[np.ndarray, np.ndarray, SeriesRun]]) -> svg.Scale:
    """Log when the slowest step is over 20x the fastest steady one (as ``plot`` does)."""
    top = max(float(np.nanmax(t)) for _, t, _ in runs)
    low = min(float(np.nanmin(t[t > 0])) if np.any(t > 0) else 1.0 for _, t, _ in runs)
    steady_low = min(r.steady.summary.p10 * 1e3 for _, _, r in runs
                     if r.steady.summary.n) if any(r.steady.summary.n for *_, r in runs) else low
    log = top / max(min(low, steady_low), 1e-9) > 20
    return svg.Scale(min(low, steady_low) * 0.8 if log else 0.0, top * 1.05,
                     svg.HEIGHT - svg.BOTTOM, svg.TOP, log)


def _series_body(run: SeriesRun, numbers: np.ndarray, times: np.ndarray, x: svg.Scale,
                 y: svg.Scale, color: str) -> tuple[list[str], str]:
    """The run's line (or binned band), its steady band and its marked steps."""
    body: list[str] = []
    note = ""
    if numbers.size > BAND_MIN_STEPS:
        tagged = np.zeros(numbers.size, dtype=bool)
        tagged[_tagged_index(run.steps)] = True
        keep = ~tagged & (numbers >= 1)
        band = binned_band(numbers[keep], times[keep])
        mid = x.many((band.first + band.last) / 2.0)
        body.append(svg.polygon(mid, y.many(band.low), y.many(band.high), color, 0.15))
        body.append(svg.polygon(mid, y.many(band.p10), y.many(band.p90), color, 0.35))
        body.append(svg.polyline(mid, y.many(band.median), color))
        note = (f"{run.label}{numbers.size:,} steps binned into {band.median.size} bins of "
                f"~{math.ceil(keep.sum() / band.median.size):,} consecutive steps: light "
                "band min-max, dark band p10-p90, line the median of each bin; every tagged "
                "step is still drawn on its own.")
    else:
        body.append(svg.polyline(x.many(numbers.astype(float)), y.many(times), color))
    s = run.steady.summary
    if s.n:
        y10, y90 = y(s.p10 * 1e3), y(s.p90 * 1e3)
        body.append(svg.rect(svg.LEFT, y90, svg.WIDTH - svg.LEFT - svg.RIGHT, y10 - y90,
                             color, f"{run.label}steady state p10-p90: {ms(s.p10)} - "
                             f"{ms(s.p90)}", cls="band"))
        ym = y(s.median * 1e3)
        body.append(f'<line class="median" stroke="{color}" x1="{svg.LEFT}" '
                    f'x2="{svg.WIDTH - svg.RIGHT}" y1="{ym:.1f}" y2="{ym:.1f}">'
                    f"<title>{svg.esc(run.label)}steady-state median {ms(s.median)}</title>"
                    "</line>")
    count, marks = _marks(run, numbers, times)
    radius = 4.0 if len(marks) <= MANY_MARKS else 2.0
    for step, t, text in marks:
        body.append(svg.marker(x(step), y(t), MARK_COLOR, text, radius=radius))
    if count > len(marks):
        note += (f" {run.label}The {len(marks)} slowest of {count:,} tagged or anomalous "
                 "steps are marked.")
    return body, note


def step_series_chart(runs: Sequence[SeriesRun]) -> Chart:
    """Step times over the run: a line per run (a band for long runs), the steady state
    (p10-p90 band and median line, as the record holds them), and each tagged or anomalous
    step marked, with its tags and likely cause on hover."""
    data = [(r.steps.column("step").astype(np.int64),
             r.steps.column("time_s") * 1e3, r) for r in runs]
    lo = min(int(n.min()) for n, _, _ in data)
    hi = max(int(n.max()) for n, _, _ in data)
    x = svg.Scale(lo, max(hi, lo + 1), svg.LEFT, svg.WIDTH - svg.RIGHT)
    y = _y_scale(data)
    body = svg.frame(x, y, "step", "step time (ms)" + (", log scale" if y.log else ""))
    notes = []
    for (numbers, times, run), color in zip(data, RUN_COLORS, strict=False):
        part, note = _series_body(run, numbers, times, x, y, color)
        body += part
        notes.append(note)
    keys = [(r.label.rstrip(": ") or "step time", c)
            for r, c in zip(runs, RUN_COLORS, strict=False)]
    keys += [("tagged or anomalous step (hover for the cause)", MARK_COLOR)]
    notes.append("Shaded: the steady state's p10-p90; dashed: its median (the record's "
                 "steady-state steps, in the run's colour).")
    return Chart(svg.svg(body, "step times"), svg.legend(keys),
                 " ".join(n for n in notes if n))


def span_columns(steps: StepTable[StepRecord]) -> dict[str, np.ndarray]:
    """Seconds per step in each span, and ``other`` (the step's time no span covers)."""
    cols = {k: np.nan_to_num(v) for k, v in steps.map_columns("spans").items()}
    cols = {k: v for k, v in cols.items() if np.any(v > 0)}
    if cols and "other" not in cols:
        rest = steps.column("time_s") - sum(cols.values())
        cols["other"] = np.maximum(rest, 0.0)
    order: list[str] = [k for k in INTERVAL_ORDER if k in cols]
    order += sorted(k for k in cols if k not in INTERVAL_ORDER and k != "other")
    return {k: cols[k] for k in [*order, "other"] if k in cols}


def _bin_means(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    counts = np.diff(np.append(starts, values.size))
    return np.add.reduceat(values, starts) / counts


def host_time_ceiling(totals: np.ndarray) -> float:
    """Pure: the top of the host-time chart's scale: the tallest bar, unless it is over
    ``HOST_TIME_CLIP`` times the ``HOST_TIME_TYPICAL`` quantile of the bars, where the scale
    stops there (the compile step alone would otherwise flatten every other bar)."""
    if not totals.size:
        return 1.0
    tallest = float(np.max(totals))
    typical = float(np.quantile(totals, HOST_TIME_TYPICAL))
    return min(tallest, HOST_TIME_CLIP * typical) if typical > 0 else tallest


FORCED_COLOR = "#e377c2"
"""The forced syncs' line: apart from the lagged sync's green and the hooks' colours."""


@dataclasses.dataclass(frozen=True)
class ForcedSync:
    """A line the sync locator found forcing the host to wait for the device, with its
    cost per step (the steps say in which span it ran, not how long each time)."""

    location: str
    per_step_s: float


def _host_bars(means: Mapping[str, np.ndarray], cap: float, y: svg.Scale,
               plot_h: float) -> tuple[list[str], np.ndarray]:
    """The stacked bars (one per bin, cut at ``cap``, a red cap on each cut one) and the
    indexes of the cut bars."""
    inner: list[str] = []
    bins = len(next(iter(means.values())))
    bottom = np.zeros(bins)
    for k, v in means.items():
        color = COLORS.get(k, "#bcbd22")
        for i in np.flatnonzero((v > 0) & (bottom < cap)).tolist():
            top = min(bottom[i] + v[i], cap)  # a bar over the ceiling is cut at it
            inner.append(f'<rect x="{i}" y="{y(top) - svg.TOP:.2f}" width="0.9" '
                         f'height="{(top - bottom[i]) / (y.hi - y.lo) * plot_h:.2f}" '
                         f'fill="{color}"/>')
        bottom += v
    cut = np.flatnonzero(bottom > cap)
    for i in cut.tolist():
        inner.append(f'<rect class="cut" x="{i}" y="{y(cap) - svg.TOP - 4:.2f}" width="0.9" '
                     'height="4" fill="#d62728"/>')
    return inner, cut


def _host_hovers(means: Mapping[str, np.ndarray], firsts: np.ndarray, lasts: np.ndarray,
                 plot_h: float, labels: Mapping[str, str]) -> list[str]:
    out = []
    for i in range(firsts.size):
        label = (f"step {firsts[i]}" if firsts[i] == lasts[i]
                 else f"steps {firsts[i]}-{lasts[i]} (mean)")
        parts = "; ".join(f"{labels.get(k, k)} {ms(means[k][i] / 1e3)}"
                          for k in means if means[k][i] > 0)
        out.append(f'<rect class="hover" x="{i}" y="0" width="1" height="{plot_h}">'
                   f"<title>{label}: {parts}</title></rect>")
    return out


def _forced_line(forced: Sequence[ForcedSync], y: svg.Scale) -> list[str]:
    """The forced syncs' summed cost per step as a dashed line, each site on hover."""
    if not forced:
        return []
    total = sum(f.per_step_s for f in forced)
    at = y(min(total * 1e3, y.hi))
    sites = "; ".join(f"{short_location(f.location)} {ms(f.per_step_s)}" for f in forced)
    return [f'<line class="forced-sync" stroke="{FORCED_COLOR}" x1="{svg.LEFT}" '
            f'x2="{svg.WIDTH - svg.RIGHT}" y1="{at:.1f}" y2="{at:.1f}"><title>forced syncs '
            f"per step (sync locator): {svg.esc(sites)}</title></line>"]


def host_time_chart(steps: StepTable[StepRecord], forced: Sequence[ForcedSync] = (),
                    sync_label: str = LAGGED_SYNC) -> Chart | None:
    """Per step (or per bin of steps), the host time stacked by span, the ``sync`` span
    named as the device wait it is (``sync_label``), the ``forced`` syncs' cost per step as
    a line apart; the range controls under it move and zoom the window (``page.SCRIPT``)."""
    cols = span_columns(steps)
    if not cols:
        return None
    numbers = steps.column("step").astype(np.int64)
    n = numbers.size
    bins = min(n, MAX_BARS)
    starts = np.searchsorted((np.arange(n) * bins) // n, np.arange(bins))
    means = {k: _bin_means(v, starts) * 1e3 for k, v in cols.items()}
    firsts = numbers[starts]
    lasts = numbers[np.append(starts[1:], n) - 1]
    cap = host_time_ceiling(np.sum(list(means.values()), axis=0))
    y = svg.Scale(0.0, cap * 1.05 or 1.0, svg.HEIGHT - svg.BOTTOM, svg.TOP)
    plot_h = svg.HEIGHT - svg.BOTTOM - svg.TOP
    inner, cut = _host_bars(means, cap, y, plot_h)
    labels = {k: span_label(k, sync_label) for k in means}
    inner += _host_hovers(means, firsts, lasts, plot_h, labels)
    body = svg.frame(svg.Scale(0, 1, svg.LEFT, svg.WIDTH - svg.RIGHT), y, "",
                     "host ms per step", xticks=False)
    body.append(f'<svg class="zoomed" x="{svg.LEFT}" y="{svg.TOP}" '
                f'width="{svg.WIDTH - svg.LEFT - svg.RIGHT}" height="{plot_h}" '
                f'viewBox="0 0 {bins} {plot_h}" preserveAspectRatio="none" '
                f'data-bins="{bins}" data-first="{",".join(map(str, firsts.tolist()))}" '
                f'data-last="{",".join(map(str, lasts.tolist()))}">{"".join(inner)}</svg>')
    body += _forced_line(forced, y)
    body.append(f'<text class="window-label" x="{(svg.LEFT + svg.WIDTH - svg.RIGHT) / 2}" '
                f'y="{svg.HEIGHT - 4}" text-anchor="middle">steps {firsts[0]}-{lasts[-1]}</text>')
    controls = ('<div class="zoom-controls">window start <input type="range" class="from" '
                f'min="0" max="{bins - 1}" value="0"> width <input type="range" class="width" '
                f'min="1" max="{bins}" value="{bins}"></div>')
    keys = [(labels.get(k, k), COLORS.get(k, "#bcbd22")) for k in means]
    if forced:
        total = sum(f.per_step_s for f in forced)
        keys.append((f"forced sync (sync locator): {ms(total)} per step", FORCED_COLOR))
    return Chart(svg.svg(body, "host time per step", cls="chart stacked") + controls,
                 svg.legend(keys),
                 _host_note(n, bins, cut.size, cap, sync_label if "sync" in means else "",
                            forced))


def _host_note(n: int, bins: int, cut: int, cap: float, sync_label: str,
               forced: Sequence[ForcedSync]) -> str:
    note = ("Each bar is one step." if bins == n else
            f"{n:,} steps in {bins} bars: each bar is the mean of ~{math.ceil(n / bins):,} "
            "consecutive steps.")
    if cut:
        note += (f" {cut} bar(s) over {ms(cap / 1e3)} (the compile step, stalls) are cut "
                 "at the top, capped in red, so they do not flatten the others; hover one "
                 "for its time.")
    if sync_label == LAGGED_SYNC:
        note += (f" {LAGGED_SYNC}: the loop reading the previous step's loss, the host "
                 "waiting while the device does its work (expected; most of a "
                 "compute-bound step).")
    elif sync_label:
        note += (f" {sync_label}: the training thread blocked in any sync, the loop's "
                 "read of the previous step's loss and forced syncs alike.")
    if forced:
        note += (" Dashed line: the forced syncs the sync locator found (the host reading "
                 "the current step's values), their cost per step; their time is inside "
                 "the span they ran in (log, eval, other ...).")
    return note + " Move and zoom the window with the sliders; hover a bar for its spans."


LABEL_CHAR_W = 6.2
"""SVG units per character of a chart label (the page's 11 px chart font averages ~6):
sizes the Gantt's column of lane names so the longest is not cut at the chart's edge."""


def _lane_names(names: Sequence[str], lane_h: float, right: float) -> list[str]:
    """The lane names, right-aligned at ``right``, each line of a wrapped one apart."""
    out = []
    for i, name in enumerate(names):
        lines = lane_label(name)
        first = 34 + lane_h * (i + 0.6) - 6.5 * (len(lines) - 1)
        spans = "".join(f'<tspan x="{right}" dy="{0 if j == 0 else 13}">{svg.esc(t)}</tspan>'
                        for j, t in enumerate(lines))
        out.append(f'<text class="lane" x="{right}" y="{first:.1f}" text-anchor="end">'
                   f"{spans}</text>")
    return out


def gantt_chart(steps: StepTable[StepRecord], sync_label: str = LAGGED_SYNC) -> Chart | None:
    """The spans of a window of steps (as ``pipecheck plot`` picks it), one lane per span,
    laid out in loop order inside each step, the ``sync`` lane named ``sync_label``; steps
    kept out of the steady state in red."""
    if not span_columns(steps):
        return None
    first, last = default_window(steps)
    numbers = steps.column("step")
    if first == numbers[0] and last > first and "compile" in steps[0].tags:
        # the compile step would take the whole width: the window starts after it
        first, last = first + 1, min(int(numbers[-1]), last + 1)
    rows = np.flatnonzero((numbers >= first) & (numbers <= last))
    win = steps.take(rows)
    bars, intervals = gantt_bars(win)
    kinds = list(dict.fromkeys(b[0] for b in sorted(bars, key=lambda b: _lane_order(b[0]))))
    end = (intervals[-1][1] + intervals[-1][2]) * 1e3 if intervals else 1.0
    names = [span_label(k, sync_label) for k in kinds]
    longest = max((len(t) for n in names for t in lane_label(n)), default=0)
    label_w = max(60, math.ceil(longest * LABEL_CHAR_W) + 14 - svg.LEFT)
    x = svg.Scale(0.0, end, svg.LEFT + label_w, svg.WIDTH - svg.RIGHT)
    wrapped = any(len(lane_label(n)) > 1 for n in names)
    lane_h = max(28.0 if wrapped else 14.0, min(28.0, 180.0 / max(len(kinds), 1)))
    height = int(40 + lane_h * len(kinds) + 30)
    body = []
    for step, start, dur in intervals:
        px = x(start * 1e3)
        s = win[[i for i, w in enumerate(win) if w.step == step][0]]
        cls = ' class="alert"' if s.tags else ""
        tip = f"step {step}: {ms(dur)}" + (f"; tags: {', '.join(s.tags)}" if s.tags else "")
        body.append(f'<line class="step-edge" x1="{px:.1f}" x2="{px:.1f}" y1="28" '
                    f'y2="{height - 26}"/><text x="{x((start + dur / 2) * 1e3):.1f}" y="20" '
                    f'{cls} text-anchor="middle">{step}<title>{svg.esc(tip)}</title>'
                    "</text>")
    body += _lane_names(names, lane_h, svg.LEFT + label_w - 6)
    for kind, start, dur in bars:
        i = kinds.index(kind)
        body.append(svg.rect(x(start * 1e3), 30 + lane_h * i, x(start * 1e3 + dur * 1e3)
                             - x(start * 1e3), lane_h - 4, COLORS.get(kind, "#bcbd22"),
                             f"{names[i]}: {ms(dur)}"))
    body.append(f'<text x="{(svg.LEFT + svg.WIDTH) / 2}" y="{height - 6}" '
                f'text-anchor="middle">{end:.1f} ms from the start of step {first} '
                "(spans in loop order per step)</text>")
    special = [s.step for s in win if {"checkpoint", "eval", "gc"} & set(s.tags)]
    where = (f"around step {special[0]}, the first checkpoint/eval/gc step" if special
             else "from the start of the run (no checkpoint/eval/gc step to centre on)")
    note = (f"Steps {first}-{last}: {where}, as pipecheck plot picks the window, the "
            "compile step left out. Step numbers in red carry a tag (hover for it).")
    return Chart(svg.svg(body, "gantt", height=height), "", note)


def _lane_order(kind: str) -> int:
    order = [*INTERVAL_ORDER, "other"]
    return order.index(kind) if kind in order else len(order) - 1


def hosts_chart(hosts: Sequence[HostSummary], straggler: Straggler | None,
                metric: str | None = None) -> Chart | None:
    """One lane per host: its loader time D (last setting) or median data wait per step
    (``metric`` names another value held as the data wait), with its interval; the
    straggler in red, its evidence on hover."""
    if len(hosts) < 2:
        return None
    def value(h: HostSummary) -> tuple[float, float, float, str]:
        if h.data_wait_median_s is not None:
            return (h.data_wait_median_s, h.data_wait_low_s or h.data_wait_median_s,
                    h.data_wait_high_s or h.data_wait_median_s, metric or "data wait per step")
        if h.loader:
            d = h.loader[-1]
            return d.loader_s, d.low_s, d.high_s, "loader time D"
        return math.nan, math.nan, math.nan, ""
    vals = [value(h) for h in hosts]
    top = max((v[2] for v in vals if math.isfinite(v[2])), default=1.0) * 1e3 * 1.1 or 1.0
    x = svg.Scale(0.0, top, svg.LEFT + 90, svg.WIDTH - svg.RIGHT)
    lane = 22
    height = 30 + lane * len(hosts) + 40
    body = []
    for i, (h, (v, lo, hi, metric)) in enumerate(zip(hosts, vals, strict=True)):
        slow = straggler is not None and straggler.process_id == h.process_id
        y0 = 20 + lane * i
        tip = f"process {h.process_id} ({h.hostname}): {metric} {ms(v)} ({ms(lo)} .. {ms(hi)})"
        if slow and straggler is not None:
            tip += f"; straggler: {straggler.evidence}"
        alert = ' class="alert"' if slow else ""
        body.append(f'<text x="{svg.LEFT + 84}" y="{y0 + 14}" text-anchor="end"{alert}>'
                    f"process {h.process_id}{' (straggler)' if slow else ''}</text>")
        if math.isfinite(v):
            body.append(svg.rect(x(0), y0 + 3, x(v * 1e3) - x(0), lane - 8,
                                 MARK_COLOR if slow else RUN_COLORS[0], tip,
                                 cls="host straggler" if slow else "host"))
            body.append(f'<line class="whisker" x1="{x(lo * 1e3):.1f}" x2="{x(hi * 1e3):.1f}" '
                        f'y1="{y0 + lane / 2:.1f}" y2="{y0 + lane / 2:.1f}"/>')
    for t in x.ticks(8):
        body.append(f'<text x="{x(t):.1f}" y="{height - 22}" text-anchor="middle">'
                    f"{svg.tick_text(t)}</text>")
    body.append(f'<text x="{(svg.LEFT + svg.WIDTH) / 2}" y="{height - 6}" '
                f'text-anchor="middle">ms ({vals[0][3] or "no loop"}); line: 95% interval'
                "</text>")
    return Chart(svg.svg(body, "hosts", height=height), "",
                 "One lane per host; the straggler (if any) in red, its evidence on hover.")


def tuning_chart(settings: Sequence[LoaderSetting], goal_s: float | None,
                 chosen: int | None, limits: Mapping[str, str] | None = None) -> Chart:
    """D with its interval per setting in the order tried (the tuning path), the goal
    line and the chosen setting marked; hover for the setting and what limits it."""
    d = np.asarray([s.loader_time.value for s in settings]) * 1e3
    lows = np.asarray([s.loader_time.low for s in settings]) * 1e3
    highs = np.asarray([s.loader_time.high for s in settings]) * 1e3
    top = max(float(np.nanmax(highs)), (goal_s or 0.0) * 1e3) * 1.1 or 1.0
    x = svg.Scale(0.5, len(settings) + 0.5, svg.LEFT, svg.WIDTH - svg.RIGHT)
    y = svg.Scale(0.0, top, svg.HEIGHT - svg.BOTTOM, svg.TOP)
    body = svg.frame(x, y, "setting in the order tried (workers w, threads t)",
                     "D: ms per batch", xticks=False)
    xs = np.arange(1, len(settings) + 1, dtype=float)
    body.append(svg.polyline(x.many(xs), y.many(d), "#999", cls="line path"))
    if goal_s is not None:
        gy = y(goal_s * 1e3)
        body.append(f'<line class="goal" stroke="{GOAL_COLOR}" x1="{svg.LEFT}" '
                    f'x2="{svg.WIDTH - svg.RIGHT}" y1="{gy:.1f}" y2="{gy:.1f}">'
                    f"<title>goal: D &lt;= {ms(goal_s)}</title></line>")
    for i, s in enumerate(settings):
        px = x(i + 1)
        label = s.settings.short_label()
        why = (limits or {}).get(label)
        tip = (f"{label}: D {ms(s.loader_time.value)} ({ms(s.loader_time.low)} .. "
               f"{ms(s.loader_time.high)}), first batch {ms(s.first_batch_s)}"
               + (f"; limit: {why}" if why else "") + ("; chosen" if i == chosen else ""))
        body.append(f'<line class="whisker" x1="{px:.1f}" x2="{px:.1f}" '
                    f'y1="{y(lows[i]):.1f}" y2="{y(highs[i]):.1f}"/>')
        body.append(svg.marker(px, y(d[i]), MARK_COLOR if i == chosen else RUN_COLORS[0],
                               tip, cls="mark chosen" if i == chosen else "mark"))
        body.append(f'<text x="{px:.1f}" y="{svg.HEIGHT - svg.BOTTOM + 14}" '
                    f'text-anchor="middle">{s.workers}w {s.threads}t</text>')
    keys = [("D per setting (95% interval)", RUN_COLORS[0])]
    if chosen is not None:
        keys.append(("chosen", MARK_COLOR))
    if goal_s is not None:
        keys.append((f"goal: D <= {ms(goal_s)}", GOAL_COLOR))
    return Chart(svg.svg(body, "loader settings tried"), svg.legend(keys),
                 "The settings in the order the search tried them; hover a point for its "
                 "numbers and what limits it.")


def batch_time_chart(settings: Sequence[LoaderSetting]) -> Chart:
    """The distribution of batch times per setting: box p10-p90 with the median, whiskers
    to min and p99."""
    stats = [np.percentile(np.asarray(s.batch_time.samples_s) * 1e3, [0, 10, 50, 90, 99])
             if len(s.batch_time.samples_s) else np.full(5, np.nan) for s in settings]
    top = max((float(np.nanmax(q)) for q in stats if np.isfinite(q).any()), default=1.0)
    x = svg.Scale(0.0, top * 1.05 or 1.0, svg.LEFT + 90, svg.WIDTH - svg.RIGHT)
    lane = 22
    height = 20 + lane * len(settings) + 40
    body = []
    for i, (s, q) in enumerate(zip(settings, stats, strict=True)):
        y0 = 14 + lane * i
        mid = y0 + lane / 2
        body.append(f'<text x="{svg.LEFT + 84}" y="{mid + 4:.1f}" text-anchor="end">'
                    f"{svg.esc(s.settings.short_label())}</text>")
        if not np.isfinite(q).all():
            continue
        tip = (f"{s.settings.short_label()}: min {ms(q[0] / 1e3)}, p10 {ms(q[1] / 1e3)}, "
               f"median {ms(q[2] / 1e3)}, p90 {ms(q[3] / 1e3)}, p99 {ms(q[4] / 1e3)} "
               f"({len(s.batch_time.samples_s)} batches)")
        body.append(f'<line class="whisker" x1="{x(q[0]):.1f}" x2="{x(q[4]):.1f}" '
                    f'y1="{mid:.1f}" y2="{mid:.1f}"/>')
        body.append(svg.rect(x(q[1]), y0 + 4, x(q[3]) - x(q[1]), lane - 8, RUN_COLORS[0],
                             tip, cls="box"))
        body.append(f'<line class="median-tick" x1="{x(q[2]):.1f}" x2="{x(q[2]):.1f}" '
                    f'y1="{y0 + 3}" y2="{y0 + lane - 3}"/>')
    for v in x.ticks(8):
        body.append(f'<text x="{x(v):.1f}" y="{height - 22}" text-anchor="middle">'
                    f"{svg.tick_text(v)}</text>")
    body.append(f'<text x="{(svg.LEFT + svg.WIDTH) / 2}" y="{height - 6}" '
                f'text-anchor="middle">batch time (ms)</text>')
    return Chart(svg.svg(body, "batch times per setting", height=height), "",
                 "Box: p10-p90 with the median; whiskers: min to p99 of the timed batches.")


DEVICE_BUSY_COLOR, DEVICE_IDLE_COLOR = "#2ca02c", "#cfcfcf"
"""A step's device busy time (the green of the device wait it makes the host sit in) and
its idle time where the record does not say what the thread was doing then."""


@dataclasses.dataclass(frozen=True)
class IdleCause:
    """An idle cause drawn on its own: the kind of time (``records.kinds.TimeKind``, its
    ``DeviceIdle`` field), its colour; its device-time row and label follow from the kind."""

    kind: TimeKind
    color: str

    @property
    def row(self) -> str:
        """Its row of the device-time table (``kinds.IDLE_ROWS``)."""
        return IDLE_ROWS[self.kind]

    @property
    def field(self) -> str:
        """Its ``DeviceIdle`` field."""
        return self.kind

    @property
    def label(self) -> str:
        """How the chart names it."""
        return f"idle: {self.kind}"


IDLE_CAUSES = (IdleCause(INPUT, "#1f77b4"), IdleCause(SYNC, "#e377c2"),
               IdleCause(COMPILE, "#bcbd22"), IdleCause(DISPATCH, "#7f7f7f"))
"""The device's idle time drawn by cause; the other causes (checkpoint, host work) are
drawn together as ``IDLE_OTHER``."""

IDLE_OTHER = ("idle: other", "#8c564b")

UNCHARGED_MIN_S = 1e-9
"""A step's idle left over after its causes, below 1 ns, is the rounding of their sum, not
time: it is not drawn."""

STEADY_BAR = 90
"""Room at the right of the device-time chart for the steady state's mean step."""


def device_split(device_time: Breakdown) -> list[tuple[str, float, str]]:
    """Pure: the steady state's mean step on the device: (label, seconds, colour) of its
    busy time, then its idle time by cause (input, sync, compile, dispatch, other)."""
    n = max(device_time.steps, 1)
    out = [(DEVICE_BUSY_ROW, device_time.seconds(DEVICE_BUSY_ROW) / n, DEVICE_BUSY_COLOR)]
    named = 0.0
    for cause in IDLE_CAUSES:
        named += device_time.seconds(cause.row)
        out.append((cause.label, device_time.seconds(cause.row) / n, cause.color))
    idle = sum(r.seconds for r in device_time.rows if r.category.startswith("idle: "))
    out.append((IDLE_OTHER[0], max(idle - named, 0.0) / n, IDLE_OTHER[1]))
    return out


def step_idle_split(idle: DeviceIdle) -> dict[str, np.ndarray]:
    """Pure: each step's device idle seconds by the causes the chart draws (label ->
    seconds per step): input, sync, compile, dispatch, and the rest summed as other."""
    named = {c.field for c in IDLE_CAUSES}
    out = {c.label: np.asarray(getattr(idle, c.field), dtype=float) for c in IDLE_CAUSES}
    out[IDLE_OTHER[0]] = functools.reduce(operator.add, [
        np.asarray(getattr(idle, f.name), dtype=float)
        for f in dataclasses.fields(idle) if f.name not in named])
    return out


CAUSE_COLORS = {**{c.label: c.color for c in IDLE_CAUSES}, IDLE_OTHER[0]: IDLE_OTHER[1]}
"""The colour of each idle cause a step's bar is split into."""

UNSPLIT_IDLE = "device idle (not split by cause)"
"""A step's idle time the record does not charge to a cause (all of it in a record written
before ``device_idle``)."""


def _step_segments(t: float, busy: float, causes: Mapping[str, float]
                   ) -> list[tuple[str, float, str]]:
    """A step's stacked segments (label, seconds, colour): busy, each idle cause, and the
    idle the causes leave uncharged (all of it where the record has none)."""
    busy = min(busy, t)
    out = [(DEVICE_BUSY_ROW, busy, DEVICE_BUSY_COLOR)]
    out += [(k, v, CAUSE_COLORS[k]) for k, v in causes.items() if v > 0]
    rest = t - busy - sum(causes.values())
    if rest > UNCHARGED_MIN_S:
        out.append((UNSPLIT_IDLE, rest, DEVICE_IDLE_COLOR))
    return out


def _device_step_bar(i: int, step: StepRecord, segments: Sequence[tuple[str, float, str]],
                     x: svg.Scale, width: float, y: svg.Scale, cap: float) -> str:
    """One step's bar: its segments (``_step_segments``) stacked, busy at the bottom, cut
    at ``cap``; the numbers and what the training thread did on hover."""
    busy = segments[0][1]
    split = all(label in CAUSE_COLORS for label, _, _ in segments[1:])
    idle = "; ".join(f"{k.removeprefix('idle: ')} {ms(v)}" for k, v, _ in segments[1:])
    spans = "; ".join(f"{k} {ms(v)}" for k, v in (step.spans or {}).items() if v > 0)
    tip = (f"step {step.step}: {ms(step.time_s)}; device busy {ms(busy)}, idle "
           f"{ms(step.time_s - busy)}" + (f" ({idle})" if split and idle else "")
           + (f"; tags: {', '.join(step.tags)}" if step.tags else "")
           + (f"; the thread: {spans}" if spans else ""))
    px, bottom, rects = x(i), 0.0, []
    for label, seconds, color in segments:
        a, b = min(bottom * 1e3, cap), min((bottom + seconds) * 1e3, cap)
        cls = "busy" if label == DEVICE_BUSY_ROW else "idle"
        data = f' data-cause="{label.removeprefix("idle: ")}"' if label in CAUSE_COLORS else ""
        rects.append(f'<rect class="{cls}"{data} x="{px:.2f}" y="{y(b):.2f}" '
                     f'width="{width:.2f}" height="{y(a) - y(b):.2f}" fill="{color}"/>')
        bottom += seconds
    if step.time_s * 1e3 > cap:
        rects.append(f'<rect class="cut" x="{px:.2f}" y="{y(cap) - 4:.2f}" '
                     f'width="{width:.2f}" height="4" fill="#d62728"/>')
    return (f'<g class="device-step" data-step="{step.step}"><title>{svg.esc(tip)}</title>'
            + "".join(rects) + "</g>")


def _steady_bar(split: Sequence[tuple[str, float, str]], y: svg.Scale) -> list[str]:
    """The steady state's mean step, busy and idle by cause, at the chart's right."""
    x0, width = svg.WIDTH - svg.RIGHT - STEADY_BAR + 30, STEADY_BAR - 40
    out, bottom = ['<g class="steady-device">'], 0.0
    total = sum(s for _, s, _ in split)
    for label, seconds, color in split:
        if seconds <= 0:
            continue
        a, b = bottom * 1e3, (bottom + seconds) * 1e3
        out.append(svg.rect(x0, y(min(b, y.hi)), width, y(min(a, y.hi)) - y(min(b, y.hi)),
                            color, f"{label}: {ms(seconds)} per steady step "
                            f"({100 * seconds / total:.0f}%)", cls="cause"))
        bottom += seconds
    out.append(f'<text x="{x0 + width / 2:.1f}" y="{svg.HEIGHT - svg.BOTTOM + 14}" '
               'text-anchor="middle">steady mean</text></g>')
    return out


def _per_step_causes(idle: DeviceIdle | None, n: int) -> list[dict[str, float]]:
    """Each step's idle seconds by drawn cause; empty dicts where the record has none (a
    record written before ``device_idle``, or columns of another length)."""
    split = step_idle_split(idle) if idle is not None else {}
    if not split or any(len(v) != n for v in split.values()):
        return [{} for _ in range(n)]
    return [{k: float(v[i]) for k, v in split.items()} for i in range(n)]


def _device_keys(split: Sequence[tuple[str, float, str]],
                 bars: Sequence[Sequence[tuple[str, float, str]]]) -> list[tuple[str, str]]:
    """The legend: busy, the idle causes drawn (in a step's bar or the steady bar), and
    the idle not split by cause where a bar has some."""
    drawn = {label for segments in bars for label, _, _ in segments}
    drawn |= {label for label, seconds, _ in split[1:] if seconds > 0}
    keys = [(DEVICE_BUSY_ROW, DEVICE_BUSY_COLOR)]
    keys += [(label, color) for label, color in CAUSE_COLORS.items() if label in drawn]
    if UNSPLIT_IDLE in drawn:
        keys.append((UNSPLIT_IDLE, DEVICE_IDLE_COLOR))
    return keys


def device_time_chart(steps: StepTable[StepRecord], busy_s: Sequence[float],
                      device_time: Breakdown, idle: DeviceIdle | None = None
                      ) -> Chart | None:
    """A capture's steps on the device: one bar per step, its busy time and its idle time
    split by what the training thread was doing (``idle``, the record's per-step split;
    without it, as in records written before it, each step's idle in one piece), and the
    steady state's mean step with its idle split the same way (the device-time table)."""
    if not len(steps) or len(busy_s) != len(steps):
        return None
    split = device_split(device_time)
    causes = _per_step_causes(idle, len(steps))
    times = steps.column("time_s") * 1e3
    cap = max(host_time_ceiling(times), sum(s for _, s, _ in split) * 1e3)
    y = svg.Scale(0.0, cap * 1.05 or 1.0, svg.HEIGHT - svg.BOTTOM, svg.TOP)
    right = svg.WIDTH - svg.RIGHT - STEADY_BAR
    x = svg.Scale(0, len(steps), svg.LEFT + 4, right)
    width = max((right - svg.LEFT - 4) / len(steps) * 0.8, 0.5)
    body = svg.frame(svg.Scale(0, 1, svg.LEFT, svg.WIDTH - svg.RIGHT), y, "step",
                     "device ms per step", xticks=False)
    every = max(1, math.ceil(len(steps) / 30))
    bars = [_step_segments(step.time_s, busy, c)
            for step, busy, c in zip(steps, busy_s, causes, strict=True)]
    for i, (step, segments) in enumerate(zip(steps, bars, strict=True)):
        body.append(_device_step_bar(i, step, segments, x, width, y, cap))
        if i % every == 0:
            cls = ' class="alert"' if step.tags else ""
            body.append(f'<text x="{x(i) + width / 2:.1f}" y="{svg.HEIGHT - svg.BOTTOM + 14}"'
                        f'{cls} text-anchor="middle">{step.step}</text>')
    body += _steady_bar(split, y)
    return Chart(svg.svg(body, "device time per step", cls="chart device"),
                 svg.legend(_device_keys(split, bars)),
                 _device_note(all(causes), int(np.sum(times > cap)), cap))


def _device_note(per_step: bool, cut: int, cap: float) -> str:
    if per_step:
        note = ("Each bar is one step of the capture: the device's busy time (green), then "
                "its idle time split by what the training thread was doing meanwhile "
                "(input, sync, compile, dispatch, other); hover a bar for its numbers and "
                "the thread's time. The bar at the right is the mean steady step (the "
                "device-time table).")
    else:
        note = ("Each bar is one step of the capture: the device's busy time (green) and "
                "the rest of the step, idle (grey): this record does not keep each step's "
                "idle by cause (written before pipecheck kept it); hover a bar for the "
                "training thread's time. The bar at the right is the mean steady step, its "
                "idle split by what the training thread was doing meanwhile (the "
                "device-time table).")
    note += " Step numbers in red are kept out of the steady state."
    if cut:
        note += f" {cut} bar(s) over {ms(cap / 1e3)} are cut at the top, capped in red."
    return note
