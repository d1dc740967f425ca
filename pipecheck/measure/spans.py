"""Host spans and step intervals, recorded with an injected clock.

A step's time is the interval between two consecutive *marks*: clock readings
taken right after a step's loss was observed on the host (a lagged sync). Every
span (data wait, dispatch, sync, checkpoint, ...) and every instant tag
(compile, checkpoint, ...) is charged to the interval in which it ends, so the
spans of a step add up to (at most) its time and ``other`` is the rest.

Recording is cheap (it runs several times a step), with no object or dict per span or
step, and calls no Python function but a span's ``__exit__``. A span's start appends one
clock reading to a log; its end appends its clock reading to a list of ends and its name's
*end marker* (a tagged NaN holding the name's number, one float per name) to the log, so
the log holds starts and ends in the order they happened. A mark is one tuple. Nothing is
worked out while spans run: every ``READ_STEPS`` marks the logs are read into arrays
(their floats still in the CPU's cache), and every ``FOLD_STEPS`` marks, or when anything
reads the steps, they are folded at once (numpy over the whole batch) into each span's
start, end and depth
(``resolve_spans``, from the order in which spans started and ended, so ties of an
injected clock cannot confuse it) and per-step columns (a ``StepTable``:
``fold_intervals``). Memory stays bounded on runs of any length: the first step and the
most recent ``step_window`` steps are kept, running totals (:class:`StepTotals`) cover
every step, and a bounded window of raw spans, marks and tags is kept for trace export.
``snapshot`` hands out the kept steps as immutable arrays, which another thread may read
(``Monitor(save_to=...)``'s writer). Spans are timed on the loop's thread: they are
matched last started, first ended.

Spans are also JAX profiler annotations (``TraceAnnotation``, and
``StepTraceAnnotation`` for a step's dispatch) while a profiler is capturing, so an XProf
capture lines up with pipecheck's steps. Whether one captures is looked up once a step (at
its mark, and by the Monitor's ``batches`` and ``step``), not at each span: the names'
contexts are then made again, of the annotating kind, so a span costs nothing more when no
profiler captures, and a capture started in the middle of a step annotates the names'
spans from the next look on (a dispatch span with its ``step_num`` looks itself).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gc
import itertools
import math
import struct
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

import numpy as np

from pipecheck.measure.faults import Faults
from pipecheck.measure.span_fold import (
    end_marker,
    fold_intervals,
    read_log,
    resolve_spans,
    spans_by_step,
)
from pipecheck.records.common import StepRecord
from pipecheck.records.events import Span, StepTotals
from pipecheck.records.steps import StepTable, concat

if TYPE_CHECKING:  # pragma: no cover
    import jax

RAW_SPAN_WINDOW = 20_000
"""How many raw spans (and marks, and tags) are kept for trace export (the most recent)."""

STEP_WINDOW = 10_000
"""How many StepRecords are kept (the most recent, plus the first step); totals cover all."""

GC_TAG_MIN_S = 0.005
"""A garbage collection at least this long tags its step ``gc`` (and leaves the steady state)."""

GC_TAG_GENERATION = 2
"""A collection of this (the oldest) generation tags its step ``gc`` whatever its length."""

TRAIN_STEP_ANNOTATION = "train"
"""Name of the ``jax.profiler.StepTraceAnnotation`` around each step's dispatch."""


class _Profiler:
    """JAX's profiler annotations, looked up once; ``enabled()`` is true while capturing."""

    def __init__(self) -> None:
        # lazy: JAX imported where used, so `import pipecheck` stays light
        from jax._src.lib import _profiler
        from jax.profiler import StepTraceAnnotation, TraceAnnotation

        self.enabled: Callable[[], bool] = _profiler.TraceMe.is_enabled
        self.annotation = TraceAnnotation
        self.step_annotation = StepTraceAnnotation


_profiler: _Profiler | None = None


def profiler() -> _Profiler | None:
    """The profiler hooks, or None when JAX is not imported (then no capture can run)."""
    global _profiler
    if _profiler is None and "jax" in sys.modules:
        try:
            _profiler = _Profiler()
        except (ImportError, AttributeError):  # pragma: no cover - other jax versions
            return None
    return _profiler


def capturing() -> bool:
    """Whether a JAX profiler is capturing now (then spans are also annotations)."""
    prof = _profiler if _profiler is not None else profiler()
    return prof is not None and prof.enabled()


def _floats(values: list[float]) -> np.ndarray:
    """A list of numbers as a (read-only) float array: packed by ``struct`` (C doubles, bit
    for bit), twice as fast as ``np.fromiter`` on a list."""
    return np.frombuffer(struct.pack(f"{len(values)}d", *values), np.float64)


def _rows(items: Sequence[tuple[float, ...]], width: int) -> np.ndarray:
    """A list of equal-length tuples as a (len, width) float array."""
    flat = np.fromiter(itertools.chain.from_iterable(items), np.float64, len(items) * width)
    return flat.reshape(-1, width)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """The recorder's state at one moment, sharing its immutable arrays: what a record is
    built from, on the loop's thread or any other."""

    steps: StepTable[StepRecord]
    """The first step and the most recent ``step_window`` steps."""
    totals: StepTotals
    step_window: int
    marks: np.ndarray
    """The most recent marks (up to the raw window), the last one closing the last step."""
    marks_total: int

    @property
    def step_count(self) -> int:
        return self.totals.steps

    @property
    def dropped_steps(self) -> int:
        return self.step_count - len(self.steps)


class SpanRecorder:
    """Records spans, instant tags and step marks; folds them into per-step columns.

    Recording costs a few list appends (no object per span or step): span starts and
    ends, marks and tags go to flat logs, read into arrays every ``READ_STEPS`` marks; every
    ``FOLD_STEPS`` marks (or when read) they are folded at once into a ``StepTable`` of the
    steps they closed (``resolve_spans``, then ``close_interval``'s rule, vectorized;
    intervals with nested, detached or clipped spans go through ``close_interval`` itself)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        raw_window: int = RAW_SPAN_WINDOW,
        step_window: int = STEP_WINDOW,
        annotate: bool = True,
        faults: Faults | None = None,
    ) -> None:
        # the state is set in the same order as ever, in three parts (logs, contexts and
        # hooks, folded state), so an instance's attributes are laid out as before
        if step_window < 1 or raw_window < 1:
            raise ValueError("step_window and raw_window must be >= 1")
        self.clock = clock
        self.annotate = annotate
        self.step_window = step_window
        self.raw_window = raw_window
        self.start_time: float | None = None
        self._names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self._names_lock = threading.Lock()
        self.faults = faults if faults is not None else Faults()
        """Where faults of the recorder's own code go (reported once, never raised into the
        loop that logs)."""
        self.capturing: Callable[[], bool] = _never
        """Whether a profiler captures now (bound once, see ``_capture_check``)."""
        if annotate:
            self.capturing = _capture_check()
        self._set_up_logs()
        self._set_up_contexts_and_hooks(clock)
        self._set_up_folded_state(raw_window)

    def _set_up_logs(self) -> None:
        """The logs that recording appends to, and the loop's bound appends to them."""
        self._log: list[float] = []
        """The spans timed here not folded yet, and the open ones: starts' clock readings
        and ends' markers (``end_marker``), in the order they happened."""
        self._ends: list[float] = []
        """Each end's clock reading, appended just before its marker (floats, no tuple: a
        tuple per span would be tracked by the garbage collector)."""
        self._ended = np.zeros((0, 4))
        """Spans resolved by a fold that ended after its last mark (rows of name id, start,
        end, depth): the next step's first."""
        self._spans: list[tuple[float, float, float, float]] = []
        """Spans timed elsewhere (``add_span``: a garbage collection), not folded yet: a
        (name id, start, end, depth) tuple each (one append is atomic: a signal handler
        never sees half a span)."""
        self._marks: list[tuple[float, float, float, float]] = []
        """The marks not folded yet: (clock, loss or NaN, ``len(_spans)``, ``len(_ends)``)."""
        # the lists above live as long as the recorder: the loop and contexts hold appends
        self.log_start: Callable[[float], None] = self._log.append
        """Log a span's start at a clock reading: what a loop that times a span inline calls
        at its start (``log_start(clock())``; its end: ``end_logger``)."""
        self.take_mark = self.mark_taker()
        """``mark`` without its look for a capture (``mark_taker``)."""

    def _set_up_contexts_and_hooks(self, clock: Callable[[], float]) -> None:
        """The span names' contexts, whether they annotate, and the hooks on their change
        of kind and on each fold's new steps."""
        self.annotating = False
        """Whether the names' contexts are annotations (a profiler captured at the last
        look): read it, ``follow_capture`` sets it."""
        self.on_switch: list[Callable[[], None]] = []
        """Called when the names' contexts change kind (caches of them must be dropped)."""
        self.on_steps: list[Callable[[StepTable[StepRecord]], None]] = []
        """Called with each fold's new steps, in order, once each (on the thread that folds,
        a signal handler's included: a hook must only hand them on)."""
        self._fast_type = _fast_context_type(self.log_start, clock)
        self._contexts = _Contexts(self)
        """Each span name's context, made once per kind (``span``)."""

    def _set_up_folded_state(self, raw_window: int) -> None:
        """What folds keep: the tags to fold, the totals, the kept steps and the raw
        windows for trace export."""
        self._tags: list[tuple[str, float, int]] = []
        """(name, clock, marks before it): the tags not folded yet."""
        self.raw_tags: collections.deque[tuple[str, float]] = collections.deque(maxlen=raw_window)
        self._folded_marks = 0
        """Marks folded so far (the start mark included)."""
        self._last_folded_mark = math.nan
        self._totals = StepTotals()
        self._batches: list[StepTable[StepRecord]] = []
        self._kept_rows = 0
        self._first_step: StepTable[StepRecord] | None = None
        self._raw_spans: collections.deque[np.ndarray] = collections.deque()
        """The folded spans' rows, a fold's array each (the last ``raw_window``, and more)."""
        self._raw_span_rows = 0
        self._raw_marks = np.zeros(0)
        self._folding = False
        self._read = _ReadLogs()  # the logs read into arrays since the last fold

    # -- reading ---------------------------------------------------------------
    def name_id(self, name: str) -> int:
        """The number a span name is logged as (a new name gets the next one, whichever
        thread asks: a garbage collection's callback runs on the thread that allocated)."""
        i = self._name_ids.get(name)
        if i is None:
            with self._names_lock:
                i = self._name_ids.get(name)
                if i is None:
                    self._names.append(name)  # the number's name first: a fold may read it
                    i = self._name_ids[name] = len(self._names) - 1
        return i

    @property
    def folding(self) -> bool:
        """Whether the logs are being read or folded now (by the thread a signal handler
        interrupted, when one asks)."""
        return self._folding

    @property
    def marks_total(self) -> int:
        """Marks taken so far, the start included."""
        return self._folded_marks + self._read.mark_count + len(self._marks)

    @property
    def step_count(self) -> int:
        """Steps closed so far (all of them, kept or not)."""
        return max(0, self.marks_total - 1)

    @property
    def totals(self) -> StepTotals:
        self.fold()
        return self._totals

    @property
    def steps(self) -> StepTable[StepRecord]:
        """The kept steps in order: the first step, then the most recent window."""
        return self.snapshot().steps

    @property
    def first_step(self) -> StepRecord | None:
        self.fold()
        return None if self._first_step is None else self._first_step[0]

    @property
    def dropped_steps(self) -> int:
        """Steps closed but no longer kept as StepRecords (their totals are kept)."""
        return self.step_count - len(self.steps)

    @property
    def depth(self) -> int:
        """How many spans are open now."""
        read = self._read  # starts less ends
        return max(0, read.log_count + len(self._log) - 2 * (read.end_count + len(self._ends)))

    @property
    def raw_spans(self) -> list[Span]:
        """The most recent spans (up to ``raw_window``), for trace export."""
        self.fold()
        rows = np.concatenate([*self._raw_spans, self._unfolded_spans()])[-self.raw_window:]
        names = self._names
        return [Span(names[int(i)], s, e, int(d)) for i, s, e, d in rows.tolist()]

    @property
    def raw_marks(self) -> tuple[float, ...]:
        """The most recent marks (up to ``raw_window``), the start mark included."""
        self.fold()
        return tuple(self._raw_marks.tolist())

    def _unfolded_spans(self) -> np.ndarray:
        """The spans ended and not folded yet, resolved without changing the logs."""
        resolved, _ = resolve_spans(*read_log(
            np.concatenate([*self._read.log, _floats(self._log)]),
            np.concatenate([*self._read.ends, _floats(self._ends)])))
        rows = np.concatenate([self._ended, resolved, _rows(self._spans[:], 4)])
        return rows[np.argsort(rows[:, 2], kind="stable")]

    def snapshot(self, fold: bool = True) -> Snapshot:
        """The steps closed so far (folded first unless ``fold`` is False: then the steps of
        the log not folded yet are left out) and the totals, as immutable values."""
        if fold:
            self.fold()
        if self._batches:
            kept = concat(self._batches)
            if len(kept) > self.step_window:
                kept = kept[len(kept) - self.step_window:]
            if self._first_step is not None and kept.column("step")[0] != 0:
                kept = concat([self._first_step, kept])
        else:
            kept = StepTable.from_rows(StepRecord, [])
        return Snapshot(kept, self._totals.copy(), self.step_window, self._raw_marks,
                        self._folded_marks)

    # -- recording -------------------------------------------------------------
    def start(self) -> float:
        """Open the first interval (before step 0 is fetched or dispatched)."""
        self.look_for_capture()
        t = self.take_mark(math.nan)
        self.start_time = t
        return t

    def span(self, name: str, step_num: int | None = None) -> _SpanContext:
        """Time the body (``with recorder.span(name):``) as span ``name``; nested spans
        record their depth.

        While a JAX profiler captures (as last looked up, ``follow_capture``), the body is
        also a ``TraceAnnotation(name)``; with ``step_num`` it is a
        ``StepTraceAnnotation("train", step_num=...)`` whenever one captures.
        """
        if step_num is None:
            return self._contexts[name]
        return _AnnotatedSpan(self, name, step_num)

    def end_logger(self, name: str) -> Iterator[tuple[None, None]]:
        """What logs the end of a span ``name`` at each ``next``, by C calls alone: its
        context's, and a loop's that times it inline (``log_start(clock())`` at its
        start)."""
        return zip(map(self._ends.append, iter(self.clock, None)),
                   map(self._log.append, itertools.repeat(end_marker(self.name_id(name)))),
                   strict=False)  # zip pulls its iterators in order: the clock, then the marker

    def look_for_capture(self) -> None:
        """Make the names' spans annotations if a profiler captures now, plain if not
        (done at each mark; call it where a capture may have started since)."""
        if self.capturing() != self.annotating:
            self.follow_capture(not self.annotating)

    def follow_capture(self, capturing: bool) -> None:
        """Make the names' spans annotations from now on if ``capturing`` (a profiler
        captures), plain timings if not."""
        if capturing != self.annotating:
            self.annotating = capturing
            self._contexts.clear()
            for hook in self.on_switch:
                hook()

    def add_span(self, span: Span) -> None:
        """Record a span timed elsewhere (e.g. a garbage collection)."""
        self._spans.append((self.name_id(span.name), span.start, span.end, span.depth))

    def tag(self, name: str) -> None:
        """Tag the current interval (e.g. ``compile``, ``checkpoint``) at this instant."""
        t = self.clock()
        self._tags.append((name, t, self.marks_total))
        self.raw_tags.append((name, t))

    def mark(self, loss: float | None = None) -> None:
        """Close the current interval: the loss of the step it belongs to was just observed."""
        if self.start_time is None:
            raise RuntimeError("SpanRecorder.start() must be called before mark()")
        self.take_mark(math.nan if loss is None else loss)
        if self.capturing() != self.annotating:
            self.follow_capture(not self.annotating)  # look_for_capture, inline

    def mark_taker(self) -> Callable[[float], float]:
        """What closes the current interval as ``mark`` does, without looking for a capture
        (for a loop that looks once a step itself, as the Monitor does): ``take(loss)``
        (a float, NaN when the step has none) logs a mark and returns its clock reading.

        The one place a mark's layout is written. A closure over the logs (they live as
        long as the recorder), called once a step from a loop's hot path: its cell reads
        cost less than a method's attribute look-ups; a call of it costs ~30 ns more than the
        same lines written inline in the loop (timeit, least of 21 runs on 2 loaded cores)."""
        clock, marks, spans, ends = self.clock, self._marks, self._spans, self._ends
        append, read_logs = marks.append, self.read_logs

        def take(loss: float) -> float:
            now = clock()
            append((now, loss, len(spans), len(ends)))
            if len(marks) >= READ_STEPS:
                read_logs()  # nothing while a fold runs (a signal handler's)
            return now

        return take

    def read_logs(self) -> None:
        """Read the logs into arrays (every ``READ_STEPS`` marks), and fold them once
        ``FOLD_STEPS`` marks are read."""
        if self._folding:
            return
        self._folding = True
        try:
            self._read_logs()
        except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
            self._drop_unfolded(e)
        finally:
            self._folding = False
        if self._read.mark_count >= FOLD_STEPS:
            self.fold()

    def _read_logs(self) -> None:
        m, n, e = len(self._marks), len(self._log), len(self._ends)
        read = self._read
        marks = _rows(self._marks[:m], 4)
        marks[:, 3] += read.end_count  # the ends before each mark, since the last fold
        log, ends = _floats(self._log), _floats(self._ends)
        # no object the garbage collector tracks is made from here on (a collection's
        # callback reads ``depth``)
        read.marks.append(marks)
        read.log.append(log)
        read.ends.append(ends)
        read.mark_count += m
        del self._marks[:m]
        read.log_count += n
        del self._log[:n]
        read.end_count += e
        del self._ends[:e]

    def fold(self) -> None:
        """Fold the closed intervals of the log into steps (see the class docstring)."""
        if self._folding:
            return
        self._folding = True
        try:
            self._fold()
        except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
            self._drop_unfolded(e)
        finally:
            self._folding = False

    def _drop_unfolded(self, exc: Exception) -> None:
        """After a read or a fold of the logs failed (``exc``): the steps they held are
        dropped (reported once, counted in the record's warnings) and recording goes on from
        their last mark, the steps after them numbered as ever."""
        read = self._read
        pending = _rows(self._marks[:], 4)
        marks = [m for m in (*read.marks, pending) if len(m)]
        lost = read.mark_count + len(pending)
        first = math.isnan(self._last_folded_mark)
        if lost:
            self._last_folded_mark = max(float(m[-1, 0]) for m in marks)
        steps_lost = max(0, lost - (1 if first else 0))  # the start mark closes no step
        after = max(0, self._folded_marks - 1)
        self._folded_marks += lost
        read.marks.clear()
        read.log, read.ends = [], []
        read.mark_count = read.log_count = read.end_count = 0
        del self._marks[:len(pending)]
        del self._log[:]
        del self._ends[:]
        del self._spans[:]
        self._ended = np.zeros((0, 4))
        self._tags = [t for t in self._tags if t[2] >= self._folded_marks]
        self.faults.report(
            "the Monitor's step recorder", exc,
            f"{steps_lost} steps from step {after} on are left out of the record (its "
            "totals too); the steps after them are recorded")

    def _fold(self) -> None:
        self._read_logs()
        if not self._read.mark_count:
            return
        marks = np.concatenate(self._read.marks)
        new_marks = marks[:, 0]
        first = math.isnan(self._last_folded_mark)
        start = float(marks[0, 0]) if first else self._last_folded_mark
        if first:  # the start mark opens the first interval
            marks = marks[1:]
        folded = 1 if first else self._folded_marks
        before = len(self._ended)  # they ended before every mark of this fold
        ended = np.concatenate([self._ended, self._take_ended()])
        timed = before + marks[:, 3].astype(np.int64)  # spans timed here before each mark
        cut_timed = int(timed[-1]) if len(marks) else 0
        cut = int(marks[-1, 2]) if len(marks) else 0  # the spans timed elsewhere
        spans, marks = spans_by_step(marks, ended[:cut_timed], timed, _rows(self._spans[:cut], 4))
        names = tuple(self._names)  # every name logged so far; another thread may add one
        table = fold_intervals(folded - 1, start, marks, spans, self._tags[:], names) \
            if len(marks) else None
        # commit: spans a gc callback logged meanwhile are at the end, after the cut
        self._ended = ended[cut_timed:]
        del self._spans[:cut]
        self._read.marks.clear()
        self._read.mark_count = 0
        self._folded_marks = folded + len(marks)
        self._last_folded_mark = float(marks[-1, 0]) if len(marks) else start
        self._tags = [t for t in self._tags if t[2] >= self._folded_marks]
        if table is not None:
            self._add_steps(table)
            self._keep_raw_spans(spans)
        self._raw_marks = np.concatenate([self._raw_marks, new_marks])[-self.raw_window:]

    def _take_ended(self) -> np.ndarray:
        """Every span timed here that ended (in the logs read), resolved (``resolve_spans``)
        and taken out of them; the open ones' starts stay, and an end whose marker is not
        logged yet (a signal handler folds)."""
        read = self._read
        ends = np.concatenate(read.ends)
        enters, exits = read_log(np.concatenate(read.log), ends)
        rows, still_open = resolve_spans(enters, exits)
        starts, ends = enters[still_open], ends[len(exits):]
        read.log, read.ends = [starts], [ends]
        # the counts one right after the other, with nothing allocated between them: a
        # garbage collection's callback reads ``depth``
        read.log_count, read.end_count = len(starts), len(ends)
        return rows

    def _keep_raw_spans(self, spans: np.ndarray) -> None:
        kept = self._raw_spans
        kept.append(spans)
        self._raw_span_rows += len(spans)
        while self._raw_span_rows - len(kept[0]) >= self.raw_window:
            self._raw_span_rows -= len(kept.popleft())

    def _add_steps(self, table: StepTable[StepRecord]) -> None:
        for hook in self.on_steps:
            try:
                hook(table)
            except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
                self.faults.report(
                    f"a step hook ({getattr(hook, '__qualname__', type(hook).__name__)})", e,
                    "the hook misses the steps it failed on; the record keeps them")
        if self._first_step is None:
            self._first_step = table[:1]
        self._totals.add_table(table)
        if self._batches and len(self._batches[-1]) < FOLD_STEPS:
            # a small fold (a snapshot taken soon after the last): kept with the one before,
            # so a window is always a few tables, however often it is read
            self._batches[-1] = concat([self._batches[-1], table])
        else:
            self._batches.append(table)
        self._kept_rows += len(table)
        while self._kept_rows - len(self._batches[0]) >= self.step_window:
            self._kept_rows -= len(self._batches.pop(0))


FOLD_STEPS = 2048
"""Marks read before the logs are folded into steps: the fold's numpy work is shared by that
many steps."""

READ_STEPS = 256
"""Marks logged before the logs are read into arrays: the floats just logged are then still
in the CPU's cache (read by a fold 2,048 steps later, they cost twice as much), and the
lists stay small (~100 KB)."""


@dataclasses.dataclass
class _ReadLogs:
    """The logs read into arrays since the last fold: a read's array each, and how many
    entries they hold."""

    marks: list[np.ndarray] = dataclasses.field(default_factory=list)
    """(clock, loss or NaN, spans timed elsewhere before it, ends read before it) rows."""
    log: list[np.ndarray] = dataclasses.field(default_factory=list)
    ends: list[np.ndarray] = dataclasses.field(default_factory=list)
    mark_count: int = 0
    log_count: int = 0
    end_count: int = 0


_never: Callable[[], bool] = bool
"""``SpanRecorder(annotate=False)``'s capture check: ``bool()`` is False, and a call to it
costs less than one to a Python function."""


def _capture_check() -> Callable[[], bool]:
    """What tells whether a profiler captures now: JAX's own check (a C call) when JAX is
    imported, else ``capturing`` (which looks again, for JAX imported later)."""
    prof = _profiler if _profiler is not None else profiler()
    return prof.enabled if prof is not None else capturing


class _Contexts(dict[str, "_SpanContext"]):
    """Each span name's context, made on the name's first span (and again when the names'
    contexts change kind, ``follow_capture``)."""

    def __init__(self, rec: SpanRecorder) -> None:
        super().__init__()
        self.rec = rec

    def __missing__(self, name: str) -> _SpanContext:
        rec = self.rec
        ctx = self[name] = (_AnnotatedSpan(rec, name) if rec.annotating
                            else rec._fast_type(rec, name))
        return ctx


class _SpanContext:
    """A span name's context manager, made once and entered for each of its spans. Its end
    appends its clock reading to the recorder's ``_ends``, then the name's end marker to its
    ``_log``, by C calls alone (``ends``: ``SpanRecorder.end_logger``); its start is its
    subclass's."""

    __slots__ = ("name", "clock", "log", "ends", "capturing")

    def __init__(self, rec: SpanRecorder, name: str) -> None:
        self.name = name
        self.clock = rec.clock
        self.log = rec.log_start
        self.ends = rec.end_logger(name)
        self.capturing = rec.capturing

    def __enter__(self) -> None:  # pragma: no cover - each subclass has its own
        raise NotImplementedError

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        next(self.ends)


def _fast_context_type(enter: Callable[[float], None],
                       clock: Callable[[], float]) -> type[_SpanContext]:
    """The context type of one recorder's names while no profiler captures: its
    ``__enter__`` appends a clock reading to the recorder's starts by C calls alone
    (``next`` of a ``map`` of ``append`` over ``iter(clock, None)``; a ``partial`` in a
    class is called without the instance), so a span costs one Python call, its exit."""
    starts = map(enter, iter(clock, None))
    return type("_FastSpan", (_SpanContext,),
                {"__slots__": (), "__enter__": functools.partial(next, starts),
                 "__doc__": "A span name's context while no profiler captures."})


class _AnnotatedSpan(_SpanContext):
    """A span name's context while a profiler captures (and each dispatch span with a
    ``step_num``): its body is also a ``TraceAnnotation`` (``StepTraceAnnotation``) if
    one captures when it starts."""

    __slots__ = ("step_num", "annotations")

    def __init__(self, rec: SpanRecorder, name: str, step_num: int | None = None) -> None:
        super().__init__(rec, name)
        self.step_num = step_num
        self.annotations: list[jax.profiler.TraceAnnotation | None] = []
        """The open spans' annotations, innermost last (None: none was entered)."""

    def __enter__(self) -> None:
        annotation = None
        prof = profiler() if self.capturing() else None
        if prof is not None:
            annotation = (
                prof.annotation(self.name) if self.step_num is None else
                prof.step_annotation(TRAIN_STEP_ANNOTATION, step_num=self.step_num))
            annotation.__enter__()
        self.annotations.append(annotation)
        self.log(self.clock())

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        next(self.ends)
        annotation = self.annotations.pop()
        if annotation is not None:
            annotation.__exit__(None, None, None)


class GcSpans:
    """Context manager: every garbage collection becomes a ``gc`` span of ``recorder``.

    Uses ``gc.callbacks`` (start/stop). A collection stops the whole interpreter, so it is
    recorded whichever thread triggered it, nested in whatever the main thread was doing.
    Only collections that matter tag their step ``gc`` (generation ``GC_TAG_GENERATION``,
    or at least ``tag_min_s`` long), so frequent young-generation collections do not empty
    the steady state.
    """

    def __init__(self, recorder: SpanRecorder, tag_min_s: float = GC_TAG_MIN_S) -> None:
        self.recorder = recorder
        self.tag_min_s = tag_min_s
        self.collections = 0
        self._start = 0.0
        self._depth = 0
        self._lock = threading.Lock()
        recorder.name_id("gc")  # numbered now: a collection's callback adds no name

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        try:
            self._record(phase, info)
        except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
            self.recorder.faults.report("the garbage-collection callback", e,
                                        "collections from then on may be missing as gc spans")

    def _record(self, phase: str, info: dict[str, int]) -> None:
        rec = self.recorder
        if phase == "start":
            self._depth = rec.depth
            self._start = rec.clock()
            return
        end = rec.clock()
        if rec.start_time is None or end <= rec.start_time:
            return  # before the first interval opened: no step to charge it to
        start = max(self._start, rec.start_time)
        with self._lock:
            self.collections += 1
            rec.add_span(Span("gc", start, end, self._depth))
            if info.get("generation") == GC_TAG_GENERATION or end - start >= self.tag_min_s:
                rec.tag("gc")

    def __enter__(self) -> GcSpans:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
