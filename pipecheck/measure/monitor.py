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
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Callable, Iterable, Iterator, Mapping, ParamSpec, Sequence, TypeVar

from pipecheck.analysis.breakdown import breakdown
from pipecheck.analysis.steady_state import with_anomalies
from pipecheck.analysis.straggler import analyze
from pipecheck.errors import MonitorError
from pipecheck.measure import distributed
from pipecheck.measure.compile_watch import CompileWatcher
from pipecheck.measure.hosts import host_summary
from pipecheck.measure.loop import compiles_per_step, read_scalar
from pipecheck.measure.spans import STEP_WINDOW, GcSpans, SpanRecorder
from pipecheck.measure.sync_locator import DEFAULT_INTERVAL_S, FrameInfo, SyncLocator
from pipecheck.measure.synthetic import steady_distribution
from pipecheck.records import store
from pipecheck.records.common import (
    CompileInfo,
    Finding,
)
from pipecheck.records.env import collect_env
from pipecheck.records.monitor import MonitorResult, SyncSiteRecord
from pipecheck.report.hosts import format_hosts
from pipecheck.report.monitor import format_monitor
from pipecheck.report.trace import write_recorder_trace
from pipecheck.step_types import PyTree
from pipecheck.units import short_location

P = ParamSpec("P")
R = TypeVar("R")
B = TypeVar("B")

FORCED_SYNC_MIN_SHARE = 0.02
"""A user sync site costing at least this share of the wall time becomes a finding."""


def _function_name(fn: Callable[..., object]) -> str | None:
    """The name JAX's compile events give ``fn`` (``jit(NAME)``), or None."""
    return getattr(fn, "__name__", None) or getattr(
        getattr(fn, "__wrapped__", None), "__name__", None)


def default_loss(out: PyTree) -> PyTree:
    """The loss in a step's output: ``(state, {"loss": x, ...})``, ``{"loss": x}``,
    ``(state, x)`` with a scalar ``x``, or a scalar."""
    if isinstance(out, tuple) and len(out) == 2:
        metrics = out[1]
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
    clock, read_loss, env:
        Injectable for tests: the clock, the lagged sync (``float``), and the environment
        stored in the record (default: collected from JAX at ``finish``).
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
        clock: Callable[[], float] = time.perf_counter,
        read_loss: Callable[[PyTree], float] = read_scalar,
        env: Mapping[str, object] | None = None,
        gather: bool = True,
        distributed_timeout_s: float = 120.0,
        json_per_host: bool = False,
    ) -> None:
        if config is None:
            self.config: dict[str, Any] = {}  # JSON-shaped: written into the record
        elif hasattr(config, "to_dict"):
            self.config = dict(config.to_dict())
        elif isinstance(config, Mapping):
            self.config = dict(config)
        else:
            raise MonitorError(f"Monitor(config=...) takes a mapping, got {type(config).__name__}")
        self.recorder = SpanRecorder(clock, step_window=step_window, annotate=annotate)
        self.clock = clock
        self._loss = loss
        self._read_loss = read_loss
        self._locate = locate_syncs
        self._interval = sync_interval_s
        self._watch_compiles = watch_compiles
        self._watch_gc = watch_gc
        self._env = env
        self._gather = gather
        self._distributed_timeout_s = distributed_timeout_s
        self._json_per_host = json_per_host
        self._session: distributed.Session | None = None
        self._stack = contextlib.ExitStack()
        self._locator: _LoopSyncLocator | None = None
        self._watcher: CompileWatcher | None = None
        self._started = False
        self._result: MonitorResult | None = None
        self._pending: PyTree = None
        self._has_pending = False
        self.step_index = 0
        """The number of steps dispatched so far (the index of the next one)."""

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
        self.recorder.start()

    def batches(self, iterable: Iterable[B]) -> Iterator[B]:
        """Yield the batches of ``iterable``, timing each wait as ``data_wait``."""
        self.start()
        it = iter(iterable)
        span = self.recorder.span
        while True:
            with span("data_wait"):
                try:
                    batch = next(it)
                except StopIteration:
                    return
            yield batch

    def step(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Call (dispatch) ``fn(*args, **kwargs)``, then wait for the *previous* step's loss
        and close its interval. Returns ``fn``'s output unchanged."""
        self.start()
        rec = self.recorder
        watcher = self._watcher
        if watcher is not None and watcher.name is None:
            watcher.name = _function_name(fn)
        before = watcher.compiles if watcher is not None else 0
        with rec.span("dispatch", step_num=self.step_index):
            out = fn(*args, **kwargs)
        if watcher is not None and watcher.compiles != before:
            rec.tag("compile")
        loss = self._loss(out)
        if self._has_pending:
            with rec.span("sync"):
                value = self._read_loss(self._pending)
            rec.mark(value)
        self._pending = loss
        self._has_pending = True
        self.step_index += 1
        return out

    def span(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Time a block as span ``name`` (``checkpoint``, ``eval``, ``log``, or your own);
        ``checkpoint``, ``eval`` and ``gc`` also tag the step (it leaves the steady state)."""
        self.start()
        if name in ("checkpoint", "eval", "gc"):
            self.recorder.tag(name)
        return self.recorder.span(name)

    def tag(self, name: str) -> None:
        """Tag the current step (e.g. ``"checkpoint"`` for a save you do not wrap)."""
        self.start()
        self.recorder.tag(name)

    # -- the result ------------------------------------------------------------
    def finish(self) -> MonitorResult:
        """Wait for the last step's loss, stop the watchers, and build the record
        (idempotent)."""
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
        finally:
            self._stack.close()
        if self.recorder.step_count == 0:
            raise MonitorError("the Monitor recorded no steps (call mon.step(...) in the loop)")
        if self._env is None:
            self._env = collect_env()
        self._result = build_result(
            self.recorder, self._env, self.config, self._locator, self._watcher)
        if self._gather:
            self._result = self._gather_hosts(self._result)
        return self._result

    def _gather_hosts(self, result: MonitorResult) -> MonitorResult:
        """In a multi-process run (``jax.distributed`` initialized by the script), every
        process sends its bounded summary to process 0, whose record gets ``hosts`` and
        ``straggler``; the others keep their own record."""
        if not distributed.is_initialized():
            return result
        # lazy: JAX imported where used, so `import pipecheck` stays light
        import jax

        if jax.process_count() < 2:
            return result
        session = distributed.Session(self._distributed_timeout_s)
        self._session = session
        own = host_summary(session.process_id, result, session.hostname)
        hosts = session.gather(own)
        if hosts is None:
            session.finish()
            return dataclasses.replace(result, hosts=(own,))
        analysis = analyze(hosts)
        session.finish()
        return dataclasses.replace(result, hosts=tuple(hosts), straggler=analysis.straggler,
                                   host_findings=analysis.findings)

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

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is None:
            self.finish()
        else:
            self._stack.close()


def host_sync_findings(sites: Sequence[SyncSiteRecord]) -> list[Finding]:
    """The user's sync sites costing at least ``FORCED_SYNC_MIN_SHARE`` of the wall time.

    The Monitor sees where the loop waits, not whether the wait costs time (an input-bound
    loop hides it): `pipecheck compare --real` judges that."""
    return [Finding(
        kind="host-sync",
        message=(f"the loop waits for the device at {short_location(s.location)} ({s.code}): "
                 f"{s.seconds:.3f} s, {100 * s.share:.1f}% of the wall time; "
                 "`pipecheck compare --real` tells whether it costs step time"),
        numbers={"seconds": s.seconds, "share": s.share},
        location=s.location,
        fix=("if it costs step time: read values of the previous step instead (keep the "
             "step's metrics and convert them one step later), or do it every N steps"),
    ) for s in sites if not s.internal and s.share >= FORCED_SYNC_MIN_SHARE]


def build_result(
    recorder: SpanRecorder,
    env: Mapping[str, object],
    config: Mapping[str, object],
    locator: _LoopSyncLocator | None,
    watcher: CompileWatcher | None,
) -> MonitorResult:
    """Pure but for its inputs: the MonitorResult of a finished recorder."""
    compiles = {}
    if watcher is not None:
        compiles = compiles_per_step(recorder, [*watcher.events, *watcher.other_events])
    steps, anomalies = with_anomalies(recorder.steps, compiles)
    step_time, warnings = steady_distribution(steps)
    wall = recorder.totals.wall_s
    sites = tuple(SyncSiteRecord.of(s, wall) for s in locator.sites()) if locator else ()
    compile_info = None
    compile_s = None
    if watcher is not None and watcher.name is not None:
        compile_s = watcher.compile_s
        compile_info = CompileInfo(first_step_s=steps[0].time_s, compile_s=compile_s,
                                   train_step_compiles=watcher.compiles,
                                   findings=tuple(watcher.findings()))
    forced = locator.outside_spans_s if locator else 0.0
    table = breakdown(recorder.totals, compile_s, forced)
    findings = [*(compile_info.findings if compile_info else ()), *host_sync_findings(sites)]
    if recorder.dropped_steps:
        warnings.append(
            f"{recorder.dropped_steps} of {recorder.step_count} steps are not kept as records "
            f"(step_window={recorder.recent_steps.maxlen}); the step-time distribution "
            "covers the kept steps, the breakdown covers all")
    if locator is None:
        warnings.append("the sync locator was off: forced syncs in the loop are not located")
    return MonitorResult(
        env=dict(env),
        config=dict(config),
        step_time=step_time,
        first_step_s=steps[0].time_s,
        steps=tuple(steps),
        sync_sites=sites,
        breakdown=table,
        wall_s=wall,
        total_steps=recorder.step_count,
        dropped_steps=recorder.dropped_steps,
        compile=compile_info,
        anomalies=anomalies,
        findings=tuple(findings),
        warnings=tuple(warnings),
    )
