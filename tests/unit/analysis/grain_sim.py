"""Simulated Grain pipelines for the tuner: D, first batch and memory as functions of the
four knobs. Deterministic models, no timing.

A batch costs ``sleep_s`` of latency (overlaps across read threads and workers), ``cpu_s``
of GIL-holding CPU work (overlaps across workers only, up to the cores; past them the
workers slow each other down by ``contention`` per extra worker) and ``consumer_s`` in the
training process (never overlaps: more workers cannot beat it).
"""

from __future__ import annotations

import dataclasses
import itertools
import random

from pipecheck.analysis.loader.tuner import (
    BUFFER_LADDER,
    PREFETCH_FACTORS,
    THREAD_LADDER,
    Trial,
)
from pipecheck.records.grain_settings import GrainSettings


@dataclasses.dataclass(frozen=True)
class SimPipeline:
    sleep_s: float = 0.0
    cpu_s: float = 0.0
    consumer_s: float = 0.0
    cores: int = 2
    contention: float = 0.0
    start_s: float = 0.05
    start_per_worker_s: float = 0.6
    main_mb: float = 300.0
    worker_mb: float = 200.0
    calls: list = dataclasses.field(default_factory=list, compare=False)

    def batch_s(self, s: GrainSettings) -> float:
        overlap = max(1, min(s.threads, s.prefetch))
        per_process = self.sleep_s / overlap + self.cpu_s  # one process's time per batch
        if s.workers == 0:
            return per_process + self.consumer_s
        cpu_parallel = min(s.workers, self.cores)
        over = max(0, s.workers - self.cores)
        cpu_rate_limit = cpu_parallel / (self.cpu_s * (1 + self.contention * over)) \
            if self.cpu_s else float("inf")
        rate = min(s.workers / per_process, cpu_rate_limit)
        burst = 1.05 if s.per_worker_buffer == 1 else 1.0  # one slot: workers idle a little
        return max(burst / rate, self.consumer_s)

    def trial(self, s: GrainSettings) -> Trial:
        self.calls.append(s)
        return Trial.of(s, self.batch_s(s),
                        first_batch_s=self.start_s + self.start_per_worker_s * s.workers,
                        worker_rss_mb=self.worker_mb if s.workers else float("nan"),
                        main_rss_mb=self.main_mb)

    def measure_workers(self, w: int, t: int) -> float:
        return self.trial(GrainSettings(w, threads=t)).batch_s


def grid(max_workers: int, threads=THREAD_LADDER, buffers=BUFFER_LADDER,
         factors=PREFETCH_FACTORS) -> list[GrainSettings]:
    """Every setting the joint search could visit (workers=0 has no per-worker buffer)."""
    out = []
    for w, t, b, f in itertools.product(range(max_workers + 1), threads, buffers, factors):
        s = GrainSettings(w, b if w else 2, t, max(1, f * t))
        if s not in out:
            out.append(s)
    return out


class NoisyReadings:
    """``sim.trial`` with injected noise, seeded: each reading is, with probability
    ``bad_share``, ``factor`` times the pipeline's true D (another program took the cores
    while it was measured), and every reading is off by up to ``jitter`` (a fraction,
    uniform) either way. ``calls`` counts the readings."""

    def __init__(self, sim: SimPipeline, seed: int, bad_share: float = 0.1,
                 factor: float = 3.0, jitter: float = 0.0) -> None:
        self.sim = sim
        self.rng = random.Random(seed)
        self.bad_share = bad_share
        self.factor = factor
        self.jitter = jitter
        self.calls = 0

    def __call__(self, s: GrainSettings) -> Trial:
        self.calls += 1
        t = self.sim.trial(s)
        scale = 1.0 + self.rng.uniform(-self.jitter, self.jitter)
        if self.rng.random() < self.bad_share:
            scale *= self.factor
        return dataclasses.replace(t, batch_s=t.batch_s * scale)


class FirstReadingInflated:
    """``sim.trial`` with the first reading of one setting inflated 3x."""

    def __init__(self, sim: SimPipeline, bad: GrainSettings) -> None:
        self.sim, self.bad, self.seen = sim, bad, 0

    def __call__(self, s: GrainSettings) -> Trial:
        t = self.sim.trial(s)
        if s == self.bad:
            self.seen += 1
            if self.seen == 1:
                return dataclasses.replace(t, batch_s=3 * t.batch_s)
        return t
