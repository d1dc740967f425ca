"""compare's real-data run R: pipecheck's own loop on the real pipeline, or a Monitor run.

pipecheck's run trains on the workload's Grain pipeline at the chosen loader setting,
timed by the lagged sync, with the sync locator sampling the main thread. The steps served
from the batches buffered while starting up (the workers' output buffers, and the read
prefetch counted in batches: ``plan_real``) are tagged ``warmup`` (the steady-state rule);
when they would leave too few steady steps, the run is made longer up front. ``--real
RUN.json`` reads the steps and sync sites of a Monitor run instead.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Mapping

from pipecheck.analysis.periodic_stall import LoaderShape, shape_of_config
from pipecheck.analysis.steady_state import (
    read_prefetch_batches,
    real_steps,
    tag_warmup,
    warmup_steps,
    with_anomalies,
)
from pipecheck.data.grain_pipeline import (
    BatchedExamples,
    InputPipeline,
    read_elements_per_batch,
)
from pipecheck.data.per_setting import at_setting
from pipecheck.errors import ConfigError
from pipecheck.measure.compile_watch import CompileWatcher
from pipecheck.measure.dataloader import LoaderParts
from pipecheck.measure.loop import compiles_per_step, run_lagged_sync_loop
from pipecheck.measure.pipeline import open_batches
from pipecheck.measure.profile_window import ProfileWindow
from pipecheck.measure.spans import SpanRecorder
from pipecheck.measure.sync_locator import SyncLocator
from pipecheck.progress import Progress
from pipecheck.records import store
from pipecheck.records.common import Anomaly, Finding, StartUp, StepRecord, SyncSite
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.env import input_warnings, other_workload
from pipecheck.records.events import CompileEvent
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.steps import StepTable, as_step_table
from pipecheck.step_types import HookRecorder, PyTree, StepHook
from pipecheck.workloads.base import Workload

DEFAULT_STEPS = 60
"""Real-data training steps."""


@dataclasses.dataclass(frozen=True)
class RealRun:
    """The real-data measurement, from pipecheck's loop or a Monitor run."""

    steps: StepTable[StepRecord]
    """Every step, the warm-up ones tagged."""
    sync_sites: tuple[SyncSite, ...]
    compile_findings: tuple[Finding, ...] = ()
    recorder: SpanRecorder | None = None
    """The SpanRecorder of pipecheck's real-data loop (None for a Monitor run)."""
    total_steps: int = 0
    """Steps the sync sites cover (a long Monitor run keeps only a window of ``steps``)."""
    compile_events: tuple[CompileEvent, ...] = ()
    """Every function's compile events in pipecheck's real-data loop (for the trace)."""
    anomalies: tuple[Anomaly, ...] = ()
    """Steps far from the steady state (kept out of it), with their likely cause."""
    warnings: tuple[str, ...] = ()
    loader: LoaderShape = LoaderShape()
    """What is known of the loader that fed the steps (a periodic stall is matched to it)."""
    startup: StartUp | None = None
    """A Monitor run's start-up (None for pipecheck's own run: compare builds its own)."""
    init_s: float | None = None
    """Host seconds pipecheck's run took to initialize the state (before its loader
    started; None for a Monitor run)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", as_step_table(self.steps, StepRecord))

    @property
    def n_steps(self) -> int:
        return self.total_steps or len(self.steps)


@dataclasses.dataclass(frozen=True)
class RealPlan:
    """How long the real-data run is and how many of its first steps are warm-up."""

    steps: int
    """Steps to measure: those asked for, or more when the warm-up would take too many."""
    warmup: int
    """Steps 0 .. warmup-1 are kept out of the steady state (``warmup_steps``)."""
    warning: str | None = None
    """Why the run is longer than asked (None: it is not)."""


def plan_real(dataset: InputPipeline, settings: GrainSettings, steps: int) -> RealPlan:
    """The real-data run for ``steps`` asked on ``dataset`` read with ``settings``: its
    warm-up counts the batches the start-up buffers hold (the read prefetch holds elements,
    ``read_elements_per_batch`` of which make a batch at least), and it is sized up front
    so the steady state keeps ``steady_state.STEADY_SHARE`` of the steps asked for. A
    pipeline its owner builds per setting (MaxText's) is built at ``settings`` to be read."""
    per_batch = read_elements_per_batch(at_setting(dataset, settings))  # type: ignore[arg-type]
    warmup = warmup_steps(settings.workers, settings.per_worker_buffer, settings.prefetch,
                          per_batch)
    n = real_steps(steps, warmup)
    if n == steps:
        return RealPlan(steps, warmup)
    read = read_prefetch_batches(settings.prefetch, per_batch)
    return RealPlan(n, warmup, (
        f"the pipeline holds up to {warmup - 1} batches ready at start-up (a read prefetch "
        f"buffer of {settings.prefetch} elements, at least {per_batch} per batch: {read} "
        f"batches{_worker_buffers(settings)}): their steps are warm-up, so the real-data "
        f"run took {n} steps instead of the {steps} asked for (--steps), {n - warmup - 1} "
        "of them steady"))


def _worker_buffers(settings: GrainSettings) -> str:
    """The workers' share of the batches buffered at start-up, in words ('' for none)."""
    w = settings.workers
    if not w:
        return ""
    return (f" in each of {w} workers, and {w} x {settings.per_worker_buffer} in their "
            "output buffers")


EPOCH_MAX_BATCHES = 1 << 40
"""A data set longer than this many batches is taken as repeated forever (Grain's repeat()
gives a length of sys.maxsize): no epoch boundary to match."""


def _epoch_batches(dataset: InputPipeline) -> int | None:
    """Batches in one pass over ``dataset`` when its length says (a MapDataset of batches,
    or examples batched by pipecheck), else None."""
    examples, per = (dataset.examples, dataset.batch_size) \
        if isinstance(dataset, BatchedExamples) else (dataset, 1)
    try:
        n = len(examples)  # type: ignore[arg-type]
    except TypeError:  # an IterDataset or a grain.DataLoader: no length
        return None
    batches = n // max(1, per)
    return batches if 0 < batches < EPOCH_MAX_BATCHES else None


def loader_shape(dataset: InputPipeline, settings: GrainSettings) -> LoaderShape:
    """What the real-data run's loader is: ``settings``' workers, buffers (the read prefetch
    counted in batches) and read threads, and the batches in one epoch of ``dataset``."""
    per_batch = read_elements_per_batch(at_setting(dataset, settings))  # type: ignore[arg-type]
    return LoaderShape(workers=settings.workers,
                       per_worker_buffer=settings.per_worker_buffer if settings.workers else 0,
                       prefetch_batches=read_prefetch_batches(settings.prefetch, per_batch),
                       epoch_steps=_epoch_batches(dataset), threads=settings.threads,
                       elements_per_batch=per_batch)


def measure_real(workload: Workload, dataset: InputPipeline, settings: GrainSettings,
                 steps: int, timeout_s: float | None,
                 clock: Callable[[], float] = time.perf_counter, *,
                 profile_dir: str | None = None, plan: RealPlan | None = None) -> RealRun:
    """Train ``steps`` steps (or more: ``plan_real``) on the real pipeline read with
    ``settings``, timed by the lagged sync, with the sync locator sampling this thread. With
    ``profile_dir``, ``PROFILE_STEPS`` more steps follow, captured with jax.profiler there:
    the profiler's own cost never enters the measured steps (the captured ones are not part
    of the record). ``plan``: ``plan_real``'s, when the caller made it already."""
    plan = plan or plan_real(dataset, settings, steps)
    steps = plan.steps
    before_init = clock()
    state = workload.init_state()  # its host time: what a loader started first would overlap
    init_s = clock() - before_init
    recorder = SpanRecorder(clock)
    extra = PROFILE_STEPS if profile_dir else 0
    window = ProfileWindow(range(steps, steps + extra), profile_dir) if profile_dir else None
    hooks = workload.hooks if window is None else (*workload.hooks, _window_hook(window))
    with open_batches(dataset, settings, timeout_s=timeout_s) as batches, \
            CompileWatcher(workload.train_step_name, clock) as watcher, \
            SyncLocator(clock=clock) as locator:
        try:
            outcome = run_lagged_sync_loop(
                workload.train_step, state, batches, steps + extra, recorder,
                put=workload.put, hooks=hooks, compiles=lambda: watcher.compiles)
        finally:
            if window is not None:
                window.close()
    measured = outcome.steps[:steps]
    # Compiled again on real batches (the synthetic run compiled the step first): explain.
    findings = tuple(watcher.findings()) if watcher.compiles else ()
    events = (*watcher.events, *watcher.other_events)
    tagged, anomalies = with_anomalies(tag_warmup(measured, plan.warmup),
                                       compiles_per_step(recorder, events))
    # the sync locator sampled the captured steps too: its sites cover every step
    return RealRun(tagged, tuple(locator.sites()), findings, recorder, len(outcome.steps),
                   events, anomalies, warnings=(plan.warning,) if plan.warning else (),
                   loader=loader_shape(dataset, settings), init_s=init_s)


PROFILE_STEPS = 30
"""Steps ``compare --profile`` captures after the measured ones: enough steady steps for a
firm ``pipecheck profile`` verdict, few enough to keep the capture small."""


def _window_hook(window: ProfileWindow) -> StepHook:
    """A step hook that starts the capture before the next step is fetched."""
    def hook(step: int, state: PyTree, metrics: PyTree, recorder: HookRecorder) -> None:
        window.at_step(step + 1)
    return hook


def load_real_run(path: str, config: Mapping[str, object], one_workload: bool = True
                  ) -> MonitorResult:
    """The Monitor run of the user's own loop at ``path`` (read without starting JAX).

    With ``one_workload`` (T or D measured on ``config``'s workload), a run of another
    workload is refused: a verdict on T, D and R from two workloads means nothing."""
    run = store.load(path, expect=MonitorResult)
    differs = other_workload(run.config, config) if one_workload else None
    if differs:
        raise ConfigError(
            f"--real {path}: {differs}; a verdict needs T, D and R from one workload: point "
            "compare at your loop's code with --config FILE (workload: init, train_step and "
            "dataset entry points, see docs/user-workloads.md), or give --synthetic and "
            "--dataloader files measured on it")
    return run


def real_of(path: str, run: MonitorResult, config: Mapping[str, object]) -> RealRun:
    """R from a Monitor run: its steps (tagged as in pipecheck's run, its anomalies kept) and
    sync sites, with a warning when it ran elsewhere (reads this environment: JAX starts)."""
    steps, _ = with_anomalies(run.steps)
    warnings = input_warnings(path, run.env, run.config or None, config)
    return RealRun(steps, tuple(run.sync_sites), total_steps=run.total_steps,
                   anomalies=tuple(run.anomalies), warnings=tuple(warnings),
                   loader=shape_of_config(run.config), startup=run.startup)


def read_real_run(path: str, config: Mapping[str, object], one_workload: bool = True
                  ) -> RealRun:
    """``load_real_run`` then ``real_of``."""
    return real_of(path, load_real_run(path, config, one_workload), config)


def real_stage(workload: Workload, parts: Callable[[], LoaderParts], chosen: LoaderSetting,
               steps: int, timeout_s: float | None, progress: Progress,
               clock: Callable[[], float] = time.perf_counter,
               profile_dir: str | None = None) -> RealRun:
    """compare's step 3 measured: R on the real pipeline at ``chosen`` (``read_real_run``
    reads it from a Monitor run instead)."""
    dataset = parts().dataset
    plan = plan_real(dataset, chosen.settings, steps)
    longer = f" (asked: {steps}; {plan.warmup} warm-up)" if plan.steps != steps else ""
    progress.say(f"[3/4] real-data training: {plan.steps} steps{longer} with "
                 f"{chosen.settings.label()}")
    return measure_real(workload, dataset, chosen.settings, steps, timeout_s, clock,
                        profile_dir=profile_dir, plan=plan)
