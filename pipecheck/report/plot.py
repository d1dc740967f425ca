"""``pipecheck plot``: a run's step times and a Gantt of a window of its steps, as a PNG.

Reads any run JSON with ``steps`` (synthetic, monitor, compare ...). The top panel is
the step-time series, with tagged steps marked (compile, checkpoint, eval, gc) and the
steady-state median. The bottom panel is a Gantt of a window of steps: one row per span
kind, bars laid out in loop order inside each step interval (the run JSON holds span
durations per step, not their start times: for exact times use ``--trace``).

matplotlib is an optional extra (``pip install 'pipecheck[plot]'``); the Agg backend is
used, and the PNG is written atomically.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import types
from typing import TYPE_CHECKING, Sequence

import numpy as np
from tabulate import tabulate

from pipecheck.analysis.anomalies import ANOMALY_TAGS
from pipecheck.analysis.steady_state import STEADY_STATE_EXCLUDED_TAGS
from pipecheck.errors import PlotUnavailableError, ResultFormatError
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records import store
from pipecheck.records.base import Record
from pipecheck.records.common import Anomaly, StepRecord
from pipecheck.records.kinds import DATA_SPANS, FORCED_SYNC_SPAN, HOOK_SPANS, SYNC, WALL_ROWS
from pipecheck.records.steps import StepTable
from pipecheck.report.monitor import ended_early
from pipecheck.units import ms

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

DEFAULT_WINDOW = 12
"""Steps shown in the Gantt when no window is given."""

BAND_MIN_STEPS = 5000
"""Above this many steps the series is drawn as a binned band, not one dot per step: a
plot ~1400 pixels wide has no room for more dots than that to read apart."""

BAND_BINS = 700
"""Bins of the band: about one per two pixels of the series panel's width."""

MAX_LABELLED_STEPS = 30
"""Tagged steps labelled with their number (the slowest first); every one is still drawn."""

MAX_TABLE_ROWS = 25
"""Rows of the anomaly table that stands in for the Gantt of a run without spans."""

LAGGED_SYNC = "device wait (lagged sync)"
"""The ``sync`` span as a reader sees it named (the JSON keeps ``sync``): the loop reading the
previous step's loss, the host waiting while the device does its work (most of a
compute-bound step), not a forced sync."""

ANY_SYNC = "device wait (syncs: lagged and forced)"
"""The ``sync`` span of a profile: the training thread blocked in any sync (the capture's
steps do not keep the loop's own read apart from the forced ones)."""


def sync_label_of(record: object) -> str:
    """How a record's ``sync`` span is named where a user reads it: ``ANY_SYNC`` for a
    profile's steps, ``LAGGED_SYNC`` for a run's."""
    return ANY_SYNC if getattr(record, "kind", None) == "profile" else LAGGED_SYNC


def span_label(kind: str, sync_label: str = LAGGED_SYNC) -> str:
    """A span's name where a user reads it: ``sync`` as the device wait it is, the forced
    syncs outside any span (``forced_sync``) as the wall-time table's row of them."""
    if kind == FORCED_SYNC_SPAN:
        return WALL_ROWS[SYNC]
    return sync_label if kind == "sync" else kind


def lane_label(name: str) -> list[str]:
    """Pure: a Gantt lane's name in lines: a long name's parenthesis on a line of its own
    (``device wait`` over ``(lagged sync)``)."""
    head, sep, rest = name.partition(" (")
    return [head, f"({rest}"] if sep else [name]


INTERVAL_ORDER = (*HOOK_SPANS, *DATA_SPANS, "dispatch", "sync")
"""How the spans of one step interval follow each other in the loop: the step's own hooks
(checkpoint, eval, log) run first, then the next batch is fetched and dispatched, then the
step's loss is read. User spans go after the hooks; ``other`` last."""

COLORS = {
    "data_wait": "#1f77b4", "device_put": "#17becf", "dispatch": "#7f7f7f", "sync": "#2ca02c",
    "checkpoint": "#ff7f0e", "eval": "#9467bd", "gc": "#8c564b", "log": "#d62728",
    "other": "#dddddd", FORCED_SYNC_SPAN: "#e377c2",
}
TAG_STYLE = {
    "compile": ("X", "#d62728"), "checkpoint": ("s", "#ff7f0e"), "eval": ("D", "#9467bd"),
    "gc": ("^", "#8c564b"), "slow": ("*", "#e377c2"), "attribution_shift": ("v", "#17becf"),
    "fast": ("P", "#bcbd22"), "outlier": ("*", "#e377c2"),
}
"""Marker and colour of each tag in the step-time panel (anomalies included: ``slow``,
``fast``, ``attribution_shift``, and ``outlier`` in imported logs); other tags get ``v``."""


def _pyplot() -> types.ModuleType:
    try:
        # lazy: matplotlib imported where used, so `import pipecheck` stays light
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailableError(
            "pipecheck plot needs matplotlib: pip install 'pipecheck[plot]'") from None
    return plt


def steps_of(record: Record, origin: str) -> StepTable[StepRecord]:
    steps: StepTable[StepRecord] | None = getattr(record, "steps", None)
    if steps is None or not len(steps):
        raise ResultFormatError(f"{origin} holds no per-step records (steps) to plot")
    return steps


def default_window(steps: StepTable[StepRecord], size: int = DEFAULT_WINDOW) -> tuple[int, int]:
    """A window of ``size`` steps: around the first checkpoint/eval/gc step, else after the
    first step. Returns (first, last) step numbers, inclusive."""
    numbers = steps.column("step")
    special = numbers[(numbers > 0) & steps.tag_mask(("checkpoint", "eval", "gc"))]
    lo, hi = int(numbers[0]), int(numbers[-1])
    first = max(lo, int(special[0]) - 3) if special.size else min(lo + 1, hi)
    last = min(hi, first + size - 1)
    first = max(lo, last - size + 1)
    return first, last


@dataclasses.dataclass(frozen=True)
class Band:
    """Steady-state step times summarized per bin of consecutive steps (ms)."""

    first: np.ndarray
    last: np.ndarray
    """First and last step number of each bin."""
    p10: np.ndarray
    median: np.ndarray
    p90: np.ndarray
    low: np.ndarray
    high: np.ndarray
    """Min and max of each bin."""


def binned_band(numbers: np.ndarray, values: np.ndarray, bins: int = BAND_BINS) -> Band:
    """Pure: split the (step number, value) series into ``bins`` runs of consecutive
    points and give each run's p10, median, p90, min and max (nearest-rank, from one sort:
    linear after it, whatever the length)."""
    n = values.size
    bins = max(1, min(bins, n))
    bin_of = (np.arange(n) * bins) // max(n, 1)
    order = np.lexsort((values, bin_of))
    sorted_values = values[order]
    starts = np.searchsorted(bin_of, np.arange(bins))  # bin_of is sorted already
    counts = np.diff(np.append(starts, n))

    def at(q: float) -> np.ndarray:
        return sorted_values[starts + np.minimum(counts - 1, (q * (counts - 1) + 0.5)
                                                 .astype(np.int64))]

    return Band(numbers[starts], numbers[starts + counts - 1], at(0.10), at(0.5), at(0.90),
                sorted_values[starts], sorted_values[starts + counts - 1])


def gantt_bars(steps: StepTable[StepRecord]) -> tuple[list[tuple[str, float, float]],
                                                      list[tuple[int, float, float]]]:
    """Pure: (span kind, start, duration) bars in seconds from the window's start, laid out
    in loop order inside each step, and (step, start, duration) of each step."""
    bars: list[tuple[str, float, float]] = []
    intervals: list[tuple[int, float, float]] = []
    t = 0.0
    for s in steps:
        intervals.append((s.step, t, s.time_s))
        spans = getattr(s, "spans", None) or {}  # imported logs have step times only
        user = sorted(k for k in spans if k not in INTERVAL_ORDER and k != "other")
        order = [*INTERVAL_ORDER[:3], *user, *INTERVAL_ORDER[3:], "other"]
        cursor = t
        for kind in order:
            d = spans.get(kind, 0.0)
            if d > 0:
                bars.append((kind, cursor, d))
                cursor += d
        t += s.time_s
    return bars, intervals


def _series_panel(ax: Axes, steps: StepTable[StepRecord], window: tuple[int, int] | None,
                  title: str) -> str:
    """The step-time series: every point of a short run, or for a long one the steady
    state as a binned band; tagged steps always drawn one by one. Returns a note for the
    title when labels were left out."""
    numbers = steps.column("step")
    times = steps.column("time_s") * 1e3
    rows = _tagged_rows(steps)
    tagged = np.zeros(numbers.size, dtype=bool)
    tagged[sorted(steps.tagged())] = True
    steady = ~tagged & (numbers >= 1)
    if not steady.any():
        steady = ~tagged
    note = ""
    if numbers.size <= BAND_MIN_STEPS:
        ax.plot(numbers, times, "-", color="#1f77b4", lw=1, alpha=0.6, zorder=1)
        ax.plot(numbers, times, "o", color="#1f77b4", ms=3, zorder=2, label="step time")
    else:
        band = binned_band(numbers[steady], times[steady])
        x = (band.first + band.last) / 2.0
        ax.fill_between(x, band.low, band.high, color="#1f77b4", alpha=0.12, lw=0,
                        label="steady state: min-max per bin")
        ax.fill_between(x, band.p10, band.p90, color="#1f77b4", alpha=0.35, lw=0,
                        label=f"steady state: p10-p90 per bin ({band.median.size} bins)")
        ax.plot(x, band.median, "-", color="#1f77b4", lw=1, label="steady state: median per bin")
    if steady.any():
        med = float(np.median(times[steady]))
        ax.axhline(med, ls="--", color="#2ca02c", lw=1,
                   label=f"steady-state median {ms(med / 1e3)}")
    for tag, pts in tag_points(rows).items():
        marker, color = TAG_STYLE.get(tag, ("v", None))
        size = (70 if color else 60) if len(pts) <= MAX_LABELLED_STEPS else 25  # many: smaller
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=size,
                   color=color, zorder=3, label=f"{tag} ({len(pts)})",
                   edgecolors="black", linewidths=0.5)
    # each tagged step labelled with its number, the slowest first when there are many
    labelled = sorted(rows, key=lambda s: -s.time_s)[:MAX_LABELLED_STEPS]
    if numbers.size > BAND_MIN_STEPS or len(rows) <= MAX_LABELLED_STEPS:
        for s in labelled:
            ax.annotate(str(s.step), (s.step, s.time_s * 1e3), textcoords="offset points",
                        xytext=(3, 4), fontsize=6, zorder=4)
        if len(rows) > len(labelled):
            note = f" (step numbers on the {len(labelled)} slowest of {len(rows)} tagged steps)"
    positive = times[times > 0]
    if positive.size and steady.any() and positive.max() / max(times[steady].min(), 1e-9) > 20:
        ax.set_yscale("log")
    if window is not None:
        ax.axvspan(window[0] - 0.5, window[1] + 0.5, color="#ffdd88", alpha=0.3,
                   label="Gantt window")
    ax.set_xlabel("step")
    ax.set_ylabel("step time (ms)")
    ax.set_title(title + note, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    return note


def tag_points(steps: StepTable[StepRecord]) -> dict[str, list[tuple[int, float]]]:
    """Pure: the (step, milliseconds) points marked for each tag in the step-time panel,
    the styled tags first (in ``TAG_STYLE`` order), then any others by name."""
    rows = _tagged_rows(steps)
    present = sorted({t for s in rows for t in s.tags})
    order = [t for t in TAG_STYLE if t in present] + [t for t in present if t not in TAG_STYLE]
    return {tag: [(s.step, s.time_s * 1e3) for s in rows if tag in s.tags] for tag in order}


def _tagged_rows(steps: StepTable[StepRecord]) -> StepTable[StepRecord]:
    """The steps that carry a tag (few, whatever the run's length)."""
    return steps.take(sorted(steps.tagged()))


def _has_spans(steps: StepTable[StepRecord]) -> bool:
    return any(np.any(np.nan_to_num(c) > 0) for c in steps.map_columns("spans").values())


def anomaly_rows(steps: StepTable[StepRecord],
                 anomalies: Sequence[Anomaly] = ()) -> list[list[str]]:
    """Pure: the table that replaces the Gantt for a run without spans: each step kept out
    of the steady state, with its cause (a record's ``anomalies``) or its tags."""
    if anomalies:
        return [[str(a.step), f"{a.time_s * 1e3:.1f}",
                 f"{a.ratio:.1f}x" if math.isfinite(a.ratio) else "-", a.cause]
                for a in anomalies]
    return [[str(s.step), f"{s.time_s * 1e3:.1f}", "-", ", ".join(s.tags)]
            for s in _tagged_rows(steps)]


def _gantt_panel(ax: Axes, steps: StepTable[StepRecord], window: tuple[int, int],
                 sync_label: str = LAGGED_SYNC) -> None:
    numbers = steps.column("step")
    rows = np.flatnonzero((numbers >= window[0]) & (numbers <= window[1]))
    win = steps.take(rows)
    bars, intervals = gantt_bars(win)
    kinds = [k for k in (*INTERVAL_ORDER, "other") if any(b[0] == k for b in bars)]
    kinds[len(kinds):] = sorted({b[0] for b in bars} - set(kinds))
    row = {k: i for i, k in enumerate(kinds)}
    for kind, start, dur in bars:
        ax.broken_barh([(start * 1e3, dur * 1e3)], (row[kind] - 0.4, 0.8),
                       facecolors=COLORS.get(kind, "#bcbd22"), edgecolor="black", lw=0.3)
    label_at = ax.get_xaxis_transform()  # x in data, y in axes fraction
    for (step, start, dur), s in zip(intervals, win, strict=True):
        ax.axvline(start * 1e3, color="black", lw=0.6, alpha=0.5)
        label = f"{step}" + (f"\n{','.join(s.tags)}" if s.tags else "")
        apart = (*STEADY_STATE_EXCLUDED_TAGS, *ANOMALY_TAGS, "outlier")
        color = "#d62728" if any(t in apart for t in s.tags) else "black"
        ax.text((start + dur / 2) * 1e3, 1.01, label, ha="center", va="bottom",
                fontsize=7, color=color, transform=label_at)
    if intervals:
        end = intervals[-1][1] + intervals[-1][2]
        ax.axvline(end * 1e3, color="black", lw=0.6, alpha=0.5)
        ax.set_xlim(0, end * 1e3)
    ax.set_yticks(range(len(kinds)))
    ax.set_yticklabels(["\n".join(lane_label(span_label(k, sync_label))) for k in kinds])
    ax.set_ylim(-0.6, len(kinds) - 0.4)
    ax.invert_yaxis()
    ax.set_xlabel(f"ms from the start of step {window[0]} (spans in loop order per step)")
    ax.set_title(f"Gantt of steps {window[0]}-{window[1]} (step numbers above each interval)",
                 fontsize=10, pad=24)
    ax.grid(axis="x", alpha=0.3)


def _table_panel(ax: Axes, rows: list[list[str]]) -> None:
    """The anomaly table as one block of monospaced text (a matplotlib table of many cells
    costs seconds to draw)."""
    shown = rows[:MAX_TABLE_ROWS]
    ax.axis("off")
    more = f" (first {len(shown)} of {len(rows)})" if len(rows) > len(shown) else ""
    ax.set_title(f"steps kept out of the steady state{more}", fontsize=10)
    text = tabulate(shown, headers=["step", "time (ms)", "x median", "cause"],
                    tablefmt="simple", disable_numparse=True)
    ax.text(0.0, 1.0, text, family="monospace", fontsize=7, va="top", ha="left",
            transform=ax.transAxes)


def render_png(steps: StepTable[StepRecord], window: tuple[int, int] | None, title: str,
               anomalies: Sequence[Anomaly] = (), sync_label: str = LAGGED_SYNC
               ) -> tuple[bytes, str]:
    """The PNG, and what the second panel shows: ``"gantt"`` (the run has spans),
    ``"anomalies"`` (no spans: the steps kept out of the steady state as a table) or
    ``"none"`` (neither: one panel). The Gantt names the ``sync`` lane ``sync_label``."""
    plt = _pyplot()
    if _has_spans(steps) and window is not None:
        lower = "gantt"
    else:
        lower = "anomalies" if anomaly_rows(steps, anomalies) else "none"
    if lower == "none":
        fig, ax1 = plt.subplots(1, 1, figsize=(13, 4.5))
    else:
        # a short anomaly table gets a short panel
        rows = min(MAX_TABLE_ROWS, len(anomaly_rows(steps, anomalies))) + 3
        second = 1.2 if lower == "gantt" else min(1.2, 0.07 * rows)
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(13, 4.5 + 3.5 * second),
                                       gridspec_kw={"height_ratios": [1, second]})
    _series_panel(ax1, steps, window if lower == "gantt" else None, title)
    if lower == "gantt":
        assert window is not None
        _gantt_panel(ax2, steps, window, sync_label)
    elif lower == "anomalies":
        _table_panel(ax2, anomaly_rows(steps, anomalies))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue(), lower


PLOT_STAGES = 3
"""What ``plot_run`` reports progress in: reading the record, drawing, writing the PNG (a
million-step record takes seconds to read and to draw; neither is one loop to count)."""


def plot_run(run_path: str | os.PathLike[str], out_path: str | os.PathLike[str],
             window: tuple[int, int] | None = None, force: bool = False,
             progress: Progress = NO_PROGRESS) -> PlotOutcome:
    """Render ``run_path``'s steps to a PNG at ``out_path``; say what the panels show.
    ``progress`` gets one task of ``PLOT_STAGES`` stages."""
    store.check_writable(out_path, force)
    with progress.task(f"plotting {os.path.basename(str(run_path))}", PLOT_STAGES,
                       "stage") as task:
        record = store.load(run_path)
        task.advance()
        steps = steps_of(record, str(run_path))
        numbers = steps.column("step")
        if window is None:
            window = default_window(steps)
        elif not np.any((numbers >= window[0]) & (numbers <= window[1])):
            raise ResultFormatError(
                f"--window {window[0]}:{window[1]} holds none of the run's steps "
                f"({int(numbers.min())}..{int(numbers.max())})")
        kind = getattr(record, "kind", "run")
        # the run's steady-state step times: a compare record's are its real-data steps (R)
        step_time = getattr(record, "step_time", None) or getattr(record, "real", None)
        median = step_time.summary.median if step_time is not None else math.nan
        title = f"{os.path.basename(str(run_path))} ({kind}): steady-state median {ms(median)}"
        png, lower = render_png(steps, window, title, getattr(record, "anomalies", ()),
                                sync_label=sync_label_of(record))
        task.advance()
        store.write_text_atomic(out_path, png, force)
        task.advance()
    return PlotOutcome(window if lower == "gantt" else None, lower,
                       banded=len(steps) > BAND_MIN_STEPS,
                       ended_early=ended_early(getattr(record, "incomplete", None),
                                               getattr(record, "total_steps", len(steps))))


@dataclasses.dataclass(frozen=True)
class PlotOutcome:
    """What ``plot_run`` drew: the Gantt's window (None without a Gantt), the second panel
    (``gantt``, ``anomalies`` or ``none``), and whether the series was binned."""

    window: tuple[int, int] | None
    lower: str
    banded: bool
    ended_early: str | None = None
    """The line saying the run did not finish (a Monitor record marked incomplete)."""
