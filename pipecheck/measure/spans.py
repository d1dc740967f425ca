"""Host spans and step intervals, recorded with an injected clock.

A step's time is the interval between two consecutive *marks*: clock readings
taken right after a step's loss was observed on the host (a lagged sync). Every
span (data wait, dispatch, sync, checkpoint, ...) and every instant tag
(compile, checkpoint, ...) is charged to the interval in which it ends, so the
spans of a step add up to (at most) its time and ``other`` is the rest.

The recorder folds each finished interval into a :class:`StepRecord` as soon
as its closing mark arrives, so raw spans never pile up. Memory stays bounded
on runs of any length: the first step and the most recent ``step_window``
StepRecords are kept, running totals (:class:`StepTotals`) cover every step,
and a bounded window of raw spans, marks and tags is kept for trace export.

Spans are also JAX profiler annotations (``TraceAnnotation``, and
``StepTraceAnnotation`` for a step's dispatch) while a profiler is capturing,
so an XProf capture lines up with pipecheck's steps; when none is, the cost is
one cheap check per span.
"""

from __future__ import annotations

import collections
import gc
import sys
import threading
import time
from typing import TYPE_CHECKING, Callable

from pipecheck.records.common import StepRecord
from pipecheck.records.events import Span, StepTotals

if TYPE_CHECKING:  # pragma: no cover
    import jax

DETACHED_KINDS = ("gc",)
"""Spans that interrupt whatever is running (a garbage collection): counted under their own
name at any depth, and taken out of the top-level span they interrupted."""

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


class SpanRecorder:
    """Records spans, instant tags and step marks; builds one StepRecord per interval."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        raw_window: int = RAW_SPAN_WINDOW,
        step_window: int = STEP_WINDOW,
        annotate: bool = True,
    ) -> None:
        if step_window < 1 or raw_window < 1:
            raise ValueError("step_window and raw_window must be >= 1")
        self.clock = clock
        self.annotate = annotate
        self.totals = StepTotals()
        self.first_step: StepRecord | None = None
        self.recent_steps: collections.deque[StepRecord] = collections.deque(maxlen=step_window)
        self.raw_spans: collections.deque[Span] = collections.deque(maxlen=raw_window)
        self.raw_marks: collections.deque[float] = collections.deque(maxlen=raw_window)
        self.raw_tags: collections.deque[tuple[str, float]] = collections.deque(maxlen=raw_window)
        self.marks_total = 0
        self.start_time: float | None = None
        self._last_mark: float | None = None
        self._pending_spans: list[Span] = []
        self._pending_tags: list[tuple[str, float]] = []
        self._depth = 0

    # -- reading ---------------------------------------------------------------
    @property
    def step_count(self) -> int:
        """Steps closed so far (all of them, kept or not)."""
        return self.totals.steps

    @property
    def steps(self) -> list[StepRecord]:
        """The kept StepRecords in order: the first step, then the most recent window."""
        out = list(self.recent_steps)
        if self.first_step is not None and (not out or out[0].step != 0):
            out.insert(0, self.first_step)
        return out

    @property
    def dropped_steps(self) -> int:
        """Steps closed but no longer kept as StepRecords (their totals are kept)."""
        return self.step_count - len(self.steps)

    @property
    def depth(self) -> int:
        """How many spans are open now."""
        return self._depth

    # -- recording -------------------------------------------------------------
    def start(self) -> float:
        """Open the first interval (before step 0 is fetched or dispatched)."""
        t = self.clock()
        self.start_time = t
        self._last_mark = t
        self.raw_marks.append(t)
        self.marks_total += 1
        return t

    def span(self, name: str, step_num: int | None = None) -> _SpanContext:
        """Time the body (``with recorder.span(name):``) as span ``name``; nested spans
        record their depth.

        While a JAX profiler captures, the body is also a ``TraceAnnotation(name)``, or a
        ``StepTraceAnnotation("train", step_num=...)`` when ``step_num`` is given.
        """
        return _SpanContext(self, name, step_num)

    def add_span(self, span: Span) -> None:
        """Record a span timed elsewhere (e.g. a garbage collection)."""
        self._pending_spans.append(span)
        self.raw_spans.append(span)

    def tag(self, name: str) -> None:
        """Tag the current interval (e.g. ``compile``, ``checkpoint``) at this instant."""
        item = (name, self.clock())
        self._pending_tags.append(item)
        self.raw_tags.append(item)

    def mark(self, loss: float | None = None) -> StepRecord:
        """Close the current interval: the loss of the step it belongs to was just observed."""
        if self._last_mark is None:
            raise RuntimeError("SpanRecorder.start() must be called before mark()")
        t = self.clock()
        spans, tags = self._pending_spans, self._pending_tags
        self._pending_spans = []
        self._pending_tags = []
        record = close_interval(self.step_count, self._last_mark, t, spans, tags, loss)
        if self.first_step is None:
            self.first_step = record
        self.recent_steps.append(record)
        self.totals.add(record)
        self._last_mark = t
        self.raw_marks.append(t)
        self.marks_total += 1
        return record


class _SpanContext:
    """One timed span (a class, not a generator: this runs several times per step)."""

    __slots__ = ("rec", "name", "step_num", "t0", "depth", "annotation")

    def __init__(self, rec: SpanRecorder, name: str, step_num: int | None) -> None:
        self.rec = rec
        self.name = name
        self.step_num = step_num
        self.annotation: jax.profiler.TraceAnnotation | None = None

    def __enter__(self) -> None:
        rec = self.rec
        if rec.annotate:
            prof = profiler()
            if prof is not None and prof.enabled():
                self.annotation = (
                    prof.annotation(self.name) if self.step_num is None else
                    prof.step_annotation(TRAIN_STEP_ANNOTATION, step_num=self.step_num))
                self.annotation.__enter__()
        self.depth = rec._depth
        rec._depth += 1
        self.t0 = rec.clock()

    def __exit__(self, *exc: object) -> None:
        rec = self.rec
        t1 = rec.clock()
        rec._depth = self.depth
        s = Span(self.name, self.t0, t1, self.depth)
        rec._pending_spans.append(s)
        rec.raw_spans.append(s)
        if self.annotation is not None:
            self.annotation.__exit__(None, None, None)
            self.annotation = None


def close_interval(
    step: int,
    start: float,
    end: float,
    spans: list[Span],
    tags: list[tuple[str, float]],
    loss: float | None,
) -> StepRecord:
    """Pure: one interval's StepRecord from the spans and tags that ended inside it.

    Only top-level spans (depth 0) are summed, so nested spans do not double count,
    except detached ones (``gc``): they count at any depth and are taken out of the
    top-level span they interrupted. A span that began before ``start`` is clipped
    to the interval.
    """
    totals: dict[str, float] = {}
    nested_detached: list[tuple[Span, float]] = []
    for s in spans:
        dur = max(0.0, min(s.end, end) - max(s.start, start))
        if s.name in DETACHED_KINDS:
            if s.depth != 0:
                nested_detached.append((s, dur))
        elif s.depth != 0:
            continue
        totals[s.name] = totals.get(s.name, 0.0) + dur
    for d, dur in nested_detached:
        for p in spans:
            if (p.depth == 0 and p.name not in DETACHED_KINDS
                    and p.start <= d.start and d.end <= p.end):
                totals[p.name] = max(0.0, totals[p.name] - dur)
                break
    seen: list[str] = []
    for name, _ in tags:
        if name not in seen:
            seen.append(name)
    time_s = end - start
    totals["other"] = max(0.0, time_s - sum(totals.values()))
    return StepRecord(step=step, time_s=time_s, tags=tuple(seen), spans=totals, loss=loss)


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

    def _callback(self, phase: str, info: dict[str, int]) -> None:
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
