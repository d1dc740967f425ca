"""MaxText training logs as pipecheck records (``pipecheck import``, kind ``imported``):
the analysis of what ``logs.maxtext`` read (pure: lines, columns and events in, records
out).

**Steady state.** Every logged step except the first when the log shows the run starting
(it includes compilation; an excerpt or a resumed run that starts past the run's first
step, ``FIRST_STEP_BY_LAG``, without the start-up lines does not claim a compile step it
never saw), the first step after a restart or restore, and the steps
``anomalies.flag_outliers`` finds far from the others (the rule every run uses).

**Causes.** Each slow step gets a likely cause from what the log holds, in this order:
by **timestamp overlap** where the step's interval and the event's time are both known,
else by **line order**. MaxText writes step N's line one step late, after dispatching step
N+1 (``LOG_LAG_STEPS``; logs that write it at once, like Tunix's trainer, are told apart
by their timestamps, ``log_lag``), so a line between the lines of steps N-1 and N ran
during step N+1 (during step N without the lag). The background: an orbax async checkpoint
save in flight (from its ``Background save thread started`` line to its ``Background save
thread done. Time taken: Xs`` line, or the ``done.`` line without a time older orbax
versions write), the training thread blocked on a save (orbax's ``Initiated Pytree
async_save. Time taken: Xs``, written when the save's blocking part ends; ``Waiting for
previous save to complete took X seconds``, ``Waited X seconds for step S to finish before
starting checkpointing``). The activities (``activities``): evaluation (``Running
evaluation`` .. ``Completed eval after train step``, ``Completed eval step``), profiler
windows (``Capture range started/ended``, ``jax.profiler`` start/stop, MaxText's
``completed profiler activation/deactivation step``, the Nsight report written after
it), synchronous saves (``[sync] Started save`` .. ``Finished save``, ``Saving item to``
.. ``Finished synchronous save``), restores and restarts (an elastic slice-down event, a
preemption). A fast step right after a slow one, or in the run of below-median steps after
it, is an attribution shift named with that neighbour. "unexplained" only when the log
holds nothing for it. Each anomaly's checkpoint evidence is looked up
(``BackgroundLookup``: the saves and waits filed under the steps they can overlap), not
scanned for, so a run with thousands of stalls and saves costs its length.

**Level shifts** of the steady state are found by ``analysis.level_shift``; a loss that
turns NaN or infinite is reported with the step where it began.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Callable, Iterable, Sequence

import numpy as np

from pipecheck import stats
from pipecheck.analysis import anomalies, level_shift
from pipecheck.analysis.logs import intervals, wall_time
from pipecheck.analysis.periodic_stall import periodic_stall_findings
from pipecheck.records.common import Distribution
from pipecheck.records.imported import (
    Anomaly,
    ImportedRun,
    LevelShift,
    LogEvent,
    LogMemory,
    LogStep,
    WallTime,
)
from pipecheck.records.steps import StepTable

# --- causes of anomalous steps ---------------------------------------------------------
CAUSE_COMPILATION = anomalies.CAUSE_COMPILATION
CAUSE_CHECKPOINT = anomalies.CAUSE_CHECKPOINT
CAUSE_ATTRIBUTION = anomalies.CAUSE_ATTRIBUTION
CAUSE_UNEXPLAINED = anomalies.CAUSE_UNEXPLAINED

CAUSE_TAGS = {
    CAUSE_COMPILATION: "compile",
    CAUSE_CHECKPOINT: "checkpoint",
    CAUSE_ATTRIBUTION: "attribution_shift",
    CAUSE_UNEXPLAINED: "outlier",
}
"""The tag an anomalous step carries in ``steps`` (``compile`` and ``checkpoint`` are the
tags pipecheck's own runs use for the same causes)."""

CHECKPOINT_STALL_WINDOW = 2
"""For checkpoint lines without a timestamp only: a slow step at most this many steps after
the line's step is a checkpoint stall (the save of step S runs after step S is dispatched,
so its cost lands in step S+1 or S+2)."""

CHECKPOINT_EVENTS = (
    "checkpoint_save", "checkpoint_async_start", "checkpoint_wait_previous", "checkpoint_wait_step",
    "checkpoint_saved", "async_save_blocking",
)

BLOCKING_EVENTS = ("checkpoint_wait_previous", "checkpoint_wait_step", "async_save_blocking")
"""Lines saying the training thread was blocked for ``seconds`` until the line's time."""

LOG_LAG_STEPS = 1
"""MaxText's metric logger buffers one step: the line of step N is written after step N+1
is dispatched, so step N's interval ends at the time of step N-1's line."""

WAIT_MATCH_S = 1.0
"""A "Waiting for previous save" line written up to this long after a save's background
thread finished is waiting for that save (log lines are written a little after the fact)."""

ANCHOR_WINDOW = 64
"""Steps either side whose line times may anchor a step's interval (see ``step_intervals``):
wide enough to reach past a checkpoint or eval that delays a few lines, narrow enough that
the step times' millisecond rounding cannot drift the chain by more than tens of ms."""

MAX_BREAKS_PER_STEP = 8
"""Bounds the unknowns ``step_intervals`` puts between chains to this many per step (a log
that shows only every k-th step would need ``ANCHOR_WINDOW`` per step): past it, the
window narrows."""

LAG_MIN_PAIRS = 3
"""Consecutive timed step lines needed to tell from the timestamps whether a log writes
each step's line at once or one step late (fewer: MaxText's ``LOG_LAG_STEPS``)."""

CAUSE_EVAL = anomalies.SPAN_CAUSES["eval"]
CAUSE_PROFILER = anomalies.SPAN_CAUSES["profiler"]
CAUSE_RESTART = "restart"
CAUSE_START_UP = "start-up"
CAUSE_TAGS.update({CAUSE_EVAL: "eval", CAUSE_PROFILER: "profile", CAUSE_RESTART: "restart",
                   CAUSE_START_UP: "warmup"})

FIRST_STEP_BY_LAG = {1: 0, 0: 1}
"""The step a run starts at, by how its log writes step lines (``log_lag``): MaxText's
metric logger (one step late) counts from 0, Tunix's trainers (at once) from 1. A log
without start-up lines whose first step is later (a MaxText log starting at step 1: the
excerpt left out step 0) shows no compile step."""

FIRST_STEP_COMPILE_RATIO = 1.0
"""A first step logged faster than this share of the steady-state median holds no compile
(tracing and compiling the train step, then running it, take longer than running it): its
train step was compiled before the loop, and its time is the run's start-up, mostly the
dispatch of a step whose device work lands in the next steps. It stays out of the steady
state, as ``CAUSE_START_UP``, not ``CAUSE_COMPILATION``."""

ACTIVITY_FAMILIES = {
    "eval_start": ("eval", "open"), "eval_step": ("eval", "open"), "eval_end": ("eval", "close"),
    "profiler_start": ("profiler", "open"), "profiler_stop": ("profiler", "close"),
    "profiler_collect": ("profiler", "extend"),
    "profiler_boundary": ("profiler", "toggle"), "profiler_report": ("profiler", "extend"),
    "sync_save_start": ("sync_save", "open"), "sync_save_end": ("sync_save", "close"),
    "restore_start": ("restore", "open"), "restore_end": ("restore", "close"),
    "restart": ("restart", "point"),
}
"""How each activity line opens, closes or extends a window of its family."""

ACTIVITY_CAUSES = {
    "eval": (CAUSE_EVAL, "evaluation"),
    "profiler": (CAUSE_PROFILER, "profiler window"),
    "sync_save": (CAUSE_CHECKPOINT, "synchronous checkpoint save"),
    "restore": (CAUSE_RESTART, "checkpoint restore"),
    "restart": (CAUSE_RESTART, "restart"),
}
"""Each family's cause and what its evidence calls it."""

def sliding_min(values: np.ndarray, width: int) -> np.ndarray:
    """Pure: the minimum of each run of ``width`` consecutive values (``values.size - width
    + 1`` of them), in O(n) whatever the width (van Herk / Gil-Werman): cut into blocks of
    ``width``, a window spans the end of one block and the start of the next, so its minimum
    is the lesser of a running minimum from the right in the first and from the left in the
    second."""
    n = values.size
    count = n - width + 1
    if count <= 0:
        return np.zeros(0, dtype=values.dtype)
    blocks = -(-n // width)
    padded = np.full(blocks * width, math.inf)
    padded[:n] = values
    columns = np.ascontiguousarray(padded.reshape(blocks, width).T)  # a block per column
    from_left = np.minimum.accumulate(columns, axis=0).T.ravel()
    from_right = np.minimum.accumulate(columns[::-1], axis=0)[::-1].T.ravel()
    return np.minimum(from_right[:count], from_left[width - 1 : width - 1 + count])


def step_intervals(numbers: np.ndarray, seconds: np.ndarray, line_at: np.ndarray,
                   lag: int = LOG_LAG_STEPS,
                   window: int = ANCHOR_WINDOW) -> tuple[np.ndarray, np.ndarray]:
    """Pure: each step's (start, end) in the log's seconds, from its line times; NaN where
    no stamped line is near. Arrays over the steps in order (step ``numbers``, ``seconds``,
    ``line_at``: when each step's line was written at the latest).

    MaxText's step times are differences of consecutive clock readings, so the steps tile
    the run: step N ends where step N-1 ended plus its own time. One clock reading anchors
    the chain. The line of step N - ``lag`` is written after step N ended, later by whatever
    ran in between (a checkpoint save, an eval), never earlier; so within ``window`` steps
    either side, the line that implies the earliest end is the least delayed, and anchors.
    Steps the log does not show (a jump in the step numbers: an excerpt, a restart) break
    the chain, their time unknown: each run of consecutive steps is anchored on its own
    lines (a log with more breaks than ``MAX_BREAKS_PER_STEP`` a step anchors within a
    narrower window).
    """
    n = len(numbers)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    cum = np.cumsum(seconds)
    breaks = np.zeros(0, dtype=np.int64)
    if numbers[-1] - numbers[0] == n - 1:  # sorted, unique and consecutive: no search
        row = np.maximum(np.arange(n) - lag, 0)
    else:
        row = np.searchsorted(numbers, numbers - lag)  # the row of step N - lag, if logged
        breaks = np.flatnonzero(np.diff(numbers) != 1) + 1  # rows that start a new chain
        window = max(1, min(window, int(MAX_BREAKS_PER_STEP * n) // max(breaks.size, 1)))
    row = np.minimum(row, n - 1)
    has = numbers[row] == numbers - lag
    stamp = np.where(has & np.isfinite(line_at[row]), line_at[row], math.inf)
    offset = stamp - cum  # end_k - cum_k, delayed by the work after step k, never early
    # ``window`` unknowns between two chains keep each row's window within its own chain
    apart = np.insert(offset, np.repeat(breaks, window), math.inf)
    padded = np.concatenate([np.full(window, math.inf), apart, np.full(window, math.inf)])
    best = sliding_min(padded, 2 * window + 1)
    if breaks.size:
        best = best[np.arange(n) + window * np.searchsorted(breaks, np.arange(n), "right")]
    end = np.where(np.isfinite(best), np.round(cum + best, 6), math.nan)
    return np.round(end - seconds, 6), end


@dataclasses.dataclass(frozen=True)
class Background:
    """Something that ran while steps ran: an async save in flight, or the training thread
    blocked on a save. ``end`` is infinite for a save the log never saw finish."""

    start: float
    end: float
    kind: str
    """``async_save``, or the blocking event's kind (``checkpoint_wait_previous`` ...)."""
    evidence: str

    @property
    def blocking(self) -> bool:
        return self.kind != "async_save"


def _when(e: LogEvent) -> str:
    return f"line {e.line}" + (f" ({e.clock})" if e.clock else "")


def background(events: Sequence[LogEvent]) -> list[Background]:
    """Pure: the async saves in flight and the blocking waits, as time intervals."""
    timed = [e for e in events if e.at_s is not None]
    nearest_start = NearestLine([e for e in timed if e.kind == "checkpoint_async_start"])
    out: list[Background] = []
    open_saves: dict[str, LogEvent] = {}
    for e in timed:
        assert e.at_s is not None
        if e.kind == "async_save_blocking" and e.seconds is not None:
            start = e.at_s - e.seconds
            out.append(Background(start, e.at_s, e.kind,
                                  _blocking_text(e, nearest_start(e.at_s))))
        elif e.kind in BLOCKING_EVENTS and e.seconds is not None:
            out.append(Background(e.at_s - e.seconds, e.at_s, e.kind, f"{_when(e)}: {e.text}"))
        elif e.kind == "async_save_started":
            open_saves[e.text.split("]")[1]] = e
        elif e.kind == "async_save_done":
            begun = open_saves.pop(e.text.split("]")[1], None)
            seconds = e.seconds
            if seconds is None and begun is not None and begun.at_s is not None:
                seconds = e.at_s - begun.at_s  # older orbax: no time on the line
            if seconds is None:  # when the save began is unknown
                continue
            start = e.at_s - seconds
            out.append(Background(start, e.at_s, "async_save",
                                  _save_text(start, seconds, begun, e, nearest_start(start))))
    for begun in open_saves.values():
        assert begun.at_s is not None
        out.append(Background(begun.at_s, math.inf, "async_save",
                              _save_text(begun.at_s, None, begun, None,
                                         nearest_start(begun.at_s))))
    return out


def _save_text(start: float, seconds: float | None, begun: LogEvent | None,
               done: LogEvent | None, near: LogEvent | None) -> str:
    of = f" of step {near.step}" if near is not None and near.step is not None else ""
    lines = [x for x in (begun, near, done) if x is not None]
    where = ", ".join(_when(x) for x in sorted(set(lines), key=lambda x: x.line))
    took = f"{seconds:.1f} s" if seconds is not None else "not seen to finish"
    return f"async checkpoint save{of} in flight ({took}; {where})"


def _blocking_text(e: LogEvent, near: LogEvent | None) -> str:
    """The evidence of a save's blocking part: what it was, for how long, and its line.
    ``near``: the ``Started an asynchronous checkpoint save`` line nearest its end, which
    MaxText writes right after it."""
    assert e.seconds is not None
    of = f" of step {near.step}" if near is not None and near.step is not None else ""
    return (f"checkpoint save{of} blocked training {e.seconds:.2f} s copying the state off "
            f"the device ({_when(e)}: {e.text})")


class NearestLine:
    """The event written nearest a time (the first in log order among equally near ones,
    as ``min`` over them would pick), by bisection over their times."""

    def __init__(self, events: Sequence[LogEvent]) -> None:
        self.events = events
        order = sorted(range(len(events)), key=lambda k: (events[k].at_s or 0.0, k))
        self.at = [events[k].at_s or 0.0 for k in order]
        self.order = order

    def __call__(self, t: float) -> LogEvent | None:
        if not self.events:
            return None
        j = bisect.bisect_left(self.at, t)
        sides = [self.at[k] for k in (j - 1, j) if 0 <= k < len(self.at)]
        best = min(abs(v - t) for v in sides)
        if not math.isfinite(best):  # all infinitely far: every one ties
            return self.events[0]
        first = [self.order[bisect.bisect_left(self.at, v)] for v in sides
                 if abs(v - t) == best]
        return self.events[min(first)]


def _overlap(a: tuple[float, float], b: Background) -> float:
    return max(0.0, min(a[1], b.end) - max(a[0], b.start))


def _waits_for(save: Background, b: Background) -> bool:
    """``b`` is a later save's wait for ``save`` (it ended while ``save`` ran, or just after)."""
    return (b.kind == "checkpoint_wait_previous"
            and save.start < b.end <= save.end + WAIT_MATCH_S)


def _evidence(interval: tuple[float, float], near: Iterable[Background],
              waits: Callable[[Background], list[Background]]) -> list[str]:
    """``checkpoint_evidence`` from the ops ``near`` the interval (in log order; those that
    do not overlap it are dropped) and each save's ``waits`` (in log order)."""
    hits = sorted((b for b in near if _overlap(interval, b) > 0),
                  key=lambda b: -_overlap(interval, b))
    for save in [b for b in hits if not b.blocking]:
        hits += [b for b in waits(save) if b not in hits]
    return [b.evidence for b in hits]


def checkpoint_evidence(interval: tuple[float, float], ops: Sequence[Background]) -> list[str]:
    """What ran in the background during ``interval``, most overlap first; a later save's
    wait for a save that was in flight then is evidence too, wherever it fell. A scan of
    every op: the definition ``BackgroundLookup`` answers by lookup."""
    return _evidence(interval, ops, lambda save: [b for b in ops if _waits_for(save, b)])


class BackgroundLookup:
    """``checkpoint_evidence`` for each step of a run, by lookup: the ops are filed under
    the steps they may overlap (``intervals.RowIndex``) and the waits by their end, so a
    step costs O(log n) plus what it finds, not a scan of every op."""

    def __init__(self, ops: Sequence[Background], start: np.ndarray, end: np.ndarray) -> None:
        self.ops, self.start, self.end = ops, start, end
        self.rows = intervals.RowIndex(start, end, np.array([b.start for b in ops]),
                                       np.array([b.end for b in ops]))
        waits = sorted((b.end, j) for j, b in enumerate(ops)
                       if b.kind == "checkpoint_wait_previous")
        self._wait_end = [e for e, _ in waits]
        self._wait_op = [j for _, j in waits]

    def _waits(self, save: Background) -> list[Background]:
        lo = bisect.bisect_right(self._wait_end, save.start)
        hi = bisect.bisect_right(self._wait_end, save.end + WAIT_MATCH_S)
        return [self.ops[j] for j in sorted(self._wait_op[lo:hi])]

    def evidence(self, row: int) -> list[str]:
        """``checkpoint_evidence`` of step ``row``'s interval (none where it is unknown)."""
        if not math.isfinite(self.end[row]):
            return []
        return _evidence((float(self.start[row]), float(self.end[row])),
                         (self.ops[j] for j in self.rows.candidates(row)), self._waits)


def log_lag(numbers: np.ndarray, seconds: np.ndarray, line_at: np.ndarray,
            own_time: np.ndarray | None = None) -> int:
    """Pure: 1 when the log writes step N's line one step late (MaxText's metric logger),
    0 when at once; told by which step's time the gap between consecutive line times
    matches better (median over the pairs of lines with their own headers, ``own_time``).
    ``LOG_LAG_STEPS`` without enough pairs."""
    n = len(numbers)
    if n < LAG_MIN_PAIRS + 2:
        return LOG_LAG_STEPS
    stamped = line_at if own_time is None else np.where(own_time, line_at, math.nan)
    gap = np.diff(stamped)
    consecutive = np.diff(numbers) == 1
    ok0 = consecutive & np.isfinite(gap)  # pairs (k-1, k), k = 1..n-1
    ok1 = ok0[:-1] & consecutive[1:]
    if ok1.sum() < LAG_MIN_PAIRS:
        return LOG_LAG_STEPS
    err0 = np.abs(gap[:-1] - seconds[1:-1])[ok1]
    err1 = np.abs(gap[:-1] - seconds[2:])[ok1]
    return 0 if float(np.median(err0)) < float(np.median(err1)) else 1


@dataclasses.dataclass(frozen=True)
class Activity:
    """A stretch of the run doing something besides training steps (an eval, a profiler
    window, a synchronous save, a restore or restart), from its first line to its last."""

    family: str
    first: LogEvent
    last: LogEvent

    @property
    def timed(self) -> bool:
        return self.first.at_s is not None and self.last.at_s is not None

    def evidence(self) -> str:
        what = ACTIVITY_CAUSES[self.family][1]
        took = ""
        if self.timed and self.last is not self.first:
            assert self.first.at_s is not None and self.last.at_s is not None
            took = f", {self.last.at_s - self.first.at_s:.1f} s"
        lines = (f"line {self.first.line}" if self.last is self.first
                 else f"lines {self.first.line}-{self.last.line}")
        text = self.first.text if self.last is self.first else \
            f"{self.first.text} .. {self.last.text}"
        return f"{what} ({lines}{took}: {text})"


def activities(events: Sequence[LogEvent]) -> list[Activity]:
    """Pure: the eval, profiler, synchronous save, restore and restart windows the events
    mark, in log order (``ACTIVITY_FAMILIES``; a window never closed ends at its last
    line)."""
    out: list[Activity] = []
    open_: dict[str, tuple[LogEvent, LogEvent]] = {}
    for e in events:
        role = ACTIVITY_FAMILIES.get(e.kind)
        if role is None:
            continue
        family, how = role
        if how == "point":
            out.append(Activity(family, e, e))
        elif how in ("extend", "close") and family not in open_ and out \
                and out[-1].family == family:  # a later line of the window just closed
            out[-1] = Activity(family, out[-1].first, e)
        elif how in ("open", "extend") or (how == "toggle" and family not in open_):
            first, _ = open_.get(family, (e, e))
            open_[family] = (first, e)
        else:  # close, or the second toggle
            first, _ = open_.pop(family, (e, e))
            out.append(Activity(family, first, e))
    out += [Activity(f, first, last) for f, (first, last) in open_.items()]
    out.sort(key=lambda a: a.first.line)
    return out


def _row_after(numbers: np.ndarray, anchor: int | None) -> int:
    """The row of the first step line after a line whose last step line before it was
    ``anchor`` (None: before any step line)."""
    return 0 if anchor is None else int(np.searchsorted(numbers, anchor, side="right"))


def line_delay(numbers: np.ndarray, line_at: np.ndarray, end: np.ndarray,
               lag: int = LOG_LAG_STEPS) -> np.ndarray:
    """Pure: how much later than each step's chained end (``step_intervals``) the line that
    bounds it (step N - ``lag``'s) was written (0 where unknown). The chain takes the least
    delayed line near a step as its anchor, so a step may have ended up to this much later
    than its chained end: its interval is known to within this delay."""
    if not numbers.size:
        return np.zeros(0)
    row = np.minimum(np.searchsorted(numbers, numbers - lag), numbers.size - 1)
    late = np.where(numbers[row] == numbers - lag, line_at[row] - end, 0.0)
    return np.where(np.isfinite(late) & (late > 0), late, 0.0)


class ActivityLookup:
    """Which activities a step ran beside: by the log's times where both are known, else
    by line order (a line between the lines of rows r-1 and r ran during row r + lag).
    By times, a window counts when it overlaps the step wherever in its ``delay`` the step
    truly lies (``line_delay``): a window that ends within the delay after the step's
    chained start, a line written as the metric logger flushed, is not the step's."""

    def __init__(self, acts: Sequence[Activity], numbers: np.ndarray, start: np.ndarray,
                 end: np.ndarray, lag: int, delay: np.ndarray | None = None) -> None:
        # a restore before the first step line is the run's start-up, not a step's
        acts = [a for a in acts if a.family not in ("restore", "restart")
                or a.last.anchor_step is not None]
        self.acts, self.start, self.end = acts, start, end
        self.delay = np.zeros(len(start)) if delay is None else delay
        self.rows = [(_row_after(numbers, a.first.anchor_step) + lag,
                      _row_after(numbers, a.last.anchor_step) + lag) for a in acts]

    def found(self, row: int) -> list[Activity]:
        out = []
        for a, (lo, hi) in zip(self.acts, self.rows, strict=True):
            s, e = self.start[row], self.end[row]
            if a.timed and math.isfinite(s) and math.isfinite(e):
                assert a.first.at_s is not None and a.last.at_s is not None
                if a.first.at_s <= e and a.last.at_s >= s + self.delay[row]:
                    out.append(a)
            elif lo <= row <= hi:
                out.append(a)
        return out


def first_rows(numbers: np.ndarray, events: Sequence[LogEvent], start_seen: bool,
               lag: int = LOG_LAG_STEPS) -> dict[int, tuple[str, str]]:
    """The rows kept out of the steady state by design, with their cause: the first step
    when the log shows the run starting (its start-up lines, or a first step of 0, or the
    first step its ``lag`` tells, ``FIRST_STEP_BY_LAG``), and the first step after each
    restart or restore the log shows later on."""
    out: dict[int, tuple[str, str]] = {}
    if numbers.size and (start_seen or int(numbers[0]) in (0, FIRST_STEP_BY_LAG.get(lag))):
        dumps = [e for e in events if e.kind == "hlo_dump" and e.anchor_step is None]
        dumping = (f"; the run dumps HLO while compiling (line {dumps[0].line}: "
                   f"{dumps[0].text})" if dumps else "")
        out[0] = (CAUSE_COMPILATION,
                  "first step logged: it includes tracing and compiling the train step"
                  + dumping)
    for e in events:
        if ACTIVITY_FAMILIES.get(e.kind, ("", ""))[0] in ("restore", "restart") \
                and e.anchor_step is not None:
            row = _row_after(numbers, e.anchor_step)
            if row < numbers.size and row not in out:
                out[row] = (CAUSE_RESTART, f"first step after a restart (line {e.line}: "
                            f"{e.text}): it restores the state and compiles again")
    return out


def explain_anomalies(
    steps: StepTable[LogStep], events: Sequence[LogEvent],
    line_at: np.ndarray | None = None, start_seen: bool = True,
    own_time: np.ndarray | None = None, lag: int | None = None,
) -> tuple[list[Anomaly], float]:
    """The steps to keep out of the steady state, each with a likely cause.

    ``first_rows`` are kept out by design. Of the others, ``anomalies.flag_outliers``
    picks those far from the rest. A slow one gets its cause from the activities it ran
    beside, then from the checkpoint saves in flight or blocking during it (checkpoint
    lines: by time, or without one within ``CHECKPOINT_STALL_WINDOW`` steps of theirs); a
    fast one after a slow one is an attribution shift; anything else is unexplained.
    ``line_at``: when each step's line was written (``logs.maxtext``); ``start_seen``:
    the log shows the run starting; ``lag``: the log's ``log_lag`` when the caller has it.
    Returns the anomalies (by step) and the steady-state median.
    """
    if not len(steps):
        return [], math.nan
    numbers = steps.column("step")
    seconds = steps.column("time_s")
    at = np.full(len(steps), math.nan) if line_at is None else line_at
    if lag is None:
        lag = log_lag(numbers, seconds, at, own_time)
    start, end = step_intervals(numbers, seconds, at, lag=lag)
    lookup = BackgroundLookup(background(events), start, end)
    acts = ActivityLookup(activities(events), numbers, start, end, lag,
                          line_delay(numbers, at, end, lag))
    by_order = sorted((e.anchor_step, k, e) for k, e in enumerate(events)
                      if e.kind in CHECKPOINT_EVENTS and e.anchor_step is not None)
    anchors = [a for a, _, _ in by_order]
    apart = first_rows(numbers, events, start_seen, lag)

    def explain(i: int, median: float) -> tuple[str, str]:
        if i in apart:
            return apart[i]
        number = int(numbers[i])
        found = lookup.evidence(i)
        timed = math.isfinite(end[i])
        # checkpoint lines anchored at most CHECKPOINT_STALL_WINDOW steps before, in log
        # order: those without a time, or all of them where the step's time is unknown
        near = sorted(by_order[bisect.bisect_left(anchors, number - CHECKPOINT_STALL_WINDOW):
                               bisect.bisect_right(anchors, number)], key=lambda u: u[1])
        found += [f"line {e.line}: {e.text}" for _, _, e in near
                  if e.at_s is None or not timed]
        beside = acts.found(i)
        if beside:
            texts = [a.evidence() for a in beside] + found
            return ACTIVITY_CAUSES[beside[0].family][0], "; ".join(texts[:3])
        if found:
            return CAUSE_CHECKPOINT, "; ".join(found[:3])
        return CAUSE_UNEXPLAINED, _unexplained(timed, first_logged=i == 0)

    candidate = np.ones(len(steps), dtype=bool)
    candidate[list(apart)] = False
    found, med = anomalies.label(numbers, seconds, candidate,
                                 np.zeros(len(steps), dtype=bool), explain)
    return _with_apart(found, med, apart, numbers, seconds), med


def _unexplained(timed: bool, first_logged: bool) -> str:
    """The evidence of a slow step the log holds nothing for: judged by timestamps or by
    line order; ``first_logged``: the log starts at it, past the run's first step."""
    text = ("slow, and no checkpoint save was in flight or blocking during it by the log's "
            "timestamps" if timed else "slow, and no checkpoint save, eval, profiler window "
            "or restart ran during it by line order")
    if first_logged:
        text += "; the log starts at it, past the run's first step: what ran before it is not "
        text += "in the log"
    return text


def _with_apart(found: list[Anomaly], med: float, apart: dict[int, tuple[str, str]],
                numbers: np.ndarray, seconds: np.ndarray) -> list[Anomaly]:
    """``found`` with the steps kept out by design listed even when not slow, so the
    record's steady state (every step not listed) leaves them out too."""
    listed = {a.step for a in found}
    for row, (cause, evidence) in apart.items():
        t = float(seconds[row])
        if row == 0 and cause == CAUSE_COMPILATION and t < FIRST_STEP_COMPILE_RATIO * med:
            cause, evidence = CAUSE_START_UP, (
                f"first step logged, {t / med:.2f}x the steady-state median: faster than a "
                "training step, so it holds no compile (the train step was compiled before "
                "the loop); likely only its dispatch, the device's work landing in the next "
                "steps")
        if int(numbers[row]) not in listed:
            found.append(Anomaly(int(numbers[row]), t, t / med if med > 0 else math.nan,
                                 cause, evidence))
    return sorted(found, key=lambda a: a.step)


@dataclasses.dataclass
class ParsedLog:
    """What a reader (``logs.maxtext``) took from a log, for ``summarize``."""

    steps: StepTable[LogStep] = dataclasses.field(
        default_factory=lambda: StepTable.from_rows(LogStep, ()))
    events: list[LogEvent] = dataclasses.field(default_factory=list)
    env: dict[str, object] = dataclasses.field(default_factory=dict)
    config: dict[str, object] = dataclasses.field(default_factory=dict)
    params: float | None = None
    total_tflops_per_step: float | None = None
    memory: dict[str, float] = dataclasses.field(default_factory=dict)
    duplicates: int = 0
    unreadable_steps: int = 0
    line_at: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    """When each step's line was written at the latest, aligned with ``steps`` (seconds
    since the first timestamp; NaN: unknown): its header's time, or for a bare line the
    time of the next header."""
    has_loss: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, bool))
    """Which steps' lines carry a ``loss:`` (a NaN loss is then a NaN the log printed)."""
    own_time: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, bool))
    """Which steps' lines carry their own header (``line_at`` is then when it was written,
    not a bound from a later line)."""
    start_seen: bool = False
    """The log shows the run starting (versions, parameters, config) before a step line."""
    lines: int = 0
    first_at: float | None = None
    last_at: float | None = None
    """The log's earliest and latest timestamps (seconds since its first; None: none)."""


def nonfinite_loss(numbers: np.ndarray, loss: np.ndarray, has_loss: np.ndarray
                   ) -> tuple[int | None, str | None]:
    """The first step whose logged loss is NaN or infinite and a sentence saying so with
    the last finite loss before it; (None, None) when every logged loss is finite."""
    bad = has_loss & ~np.isfinite(loss)
    if not bad.any():
        return None, None
    i = int(np.argmax(bad))
    before = np.flatnonzero(has_loss[:i] & np.isfinite(loss[:i]))
    last = (f"; the last finite loss was {loss[before[-1]]:.4g} at step {numbers[before[-1]]}"
            if before.size else "; no finite loss was logged before it")
    later = int(bad[i:].sum())
    return int(numbers[i]), (f"loss is {loss[i]} from step {numbers[i]} on ({later} step(s) "
                             f"with a NaN or infinite loss{last})")


LEVEL_CHANGING_FAMILIES = ("profiler", "restore", "restart")
"""Activities after which the steady state may settle at a new level."""


def shift_candidates(steps: StepTable[LogStep], events: Sequence[LogEvent],
                     lag: int = LOG_LAG_STEPS) -> list[int]:
    """The steps where the log says the level may change: the first step after each
    profiler window, restore or restart (by line order, with the log's ``lag``)."""
    numbers = steps.column("step")
    rows = [_row_after(numbers, a.last.anchor_step) + lag + 1 for a in activities(events)
            if a.family in LEVEL_CHANGING_FAMILIES]
    return [int(numbers[r]) for r in rows if 0 <= r < numbers.size]


def _level_shifts(steps: StepTable[LogStep], steady: np.ndarray,
                  events: Sequence[LogEvent], lag: int) -> tuple[LevelShift, ...]:
    numbers = steps.column("step")[steady]
    at = np.searchsorted(numbers, shift_candidates(steps, events, lag))
    found = level_shift.changes(steps.column("time_s")[steady], at.tolist())
    return tuple(LevelShift(int(numbers[c.index]), c.before_median, c.after_median, c.p_value)
                 for c in found)


def summarize(p: ParsedLog, source: str) -> ImportedRun:
    """An ``ImportedRun`` from what was read: anomalies and their causes, the steady state,
    its level shifts, the loss and the warnings."""
    own = p.own_time if p.own_time.size == len(p.steps) else None
    numbers = p.steps.column("step")  # sorted and unique
    timed = p.line_at.size == len(p.steps)
    lag = log_lag(numbers, p.steps.column("time_s"), p.line_at, own) if timed else None
    found, _ = explain_anomalies(p.steps, p.events, p.line_at, p.start_seen, own, lag)
    rows = np.searchsorted(numbers, [a.step for a in found])
    steps = p.steps.with_tags({int(r): (CAUSE_TAGS[a.cause],)
                               for r, a in zip(rows, found, strict=True)})
    times = steps.column("time_s")
    is_steady = np.ones(len(steps), dtype=bool)
    is_steady[rows] = False
    step_time = Distribution.of(times[is_steady])
    warnings = stats.quality_warnings(step_time.summary)
    shifts = _level_shifts(steps, is_steady, p.events, LOG_LAG_STEPS if lag is None else lag)
    warnings += [f"the steady state changed level at step {s.step}: median "
                 f"{s.before_median_s:.4g} s before, {s.after_median_s:.4g} s from it on"
                 for s in shifts]
    has_loss = p.has_loss if p.has_loss.size == len(steps) else ~np.isnan(
        steps.column("loss"))
    bad_from, bad_text = nonfinite_loss(numbers, steps.column("loss"), has_loss)
    if bad_text:
        warnings.append(bad_text)
    if p.duplicates:
        warnings.append(f"{p.duplicates} 'completed step' line(s) repeat a step already read "
                        "(several processes in one log, or a restart?); the first was kept")
    if p.unreadable_steps:
        warnings.append(f"{p.unreadable_steps} step line(s) had no readable 'seconds:' value "
                        "(or a profiler boundary step's hidden time) and were skipped")
    unexplained = [a.step for a in found if a.cause == CAUSE_UNEXPLAINED]
    if unexplained:
        warnings.append(f"{len(unexplained)} step(s) far from the steady state without a "
                        f"known cause: {', '.join(map(str, unexplained[:10]))}")
    return ImportedRun(
        source=source,
        env=p.env,
        config=p.config,
        steps=steps,
        step_time=step_time,
        mean_all_s=float(np.mean(times)),
        anomalies=tuple(found),
        events=tuple(p.events),
        params=p.params,
        total_tflops_per_step=p.total_tflops_per_step,
        memory=LogMemory(**p.memory),
        level_shifts=shifts,
        nonfinite_loss_from=bad_from,
        unreadable_lines=p.unreadable_steps,
        warnings=tuple(warnings),
        wall_time=_wall_time(p, numbers, lag) if timed else None,
        findings=tuple(periodic_stall_findings(steps)),
    )


def _wall_time(p: ParsedLog, numbers: np.ndarray, lag: int | None) -> WallTime | None:
    """Where the run's wall time went (``analysis.logs.wall_time``), by the steps' intervals and
    the stretches the log names."""
    start, end = step_intervals(numbers, p.steps.column("time_s"), p.line_at,
                                lag=LOG_LAG_STEPS if lag is None else lag)
    named = wall_time.named_stretches(p.events, background(p.events), activities(p.events))
    return wall_time.wall_time(numbers, start, end, p.first_at, p.last_at, named)
