"""``pipecheck dataloader``: the Grain input pipeline alone, per worker/thread setting.

For each (workers, threads) setting the workload's pipeline is built with
``grain_pipeline.build_iter_dataset`` and Grain's STAGE_TIMING tracking, then:

- the *first batch* (iterator creation, worker spawn, first read, device_put) is timed
  on its own;
- the next ``batches`` batches are timed one by one: between two ``next()`` calls the loop
  only moves the batch to the devices (``device_put`` with the workload's sharding, as a
  training loop does, unless ``device_put=False``) and reads the clock, so the measurement
  does not slow the pipeline down;
- throughput (batches/s, examples/s, tokens/s) is the number of timed batches over their
  summed time: the first batch is in neither;
- Grain's execution summary gives the per-stage breakdown (which transformation the
  pipeline waits on), merged over the workers;
- the iterator is closed and every worker process it started is gone before the next
  setting, also when a worker raised, the pipeline stalled (``timeout_s``) or on Ctrl-C.

Everything that touches time is injected (``clock``, the iterator factory, ``arm``) so the
timing logic is tested exactly with a fake clock.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import math
import re
import time
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence, TypeVar

import numpy as np

from pipecheck import stats
from pipecheck.analysis.loader.loader_limits import limit_findings
from pipecheck.analysis.loader.slow_samples import slow_samples, slow_samples_finding
from pipecheck.analysis.loader.storage import reads_of, storage_finding
from pipecheck.analysis.loader.warm_cache import cache_warnings
from pipecheck.analysis.steady_state import (
    loader_estimate,
    steady_batch_samples,
    steady_batch_start,
)
from pipecheck.config import RunConfig
from pipecheck.data.grain_dataloader import is_data_loader
from pipecheck.data.grain_pipeline import (
    Asked,
    InputPipeline,
    OwnSettings,
    build_iter_dataset,
    ensure_absl_flags_parsed,
    grain_stage_summary,
    new_shm_tag,
    own_settings,
    read_elements_per_batch,
)
from pipecheck.data.per_setting import PerSetting, at_setting
from pipecheck.errors import ConfigError, PipelineExhaustedError
from pipecheck.host_cpus import usable_cores
from pipecheck.measure.element_cost import timed_stage
from pipecheck.measure.page_cache import (
    NO_CACHE_WATCH,
    CacheSeen,
    CacheWatch,
    DataFiles,
    cold_problem,
    data_files,
)
from pipecheck.measure.pipeline import (
    PipelineStalled,
    StallTimer,
    release,
    stall_error,
    worker_pids,
)
from pipecheck.measure.resources import ResourceProbe, ResourceWindow
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.common import Distribution, Finding
from pipecheck.records.dataloader import (
    DataloaderResult,
    ElementCosts,
    LoaderSetting,
    Resources,
    Stage,
)
from pipecheck.records.env import collect_env
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER, GrainSettings
from pipecheck.records.grain_settings import DEFAULT_THREADS as DEFAULT_THREADS
from pipecheck.step_types import Batch
from pipecheck.user_code import pipeline_error
from pipecheck.workloads import build_workload, kind_of
from pipecheck.workloads.base import Workload
from pipecheck.workloads.devices import batch_sharding, data_mesh, host_batch_size, put_global

if TYPE_CHECKING:  # Grain is imported where used: `import pipecheck` stays light
    import grain
    from grain.proto.execution_summary_pb2 import ExecutionSummary

DEFAULT_BATCHES = 50
DEFAULT_TIMEOUT_S = 120.0
STAGE_SUMMARY_WAIT_S = 6.0
"""How long to wait, after timing, for the workers' stage reports to cover every batch."""
BUFFER_WARNING_FACTOR = 4
"""Warn when fewer timed batches than this many times what the workers buffer at start-up."""






# --- pure timing logic ----------------------------------------------------------------------
B = TypeVar("B")
"""A batch as the iterator timed gives it (a pipeline's: ``Batch``)."""


@dataclasses.dataclass
class BatchTiming:
    first_batch_s: float
    samples: list[float]
    first_batch: object
    """The first batch, as given (its sizes are read: ``batch_sizes``)."""


def _no_arm() -> None:
    return None


def time_batches(
    open_iterator: Callable[[], Iterator[B]],
    n_batches: int,
    *,
    put: Callable[[B], B] | None = None,
    clock: Callable[[], float] = time.perf_counter,
    arm: Callable[[], None] = _no_arm,
    on_first: Callable[[float], None] | None = None,
    window_at: int = 0,
    on_window: Callable[[], None] | None = None,
) -> BatchTiming:
    """Time the first batch (iterator creation included), then ``n_batches`` more.

    Between two clock readings the loop does exactly what a training loop does with a
    batch before using it: ``next()`` and, when given, ``put`` (device_put). ``arm``
    (re)starts the stall timer before each ``next()``. ``on_first`` (progress output) runs
    after the first batch, ``on_window`` (opening the resource window) after ``window_at``
    timed batches (0: right after the first batch): both at a batch boundary, outside every
    timed interval.
    """
    if n_batches < 1:
        raise ValueError("n_batches must be >= 1")
    if not 0 <= window_at < n_batches:
        raise ValueError(f"window_at must be in 0..{n_batches - 1}, got {window_at}")
    t0 = clock()
    arm()
    it = open_iterator()
    batch = next(it)
    first = batch
    if put is not None:
        batch = put(batch)
    first_s = clock() - t0
    if on_first is not None:
        on_first(first_s)
    samples: list[float] = []
    for i in range(n_batches):
        if i == window_at and on_window is not None:
            on_window()
        if i == 0 or (i == window_at and on_window is not None):
            prev = clock()
        arm()
        batch = next(it)
        if put is not None:
            batch = put(batch)
        now = clock()
        samples.append(now - prev)
        prev = now
    return BatchTiming(first_s, samples, first)


def throughput(samples: Sequence[float], examples_per_batch: int,
               tokens_per_batch: int | None) -> tuple[float, float, float | None]:
    """Batches/s, examples/s and tokens/s over the timed batches only (not the first)."""
    total = float(sum(samples))
    if not samples or total <= 0:
        return math.nan, math.nan, None
    bps = len(samples) / total
    return bps, bps * examples_per_batch, (bps * tokens_per_batch if tokens_per_batch else None)


def batch_sizes(batch: object, tokens_key: str | None) -> tuple[int, int | None]:
    """Examples per batch (leading dimension) and tokens per batch (size of ``tokens_key``)."""
    leaves = list(batch.values()) if isinstance(batch, Mapping) else [batch]
    if not leaves:
        return 0, None
    first = np.asarray(leaves[0])
    examples = int(first.shape[0]) if first.ndim else 1
    tokens = None
    if tokens_key is not None and isinstance(batch, Mapping) and tokens_key in batch:
        tokens = int(np.asarray(batch[tokens_key]).size)
    return examples, tokens


# --- Grain stage summary -> stages (pure on the proto) -------------------------------------
def _is_worker_prefetch(node: ExecutionSummary.Node) -> bool:
    return bool(node.is_prefetch) and node.name.startswith("ProcessPrefetch")


def _worker_node_ids(summary: ExecutionSummary) -> set[int]:
    """Ids of the nodes that run inside worker processes (below a ProcessPrefetch node)."""
    below: set[int] = set()
    todo = [i for n in summary.nodes.values() if _is_worker_prefetch(n) for i in n.inputs]
    while todo:
        i = todo.pop()
        if i in below or i not in summary.nodes:
            continue
        below.add(i)
        todo.extend(summary.nodes[i].inputs)
    return below


def produced_batches(summary: ExecutionSummary) -> int:
    """Batches the summary accounts for: the workers' output nodes, else the output node."""
    outputs = [i for n in summary.nodes.values() if _is_worker_prefetch(n) for i in n.inputs]
    if outputs:
        return sum(int(summary.nodes[i].num_produced_elements) for i in outputs
                   if i in summary.nodes)
    if 0 in summary.nodes:
        return int(summary.nodes[0].num_produced_elements)
    return 0


_OBJECT_REPR = re.compile(r"<(?:[\w.]+\.)?(\w+) object at 0x[0-9a-fA-F]+>")


def short_stage_name(name: str) -> str:
    """Grain's node name without the source location (`` @ .../file.py:12``) and with
    ``<pkg.mod.Class object at 0x...>`` shortened to ``Class``."""
    head, sep, _ = name.partition(" @ ")
    if sep and head.count("(") > head.count(")"):
        head += ")"
    return _OBJECT_REPR.sub(r"\1", head)


def stages_from_summary(summary: ExecutionSummary) -> tuple[Stage, ...]:
    """Stages of a Grain execution summary, in pipeline order (output first).

    Prefetch nodes (thread and process prefetch) are left out: Grain distributes their
    wait over the stages below them.
    """
    workers = _worker_node_ids(summary)
    out = []
    for node_id in sorted(summary.nodes):
        node = summary.nodes[node_id]
        if node.is_prefetch:
            continue
        n = int(node.num_produced_elements)
        total = node.total_processing_time_ns / 1e9
        out.append(Stage(
            name=short_stage_name(node.name),
            where="workers" if node_id in workers else "main",
            wait_ratio=float(node.wait_time_ratio),
            total_s=total,
            avg_s=total / n if n else math.nan,
            n=n,
        ))
    return tuple(out)


def collect_stages(
    get_summary: Callable[[], ExecutionSummary],
    consumed: int,
    wait_s: float = STAGE_SUMMARY_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    poll_s: float = 0.1,
) -> tuple[tuple[Stage, ...], bool]:
    """Read Grain's summary until it covers ``consumed`` batches (or ``wait_s`` passed).

    Grain folds stage timings in periodically and workers send theirs through a queue,
    so a summary read right after the loop can lag behind; each read takes the next one.
    """
    deadline = clock() + wait_s
    while True:
        summary = get_summary()
        if produced_batches(summary) >= consumed:
            return stages_from_summary(summary), True
        if clock() >= deadline:
            return stages_from_summary(summary), False
        sleep(poll_s)


# --- measurement ------------------------------------------------------------------------------
@dataclasses.dataclass
class LoaderParts:
    """What the measurement needs from a workload: its dataset, how training puts a batch on
    the devices, and which batch entry holds tokens."""

    dataset: InputPipeline | None
    put: Callable[[Batch], Batch]
    tokens_key: str | None

    @functools.cached_property
    def own(self) -> OwnSettings:
        """The Grain knobs the pipeline fixes itself (``own_settings``), read once: every
        setting measured on it, and every option refused, takes them from here."""
        return own_settings(self.dataset) if self.dataset is not None else OwnSettings()

    @functools.cached_property
    def files(self) -> DataFiles:
        """The data files the pipeline's sources read (``page_cache.data_files``), found
        once: every setting's page-cache residency reads them, and ``--cold`` evicts them."""
        return data_files(self.dataset)

    def refuse_cold(self) -> None:
        """A ConfigError when ``--cold`` cannot evict this pipeline's data files (run before
        anything is measured)."""
        problem = cold_problem(self.files)
        if problem is not None:
            raise ConfigError(problem)


def loader_parts(config: RunConfig, workload: Workload | None = None) -> LoaderParts:
    """The workload's dataset and device_put: from ``workload`` when it is built already,
    else without building its model or train step where the registry can (built-in
    workloads); user workloads are built through their entry points."""
    kind = kind_of(config.workload)
    if workload is None and kind.loader is not None:  # the framework's pipeline and put
        dataset, put = kind.loader(config)
        return LoaderParts(dataset, put, kind.tokens_key)
    if workload is None and kind.dataset is None:
        workload = build_workload(config)
        if workload.dataset is None:
            raise ConfigError("this user workload has no dataset entry point; "
                              "pipecheck dataloader needs workload.dataset")
    if workload is not None:
        return LoaderParts(workload.dataset() if workload.dataset else None, workload.put,
                           workload.tokens_key)
    assert kind.dataset is not None
    mesh = data_mesh(config["devices"])  # first: CPU devices are set before JAX starts
    host_batch_size(config["batch_size"], config["devices"])  # the one-line error, early
    return LoaderParts(kind.dataset(config), put_global(batch_sharding(mesh)), kind.tokens_key)


@dataclasses.dataclass
class OpenedPipeline:
    """One setting's pipeline while it runs: the iterators opened on it (for the clean-up)
    and how many batches were asked for."""

    dataset: grain.IterDataset
    """The IterDataset built for the setting."""
    iterators: list[Iterator[Batch]] = dataclasses.field(default_factory=list)
    asked: int = 0

    def open(self) -> Iterator[Batch]:
        it = iter(self.dataset)
        self.iterators.append(it)
        return it


def _time_guarded(pipeline: OpenedPipeline, n_batches: int,
                  put: Callable[[Batch], Batch] | None, clock: Callable[[], float],
                  timeout_s: float | None, on_first: Callable[[float], None],
                  window: ResourceWindow | None = None) -> BatchTiming:
    """``time_batches`` under the stall timer, counting in ``pipeline`` the batches asked for.
    The resource ``window`` opens at its batch boundary."""
    with StallTimer(timeout_s) as timer:

        def arm() -> None:
            pipeline.asked += 1
            timer.arm()

        try:
            return time_batches(pipeline.open, n_batches, put=put, clock=clock, arm=arm,
                                on_first=on_first,
                                window_at=window.start_after if window else 0,
                                on_window=window.open if window else None)
        finally:
            timer.disarm()


def _failure(e: BaseException, label: str, waits: int, timeout_s: float | None
             ) -> BaseException:
    """The error a failed setting raises (after its clean-up), as one line."""
    if isinstance(e, PipelineStalled):
        return stall_error(label, timeout_s, arrived=waits - 1)
    if isinstance(e, KeyboardInterrupt):
        return KeyboardInterrupt()
    if isinstance(e, StopIteration):
        return PipelineExhaustedError(
            f"the input pipeline ({label}) ran out of batches after {max(0, waits - 1)}; "
            "repeat the dataset or ask for fewer --batches")
    return pipeline_error(e, label)  # a worker's or transform's exception


def _setting(timing: BatchTiming, settings: GrainSettings, n_batches: int,
             stages: tuple[Stage, ...], complete: bool, stage_wait_s: float,
             tokens_key: str | None, data_loader: bool,
             usage: Resources | None = None,
             own_note: str | None = None, per_batch: int = 1,
             cache: CacheSeen | None = None) -> LoaderSetting:
    """The record of a timed setting: throughput, D, quality warnings, stages, the reading
    stage and the page cache (``per_batch``: the read elements a batch takes at least,
    ``read_elements_per_batch``)."""
    examples, tokens = batch_sizes(timing.first_batch, tokens_key)
    bps, eps, tps = throughput(timing.samples, examples, tokens)
    batch_time = Distribution.of(timing.samples)
    warnings = stats.quality_warnings(batch_time.summary, what="batch time")
    workers = settings.workers
    buffered = workers * settings.per_worker_buffer
    if workers and n_batches < BUFFER_WARNING_FACTOR * buffered:
        warnings.append(
            f"only {n_batches} timed batches with {workers} workers: about {buffered} batches "
            "are buffered while the first one is awaited and then arrive at once; time at "
            f"least {BUFFER_WARNING_FACTOR * buffered} (--batches) for a steady-state median")
    if data_loader:
        warnings.append("no stage breakdown: Grain's stage timing does not reach inside a "
                        "grain.DataLoader (a MapDataset pipeline gets one)")
    elif not complete:
        warnings.append("the workers' stage timings did not cover every batch in "
                        f"{stage_wait_s:g} s; the stage breakdown is partial")
    if own_note is not None:
        warnings.append(own_note)
    reads = reads_of(stages)
    page = None if cache is None else dataclasses.replace(cache.page_cache, warnings=tuple(
        cache_warnings(timing.samples, reads, cache.page_cache, cache.records,
                       cache.available_bytes,
                       ahead_reads=settings.prefetch + buffered * per_batch)))
    return LoaderSetting(
        settings=settings,
        first_batch_s=timing.first_batch_s,
        batch_time=batch_time,
        batches_per_s=bps,
        examples_per_s=eps,
        tokens_per_s=tps,
        examples_per_batch=examples,
        stages=stages,
        stages_complete=complete,
        warnings=tuple(warnings),
        loader_time=loader_estimate(timing.samples, workers, settings.per_worker_buffer,
                                    parallel=settings.parallel_reads(),
                                    read_prefetch=settings.prefetch,
                                    elements_per_batch=per_batch),
        resources=usage,
        reads=reads,
        page_cache=page,
    )


def _resource_window(settings: GrainSettings, n_batches: int, before: set[int],
                     clock: Callable[[], float], per_batch: int = 1) -> ResourceWindow:
    """The probe of this setting's workers (the processes started since ``before``), opened
    past the batches buffered at start-up: the steady batches D counts."""
    return ResourceWindow(
        ResourceProbe(lambda: worker_pids() - before, clock=clock),
        steady_batch_start(n_batches, settings.workers, settings.per_worker_buffer,
                           settings.prefetch, per_batch))


@dataclasses.dataclass
class _Timed:
    """What one setting's run measured, before it becomes a record."""

    timing: BatchTiming
    usage: Resources | None
    stages: tuple[Stage, ...]
    complete: bool


def _run(pipeline: OpenedPipeline, data_loader: bool, n_batches: int,
         put: Callable[[Batch], Batch] | None, clock: Callable[[], float],
         timeout_s: float | None, on_first: Callable[[float], None],
         window: ResourceWindow | None, stage_wait_s: float) -> _Timed:
    """Time the batches, close the resource window, then read Grain's stage timing."""
    timing = _time_guarded(pipeline, n_batches, put, clock, timeout_s, on_first, window)
    usage = window.close(n_batches) if window is not None else None
    stages: tuple[Stage, ...] = ()
    complete = False
    if not data_loader:
        first = pipeline.iterators[0]
        stages, complete = collect_stages(lambda: grain_stage_summary(first),
                                          consumed=n_batches + 1, wait_s=stage_wait_s)
    return _Timed(timing, usage, stages, complete)


def collect_earlier_garbage() -> None:
    """Collect the garbage of what ran before a setting (a model's set-up, T's compile, the
    last setting), outside its timed window: otherwise the full collection it made due lands
    on one batch of a short window (a MaxText heap: ~280 ms against 2.4 ms batches) and D, a
    mean, reads it as the pipeline's cost. The pipeline's own garbage is still collected
    inside the window, as in training; MaxText's train loop collects before its loop too."""
    gc.collect()


def _first_reporter(progress: Progress, label: str, n_batches: int
                    ) -> Callable[[float], None]:
    """What a setting says on progress once its first batch came."""

    def report_first(seconds: float) -> None:
        progress.say(f"{label}: first batch after {seconds:.2f} s; timing {n_batches} batches")

    return report_first


def measure_setting(
    dataset: InputPipeline,
    settings: GrainSettings,
    n_batches: int,
    *,
    put: Callable[[Batch], Batch] | None,
    tokens_key: str | None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    clock: Callable[[], float] = time.perf_counter,
    stage_wait_s: float = STAGE_SUMMARY_WAIT_S,
    progress: Progress = NO_PROGRESS,
    resources: bool = True,
    own: OwnSettings | None = None,
    cache: CacheWatch = NO_CACHE_WATCH,
) -> LoaderSetting:
    """Measure one setting; the iterator and its workers are gone when this returns.

    A pipeline that sets its own read options or runs its own workers is measured with them
    (``own``: what it fixes, as ``LoaderParts.own`` read it; read here when not given), with a
    warning saying so; one built per setting (MaxText's) is built at ``settings``. With
    ``resources``, the CPU time and peak memory of the training process and the workers over
    the steady batches are read too (``ResourceProbe``, in a window opened past the batches
    buffered at start-up). ``cache`` reads the data files' page cache before the setting
    (evicting them for --cold) and after it. Both outside every timed interval."""
    per_setting = isinstance(dataset, PerSetting)
    dataset = at_setting(dataset, settings)
    own = own_settings(dataset) if own is None or per_setting else own  # per setting: as built
    settings = own.applied(settings)
    data_loader = is_data_loader(dataset)
    label = settings.short_label()
    before, shm_tag = worker_pids(), new_shm_tag()
    collect_earlier_garbage()
    cache.start()
    pipeline = OpenedPipeline(build_iter_dataset(dataset, settings, stage_timing=True,
                                                 shm_tag=shm_tag, own=own))
    per_batch = read_elements_per_batch(dataset)
    window = _resource_window(settings, n_batches, before, clock, per_batch) if resources else None
    # Errors are turned into messages inside the except clause but raised only after the
    # clean-up: the original exception's traceback holds batches in shared memory, which
    # must be released before the workers are gone (or they are reported as leaked).
    error: BaseException | None = None
    stalled = False
    timed: _Timed | None = None
    try:
        timed = _run(pipeline, data_loader, n_batches, put, clock, timeout_s,
                     _first_reporter(progress, label, n_batches), window, stage_wait_s)
    except (PipelineStalled, KeyboardInterrupt, Exception) as e:  # noqa: BLE001 - any failure
        stalled = isinstance(e, PipelineStalled)
        error = _failure(e, label, pipeline.asked, timeout_s)  # text only: no frame outlives it
        del e
    if window is not None:
        window.abandon()
    release(pipeline.iterators, before, failed=stalled, shm_tag=shm_tag)
    if error is not None:
        raise error
    assert timed is not None
    return _setting(timed.timing, settings, n_batches, timed.stages, timed.complete,
                    stage_wait_s, tokens_key, data_loader, timed.usage,
                    None if per_setting else own.note(), per_batch, cache.seen())


def settings_grid(workers: Sequence[int], threads: Sequence[int],
                  buffers: Sequence[int] = (DEFAULT_PER_WORKER_BUFFER,),
                  prefetch: Sequence[int] = (0,)) -> list[GrainSettings]:
    """Every combination, workers varying slowest, duplicates removed (the per-worker buffer
    means nothing without workers; prefetch 0 is ``default_prefetch(threads)``)."""
    out: list[GrainSettings] = []
    for w in workers:
        for t in threads:
            for b in buffers:
                for p in prefetch:
                    s = GrainSettings(w, b if w else DEFAULT_PER_WORKER_BUFFER, t, p)
                    if s not in out:
                        out.append(s)
    return out


def measure_dataloader(
    config: RunConfig,
    workers: Sequence[int] = (0,),
    threads: Sequence[int] = (DEFAULT_THREADS,),
    batches: int = DEFAULT_BATCHES,
    *,
    device_put: bool = True,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    clock: Callable[[], float] = time.perf_counter,
    parts: LoaderParts | None = None,
    progress: Progress = NO_PROGRESS,
    buffers: Sequence[int] = (DEFAULT_PER_WORKER_BUFFER,),
    prefetch: Sequence[int] = (0,),
    ram_budget_mb: float | None = None,
    asked_by: Mapping[str, str] | None = None,
    time_elements: bool = True,
    cold: bool = False,
) -> DataloaderResult:
    """Measure the workload's input pipeline for every combination of the knobs given.

    ``asked_by`` names, per knob (``workers``, ``per_worker_buffer``, ``threads``,
    ``prefetch``), the option or config key the user set its values with: a value the
    pipeline would not run with (it fixes that knob itself) is refused with a ConfigError
    before anything is measured. Knobs left out hold pipecheck's defaults, which yield to
    what the pipeline fixes (a warning says so). With ``time_elements``, the expensive
    stage's elements are timed afterwards (``element_costs``). With ``cold``, the data files
    are evicted from the page cache before each setting (refused with a ConfigError before
    anything is measured where they cannot be)."""

    ensure_absl_flags_parsed()
    parts = parts or loader_parts(config)
    grid = _grid(parts, {"workers": workers, "per_worker_buffer": buffers, "threads": threads,
                         "prefetch": prefetch}, asked_by or {}, cold)
    env = collect_env()
    results = [
        measure_setting(parts.dataset, s, batches,
                        put=parts.put if device_put else None, tokens_key=parts.tokens_key,
                        timeout_s=timeout_s, clock=clock, progress=progress, own=parts.own,
                        cache=CacheWatch(parts.files, cold))
        for s in grid
    ]
    costs, sample_findings = element_costs(parts.dataset, results) if time_elements \
        else (None, ())
    return DataloaderResult(
        env=env,
        config=config.to_dict(),
        results=tuple(results),
        batches=batches,
        device_put=device_put,
        timeout_s=timeout_s,
        ram_budget_mb=ram_budget_mb,
        limit_findings=tuple(limit_findings(results, usable_cores(), ram_budget_mb)),
        element_costs=costs,
        sample_findings=sample_findings,
        storage_findings=_storage_findings(config, results),
        cold=cold,
    )


def _grid(parts: LoaderParts, lists: Mapping[str, Sequence[int]], asked_by: Mapping[str, str],
          cold: bool) -> list[GrainSettings]:
    """The settings to measure as they run on the pipeline (what it fixes itself measured
    once), after refusing what it would not run with: a value asked for a knob it fixes,
    --cold on files that cannot be evicted."""
    parts.own.refuse([Asked(option, knob, tuple(lists[knob])) for knob, option in
                      asked_by.items()])
    if cold:
        parts.refuse_cold()
    grid: list[GrainSettings] = []
    for s in settings_grid(lists["workers"], lists["threads"], lists["per_worker_buffer"],
                           lists["prefetch"]):
        if parts.own.applied(s) not in grid:
            grid.append(parts.own.applied(s))
    return grid


def _storage_findings(config: RunConfig, results: Sequence[LoaderSetting]
                      ) -> tuple[Finding, ...]:
    """The storage-bound finding, its fix written the workload's way."""
    finding = storage_finding(results, kind_of(config.workload).read_options_text)
    return (finding,) if finding is not None else ()


def element_costs(dataset: InputPipeline | None, results: Sequence[LoaderSetting]
                  ) -> tuple[ElementCosts | None, tuple[Finding, ...]]:
    """The expensive stage's per-element costs, timed after every setting was measured (on
    the stages of the first setting that has them), and the slow-samples finding they give
    against that setting's steady batch times."""
    setting = next((r for r in results if r.stages), None)
    if dataset is None or setting is None:
        return None, ()
    timed = timed_stage(dataset, setting.stages, short_stage_name, setting.examples_per_batch)
    if timed is None:
        return None, ()
    steady = steady_batch_samples(setting.batch_time.samples_s, setting.workers,
                                  setting.per_worker_buffer, setting.settings.prefetch)
    found = slow_samples(timed.name, timed.costs, timed.per_batch, steady)
    finding = slow_samples_finding(found) if found is not None else None
    return (ElementCosts(timed.name, Distribution.of(timed.costs), timed.per_batch),
            (finding,) if finding else ())
