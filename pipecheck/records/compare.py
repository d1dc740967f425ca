"""The ``pipecheck compare`` record: the verdict with the evidence behind it."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from pipecheck.records.base import Record, TopRecord, register_kind
from pipecheck.records.common import (
    Anomaly,
    CompileInfo,
    Distribution,
    Estimate,
    Finding,
    StartUp,
    StepRecord,
)
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.gains import Gain, StepInterval
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.hosts import HostSummary, Straggler
from pipecheck.records.kinds import Scaling, StopKind, VerdictKind
from pipecheck.records.machine_load import MachineLoad
from pipecheck.records.steps import StepTable, as_step_table, no_steps
from pipecheck.records.whatif import WhatIfCheck


@dataclasses.dataclass(frozen=True)
class Tuning(Record):
    """The worker search's outcome, as the verdict and the findings used it."""

    meets_target: bool
    scaling: Scaling
    target_s: float
    """T the search aimed below (measured before the search)."""
    stop_reason: str
    headroom: float
    """The goal was D <= headroom x target_s."""
    settings_tried: int
    stop: StopKind
    """Why the search ended."""
    chosen: GrainSettings
    """The chosen setting of all four knobs."""
    run_steps: int = 0
    """The run length start-up was weighed against (0: not weighed)."""
    ram_budget_mb: float | None = None
    """The RAM budget the search stopped before."""
    order: str = ""
    """Why the search tried read threads before worker processes (the first setting's reads
    waited on storage: latency per read, reads per batch, the CPU share), "" when it searched
    the workers first."""


@dataclasses.dataclass(frozen=True)
class Estimates(Record):
    """T, D and R with their intervals, exactly as the verdict was decided on them."""

    target: Estimate
    loader: Estimate
    real: Estimate
    baseline: Estimate | None = None
    """D at the first setting tried, when another one was chosen."""
    real_baseline: Estimate | None = None
    """R at the first setting tried, when another one was chosen and compare trained at
    both (``--measure-gain``): the chosen setting's gain, measured."""


@register_kind
@dataclasses.dataclass(frozen=True)
class CompareResult(TopRecord):
    """``pipecheck compare``: the verdict with the evidence behind it."""

    KIND: ClassVar[str] = "compare"
    env: Mapping[str, Any]
    config: Mapping[str, object]
    target: Distribution
    """Target step times T (before and after the real run, pooled)."""
    loader: tuple[LoaderSetting, ...]
    """Every loader setting tried, in the order tried."""
    real: Distribution
    verdict: VerdictKind
    verdict_reason: str
    findings: tuple[Finding, ...]
    recommendation: str
    tuning: Tuning
    host_spans: Mapping[str, float]
    """Real-data steady state: seconds per step in each host span (data_wait, dispatch, ...)."""
    compile: CompileInfo
    sources: Mapping[str, str]
    """Where T, D and R came from: "measured" or the file they were read from."""
    steps: StepTable[StepRecord] = dataclasses.field(default_factory=no_steps(StepRecord))
    """The real-data run's steps."""
    anomalies: tuple[Anomaly, ...] = ()
    """Real-data steps far from the steady state (kept out of it), with their likely cause."""
    warnings: tuple[str, ...] = ()
    hosts: tuple[HostSummary, ...] = ()
    """Multi-process runs: every host's summary, on process 0's record (empty otherwise)."""
    straggler: Straggler | None = None
    """The host every other host waits for, or None (see docs/multihost.md)."""
    host_findings: tuple[Finding, ...] = ()
    """What the hosts' comparison found: a straggler, a synchronized stall, or none."""
    startup: StartUp | None = None
    """The first batch beside the start-up work it could overlap: at the chosen setting and
    the train step's compile, or the Monitor run's (``--real``)."""
    estimates: Estimates = dataclasses.field(kw_only=True)
    """T, D and R with their intervals, as the verdict was decided on them."""
    whatif_check: WhatIfCheck | None = None
    """compare's self-check: a loader setting the model (``analysis.loader.loader_model``) did not
    see, predicted from the settings tried, then measured (None: not made)."""
    machine_load: MachineLoad | None = None
    """The CPU other processes used during each phase compare measured, and the host's
    cores (None: nothing measured here, or a file written before it was recorded)."""
    wall_per_step_s: Estimate | None = None
    """The real-data run's throughput as time: wall time per step over its steady window
    (steps after the first, none tagged apart; anomalies and input waits included), the
    mean with its interval (``steady_state.wall_per_step``; None: fewer than 3 such steps,
    or a record written before it was)."""
    headspace_s: StepInterval | None = None
    """R less T per step, its ends from their intervals: what any input, sync or host-work
    fix can buy at most (``analysis.loader.compare_gains``; None: T or R unusable, or a file
    written before it was recorded)."""
    gains: tuple[Gain, ...] = ()
    """The changes the record supports, each with its gain per step as a range, ranked by
    gain (``analysis.loader.compare_gains``)."""
    gains_notes: tuple[str, ...] = ()
    """What bounds every gain (R within the verdict's margin of T), and why a kind of gain
    is missing (the numbers it needs are not in the record)."""

    # Each of these is stored once, where the verdict took it from (format version 4
    # wrote them again, as fields of their own).

    @property
    def target_step_s(self) -> float:
        """T: the median target step time (before and after the real run, pooled)."""
        return self.estimates.target.value

    @property
    def loader_step_s(self) -> float:
        """D at the chosen setting: mean seconds per batch (1 / throughput; batches come in
        bursts)."""
        return self.estimates.loader.value

    @property
    def real_step_s(self) -> float:
        """R: the real-data step time the verdict used."""
        return self.estimates.real.value

    @property
    def chosen_workers(self) -> int:
        return self.tuning.chosen.workers

    @property
    def chosen_threads(self) -> int:
        return self.tuning.chosen.threads

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", as_step_table(self.steps, StepRecord))
