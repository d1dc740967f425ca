"""Record types shared by every result: sample distributions, findings, steps, compile
info, throughput, sync sites, wall-time breakdowns."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Mapping

from pipecheck.analysis import stats
from pipecheck.records.base import Record


@dataclasses.dataclass(frozen=True)
class Distribution(Record):
    """Raw samples (seconds) and the order statistics derived from them."""

    median_s: float
    mean_s: float
    p10_s: float
    p90_s: float
    p99_s: float
    iqr_s: float
    n: int
    samples_s: tuple[float, ...]

    @classmethod
    def of(cls, samples: stats.Samples) -> Distribution:
        s = stats.summarize(samples)
        raw = tuple(float(x) for x in samples)
        return cls(s.median, s.mean, s.p10, s.p90, s.p99, s.iqr, s.n, raw)

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float]:
        return stats.median_ci(self.samples_s, confidence)


@dataclasses.dataclass(frozen=True)
class Finding(Record):
    """Something the user should know, in plain words, with the numbers behind it."""

    kind: str
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
