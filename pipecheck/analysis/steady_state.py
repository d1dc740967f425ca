"""What counts as the steady state: the warm-up rule for steps and for loader batches.

A step is kept out of the steady state when it is the first (trace and compile), or it
carries a tag for work that does not happen every step (compile, checkpoint, eval, gc),
or it fetched the first batch of a pass over its loader (``loader_start``: the
workers start again), or it is the loop's last interval (``drain``: no next batch was
fetched in it), or it was served from the batches Grain workers buffered while starting
up (``warmup``: they arrive at once and would look faster than the steady state), or it is
far from the others
(an anomaly, ``analysis.anomalies``).

A loop fed in bursts has a median that says little of its speed (the steps that waited and
those whose batches were ready both count once), so beside it stands its throughput: the
wall time per step over the steady window (``wall_per_step``).

The loader time D follows the same start-up rule: the batches the workers buffered
before the first one was awaited are left out, when at least as many remain.

A start-up buffer is counted in batches: Grain's read prefetch buffers the elements of the
dataset it reads, which a pipeline may pack or batch afterwards (MaxText reads documents,
packs them and batches the rows), so its size is divided by the elements one batch needs at
least (``read_prefetch_batches``). A run whose warm-up would leave too few steady steps is
made longer (``real_steps``).
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from pipecheck import stats
from pipecheck.analysis import anomalies
from pipecheck.records.common import Anomaly, Estimate, StepRecord
from pipecheck.records.kinds import StepTag
from pipecheck.records.steps import StepTable

STEADY_STATE_EXCLUDED_TAGS: tuple[StepTag, ...] = ("compile", "checkpoint", "eval", "gc",
                                                   "profile", "drain", "warmup",
                                                   "loader_start")
"""Steps carrying any of these tags are reported apart from the steady state."""


def steady_state(steps: StepTable[StepRecord], skip_first: int = 1) -> StepTable[StepRecord]:
    """The steps that measure the steady state: not the first, none tagged as special, and
    none far from the others (``anomalies.flag_outliers``: a slow step, or a fast one that
    was charged less than its share)."""
    return steps.take(np.flatnonzero(steady_mask(steps, skip_first)))


def steady_mask(steps: StepTable[StepRecord], skip_first: int = 1) -> np.ndarray:
    """``steady_state`` as a boolean array over ``steps``."""
    return anomalies.steady_mask(steps, STEADY_STATE_EXCLUDED_TAGS, skip_first)


MIN_WINDOW_STEPS = 3
"""Fewest steps of the steady window a wall time per step is given for (its interval needs
samples to resample)."""


def steady_window(steps: StepTable[StepRecord], skip_first: int = 1) -> np.ndarray:
    """The steps the steady state is chosen from, as a boolean array over ``steps``: none
    before ``skip_first``, none tagged apart (``STEADY_STATE_EXCLUDED_TAGS``); the anomalies,
    the input waits and the ready batches are all in it."""
    return anomalies.candidate_mask(steps, STEADY_STATE_EXCLUDED_TAGS, skip_first)


def wall_per_step(steps: StepTable[StepRecord], skip_first: int = 1) -> Estimate | None:
    """The throughput as time: the wall time per step over the steady window (a step's
    time is the interval between its marks, so their mean is the window's wall time over
    its steps), with its 95% block-bootstrap interval (blocks span the bursts of a loop
    fed in bursts; ``stats.default_block_length``). None with fewer than
    ``MIN_WINDOW_STEPS`` steps in the window."""
    times = steps.column("time_s")[steady_window(steps, skip_first)]
    if times.size < MIN_WINDOW_STEPS:
        return None
    return Estimate.of_mean(times.tolist(), block=stats.default_block_length(times.size))


def step_anomalies(
    steps: StepTable[StepRecord], compiles: Mapping[int, Mapping[str, float]] | None = None
) -> list[Anomaly]:
    """The anomalous steps of a run timed by the lagged-sync loop (see
    ``anomalies.step_anomalies``)."""
    return anomalies.step_anomalies(steps, STEADY_STATE_EXCLUDED_TAGS, compiles)


def with_anomalies(
    steps: StepTable[StepRecord], compiles: Mapping[int, Mapping[str, float]] | None = None
) -> tuple[StepTable[StepRecord], tuple[Anomaly, ...]]:
    """The steps of a measured run with their anomaly tags, and the anomalies."""
    found = step_anomalies(steps, compiles)
    return anomalies.tag_anomalies(steps, found, STEADY_STATE_EXCLUDED_TAGS), tuple(found)


def read_prefetch_batches(read_prefetch: int, elements_per_batch: int = 1) -> int:
    """Batches a read prefetch buffer of ``read_prefetch`` elements holds at most: Grain's
    ``ReadOptions.prefetch_buffer_size`` counts the elements of the dataset it reads, which
    are whole batches only when the pipeline reads batches; a pipeline that packs or batches
    after reading needs at least ``elements_per_batch`` of them for one batch."""
    return -(-read_prefetch // max(1, elements_per_batch))


def buffered_at_start(workers: int, per_worker_buffer: int, read_prefetch: int = 0,
                      elements_per_batch: int = 1) -> int:
    """Batches held ready when the first one is awaited: each of ``workers`` Grain workers'
    output buffer, and the read prefetch buffer of every process that reads (the training
    process when there are no workers), converted from elements to batches
    (``read_prefetch_batches``)."""
    return (workers * per_worker_buffer
            + max(1, workers) * read_prefetch_batches(read_prefetch, elements_per_batch))


def warmup_steps(workers: int, per_worker_buffer: int, read_prefetch: int = 0,
                 elements_per_batch: int = 1) -> int:
    """Real-data steps served from the prefetch buffer filled during start-up (after step 0):
    they would look faster than the steady state, so they are kept out of it."""
    return buffered_at_start(workers, per_worker_buffer, read_prefetch, elements_per_batch) + 1


STEADY_SHARE = 0.5
"""A real-data run keeps at least half the steps asked for in the steady state: a warm-up
that would take more makes the run longer, rather than leave R too few samples to decide."""

MIN_STEADY_STEPS = 5
"""Fewest steady steps a real-data run is sized for: R needs 3 (``Estimate.usable``), and
a step or two may be far from the others (anomalies, kept out of it)."""


def real_steps(steps: int, warmup: int) -> int:
    """Real-data steps to run when ``steps`` were asked for and the first ``warmup`` are
    warm-up (``warmup_steps``): ``steps``, or more, so that at least ``STEADY_SHARE`` of
    them (and ``MIN_STEADY_STEPS``) fall between the warm-up and the last step (``drain``)."""
    steady = max(MIN_STEADY_STEPS, math.ceil(STEADY_SHARE * steps))
    return max(steps, warmup + steady + 1)


def tag_warmup(steps: StepTable[StepRecord], n: int) -> StepTable[StepRecord]:
    """Tag steps 1 .. n-1 ``warmup`` (step 0 is outside the steady state anyway)."""
    numbers = steps.column("step")
    rows = np.flatnonzero((numbers > 0) & (numbers < n)).tolist()
    return steps.with_tags({i: (*steps[i].tags, "warmup") for i in rows}) if rows else steps


def steady_batch_start(n_batches: int, workers: int, per_worker_buffer: int,
                       read_prefetch: int = 0, elements_per_batch: int = 1) -> int:
    """How many of ``n_batches`` timed batches come before the steady state: those buffered
    while the workers started up (they arrive at once), when at least as many remain; else
    none."""
    skip = buffered_at_start(workers, per_worker_buffer, read_prefetch, elements_per_batch)
    return skip if n_batches >= 2 * skip else 0


def steady_batch_samples(samples: Sequence[float], workers: int,
                         per_worker_buffer: int, read_prefetch: int = 0,
                         elements_per_batch: int = 1) -> tuple[float, ...]:
    """A setting's batch times without those its workers buffered while starting up (they
    arrive at once and are not the steady state), when at least as many remain."""
    out = tuple(samples)
    return out[steady_batch_start(len(out), workers, per_worker_buffer, read_prefetch,
                                  elements_per_batch):]


def burst_block(workers: int, n: int) -> int:
    """Bootstrap block length for batch times from ``workers`` workers: at least two burst
    periods (W workers deliver W batches, then wait), so every block holds whole bursts."""
    return max(stats.default_block_length(n), 2 * workers)


def loader_estimate(samples: Sequence[float], workers: int,
                    per_worker_buffer: int, parallel: int | None = None,
                    read_prefetch: int = 0, elements_per_batch: int = 1) -> Estimate:
    """D: the mean seconds per steady batch (1 / throughput; workers deliver in bursts) with
    its interval, bootstrapped in blocks of whole bursts: ``parallel`` batches read at once
    (workers x read threads, ``GrainSettings.parallel_reads``; default: the workers)."""
    steady = steady_batch_samples(samples, workers, per_worker_buffer, read_prefetch,
                                  elements_per_batch)
    burst = workers if parallel is None else parallel
    return Estimate.of_mean(steady, block=burst_block(burst, len(steady)))
