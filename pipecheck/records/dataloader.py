"""The ``pipecheck dataloader`` record: one LoaderSetting per worker/thread setting timed."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from pipecheck.records.base import FORMAT_VERSION, Record, register_kind
from pipecheck.records.common import Distribution, Estimate, Finding
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


@dataclasses.dataclass(frozen=True)
class LoaderSetting(Record):
    """The pipeline measured with one (workers, threads) setting."""

    workers: int
    threads: int
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
    loader_time: Estimate | None = None
    """D: mean seconds per steady batch (the batches workers buffered at start-up left out),
    with its interval: the loader time the verdict uses. None in files written before it
    was stored (compare then computes it from ``batch_time``)."""


@register_kind
@dataclasses.dataclass(frozen=True)
class DataloaderResult(Record):
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
    format_version: int = FORMAT_VERSION
    kind: str = KIND
