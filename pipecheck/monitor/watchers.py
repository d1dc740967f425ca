"""What watches a Monitor's loop while it runs: garbage collections as ``gc`` spans,
compilations (``CompileWatcher``), and the sync locator on the loop's thread; and the state a
record is built from, captured from them and the recorder at one moment."""

from __future__ import annotations

import contextlib
from typing import Callable, Sequence

from pipecheck.measure.compile_watch import CompileWatcher
from pipecheck.measure.spans import GcSpans, SpanRecorder
from pipecheck.measure.sync_locator import FrameInfo, SyncLocator
from pipecheck.monitor.result import RunState
from pipecheck.records.events import CompileEvent


class LoopSyncLocator(SyncLocator):
    """The sync locator, also counting user syncs made while no span was open (those are
    the time the breakdown moves from ``other`` to ``sync stall``), in all and by the step
    they were sampled in (on the locator's thread: the loop pays nothing for it)."""

    def __init__(self, recorder: SpanRecorder, interval_s: float, clock: Callable[[], float]):
        super().__init__(interval_s=interval_s, clock=clock, faults=recorder.faults)
        self.recorder = recorder
        self.outside_spans_s = 0.0
        self.outside_by_step: dict[int, float] = {}
        """Seconds of ``outside_spans_s`` by step (step k: from mark k to mark k + 1)."""

    def record(self, stack: Sequence[FrameInfo], dt: float) -> tuple[FrameInfo, bool] | None:
        depth = self.recorder.depth
        step = self.recorder.marks_total - 1
        found = super().record(stack, dt)
        if found is not None and not found[1] and depth == 0:
            self.outside_spans_s += dt
            if step >= 0:
                self.outside_by_step[step] = self.outside_by_step.get(step, 0.0) + dt
        return found


class Watchers:
    """The watchers a Monitor was asked for (``watch_gc``, ``watch_compiles``,
    ``locate_syncs``), started together and stopped together (``close``)."""

    def __init__(self, recorder: SpanRecorder, clock: Callable[[], float], *, gc: bool,
                 compiles: bool, locate: bool, interval_s: float) -> None:
        self.recorder = recorder
        self.clock = clock
        self._gc, self._compiles, self._locate, self._interval_s = gc, compiles, locate, interval_s
        self.compiles: CompileWatcher | None = None
        """The compile watcher, once started (when asked for)."""
        self.locator: LoopSyncLocator | None = None
        """The sync locator, once started (when asked for)."""
        self._stack = contextlib.ExitStack()

    def start(self) -> None:
        """Start the watchers asked for; one that cannot start is reported (``faults``) and
        the run goes on without it."""
        faults = self.recorder.faults
        if self._gc:
            try:
                self._stack.enter_context(GcSpans(self.recorder))
            except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
                faults.report("the garbage-collection watcher", e, "collections are not timed")
        if self._compiles:
            # every function's compilations, from the start: a slow step is explained by
            # whatever compiled in it (an eager generation's small functions included)
            try:
                self.compiles = self._stack.enter_context(
                    CompileWatcher(None, self.clock, faults))
            except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
                faults.report("the compilation watcher", e, "compilations are not watched")
        if self._locate:
            try:
                locator = LoopSyncLocator(self.recorder, self._interval_s, self.clock)
                self._stack.enter_context(locator)
                self.locator = locator
            except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
                faults.report("the sync locator", e, "forced syncs are not located")

    def close(self) -> None:
        """Stop every watcher started (again: nothing)."""
        self._stack.close()

    def compile_events(self) -> list[CompileEvent]:
        """Every compilation seen, the step function's first."""
        watcher = self.compiles
        return [*watcher.events, *watcher.other_events] if watcher is not None else []

    def capture(self, fold: bool = True) -> RunState:
        """The state a record is built from, now (on the loop's thread; ``fold``: the
        recorder's ``snapshot``'s)."""
        locator, watcher = self.locator, self.compiles
        watched = watcher is not None and watcher.name is not None
        return RunState(
            snapshot=self.recorder.snapshot(fold),
            sites=tuple(locator.sites()) if locator is not None else (),
            outside_spans_s=locator.outside_spans_s if locator is not None else 0.0,
            outside_by_step=dict(locator.outside_by_step) if locator is not None else {},
            located=locator is not None,
            compile_events=tuple(self.compile_events()),
            watched=watcher.name if watched and watcher is not None else None,
            compile_s=watcher.compile_s if watcher is not None else 0.0,
            train_step_compiles=watcher.compiles if watcher is not None else 0,
            compile_findings=tuple(watcher.findings()) if watched and watcher else (),
            faults=self.recorder.faults.messages,
        )
