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

import io
import math
import os
import statistics
from typing import Any, Sequence

from pipecheck.errors import PipecheckError, ResultFormatError
from pipecheck.measure.loop import STEADY_STATE_EXCLUDED_TAGS, steady_state
from pipecheck.records import store
from pipecheck.records.common import StepRecord

DEFAULT_WINDOW = 12
"""Steps shown in the Gantt when no window is given."""

INTERVAL_ORDER = ("checkpoint", "eval", "log", "gc", "data_wait", "device_put", "dispatch",
                  "sync")
"""How the spans of one step interval follow each other in the loop: the step's own hooks
(checkpoint, eval, log) run first, then the next batch is fetched and dispatched, then the
step's loss is read. User spans go after the hooks; ``other`` last."""

COLORS = {
    "data_wait": "#1f77b4", "device_put": "#17becf", "dispatch": "#7f7f7f", "sync": "#2ca02c",
    "checkpoint": "#ff7f0e", "eval": "#9467bd", "gc": "#8c564b", "log": "#d62728",
    "other": "#dddddd",
}
TAG_STYLE = {
    "compile": ("X", "#d62728"), "checkpoint": ("s", "#ff7f0e"), "eval": ("D", "#9467bd"),
    "gc": ("^", "#8c564b"),
}


class PlotUnavailableError(PipecheckError):
    """matplotlib (the ``plot`` extra) is not installed."""

    exit_code = 1


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailableError(
            "pipecheck plot needs matplotlib: pip install 'pipecheck[plot]'") from None
    return plt


def steps_of(record: Any, origin: str) -> list[StepRecord]:
    steps = list(getattr(record, "steps", ()) or ())
    if not steps:
        raise ResultFormatError(f"{origin} holds no per-step records (steps) to plot")
    return steps


def default_window(steps: Sequence[StepRecord], size: int = DEFAULT_WINDOW) -> tuple[int, int]:
    """A window of ``size`` steps: around the first checkpoint/eval/gc step, else after the
    first step. Returns (first, last) step numbers, inclusive."""
    numbers = [s.step for s in steps]
    special = [s.step for s in steps
               if s.step > 0 and any(t in ("checkpoint", "eval", "gc") for t in s.tags)]
    first = max(numbers[0], special[0] - 3) if special else min(numbers[0] + 1, numbers[-1])
    last = min(numbers[-1], first + size - 1)
    first = max(numbers[0], last - size + 1)
    return first, last


def gantt_bars(steps: Sequence[StepRecord]) -> tuple[list[tuple[str, float, float]],
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


def render_png(steps: Sequence[StepRecord], window: tuple[int, int], title: str) -> bytes:
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(13, 8),
                                   gridspec_kw={"height_ratios": [1, 1.2]})
    xs = [s.step for s in steps]
    ys = [s.time_s * 1e3 for s in steps]
    ax1.plot(xs, ys, "-", color="#1f77b4", lw=1, alpha=0.6, zorder=1)
    ax1.plot(xs, ys, "o", color="#1f77b4", ms=3, zorder=2, label="step time")
    steady = [s.time_s * 1e3 for s in steady_state(steps)]
    if steady:
        med = statistics.median(steady)
        ax1.axhline(med, ls="--", color="#2ca02c", lw=1,
                    label=f"steady-state median {med:.1f} ms")
    for tag, (marker, color) in TAG_STYLE.items():
        pts = [(s.step, s.time_s * 1e3) for s in steps if tag in s.tags]
        if pts:
            ax1.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, s=70,
                        color=color, zorder=3, label=tag, edgecolors="black", linewidths=0.5)
    others = sorted({t for s in steps for t in s.tags} - set(TAG_STYLE))
    for tag in others:
        pts = [(s.step, s.time_s * 1e3) for s in steps if tag in s.tags]
        ax1.scatter([p[0] for p in pts], [p[1] for p in pts], marker="v", s=60, zorder=3,
                    label=tag)
    positive = [y for y in ys if y > 0]
    if positive and steady and max(positive) / max(min(steady), 1e-9) > 20:
        ax1.set_yscale("log")
    ax1.axvspan(window[0] - 0.5, window[1] + 0.5, color="#ffdd88", alpha=0.3,
                label="Gantt window")
    ax1.set_xlabel("step")
    ax1.set_ylabel("step time (ms)")
    ax1.set_title(title)
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)

    win = [s for s in steps if window[0] <= s.step <= window[1]]
    bars, intervals = gantt_bars(win)
    kinds = [k for k in (*INTERVAL_ORDER, "other") if any(b[0] == k for b in bars)]
    kinds[len(kinds):] = sorted({b[0] for b in bars} - set(kinds))
    row = {k: i for i, k in enumerate(kinds)}
    for kind, start, dur in bars:
        ax2.broken_barh([(start * 1e3, dur * 1e3)], (row[kind] - 0.4, 0.8),
                        facecolors=COLORS.get(kind, "#bcbd22"), edgecolor="black", lw=0.3)
    label_at = ax2.get_xaxis_transform()  # x in data, y in axes fraction
    for step, start, dur in intervals:
        ax2.axvline(start * 1e3, color="black", lw=0.6, alpha=0.5)
        tagged = [t for t in (s.tags for s in win if s.step == step)][0]
        label = f"{step}" + (f"\n{','.join(tagged)}" if tagged else "")
        color = "#d62728" if any(t in STEADY_STATE_EXCLUDED_TAGS for t in tagged) else "black"
        ax2.text((start + dur / 2) * 1e3, 1.01, label, ha="center", va="bottom",
                 fontsize=7, color=color, transform=label_at)
    if intervals:
        end = intervals[-1][1] + intervals[-1][2]
        ax2.axvline(end * 1e3, color="black", lw=0.6, alpha=0.5)
        ax2.set_xlim(0, end * 1e3)
    ax2.set_yticks(range(len(kinds)))
    ax2.set_yticklabels(kinds)
    ax2.set_ylim(-0.6, len(kinds) - 0.4)
    ax2.invert_yaxis()
    ax2.set_xlabel(f"ms from the start of step {window[0]} (spans in loop order per step)")
    ax2.set_title(f"Gantt of steps {window[0]}-{window[1]} (step numbers above each interval)",
                  fontsize=10, pad=24)
    ax2.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def plot_run(run_path: str | os.PathLike[str], out_path: str | os.PathLike[str],
             window: tuple[int, int] | None = None, force: bool = False) -> tuple[int, int]:
    """Render ``run_path``'s steps to a PNG at ``out_path``; return the Gantt window."""
    store.check_writable(out_path, force)
    record: Any = store.load(run_path)
    steps = steps_of(record, str(run_path))
    numbers = {s.step for s in steps}
    if window is None:
        window = default_window(steps)
    elif not any(window[0] <= n <= window[1] for n in numbers):
        raise ResultFormatError(
            f"--steps {window[0]}:{window[1]} holds none of the run's steps "
            f"({min(numbers)}..{max(numbers)})")
    kind = getattr(record, "kind", "run")
    median = getattr(getattr(record, "step_time", None), "median_s", math.nan)
    title = f"{os.path.basename(str(run_path))} ({kind}): steady-state median " + (
        f"{median * 1e3:.1f} ms" if math.isfinite(median) else "-")
    png = render_png(steps, window, title)
    store.write_text_atomic(out_path, png, force)
    return window
