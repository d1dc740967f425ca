"""Record types shared by every result: sample distributions, findings, steps, compile
info, throughput, sync sites, wall-time breakdowns."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import ClassVar, Literal, Mapping, Sequence

from pipecheck import stats
from pipecheck.records.base import Record
from pipecheck.records.codec import FloatColumn, float_column
from pipecheck.records.kinds import FindingKind


@dataclasses.dataclass(frozen=True)
class Distribution(Record):
    """Raw samples (seconds) and their order statistics: ``summary``, the one
    ``stats.Summary`` of them, derived from the samples (so never out of step with them).
    Files hold the summary's numbers under their record names (``median_s``, ``mean_s``,
    ``p10_s``, ``p90_s``, ``p99_s``, ``iqr_s``, ``n``) for readers; on reading they are
    computed again from ``samples_s``."""

    DERIVED_KEYS: ClassVar[frozenset[str]] = frozenset(stats.Summary.names("_s"))
    samples_s: FloatColumn

    @classmethod
    def of(cls, samples: stats.Samples) -> Distribution:
        return cls(float_column(samples))

    @functools.cached_property
    def summary(self) -> stats.Summary:
        """Median, mean, percentiles, IQR and n of ``samples_s`` (seconds)."""
        return stats.summarize(self.samples_s)

    def derived(self) -> dict[str, float]:
        return self.summary.named("_s")

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        return stats.median_ci(self.samples_s, confidence)


@dataclasses.dataclass(frozen=True)
class Estimate(Record):
    """A statistic of raw samples (seconds) with its 95% bootstrap interval: what a decision
    is made on. Step times use the median (one stall must not count); loader batch times
    the mean (workers deliver in bursts; the mean is 1 / throughput). The statistic and n
    are the samples' ``Distribution.summary``'s; the interval is this type's own."""

    value: float
    low: float
    high: float
    n: int
    statistic: Literal["median", "mean"] = "median"

    @classmethod
    def median_of(cls, d: Distribution) -> Estimate:
        """The median and its interval: for step times, where one stall must not count."""
        return cls(d.summary.median, *d.median_ci(), d.summary.n)

    @classmethod
    def mean_of(cls, d: Distribution, block: int | None = None) -> Estimate:
        """The mean and its interval: for batch arrival times. Workers deliver batches in
        bursts (several at once, then a wait), so the median understates the time per
        batch; the mean is the inverse of the loader's throughput. ``block`` should span
        whole bursts (see ``steady_state.burst_block``), or the interval comes out too wide."""
        lo, hi = stats.bootstrap_ci(d.samples_s, "mean", block=block)
        return cls(d.summary.mean, lo, hi, d.summary.n, "mean")

    @classmethod
    def of(cls, samples: Sequence[float]) -> Estimate:
        """``median_of`` the distribution of ``samples``."""
        return cls.median_of(Distribution.of(samples))

    @classmethod
    def of_mean(cls, samples: Sequence[float], block: int | None = None) -> Estimate:
        """``mean_of`` the distribution of ``samples``."""
        return cls.mean_of(Distribution.of(samples), block)

    @property
    def relative_half_width(self) -> float:
        if not self.value or not math.isfinite(self.value):
            return math.inf
        return (self.high - self.low) / 2.0 / self.value

    @property
    def usable(self) -> bool:
        return self.n >= 3 and math.isfinite(self.value) and self.value > 0


@dataclasses.dataclass(frozen=True)
class Finding(Record):
    """Something the user should know, in plain words, with the numbers behind it."""

    kind: FindingKind
    message: str
    numbers: Mapping[str, float] = dataclasses.field(default_factory=dict)
    location: str | None = None
    fix: str | None = None


@dataclasses.dataclass(frozen=True)
class StepRecord(Record):
    """One step: its interval between consecutive loss syncs, tags, and host spans in it."""

    COLUMNAR: ClassVar[bool] = True
    """Stored by column in files (``records.steps``)."""
    step: int
    time_s: float
    tags: tuple[str, ...] = ()
    spans: Mapping[str, float] = dataclasses.field(default_factory=dict)
    loss: float | None = None


@dataclasses.dataclass(frozen=True)
class Anomaly(Record):
    """A step far from the steady state (kept out of it), with its likely cause and the
    evidence (see ``analysis.anomalies``)."""

    step: int
    time_s: float
    ratio: float
    """time_s over the steady-state median."""
    cause: str
    evidence: str


@dataclasses.dataclass(frozen=True)
class StartUp(Record):
    """The time to the first batch beside the start-up work it could have overlapped."""

    first_batch_s: float
    """Waiting for the first batch: the iterator's creation, the workers' start, the first
    read."""
    work: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Start-up work done before or after it, in seconds by name: ``compile`` (the train
    step), and the user's own spans before the first batch (``restore``, ``init``, ...)."""
    typical_wait_s: float = 0.0
    """A steady step's wait for its batch: the part of the first wait that is not start-up."""

    @property
    def work_s(self) -> float:
        return float(sum(self.work.values()))

    @property
    def hideable_s(self) -> float:
        """Seconds a loader started before that work would hide: its start-up, up to the
        work's length."""
        return max(0.0, min(self.first_batch_s - self.typical_wait_s, self.work_s))


@dataclasses.dataclass(frozen=True)
class LoaderStart(Record):
    """A pass over a loader begun: a Monitor's ``batches`` called (again), its iterator made
    and its first batch waited for (a ``grain.DataLoader``'s workers start again)."""

    index: int
    """Which pass: 0 for the first ``batches`` call, 1 for the next (an epoch each)."""
    step: int
    """The step whose interval holds the wait (the step dispatched before it, as for every
    batch; 0 for the first)."""
    wait_s: float
    """Seconds from the iterator's creation to its first batch."""


@dataclasses.dataclass(frozen=True)
class CompileInfo(Record):
    first_step_s: float
    compile_s: float
    train_step_compiles: int
    findings: tuple[Finding, ...] = ()


@dataclasses.dataclass(frozen=True)
class Throughput(Record):
    examples_per_s: float
    tokens_per_s: float | None = None
    tflops_per_s: float | None = None
    flops_per_step: float | None = None
    flops_source: str | None = None
    peak_memory_bytes: int | None = None


@dataclasses.dataclass(frozen=True)
class SyncSite(Record):
    """A place that waited for the device, with the time found waiting there."""

    location: str
    function: str
    code: str
    seconds: float
    samples: int
    internal: bool
    """True for pipecheck's own lagged sync (expected, not a problem)."""


@dataclasses.dataclass(frozen=True)
class BreakdownRow(Record):
    category: str
    seconds: float
    share: float
    """Fraction of the wall time (0..1)."""


@dataclasses.dataclass(frozen=True)
class Breakdown(Record):
    wall_s: float
    steps: int
    rows: tuple[BreakdownRow, ...]

    def seconds(self, category: str) -> float:
        for r in self.rows:
            if r.category == category:
                return r.seconds
        return 0.0

    def share(self, category: str) -> float:
        for r in self.rows:
            if r.category == category:
                return r.share
        return 0.0
