"""``pipecheck synthetic``: the target step time, compute alone.

The batch is placed on the devices once, with the real batch's shapes, dtypes
and sharding, and the train step runs on it in the lagged-sync loop. Step 0
and any step that compiled are reported apart from the steady state.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Callable

from pipecheck import stats
from pipecheck.analysis.steady_state import steady_mask, wall_per_step, with_anomalies
from pipecheck.config import RunConfig
from pipecheck.measure.compile_watch import CompileWatcher
from pipecheck.measure.loop import compiles_per_step, run_lagged_sync_loop
from pipecheck.measure.machine_load import PhaseLoads, host_cores
from pipecheck.measure.spans import GcSpans, SpanRecorder
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.common import CompileInfo, Distribution, StepRecord, Throughput
from pipecheck.records.env import collect_env
from pipecheck.records.events import CompileEvent
from pipecheck.records.steps import StepTable
from pipecheck.records.synthetic import SyntheticResult
from pipecheck.step_types import Batch, PyTree
from pipecheck.workloads import build_workload
from pipecheck.workloads.base import Workload

DEFAULT_STEPS = 160
"""Steps ``pipecheck synthetic`` times by default. Two runs of one workload differ less the
longer they run (benchmarks/diff_power.py, docs/performance.md: the runs' medians spread
2.7% between runs at 40 steps, 1.6% at 160, each median's own error 0.6% and 0.3%), so a
diff of two default runs judges a 5% change: 40 steps could not."""


def compiled_analysis(
    workload: Workload, state: PyTree, batch: Batch
) -> tuple[float | None, int | None]:
    """FLOPs per step and peak memory from the compiled step (free after the first call)."""
    try:
        compiled = workload.train_step.lower(state, batch).compile()
    except Exception:  # analysis is best effort; the timing does not depend on it
        return None, None
    flops = None
    try:
        cost = compiled.cost_analysis()
        if isinstance(cost, list):
            cost = cost[0] if cost else {}
        if cost and cost.get("flops", 0) > 0:
            flops = float(cost["flops"])
    except Exception:
        flops = None
    peak = None
    try:
        mem = compiled.memory_analysis()
        peak = getattr(mem, "peak_memory_in_bytes", None)
        if not peak:
            assert mem is not None  # no analysis: no peak (caught below)
            peak = (mem.argument_size_in_bytes + mem.output_size_in_bytes
                    + mem.temp_size_in_bytes - mem.alias_size_in_bytes)
        peak = int(peak)
    except Exception:
        peak = None
    return flops, peak


def throughput_of(median_s: float, workload: Workload, analysis_flops: float | None,
                  peak_memory: int | None) -> Throughput:
    if workload.flops_per_step is not None:
        flops, source = workload.flops_per_step, "workload (analytic)"
    elif analysis_flops is not None:
        flops, source = analysis_flops, "XLA cost analysis"
    else:
        flops, source = None, None
    ok = median_s > 0 and median_s == median_s
    tokens = workload.tokens_per_batch
    return Throughput(
        examples_per_s=workload.batch_size / median_s if ok else float("nan"),
        tokens_per_s=(tokens / median_s) if ok and tokens else None,
        tflops_per_s=(flops / median_s / 1e12) if ok and flops else None,
        flops_per_step=flops,
        flops_source=source,
        peak_memory_bytes=peak_memory,
    )


SYNTHETIC_RUN = "synthetic run"
"""The run ``synthetic`` times, as its warnings name it (compare's report holds them too)."""


def steady_distribution(steps: StepTable[StepRecord], run: str
                        ) -> tuple[Distribution, list[str]]:
    """Steady-state step times and the quality warnings about them; ``run`` names the run
    in the warning about the steps kept out (a report may hold several runs' warnings)."""
    mask = steady_mask(steps)
    step_time = Distribution.of(steps.column("time_s")[mask].tolist())
    warnings = stats.quality_warnings(step_time.summary)
    tagged = steps.tagged()
    out = ~mask
    out[[i for i, tags in tagged.items() if tags == ("drain",)]] = False
    out[:1] = False
    excluded = steps.column("step")[out].tolist()
    if excluded:
        shown = ", ".join(str(i) for i in excluded[:10]) + (" ..." if len(excluded) > 10 else "")
        warnings.append(f"{len(excluded)} step(s) of the {run} kept out of the steady state "
                        f"(tagged or anomalous): {shown}")
    return step_time, warnings


@dataclasses.dataclass
class SyntheticRun:
    """A synthetic result and the raw timeline behind it (for ``--trace``)."""

    result: SyntheticResult
    recorder: SpanRecorder
    compile_events: list[CompileEvent]


def measure_synthetic(
    config: RunConfig,
    steps: int = DEFAULT_STEPS,
    clock: Callable[[], float] = time.perf_counter,
    workload: Workload | None = None,
) -> SyntheticResult:
    """Train ``steps`` steps on one on-device batch; return the target step time."""
    return synthetic_run(config, steps, clock, workload).result


def synthetic_run(
    config: RunConfig,
    steps: int = DEFAULT_STEPS,
    clock: Callable[[], float] = time.perf_counter,
    workload: Workload | None = None,
    progress: Progress = NO_PROGRESS,
) -> SyntheticRun:
    """``measure_synthetic``, keeping the SpanRecorder and compile events of the run."""
    # lazy: JAX imported where used, so `import pipecheck` stays light
    import jax

    workload = workload or build_workload(config)
    env = collect_env()
    state = workload.init_state()
    batch = workload.put(workload.host_batch())
    jax.block_until_ready((state, batch))
    recorder = SpanRecorder(clock)
    progress.say(f"timing {steps} steps on one batch on the devices")
    loads = PhaseLoads(clock=clock)  # read before and after the steps, never between them
    with CompileWatcher(workload.train_step_name, clock) as watcher, loads.phase("target"):
        if workload.prepare is not None:
            workload.prepare(workload, state)
        with GcSpans(recorder):
            outcome = run_lagged_sync_loop(
                workload.train_step, state, itertools.repeat(batch), steps, recorder,
                hooks=workload.hooks, compiles=lambda: watcher.compiles,
            )
    events = [*watcher.events, *watcher.other_events]
    records, anomalies = with_anomalies(outcome.steps, compiles_per_step(recorder, events))
    step_time, warnings = steady_distribution(records, SYNTHETIC_RUN)
    flops, peak = compiled_analysis(workload, outcome.state, batch)
    compile_info = CompileInfo(
        first_step_s=outcome.steps[0].time_s,
        compile_s=watcher.compile_s,
        train_step_compiles=watcher.compiles,
        findings=tuple(watcher.findings()),
    )
    result = SyntheticResult(
        env=env,
        config=config.to_dict(),
        step_time=step_time,
        compile=compile_info,
        throughput=throughput_of(step_time.summary.median, workload, flops, peak),
        warnings=tuple(warnings),
        steps=records,
        anomalies=anomalies,
        machine_load=loads.record(host_cores()),
        wall_per_step_s=wall_per_step(records),
    )
    return SyntheticRun(result, recorder, events)
