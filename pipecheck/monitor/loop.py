"""The Monitor: the loop API (``batches``, ``step``, ``span``, ``tag``, ``finish``, ``save``,
``report``), and the hot path of each step, inline.

``step`` dispatches the step, *then* waits for the **previous** step's loss and closes the
previous step's interval: it never waits for the step it has just dispatched, so the
device always has work queued and the measurement does not slow the loop. Whatever the
loop does after ``step`` returns (a checkpoint, an eval, logging) is charged to the step
just dispatched: the previous step's metrics are flushed before it, so a checkpoint's
blocking device-to-host copy shows up on the step that checkpointed, not on its
neighbour. The loop's own spans (``data_wait``, ``dispatch``, ``sync``) and each step's
mark are logged inline, by the recorder's own loggers (``SpanRecorder.log_start``,
``end_logger``, ``take_mark``), not as ``with`` blocks: this runs every step, and
``benchmarks/monitor_overhead.py`` measures what it costs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from types import TracebackType
from typing import Callable, Iterable, Iterator, Mapping, ParamSpec, TypeVar, cast

from pipecheck.errors import MonitorError
from pipecheck.measure.compile_watch import CompileWatcher
from pipecheck.measure.faults import describe
from pipecheck.measure.loop import read_scalar
from pipecheck.measure.profile_window import DEFAULT_PROFILE_DIR, ProfileWindow
from pipecheck.measure.spans import STEP_WINDOW, SpanRecorder, capturing, profiler
from pipecheck.measure.sync_locator import DEFAULT_INTERVAL_S
from pipecheck.monitor.gather import Hosts, own_path, write_gathered
from pipecheck.monitor.loss import default_loss, function_name
from pipecheck.monitor.result import RunState, build_result, encode_result
from pipecheck.monitor.run_saver import (
    RUNNING_MESSAGE,
    SAVE_EVERY_S,
    PeriodicWriter,
    RunKeeper,
    StateAndEnd,
    check_save_to,
)
from pipecheck.monitor.tensorboard import TENSORBOARD_EVERY_S, ScalarWriter, wall_start_of
from pipecheck.monitor.user_spans import MonitorSpans
from pipecheck.monitor.watchers import Watchers
from pipecheck.records.common import LoaderStart
from pipecheck.records.env import collect_env
from pipecheck.records.monitor import MonitorResult, RunEnd
from pipecheck.records.steps import ChunkEncoder
from pipecheck.report.hosts import format_hosts
from pipecheck.report.monitor import format_monitor
from pipecheck.report.trace import write_recorder_trace
from pipecheck.step_types import PyTree

P = ParamSpec("P")
R = TypeVar("R")
B = TypeVar("B")


def config_dict(config: object) -> dict[str, object]:
    """``Monitor(config=...)`` as the record stores it: a mapping, or a ``RunConfig``."""
    if config is None:
        return {}
    if hasattr(config, "to_dict"):
        return dict(config.to_dict())
    if isinstance(config, Mapping):
        return dict(config)
    raise MonitorError(f"Monitor(config=...) takes a mapping, got {type(config).__name__}")


class Monitor:
    """Time a training loop you wrote: data wait, dispatch, lagged sync, your spans.

    Parameters
    ----------
    config:
        Anything describing the run (stored in the record as ``config``): a mapping, or a
        pipecheck ``RunConfig``.
    loss:
        Picks the loss out of the step function's output (default: ``default_loss``).
    locate_syncs:
        Run the sync locator on the loop's thread (default on).
    sync_interval_s:
        The sync locator's sampling period.
    watch_compiles:
        Count and time compilations of the step function (``jax.monitoring``).
    watch_gc:
        Record garbage collections as ``gc`` spans (``gc.callbacks``).
    step_window:
        StepRecords kept in memory and in the record (plus the first step); the breakdown
        and totals cover every step.
    save_to, save_every_s, force:
        Keep the record on disk while the run goes (see docs/monitor.md): written to
        ``save_to`` atomically every ``save_every_s`` seconds by a helper thread, and at the
        end; a run that ends early (an exception, SIGTERM, SIGINT) writes it marked
        ``incomplete``. ``force`` lets it replace an existing file. In a multi-process run
        each process writes ``save_to`` with ``.process-I`` before the extension, and
        process 0 writes ``save_to`` with every host at the end.
    clock, read_loss, env:
        Injectable for tests: the clock, the lagged sync (``float``), and the environment
        stored in the record (default: collected from JAX at ``finish``).
    tensorboard_dir, tensorboard_every_s:
        Write each step's time, data wait, sync wait and dispatch as TensorBoard scalars
        (``pipecheck/step_time_s``, ...) to an event file in ``tensorboard_dir``, by a
        helper thread; the steps reach the file at least every ``tensorboard_every_s``
        seconds (needs tensorboardX: ``pip install 'pipecheck[tensorboard]'``).
    profile_steps, profile_dir:
        Capture steps ``profile_steps`` (a ``range(a, b)``) with ``jax.profiler`` into
        ``profile_dir``, for ``pipecheck profile`` (see docs/profile.md).
    gather, distributed_timeout_s, json_per_host:
        In a script that called ``jax.distributed.initialize`` (one process per host),
        ``finish`` gathers every process's bounded summary to process 0 (``gather=True``),
        waiting at most ``distributed_timeout_s`` for the others; see docs/multihost.md.
    """

    def __init__(
        self,
        config: object = None,
        *,
        loss: Callable[[PyTree], PyTree] = default_loss,
        locate_syncs: bool = True,
        sync_interval_s: float = DEFAULT_INTERVAL_S,
        watch_compiles: bool = True,
        watch_gc: bool = True,
        annotate: bool = True,
        step_window: int = STEP_WINDOW,
        save_to: str | None = None,
        save_every_s: float = SAVE_EVERY_S,
        force: bool = False,
        clock: Callable[[], float] = time.perf_counter,
        read_loss: Callable[[PyTree], float] = read_scalar,
        env: Mapping[str, object] | None = None,
        gather: bool = True,
        distributed_timeout_s: float = 120.0,
        json_per_host: bool = False,
        profile_steps: range | None = None,
        profile_dir: str = DEFAULT_PROFILE_DIR,
        tensorboard_dir: str | None = None,
        tensorboard_every_s: float = TENSORBOARD_EVERY_S,
    ) -> None:
        self.config = config_dict(config)  # JSON-shaped: written into the record
        if save_to is not None:
            check_save_to(save_to, save_every_s, force)  # before the run, not at its end
        self.recorder = SpanRecorder(clock, step_window=step_window, annotate=annotate)
        self.clock = clock
        self._loss, self._read_loss, self._env, self._annotate = loss, read_loss, env, annotate
        self._watchers = Watchers(self.recorder, clock, gc=watch_gc, compiles=watch_compiles,
                                  locate=locate_syncs, interval_s=sync_interval_s)
        self._hosts = Hosts(gather, distributed_timeout_s, json_per_host)
        self._save_to, self._save_every_s = save_to, save_every_s
        self._scalars = (ScalarWriter(tensorboard_dir, tensorboard_every_s)
                         if tensorboard_dir is not None else None)
        """The TensorBoard event file's writer (``tensorboard_dir``), before the run: the
        install hint and a bad directory are errors now, not at the first fold."""
        self._keeper: RunKeeper | None = None
        self._encoder = ChunkEncoder()
        """Shared by every write of the run: only the steps' columns new since the last
        are compressed."""
        self._profile = (ProfileWindow(profile_steps, profile_dir, self.recorder.faults)
                         if profile_steps is not None else None)
        self._span_contexts = MonitorSpans(self.recorder, self.start)
        self.span = self._span_contexts.__getitem__  # type: ignore[method-assign,assignment]
        self._set_up_loop()

    def _set_up_loop(self) -> None:
        """The state the loop's hot path reads, each piece an attribute of its own."""
        self._started = False
        self._result: MonitorResult | None = None
        self._end: RunEnd | None = None
        self._watcher: CompileWatcher | None = None
        """The compile watcher, once started (``step`` reads it every step)."""
        self._saver: PeriodicWriter[MonitorResult | StateAndEnd, MonitorResult] | None = None
        """The keeper's writer while the record is kept on disk."""
        self._due_at = math.inf
        """The clock reading from which ``_periodic`` is due (``step`` reads it at each mark):
        the saver's next write or the event file's next fold, whichever comes first."""
        self._pending: PyTree = None
        self._has_pending = False
        rec = self.recorder
        self._data_wait_ends, self._dispatch_ends, self._sync_ends = (
            rec.end_logger(n) for n in ("data_wait", "dispatch", "sync"))
        self._take_mark = rec.take_mark
        self._profiling: Callable[[], bool] | None = None
        self._at = 0
        """The step the loop is at: the last one dispatched (or being dispatched)."""
        self.step_index = 0
        """The number of steps dispatched so far (the index of the next one)."""
        self._passes: list[int] = []
        """The step at which each ``batches`` call began: a new pass over the data."""
        self._loader_starts: list[LoaderStart] = []
        """Each pass's first batch (``batches``): the wait for it, the iterator's creation
        included."""

    # -- the loop --------------------------------------------------------------
    def start(self) -> None:
        """Open step 0's interval and start the watchers (done by the first call of
        ``batches``/``step``/``span`` if not called)."""
        if self._started:
            return
        if self._result is not None:
            raise MonitorError("this Monitor has finished; create a new one for another run")
        self._started = True
        self._watchers.start()
        self._watcher = self._watchers.compiles
        if self._save_to is not None:
            self._keeper = RunKeeper(own_path(self._save_to), self._save_every_s, self.clock,
                                     self._build_saved, self._encode, self._ended)
            self._saver = self._keeper.writer
        self._profiling = self._annotations()
        start = self.recorder.start()
        if self._scalars is not None:
            try:
                self._scalars.start(wall_start_of(start, self.clock()), start,
                                    self._fold_at_exit)
                self.recorder.on_steps.append(self._scalars.take)
            except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
                self.recorder.faults.report("the TensorBoard writer", e,
                                            "no scalars are written for this run")
                self._scalars = None
        self._set_due()

    def _annotations(self) -> Callable[[], bool] | None:
        """What tells whether spans must also be profiler annotations now (None: never)."""
        if not self._annotate:
            return None
        prof = profiler()
        return prof.enabled if prof is not None else capturing

    def batches(self, iterable: Iterable[B]) -> Iterator[B]:
        """Yield the batches of ``iterable``, timing each wait as ``data_wait``; the first
        (the iterator's creation included: a ``grain.DataLoader`` starts its workers) is
        also a ``LoaderStart`` of this pass, its step tagged ``loader_start`` from the
        second pass on."""
        self.start()
        index = len(self._passes)
        self._passes.append(self.step_index)
        rec = self.recorder
        clock = self.clock
        log, data_wait_ends = rec.log_start, self._data_wait_ends
        enabled = self._profiling
        window = self._profile
        if window is not None:
            window.at_step(self.step_index)
        at, t0 = self.step_index, clock()
        try:
            it, batch = self._first_batch(iterable)
        except StopIteration:
            return
        finally:
            self._loader_starts.append(LoaderStart(index, max(0, at - 1), clock() - t0))
            if index:  # a restart (the first pass's start is step 0's, apart anyway)
                rec.tag("loader_start")
        yield batch
        while True:
            if window is not None:
                window.at_step(self.step_index)
            if enabled is not None and enabled():
                if not rec.annotating:
                    rec.follow_capture(True)
                with rec.span("data_wait"):
                    try:
                        batch = next(it)
                    except StopIteration:
                        return
            else:  # the span, inline (the recorder's loggers): this runs every step
                log(clock())
                try:
                    batch = next(it)
                except StopIteration:
                    return
                finally:
                    next(data_wait_ends)
            yield batch

    def _first_batch(self, iterable: Iterable[B]) -> tuple[Iterator[B], B]:
        """A pass's iterator and its first batch, both timed as ``data_wait`` (raises the
        iterable's StopIteration, and any exception of the user's, unchanged)."""
        rec = self.recorder
        enabled = self._profiling
        if enabled is not None and enabled():
            if not rec.annotating:
                rec.follow_capture(True)
            with rec.span("data_wait"):
                it = iter(iterable)
                return it, next(it)
        rec.log_start(self.clock())
        try:
            it = iter(iterable)
            return it, next(it)
        finally:
            next(self._data_wait_ends)

    # the loop's hot path: kept inline (a Python call costs ~0.1 µs a step)
    def step(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Call (dispatch) ``fn(*args, **kwargs)``, then wait for the *previous* step's loss
        and close its interval. Returns ``fn``'s output unchanged."""
        if not self._started:
            self.start()
        rec = self.recorder
        clock = self.clock
        watcher = self._watcher
        before = 0
        if watcher is not None:
            if watcher.name is None:
                watcher.name = function_name(fn)
            before = watcher.compiles
        self._at = self.step_index
        if self._profile is not None:  # loops that fetch batches without mon.batches
            self._profile.at_step(self.step_index)
        enabled = self._profiling
        capture = enabled is not None and enabled()
        if capture != rec.annotating:
            rec.follow_capture(capture)
        log = rec.log_start
        if capture:
            with rec.span("dispatch", step_num=self.step_index):
                out = fn(*args, **kwargs)
        else:  # the span, inline (the recorder's loggers)
            log(clock())
            try:
                out = fn(*args, **kwargs)
            finally:
                next(self._dispatch_ends)
        if watcher is not None and watcher.compiles != before:
            rec.tag("compile")
        loss = self._loss(out)
        if self._has_pending:
            if capture:
                with rec.span("sync"):
                    value = self._read_loss(self._pending)
            else:
                log(clock())
                try:
                    value = self._read_loss(self._pending)
                finally:
                    next(self._sync_ends)
            now = self._take_mark(math.nan if value is None else value)  # rec.mark, no look
            if now >= self._due_at:  # the mark's clock reading
                self._periodic(now)
        self._pending = loss
        self._has_pending = True
        self.step_index += 1
        return out

    def span(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Time a block as span ``name`` (``checkpoint``, ``eval``, ``log``, or your own);
        ``checkpoint``, ``eval`` and ``gc`` also tag the step (it leaves the steady state).

        Each Monitor answers this with its ``MonitorSpans``' ``__getitem__`` (bound in
        ``__init__``): the same, without a Python call on the way to a span."""
        return self._span_contexts[name]

    def tag(self, name: str) -> None:
        """Tag the current step (e.g. ``"checkpoint"`` for a save you do not wrap)."""
        self.start()
        self.recorder.tag(name)

    # -- the record while the run goes -------------------------------------------
    def _periodic(self, now: float) -> None:
        """At a mark, when due: the saver's write, the event file's fold (a fault of either
        is reported, never raised into the loop: that write is skipped)."""
        saver = self._saver
        if saver is not None and now >= saver.next_at:
            saver.next_at = now + saver.every_s  # due again then, whatever happens here
            try:
                saver.submit((self._capture(), RunEnd("running", RUNNING_MESSAGE, self._at)),
                             now)
            except Exception as e:  # noqa: BLE001 - never raised into the loop (faults.py)
                self.recorder.faults.report(
                    "the Monitor's periodic save", e,
                    f"a write of {self._save_to} was skipped; the next is tried on time")
        scalars = self._scalars
        if scalars is not None and now >= scalars.next_at:
            scalars.next_at = now + scalars.every_s
            self.recorder.fold()  # its new steps go to the event file's thread (on_steps)
        self._set_due()

    def _fold_at_exit(self) -> None:
        """The steps not folded yet, handed to the event file (the process exits)."""
        if not self.recorder.folding:
            self.recorder.fold()

    def _set_due(self) -> None:
        saver, scalars = self._saver, self._scalars
        self._due_at = min(saver.next_at if saver is not None else math.inf,
                           scalars.next_at if scalars is not None else math.inf)

    def _capture(self, fold: bool = True) -> RunState:
        """The state a record is built from, now (on the loop's thread)."""
        return dataclasses.replace(self._watchers.capture(fold), passes=tuple(self._passes),
                                   loader_starts=tuple(self._loader_starts))

    def _build_saved(self, item: MonitorResult | StateAndEnd) -> MonitorResult:
        """What the writer writes: a finished record as it is, or a captured state (with how
        the run stands) built into one."""
        if isinstance(item, MonitorResult):
            return item
        state, end = cast("StateAndEnd", item)
        return build_result(state, self._environment(), self.config, end)

    def _encode(self, result: MonitorResult) -> str:
        return encode_result(self._encoder, result)

    def _environment(self) -> Mapping[str, object]:
        if self._env is None:
            self._env = collect_env()
        return self._env

    def _ended(self, kind: str, message: str) -> None:
        """How the run ended before ``finish`` (the keeper's signal, excepthook, exit)."""
        self._end_early(RunEnd(kind, message, self._at))

    def _end_early(self, end: RunEnd) -> None:
        """Write the record marked ``incomplete`` (how the run ended, at which step) now,
        once: the steps whose loss was observed, up to this moment."""
        if self._result is not None or self._end is not None or not self._started:
            return
        self._end = end
        try:
            if self._keeper is not None:
                self._keeper.write_early(self._capture(fold=not self.recorder.folding), end)
            if self._scalars is not None:
                if not self.recorder.folding:
                    self.recorder.fold()
                self._scalars.drain()  # on disk before a signal's default action ends it
        except Exception as e:  # noqa: BLE001 - the run's own ending goes on unchanged
            self.recorder.faults.report("the Monitor's last write", e,
                                        "the record on disk may miss the run's last steps")

    def _stop_saving(self) -> None:
        if self._keeper is not None:
            self._keeper.stop()
        if self._scalars is not None:
            self._scalars.close()

    def _stop_watching(self) -> None:
        self._watchers.close()
        if self._profile is not None:  # the capture so far is still written
            self._profile.close()

    # -- the result ------------------------------------------------------------
    def finish(self) -> MonitorResult:
        """Wait for the last step's loss, stop the watchers, and build the record
        (idempotent). With ``save_to``, the record is written there."""
        if self._result is not None:
            return self._result
        if not self._started:
            raise MonitorError("the Monitor recorded no steps (call mon.step(...) in the loop)")
        try:
            self._drain()
        except BaseException as e:
            self._end_early(RunEnd("exception", describe(e), self._at))
            self._stop_saving()
            raise
        finally:
            self._stop_watching()
        try:
            if self.recorder.step_count == 0:
                raise MonitorError(
                    "the Monitor recorded no steps (call mon.step(...) in the loop)")
            result = build_result(self._capture(), self._environment(), self.config)
            self._result = result
            if self._saver is not None:
                self._saver.write_now(result)
            if self._hosts.gather:
                self._result = self._hosts.gathered(result)
                if self._saver is not None and self._hosts.session is not None \
                        and self._hosts.is_reporter and self._save_to is not None:
                    write_gathered(self._save_to, self._result, self._encode)
        finally:
            self._stop_saving()
        return self._result

    def _drain(self) -> None:
        """Wait for the last step's loss: the last interval, with no next batch fetched."""
        if self._has_pending:
            with self.recorder.span("sync"):
                value = self._read_loss(self._pending)
            self.recorder.tag("drain")  # no next batch is fetched in this interval
            self.recorder.mark(value)
            self._has_pending = False
            self._pending = None

    @property
    def is_reporter(self) -> bool:
        """True on process 0 of a multi-process run (and in a one-process run): the process
        whose record holds every host."""
        return self._hosts.is_reporter

    def save(self, path: str, force: bool = False) -> MonitorResult:
        """Finish if needed and write the record to ``path`` (atomically).

        In a multi-process run only process 0 writes ``path`` (its record holds every
        host); with ``json_per_host=True`` every process also writes its own record to
        ``path`` with ``.process-I`` before the extension."""
        result = self.finish()
        if self._save_to is not None and os.path.abspath(path) == os.path.abspath(self._save_to):
            force = True  # the file this Monitor has been writing: replaced by the same record
        self._hosts.save(result, path, force)
        return result

    def write_trace(self, path: str, force: bool = False) -> None:
        """Write the Chrome trace of the run (see docs/timeline.md)."""
        result = self.finish()
        write_recorder_trace(path, self.recorder, self._watchers.compile_events(),
                             "pipecheck monitor", force, steps=result.steps)

    def report(self) -> str:
        """The text report of the finished run (process 0's shows every host; the other
        processes' say where it is)."""
        result = self.finish()
        elsewhere = self._hosts.elsewhere()
        if elsewhere is not None:
            return elsewhere
        text = format_monitor(result)
        if result.hosts:
            text += "\n\n" + format_hosts(result.hosts, result.straggler, result.host_findings)
        return text

    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is None:
            self.finish()
            return
        # the user's exception goes on unchanged (this returns None); the record first
        try:
            if exc is not None:
                self._end_early(RunEnd("exception", describe(exc), self._at))
        finally:
            self._watchers.close()
            self._stop_saving()
            if self._profile is not None:  # the capture so far is still written
                self._profile.close()
