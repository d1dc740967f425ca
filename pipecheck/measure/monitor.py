"""``pipecheck.Monitor``: pipecheck's timing inside your own training loop.

::

    from pipecheck import Monitor

    mon = Monitor(config={"model": "my-lm", "batch_size": 32})
    for step, batch in enumerate(mon.batches(loader)):       # data_wait
        state, metrics = mon.step(train_step, state, batch)  # dispatch + lagged sync
        if step % 100 == 0:
            with mon.span("checkpoint"):
                save(state)
    mon.finish()
    mon.save("run.json")                                     # kind "monitor"

``step`` dispatches the step, *then* waits for the **previous** step's loss and closes
the previous step's interval: it never waits for the step it has just dispatched, so the
device always has work queued and the measurement does not slow the loop. Whatever the
loop does after ``step`` returns (a checkpoint, an eval, logging) is charged to the step
just dispatched: the previous step's metrics are flushed before it, so a checkpoint's
blocking device-to-host copy shows up on the step that checkpointed, not on its
neighbour.

While the loop runs, a sync locator samples the loop's thread and finds the lines of the
user's code that force a host-device sync (``float(loss)`` of the current step, a metrics
callback, ``np.asarray(x)``); the record holds them with their cost, so
``pipecheck compare --real RUN.json`` can point at them. Garbage collections and
compilations of the step function are recorded too.

The record (``MonitorResult``) is the same kind of versioned JSON the commands write:
``steps`` (one StepRecord per step), the steady-state ``step_time``, ``sync_sites`` and a
``breakdown`` of the wall time. ``plot``, ``compare --real`` and ``diff`` read it.

With ``Monitor(save_to=PATH)`` the record is kept on disk while the loop runs
(``run_saver``): written every ``save_every_s`` seconds by a helper thread and at the end,
and, marked ``incomplete``, when an exception leaves the loop, on SIGTERM/SIGINT, or when
the process exits without ``finish``; see docs/monitor.md.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import math
import os
import signal
import sys
import time
import traceback
import warnings
from types import TracebackType
from typing import (
    Any,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    ParamSpec,
    Sequence,
    TypeVar,
    cast,
)

from pipecheck.analysis.anomalies import compiles_by_step
from pipecheck.analysis.breakdown import breakdown
from pipecheck.analysis.findings import host_sync_findings
from pipecheck.analysis.steady_state import table_with_anomalies
from pipecheck.errors import MonitorError, PipecheckError
from pipecheck.measure import distributed
from pipecheck.measure.compile_watch import CompileWatcher
from pipecheck.measure.hosts import gather_hosts
from pipecheck.measure.loop import read_scalar
from pipecheck.measure.profile_window import DEFAULT_PROFILE_DIR, ProfileWindow
from pipecheck.measure.run_saver import (
    SAVE_EVERY_S,
    PeriodicWriter,
    SignalChain,
    remove_stale_temporaries,
)
from pipecheck.measure.spans import (
    STEP_WINDOW,
    GcSpans,
    Snapshot,
    SpanRecorder,
    capturing,
    profiler,
)
from pipecheck.measure.sync_locator import DEFAULT_INTERVAL_S, FrameInfo, SyncLocator
from pipecheck.measure.synthetic import steady_distribution
from pipecheck.records import store
from pipecheck.records.base import to_dict
from pipecheck.records.common import (
    CompileInfo,
    Finding,
    StepRecord,
    SyncSite,
)
from pipecheck.records.env import collect_env
from pipecheck.records.events import CompileEvent
from pipecheck.records.monitor import MonitorResult, RunEnd, SyncSiteRecord
from pipecheck.records.steps import ChunkEncoder, StepTable
from pipecheck.report.hosts import format_hosts
from pipecheck.report.monitor import format_monitor
from pipecheck.report.trace import write_recorder_trace
from pipecheck.step_types import PyTree

P = ParamSpec("P")
R = TypeVar("R")
B = TypeVar("B")

RUNNING_MESSAGE = "written while the run was going; it ended before its next write or goes on"
"""What a periodic write says of the run (a process killed by SIGKILL leaves this file)."""

TAGGING_SPANS = frozenset({"checkpoint", "eval", "gc"})
"""Spans that also tag their step: work that does not happen every step."""


class _MonitorSpans(dict[str, contextlib.AbstractContextManager[None]]):
    """``Monitor.span``'s answers by name: the recorder's context of each name that does
    not tag its step; a tagging name is never stored, so each of its spans tags."""

    def __init__(self, monitor: Monitor) -> None:
        super().__init__()
        self.monitor = monitor

    def __missing__(self, name: str) -> contextlib.AbstractContextManager[None]:
        mon = self.monitor
        if not mon._started:
            mon.start()
        if name in TAGGING_SPANS:
            mon.recorder.tag(name)
            return mon.recorder.span(name)
        ctx = self[name] = mon.recorder.span(name)
        return ctx


def _function_name(fn: Callable[..., object]) -> str | None:
    """The name JAX's compile events give ``fn`` (``jit(NAME)``), or None."""
    return getattr(fn, "__name__", None) or getattr(
        getattr(fn, "__wrapped__", None), "__name__", None)


def default_loss(out: PyTree) -> PyTree:
    """The loss in a step's output: ``(state, {"loss": x, ...})``, ``{"loss": x}``,
    ``(state, x)`` with a scalar ``x``, or a scalar."""
    if isinstance(out, tuple) and len(out) == 2:
        metrics = out[1]
        if type(metrics) is dict and "loss" in metrics:  # the common case, without the ABC
            return metrics["loss"]
        if isinstance(metrics, Mapping) and "loss" in metrics:
            return metrics["loss"]
        if getattr(metrics, "shape", None) == ():
            return metrics
    if isinstance(out, Mapping) and "loss" in out:
        return out["loss"]
    if getattr(out, "shape", None) == ():
        return out
    if out is None:
        raise MonitorError(
            "Monitor.step: the step returned None; a step that updates its state in place "
            "(a Flax NNX train_step) must return its loss: end it with `return loss`")
    raise MonitorError(
        f"Monitor.step could not find the loss in the step's output ({type(out).__name__}); "
        "return (state, {'loss': ...}) or pass Monitor(loss=lambda out: ...)"
    )


class _LoopSyncLocator(SyncLocator):
    """The sync locator, also counting user syncs made while no span was open (those are
    the time the breakdown moves from ``other`` to ``sync stall``)."""

    def __init__(self, recorder: SpanRecorder, interval_s: float, clock: Callable[[], float]):
        super().__init__(interval_s=interval_s, clock=clock)
        self.recorder = recorder
        self.outside_spans_s = 0.0

    def record(self, stack: Sequence[FrameInfo], dt: float) -> tuple[FrameInfo, bool] | None:
        depth = self.recorder.depth
        found = super().record(stack, dt)
        if found is not None and not found[1] and depth == 0:
            self.outside_spans_s += dt
        return found


@dataclasses.dataclass(frozen=True)
class RunState:
    """What a Monitor record is built from, captured on the loop's thread at one moment (the
    recorder's arrays are immutable; the rest is copied), so that any thread can build it."""

    snapshot: Snapshot
    sites: tuple[SyncSite, ...]
    outside_spans_s: float
    located: bool
    compile_events: tuple[CompileEvent, ...]
    watched: str | None
    """The step function's name, when compilations were watched and a step was taken."""
    compile_s: float
    train_step_compiles: int
    compile_findings: tuple[Finding, ...]


def one_line(exc: BaseException) -> str:
    """An exception as one line: ``ValueError: loss is nan`` (its message's first line)."""
    lines = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


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
    profile_steps, profile_dir:
        Capture steps ``profile_steps`` (a ``range(a, b)``) with ``jax.profiler`` into
        ``profile_dir``, for ``pipecheck profile`` (see docs/profile.md).
    gather, distributed_timeout_s, json_per_host:
        In a script that called ``jax.distributed.initialize`` (one process per host),
        ``finish`` gathers every process's bounded summary to process 0 (``gather=True``),
        waiting at most ``distributed_timeout_s`` for the others; see docs/multihost.md.
    """

    # long: one line per option, each stored as given
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
    ) -> None:
        if config is None:
            self.config: dict[str, Any] = {}  # JSON-shaped: written into the record
        elif hasattr(config, "to_dict"):
            self.config = dict(config.to_dict())
        elif isinstance(config, Mapping):
            self.config = dict(config)
        else:
            raise MonitorError(f"Monitor(config=...) takes a mapping, got {type(config).__name__}")
        if save_to is not None:
            if not save_every_s > 0:
                raise MonitorError(f"Monitor(save_every_s=...) must be > 0 seconds, got "
                                   f"{save_every_s!r}")
            if os.path.exists(save_to) and not force and not os.path.isdir(save_to):
                raise MonitorError(f"Monitor(save_to={save_to!r}): the file exists; pass "
                                   "force=True to replace it, or choose another path")
            store.check_writable(save_to, force)  # before the run, not at its end
        self.recorder = SpanRecorder(clock, step_window=step_window, annotate=annotate)
        self.clock = clock
        self._loss = loss
        self._read_loss = read_loss
        self._locate = locate_syncs
        self._interval = sync_interval_s
        self._watch_compiles = watch_compiles
        self._watch_gc = watch_gc
        self._annotate = annotate
        self._env = env
        self._gather = gather
        self._distributed_timeout_s = distributed_timeout_s
        self._json_per_host = json_per_host
        self._save_to = save_to
        self._save_every_s = save_every_s
        self._force = force
        self._saver: PeriodicWriter[object] | None = None
        self._signals: SignalChain | None = None
        self._previous_excepthook: Any = None
        self._encoder = ChunkEncoder()
        self._end: RunEnd | None = None
        self._session: distributed.Session | None = None
        self._stack = contextlib.ExitStack()
        self._locator: _LoopSyncLocator | None = None
        self._watcher: CompileWatcher | None = None
        self._started = False
        self._result: MonitorResult | None = None
        self._pending: PyTree = None
        self._has_pending = False
        self._data_wait_ends, self._dispatch_ends, self._sync_ends = (
            self.recorder.end_logger(n) for n in ("data_wait", "dispatch", "sync"))
        self._take_mark = self.recorder.take_mark
        self._profiling: Callable[[], bool] | None = None
        self._at = 0
        """The step the loop is at: the last one dispatched (or being dispatched)."""
        self.step_index = 0
        """The number of steps dispatched so far (the index of the next one)."""
        self._profile = (ProfileWindow(profile_steps, profile_dir)
                         if profile_steps is not None else None)
        self._span_contexts = _MonitorSpans(self)
        self.span = self._span_contexts.__getitem__  # type: ignore[method-assign,assignment]
        self.recorder.on_switch.append(self._span_contexts.clear)

    # -- the loop --------------------------------------------------------------
    def start(self) -> None:
        """Open step 0's interval and start the watchers (done by the first call of
        ``batches``/``step``/``span`` if not called)."""
        if self._started:
            return
        if self._result is not None:
            raise MonitorError("this Monitor has finished; create a new one for another run")
        self._started = True
        if self._watch_gc:
            self._stack.enter_context(GcSpans(self.recorder))
        if self._watch_compiles:
            # every function's compilations, from the start: a slow step is explained by
            # whatever compiled in it (an eager generation's small functions included)
            self._watcher = self._stack.enter_context(CompileWatcher(None, self.clock))
        if self._locate:
            locator = _LoopSyncLocator(self.recorder, self._interval, self.clock)
            self._stack.enter_context(locator)
            self._locator = locator
        if self._save_to is not None:
            self._start_saving(self._save_to)
        self._profiling = self._annotations()
        self.recorder.start()

    def _annotations(self) -> Callable[[], bool] | None:
        """What tells whether spans must also be profiler annotations now (None: never)."""
        if not self._annotate:
            return None
        prof = profiler()
        return prof.enabled if prof is not None else capturing

    def batches(self, iterable: Iterable[B]) -> Iterator[B]:
        """Yield the batches of ``iterable``, timing each wait as ``data_wait``."""
        self.start()
        it = iter(iterable)
        rec = self.recorder
        clock = self.clock
        log, data_wait_ends = rec.log_start, self._data_wait_ends
        enabled = self._profiling
        window = self._profile
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
            else:  # the span, inline (SpanRecorder's log): this runs every step
                log(clock())
                try:
                    batch = next(it)
                except StopIteration:
                    return
                finally:
                    next(data_wait_ends)
            yield batch

    # long: the loop's hot path, inline in one function (a call costs ~0.1 µs a step)
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
                watcher.name = _function_name(fn)
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
        else:  # the span, inline (SpanRecorder's log)
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
            saver = self._saver
            if saver is not None and now >= saver.next_at:  # the mark's clock reading
                saver.submit((self._capture(), RunEnd("running", RUNNING_MESSAGE, self._at)),
                             now)
        self._pending = loss
        self._has_pending = True
        self.step_index += 1
        return out

    def span(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Time a block as span ``name`` (``checkpoint``, ``eval``, ``log``, or your own);
        ``checkpoint``, ``eval`` and ``gc`` also tag the step (it leaves the steady state).

        Each Monitor answers this with its ``_MonitorSpans``' ``__getitem__`` (bound in
        ``__init__``): the same, without a Python call on the way to a span."""
        return self._span_contexts[name]

    def tag(self, name: str) -> None:
        """Tag the current step (e.g. ``"checkpoint"`` for a save you do not wrap)."""
        self.start()
        self.recorder.tag(name)

    # -- keeping the record on disk ----------------------------------------------
    def _start_saving(self, path: str) -> None:
        if self._multi_process():
            # lazy: JAX imported where used, so `import pipecheck` stays light
            import jax

            path = distributed.per_host_path(path, jax.process_index())
        remove_stale_temporaries(path)
        self._saver = PeriodicWriter(path, self._build_saved, self._encode,
                                     self._save_every_s, self.clock)
        self._signals = SignalChain(self._on_signal).install()
        self._previous_excepthook = sys.excepthook
        sys.excepthook = self._excepthook
        atexit.register(self._at_exit)

    @staticmethod
    def _multi_process() -> bool:
        if not distributed.is_initialized():
            return False
        # lazy: JAX imported where used, so `import pipecheck` stays light
        import jax

        return jax.process_count() > 1

    def _capture(self, fold: bool = True) -> RunState:
        """The state a record is built from, now (on the loop's thread)."""
        locator, watcher = self._locator, self._watcher
        watched = watcher is not None and watcher.name is not None
        return RunState(
            snapshot=self.recorder.snapshot(fold),
            sites=tuple(locator.sites()) if locator is not None else (),
            outside_spans_s=locator.outside_spans_s if locator is not None else 0.0,
            located=locator is not None,
            compile_events=(tuple([*watcher.events, *watcher.other_events])
                            if watcher is not None else ()),
            watched=watcher.name if watched and watcher is not None else None,
            compile_s=watcher.compile_s if watcher is not None else 0.0,
            train_step_compiles=watcher.compiles if watcher is not None else 0,
            compile_findings=tuple(watcher.findings()) if watched and watcher else (),
        )

    def _build_saved(self, item: object) -> MonitorResult:
        """What the writer writes: a finished record as it is, or a captured state (with how
        the run stands) built into one."""
        if isinstance(item, MonitorResult):
            return item
        state, end = cast("tuple[RunState, RunEnd]", item)
        return build_result(state, self._environment(), self.config, end)

    def _encode(self, result: MonitorResult) -> str:
        """``store.record_to_json``, with the steps' columns compressed only where new."""
        steps = result.steps
        table = steps if isinstance(steps, StepTable) else StepTable.from_rows(
            StepRecord, steps)
        data = to_dict(dataclasses.replace(result, steps=()))
        data["steps"] = self._encoder.table_json(table)
        return store.dumps(data)

    def _environment(self) -> Mapping[str, object]:
        if self._env is None:
            self._env = collect_env()
        return self._env

    def _end_early(self, end: RunEnd) -> None:
        """Write the record marked ``incomplete`` (how the run ended, at which step) now,
        once: the steps whose loss was observed, up to this moment."""
        if self._result is not None or self._end is not None or not self._started:
            return
        self._end = end
        saver = self._saver
        if saver is None:
            return
        state = self._capture(fold=not self.recorder.folding)
        if not len(state.snapshot.steps):
            print(f"pipecheck: the run ended ({end.message}) before its first step "
                  f"completed; nothing written to {saver.path}", file=sys.stderr)
            return
        saver.write_now((state, end))

    def _on_signal(self, signum: int) -> None:
        self._end_early(RunEnd("signal", signal.Signals(signum).name, self._at))

    def _excepthook(self, exc_type: type[BaseException], exc: BaseException,
                    tb: TracebackType | None) -> None:
        self._end_early(RunEnd("exception", one_line(exc), self._at))
        previous = self._previous_excepthook or sys.__excepthook__
        previous(exc_type, exc, tb)

    def _at_exit(self) -> None:
        self._end_early(RunEnd("exit", "the process exited before Monitor.finish()", self._at))

    def _stop_saving(self) -> None:
        if self._signals is not None:
            self._signals.uninstall()
            self._signals = None
        if self._previous_excepthook is not None:
            if sys.excepthook == self._excepthook:
                sys.excepthook = self._previous_excepthook
            self._previous_excepthook = None
            atexit.unregister(self._at_exit)
        if self._saver is not None:
            self._saver.close()

    # -- the result ------------------------------------------------------------
    def finish(self) -> MonitorResult:
        """Wait for the last step's loss, stop the watchers, and build the record
        (idempotent). With ``save_to``, the record is written there."""
        if self._result is not None:
            return self._result
        if not self._started:
            raise MonitorError("the Monitor recorded no steps (call mon.step(...) in the loop)")
        try:
            if self._has_pending:
                with self.recorder.span("sync"):
                    value = self._read_loss(self._pending)
                self.recorder.tag("drain")  # no next batch is fetched in this interval
                self.recorder.mark(value)
                self._has_pending = False
                self._pending = None
        except BaseException as e:
            self._end_early(RunEnd("exception", one_line(e), self._at))
            self._stop_saving()
            raise
        finally:
            self._stack.close()
            if self._profile is not None:
                self._profile.close()
        try:
            if self.recorder.step_count == 0:
                raise MonitorError(
                    "the Monitor recorded no steps (call mon.step(...) in the loop)")
            result = build_result(self._capture(), self._environment(), self.config)
            self._result = result
            if self._saver is not None:
                self._saver.write_now(result)
            if self._gather:
                self._result = self._gather_hosts(result)
                if self._saver is not None and self._session is not None \
                        and self._session.is_reporter and self._save_to is not None:
                    self._write_gathered(self._save_to)
        finally:
            self._stop_saving()
        return self._result

    def _write_gathered(self, path: str) -> None:
        """Process 0's record with every host, once all answered (or the wait ran out)."""
        assert self._result is not None
        try:
            store.write_text_atomic(path, self._encode(self._result), force=True, fsync=True)
        except (OSError, PipecheckError) as e:
            warnings.warn(f"pipecheck: could not write the hosts' record to {path} ({e})",
                          RuntimeWarning, stacklevel=3)

    def _gather_hosts(self, result: MonitorResult) -> MonitorResult:
        """In a multi-process run (``jax.distributed`` initialized by the script), every
        process sends its bounded summary to process 0, whose record gets ``hosts`` and
        ``straggler``; the others keep their own record. A host that sent nothing within
        the timeout is named in process 0's warnings."""
        if not self._multi_process():
            return result
        session = distributed.Session(self._distributed_timeout_s)
        self._session = session
        gathered = gather_hosts(session, result, tolerate_missing=True)
        session.finish()
        return gathered.reported or gathered.own

    @property
    def is_reporter(self) -> bool:
        """True on process 0 of a multi-process run (and in a one-process run): the process
        whose record holds every host."""
        return self._session is None or self._session.is_reporter

    def save(self, path: str, force: bool = False) -> MonitorResult:
        """Finish if needed and write the record to ``path`` (atomically).

        In a multi-process run only process 0 writes ``path`` (its record holds every
        host); with ``json_per_host=True`` every process also writes its own record to
        ``path`` with ``.process-I`` before the extension."""
        result = self.finish()
        if self._save_to is not None and os.path.abspath(path) == os.path.abspath(self._save_to):
            force = True  # the file this Monitor has been writing: replaced by the same record
        if self._session is not None and self._json_per_host:
            own = dataclasses.replace(result, hosts=tuple(
                h for h in result.hosts if h.process_id == self._session.process_id))
            store.save(own, distributed.per_host_path(path, self._session.process_id), force)
        if self.is_reporter:
            store.save(result, path, force)
        return result

    def write_trace(self, path: str, force: bool = False) -> None:
        """Write the Chrome trace of the run (see docs/timeline.md)."""
        result = self.finish()
        events = [*self._watcher.events, *self._watcher.other_events] if self._watcher else []
        write_recorder_trace(path, self.recorder, events, "pipecheck monitor", force,
                             steps=result.steps)

    def report(self) -> str:
        """The text report of the finished run (process 0's shows every host; the other
        processes' say where it is)."""
        result = self.finish()
        if not self.is_reporter:
            assert self._session is not None
            return (f"pipecheck: process {self._session.process_id} of "
                    f"{self._session.process_count} done; process 0 reports every host")
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
                self._end_early(RunEnd("exception", one_line(exc), self._at))
        finally:
            self._stack.close()
            self._stop_saving()
            if self._profile is not None:  # the capture so far is still written
                self._profile.close()


def build_result(
    state: RunState,
    env: Mapping[str, object],
    config: Mapping[str, object],
    incomplete: RunEnd | None = None,
) -> MonitorResult:
    """Pure: the MonitorResult of a captured state (``incomplete``: how the run ended, when
    it did not finish)."""
    snap = state.snapshot
    marks = snap.marks.tolist()
    compiles = compiles_by_step(((e.fun_name, e.at, e.duration_s)
                                 for e in state.compile_events),
                                marks, snap.marks_total - len(marks)) \
        if state.compile_events else {}
    steps, anomalies = table_with_anomalies(snap.steps, compiles)
    step_time, warnings = steady_distribution(steps, "Monitor's run")
    wall = snap.totals.wall_s
    sites = tuple(SyncSiteRecord.of(s, wall) for s in state.sites)
    compile_info = None
    compile_s = None
    first_step_s = float(steps[0].time_s)
    if state.watched is not None:
        compile_s = state.compile_s
        compile_info = CompileInfo(first_step_s=first_step_s, compile_s=compile_s,
                                   train_step_compiles=state.train_step_compiles,
                                   findings=state.compile_findings)
    table = breakdown(snap.totals, compile_s, state.outside_spans_s)
    findings = [*(compile_info.findings if compile_info else ()), *host_sync_findings(sites)]
    if snap.dropped_steps:
        warnings.append(
            f"{snap.dropped_steps} of {snap.step_count} steps are not kept as records "
            f"(step_window={snap.step_window}); the step-time distribution "
            "covers the kept steps, the breakdown covers all")
    if not state.located:
        warnings.append("the sync locator was off: forced syncs in the loop are not located")
    return MonitorResult(
        env=dict(env),
        config=dict(config),
        step_time=step_time,
        first_step_s=first_step_s,
        steps=steps,
        sync_sites=sites,
        breakdown=table,
        wall_s=wall,
        total_steps=snap.step_count,
        dropped_steps=snap.dropped_steps,
        compile=compile_info,
        anomalies=anomalies,
        findings=tuple(findings),
        warnings=tuple(warnings),
        incomplete=incomplete,
    )
