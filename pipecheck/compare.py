"""``pipecheck compare``: target vs loader vs real-data training, and the verdict.

1. T: the target step time (``synthetic``), or ``--synthetic FILE``.
2. D(W): the loader alone, with the worker count searched adaptively
   (``tuner``), or ``--dataloader FILE``.
3. R: real-data training at the chosen setting, timed by the same lagged sync,
   with the sync locator sampling the main thread; or ``--real RUN.json``
   from a ``Monitor`` run of the user's own loop.
4. T again, briefly, so a drift of the machine's speed during the run is seen.
5. The verdict (``verdict.decide``), findings and a recommendation.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from typing import Any, Callable, Mapping, Sequence

from pipecheck.analysis.tuner import CPU_BOUND, LATENCY_BOUND, TuningOutcome
from pipecheck.analysis.verdict import (
    COMPUTE_BOUND,
    DRIFT_TOLERANCE,
    FORCED_SYNC,
    HARMLESS_SYNC_SHARE,
    INPUT_BOUND,
    LOADER_HEADROOM,
    Estimate,
    Verdict,
    burst_block,
    decide,
)
from pipecheck.config import RunConfig
from pipecheck.records import store
from pipecheck.records.common import Anomaly, Distribution, Finding, StepRecord, SyncSite
from pipecheck.records.compare import CompareResult
from pipecheck.records.synthetic import SyntheticResult
from pipecheck.report.format import short_location

DEFAULT_STEPS = 60
"""Real-data training steps."""
DEFAULT_TARGET_STEPS = 30
"""Synthetic steps for the target step time (a third as many again after the real run)."""
DEFAULT_BATCHES = 30
"""Batches timed per loader setting."""
DEFAULT_MAX_WORKERS = max(8, 2 * (os.cpu_count() or 1))
"""Above the core count on purpose: latency-bound pipelines keep gaining past the cores."""
RAM_BUDGET_FRACTION = 0.5
"""Share of the available RAM Grain's pick_performance_config may plan workers for."""
TUNING_STAGE_WAIT_S = 0.5
"""During the worker search, stage reports are not waited for long (they lag ~5 s)."""

BREAKDOWN_SPANS = ("data_wait", "device_put", "dispatch", "sync", "log", "checkpoint", "eval",
                   "gc", "other")




@dataclasses.dataclass(frozen=True)
class RealRun:
    """The real-data measurement, from pipecheck's loop or a Monitor run."""

    steps: tuple[StepRecord, ...]
    sync_sites: tuple[SyncSite, ...]
    compile_findings: tuple[Finding, ...] = ()
    recorder: Any = None
    """The SpanRecorder of pipecheck's real-data loop (None for a Monitor run)."""
    total_steps: int = 0
    """Steps the sync sites cover (a long Monitor run keeps only a window of ``steps``)."""
    compile_events: tuple[Any, ...] = ()
    """Every function's compile events in pipecheck's real-data loop (for the trace)."""
    compiles: Mapping[int, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    """Seconds JAX spent compiling each function, by step (explains slow steps)."""
    anomalies: tuple[Anomaly, ...] | None = None
    """A Monitor run's anomalies as recorded (None: find them from the steps)."""

    @property
    def n_steps(self) -> int:
        return self.total_steps or len(self.steps)


@dataclasses.dataclass(frozen=True)
class CompareRun:
    """A compare result and the real-data run's raw timeline (for ``--trace``)."""

    result: CompareResult
    real: RealRun


# --- pure parts ------------------------------------------------------------------------------
def batches_for(workers: int, batches: int) -> int:
    """Batches to time for a worker count: enough that the batches the workers buffer while
    starting up (served instantly) cannot pass for the steady state."""
    from pipecheck.measure.dataloader import BUFFER_WARNING_FACTOR
    from pipecheck.measure.pipeline import DEFAULT_PER_WORKER_BUFFER

    return max(batches, BUFFER_WARNING_FACTOR * workers * DEFAULT_PER_WORKER_BUFFER)


def warmup_steps(workers: int, per_worker_buffer: int) -> int:
    """Real-data steps served from the prefetch buffer filled during start-up: they would
    look faster than the steady state, so they are kept out of it."""
    return workers * per_worker_buffer + 1


def tag_warmup(steps: Sequence[StepRecord], n: int) -> tuple[StepRecord, ...]:
    return tuple(
        dataclasses.replace(s, tags=(*s.tags, "warmup")) if 0 < s.step < n else s for s in steps
    )


def breakdown_of(steps: Sequence[StepRecord]) -> dict[str, float]:
    """Mean seconds per steady-state step spent in each host span."""
    from pipecheck.measure.loop import steady_state

    steady = steady_state(steps)
    if not steady:
        return {}
    names = dict.fromkeys([*BREAKDOWN_SPANS, *(n for s in steady for n in s.spans)])
    return {n: sum(s.spans.get(n, 0.0) for s in steady) / len(steady) for n in names}


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms"


def sync_findings(sites: Sequence[SyncSite], n_steps: int, real_median_s: float,
                  verdict: Verdict) -> list[Finding]:
    """Name the user's syncs, with their cost per step; harmless unless the verdict is
    forced-sync."""
    findings = []
    for site in sites:
        if site.internal or n_steps <= 0 or real_median_s <= 0:
            continue
        per_step = site.seconds / n_steps
        share = per_step / real_median_s
        if share < HARMLESS_SYNC_SHARE:
            continue
        numbers = {"seconds_per_step": per_step, "share_of_step": share,
                   "samples": float(site.samples)}
        where = short_location(site.location)
        if verdict.verdict == FORCED_SYNC:
            findings.append(Finding(
                kind="forced-sync",
                message=(f"forced sync at {where} ({site.code}) waits {_ms(per_step)} per step, "
                         f"about {100 * share:.0f}% of each step"),
                numbers=numbers, location=site.location,
                fix="don't read the current step's values on the host: log the previous "
                    "step's loss (or accumulate metrics on the device and fetch them every N "
                    "steps)",
            ))
        else:
            findings.append(Finding(
                kind="harmless-sync",
                message=(f"sync at {where} ({site.code}) waits {_ms(per_step)} per step, but it "
                         f"is harmless here: the run is {verdict.verdict} and the wait overlaps "
                         "with it"),
                numbers=numbers, location=site.location,
            ))
    return findings


def user_sync_share(sites: Sequence[SyncSite], n_steps: int, real_median_s: float) -> float:
    """Share of a real-data step spent blocked in the user's syncs (pipecheck's own excluded)."""
    if n_steps <= 0 or not real_median_s > 0:
        return 0.0
    return sum(s.seconds for s in sites if not s.internal) / n_steps / real_median_s


def interference_finding(target_s: float, loader_s: float, real_s: float,
                         workers: int) -> Finding:
    """Real-data steps clearly slower than both parts, with no host sync to explain it."""
    slower = real_s / max(target_s, loader_s) - 1.0
    cause = (f"the {workers} loader worker(s) compete with compute for "
             f"{os.cpu_count()} CPU core(s)" if workers else
             "loading on the training process competes with compute for the CPU")
    return Finding(
        kind="interference",
        message=(f"real-data steps ({_ms(real_s)}) are {100 * slower:.0f}% slower than the "
                 f"slower of compute ({_ms(target_s)}) and loading ({_ms(loader_s)}), but the "
                 f"sampler found no host sync that explains it: most likely {cause}"),
        numbers={"target_s": target_s, "loader_s": loader_s, "real_s": real_s,
                 "slowdown": slower},
        fix="give the loader fewer CPU cycles (cheaper transforms, preprocessing offline) or "
            "run it on other cores/hosts; on an accelerator host the CPU is usually idle",
    )


def loader_findings(trials: Sequence[Any], chosen: Any, tuning: TuningOutcome,
                    target_s: float, verdict: Verdict) -> list[Finding]:
    findings = []
    first = trials[0]
    if verdict.verdict == INPUT_BOUND or loader_time(first) > target_s:
        if tuning.meets_target and chosen is not first:
            findings.append(Finding(
                kind="input-bound",
                message=(f"{first.workers} worker(s) give {_ms(loader_time(first))}/batch "
                         f"against a {_ms(target_s)} target; {chosen.workers} workers give "
                         f"{_ms(loader_time(chosen))}"),
                numbers={"target_s": target_s, "first_workers": float(first.workers),
                         "first_batch_s": loader_time(first),
                         "chosen_workers": float(chosen.workers),
                         "chosen_batch_s": loader_time(chosen)},
                fix=f"use {chosen.workers} Grain workers "
                    f"(MultiprocessingOptions(num_workers={chosen.workers}))",
            ))
        elif not tuning.meets_target:
            nature = {CPU_BOUND: "it is CPU-bound (stops scaling with workers)",
                      LATENCY_BOUND: "it is latency-bound (still scaling past the cores)"}.get(
                          tuning.scaling, "")
            if tuning.reason.startswith("worker counts fixed"):
                fix = ("let pipecheck search the worker count (leave out --workers), or "
                       "preprocess offline")
            elif tuning.scaling == LATENCY_BOUND:
                fix = ("raise --max-workers or the read threads; latency-bound pipelines keep "
                       "gaining from parallel reads")
            else:
                fix = ("preprocess offline (tokenize and pack once, store the result), cache, "
                       "or make the transform cheaper")
            findings.append(Finding(
                kind="input-bound",
                message=(f"no worker count brings the loader below the {_ms(target_s)} target: "
                         f"the fastest, {chosen.workers} worker(s), gives "
                         f"{_ms(loader_time(chosen))}/batch"
                         + (f"; {nature}" if nature else "")),
                numbers={"target_s": target_s, "chosen_workers": float(chosen.workers),
                         "chosen_batch_s": loader_time(chosen)},
                fix=fix,
            ))
    slow = max(chosen.stages, key=lambda s: s.wait_ratio, default=None) \
        if getattr(chosen, "stages", None) else None
    if slow is not None and verdict.verdict == INPUT_BOUND:
        findings.append(Finding(
            kind="slow-stage",
            message=(f"the pipeline waits on {slow.name} ({slow.where}) "
                     f"{100 * slow.wait_ratio:.0f}% of the time"),
            numbers={"wait_ratio": slow.wait_ratio, "avg_s": slow.avg_s},
            location=slow.name,
        ))
    return findings


def recommendation_for(verdict: Verdict, chosen_workers: int, findings: Sequence[Finding],
                       meets_target: bool) -> str:
    if verdict.verdict == FORCED_SYNC:
        syncs = [f for f in findings if f.kind == "forced-sync"]
        if syncs:
            return (f"remove the forced sync: {syncs[0].message}. "
                    "Log the previous step's loss instead.")
        return ("the host waits for the device somewhere outside the loop's own sync; run your "
                "loop under pipecheck.Monitor to locate it (pipecheck compare --real RUN.json)")
    if verdict.verdict == INPUT_BOUND:
        if verdict.fixed_by_tuning or meets_target:
            return (f"use {chosen_workers} Grain workers "
                    f"(grain.MultiprocessingOptions(num_workers={chosen_workers})): the loader "
                    "then keeps up with compute")
        return ("the input pipeline cannot keep up even at its fastest setting: preprocess "
                "offline, cache, or simplify the transforms")
    if verdict.verdict == COMPUTE_BOUND:
        return (f"compute-bound: the input pipeline keeps up with {chosen_workers} worker(s); "
                "speed up the model step (larger batch, better sharding, mixed precision)")
    return verdict.reason


def drift_warning(before: Sequence[float], after: Sequence[float]) -> str | None:
    if not before or not after:
        return None
    a, b = Estimate.of(before).median, Estimate.of(after).median
    change = b / a - 1.0
    if abs(change) > DRIFT_TOLERANCE:
        return (f"the target step time drifted by {100 * change:+.0f}% during the run "
                f"({_ms(a)} before, {_ms(b)} after): the machine's speed changed; compare "
                "figures with care or re-run on a quieter machine")
    return None


# --- measurement -----------------------------------------------------------------------------
def ram_ceiling_workers(dataset: Any, max_workers: int) -> int | None:
    """Grain's element-size-based worker count for half the available RAM (a ceiling only:
    it never measures throughput)."""
    try:
        import grain
        import psutil

        from pipecheck.measure.pipeline import build_iter_dataset

        budget_mb = int(psutil.virtual_memory().available / 2**20 * RAM_BUDGET_FRACTION)
        cfg = grain.experimental.pick_performance_config(
            build_iter_dataset(dataset, 0, 0), ram_budget_mb=budget_mb, max_workers=max_workers,
            max_buffer_size=None)
        return int(cfg.multiprocessing_options.num_workers)
    except Exception:  # the ceiling is advisory; the search works without it
        return None


def run_compare(config: RunConfig, **kwargs: Any) -> CompareResult:
    """``compare_run`` without the raw timeline."""
    return compare_run(config, **kwargs).result


def compare_run(
    config: RunConfig,
    *,
    steps: int = DEFAULT_STEPS,
    target_steps: int = DEFAULT_TARGET_STEPS,
    batches: int = DEFAULT_BATCHES,
    workers: Sequence[int] | None = None,
    threads: int | None = None,
    max_workers: int = DEFAULT_MAX_WORKERS,
    synthetic_file: str | None = None,
    dataloader_file: str | None = None,
    real_file: str | None = None,
    timeout_s: float | None = None,
    progress: Callable[[str], None] = lambda msg: None,
    clock: Callable[[], float] = time.perf_counter,
) -> CompareRun:
    from pipecheck.analysis.tuner import outcome as tuning_outcome
    from pipecheck.analysis.tuner import tune
    from pipecheck.measure import dataloader as dl
    from pipecheck.measure import synthetic
    from pipecheck.records.env import collect_env
    from pipecheck.workloads import build_workload

    timeout_s = dl.DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    threads = dl.DEFAULT_THREADS if threads is None else threads
    sources = {"target": synthetic_file or "measured", "loader": dataloader_file or "measured",
               "real": real_file or "measured"}
    warnings: list[str] = []
    needs_workload = synthetic_file is None or real_file is None
    workload = build_workload(config) if needs_workload else None
    env = collect_env()

    # 1. target step time
    if synthetic_file:
        syn = store.load(synthetic_file, expect=SyntheticResult)
        warnings += config_mismatch(syn.config, config, synthetic_file)
        warnings += env_mismatch(syn.env, synthetic_file)
    else:
        progress(f"[1/4] target step time: {target_steps} synthetic steps")
        syn = synthetic.measure_synthetic(config, target_steps, clock=clock, workload=workload)
    target_s = syn.step_time.median_s
    progress(f"      target step time T = {_ms(target_s)}")

    # 2. loader: search or read
    parts = None
    if dataloader_file:
        dres = store.load(dataloader_file, expect=dl.DataloaderResult)
        if not dres.results:
            from pipecheck.errors import ResultFormatError

            raise ResultFormatError(f"{dataloader_file} holds no loader settings; re-run "
                                    "pipecheck dataloader with --workers")
        warnings += config_mismatch(dres.config, config, dataloader_file)
        warnings += env_mismatch(dres.env, dataloader_file)
        trials_by_key = {(s.workers, s.threads): s for s in dres.results}
        tuning = tuning_outcome([_trial(s) for s in dres.results], target_s,
                                os.cpu_count() or 1, f"settings read from {dataloader_file}")
        settings = list(dres.results)
    else:
        parts = _loader_parts(dl, config, workload)
        if parts.dataset is None:
            from pipecheck.errors import ConfigError

            raise ConfigError("this workload has no dataset; pipecheck compare needs "
                              "workload.dataset (or --dataloader FILE and --real FILE)")
        ceiling = ram_ceiling_workers(parts.dataset, max_workers)
        limit = max_workers if ceiling is None else max(1, min(max_workers, ceiling))
        measured: dict[tuple[int, int], Any] = {}
        source = parts

        def measure(w: int, t: int) -> float:
            n = batches_for(w, batches)
            progress(f"[2/4] loader: {w} worker(s), {t} thread(s), {n} batches")
            s = dl.measure_setting(source.dataset, w, t, n, put=source.put,
                                   tokens_key=source.tokens_key, timeout_s=timeout_s,
                                   clock=clock, stage_wait_s=TUNING_STAGE_WAIT_S)
            measured[(w, t)] = s
            progress(f"      D({w}) = {_ms(loader_time(s))} per batch")
            return loader_time(s)

        tuning = tune(measure, target_s, max_workers=limit, cores=os.cpu_count() or 1,
                      threads=threads, fixed_workers=list(workers) if workers else None)
        trials_by_key = measured
        settings = [measured[(t.workers, t.threads)] for t in tuning.trials]
        if ceiling is not None and ceiling < max_workers:
            warnings.append(f"the worker search was capped at {limit} workers by a RAM "
                            f"budget (Grain's pick_performance_config)")
    chosen = trials_by_key[(tuning.chosen.workers, tuning.chosen.threads)]

    # 3. real-data run
    if real_file:
        real = read_real_run(real_file, config, warnings)
        warmup = 1
    else:
        assert workload is not None
        parts = parts or _loader_parts(dl, config, workload)
        progress(f"[3/4] real-data training: {steps} steps with {chosen.workers} worker(s)")
        real = measure_real(workload, parts, chosen.workers, chosen.threads, steps, timeout_s,
                            clock)
        from pipecheck.measure.pipeline import DEFAULT_PER_WORKER_BUFFER

        warmup = warmup_steps(chosen.workers, DEFAULT_PER_WORKER_BUFFER)
    from pipecheck.measure.loop import steady_state, with_anomalies

    real_steps, real_anomalies = with_anomalies(tag_warmup(real.steps, warmup), real.compiles)
    if real.anomalies is not None:
        real_anomalies = real.anomalies

    real_samples = [s.time_s for s in steady_state(real_steps)]
    progress(f"      real-data step time R = {_ms(Estimate.of(real_samples).median)}")

    # 4. target again: the machine's speed may have drifted
    target_samples = list(syn.step_time.samples_s)
    if not synthetic_file and workload is not None:
        progress(f"[4/4] target step time again: {max(10, target_steps // 2)} steps")
        after = synthetic.measure_synthetic(config, max(10, target_steps // 2), clock=clock,
                                            workload=workload)
        drift = drift_warning(syn.step_time.samples_s, after.step_time.samples_s)
        if drift:
            warnings.append(drift)
        target_samples += list(after.step_time.samples_s)

    baseline = settings[0] if settings and settings[0] is not chosen else None
    real_est = Estimate.of(real_samples)
    verdict = decide(Estimate.of(target_samples), loader_estimate(chosen), real_est,
                     baseline=loader_estimate(baseline) if baseline else None,
                     sync_share=user_sync_share(real.sync_sites, real.n_steps,
                                                real_est.median))
    real_dist = Distribution.of(real_samples)
    findings = list(syn.compile.findings) + list(real.compile_findings)
    findings += loader_findings(settings, chosen, tuning, Estimate.of(target_samples).median,
                                verdict)
    findings += sync_findings(real.sync_sites, real.n_steps, real_dist.median_s, verdict)
    if verdict.unexplained_slowdown:
        findings.append(interference_finding(Estimate.of(target_samples).median,
                                             loader_time(chosen), real_dist.median_s,
                                             chosen.workers))
    return CompareRun(result=CompareResult(
        env=env,
        config=config.to_dict(),
        target_step_s=Estimate.of(target_samples).median,
        target=Distribution.of(target_samples),
        loader=tuple(settings),
        chosen_workers=chosen.workers,
        chosen_threads=chosen.threads,
        loader_step_s=loader_time(chosen),
        real_step_s=real_dist.median_s,
        real=real_dist,
        verdict=verdict.verdict,
        verdict_reason=verdict.reason,
        findings=tuple(findings),
        recommendation=recommendation_for(verdict, chosen.workers, findings,
                                          tuning.meets_target),
        tuning={"meets_target": tuning.meets_target, "scaling": tuning.scaling,
                "target_s": target_s,
                "stop_reason": tuning.reason, "headroom": LOADER_HEADROOM,
                "settings_tried": len(tuning.trials)},
        breakdown=breakdown_of(real_steps),
        compile=syn.compile,
        sources=sources,
        steps=real_steps,
        anomalies=real_anomalies,
        warnings=tuple(warnings + list(syn.warnings)),
    ), real=real)


def steady_batch_samples(setting: Any) -> tuple[float, ...]:
    """A setting's batch times without those its workers buffered while starting up (they
    arrive at once and are not the steady state), when at least as many remain."""
    from pipecheck.measure.pipeline import DEFAULT_PER_WORKER_BUFFER

    samples = tuple(setting.batch_time.samples_s)
    skip = setting.workers * DEFAULT_PER_WORKER_BUFFER
    return samples[skip:] if len(samples) >= 2 * skip else samples


def loader_time(setting: Any) -> float:
    """D: seconds per batch at a setting, the mean (1 / throughput) of the steady batches.
    Workers deliver batches in bursts, so the median understates what a batch costs."""
    samples = steady_batch_samples(setting)
    return sum(samples) / len(samples) if samples else math.nan


def _loader_parts(dl: Any, config: RunConfig, workload: Any) -> Any:
    """The workload's dataset and device_put (from the built workload when there is one)."""
    if workload is None:
        return dl.loader_parts(config)
    return dl.LoaderParts(workload.dataset() if workload.dataset else None, workload.put,
                          workload.tokens_key)


def loader_estimate(setting: Any) -> Estimate:
    """D with its interval, bootstrapped in blocks of whole worker bursts."""
    samples = steady_batch_samples(setting)
    return Estimate.of_mean(samples, block=burst_block(setting.workers, len(samples)))


def _trial(setting: Any) -> Any:
    from pipecheck.analysis.tuner import Trial

    return Trial(setting.workers, setting.threads, loader_time(setting))


def env_mismatch(other: Mapping[str, Any], path: str) -> list[str]:
    """A warning when an input file was measured in another environment than this run."""
    from pipecheck.records.env import collect_env, env_differences

    diffs = env_differences(dict(other), collect_env())
    if not diffs:
        return []
    return [f"{path} was measured in another environment ({'; '.join(diffs)}): its times "
            "may not compare with this run's"]


def config_mismatch(other: Mapping[str, Any], config: RunConfig, path: str) -> list[str]:
    mine = config.to_dict()
    diffs = sorted(k for k in set(mine) | set(other) if mine.get(k) != other.get(k))
    if not diffs:
        return []
    return [f"{path} was measured with a different config ({', '.join(diffs)})"]


def measure_real(workload: Any, parts: Any, workers: int, threads: int, steps: int,
                 timeout_s: float | None, clock: Callable[[], float]) -> RealRun:
    """Train ``steps`` steps on the real pipeline, timed by the lagged sync, with the sync
    locator sampling this thread."""
    from pipecheck.measure.compile_watch import CompileWatcher
    from pipecheck.measure.loop import compiles_per_step, run_lagged_sync_loop
    from pipecheck.measure.pipeline import open_batches
    from pipecheck.measure.spans import SpanRecorder
    from pipecheck.measure.sync_locator import SyncLocator

    state = workload.init_state()
    recorder = SpanRecorder(clock)
    with open_batches(parts.dataset, workers, threads, timeout_s=timeout_s) as batches, \
            CompileWatcher(workload.train_step_name, clock) as watcher, \
            SyncLocator(clock=clock) as locator:
        outcome = run_lagged_sync_loop(
            workload.train_step, state, batches, steps, recorder, put=workload.put,
            hooks=workload.hooks, compiles=lambda: watcher.compiles)
    # Compiled again on real batches (the synthetic run compiled the step first): explain.
    findings = tuple(watcher.findings()) if watcher.compiles else ()
    events = (*watcher.events, *watcher.other_events)
    return RealRun(tuple(outcome.steps), tuple(locator.sites()), findings, recorder,
                   len(outcome.steps), events, compiles_per_step(recorder, events))


def read_real_run(path: str, config: RunConfig, warnings: list[str]) -> RealRun:
    """The real-data steps and sync sites of a Monitor run of the user's own loop."""
    from pipecheck.records.monitor import MonitorResult

    run = store.load(path, expect=MonitorResult)
    if run.config:
        warnings += config_mismatch(run.config, config, path)
    warnings += env_mismatch(run.env, path)
    return RealRun(tuple(run.steps), tuple(run.sync_sites), total_steps=run.total_steps,
                   anomalies=run.anomalies)
