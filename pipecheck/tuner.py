"""Adaptive search for the Grain worker count. Pure logic over an injected measurement.

The search grows the worker count (0, 1, 2, 4, 8, ...) until the loader is
safely faster than the target step time (D <= LOADER_HEADROOM * T), a doubling
stops paying (throughput gain below ``MIN_GAIN``), or the ceiling is reached
(``max_workers``, and a RAM ceiling). Then it refines between the last two
counts by bisection to find the *smallest* count that meets the goal. If no
count meets it, the fastest one is chosen and the run stays input-bound.

Whether the pipeline keeps scaling past the core count tells its nature:
latency-bound (I/O-like, sleeping) pipelines do, CPU-bound ones do not; the
result says which, from the measurements.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

from pipecheck.verdict import LOADER_HEADROOM

MIN_GAIN = 0.10
"""A doubling of workers that improves batch time by less than 10% has stopped helping."""

LATENCY_BOUND = "latency-bound"
CPU_BOUND = "cpu-bound"
UNKNOWN_SCALING = "unknown"


@dataclasses.dataclass(frozen=True)
class Trial:
    workers: int
    threads: int
    median_s: float


@dataclasses.dataclass(frozen=True)
class TuningOutcome:
    trials: tuple[Trial, ...]
    chosen: Trial
    meets_target: bool
    scaling: str
    reason: str


def worker_ladder(max_workers: int, start: int = 0) -> list[int]:
    """0, 1, 2, 4, ... up to and including max_workers."""
    ladder = [w for w in (0, 1) if start <= w <= max_workers]
    w = 2
    while w <= max_workers:
        if w >= start:
            ladder.append(w)
        w *= 2
    if max_workers not in ladder and max_workers >= start:
        ladder.append(max_workers)
    return ladder


def _scaling(trials: Sequence[Trial], cores: int) -> str:
    by_w = {t.workers: t.median_s for t in trials}
    beyond = [w for w in by_w if w > cores]
    at_cores = max((w for w in by_w if 0 < w <= cores), default=None)
    if at_cores is None or not beyond:
        return UNKNOWN_SCALING
    best_beyond = min(by_w[w] for w in beyond)
    return LATENCY_BOUND if best_beyond < by_w[at_cores] * (1 - MIN_GAIN) else CPU_BOUND


def choose(trials: Sequence[Trial], target_s: float) -> tuple[Trial, bool]:
    """Smallest worker count meeting the goal; else the fastest setting."""
    goal = target_s * LOADER_HEADROOM
    meeting = [t for t in trials if t.median_s <= goal]
    if meeting:
        return min(meeting, key=lambda t: (t.workers, t.threads)), True
    return min(trials, key=lambda t: (t.median_s, t.workers)), False


def tune(
    measure: Callable[[int, int], float],
    target_s: float,
    *,
    max_workers: int,
    cores: int,
    threads: int = 0,
    fixed_workers: Sequence[int] | None = None,
) -> TuningOutcome:
    """Search worker counts with ``measure(workers, threads) -> median batch seconds``."""
    trials: list[Trial] = []
    cache: dict[int, Trial] = {}

    def trial(w: int) -> Trial:
        if w not in cache:
            cache[w] = Trial(w, threads, float(measure(w, threads)))
            trials.append(cache[w])
        return cache[w]

    goal = target_s * LOADER_HEADROOM
    if fixed_workers:
        for w in fixed_workers:
            trial(w)
        chosen, ok = choose(trials, target_s)
        return TuningOutcome(tuple(trials), chosen, ok, _scaling(trials, cores),
                             "worker counts fixed by --workers")
    stop_reason = f"reached the ceiling of {max_workers} workers"
    previous: Trial | None = None
    for w in worker_ladder(max_workers):
        t = trial(w)
        if t.median_s <= goal:
            stop_reason = f"{w} workers meet the target with headroom"
            break
        if previous is not None and previous.workers > 0 and math.isfinite(t.median_s) and \
                t.median_s > previous.median_s * (1 - MIN_GAIN):
            stop_reason = (f"going from {previous.workers} to {w} workers gained less than "
                           f"{100 * MIN_GAIN:.0f}%")
            break
        previous = t
    # Refine: the smallest count between the last failing and the first meeting one.
    meeting = [t for t in trials if t.median_s <= goal]
    if meeting:
        hi = min(t.workers for t in meeting)
        lo = max((t.workers for t in trials if t.workers < hi and t.median_s > goal), default=hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if trial(mid).median_s <= goal:
                hi = mid
            else:
                lo = mid
    chosen, ok = choose(trials, target_s)
    return TuningOutcome(tuple(trials), chosen, ok, _scaling(trials, cores), stop_reason)
