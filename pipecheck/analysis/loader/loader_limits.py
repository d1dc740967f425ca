"""Why more workers stop helping: one finding per measured loader setting. Pure functions.

From a setting's measured resources (``records.dataloader.Resources``: CPU seconds of the
training process and of the workers, peak memory, over the timed batches):

- *main-process-bound*: the training process itself is on the CPU for most of each batch's
  time (receiving from the workers through shared memory, collating, device_put, per-batch
  work after ``mp_prefetch``): it sets the pace, and more workers cannot beat it;
- *CPU-bound*: the workers compute most of the time they are not waiting for a core, and
  with the training process they want (nearly) every core: another worker only shares the
  same cores;
- *latency-bound*: each worker runs less than half of the time it is not waiting for a
  core, so it mostly sleeps (I/O, latency): more workers or read threads overlap more
  waiting and keep helping past the core count;
- *not sure*: the cores are all wanted but not all used, and the workers' share of
  computing is too close to half to tell sleeping from computing (a busy machine): said
  so, instead of a guess that flips from run to run;
- *memory-bound*: peak RSS per worker measured; the next worker would not fit the RAM budget.

Sleeping and computing are told apart by each worker's CPU time per batch against the wall
time it takes per batch *less the time it waited for a core* (``worker_compute_share``):
on a machine shared with other programs a sleeping worker waits for a core after each
wake-up, which pushes its share of running-or-waiting towards that of a computing one, but
not the share of the remaining time that it computes.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

from pipecheck.records.common import Finding
from pipecheck.records.dataloader import LoaderSetting, Resources
from pipecheck.units import ms

MAIN_PROCESS_BOUND_SHARE = 0.8
"""The training process on the CPU for 80% of the time a batch takes leaves the workers'
speed no room to matter: the consumer side is the limit."""

CPU_BOUND_SHARE = 0.85
"""Processes running or waiting for a core 85% of the time on every core want all the CPU
there is: another worker only shares it (the rest is the scheduler's slack)."""

LATENCY_BOUND_SHARE = 0.5
"""A worker that computes less than half of the time it is not waiting for a core sleeps
the rest: it waits on I/O or latency, and more workers overlap more of that waiting."""

LIMIT_MARGIN = 0.1
"""Compute shares within 0.1 of ``LATENCY_BOUND_SHARE`` (0.4 .. 0.6) are "not sure" when the
cores are all wanted but not all used: a claim that flips between runs is worse than none.
A judgment, not a measured spread: sleeping workers read 0.02-0.07 and CPU-bound ones
0.7-1.0 here, so the band only catches settings that are neither clearly."""

MAIN_PROCESS_BOUND: Literal["main-process-bound"] = "main-process-bound"
CPU_BOUND: Literal["cpu-bound"] = "cpu-bound"
LATENCY_BOUND: Literal["latency-bound"] = "latency-bound"
LIMIT_UNCLEAR: Literal["limit-unclear"] = "limit-unclear"
MEMORY_BOUND: Literal["memory-bound"] = "memory-bound"
LimitKind = Literal["main-process-bound", "cpu-bound", "latency-bound", "limit-unclear"]


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
    """What limits this setting, from its resources; None without workers or resources, or
    when nothing does (the cores are not all wanted and the workers do not mostly sleep)."""
    r = setting.resources
    if r is None or setting.workers == 0 or not r.wall_s > 0:
        return None
    if main_share(setting) >= MAIN_PROCESS_BOUND_SHARE:
        return MAIN_PROCESS_BOUND
    share = worker_compute_share(r)
    if share < LATENCY_BOUND_SHARE - LIMIT_MARGIN:
        return LATENCY_BOUND
    if r.cores_wanted < CPU_BOUND_SHARE * cores:
        return None
    if share >= LATENCY_BOUND_SHARE + LIMIT_MARGIN or r.cores_busy >= CPU_BOUND_SHARE * cores:
        # the cores were not only wanted but used: waits do not inflate CPU time
        return CPU_BOUND
    return LIMIT_UNCLEAR


def worker_compute_share(r: Resources) -> float:
    """Share of the time one worker is not waiting for a core that it computes: its CPU time
    per batch against the wall time it takes per batch less its run-queue wait. What it
    would run on an otherwise idle machine; the rest it sleeps (I/O, latency)."""
    if not r.wall_s > 0 or not r.workers_seen:
        return math.nan
    not_waiting = r.wall_s * r.workers_seen - r.worker_wait_s
    # Waits are summed over a worker's threads and may exceed its wall time: then it
    # never slept.
    return min(1.0, r.worker_cpu_s / not_waiting) if not_waiting > 0 else 1.0


def limit_finding(setting: LoaderSetting, cores: int) -> Finding | None:
    """The finding saying why more workers stop helping at this setting (or keep helping)."""
    kind = limit_of(setting, cores)
    r = setting.resources
    if kind is None or r is None:
        return None
    per_batch = r.wall_s / r.batches
    where = setting.settings.short_label()
    numbers = {"batch_s": per_batch, "main_s_per_batch": main_time_per_batch(setting),
               "main_cpu_per_batch_s": r.main_cpu_per_batch_s,
               "worker_cpu_per_batch_s": r.worker_cpu_per_batch_s,
               "worker_compute_share": worker_compute_share(r),
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
    share = f"{100 * worker_compute_share(r):.0f}%"
    if kind == LIMIT_UNCLEAR:
        return Finding(
            kind=kind,
            message=(f"not sure whether the workers compute or sleep: each runs {share} of "
                     "the time it is not waiting for a core, too close to half to tell, and "
                     f"the processes want {r.cores_wanted:.1f} of {cores} cores (running or "
                     "waiting for one): more workers may help (sleeping) or only share the "
                     "cores (computing)"),
            numbers=numbers, location=where,
            fix="measure this setting again with more --batches, or on a quieter machine",
        )
    return Finding(
        kind=kind,
        message=(f"each worker runs only {share} of the time it is not waiting for a core "
                 f"({ms(r.worker_cpu_per_batch_s)} of CPU per {ms(per_batch)} batch, all "
                 "workers together): they mostly wait (I/O, latency), so more workers or "
                 "read threads keep helping, also past the core count"),
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
    where = setting.settings.short_label()
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
