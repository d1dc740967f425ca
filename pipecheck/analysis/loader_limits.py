"""Why more workers stop helping: one finding per measured loader setting. Pure functions.

From a setting's measured resources (``records.dataloader.Resources``: CPU seconds of the
training process and of the workers, peak memory, over the timed batches):

- *main-process-bound*: the training process itself is on the CPU for most of each batch's
  time (receiving from the workers through shared memory, collating, device_put, per-batch
  work after ``mp_prefetch``): it sets the pace, and more workers cannot beat it;
- *CPU-bound*: the workers and the training process run, or wait for a core, (nearly) all the
  time on every core: another worker only shares the same cores;
- *latency-bound*: each worker runs less than half of the time, so it mostly sleeps (I/O,
  latency): more workers or read threads overlap more waiting and keep helping past the
  core count;
- *memory-bound*: peak RSS per worker measured; the next worker would not fit the RAM budget.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

from pipecheck.records.common import Finding
from pipecheck.records.dataloader import LoaderSetting, Resources
from pipecheck.report.format import ms  # the one way milliseconds print

MAIN_PROCESS_BOUND_SHARE = 0.8
"""The training process on the CPU for 80% of the time a batch takes leaves the workers'
speed no room to matter: the consumer side is the limit."""

CPU_BOUND_SHARE = 0.85
"""Processes running or waiting for a core 85% of the time on every core want all the CPU
there is: another worker only shares it (the rest is the scheduler's slack)."""

LATENCY_BOUND_SHARE = 0.5
"""A worker that runs (or waits for a core) less than half of the time sleeps the rest: it
waits on I/O or latency, and more workers overlap more of that waiting."""

MAIN_PROCESS_BOUND: Literal["main-process-bound"] = "main-process-bound"
CPU_BOUND: Literal["cpu-bound"] = "cpu-bound"
LATENCY_BOUND: Literal["latency-bound"] = "latency-bound"
MEMORY_BOUND: Literal["memory-bound"] = "memory-bound"
LimitKind = Literal["main-process-bound", "cpu-bound", "latency-bound"]


def main_time_per_batch(setting: LoaderSetting) -> float:
    """The training process's own time per batch: its CPU time per batch (psutil) or, with
    workers, the time Grain's stage timing shows in the transforms that run in the training
    process (after ``mp_prefetch``), whichever is larger. A busy machine preempts the
    process while it holds a batch: then its CPU time understates that hold."""
    r = setting.resources
    if r is None:
        return math.nan
    stages = sum(s.avg_s for s in setting.stages
                 if s.where == "main" and s.n > 0 and math.isfinite(s.avg_s)) \
        if setting.workers else 0.0
    return max(r.main_cpu_per_batch_s, stages)


def main_share(setting: LoaderSetting) -> float:
    """The training process's own time per batch as a share of the time a batch takes."""
    r = setting.resources
    if r is None or not r.wall_s > 0 or not r.batches:
        return math.nan
    return main_time_per_batch(setting) / (r.wall_s / r.batches)


def cpu_per_worker(r: Resources) -> float:
    """Cores one worker keeps busy on average."""
    return r.worker_cpu_s / r.wall_s / r.workers_seen if r.wall_s > 0 and r.workers_seen \
        else math.nan


def limit_of(setting: LoaderSetting, cores: int) -> LimitKind | None:
    """What limits this setting, from its resources; None without workers or resources."""
    r = setting.resources
    if r is None or setting.workers == 0 or not r.wall_s > 0:
        return None
    if main_share(setting) >= MAIN_PROCESS_BOUND_SHARE:
        return MAIN_PROCESS_BOUND
    if worker_demand(r) < LATENCY_BOUND_SHARE:
        return LATENCY_BOUND
    if r.cores_wanted >= CPU_BOUND_SHARE * cores:
        return CPU_BOUND
    return None


def worker_demand(r: Resources) -> float:
    """Share of the time one worker runs or waits for a core (the rest it sleeps: I/O,
    latency)."""
    if not r.wall_s > 0 or not r.workers_seen:
        return math.nan
    return (r.worker_cpu_s + r.worker_wait_s) / r.wall_s / r.workers_seen


def limit_finding(setting: LoaderSetting, cores: int) -> Finding | None:
    """The finding saying why more workers stop helping at this setting (or keep helping)."""
    kind = limit_of(setting, cores)
    r = setting.resources
    if kind is None or r is None:
        return None
    per_batch = r.wall_s / r.batches
    where = f"workers={setting.workers}, threads={setting.threads}"
    numbers = {"batch_s": per_batch, "main_s_per_batch": main_time_per_batch(setting),
               "main_cpu_per_batch_s": r.main_cpu_per_batch_s,
               "worker_cpu_per_batch_s": r.worker_cpu_per_batch_s,
               "cores_busy": r.cores_busy, "cores_wanted": r.cores_wanted,
               "cores": float(cores)}
    if kind == MAIN_PROCESS_BOUND:
        return Finding(
            kind=kind,
            message=(f"the training process spends {ms(main_time_per_batch(setting))} "
                     f"per batch, {100 * main_share(setting):.0f}% of the {ms(per_batch)} a "
                     "batch takes: the consumer side (receiving from the workers, collating, "
                     "device_put, work after mp_prefetch) sets the pace, so more workers "
                     "cannot make it faster"),
            numbers=numbers, location=where,
            fix="move per-batch work from the training process into the workers' transforms "
                "(before mp_prefetch), batch inside the workers, or make batches cheaper to "
                "transfer",
        )
    if kind == CPU_BOUND:
        return Finding(
            kind=kind,
            message=(f"the workers spend {ms(r.worker_cpu_per_batch_s)} of CPU per "
                     f"batch; at {ms(per_batch)} per batch the processes want "
                     f"{r.cores_wanted:.1f} of {cores} cores (running or waiting for one): "
                     "another worker only shares the same cores"),
            numbers=numbers, location=where,
            fix="make the transforms cheaper, preprocess offline (once, stored), or run the "
                "loader on more cores",
        )
    return Finding(
        kind=kind,
        message=(f"each worker runs only {100 * worker_demand(r):.0f}% of "
                 f"the time ({ms(r.worker_cpu_per_batch_s)} of CPU per {ms(per_batch)} "
                 "batch, all workers together): they mostly wait (I/O, latency), so more "
                 "workers or read threads keep helping, also past the core count"),
        numbers=numbers, location=where,
    )


def memory_finding(setting: LoaderSetting, ram_budget_mb: float | None) -> Finding | None:
    """Memory per worker, and memory-bound when one more worker would not fit the budget."""
    r = setting.resources
    if r is None or setting.workers == 0 or not r.worker_rss_mb > 0 or ram_budget_mb is None:
        return None
    fits = int((ram_budget_mb - r.main_rss_mb) // r.worker_rss_mb)
    if fits > setting.workers:
        return None
    where = f"workers={setting.workers}, threads={setting.threads}"
    return Finding(
        kind=MEMORY_BOUND,
        message=(f"each worker peaks at {r.worker_rss_mb:.0f} MB and the training "
                 f"process at {r.main_rss_mb:.0f} MB: the RAM budget of {ram_budget_mb:.0f} MB "
                 f"fits at most {max(fits, 0)} workers"),
        numbers={"worker_rss_mb": r.worker_rss_mb, "main_rss_mb": r.main_rss_mb,
                 "ram_budget_mb": ram_budget_mb, "workers_that_fit": float(max(fits, 0))},
        location=where,
        fix="raise --ram-budget-mb if the machine has the memory, or shrink elements and "
            "buffers (per_worker_buffer_size, prefetch_buffer_size)",
    )


def limit_findings(settings: Sequence[LoaderSetting], cores: int,
                   ram_budget_mb: float | None = None) -> list[Finding]:
    """Every setting's limit finding, then its memory finding, in the order measured."""
    out = []
    for s in settings:
        for f in (limit_finding(s, cores), memory_finding(s, ram_budget_mb)):
            if f is not None:
                out.append(f)
    return out
