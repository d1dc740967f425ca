"""MaxText training logs as pipecheck records (``pipecheck import``, kind ``imported``).

Only the lines that matter are read; everything else is ignored. Lines carry an absl
header (``I1122 10:23:54.123456 140234567 train.py:512] ...``: level, date, time, thread
id, source) or none (``print`` output), may have a prefix before it, and are interleaved
with lines of other threads and processes; so every pattern is searched for anywhere in a
line and nothing depends on two lines being adjacent, except ``Per train step:``, whose
``Total TFLOPs`` arrives on a later line. A checkpoint line without a header takes the
time of the last header before it; a bare step line, the time of the next one (the step
interval needs a time it was written by, not after).

The steady state is every logged step except the first (it includes compilation) and the
steps ``anomalies.flag_outliers`` finds far from the others (as for every run).
Each anomaly gets a likely cause by **timestamp overlap** with what ran in the background
(``explain_anomalies``): an orbax async checkpoint save in flight (from its ``Background
save thread started`` line to its ``Background save thread done. Time taken: Xs`` line, or
the ``done.`` line without a time older orbax versions write),
the training thread blocked on a save (orbax's ``Initiated Pytree async_save. Time taken:
Xs``, written when the save's blocking part, the copy of the state off the device, ends;
``Waiting for previous save to complete took X seconds``, ``Waited X seconds for step S to
finish before starting checkpointing``). Step intervals come from the step lines'
timestamps: MaxText writes step N's line one step late, after dispatching step N+1
(``LOG_LAG_STEPS``). Each anomaly's evidence is looked up
(``BackgroundLookup``: the saves and waits filed under the steps they can overlap), not
scanned for, so a run with thousands of stalls and saves costs its length.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import dataclasses
import datetime
import io
import math
import os
import pathlib
import re
from typing import Any, Callable, Iterable, Iterator, Sequence, TextIO

import numpy as np

from pipecheck import stats
from pipecheck.analysis import anomalies, intervals
from pipecheck.errors import LogFormatError
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.common import Distribution
from pipecheck.records.imported import Anomaly, ImportedRun, LogEvent, LogMemory, LogStep
from pipecheck.records.steps import StepTable, StepTableBuilder, column_of

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

# --- line patterns ---------------------------------------------------------------------
_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
GLOG_HEADER = re.compile(
    r"[IWEF](?P<month>\d{2})(?P<day>\d{2}) (?P<clock>(?P<h>\d{2}):(?P<m>\d{2}):"
    r"(?P<s>\d{2}(?:\.\d+)?))\s+(?P<thread>\d+)\s+[^\s:\]]+:\d+\]\s?")
_STEP = re.compile(r"completed step:\s*(\d+)\s*,(.*)")
_PARAMS = re.compile(rf"number parameters:\s*({_NUM})\s*billion")
_JAX = re.compile(r"System Information: Jax Version:\s*(\S+)")
_JAXLIB = re.compile(r"System Information: Jaxlib Version:\s*(\S+)")
_BACKEND = re.compile(r"System Information: Jax Backend:\s*(.*\S)")
_TOTAL_MEM = re.compile(rf"Total memory size:\s*({_NUM})\s*GB")
_OUTPUT_MEM = re.compile(rf"Output size:\s*({_NUM})\s*GB")
_TEMP_MEM = re.compile(rf"Temp size:\s*({_NUM})\s*GB")
_USING = re.compile(rf"Using \(GB\)\s*({_NUM})\s*/\s*({_NUM})")
_SAVE = re.compile(r"Saving checkpoint at step\s*(\d+)")
_SAVED = re.compile(r"Saved a checkpoint at step\s*(\d+)")
_ASYNC = re.compile(r"Started an asynchronous checkpoint save for step\s*(\d+)")
_BG_START = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Background save thread started")
_BG_DONE = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Background save thread done\."
    rf"(?: Time taken:\s*(?P<seconds>{_NUM})\s*s)?")
"""Orbax writes the thread's time on this line in recent versions, not in older ones."""
_BLOCKING_SAVE = re.compile(
    r"\[process=(?P<process>\d+)\]\[thread=(?P<thread>[^\]]+)\] Initiated Pytree async_save\."
    rf" Time taken:\s*(?P<seconds>{_NUM})\s*s")
"""Orbax's handler writes this on the calling (training) thread when the blocking part of
an async save ends (base_pytree_checkpoint_handler.py, ``async_save``): the state's arrays
are copied off the device and the background write is handed its futures. Orbax before
0.11.14 does not write it."""
_WAIT_PREV = re.compile(rf"Waiting for previous save to complete took\s*({_NUM})\s*seconds")
_WAIT_STEP = re.compile(
    rf"Waited\s*({_NUM})\s*seconds for step\s*(\d+)\s*to finish before starting checkpointing"
)
_PER_STEP = re.compile(r"Per train step:")
_TOTAL_TFLOPS = re.compile(rf"Total TFLOPs:\s*({_NUM})")
_CONFIG = re.compile(r"Config param\s+(\w+):\s*(.*?)\s*$")

_STEP_KEYS = {
    "seconds": "time_s",
    "TFLOP/s/device": "tflops_per_s_per_device",
    "Tokens/s/device": "tokens_per_s_per_device",
    "loss": "loss",
}














def _config_value(text: str) -> Any:
    if text in ("True", "False"):
        return text == "True"
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


def _parse_step(match: re.Match[str], line_no: int) -> dict[str, Any] | None:
    """The fields of one ``completed step:`` line, or None without a readable time."""
    fields: dict[str, Any] = {}
    metrics: dict[str, float] = {}
    for piece in match.group(2).split(","):
        key, sep, value = piece.partition(":")
        if not sep:
            continue
        try:
            num = float(value)  # float() itself ignores the blanks around the number
        except ValueError:
            continue
        key = key.strip()
        if not key:
            continue
        name = _STEP_KEYS.get(key)
        if name is None:
            metrics.setdefault(key, num)
        else:
            fields.setdefault(name, num)
    if "time_s" not in fields:
        return None
    fields.update(step=int(match.group(1)), metrics=metrics, line=line_no)
    return fields


PROGRESS_EVERY_LINES = 20000
"""Lines read between two progress updates: often enough for a smooth bar, rare enough to
cost nothing next to parsing them."""


@dataclasses.dataclass
class _Parsed:
    steps: StepTable[LogStep] = dataclasses.field(
        default_factory=lambda: StepTable.from_rows(LogStep, ()))
    events: list[LogEvent] = dataclasses.field(default_factory=list)
    env: dict[str, Any] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    params: float | None = None
    total_tflops_per_step: float | None = None
    memory: dict[str, float] = dataclasses.field(default_factory=dict)
    duplicates: int = 0
    unreadable_steps: int = 0
    line_at: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    """When each step's line was written at the latest, aligned with ``steps`` (seconds
    since the first timestamp; NaN: unknown): its header's time, or for a bare line the
    time of the next header."""


def _physical_lines(lines: Iterable[str]) -> Iterator[str]:
    """Split what a file iterator yields the way ``str.splitlines`` splits the whole text,
    so line numbers do not depend on whether the log was streamed or read at once."""
    for chunk in lines:
        yield from (chunk.splitlines() or [""])


def _day_and_seconds(m: re.Match[str]) -> tuple[int, float]:
    """An absl header's date (a day number) and time of day in seconds. The year is not
    logged: a run that crosses New Year's Eve is not supported."""
    day = datetime.date(2000, int(m["month"]), int(m["day"])).toordinal()
    return day, int(m["h"]) * 3600.0 + int(m["m"]) * 60.0 + float(m["s"])


def _event(kind: str, n: int, m: re.Match[str], at: float | None, clock: str | None,
           **fields: Any) -> LogEvent:
    return LogEvent(kind, n, m.group(0), at_s=at, clock=clock, **fields)


def _read_fact(p: _Parsed, line: str, pending: bool) -> bool:
    """One line that is not a step: a fact about the run (parameters, versions, memory,
    TFLOPs per step, config) into ``p``. ``pending``: a per-step TFLOPs header was seen and
    its total is still to come; returns the new value."""
    if m := _PARAMS.search(line):
        p.params = float(m.group(1)) * 1e9
    elif m := _JAX.search(line):
        p.env["jax"] = m.group(1)
    elif m := _JAXLIB.search(line):
        p.env["jaxlib"] = m.group(1)
    elif m := _BACKEND.search(line):
        p.env["backend"] = m.group(1).strip()
    elif m := _TOTAL_MEM.search(line):
        p.memory["compiled_total_gb"] = float(m.group(1))
        if mo := _OUTPUT_MEM.search(line):
            p.memory["compiled_output_gb"] = float(mo.group(1))
        if mt := _TEMP_MEM.search(line):
            p.memory["compiled_temp_gb"] = float(mt.group(1))
    elif m := _USING.search(line):
        used, limit = float(m.group(1)), float(m.group(2))
        if used >= p.memory.get("device_in_use_gb", -1.0):
            p.memory["device_in_use_gb"] = used
            p.memory["device_limit_gb"] = limit
    elif _PER_STEP.search(line):
        pending = True
        if mf := _TOTAL_TFLOPS.search(line):
            p.total_tflops_per_step = float(mf.group(1))
            pending = False
    elif pending and (m := _TOTAL_TFLOPS.search(line)):
        p.total_tflops_per_step = float(m.group(1))
        pending = False
    elif m := _CONFIG.search(line):
        p.config[m.group(1)] = _config_value(m.group(2))
    return pending


def _finish(p: _Parsed, builder: StepTableBuilder, line_at: array.array[float]) -> None:
    """The steps as columns, in step order (a log's lines can come out of order)."""
    steps = builder.build()
    p.line_at = np.frombuffer(line_at, dtype=np.float64).copy()
    numbers = steps.column("step")
    if numbers.size > 1 and np.any(numbers[1:] < numbers[:-1]):
        order = np.argsort(numbers, kind="stable")
        steps = steps.take(order)
        p.line_at = p.line_at[order]
    p.steps = steps


def parse_lines(lines: Iterable[str], progress: Callable[[int], None] | None = None) -> _Parsed:
    """Read the lines that matter; ignore the rest.

    One pass, one line in memory at a time: steps go straight into columns (a
    ``StepTableBuilder``), so a million-step log costs a few arrays, not a million
    objects. ``progress(chars)`` is called every ``PROGRESS_EVERY_LINES`` lines with the
    characters read since the last call."""
    p = _Parsed()
    builder = StepTableBuilder(LogStep)
    seen: set[int] = set()
    last_step: int | None = None
    per_step_pending = False
    chars = 0
    line_at = array.array("d")
    unstamped: list[int] = []  # rows of bare step lines waiting for the next header's time
    origin: tuple[int, float] | None = None
    at: float | None = None
    clock: str | None = None
    for n, raw in enumerate(_physical_lines(lines), start=1):
        if progress is not None:
            chars += len(raw) + 1
            if n % PROGRESS_EVERY_LINES == 0:
                progress(chars)
                chars = 0
        line = raw.rstrip("\r\n")
        h = GLOG_HEADER.search(line)
        if h:
            day, seconds = _day_and_seconds(h)
            origin = (day, seconds) if origin is None else origin
            # days and seconds apart, rounded to the microseconds the log prints
            at = round((day - origin[0]) * 86400.0 + (seconds - origin[1]), 6)
            clock = h["clock"]
            line = line[h.end():]
            for row in unstamped:  # bare step lines before this one: written by now
                line_at[row] = at
            unstamped = []
        m = _STEP.search(line)
        if m:
            step = _parse_step(m, n)
            if step is None:
                p.unreadable_steps += 1
            elif step["step"] in seen:
                p.duplicates += 1
            else:
                seen.add(step["step"])
                builder.append(**step)
                line_at.append(at if h and at is not None else math.nan)
                if not h:
                    unstamped.append(len(line_at) - 1)
                last_step = step["step"]
            continue
        if event := _checkpoint_event(line, n, at, clock, last_step):
            p.events.append(event)
        else:
            per_step_pending = _read_fact(p, line, per_step_pending)
    if progress is not None and chars:
        progress(chars)
    _finish(p, builder, line_at)
    return p


def _checkpoint_event(line: str, n: int, at: float | None, clock: str | None,
                      last_step: int | None) -> LogEvent | None:
    """The checkpoint event a line reports, if any."""
    for kind, pattern in (("checkpoint_save", _SAVE), ("checkpoint_saved", _SAVED),
                          ("checkpoint_async_start", _ASYNC)):
        if m := pattern.search(line):
            s = int(m.group(1))
            return _event(kind, n, m, at, clock, step=s, anchor_step=s)
    if m := _BG_START.search(line):
        return _event("async_save_started", n, m, at, clock, anchor_step=last_step)
    if m := _BG_DONE.search(line):
        return _event("async_save_done", n, m, at, clock,
                      seconds=float(m["seconds"]) if m["seconds"] else None,
                      anchor_step=last_step)
    if m := _BLOCKING_SAVE.search(line):
        return _event("async_save_blocking", n, m, at, clock, seconds=float(m["seconds"]),
                      anchor_step=last_step)
    if m := _WAIT_PREV.search(line):
        return _event("checkpoint_wait_previous", n, m, at, clock, seconds=float(m.group(1)),
                      anchor_step=last_step)
    if m := _WAIT_STEP.search(line):
        s = int(m.group(2))
        return _event("checkpoint_wait_step", n, m, at, clock, step=s,
                      seconds=float(m.group(1)), anchor_step=s)
    return None


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
    """
    n = len(numbers)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    cum = np.cumsum(seconds)
    row = np.searchsorted(numbers, numbers - lag)  # the row of step N - lag, if logged
    row = np.minimum(row, n - 1)
    has = numbers[row] == numbers - lag
    stamp = np.where(has & np.isfinite(line_at[row]), line_at[row], math.inf)
    offset = stamp - cum  # end_k - cum_k, delayed by the work after step k, never early
    padded = np.concatenate([np.full(window, math.inf), offset, np.full(window, math.inf)])
    best = np.lib.stride_tricks.sliding_window_view(padded, 2 * window + 1).min(axis=1)
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
    nearest_start = _NearestLine([e for e in timed if e.kind == "checkpoint_async_start"])
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


class _NearestLine:
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


def explain_anomalies(
    steps: Sequence[LogStep], events: Sequence[LogEvent],
    line_at: np.ndarray | None = None,
) -> tuple[list[Anomaly], float]:
    """The steps to keep out of the steady state, each with a likely cause.

    The first step is compilation. Of the others, ``anomalies.flag_outliers`` picks those
    far from the rest. A slow one that overlaps, by the log's timestamps, an async save in
    flight or the training thread blocked on a save is a checkpoint stall, with those lines
    as evidence (checkpoint lines without a time: within ``CHECKPOINT_STALL_WINDOW`` steps
    of theirs); a fast one right after a slow one is an attribution shift; anything else is
    unexplained. ``line_at``: when each step's line was written (``parse_lines``). Returns
    the anomalies (by step) and the steady-state median.
    """
    if not len(steps):
        return [], math.nan
    numbers = column_of(steps, "step")
    seconds = column_of(steps, "time_s")
    at = np.full(len(steps), math.nan) if line_at is None else line_at
    start, end = step_intervals(numbers, seconds, at)
    lookup = BackgroundLookup(background(events), start, end)
    untimed = sorted((e.anchor_step, k, e) for k, e in enumerate(events)
                     if e.kind in CHECKPOINT_EVENTS and e.at_s is None
                     and e.anchor_step is not None)
    anchors = [a for a, _, _ in untimed]

    def explain(i: int, median: float) -> tuple[str, str]:
        if i == 0:
            return (CAUSE_COMPILATION,
                    "first step logged: it includes tracing and compiling the train step")
        number = int(numbers[i])
        found = lookup.evidence(i)
        # untimed lines anchored at most CHECKPOINT_STALL_WINDOW steps before, in log order
        near = sorted(untimed[bisect.bisect_left(anchors, number - CHECKPOINT_STALL_WINDOW):
                              bisect.bisect_right(anchors, number)], key=lambda u: u[1])
        found += [f"line {e.line}: {e.text}" for _, _, e in near]
        if found:
            return CAUSE_CHECKPOINT, "; ".join(found[:3])
        return (CAUSE_UNEXPLAINED, "slow, and no checkpoint save was in flight or blocking "
                "during it by the log's timestamps")

    candidate = np.ones(len(steps), dtype=bool)
    candidate[0] = False
    return anomalies.label(numbers, seconds, candidate, np.zeros(len(steps), dtype=bool),
                           explain)


def import_lines(lines: Iterable[str], source: str,
                 progress: Callable[[int], None] | None = None) -> ImportedRun:
    """Parse a MaxText training log (any iterable of lines, e.g. an open file) into an
    ``ImportedRun``. ``progress`` as in ``parse_lines``."""
    p = parse_lines(lines, progress)
    if not len(p.steps):
        raise LogFormatError(
            f"{source} has no 'completed step: N, seconds: ...' lines; is it a MaxText "
            "training log?"
        )
    found, _ = explain_anomalies(p.steps, p.events, p.line_at)
    numbers = p.steps.column("step")  # sorted and unique
    rows = np.searchsorted(numbers, [a.step for a in found])
    steps = p.steps.with_tags({int(r): (CAUSE_TAGS[a.cause],)
                               for r, a in zip(rows, found, strict=True)})
    times = steps.column("time_s")
    is_steady = np.ones(len(steps), dtype=bool)
    is_steady[rows] = False
    steady = times[is_steady]
    step_time = Distribution.of(steady)
    warnings = stats.quality_warnings(step_time.summary)
    if p.duplicates:
        warnings.append(f"{p.duplicates} 'completed step' line(s) repeat a step already read "
                        "(several processes in one log, or a restart?); the first was kept")
    if p.unreadable_steps:
        warnings.append(f"{p.unreadable_steps} 'completed step' line(s) had no readable "
                        "'seconds:' value and were skipped")
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
        warnings=tuple(warnings),
    )


BINARY_PROBE_BYTES = 4096
"""A NUL byte among a file's first bytes marks it as binary, not a log or a JSON result."""


@contextlib.contextmanager
def open_text(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A log or result file opened for streaming text, or a one-line LogFormatError
    (missing, unreadable, binary). Undecodable bytes become U+FFFD."""
    p = pathlib.Path(path)
    try:
        f = open(p, "rb")  # noqa: SIM115 - closed below, after the binary check
    except FileNotFoundError:
        raise LogFormatError(f"{p} does not exist") from None
    except OSError as e:
        raise LogFormatError(f"cannot read {p}: {e.strerror or e.__class__.__name__}") from None
    with f:
        if b"\0" in f.peek(BINARY_PROBE_BYTES)[:BINARY_PROBE_BYTES]:
            raise LogFormatError(f"{p} is a binary file, not a training log or pipecheck result")
        with io.TextIOWrapper(f, encoding="utf-8", errors="replace", newline="") as text:
            yield text


def read_text(path: str | os.PathLike[str]) -> str:
    """A file's text, or a one-line LogFormatError."""
    with open_text(path) as f:
        return f.read()


def import_log(path: str | os.PathLike[str], progress: Progress = NO_PROGRESS) -> ImportedRun:
    """Read and parse a MaxText training log file, streaming it line by line."""
    size = _size(path)
    with open_text(path) as f, progress.task(f"reading {os.path.basename(str(path))}",
                                             size, "B") as task:
        return import_lines(f, source=str(path), progress=task.advance)


def _size(path: str | os.PathLike[str]) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
