"""The ``pipecheck profile`` record: the verdict read off a jax.profiler capture."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Mapping

from pipecheck.records.base import Record, TopRecord, register_kind
from pipecheck.records.codec import FloatColumn
from pipecheck.records.common import (
    Anomaly,
    Breakdown,
    Distribution,
    Estimate,
    Finding,
    StepRecord,
)
from pipecheck.records.gains import Gain, StepInterval
from pipecheck.records.hosts import Straggler
from pipecheck.records.kinds import HOST_BOUND, VerdictKind
from pipecheck.records.steps import StepTable, as_step_table


@dataclasses.dataclass(frozen=True)
class CaptureEstimates(Record):
    """compare's three estimates, read off the capture (medians over the steady steps, with
    their bootstrap intervals)."""

    compute: Estimate
    """T: the device's busy time per step."""
    loader: Estimate
    """D: the loader's time per batch (the thread's input time when it loads itself; the
    step time in steps where it waited for a background loader)."""
    step: Estimate
    """R: the step time (marker to marker, or train-step call to call)."""
    sync_share: float
    """Median share of a step the training thread sat blocked in syncs."""
    idle_share: float
    """Median share of a step the device sat idle."""
    background_loader: bool
    """The thread waited on other threads or processes for input (Grain workers, threads)."""
    data_wait: Estimate | None = None
    """The training thread's time in input per step (``pipecheck.Monitor``'s data wait)."""


@dataclasses.dataclass(frozen=True)
class DeviceIdle(Record):
    """The device's idle seconds in each step (same order as ``steps``), charged to what the
    training thread was doing meanwhile: the per-step rows of ``device_time``'s idle."""

    input: FloatColumn
    """Waiting for input (``idle: input wait``)."""
    sync: FloatColumn
    """Blocked in a sync (``idle: sync``)."""
    compile: FloatColumn
    """Compiling (``idle: compile``)."""
    checkpoint: FloatColumn
    """Checkpointing (``idle: checkpoint``)."""
    dispatch: FloatColumn
    """Dispatching jitted calls (``idle: dispatch``)."""
    host: FloatColumn
    """Any other host work (``idle: host work``)."""


@dataclasses.dataclass(frozen=True)
class HostProfile(Record):
    """One host's capture file, summarized (multi-host captures have one per host)."""

    host: str
    steps: int
    step_s: float
    """Median steady step time."""
    device_busy_s: float
    """Median device busy time per steady step."""
    input_idle_s: float
    """Median device idle time per steady step charged to waiting for input."""
    verdict: VerdictKind
    """The host's own verdict (``host-bound`` included)."""


@dataclasses.dataclass(frozen=True)
class XprofSummary(Record):
    """XProf's input-pipeline analyzer on the same capture (``--xprof``)."""

    conclusion: str
    """XProf's ``input_conclusion`` sentence."""
    step_s: float
    """XProf's average step time."""
    breakdown_s: Mapping[str, float]
    """XProf's average step-time breakdown (seconds per step), by its labels (``device
    compute``, ``host compute``, ``kernel launch``, ``input``, ``compilation``, ``all
    others``, ...); categories at zero left out."""


@dataclasses.dataclass(frozen=True)
class PickedStep(Record):
    """The jitted function read as the train step in a capture without step markers, picked
    without ``--step-fn`` because it clearly repeats (``analysis/unmarked.py``)."""

    function: str
    executions: int
    """Its executions in the capture (on the device where the capture tells them apart,
    else its calls on the training thread)."""
    device_share: float
    """Its share of the device time of the capture's jitted functions (of the thread's jitted
    calls where the capture has no per-module device time)."""


@register_kind
@dataclasses.dataclass(frozen=True)
class ProfileResult(TopRecord):
    """A capture's steps, where their time went on the device and the training thread, and
    the verdict (see docs/profile.md)."""

    KIND: ClassVar[str] = "profile"
    DERIVED_KEYS: ClassVar[frozenset[str]] = TopRecord.DERIVED_KEYS | {"host_bound"}
    env: Mapping[str, object]
    """From the capture: host, jax/jaxlib versions, device kind."""
    config: Mapping[str, object]
    """How it was read: capture file, run, step source (``markers`` or ``PjitFunction(NAME)``),
    device (cpu/gpu/tpu), training thread's line."""
    verdict: VerdictKind
    """What bounds the steps, the one answer: the report's headline shows it (with
    ``kinds.verdict_text``: ``host-bound`` reads ``host-bound (dispatch)``)."""
    reason: str
    estimates: CaptureEstimates
    step_time: Distribution
    """Steady-state step times."""
    steps: StepTable[StepRecord]
    """Every step: its time and, in ``spans``, the training thread's seconds per category
    (``data_wait``, ``sync``, ``compile``, ``checkpoint``, ``dispatch``); tags ``compile``
    and ``anomaly``."""
    device_busy_s: FloatColumn
    """The device's busy seconds in each step (same order as ``steps``)."""
    device_time: Breakdown
    """Over the steady steps: device busy, and device idle per cause (``idle: input wait``,
    ``idle: sync``, ``idle: compile``, ``idle: checkpoint``, ``idle: dispatch``, ``idle:
    host work``), seconds and share of the steady steps' time."""
    findings: tuple[Finding, ...] = ()
    recommendation: str = ""
    anomalies: tuple[Anomaly, ...] = ()
    warnings: tuple[str, ...] = ()
    hosts: tuple[HostProfile, ...] = ()
    """Multi-host captures: every host's summary (empty for one host)."""
    straggler: Straggler | None = None
    """Multi-host captures: the host the others wait for, from each host's data wait per step
    (``analysis/straggler.find_straggler``), or None."""
    xprof: XprofSummary | None = None
    """XProf's own reading of the capture, with ``--xprof`` (None otherwise)."""
    picked_step: PickedStep | None = None
    """No step markers and no ``--step-fn``: the jitted function picked as the train step
    (None otherwise; records written before it was added read as None)."""
    device_idle: DeviceIdle | None = None
    """The device's idle seconds in each step by cause (same order as ``steps``; empty
    columns for a whole-capture reading); None in records written before it was added."""
    whole_capture: bool = False
    """No steps found (no markers, no ``--step-fn``, no function picked): the capture read
    as one window. ``steps`` is then empty and the estimates are single numbers (n = 1) over
    the capture (see docs/profile.md)."""
    headspace_s: StepInterval | None = None
    """The step less the device's busy time, per steady step, its ends from their
    intervals: what any input, sync or host-work fix can buy at most
    (``analysis.profile_gains``; None: a capture read whole, or a file written before it
    was recorded)."""
    gains: tuple[Gain, ...] = ()
    """The changes the capture supports (its syncs, the device's idle time for input and
    checkpoints), each with its gain per step as a range, ranked by gain."""
    gains_notes: tuple[str, ...] = ()
    """What bounds every gain, and why there are none."""

    @property
    def host_bound(self) -> bool:
        """The device waits for the host to dispatch its work: ``verdict`` is ``host-bound``.
        Read off ``verdict`` (the record's one answer), and written to files beside it for
        scripts that read ``host_bound`` (skipped on reading)."""
        return self.verdict == HOST_BOUND

    def derived(self) -> Mapping[str, object]:
        return {**super().derived(), "host_bound": self.host_bound}

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", as_step_table(self.steps, StepRecord))
