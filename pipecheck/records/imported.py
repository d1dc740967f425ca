"""The ``pipecheck import`` record: a MaxText training log's steps, events and anomalies."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar, Mapping

import numpy as np

from pipecheck.records.base import Record, TopRecord, register_kind
from pipecheck.records.common import Anomaly, Distribution, Finding
from pipecheck.records.steps import StepTable, as_step_table

__all__ = ["Anomaly", "ImportedRun", "LevelShift", "LogEvent", "LogMemory", "LogStep",
           "OutsideSteps", "TimeShare", "WallTime", "mean_inflation"]


@dataclasses.dataclass(frozen=True)
class LogStep(Record):
    """One ``completed step:`` line. ``tags`` name the cause when the step is an anomaly."""

    COLUMNAR: ClassVar[bool] = True
    """Stored by column, in memory and in files (``records.steps``)."""
    step: int
    time_s: float
    tags: tuple[str, ...] = ()
    loss: float | None = None
    tflops_per_s_per_device: float | None = None
    tokens_per_s_per_device: float | None = None
    metrics: Mapping[str, float] = dataclasses.field(default_factory=dict)
    line: int = 0


@dataclasses.dataclass(frozen=True)
class LogEvent(Record):
    """A checkpoint, eval, profiler, restore or restart line. ``anchor_step`` is its own
    step, or for a line that names none, the last step line before it."""

    kind: str
    line: int
    text: str
    step: int | None = None
    seconds: float | None = None
    anchor_step: int | None = None
    at_s: float | None = None
    """When the line was written: seconds since the log's first timestamp (a line without
    a header has the time of the last header before it; None before any header)."""
    clock: str | None = None
    """The time of day of ``at_s`` as the log printed it (``10:23:54.123456``)."""


@dataclasses.dataclass(frozen=True)
class LevelShift(Record):
    """The steady state changed level: ``step`` is the first step of the new level; the
    medians are of the steady steps on either side (``analysis.level_shift``)."""

    step: int
    before_median_s: float
    after_median_s: float
    p_value: float


@dataclasses.dataclass(frozen=True)
class LogMemory(Record):
    """Memory as MaxText prints it, in its GB: compiled sizes are bytes/1e9, the device
    ``Using (GB)`` figures bytes/2**30 (largest use over all devices and lines)."""

    compiled_total_gb: float | None = None
    compiled_output_gb: float | None = None
    compiled_temp_gb: float | None = None
    device_in_use_gb: float | None = None
    device_limit_gb: float | None = None


@dataclasses.dataclass(frozen=True)
class TimeShare(Record):
    """Part of a stretch outside the steps, named by what the log says ran then."""

    cause: str
    seconds: float
    evidence: str = ""
    """The line(s) that name it (the first of its kind in the stretch)."""


@dataclasses.dataclass(frozen=True)
class OutsideSteps(Record):
    """A stretch of the run's wall time no step's ``seconds`` covers
    (``analysis.logs.wall_time``), in seconds since the log's first timestamp."""

    where: str
    """``before`` the first step, ``between`` two, or ``after`` the last."""
    start_s: float
    end_s: float
    after_step: int | None = None
    """The step before the stretch (None: before the first)."""
    shares: tuple[TimeShare, ...] = ()
    """The stretch split by cause, largest first; they add up to its length."""

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclasses.dataclass(frozen=True)
class WallTime(Record):
    """Where the run's wall time went, by the log's timestamps: from its first timestamp to
    its last, the time the steps cover and the stretches outside them."""

    wall_s: float
    in_steps_s: float
    outside: tuple[OutsideSteps, ...] = ()
    """The stretches outside the steps of ``analysis.logs.wall_time.OUTSIDE_MIN_S`` or more."""
    start_s: float = 0.0
    """Where the wall time starts, in seconds since the log's first timestamp (a step that
    began before it moves it earlier)."""

    @property
    def outside_s(self) -> float:
        """All the time outside the steps, the stretches too short to list included."""
        return max(0.0, self.wall_s - self.in_steps_s)


@register_kind
@dataclasses.dataclass(frozen=True)
class ImportedRun(TopRecord):
    """``pipecheck import``: a MaxText training log, parsed and summarized."""

    KIND: ClassVar[str] = "imported"
    source: str
    env: Mapping[str, Any]
    config: Mapping[str, Any]
    steps: StepTable[LogStep]
    """Every step read, by column (iterates as ``LogStep`` rows)."""
    step_time: Distribution
    """Steady-state step times (no first step, no anomalies)."""
    mean_all_s: float
    """Mean over every logged step, anomalies included (what dashboards show)."""
    anomalies: tuple[Anomaly, ...] = ()
    events: tuple[LogEvent, ...] = ()
    params: float | None = None
    total_tflops_per_step: float | None = None
    """``Per train step: Total TFLOPs`` as logged (MaxText's estimate of the training
    TFLOPs of one step on one device)."""
    memory: LogMemory = LogMemory()
    level_shifts: tuple[LevelShift, ...] = ()
    """Where the steady state changed level (none: one level throughout)."""
    nonfinite_loss_from: int | None = None
    """The first step whose loss was NaN or infinite (None: every loss logged was finite)."""
    unreadable_lines: int = 0
    """Step lines skipped: no readable time (``completed step: 9, ...``), or a profiler
    boundary step whose time MaxText hides."""
    warnings: tuple[str, ...] = ()
    wall_time: WallTime | None = None
    """Where the wall time went by the log's timestamps (None: the log has none to tell);
    absent from records written before it was added, which then read as None."""
    log_format: str = "maxtext"
    findings: tuple[Finding, ...] = ()
    """What the steps show beyond their anomalies: slow steps recurring with a period
    (``analysis.periodic_stall``); absent from records written before, which read as none."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", as_step_table(self.steps, LogStep))

    @property
    def steady_mask(self) -> np.ndarray:
        """Which of ``steps`` are in the steady state (not an anomaly)."""
        excluded = np.fromiter((a.step for a in self.anomalies), np.int64, len(self.anomalies))
        return ~np.isin(self.steps.column("step"), excluded)

    @property
    def steady_steps(self) -> StepTable[LogStep]:
        return self.steps.take(np.flatnonzero(self.steady_mask))

    @property
    def mean_inflation(self) -> float:
        """How much the anomalies inflate the mean: mean(all) / mean(steady) - 1."""
        return mean_inflation(self.mean_all_s, self.step_time.summary.mean)


def mean_inflation(mean_all: float, mean_steady: float) -> float:
    if not (mean_steady > 0) or not math.isfinite(mean_all):
        return math.nan
    return mean_all / mean_steady - 1.0
