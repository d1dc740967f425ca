"""The ``pipecheck diff`` record: two runs' summaries and the rows comparing them."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Mapping

import numpy as np

from pipecheck.records.base import Record, TopRecord, register_kind
from pipecheck.records.codec import FloatColumn, Floats
from pipecheck.records.common import Distribution, StepRecord
from pipecheck.records.imported import (
    Anomaly,
    ImportedRun,
    LevelShift,
    LogEvent,
    WallTime,
    mean_inflation,
)
from pipecheck.records.monitor import RunEnd
from pipecheck.records.steps import StepTable, as_step_table

DEFAULT_CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class RunSummary(Record):
    """One run, normalized: whatever it came from, the numbers ``diff`` compares."""

    source: str
    kind: str
    env: Mapping[str, object]
    config: Mapping[str, object]
    steps: StepTable[StepRecord]
    """Every step, by column (iterates as ``StepRecord`` rows)."""
    step_time: Distribution
    """Steady-state step times."""
    mean_all_s: float
    """Mean over every step, anomalies included."""
    first_step_s: float | None = None
    params: float | None = None
    final_loss: float | None = None
    tflops_per_s_per_device: FloatColumn = ()
    """Per steady-state step."""
    tokens_per_s_per_device: FloatColumn = ()
    """Per steady-state step."""
    memory_compiled_bytes: float | None = None
    memory_in_use_bytes: float | None = None
    anomalies: tuple[Anomaly, ...] = ()
    events: tuple[LogEvent, ...] = ()
    level_shifts: tuple[LevelShift, ...] = ()
    """Where the steady state changed level (``diff`` compares the last levels)."""
    warnings: tuple[str, ...] = ()
    incomplete: RunEnd | None = None
    """A Monitor run that did not finish: how it ended (see ``MonitorResult.incomplete``)."""
    total_steps: int | None = None
    """Steps the run completed (a Monitor record's ``total_steps``), when known."""
    other_cores: float | None = None
    """Cores other programs kept busy while the steps ran (a synthetic record's
    ``machine_load.target``, a compare record's ``machine_load.real``); None when unknown."""
    host_cores: int | None = None
    """The host's cores the load is counted on (``machine_load.cores``)."""
    wall_time: WallTime | None = None
    """A MaxText log's wall time by its timestamps (``ImportedRun.wall_time``); None for
    other runs and in records written before it was added."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", as_step_table(self.steps, StepRecord))

    @property
    def mean_inflation(self) -> float:
        return mean_inflation(self.mean_all_s, self.step_time.summary.mean)

    def per_step_arrays(self) -> list[np.ndarray]:
        """The arrays its record encodes as they are: the steps' columns, and the step
        times and rates kept as arrays (``Floats``)."""
        columns = (self.step_time.samples_s, self.tflops_per_s_per_device,
                   self.tokens_per_s_per_device)
        return [*self.steps.per_step_arrays(),
                *(np.asarray(c) for c in columns if isinstance(c, Floats))]

    @property
    def description(self) -> str:
        if self.kind == ImportedRun.KIND:
            return "MaxText log"
        return f"pipecheck {self.kind} run"


@dataclasses.dataclass(frozen=True)
class DiffRow(Record):
    """One compared quantity. ``diff`` is B - A, ``relative`` is (B - A) / A.

    ``significance`` is "significant", "not significant", or "" where no test applies
    (a single number per run); ``ci_low``/``ci_high`` bound ``diff``."""

    name: str
    unit: str
    a: float | None
    b: float | None
    diff: float | None = None
    relative: float | None = None
    significance: str = ""
    p_value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclasses.dataclass(frozen=True)
class NotComparable(Record):
    """One reason ``diff`` cannot judge B against A (``analysis.comparable``): the rule,
    what differs, both values, and what to do."""

    rule: str
    """One of ``analysis.comparable.RULES`` (what ``--allow`` takes)."""
    what: str
    a: str
    b: str
    fix: str

    def describe(self) -> str:
        return f"{self.what} {self.a} vs {self.b}: {self.fix}"


OUTCOMES = ("significant", "not significant", "inconclusive")
"""The diff's verdict words: B's step time differs, does not, or cannot be judged."""


@dataclasses.dataclass(frozen=True)
class VersionRow(Record):
    name: str
    a: str | None
    b: str | None


@dataclasses.dataclass(frozen=True)
class BetweenRuns(Record):
    """Several runs a side (``pipecheck diff`` of folders): each run's steady-state median
    and the test of B's against A's that the step-time verdict rests on
    (``analysis.between_runs``). ``relative``, ``ci_low`` and ``ci_high`` are changes of
    B's geometric mean of run medians relative to A's (0.05 = 5% longer)."""

    sources_a: tuple[str, ...]
    sources_b: tuple[str, ...]
    runs_a: tuple[float, ...]
    """Each of A's runs' steady-state median step time (s), in ``sources_a``'s order (the
    median over the level a run ended at, as ``analysis.diff.last_level`` keeps)."""
    runs_b: tuple[float, ...]
    spread_from: str = ""
    """Whose runs measured the between-run spread: ``A and B`` (Welch's t), ``A`` or ``B``
    (the other side has one run; that spread is taken for both); "" when untested."""
    relative: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    df: float | None = None
    """The t-test's degrees of freedom (Welch-Satterthwaite with runs on both sides)."""
    significance: str = ""
    """As the test finds it, before ``DiffResult.min_change``: "significant" (the interval
    excludes 0 and p < 1 - confidence), "not significant", or "" (a run without a median)."""


@register_kind
@dataclasses.dataclass(frozen=True)
class DiffResult(TopRecord):
    """``pipecheck diff``: two runs, the compared rows, the step-time verdict, warnings."""

    KIND: ClassVar[str] = "diff"
    a: RunSummary
    b: RunSummary
    rows: tuple[DiffRow, ...]
    versions: tuple[VersionRow, ...]
    verdict: str
    warnings: tuple[str, ...] = ()
    confidence: float = DEFAULT_CONFIDENCE
    outcome: str = ""
    """One of ``OUTCOMES``; "" in records written before it was added."""
    not_comparable: tuple[NotComparable, ...] = ()
    """Why the outcome is ``inconclusive`` (empty otherwise)."""
    min_change: float = 0.0
    """The smallest relative change of the median step time the verdict calls significant
    (``--min-change``; by default ``analysis.diff.MIN_CHANGE`` for one run a side, 0 with
    several runs on a side); 0 in records written before it."""
    unchecked: tuple[str, ...] = ()
    """The comparability rules that could not be checked, each with the run lacking what it
    compares (``analysis.comparable.unchecked``; with several runs a side, also within each
    side: ``side_unchecked``): the verdict stands, but whether the runs differ there is
    unknown."""
    between_runs: BetweenRuns | None = None
    """With several runs on a side (folders): every run's median and the test the
    step-time verdict rests on; ``a`` and ``b`` are then each side's first run, which the
    other rows come from. None for one run a side, and in records written before it."""

    def row(self, name: str) -> DiffRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(name)
