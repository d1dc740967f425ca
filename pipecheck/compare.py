"""``pipecheck compare``: the stages in order, and the record. Orchestration only.

1. T, compute alone (``measure.target``); 2. D(W), the loader alone, its worker count
searched (``measure.loader_search``); 3. R, real-data training at the chosen setting
(``measure.real_run``); each read from a file instead when one is given; then, when the
search chose another setting than the first, R at the first one too (fewer steps), so what
the chosen setting buys is measured. 4. T again, so a drift of the machine's speed is
seen. 5. The verdict on T, D and R (``analysis.verdict``),
the findings and the recommendation (``analysis.loader.findings``).

What a framework does its own way comes from its workload kind (``workloads.WorkloadKind``):
R runs with the kind's host work between steps (MaxText's metric logger, checkpoint and
eval), and the recommendation names the chosen setting the kind's way (MaxText's
overrides); so ``compare_run`` gives the record ``pipecheck compare`` writes.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Callable, Mapping, Protocol

from pipecheck.analysis.breakdown import host_span_means
from pipecheck.analysis.first_batch import compare_startup, first_batch_finding
from pipecheck.analysis.loader import findings as fnd
from pipecheck.analysis.loader.compare_gains import compare_gains
from pipecheck.analysis.loader.storage import storage_finding
from pipecheck.analysis.periodic_stall import periodic_stall_findings
from pipecheck.analysis.steady_state import steady_state, wall_per_step
from pipecheck.analysis.verdict import LOADER_HEADROOM, decide
from pipecheck.config import RunConfig
from pipecheck.host_cpus import usable_cores
from pipecheck.measure import loader_search as ls
from pipecheck.measure import machine_load as ml
from pipecheck.measure.dataloader import (
    DEFAULT_THREADS,
    DEFAULT_TIMEOUT_S,
    LoaderParts,
    loader_parts,
)
from pipecheck.measure.page_cache import evict
from pipecheck.measure.real_run import (
    DEFAULT_STEPS,
    RealRun,
    load_real_run,
    real_of,
    real_stage,
)
from pipecheck.measure.resources import default_ram_budget_mb
from pipecheck.measure.target import DEFAULT_TARGET_STEPS, Target, target_again, target_stage
from pipecheck.measure.whatif_check import whatif_check
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.common import Distribution, Estimate
from pipecheck.records.compare import CompareResult, Estimates, Tuning
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.env import collect_env
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.machine_load import MachineLoad
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.whatif import WhatIfCheck
from pipecheck.tuned_config import config_settings
from pipecheck.units import ms
from pipecheck.workloads import WorkloadKind, build_workload, kind_of
from pipecheck.workloads.base import Workload

BASELINE_STEPS_SHARE = 0.5
"""R at the first setting trains this share of the steps asked for R (at least
``MIN_BASELINE_STEPS``): the first setting is the slow one, and its R only checks a gain."""

MIN_BASELINE_STEPS = 20
"""The fewest steps R at the first setting trains: enough steady steps for an interval."""


def baseline_steps(steps: int) -> int:
    """The steps R at the first setting trains, for ``steps`` asked for R (never more)."""
    return min(steps, max(MIN_BASELINE_STEPS, int(steps * BASELINE_STEPS_SHARE)))


@dataclasses.dataclass(frozen=True)
class CompareOptions:
    """How much to measure; a file (``*_file``) replaces its measurement."""

    steps: int = DEFAULT_STEPS
    target_steps: int = DEFAULT_TARGET_STEPS
    batches: int = ls.DEFAULT_BATCHES
    workers: tuple[int, ...] | None = None
    threads: int = DEFAULT_THREADS
    max_workers: int = ls.DEFAULT_MAX_WORKERS
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    synthetic_file: str | None = None
    dataloader_file: str | None = None
    real_file: str | None = None
    hosts: AcrossHosts | None = None
    """In a multi-process run: the worker search and the verdict follow the slowest host."""

    search_threads: bool = True
    """Search the read threads too (False when --threads fixes them)."""
    ram_budget_mb: float | None = None
    """The loader search stops before the measured memory exceeds it (None: half the RAM
    available)."""
    profile_dir: str | None = None
    """Capture PROFILE_STEPS real-data steps after the measured ones with jax.profiler here."""
    max_workers_given: bool = False
    """--max-workers was given (refused for a pipeline that runs its own workers)."""
    search: str = ls.SEARCHES[0]
    """How the loader settings are searched (``measure.loader_search.SEARCHES``)."""
    cold: bool = False
    """--cold: the data files are evicted from the page cache before each loader setting
    and before the real-data run."""
    measure_gain: bool = True
    """When the search chose another setting than the first it measured and that first one
    does not keep up with T, train at the first one too (``baseline_steps(steps)`` steps),
    so the chosen setting's gain is measured, not modelled (--no-measure-gain: R at the
    chosen setting only)."""


class AcrossHosts(Protocol):
    """What compare needs from a multi-process run (``measure.distributed.Session``)."""

    def agree(self, value: float, how: str) -> float: ...

    def slowest(self, estimate: Estimate) -> Estimate: ...


@dataclasses.dataclass(frozen=True)
class CompareRun:
    """A compare result and the real-data run's raw timeline (for ``--trace``)."""

    result: CompareResult
    real: RealRun


def _loader_times(loader: ls.LoaderChoice, hosts: AcrossHosts | None
                  ) -> tuple[Estimate, Estimate | None, list[str]]:
    """D at the chosen setting and at the baseline, as the verdict uses them: in a
    multi-process run the slowest host's (every host waits for it at each step)."""
    assert loader.chosen.loader_time is not None
    chosen_d, baseline_d = loader.chosen.loader_time, \
        loader.baseline.loader_time if loader.baseline else None
    if hosts is None:
        return chosen_d, baseline_d, []
    own_d, chosen_d = chosen_d, hosts.slowest(chosen_d)
    baseline_d = hosts.slowest(baseline_d) if baseline_d is not None else None
    if chosen_d.value == own_d.value:
        return chosen_d, baseline_d, []
    return chosen_d, baseline_d, [
        f"the verdict uses the slowest host's loader time D = {ms(chosen_d.value)} "
        f"(this host's is {ms(own_d.value)}): every host waits for it at each step"]


class TargetStage(Protocol):
    """T read from a file or measured (``measure.target.target_stage``)."""

    def __call__(self, config: RunConfig, path: str | None, steps: int,
                 workload: Workload | None, progress: Progress,
                 clock: Callable[[], float], /) -> Target: ...


class TargetAgain(Protocol):
    """T measured again after R: its samples and a drift warning
    (``measure.target.target_again``)."""

    def __call__(self, config: RunConfig, steps: int, workload: Workload, before: Target,
                 clock: Callable[[], float], /
                 ) -> tuple[tuple[float, ...], str | None]: ...


class LoaderStage(Protocol):
    """D read from a file or searched (``measure.loader_search.loader_stage``)."""

    def __call__(self, config: RunConfig, path: str | None, parts: Callable[[], LoaderParts],
                 target_s: float, opts: ls.SearchOptions, progress: Progress,
                 clock: Callable[[], float], /) -> ls.LoaderChoice: ...


class RealStage(Protocol):
    """R measured on the real pipeline at the chosen setting
    (``measure.real_run.real_stage``)."""

    def __call__(self, workload: Workload, parts: Callable[[], LoaderParts],
                 chosen: LoaderSetting, steps: int, timeout_s: float | None,
                 progress: Progress, clock: Callable[[], float], /, *,
                 profile_dir: str | None) -> RealRun: ...


class LoadReal(Protocol):
    """The Monitor run given as R, read (``measure.real_run.load_real_run``)."""

    def __call__(self, path: str, config: Mapping[str, object], one_workload: bool, /
                 ) -> MonitorResult: ...


class RealOf(Protocol):
    """R from a Monitor run (``measure.real_run.real_of``)."""

    def __call__(self, path: str, run: MonitorResult, config: Mapping[str, object], /
                 ) -> RealRun: ...


class CheckStage(Protocol):
    """compare's self-check: one setting the model did not see, predicted then measured
    (``measure.whatif_check.whatif_check``)."""

    def __call__(self, parts: LoaderParts, loader: ls.LoaderChoice, opts: ls.SearchOptions,
                 cores: int, progress: Progress, clock: Callable[[], float], /
                 ) -> WhatIfCheck | None: ...


@dataclasses.dataclass(frozen=True)
class Stages:
    """compare's stages and what it reads of the machine (the real ones unless a test gives
    fakes): build the workload and its pipeline, T (and T again), D, R measured or R read.
    Each is typed by its call as ``compare_run`` makes it (positional arguments, in order), so
    a checker holds a fake to the real stage's signature."""

    build_workload: Callable[[RunConfig], Workload] = build_workload
    loader_parts: Callable[[RunConfig, Workload | None], LoaderParts] = loader_parts
    target: TargetStage = target_stage
    target_again: TargetAgain = target_again
    loader: LoaderStage = ls.loader_stage
    real: RealStage = real_stage
    load_real: LoadReal = load_real_run
    real_of: RealOf = real_of
    check: CheckStage = whatif_check
    env: Callable[[], Mapping[str, object]] = collect_env
    cores: Callable[[], int] = usable_cores
    ram_budget_mb: Callable[[], float] = default_ram_budget_mb
    cpu: ml.CpuReader = ml.read_cpu
    """The machine's busy CPU and pipecheck's own, read at each phase's boundaries."""
    host_cores: Callable[[], int] = ml.host_cores


def compare_run(config: RunConfig, o: CompareOptions = CompareOptions(), *,
                progress: Progress = NO_PROGRESS,
                clock: Callable[[], float] = time.perf_counter,
                stages: Stages = Stages()) -> CompareRun:
    # R's file is read first: a run of another workload is refused before anything runs
    monitor = (stages.load_real(o.real_file, config.to_dict(),
                                not (o.synthetic_file and o.dataloader_file))
               if o.real_file else None)
    kind = kind_of(config.workload)
    workload = None if o.synthetic_file and o.real_file else stages.build_workload(config)
    parts = functools.cache(lambda: stages.loader_parts(config, workload))
    ram_budget = o.ram_budget_mb or stages.ram_budget_mb()
    run_steps = int(config.get("run_steps") or 0)
    search = _search_options(config, o, ram_budget, run_steps)
    if not o.dataloader_file:  # an option the pipeline would ignore: refused before T
        ls.refuse_ignored(parts(), search)
    elif o.cold:  # only R reads the data: refused before T too
        ls.refuse_cold_for_real(parts, real_from_file=bool(o.real_file))
    loads = ml.PhaseLoads(stages.cpu, clock)
    with loads.phase("target", measured=not o.synthetic_file):
        target = stages.target(config, o.synthetic_file, o.target_steps, workload, progress,
                               clock)
    if o.synthetic_file and target.result.machine_load is not None:
        loads.given("target", target.result.machine_load.target)
    with loads.phase("loader", measured=not o.dataloader_file):
        loader = stages.loader(config, o.dataloader_file, parts,
                               target.result.step_time.summary.median, search, progress, clock)
    check = None if o.dataloader_file else \
        stages.check(parts(), loader, search, stages.cores(), progress, clock)
    if o.real_file and monitor is not None:  # its env compared now: the workload set up JAX
        real = stages.real_of(o.real_file, monitor, config.to_dict())
    else:
        assert workload is not None
        if o.cold:  # R reads cold too, as the loader settings did
            evict(parts().files)
        with loads.phase("real"):
            real = stages.real(_with_own_hooks(kind, config, workload, o.steps), parts,
                               loader.chosen, o.steps, o.timeout_s, progress, clock,
                               profile_dir=o.profile_dir)
    real_dist = Distribution.of([s.time_s for s in steady_state(real.steps)])
    real_est = Estimate.median_of(real_dist)
    progress.say(f"      real-data step time R = {ms(real_est.value)}")
    real_baseline = None
    if o.measure_gain and not o.real_file and _first_falls_short(loader, target, o.hosts):
        assert workload is not None
        assert loader.baseline is not None  # _first_falls_short: there is one
        real_baseline = _real_at_first(o, stages, kind, config, workload, parts,
                                       loader.baseline, loads, progress, clock)
    t_samples, drift = target.result.step_time.samples_s, None
    if not o.synthetic_file and workload is not None:
        progress.say(f"[4/4] target step time again: {max(10, o.target_steps // 2)} steps")
        with loads.phase("target_again"):
            after, drift = stages.target_again(config, max(10, o.target_steps // 2), workload,
                                               target, clock)
        t_samples += after
    result = _result(config, o, stages, target, loader, real, real_dist, real_est,
                     t_samples, drift, ram_budget, run_steps, loads.record(stages.host_cores()),
                     real_baseline)
    return CompareRun(_finished(_the_kinds_way(kind, result), check), real)


def _first_falls_short(loader: ls.LoaderChoice, target: Target,
                       hosts: AcrossHosts | None) -> bool:
    """The first setting measured was not chosen and does not keep up with T (its D over
    the search's goal): what the chosen one buys over it is worth training at both. One
    that keeps up buys about nothing more, and the model says so without a run. In a
    multi-process run, any host's falling short trains every host at it (they step
    together)."""
    first = loader.baseline
    short = first is not None and \
        first.loader_time.value > target.result.step_time.summary.median * LOADER_HEADROOM
    return (hosts.agree(float(short), "max") > 0) if hosts is not None else short


def _search_options(config: RunConfig, o: CompareOptions, ram_budget: float,
                    run_steps: int) -> ls.SearchOptions:
    """How the loader settings are searched, from compare's options (a saved config's Grain
    settings fixed unless --workers or --threads were given)."""
    fixed = config_settings(config) if not o.workers and o.search_threads else None
    return ls.SearchOptions(o.batches, o.threads, o.max_workers, o.workers, o.timeout_s,
                            o.hosts.agree if o.hosts else None,
                            search_threads=o.search_threads, fixed=fixed,
                            ram_budget_mb=ram_budget, run_steps=run_steps,
                            max_workers_given=o.max_workers_given, search=o.search,
                            cold=o.cold)


def _real_at_first(o: CompareOptions, stages: Stages, kind: WorkloadKind, config: RunConfig,
                   workload: Workload, parts: Callable[[], LoaderParts], first: LoaderSetting,
                   loads: ml.PhaseLoads, progress: Progress, clock: Callable[[], float]
                   ) -> Estimate:
    """R at the first setting the search measured (``baseline_steps`` steps, with the
    framework's own host work as R had it): what the chosen setting bought, measured."""
    steps = baseline_steps(o.steps)
    progress.say(f"      the chosen setting's gain: real-data training at the first setting "
                 f"too, {steps} steps with {first.settings.label()} (--no-measure-gain: "
                 "skip)")
    if o.cold:
        evict(parts().files)
    with loads.phase("real_baseline"):
        run = stages.real(_with_own_hooks(kind, config, workload, steps), parts, first, steps,
                          o.timeout_s, NO_PROGRESS, clock, profile_dir=None)
    est = Estimate.of([s.time_s for s in steady_state(run.steps)])
    progress.say(f"      real-data step time at the first setting = {ms(est.value)}")
    return est


def _the_kinds_way(kind: WorkloadKind, result: CompareResult) -> CompareResult:
    """The record with the chosen setting written the workload's way (MaxText: its
    overrides) in the recommendation and in each fix that names it in Grain's words (the
    input-bound finding's ``use ...``)."""
    chosen = result.tuning.chosen
    if chosen is None:
        return result
    advice = chosen.advice()
    findings = tuple(dataclasses.replace(f, fix=kind.recommendation(f.fix, chosen))
                     if f.fix and advice in f.fix else f for f in result.findings)
    return dataclasses.replace(result, findings=findings,
                               recommendation=kind.recommendation(result.recommendation, chosen))


def _finished(result: CompareResult, check: WhatIfCheck | None) -> CompareResult:
    """The record with its self-check and what each change it supports would buy
    (``analysis.loader.compare_gains``)."""
    result = dataclasses.replace(result, whatif_check=check)
    gains = compare_gains(result)
    return dataclasses.replace(result, headspace_s=gains.headspace, gains=gains.gains,
                               gains_notes=gains.notes)


def _with_own_hooks(kind: WorkloadKind, config: RunConfig, workload: Workload,
                    steps: int) -> Workload:
    """The workload R trains, with its framework's own host work after each step of the
    ``steps`` asked for (the kind's ``real_hooks``; the workload itself when it has none)."""
    hooks = kind.real_hooks(config, workload, steps)
    return dataclasses.replace(workload, hooks=(*workload.hooks, *hooks)) if hooks else workload


def _own_load_share(settings: GrainSettings, spans: Mapping[str, float],
                    real: Estimate) -> float | None:
    """The share of a real-data step pipecheck's training thread spent loading its batches
    itself (its data wait, with no workers and no read threads), or None when loading runs
    beside it (then waiting for data is not loading; a Monitor run's loop is not known)."""
    if settings.workers or settings.threads or not real.value > 0:
        return None
    return spans.get("data_wait", 0.0) / real.value


def _result(config: RunConfig, o: CompareOptions, stages: Stages, target: Target,
            loader: ls.LoaderChoice, real: RealRun, real_dist: Distribution,
            real_est: Estimate, t_samples: tuple[float, ...], drift: str | None,
            ram_budget: float, run_steps: int, machine: MachineLoad | None,
            real_baseline: Estimate | None = None) -> CompareResult:
    """The verdict on T, D and R, the findings and the recommendation, as the record."""
    chosen_d, baseline_d, host_warnings = _loader_times(loader, o.hosts)
    target_dist = Distribution.of(t_samples)
    est = Estimates(Estimate.median_of(target_dist), chosen_d, real_est, baseline_d,
                    real_baseline)
    spans = host_span_means(real.steps)
    verdict = decide(est.target, est.loader, est.real, baseline=est.baseline,
                     sync_share=fnd.user_sync_share(real.sync_sites, real.n_steps, real_est.value),
                     own_load_share=None if o.real_file else
                     _own_load_share(loader.chosen.settings, spans, real_est),
                     machine=machine, loader_cpu_s=loader.chosen.cpu_per_batch_s,
                     real_baseline=real_baseline)
    cores = stages.cores()
    findings = fnd.compare_findings((*target.result.compile.findings, *real.compile_findings),
                                    loader.settings, loader.chosen, loader.tuning, est, verdict,
                                    real.sync_sites, real.n_steps, cores, ram_budget)
    findings += periodic_stall_findings(real.steps, real.loader)
    startup = real.startup or compare_startup(loader.chosen.first_batch_s, chosen_d.value,
                                              target.result.compile.compile_s, real.init_s)
    first_batch = first_batch_finding(startup)
    findings += [first_batch] if first_batch else []
    storage = storage_finding(loader.settings, kind_of(config.workload).read_options_text,
                              chosen=loader.chosen.settings,
                              goal_s=est.target.value * LOADER_HEADROOM)
    findings += [storage] if storage else []
    t = loader.tuning
    return CompareResult(
        env=dict(stages.env()), config=config.to_dict(), target=target_dist,
        loader=loader.settings, real=real_dist,
        verdict=verdict.verdict, verdict_reason=verdict.reason, findings=tuple(findings),
        recommendation=fnd.recommendation_for(verdict, loader.chosen.workers, findings,
                                              t.meets_target, loader.chosen.settings,
                                              fixed_by_pipeline=t.stop == "pipeline"),
        tuning=Tuning(t.meets_target, t.scaling, target.result.step_time.summary.median, t.reason,
                      LOADER_HEADROOM, len(t.trials), t.stop, loader.chosen.settings,
                      run_steps, ram_budget, t.order),
        host_spans=spans, compile=target.result.compile,
        sources={"target": o.synthetic_file or "measured",
                 "loader": o.dataloader_file or "measured", "real": o.real_file or "measured"},
        steps=real.steps, anomalies=real.anomalies, startup=startup,
        warnings=(*target.warnings, *loader.warnings, *real.warnings, *([drift] if drift else []),
                  *target.result.warnings, *host_warnings),
        estimates=est, machine_load=machine, wall_per_step_s=wall_per_step(real.steps))
