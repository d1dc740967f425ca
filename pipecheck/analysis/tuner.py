"""Adaptive search for the Grain worker count. Pure logic over an injected measurement.

Goal: the *smallest* worker count whose batch time D is safely below the target
step time (D <= LOADER_HEADROOM * T), in few trials.

1. 0 workers (loading in the training process), then 1: often enough already.
2. Predict: a pipeline that scales perfectly needs ceil(D(1) / goal) workers.
   Measure that count. If it misses, predict again from the rate it reached
   (ceil(W * D(W) / goal)), until the goal is met, a step gains less than
   ``MIN_GAIN`` (the pipeline stopped scaling), or the ceiling is reached
   (``max_workers``, and a RAM ceiling).
3. Refine: confirm that one worker fewer misses the goal (bisecting further down
   if it does not). If no count met the goal, find the fewest workers within
   ``MIN_GAIN`` of the fastest, and the run stays input-bound.

Whether the pipeline keeps scaling past the core count tells its nature:
latency-bound (I/O-like, sleeping) pipelines do, CPU-bound ones do not; the
result says which, from the measurements.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

from pipecheck.analysis.verdict import LOADER_HEADROOM

MIN_GAIN = 0.10
"""A doubling of workers that improves batch time by less than 10% has stopped helping."""

SCALING_EFFICIENCY_FLOOR = 0.5
"""A count that reaches less than half of perfect scaling from one worker (D(1) / (W * D(W)))
means the pipeline stopped scaling below it: the search looks no higher."""

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


def _scaling(trials: Sequence[Trial], cores: int) -> str:
    by_w = {t.workers: t.median_s for t in trials}
    beyond = [w for w in by_w if w > cores]
    at_cores = max((w for w in by_w if 0 < w <= cores), default=None)
    if at_cores is None or not beyond:
        return UNKNOWN_SCALING
    best_beyond = min(by_w[w] for w in beyond)
    return LATENCY_BOUND if best_beyond < by_w[at_cores] * (1 - MIN_GAIN) else CPU_BOUND


def choose(trials: Sequence[Trial], target_s: float) -> tuple[Trial, bool]:
    """The fewest workers meeting the goal; else the fastest setting, where settings within
    ``MIN_GAIN`` of the fastest count as equally fast (the fewest workers among them)."""
    if not trials:
        raise ValueError("no loader settings to choose from")
    goal = target_s * LOADER_HEADROOM
    meeting = [t for t in trials if t.median_s <= goal]
    if meeting:
        return min(meeting, key=lambda t: (t.workers, t.threads)), True
    fastest = min(t.median_s for t in trials)
    near = [t for t in trials if t.median_s <= fastest * (1 + MIN_GAIN)]
    return min(near, key=lambda t: (t.workers, t.threads)), False


def outcome(trials: Sequence[Trial], target_s: float, cores: int, reason: str) -> TuningOutcome:
    """The choice, and the pipeline's scaling, from settings already measured."""
    chosen, ok = choose(trials, target_s)
    return TuningOutcome(tuple(trials), chosen, ok, _scaling(trials, cores), reason)


def tune(
    measure: Callable[[int, int], float],
    target_s: float,
    *,
    max_workers: int,
    cores: int,
    threads: int = 0,
    fixed_workers: Sequence[int] | None = None,
) -> TuningOutcome:
    """Search worker counts with ``measure(workers, threads) -> seconds per batch``."""
    trials: list[Trial] = []
    cache: dict[int, Trial] = {}

    def trial(w: int) -> float:
        if w not in cache:
            cache[w] = Trial(w, threads, float(measure(w, threads)))
            trials.append(cache[w])
        return cache[w].median_s

    goal = target_s * LOADER_HEADROOM

    def smallest(ok: Callable[[float], bool], hi: int, confirm_first: bool) -> None:
        """Lower ``hi`` (ok) towards the largest measured count that is not ok."""
        lo = max((w for w in cache if w < hi and not ok(cache[w].median_s)), default=0)
        first = confirm_first
        while hi - lo > 1:
            # A prediction is usually tight: confirm one fewer first, then bisect.
            mid = hi - 1 if first else (lo + hi) // 2
            first = False
            if ok(trial(mid)):
                hi = mid
            else:
                lo = mid

    if fixed_workers:
        for w in fixed_workers:
            trial(w)
        return outcome(trials, target_s, cores, "worker counts fixed by --workers")

    stop_reason = f"reached the ceiling of {max_workers} workers"
    w = 0
    met = trial(0) <= goal
    if not met and max_workers >= 1:
        w = 1
        met = trial(1) <= goal
        while not met and w < max_workers:
            d = cache[w].median_s
            if not math.isfinite(d):
                break
            nxt = min(max_workers, max(w + 1, math.ceil(w * d / goal)))
            best_before = min(t.median_s for t in trials)
            dn = trial(nxt)
            met = dn <= goal
            if not met and dn > best_before * (1 - MIN_GAIN):
                stop_reason = (f"going from {w} to {nxt} workers gained less than "
                               f"{100 * MIN_GAIN:.0f}%")
                break
            efficiency = cache[1].median_s / (nxt * dn) if dn > 0 else 1.0
            if not met and efficiency < SCALING_EFFICIENCY_FLOOR:
                stop_reason = (f"{nxt} workers reach only {100 * efficiency:.0f}% of perfect "
                               "scaling: the pipeline stopped scaling below that")
                break
            w = nxt
    if met:
        hi = min(t.workers for t in trials if t.median_s <= goal)
        smallest(lambda d: d <= goal, hi, confirm_first=True)
        stop_reason = f"{min(t.workers for t in trials if t.median_s <= goal)} workers meet " \
                      "the target with headroom"
    elif trials:
        fastest = min(t.median_s for t in trials)
        near = min(t.workers for t in trials if t.median_s <= fastest * (1 + MIN_GAIN))
        smallest(lambda d: d <= fastest * (1 + MIN_GAIN), near, confirm_first=False)
    return outcome(trials, target_s, cores, stop_reason)
