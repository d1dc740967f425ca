"""A model of the loader time D as a function of Grain's four knobs and the host's cores,
fitted to the settings a run measured. Pure: no I/O, no clock.

A batch costs ``c`` seconds of GIL-holding CPU in a worker (measured: the workers' CPU per
batch; the transforms' share of it is no more than ``m0``), ``s`` seconds of waiting besides
(I/O, latency; fitted), ``m`` seconds of the training process's own work with workers
(measured: receiving, collating, work after ``mp_prefetch``) and ``m0`` without workers
(measured: the transforms included; its CPU time per batch, or D where D is shorter: read
threads that release the GIL run part of it on another core at once). Each resource sets a
floor on the time per batch:

- the transform stage: one process runs ``p = min(threads, prefetch)`` reads at once, which
  overlap their waiting but not their CPU (the GIL): ``max(c, (min(c, m0) + s) / p)`` per
  batch per process (a worker sends each batch beside its read threads), divided over
  ``W`` workers (no workers: in the training process);
- the training process: ``m`` with workers, ``m0`` without;
- the cores: ``cpu_scale x (c + m) / N`` on ``N`` cores (without workers, the training
  process's whole CPU per batch over ``N``), slowed by ``contention`` per
  runnable process past the cores (``cpu_scale``: the share of the cores other programs
  left the loader, fitted).

D is the p-norm of the floors (``sharpness`` fitted: queues make D smoother than the
largest floor alone near the point where two floors cross); the largest floor names what
binds. The per-worker buffer and a prefetch beyond the threads only absorb bursts: the model
gives them no effect on the steady rate (docs/whatif.md says where that breaks).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Iterable, Sequence, TypeVar

import numpy as np

from pipecheck.analysis.loader.loader_limits import main_time_per_batch
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER, GrainSettings
from pipecheck.records.whatif import Interval, LoaderModelFit

MIN_SETTINGS = 2
"""Settings needed to fit the one free cost (the waiting per batch) and still see a second
point: one setting fits any latency exactly and checks nothing."""

MAX_NOISE = 0.25
"""Measured D intervals wider than +-25% (median over the settings) are the shared 2-core
machine's worst reading-to-reading spread (tuner.READING_NOISE): past it a fit follows noise."""

MAX_FIT_ERROR = 0.25
"""A model that misses the settings it was fitted to (each left out in turn) by more than
25% in the median does not describe this pipeline: no prediction rather than a wrong one."""

FIT_ERROR_FLOOR = 0.05
"""The least model error an interval assumes: with two or three settings the fit can look
exact, which says nothing about a setting it did not see."""

EXTRAPOLATION_WIDENING = 1.5
"""An interval is widened by half again for a setting past the most workers or parallel
reads measured: the model's shape there was never checked."""

SHARPNESS = (16.0, 8.0, 6.0, 4.0, 3.0, 2.0)
"""p-norm exponents tried, sharpest first: 16 is practically the largest floor alone, 2 a
smooth hand-over between resources (queues)."""

CPU_SCALE = (1.0, 0.9, 0.8, 0.7, 1.15, 1.3, 1.6, 2.0, 2.5)
"""Multiples of the measured CPU per batch tried for the cores' floor, as measured first:
CPU time per batch read over a few dozen batches moves by 10-20% between settings, and on a
machine other programs share the loader gets fewer cores than it has (up to 2.5x fewer
seen here on 2 shared cores)."""

CLEARLY_BETTER = 2.0
"""A candidate beyond the plainest (sharpest, as-measured CPU, no contention) is taken only
when it lowers the weighted squared error (errors in units of each setting's noise, a
chi-square) by 2, Akaike's price of one more fitted number: with few settings the extra
numbers otherwise fit noise."""

CONTENTION = (0.0, 0.1, 0.25, 0.5, 1.0)
"""Slow-downs per runnable process past the cores tried when enough settings were measured."""

MIN_SETTINGS_FOR_CONTENTION = 5
"""Contention is a third fitted number: fewer settings than this fit it to noise."""

LATENCY_GRID = 160
"""Candidate waiting times per batch tried (log-spaced), plus zero."""

WEIGHT_FLOOR = 0.05
"""A setting's weight is 1 / (its relative half-width^2 + 0.05^2): a very tight interval
counts no more than a 5% one (the model is no better than that)."""

MAIN_PROCESS = "main-process"
CPU_CORES = "cpu-cores"
MEMORY = "memory"
COMPUTE = "compute"
TRANSFORMS = "transforms"
"""The stage name used when Grain's stage timing named none."""


class NotPredictable(ValueError):
    """Why this record cannot be predicted from (one line, with the fix)."""


class MissingNumbers(NotPredictable):
    """The record lacks numbers the model needs (written before they were measured): bad
    input rather than a pipeline the model cannot describe."""


@dataclasses.dataclass(frozen=True)
class Point:
    """One measured setting as the fit sees it."""

    settings: GrainSettings
    d: float
    rel_noise: float


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A predicted time with its interval and what binds it."""

    interval: Interval
    binding: str
    floors: dict[str, float]
    extrapolated: bool = False
    over_memory: bool = False


def same_to_model(a: GrainSettings, b: GrainSettings) -> bool:
    """Settings the model cannot tell apart (the same workers and reads at once; the
    buffers beyond them do not enter it): one measured, the other predicts nothing new."""
    return (a.workers, a.threads == 0, reads_per_process(a)) == \
        (b.workers, b.threads == 0, reads_per_process(b))


def reads_per_process(g: GrainSettings) -> int:
    """Reads one process runs at once: min(threads, prefetch); 0 threads read inline."""
    return 1 if g.threads == 0 else max(1, min(g.threads, g.prefetch))


@dataclasses.dataclass(frozen=True)
class Costs:
    """What a batch costs: measured (``c``, ``m``, ``main0``) and fitted (the rest)."""

    c: float
    """CPU seconds in the transforms."""
    m: float
    """The training process's own seconds with workers."""
    main0: float
    """The training process's seconds without workers (transforms included) that cannot
    overlap: its CPU per batch, at most D."""
    main0_cpu: float
    """The training process's CPU seconds per batch without workers, all of it (read
    threads beside the training thread included): what it asks of the cores."""
    s: float = 0.0
    contention: float = 0.0
    cpu_scale: float = 1.0


Seconds = TypeVar("Seconds", float, np.ndarray)
"""A number of seconds or an array of them."""


def per_process(g: GrainSettings, c: float, main0: float, s: Seconds) -> Seconds:
    """Seconds per batch one process's reads take (``s`` a number or an array of them).
    The read threads overlap their waiting and, under the GIL, not their CPU; a worker
    also spends CPU sending each batch, beside its read threads, so only the transforms'
    share of ``c`` (no more than the training process's time without workers, ``main0``)
    is in the reads."""
    in_reads = min(c, main0)
    if g.workers == 0:
        c = in_reads
    if g.threads == 0:  # read inline: one after the other
        return c + s
    return np.maximum(c, (in_reads + s) / reads_per_process(g))


def floors(g: GrainSettings, cores: int, k: Costs, stage: str) -> dict[str, float]:
    """Seconds per batch each resource allows at setting ``g`` on ``cores`` cores."""
    slow = 1.0 + k.contention * max(0, g.workers + 1 - cores)
    c = k.c if g.workers else min(k.c, k.main0)
    main = k.main0 if g.workers == 0 else k.m
    cpu = k.cpu_scale * (c + k.m if g.workers else k.main0_cpu) / max(1, cores) * slow
    if g.workers == 0:
        if g.threads == 0:  # everything in one thread, one after the other
            return {stage: k.s + main, CPU_CORES: cpu}
        return {stage: float(per_process(g, k.c, k.main0, k.s)), MAIN_PROCESS: main,
                CPU_CORES: cpu}
    return {stage: float(per_process(g, k.c, k.main0, k.s)) / g.workers, MAIN_PROCESS: k.m,
            CPU_CORES: cpu}


def combine(values: Iterable[float], sharpness: float) -> float:
    """The p-norm of the floors: the largest, smoothed where others come close."""
    return float(sum(v ** sharpness for v in values if v > 0) ** (1.0 / sharpness))


def _stage_floor(g: GrainSettings, c: float, main0: float, s: np.ndarray) -> np.ndarray:
    """The transform stage's floor for every candidate latency ``s`` (``floors``' first)."""
    if g.workers == 0 and g.threads == 0:
        return s + main0
    return per_process(g, c, main0, s) / max(1, g.workers)


def _log_d(points: Sequence[Point], cores: int, k: Costs, s: np.ndarray,
           sharpness: float) -> np.ndarray:
    """log D predicted for every point (rows) and every candidate latency (columns)."""
    out = np.empty((len(points), len(s)))
    for i, pt in enumerate(points):
        others = list(floors(pt.settings, cores, k, "stage").values())[1:]
        total = _stage_floor(pt.settings, k.c, k.main0, s) ** sharpness
        for v in others:
            total = total + (v ** sharpness if v > 0 else 0.0)
        out[i] = np.log(np.maximum(total, 1e-300)) / sharpness  # all floors 0: no log(0)
    return out


@dataclasses.dataclass(frozen=True)
class _Fit:
    costs: Costs
    sharpness: float


def _fit(points: Sequence[Point], cores: int, measured: Costs) -> _Fit:
    """The waiting per batch, sharpness, contention and CPU scale that best explain the
    points (weighted least squares on log D over a grid; see ``CLEARLY_BETTER``)."""
    d = np.log([pt.d for pt in points])
    w = np.array([1.0 / (pt.rel_noise ** 2 + WEIGHT_FLOOR ** 2) for pt in points])
    top = max(pt.d * max(1, pt.settings.workers) * reads_per_process(pt.settings)
              for pt in points)
    s = np.concatenate([[0.0], np.geomspace(top * 1e-4, top * 2, LATENCY_GRID)])
    gammas = CONTENTION if len(points) >= MIN_SETTINGS_FOR_CONTENTION else (0.0,)
    best_loss, best = math.inf, _Fit(measured, SHARPNESS[0])
    for sharp in SHARPNESS:
        for gamma in gammas:
            for scale in CPU_SCALE:
                k = dataclasses.replace(measured, contention=gamma, cpu_scale=scale)
                loss = (w[:, None] * (_log_d(points, cores, k, s, sharp) - d[:, None]) ** 2
                        ).sum(axis=0)
                j = int(np.argmin(loss))
                plain = not math.isfinite(best_loss)
                if plain or loss[j] < best_loss - CLEARLY_BETTER:
                    best_loss = float(loss[j])
                    best = _Fit(dataclasses.replace(k, s=float(s[j])), sharp)
    return best


def _point_error(pt: Point, cores: int, f: _Fit) -> float:
    pred = combine(floors(pt.settings, cores, f.costs, "").values(), f.sharpness)
    return abs(pred - pt.d) / pt.d


def _fit_error(points: Sequence[Point], cores: int, measured: Costs, f: _Fit) -> float:
    """Median relative error over the points, each predicted by a fit without it (in-sample
    when fewer than three points leave too little to refit on)."""
    if len(points) < 3:
        return statistics.median(_point_error(pt, cores, f) for pt in points)
    errors = []
    for i, pt in enumerate(points):
        rest = [q for j, q in enumerate(points) if j != i]
        errors.append(_point_error(pt, cores, _fit(rest, cores, measured)))
    return statistics.median(errors)


def dominant_stage(settings: Sequence[LoaderSetting]) -> str:
    """The stage doing the per-batch work: the slowest per element among the workers'
    stages (or, with no workers' stages recorded, among a no-worker setting's), each stage
    at its least time over the settings. A stage's timed call includes waiting for the GIL
    while other read threads run, so with several threads a cheap stage (the source) can
    read slower than the one holding the GIL; contention only adds to a stage's time, so
    its least is the closest to its own cost. That undoes the GIL's waits where some setting
    ran one read thread (every search measures one); ``stage_seconds_per_batch`` also takes
    a stage's least time, per batch."""
    timed = [st for s in settings for st in s.stages
             if st.where == "workers" and st.n > 0 and math.isfinite(st.avg_s)]
    if not timed:
        timed = [st for s in settings if s.workers == 0 for st in s.stages
                 if st.n > 0 and math.isfinite(st.avg_s)]
    least: dict[str, float] = {}
    for st in timed:
        least[st.name] = min(st.avg_s, least.get(st.name, math.inf))
    return max(least, key=lambda name: least[name]) if least else TRANSFORMS


def _median(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return statistics.median(finite) if finite else math.nan


def _points(settings: Sequence[LoaderSetting]) -> list[Point]:
    out = []
    for s in settings:
        est = s.loader_time
        if est.usable:
            out.append(Point(s.settings, est.value, est.relative_half_width))
    return out


def _measured_costs(settings: Sequence[LoaderSetting]) -> Costs:
    """The workers' CPU per batch and the training process's own time per batch (medians
    over the settings with workers and resources), and the training process's time per
    batch without workers (the same sum when no such setting was measured). Without
    workers, a setting's CPU time per batch counts past D when read threads run parts that
    release the GIL (tokenizers, NumPy) beside the training thread: the time that cannot
    overlap is then at most D, and the smaller of the two is taken."""
    with_workers = [s for s in settings if s.workers > 0 and s.resources is not None
                    and s.resources.batches > 0]
    if not with_workers and any(s.workers > 0 for s in settings):
        raise MissingNumbers(
            "its settings with workers hold no CPU and memory measurements (resources): "
            "written by an older pipecheck; measure again with this one")
    if not with_workers:
        raise NotPredictable(
            "no setting with workers and measured resources: the model cannot tell the "
            "transforms' cost from the training process's; measure at least one worker count "
            "above 0 with this pipecheck (pipecheck dataloader --workers 0,1,2)")
    c = _median([s.resources.worker_cpu_per_batch_s for s in with_workers
                 if s.resources is not None])
    m = _median([main_time_per_batch(s) for s in with_workers])
    if not (math.isfinite(c) and math.isfinite(m)):
        raise MissingNumbers("the settings with workers hold no CPU time per batch; measure "
                             "them again with this pipecheck")
    without = [(s.resources.main_cpu_per_batch_s, s.loader_time.value) for s in settings
               if s.workers == 0 and s.resources is not None and s.resources.batches > 0]
    main0 = _median([min(cpu, d) for cpu, d in without])
    if not math.isfinite(main0):
        return Costs(c, m, c + m, c + m)
    return Costs(c, m, main0, _median([cpu for cpu, _ in without]))


def fit_loader_model(settings: Sequence[LoaderSetting], cores: int,
                     ram_budget_mb: float | None = None) -> LoaderModelFit:
    """The model fitted to the measured settings; NotPredictable says why it cannot be."""
    points = _points(settings)
    if len(points) < MIN_SETTINGS:
        raise NotPredictable(
            f"{len(points)} loader setting(s) with a usable D: at least {MIN_SETTINGS} are "
            "needed to fit the model; measure more (pipecheck dataloader --workers 0,1,2)")
    noise = statistics.median(pt.rel_noise for pt in points)
    if noise > MAX_NOISE:
        raise NotPredictable(
            f"the measured D intervals are +-{100 * noise:.0f}% wide in the median (more "
            f"than {100 * MAX_NOISE:.0f}%): too noisy to fit; measure again with more "
            "--batches, or on a quieter machine")
    measured = _measured_costs(settings)
    f = _fit(points, cores, measured)
    error = _fit_error(points, cores, measured, f)
    if error > MAX_FIT_ERROR:
        raise NotPredictable(
            f"the model misses the measured settings by {100 * error:.0f}% in the median "
            f"(more than {100 * MAX_FIT_ERROR:.0f}%): it does not describe this pipeline; "
            "compare the settings directly (pipecheck dataloader)")
    rss = [s.resources for s in settings if s.workers > 0 and s.resources is not None]
    k = f.costs
    return LoaderModelFit(
        worker_cpu_s=k.c, latency_s=k.s, main_s=k.m, main_alone_s=k.main0,
        main_alone_cpu_s=k.main0_cpu,
        sharpness=f.sharpness, contention=k.contention, cpu_scale=k.cpu_scale,
        cores=cores, stage=dominant_stage(settings), settings_fitted=len(points),
        fit_error=error, noise=noise,
        max_workers_measured=max(pt.settings.workers for pt in points),
        max_reads_measured=max(reads_per_process(pt.settings) for pt in points),
        worker_rss_mb=_median([r.worker_rss_mb for r in rss]),
        main_rss_mb=_median([r.main_rss_mb for r in rss]), ram_budget_mb=ram_budget_mb)


def costs_of(model: LoaderModelFit) -> Costs:
    """The costs a fitted model holds (a record written before ``main_alone_cpu_s`` was
    kept: ``main_alone_s`` stands in for it)."""
    cpu0 = model.main_alone_cpu_s
    return Costs(model.worker_cpu_s, model.main_s, model.main_alone_s,
                 cpu0 if math.isfinite(cpu0) else model.main_alone_s, model.latency_s,
                 model.contention, model.cpu_scale)


def memory_mb(model: LoaderModelFit, g: GrainSettings) -> float:
    """Peak memory of the training process and ``g.workers`` workers, as measured per
    worker."""
    if g.workers == 0 or not math.isfinite(model.worker_rss_mb):
        return model.main_rss_mb
    return model.main_rss_mb + g.workers * model.worker_rss_mb


def predict_loader(model: LoaderModelFit, g: GrainSettings, cores: int) -> Prediction:
    """D at setting ``g`` on ``cores`` cores, its interval and what binds it."""
    fl = floors(g, cores, costs_of(model), model.stage)
    value = combine(fl.values(), model.sharpness)
    extrapolated = g.workers > model.max_workers_measured or \
        reads_per_process(g) > model.max_reads_measured
    u = math.hypot(model.noise, max(model.fit_error, FIT_ERROR_FLOOR))
    if extrapolated:
        u *= EXTRAPOLATION_WIDENING
    over = model.ram_budget_mb is not None and g.workers > 0 and \
        memory_mb(model, g) > model.ram_budget_mb
    binding = MEMORY if over else max(fl, key=lambda name: fl[name])
    return Prediction(Interval(value, value * max(0.0, 1 - u), value * (1 + u)), binding, fl,
                      extrapolated, over)


def predict_step(loader: Interval, target: Interval, interference: float,
                 loader_binding: str) -> tuple[Interval, str]:
    """The real-data step: the slower of compute (T) and loading (D), times the
    interference measured between them (R / max(T, D) at the setting the run chose), and
    never faster than the batches arrive (D)."""
    f = max(interference, 0.0) if math.isfinite(interference) else 1.0
    value = max(max(target.value, loader.value) * f, loader.value)
    low = max(max(target.low, loader.low) * f, loader.low)
    high = max(max(target.high, loader.high) * f, loader.high)
    return Interval(value, low, high), COMPUTE if target.value >= loader.value \
        else loader_binding


MAX_CORES = 4096
"""Host sizes looked at: past a few thousand cores no machine type is left to choose."""


def cores_needed(model: LoaderModelFit, g: GrainSettings, goal_s: float) -> int | None:
    """The fewest cores with which D at ``g`` is predicted at or below ``goal_s`` (None: no
    number of cores is enough, another resource binds)."""
    if predict_loader(model, g, MAX_CORES).interval.value > goal_s:
        return None
    lo, hi = 0, MAX_CORES  # predicted D only falls as cores are added
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if predict_loader(model, g, mid).interval.value <= goal_s:
            hi = mid
        else:
            lo = mid
    return hi


def candidate_settings(max_workers: int, thread_ladder: Sequence[int],
                       buffer_ladder: Sequence[int], prefetch_factors: Sequence[int]
                       ) -> list[GrainSettings]:
    """Every setting of the tuner's ladders up to ``max_workers``, cheapest first."""
    out = {GrainSettings(w, b, t, max(1, f * t))
           for w in range(max_workers + 1) for t in thread_ladder
           for b in (buffer_ladder if w else (DEFAULT_PER_WORKER_BUFFER,))
           for f in prefetch_factors}
    return sorted(out, key=GrainSettings.cost)


def cheapest_keeping_up(model: LoaderModelFit, candidates: Sequence[GrainSettings],
                        cores: int, goal_s: float) -> GrainSettings | None:
    """The cheapest candidate predicted to keep up (D <= ``goal_s``) and fit the RAM budget
    on ``cores`` cores; None when none is."""
    for g in sorted(candidates, key=GrainSettings.cost):
        p = predict_loader(model, g, cores)
        if not p.over_memory and p.interval.value <= goal_s:
            return g
    return None


def stage_seconds_per_batch(settings: Sequence[LoaderSetting], stage: str) -> float | None:
    """Seconds per batch the named stage takes (Grain's stage timing): its time per element
    times the elements it makes per batch (the examples of a batch when it makes many more
    elements than batches, else one), the least over the settings that timed it: contention
    (threads waiting for the GIL, other processes) only adds to a stage's time."""
    per_batch = []
    for s in settings:
        batches = s.batch_time.summary.n + 1
        for st in s.stages:
            if st.name == stage and st.n > 0 and math.isfinite(st.avg_s):
                many = st.n > 2 * batches and s.examples_per_batch > 0
                per_batch.append(st.avg_s * (s.examples_per_batch if many else 1))
    return min(per_batch) if per_batch else None


def without_stage(model: LoaderModelFit, stage_s: float) -> LoaderModelFit:
    """The model with ``stage_s`` seconds per batch of the transform stage gone (its output
    precomputed): its waiting first, then the rest as the transforms' CPU (from the workers'
    and, without workers, the training process's). What is left of the per-batch work (the
    source's reads, other transforms) is named ``transforms``: the stage taken out binds
    nothing."""
    waiting = min(model.latency_s, stage_s)
    cpu = min(model.worker_cpu_s, model.main_alone_s, max(0.0, stage_s - waiting))
    return dataclasses.replace(model, latency_s=model.latency_s - waiting,
                               worker_cpu_s=model.worker_cpu_s - cpu,
                               main_alone_s=model.main_alone_s - cpu,
                               main_alone_cpu_s=model.main_alone_cpu_s - cpu, stage=TRANSFORMS)


def reads_per_batch(settings: Sequence[LoaderSetting]) -> int | None:
    """Reads of the source a batch makes: as counted at the reading stage where the settings
    recorded it (``LoaderSetting.reads``: its elements per output element, the median over
    the settings), else one per example (a random-access source such as
    ``ArrayRecordDataSource`` reads each record by itself), the examples per batch the
    settings recorded (None: neither recorded)."""
    counted = reads_counted(settings)
    if counted:
        return max(1, round(statistics.median(counted)))
    counts = [s.examples_per_batch for s in settings if s.examples_per_batch > 0]
    return max(counts) if counts else None


def reads_counted(settings: Sequence[LoaderSetting]) -> list[float]:
    """Reads per batch each setting counted at its reading stage (empty: none did)."""
    return [s.reads.reads_per_batch for s in settings
            if s.reads is not None and s.reads.reads_per_batch > 0]


def with_read_latency(model: LoaderModelFit, added_s: float, reads: int) -> LoaderModelFit:
    """The model were each of a batch's ``reads`` reads ``added_s`` seconds slower: the
    waiting per batch grows by ``reads x added_s``. Waiting is not CPU: in ``per_process``
    it overlaps across a process's reads in flight (min(threads, prefetch)) and across the
    workers, and no core floor moves."""
    return dataclasses.replace(model, latency_s=model.latency_s + reads * max(0.0, added_s))
