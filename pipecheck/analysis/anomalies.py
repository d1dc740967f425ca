"""Anomalous steps: which steps lie far from the steady state, and their likely cause.

One rule for every run: pipecheck's own (``synthetic``, ``compare``, the Monitor) and
imported MaxText logs. A step is anomalous when it is far from the median of its run in
two senses at once: a large *ratio* to the median (``SLOW_STEP_RATIO``,
``FAST_STEP_RATIO``) and a large *robust z-score* (distance over the median absolute
deviation, ``ROBUST_Z``), and either rare (``MAX_FLAGGED_SHARE``) or alone at its level.
The ratio keeps a very steady run (tiny MAD) from calling a 10% blip an anomaly; the
z-score and the share keep a run that is bursty by nature (an input-bound loop whose
workers deliver in bursts) from losing its slow steps, which are its real cost. The share
alone cannot tell a burst pattern from two unrelated stalls in a short run (two of nine
steps is 22%), so the far steps of one direction are grouped into levels (sorted, a gap of
``LEVEL_GAP`` times starts a new level): a burst pattern repeats at one level, while a step
with no other far step within ``LEVEL_GAP`` of it (a 126x checkpoint stall next to a 7x
one) is isolated, and an anomaly whatever the share when it lies ``ISOLATED_RATIO`` or more
from the median (a 2x blip of a loaded machine in a six-step run is not). A step at most
``FAST_STEP_RATIO`` of the median right after a flagged slow step (or in the run of
below-median steps after it) was charged less than its share and is flagged with it, even
where the spread hides it from the z-score. Median and MAD are of the steps themselves, so
the anomalies cannot widen their own yardstick.

A loop fed in bursts (a prefetch buffer, or several workers finishing together) waits for
one batch and then finds the next ones ready: a fast step that did not wait for its batch,
in the run of below-median steps right after one that did (``INPUT_WAIT_SHARE``), is a
*ready batch* (``ready_batches``): its time is what the step itself takes, so it is never
flagged and stays in the steady state. Its waits are a pattern when more than
``MAX_FLAGGED_SHARE`` of the steps are input waits far by the ratio, whatever their
z-scores (a burst pattern's waits vary, and the z-score must not split one level into
flagged and kept steps): then none of them is an anomaly but one isolated and
``ISOLATED_RATIO`` from the median. Such a loop's cost is in its waits, which a median
does not show: its throughput is the wall time per step over the steady window
(``steady_state.wall_per_step``), reported beside the median.

Anomalous steps are kept out of the steady state (``measure.loop.steady_state`` applies
``flag_outliers``) and listed with a likely cause:

- a pipecheck step's cause comes from what it spent its time on beyond a typical steady
  step (``explain_step``): compilation of any function during the step (named from JAX's
  compile events), host work outside any span, a garbage collection, a checkpoint or eval
  span, waiting for input, waiting for the device, or a span of the user's own;
- a fast step right after a slow one is an *attribution shift*: part of its time was
  charged to the slow step before it (the host ran ahead of the device, or a timer
  started late), so the two must be read together;
- MaxText steps are explained from the log's events (``analysis.logs.maxtext``).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from pipecheck.records.common import Anomaly, StepRecord
from pipecheck.records.kinds import FORCED_SYNC_SPAN, StepTag
from pipecheck.records.steps import StepTable

SLOW_STEP_RATIO = 2.0
"""A step at least this many times the median is slow: it cost a whole extra step's worth
of time, far beyond the jitter of a busy machine (spread warnings start at an IQR of 10%)."""

FAST_STEP_RATIO = 0.5
"""A step at most this fraction of the median is fast: no step does its work in half the
usual time, so part of it was charged to a neighbouring step."""

ROBUST_Z = 3.5
"""Modified z-score (0.6745 * |x - median| / MAD) a step must also exceed (Iglewicz and
Hoaglin's customary cut-off); with a MAD of zero the ratio alone decides."""

MIN_SAMPLES = 3
"""Fewer steps than this have no meaningful median to be far from: nothing is flagged."""

MAX_FLAGGED_SHARE = 0.2
"""Anomalies are rare: when more than this share of the steps lie far from the median in one
direction, that is how the run goes (an input-bound loop fed in bursts by its workers), and
none of them is flagged in that direction."""

LEVEL_GAP = 2.0
"""Far steps of one direction whose times differ by less than this factor are one level
(a burst pattern's slow steps vary by tens of percent, not 2x); a far step with no other
within this factor is isolated."""

INPUT_WAIT_SHARE = 0.5
"""A step waited for its input when its data wait (spans ``data_wait`` and ``device_put``)
is at least this share of its time: the loader, not the step, set its length. A fast step
waiting less than this after one that waited had its batch ready (``ready_batches``)."""

INPUT_WAIT_SPANS = ("data_wait", "device_put")
"""The spans of a step that wait for its batch."""

ISOLATED_RATIO = 4.0
"""An isolated step is an anomaly whatever the share only this far from the median (4x
slower, or a quarter of the time): beyond what a busy shared machine's jitter does to a
short run (steps stretched 2-3x), and short of the 5x no steady state may hold."""

COMPILE_CAUSE_SHARE = 0.5
"""Compilation is the cause when JAX compiled for at least this share of the time the step
took above a typical step; below it, compilation only contributed (and is still named)."""

CAUSE_COMPILATION = "compilation"
CAUSE_CHECKPOINT = "checkpoint stall"
CAUSE_ATTRIBUTION = "attribution shift"
CAUSE_UNEXPLAINED = "unexplained"
CAUSE_LOADER_START = "loader start"

SPAN_CAUSES = {
    "other": "host work outside spans",
    "gc": "garbage collection",
    "checkpoint": "checkpoint",
    "eval": "evaluation",
    "data_wait": "input wait",
    "device_put": "input wait",
    "sync": "waiting for the device",
    FORCED_SYNC_SPAN: "forced sync",
    "dispatch": "dispatch",
    "log": "logging sync",
    "profiler": "profiler",
}
"""The likely cause when a span holds most of a slow step's extra time; a user span's cause
is ``span 'NAME'``."""

LOADER_START_CAUSE_SHARE = 0.5
"""A step that began a pass over its loader (tag ``loader_start``) has the loader's start as
its cause when its data wait grew most, or by at least this share of the step's extra time
(an eval span in the same step may have grown more)."""

CAUSE_TAGS: dict[str, StepTag] = {
    CAUSE_COMPILATION: "compile",
    CAUSE_ATTRIBUTION: "attribution_shift",
}
"""The tag a slow/fast step gets for its cause; any other slow step is tagged ``slow`` and
any other fast one ``fast``."""

ANOMALY_TAGS: tuple[StepTag, ...] = ("slow", "fast", "attribution_shift")
"""Tags that only annotate an anomaly found from the step times (the steady-state rule
recomputes them, so a record read back gives the same steady state)."""

KEPT_APART_TAGS: tuple[StepTag, ...] = ("drain", "warmup")
"""Steps kept out of the steady state by design: never listed as anomalies."""


@dataclasses.dataclass(frozen=True)
class Flag:
    """One sample far from the median: its index, direction, and ratio to the median."""

    index: int
    slow: bool
    ratio: float


def flag_outliers(times: Sequence[float] | np.ndarray,
                  waits: Sequence[float] | np.ndarray | None = None,
                  ready: np.ndarray | None = None) -> tuple[list[Flag], float]:
    """The samples far from the median (both tests, and rare or isolated; see the module
    docstring), the fast samples that follow a flagged slow one, and the median of the
    samples that are not flagged. ``waits``: each sample's seconds waiting for its input,
    where known; the ready batches among the fast samples (``ready``, by default
    ``ready_batches`` of the samples) are never flagged. Pure and vectorized (a million
    steps take milliseconds); NaN median when nothing is left."""
    arr = np.asarray(times, dtype=float)
    if arr.size == 0:
        return [], math.nan
    med = float(np.median(arr))
    if arr.size < MIN_SAMPLES or not med > 0:
        return [], med
    ratio = arr / med
    if ready is None:
        ready = (np.zeros(arr.size, dtype=bool) if waits is None
                 else ready_batches(arr, np.asarray(waits, dtype=float), med))
    slow = ratio >= SLOW_STEP_RATIO
    fast = (ratio <= FAST_STEP_RATIO) & ~ready
    # the input waits far by the ratio, whatever their z-scores (a burst pattern's waits
    # vary, and the z-score must not split one level into flagged and kept steps)
    burst = slow & (np.zeros(arr.size, dtype=bool) if waits is None
                    else np.asarray(waits, dtype=float) >= INPUT_WAIT_SHARE * arr)
    mad = float(np.median(np.abs(arr - med)))
    if mad > 0:
        beyond = 0.6745 * np.abs(arr - med) / mad > ROBUST_Z
        slow &= beyond
        fast &= beyond
    for side, far_enough in ((slow, ratio >= ISOLATED_RATIO),
                             (fast, ratio <= 1.0 / ISOLATED_RATIO)):
        if side.sum() > MAX_FLAGGED_SHARE * arr.size:
            side &= isolated(arr, side) & far_enough
    if burst.sum() > MAX_FLAGGED_SHARE * arr.size:
        slow &= ~burst | (isolated(arr, burst) & (ratio >= ISOLATED_RATIO))
    fast |= after_slow(ratio, slow) & ~ready
    far = slow | fast
    flags = [Flag(int(i), bool(slow[i]), float(ratio[i])) for i in np.flatnonzero(far)]
    rest = arr[~far]
    return flags, float(np.median(rest)) if rest.size else math.nan


def ready_batches(times: np.ndarray, waits: np.ndarray, median: float) -> np.ndarray:
    """Which samples are batches that were ready: at most ``FAST_STEP_RATIO`` of
    ``median``, waiting less than ``INPUT_WAIT_SHARE`` of their time for their input, and
    in the run of below-median samples right after an input wait (a sample at or above the
    median that waited at least ``INPUT_WAIT_SHARE`` of its time). A loader that delivers
    in bursts makes one step wait and the next ones find their batches ready: they took
    what the step itself takes."""
    n = times.size
    if n == 0 or not median > 0:
        return np.zeros(n, dtype=bool)
    waited = waits >= INPUT_WAIT_SHARE * times
    high = times >= median
    # the last sample at or above the median before each one (-1: none)
    last_high = np.maximum.accumulate(np.where(high, np.arange(n), -1))
    before = np.concatenate([[-1], last_high[:-1]])
    after_wait = (before >= 0) & waited[np.maximum(before, 0)]
    return (times <= FAST_STEP_RATIO * median) & ~waited & after_wait


def pool_ready(seconds: np.ndarray, waits: np.ndarray | None, pool: np.ndarray
               ) -> np.ndarray | None:
    """``ready_batches`` of a run's steps in order (the steps kept out of the pool included:
    step 0 waiting for the workers to start, or a loader start, is an input wait, and the
    batches buffered meanwhile are ready), against the median of the pool, for the pool's
    samples; None without waits."""
    if waits is None or pool.size == 0:
        return None
    return ready_batches(seconds, waits, float(np.median(seconds[pool])))[pool]


def span_seconds(steps: StepTable[StepRecord], name: str) -> np.ndarray:
    """Seconds each step spent in span ``name`` (0 where it has none, or not a number)."""
    column = steps.map_columns("spans").get(name)
    if column is None:
        return np.zeros(len(steps))
    return np.where(np.isfinite(column), column, 0.0)


def input_waits(steps: StepTable[StepRecord]) -> np.ndarray:
    """Seconds each step waited for its batch (``INPUT_WAIT_SPANS``; 0 where it has none)."""
    return sum((span_seconds(steps, name) for name in INPUT_WAIT_SPANS),
               np.zeros(len(steps)))


def isolated(arr: np.ndarray, side: np.ndarray) -> np.ndarray:
    """Which of the samples marked in ``side`` have no other marked sample within a factor
    of ``LEVEL_GAP`` (alone at their level)."""
    idx = np.flatnonzero(side)
    out = np.zeros(arr.size, dtype=bool)
    if idx.size == 0:
        return out
    order = idx[np.argsort(arr[idx], kind="stable")]
    values = np.maximum(arr[order], np.finfo(float).tiny)
    gap = values[1:] / values[:-1] >= LEVEL_GAP  # a new level starts after each gap
    apart_below = np.concatenate([[True], gap])
    apart_above = np.concatenate([gap, [True]])
    out[order[apart_below & apart_above]] = True
    return out


def after_slow(ratio: np.ndarray, slow: np.ndarray) -> np.ndarray:
    """The samples at most ``FAST_STEP_RATIO`` of the median in the run of below-median
    samples right after a flagged slow one (work of the slow step charged to them)."""
    out = np.zeros(ratio.size, dtype=bool)
    for i in np.flatnonzero(slow):
        j = i + 1
        while j < ratio.size and ratio[j] < 1.0 and not slow[j]:
            out[j] = ratio[j] <= FAST_STEP_RATIO
            j += 1
    return out


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if abs(s) >= 1 else f"{s * 1e3:.1f} ms"


def compile_text(compiles: Mapping[str, float], limit: int = 3) -> str:
    """``jit(f) 1.20 s, jit(g) 5.0 ms (+2 more)``: the functions compiled, costliest first."""
    ranked = sorted(compiles.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{name or '?'} {_seconds(sec)}" for name, sec in ranked[:limit])
    more = len(ranked) - limit
    return text + (f" (+{more} more)" if more > 0 else "")


def explain_step(
    step: StepRecord,
    typical: Mapping[str, float],
    median: float,
    compiles: Mapping[str, float] | None = None,
) -> tuple[str, str]:
    """A slow pipecheck step's likely cause and the evidence, from its spans.

    ``typical`` is each span's median seconds over the steady steps; the span that grew
    most beyond it holds the cause. ``compiles`` are the seconds JAX spent compiling each
    function during the step (trace, lowering and backend compile): compilation is the
    cause when it covers ``COMPILE_CAUSE_SHARE`` of the step's extra time, or when the
    train step itself compiled (tag ``compile``) and no compile events were recorded.
    """
    compiles = dict(compiles or {})
    extra = step.time_s - median if math.isfinite(median) else step.time_s
    compile_s = sum(compiles.values())
    grown = {k: v - typical.get(k, 0.0) for k, v in step.spans.items()}
    top = max(grown, key=lambda k: grown[k], default=None)
    parts = []
    if top is not None and grown[top] > 0:
        share = step.spans[top] / step.time_s if step.time_s > 0 else math.nan
        where = SPAN_CAUSES.get(top, f"span '{top}'")
        parts.append(f"{where} {_seconds(step.spans[top])} of the step's "
                     f"{_seconds(step.time_s)} ({share:.0%}; typical "
                     f"{_seconds(typical.get(top, 0.0))})")
    if compiles:
        parts.append(f"compiled during the step: {compile_text(compiles)}")
    evidence = "; ".join(parts)
    if (compiles and extra > 0 and compile_s >= COMPILE_CAUSE_SHARE * extra) or (
            not compiles and "compile" in step.tags):
        return CAUSE_COMPILATION, evidence or "the step function compiled in this step"
    if "loader_start" in step.tags and grown.get("data_wait", 0.0) > 0 and (
            top == "data_wait" or grown["data_wait"] >= LOADER_START_CAUSE_SHARE * extra):
        wait = step.spans["data_wait"]
        return CAUSE_LOADER_START, "; ".join(
            [f"a new pass over the loader: its first batch waited {_seconds(wait)} of the "
             f"step's {_seconds(step.time_s)}", *parts[bool(top == 'data_wait'):]])
    if top is None or grown[top] <= 0:
        return CAUSE_UNEXPLAINED, evidence or "no span or compile event accounts for it"
    return SPAN_CAUSES.get(top, f"span '{top}'"), evidence


def candidate_mask(steps: StepTable[StepRecord], excluded_tags: Sequence[str],
                   skip_first: int = 1) -> np.ndarray:
    """Which of ``steps`` the steady state is chosen from: none before ``skip_first``, none
    with a tag in ``excluded_tags``; the anomalies are still among them."""
    return (steps.column("step") >= skip_first) & ~steps.tag_mask(excluded_tags)


def steady_mask(steps: StepTable[StepRecord], excluded_tags: Sequence[str],
                skip_first: int = 1) -> np.ndarray:
    """Which of ``steps`` are in the steady state: none before
    ``skip_first``, none with a tag in ``excluded_tags``, none that ``flag_outliers`` finds
    among the rest. Anomaly tags are ignored (recomputed), so a record read back gives the
    same steady state."""
    mask = candidate_mask(steps, excluded_tags, skip_first)
    pool = np.flatnonzero(mask)
    seconds, waits = steps.column("time_s"), input_waits(steps)
    flags, _ = flag_outliers(seconds[pool], waits[pool], pool_ready(seconds, waits, pool))
    mask[pool[[f.index for f in flags]]] = False
    return mask


def label(
    numbers: np.ndarray,
    seconds: np.ndarray,
    candidate: np.ndarray,
    apart: np.ndarray,
    explain: Callable[[int, float], tuple[str, str]],
    waits: np.ndarray | None = None,
) -> tuple[list[Anomaly], float]:
    """The anomalies of a run, in step order, and the steady-state median.

    Arrays over the run's steps in order: step ``numbers``, ``seconds``; ``candidate``: the
    step may be in the steady state (``flag_outliers`` picks among those); ``apart``: kept
    out by design (drain, warm-up) and never listed. A flagged slow step, or a step kept out
    for a reason of its own (the first step, a tagged one) at least ``SLOW_STEP_RATIO``
    times the median, gets its cause from ``explain(index, median)``; a fast one right after
    a slow one (or in the run of fast steps after it) is an attribution shift. ``waits``:
    each step's seconds waiting for its input, where known (ready batches are not
    anomalies). Only the listed steps are visited, so a long run costs its anomalies, not
    its length.
    """
    pool = np.flatnonzero(candidate)
    flags, med = flag_outliers(seconds[pool], None if waits is None else waits[pool],
                               pool_ready(seconds, waits, pool))
    fast = {int(pool[f.index]) for f in flags if not f.slow}
    slow = {int(pool[f.index]) for f in flags if f.slow}
    if med > 0:
        slow |= set(np.flatnonzero(~candidate & ~apart & (seconds >= SLOW_STEP_RATIO * med))
                    .tolist())
    out: list[Anomaly] = []
    source: int | None = None  # the slow step the previous listed step was, or followed
    source_row = -2
    # steps at or above the median before each row: the run after a slow step is unbroken
    # when none lies between them
    not_below = np.cumsum(~(seconds < med)) if med > 0 else np.arange(1, len(seconds) + 1)
    for i in sorted(slow | fast):
        number, t = int(numbers[i]), float(seconds[i])
        ratio = t / med if med > 0 else math.nan
        follows = (source is not None and source_row < i
                   and int(numbers[i]) - int(numbers[source_row]) == i - source_row
                   and not_below[i - 1] == not_below[source_row])
        if i in slow:
            cause, evidence = explain(i, med)
            out.append(Anomaly(number, t, ratio, cause, evidence))
            source, source_row = number, i
        elif follows:
            assert source is not None
            out.append(Anomaly(number, t, ratio, CAUSE_ATTRIBUTION,
                               attribution_evidence(source, number)))
        else:
            before = ("the step before it is not in the log" if i == 0
                      else "the step before it was not slow")
            out.append(Anomaly(number, t, ratio, CAUSE_UNEXPLAINED,
                               f"implausibly fast, and {before}"))
            source = None
    return out, med


def _span_columns(steps: StepTable[StepRecord]) -> dict[str, np.ndarray]:
    """Seconds per span name over the steps (0 where a step lacks the span)."""
    return {k: np.nan_to_num(v) for k, v in steps.map_columns("spans").items()}


def step_anomalies(
    steps: StepTable[StepRecord],
    excluded_tags: Sequence[str],
    compiles: Mapping[int, Mapping[str, float]] | None = None,
) -> list[Anomaly]:
    """Every step of a pipecheck run far from its steady state, with its likely cause.

    Steps flagged by ``flag_outliers`` among the steady-state candidates, and steps kept
    apart by a tag (the first step, compile, checkpoint, eval, gc) that took at least
    ``SLOW_STEP_RATIO`` times the steady median; causes from ``explain_step``.
    ``compiles`` maps a step to the seconds JAX spent compiling each function during it
    (``compiles_by_step``).
    """
    compiles = compiles or {}
    numbers = steps.column("step")
    candidate = (numbers >= 1) & ~steps.tag_mask(excluded_tags)
    steady = steady_mask(steps, excluded_tags)
    typical = {k: float(np.median(v[steady])) if steady.any() else 0.0
               for k, v in _span_columns(steps).items()}

    def explain(i: int, median: float) -> tuple[str, str]:
        row = steps[i]
        return explain_step(row, typical, median, compiles.get(row.step))

    found, _ = label(numbers, steps.column("time_s"), candidate,
                     steps.tag_mask(KEPT_APART_TAGS), explain, input_waits(steps))
    return found


def attribution_evidence(slow_step: int, step: int) -> str:
    """Why a fast step after a slow one is an attribution shift."""
    after = "right after" if step == slow_step + 1 else "in the run of fast steps after"
    return (f"fast {after} slow step {slow_step}: work done during step {slow_step} was "
            f"charged to it (the device ran ahead on queued steps, or the loader filled its "
            "buffer, or the step's timer started late); read them together")


def tag_anomalies(steps: StepTable[StepRecord], anomalies: Sequence[Anomaly],
                  excluded_tags: Sequence[str]) -> StepTable[StepRecord]:
    """The steps with each anomaly's tag added (``slow``, ``fast``, ``attribution_shift``,
    ``compile``), so a record, its plot and its readers show where they are. A step that
    already carries a tag of ``excluded_tags`` (it is apart for that reason) keeps its tags."""
    tag_of = {a.step: CAUSE_TAGS.get(a.cause) or ("slow" if a.ratio >= 1 else "fast")
              for a in anomalies}
    numbers = steps.column("step")
    rows = {int(i): tag_of[int(numbers[i])]
            for i in np.flatnonzero(np.isin(numbers, list(tag_of)))}
    new: dict[int, tuple[str, ...]] = {}
    for i, tag in rows.items():
        tags = steps[i].tags
        if tag not in tags and not any(t in excluded_tags for t in tags):
            new[i] = (*tags, tag)
    return steps.with_tags(new) if new else steps


def compiles_by_step(
    events: Iterable[tuple[str, float, float]],
    marks: Sequence[float],
    first_mark: int = 0,
) -> dict[int, dict[str, float]]:
    """Seconds JAX spent compiling each function, by the step interval it ended in.

    ``events`` are (function name, clock reading when reported, seconds); ``marks`` the
    recorder's step boundaries (mark ``first_mark + i`` is ``marks[i]``; step ``k`` is the
    interval from mark ``k`` to mark ``k + 1``). Events outside the marks are dropped.
    """
    out: dict[int, dict[str, float]] = {}
    for name, at, seconds in events:
        i = bisect.bisect_left(marks, at)
        if i == 0 or i == len(marks):
            continue
        step = first_mark + i - 1
        per = out.setdefault(step, {})
        per[name] = per.get(name, 0.0) + seconds
    return out
