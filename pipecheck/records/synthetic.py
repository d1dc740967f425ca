"""The ``pipecheck synthetic`` record: the target step time (compute alone)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Mapping

from pipecheck.records.base import TopRecord, register_kind
from pipecheck.records.common import (
    Anomaly,
    CompileInfo,
    Distribution,
    Estimate,
    Finding,
    StepRecord,
    Throughput,
)
from pipecheck.records.hosts import HostSummary, Straggler
from pipecheck.records.machine_load import MachineLoad
from pipecheck.records.steps import StepTable, as_step_table, no_steps


@register_kind
@dataclasses.dataclass(frozen=True)
class SyntheticResult(TopRecord):
    """``pipecheck synthetic``: the target step time (compute alone)."""

    KIND: ClassVar[str] = "synthetic"
    env: Mapping[str, object]
    config: Mapping[str, object]
    step_time: Distribution
    compile: CompileInfo
    throughput: Throughput
    warnings: tuple[str, ...] = ()
    steps: StepTable[StepRecord] = dataclasses.field(default_factory=no_steps(StepRecord))
    hosts: tuple[HostSummary, ...] = ()
    """Multi-process runs: every host's summary, on process 0's record (empty otherwise)."""
    straggler: Straggler | None = None
    """The host every other host waits for, or None (see docs/multihost.md)."""
    host_findings: tuple[Finding, ...] = ()
    """What the hosts' comparison found: a straggler, a synchronized stall, or none."""
    anomalies: tuple[Anomaly, ...] = ()
    """Steps far from the steady state (kept out of it), each with its likely cause."""
    machine_load: MachineLoad | None = None
    """The CPU other processes used while the steps ran (its ``target`` phase) and the
    host's cores: compare weighs a real-data run against it when given this file."""
    wall_per_step_s: Estimate | None = None
    """The throughput as time: wall time per step over the steady window (steps after the
    first, none tagged apart; anomalies included), the mean with its interval
    (``steady_state.wall_per_step``; None: fewer than 3 such steps, or a record written
    before it was)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", as_step_table(self.steps, StepRecord))
