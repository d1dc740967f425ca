"""Host spans and step intervals, recorded with an injected clock.

A step's time is the interval between two consecutive *marks*: clock readings
taken right after a step's loss was observed on the host (a lagged sync). Every
span (data wait, dispatch, sync, checkpoint, ...) and every instant tag
(compile, checkpoint, ...) is charged to the interval in which it ends, so the
spans of a step add up to (at most) its time and ``other`` is the rest.

The recorder folds each finished interval into a :class:`StepRecord` as soon
as its closing mark arrives, so raw spans never pile up; a bounded window of
raw spans is kept for trace export.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from typing import Callable, Iterator

from pipecheck.results import StepRecord

SPAN_KINDS = ("data_wait", "device_put", "dispatch", "sync", "checkpoint", "eval", "gc", "log")
"""The span names pipecheck itself records; users may add their own."""

RAW_SPAN_WINDOW = 20_000
"""How many raw spans are kept for trace export (the most recent ones)."""


@dataclasses.dataclass(frozen=True)
class Span:
    name: str
    start: float
    end: float
    depth: int = 0

    @property
    def duration(self) -> float:
        return self.end - self.start


class SpanRecorder:
    """Records spans, instant tags and step marks; builds one StepRecord per interval."""

    def __init__(
        self,
        clock: Callable[[], float] = time.perf_counter,
        raw_window: int = RAW_SPAN_WINDOW,
    ) -> None:
        self.clock = clock
        self.steps: list[StepRecord] = []
        self.raw_spans: collections.deque[Span] = collections.deque(maxlen=raw_window)
        self.raw_marks: collections.deque[float] = collections.deque(maxlen=raw_window)
        self.start_time: float | None = None
        self._last_mark: float | None = None
        self._pending_spans: list[Span] = []
        self._pending_tags: list[tuple[str, float]] = []
        self._depth = 0

    # -- recording -------------------------------------------------------------
    def start(self) -> float:
        """Open the first interval (before step 0 is fetched or dispatched)."""
        t = self.clock()
        self.start_time = t
        self._last_mark = t
        self.raw_marks.append(t)
        return t

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        """Time the body as span ``name``; nested spans record their depth."""
        depth = self._depth
        self._depth += 1
        t0 = self.clock()
        try:
            yield
        finally:
            t1 = self.clock()
            self._depth = depth
            s = Span(name, t0, t1, depth)
            self._pending_spans.append(s)
            self.raw_spans.append(s)

    def tag(self, name: str) -> None:
        """Tag the current interval (e.g. ``compile``, ``checkpoint``) at this instant."""
        self._pending_tags.append((name, self.clock()))

    def mark(self, loss: float | None = None) -> StepRecord:
        """Close the current interval: the loss of the step it belongs to was just observed."""
        if self._last_mark is None:
            raise RuntimeError("SpanRecorder.start() must be called before mark()")
        t = self.clock()
        record = close_interval(
            len(self.steps), self._last_mark, t, self._pending_spans, self._pending_tags, loss
        )
        self.steps.append(record)
        self._pending_spans = []
        self._pending_tags = []
        self._last_mark = t
        self.raw_marks.append(t)
        return record


def close_interval(
    step: int,
    start: float,
    end: float,
    spans: list[Span],
    tags: list[tuple[str, float]],
    loss: float | None,
) -> StepRecord:
    """Pure: one interval's StepRecord from the spans and tags that ended inside it.

    Only top-level spans (depth 0) are summed, so nested spans do not double count.
    A span that began before ``start`` is clipped to the interval.
    """
    totals: dict[str, float] = {}
    for s in spans:
        if s.depth != 0:
            continue
        dur = max(0.0, min(s.end, end) - max(s.start, start))
        totals[s.name] = totals.get(s.name, 0.0) + dur
    seen: list[str] = []
    for name, _ in tags:
        if name not in seen:
            seen.append(name)
    time_s = end - start
    totals["other"] = max(0.0, time_s - sum(totals.values()))
    return StepRecord(step=step, time_s=time_s, tags=tuple(seen), spans=totals, loss=loss)
