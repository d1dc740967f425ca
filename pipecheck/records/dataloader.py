"""The ``pipecheck dataloader`` record: one LoaderSetting per worker/thread setting timed."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping, Sequence

from pipecheck.records.base import Record, TopRecord, register_kind
from pipecheck.records.common import Distribution, Estimate, Finding
from pipecheck.records.grain_settings import GrainSettings, SettingsKnobs
from pipecheck.records.hosts import HostSummary, Straggler


@dataclasses.dataclass(frozen=True)
class Stage(Record):
    """One transformation of the pipeline, from Grain's stage timing."""

    name: str
    where: str
    """``main`` (the training process) or ``workers`` (merged over all workers)."""
    wait_ratio: float
    """Grain's "percent wait time": share of the time the consumer waits that is spent in
    this stage (0..1; the stages of a pipeline add up to about 1)."""
    total_s: float
    avg_s: float
    """Processing time per element produced by this stage."""
    n: int
    """Elements this stage produced (examples or batches)."""


def slowest_stage(stages: Sequence[Stage]) -> Stage | None:
    """The stage the pipeline waits on most (highest wait ratio)."""
    timed = [s for s in stages if s.n > 0]
    return max(timed, key=lambda s: s.wait_ratio) if timed else None


@dataclasses.dataclass(frozen=True)
class Resources(Record):
    """CPU and memory of one setting over its steady batches (the first batch, and the
    batches buffered while the workers started up, left out)."""

    batches: int
    """Batches consumed inside the window (the timed ones past those buffered at start-up)."""
    wall_s: float
    """Wall time from the batch boundary past the batches buffered at start-up (just after
    the first batch when too few were timed) to just after the last timed one."""
    main_cpu_s: float
    """CPU seconds of the training process (every thread: receiving from the workers,
    collating, device_put, and the whole pipeline when there are no workers)."""
    worker_cpu_s: float
    """CPU seconds of all worker processes together."""
    workers_seen: int
    main_rss_mb: float
    """Peak resident memory of the training process during the timed batches, MB."""
    worker_rss_mb: float
    """Peak resident memory of the largest worker process (its lifetime peak), MB."""
    workers_rss_mb: float
    """Peak resident memory of all worker processes, summed, MB."""
    main_wait_s: float = 0.0
    """Seconds the training process's threads were ready to run but waited for a core (the
    kernel's run-queue delay): CPU it wanted and did not get."""
    worker_wait_s: float = 0.0
    """The same for all worker processes together."""

    @property
    def main_cpu_per_batch_s(self) -> float:
        return self.main_cpu_s / self.batches if self.batches else float("nan")

    @property
    def worker_cpu_per_batch_s(self) -> float:
        """CPU seconds the workers spend per batch (all workers together)."""
        return self.worker_cpu_s / self.batches if self.batches else float("nan")

    @property
    def cpu_per_batch_s(self) -> float:
        """CPU seconds the training process and the workers spend per batch, together."""
        return (self.main_cpu_s + self.worker_cpu_s) / self.batches if self.batches \
            else float("nan")

    @property
    def cores_wanted(self) -> float:
        """Cores the training process and the workers would have kept busy: the CPU they got
        plus the CPU they waited for (other programs on the machine take their share)."""
        total = self.main_cpu_s + self.worker_cpu_s + self.main_wait_s + self.worker_wait_s
        return total / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def cores_busy(self) -> float:
        """Cores kept busy on average by the training process and the workers together."""
        return (self.main_cpu_s + self.worker_cpu_s) / self.wall_s if self.wall_s > 0 \
            else float("nan")


@dataclasses.dataclass(frozen=True)
class Reads(Record):
    """The pipeline's reading stage at one setting, from Grain's stage timing: the stage that
    reads records from the data source (``analysis.loader.storage.read_stage``)."""

    stage: str
    """The reading stage's name (Grain's ``SourceMapDataset(source=...)``)."""
    where: str
    """``main`` (the training process) or ``workers``."""
    read_s: float
    """Wall seconds per read: the stage's time per element it produced (the latency of one
    read, waiting included; concurrent reads each count their own)."""
    reads_per_batch: float
    """Reads one batch takes: elements the reading stage produced per element the pipeline's
    output stage produced."""
    wait_ratio: float
    """The reading stage's share of the time the pipeline waits (Grain's wait ratio, 0..1)."""

    @property
    def read_s_per_batch(self) -> float:
        """Seconds of reading per batch, summed over its reads (reads running at once each
        count their own wall time)."""
        return self.read_s * self.reads_per_batch


@dataclasses.dataclass(frozen=True)
class PageCache(Record):
    """How much of the data files the pipeline reads sat in the page cache around one setting
    (``measure.page_cache``: mincore on a read-only mapping of each file), read before the
    setting started and after it ended, outside every timed interval."""

    files: int
    """Data files measured."""
    data_bytes: int
    """Their size together, bytes."""
    resident_before: float | None
    """Share of their bytes in the page cache before the setting (0..1); None where the
    files cannot be mapped (FUSE with direct_io)."""
    resident_after: float | None
    """The same after the setting."""
    evicted: bool = False
    """``--cold``: the files were evicted from the page cache just before (then
    ``resident_before`` is what eviction left)."""
    warnings: tuple[str, ...] = ()
    """What the cache did to this setting's D (``analysis.loader.warm_cache``): measured warm on
    data larger than the cache can hold; a level change where the pass over the data turned
    warm."""


@dataclasses.dataclass(frozen=True)
class LoaderSetting(SettingsKnobs, Record):
    """The pipeline measured at one setting of Grain's four knobs (workers, threads,
    per-worker buffer, read prefetch)."""

    settings: GrainSettings
    """The setting measured: workers, per-worker buffer, read threads, read prefetch."""
    first_batch_s: float
    batch_time: Distribution
    batches_per_s: float
    examples_per_s: float
    tokens_per_s: float | None = None
    examples_per_batch: int = 0
    stages: tuple[Stage, ...] = ()
    stages_complete: bool = True
    """False when the workers' stage reports did not cover every batch in time."""
    warnings: tuple[str, ...] = ()
    loader_time: Estimate = dataclasses.field(kw_only=True)
    """D: mean seconds per steady batch (the batches workers buffered at start-up left out),
    with its interval: the loader time the verdict uses."""
    resources: Resources | None = None
    reads: Reads | None = None
    """The reading stage's latency per read and reads per batch (None: no stage timing, or
    no stage reading a data source)."""
    page_cache: PageCache | None = None
    """The data files' page-cache residency before and after the setting (None: the files
    the source reads are not known)."""

    @property
    def cpu_per_batch_s(self) -> float | None:
        """CPU seconds the training process and the workers spend per batch at this setting;
        None when not measured (a record from before resources were measured)."""
        r = self.resources
        return r.cpu_per_batch_s if r is not None and r.batches else None


@dataclasses.dataclass(frozen=True)
class ElementCosts(Record):
    """The per-element cost of the pipeline's expensive stage, each element's call timed
    apart from the timed batches (``measure.element_cost``)."""

    stage: str
    costs: Distribution
    """Seconds per element."""
    per_batch: int
    """Elements of the stage in one batch."""


@register_kind
@dataclasses.dataclass(frozen=True)
class DataloaderResult(TopRecord):
    """``pipecheck dataloader``: one LoaderSetting per (workers, threads) setting."""

    KIND: ClassVar[str] = "dataloader"
    env: Mapping[str, Any]
    config: Mapping[str, Any]
    results: tuple[LoaderSetting, ...]
    batches: int
    device_put: bool = True
    timeout_s: float | None = None
    hosts: tuple[HostSummary, ...] = ()
    """Multi-process runs: every host's summary, on process 0's record (empty otherwise)."""
    straggler: Straggler | None = None
    """The host every other host waits for, or None (see docs/multihost.md)."""
    host_findings: tuple[Finding, ...] = ()
    """What the hosts' comparison found: a straggler, a synchronized stall, or none."""
    ram_budget_mb: float | None = None
    """The RAM budget the settings were judged against (``--ram-budget-mb``)."""
    limit_findings: tuple[Finding, ...] = ()
    """Why more workers stop helping, per setting (``analysis.loader.loader_limits``: its limit,
    then memory), judged when measured against the cores this process may use and
    ``ram_budget_mb``."""
    element_costs: ElementCosts | None = None
    """The expensive stage's per-element costs (None: not timed, or no plain map)."""
    sample_findings: tuple[Finding, ...] = ()
    """A ``slow-samples`` finding when a few elements cost many times the rest
    (``analysis.loader.slow_samples``)."""
    storage_findings: tuple[Finding, ...] = ()
    """A ``storage-bound`` finding when loading waits on storage rather than computing
    (``analysis.loader.storage``)."""
    cold: bool = False
    """``--cold``: the data files were evicted from the page cache before each setting."""
