"""Per-host records of a multi-process run: what each process sends to process 0 (bounded,
whatever the run's length) and the straggler named from them."""

from __future__ import annotations

import dataclasses
import functools

from pipecheck.records.base import Record
from pipecheck.records.grain_settings import DEFAULT_PER_WORKER_BUFFER, GrainSettings


@dataclasses.dataclass(frozen=True)
class HostLoader(Record):
    """One loader setting as measured on one host: D (mean seconds per batch) with its
    interval, and the first batch."""

    workers: int
    threads: int
    loader_s: float
    low_s: float
    high_s: float
    first_batch_s: float
    per_worker_buffer: int = DEFAULT_PER_WORKER_BUFFER
    prefetch: int = 0
    """0 in files written before it was stored: GrainSettings' default."""

    @functools.cached_property
    def settings(self) -> GrainSettings:
        return GrainSettings(self.workers, self.per_worker_buffer, self.threads, self.prefetch)


@dataclasses.dataclass(frozen=True)
class HostSummary(Record):
    """One process's measurement, reduced to a bounded summary (a few hundred bytes: it is
    gathered from every host through the distributed runtime's key-value store).

    ``loader`` holds D per loader setting timed on this host; the step fields come from a
    training loop (the real-data run of ``compare``, a Monitor run, ``synthetic``);
    ``stalls`` are the steps far slower than this host's median step (at most
    ``MAX_STALLS``), with this host's data wait in each.
    """

    process_id: int
    hostname: str
    loader: tuple[HostLoader, ...] = ()
    data_wait_median_s: float | None = None
    data_wait_p90_s: float | None = None
    data_wait_low_s: float | None = None
    data_wait_high_s: float | None = None
    """The interval of the median data wait per step."""
    step_s: float | None = None
    """Median step time on this host (equal on every host under SPMD)."""
    steps: int = 0
    stalls: tuple[int, ...] = ()
    stall_data_wait_s: tuple[float, ...] = ()
    """This host's data wait in each stalled step (same order as ``stalls``)."""

    @property
    def first_batch_s(self) -> float | None:
        return self.loader[-1].first_batch_s if self.loader else None


@dataclasses.dataclass(frozen=True)
class Straggler(Record):
    """The host every other host waits for, with the numbers that show it."""

    process_id: int
    hostname: str
    ratio: float
    """Its time over the median host's (loader time D, or data wait per step)."""
    metric: str
    """``loader time`` (D, at ``setting``) or ``data wait`` (per real-data step)."""
    value_s: float
    median_s: float
    """The median host's value."""
    evidence: str
    setting: str | None = None
    others: tuple[int, ...] = ()
    """Further hosts also clearly slower than the median host (slowest first)."""
