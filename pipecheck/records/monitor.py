"""The ``pipecheck.Monitor`` record: a user's own training loop, timed."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Mapping

from pipecheck.errors import ResultFormatError
from pipecheck.records.base import Record, TopRecord, register_kind
from pipecheck.records.common import (
    Anomaly,
    Breakdown,
    CompileInfo,
    Distribution,
    Estimate,
    Finding,
    LoaderStart,
    StartUp,
    StepRecord,
    SyncSite,
)
from pipecheck.records.gains import Gain, StepInterval
from pipecheck.records.hosts import HostSummary, Straggler
from pipecheck.records.kinds import INCONCLUSIVE, VerdictKind
from pipecheck.records.steps import StepTable, as_step_table


@dataclasses.dataclass(frozen=True)
class SyncSiteRecord(SyncSite):
    """A line that waited for the device, as found by the sync locator, with its share."""

    share: float = 0.0
    """``seconds`` as a fraction of the run's wall time."""

    @classmethod
    def of(cls, site: SyncSite, wall_s: float) -> SyncSiteRecord:
        return cls(site.location, site.function, site.code, site.seconds, site.samples,
                   site.internal, site.seconds / wall_s if wall_s > 0 else 0.0)


@dataclasses.dataclass(frozen=True)
class RunEnd(Record):
    """Why a Monitor record holds less than a finished run: the run ended early, or the
    file was written while it was still going (``Monitor(save_to=...)``)."""

    reason: str
    """One of ``RUN_END_REASONS``."""
    message: str
    """One line: the exception (``ValueError: loss is nan``), the signal (``SIGTERM``), or
    what the writer knew."""
    step: int
    """The step the loop was at (the last one it started): the record holds the steps
    before it whose loss was observed."""

    def __post_init__(self) -> None:
        if self.reason not in RUN_END_REASONS:
            raise ResultFormatError(f"incomplete.reason is {self.reason!r}; expected one of "
                                    f"{', '.join(RUN_END_REASONS)}")


RUN_END_REASONS = ("exception", "signal", "exit", "running")
"""How a run ends early: an exception left the loop, a signal ended the process, the process
exited without ``finish()``, or (a periodic write) the run was still going when written."""


@register_kind
@dataclasses.dataclass(frozen=True)
class MonitorResult(TopRecord):
    """A Monitor run of the user's own training loop."""

    KIND: ClassVar[str] = "monitor"
    env: Mapping[str, object]
    config: Mapping[str, object]
    step_time: Distribution
    """Steady state: steps after the first, none tagged compile/checkpoint/eval/gc."""
    first_step_s: float
    steps: StepTable[StepRecord]
    """The first step and the most recent ``step_window`` steps (all of them unless the
    run was longer than the window): a ``StepTable`` (by column; its rows are
    StepRecords)."""
    sync_sites: tuple[SyncSiteRecord, ...]
    breakdown: Breakdown
    """Over every step of the run, dropped ones included."""
    wall_s: float
    total_steps: int
    dropped_steps: int = 0
    compile: CompileInfo | None = None
    anomalies: tuple[Anomaly, ...] = ()
    """Steps far from the steady state (kept out of it), each with its likely cause."""
    findings: tuple[Finding, ...] = ()
    warnings: tuple[str, ...] = ()
    hosts: tuple[HostSummary, ...] = ()
    """Multi-process runs: every host's summary, on process 0's record (empty otherwise)."""
    straggler: Straggler | None = None
    """The host every other host waits for, or None (see docs/multihost.md)."""
    host_findings: tuple[Finding, ...] = ()
    """What the hosts' comparison found: a straggler, a synchronized stall, or none."""
    incomplete: RunEnd | None = None
    """Set when the run did not finish: how it ended and at which step (None: it finished)."""
    startup: StartUp | None = None
    """The first batch beside the start-up work it could overlap (None: step 0 is not in the
    record, or its batch was not fetched through ``Monitor.batches``)."""
    verdict: VerdictKind = INCONCLUSIVE
    """What holds the loop back, from what it shows (``analysis.loop_verdict``): the same
    vocabulary as compare's (a record written before verdicts were: inconclusive, no reason)."""
    reason: str = ""
    headspace_s: StepInterval | None = None
    """R less T per step: what any input, sync or host-work fix can buy at most, as a range
    (``analysis.loop_verdict.loop_headspace``; None: a record written before it was)."""
    gains: tuple[Gain, ...] = ()
    """The changes the loop's record supports, each with its gain per step as a range,
    ranked by gain (``analysis.loop_verdict.loop_gains``)."""
    loader_starts: tuple[LoaderStart, ...] = ()
    """Every pass over a loader begun by ``Monitor.batches`` (an epoch each, the first
    included): the wait for its first batch, apart from the eval and checkpoint spans of the
    same step."""
    wall_per_step_s: Estimate | None = None
    """The throughput as time: wall time per step over the steady window (the kept steps
    after the first, none tagged apart; input waits and anomalies included), the mean with
    its interval (``steady_state.wall_per_step``; None: fewer than 3 such steps, or a record
    written before it was)."""

    @property
    def user_sync_sites(self) -> tuple[SyncSiteRecord, ...]:
        """Sync sites in the user's code (not pipecheck's lagged sync), costliest first."""
        return tuple(s for s in self.sync_sites if not s.internal)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", as_step_table(self.steps, StepRecord))
