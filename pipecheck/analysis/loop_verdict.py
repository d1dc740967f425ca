"""Pure: the verdict of a user's own loop from what the Monitor's record shows, and what each
change it supports would buy.

The loop's wall time, compilation left out (``LoopTimes``), splits into the wait for batches
(``input``: the restarts of a loader apart), the wait for the device in the lagged sync and
dispatch (``device``), the waits in the user's own syncs (``sync``), the hooks (checkpoint,
eval, gc) and the rest of the host's own work (user spans, code outside any span).

What a forced sync costs is a range. Removing it lets the host's own work of the step run
while the device computes, so the step gains at most the smaller of the sync's wait and that
work (``SyncCost.high``); at least 0, since the Monitor sees only the host: where host and
device share the cores (the CPU backend) the host's work cannot overlap the device's at all,
and elsewhere the device's busy time is not in the record (a ``pipecheck profile`` capture
shows it). The verdict (``loop_verdict``, named thresholds):

1. fewer than ``MIN_VERDICT_STEPS`` steady steps: ``inconclusive``, with the number needed;
2. ``input-bound`` when the loop waits for batches ``INPUT_BOUND_SHARE`` of its time or more,
   more than any sync can buy;
3. ``forced-sync`` when removing the user's syncs may buy ``FORCED_SYNC_SHARE`` or more,
   naming the line;
4. ``host-bound`` when the host's own work takes ``HOST_BOUND_SHARE`` or more and the device
   waits little;
5. ``compute-bound`` when waiting for the device (lagged or forced) takes
   ``COMPUTE_BOUND_SHARE`` or more;
6. otherwise ``inconclusive``, with the shares.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from pipecheck.analysis.anomalies import span_seconds
from pipecheck.analysis.first_batch import steady_wait
from pipecheck.analysis.gain_ranges import bound_gain, ranked
from pipecheck.records.common import Breakdown, LoaderStart, StepRecord
from pipecheck.records.gains import Gain, GainKind, StepInterval
from pipecheck.records.kinds import (
    CHECKPOINT,
    COMPILE,
    COMPUTE,
    COMPUTE_BOUND,
    EVAL,
    FORCED_SYNC,
    GC,
    HOST_BOUND,
    INCONCLUSIVE,
    INPUT,
    INPUT_BOUND,
    SYNC,
    WALL_ROWS,
    VerdictKind,
)
from pipecheck.records.monitor import SyncSiteRecord
from pipecheck.records.steps import StepTable

MIN_VERDICT_STEPS = 10
"""A loop's verdict needs at least this many steady steps (the first, compiling, tagged and
anomalous ones left out): fewer say where a start-up went, not where a loop's time goes."""

INPUT_BOUND_SHARE = 0.25
"""Waiting for batches this share of the loop's time (compile left out) or more is input-bound:
a quarter of every step the device could have been fed; below it, a loader's jitter."""

FORCED_SYNC_SHARE = 0.10
"""A forced sync is the verdict when removing it may buy this share of the loop's time or
more (the range's high end): below it, a change inside the noise of a shared machine."""

HOST_BOUND_SHARE = 0.5
"""The host's own work (user spans, hooks, code outside spans) taking this share or more, with
the device waited for less than ``COMPUTE_BOUND_SHARE``, is host-bound."""

COMPUTE_BOUND_SHARE = 0.5
"""Waiting for the device (the lagged sync, dispatch, and forced syncs that buy nothing) this
share of the loop's time or more is compute-bound: the device is the floor."""

MATERIAL_GAIN_SHARE = 0.01
"""A change is listed among the gains when it may buy at least this share of a step."""

RESTART_TAIL_FACTOR = 4.0
"""A step right after a loader's restart whose data wait is this many times a steady batch's
or more still pays for the restart: a new iterator's workers hand over their first batches
in turn (2 Grain workers on the loaded 2-core machine: the second one's first batch came
0.8 s after the first one's, on the step after the restart, against a steady 0.8 ms)."""

RESTART_TAIL_STEPS = 16
"""At most this many steps after a restart pay for it (one first batch per worker)."""

SHARED_CORES_BACKENDS = ("cpu",)
"""Backends whose "device" runs on the host's cores: the host's work cannot overlap it."""


@dataclasses.dataclass(frozen=True)
class LoopTimes:
    """A loop's wall time by what the host did, compile left out (seconds over the run)."""

    steps: int
    input_s: float
    """Waiting for batches, the restarts' excess left out (``restart_s``)."""
    restart_s: float
    """Loader restarts' waits (the previous pass's end, the new pass's first batches) beyond
    a steady wait (``restart_excess``)."""
    device_s: float
    """Dispatch and the lagged sync: waiting for the device the loop needs."""
    sync_s: float
    """Blocked in the user's own syncs (outside spans) and ``log`` spans."""
    hooks_s: dict[str, float]
    """Checkpoint, eval and gc spans, by name."""
    own_s: float
    """The host's other work: user spans and code outside any span."""
    steady_steps: int

    @property
    def total_s(self) -> float:
        return (self.input_s + self.restart_s + self.device_s + self.sync_s
                + sum(self.hooks_s.values()) + self.own_s)

    @property
    def host_work_s(self) -> float:
        """The host's work that could run while the device computes."""
        return self.input_s + self.restart_s + sum(self.hooks_s.values()) + self.own_s

    @classmethod
    def of(cls, breakdown: Breakdown, steady_steps: int,
           restart_s: float = 0.0) -> LoopTimes:
        """From a record's breakdown (its rows, compile left out) and its restarts' excess."""
        fixed = {WALL_ROWS[k] for k in (COMPILE, INPUT, COMPUTE, SYNC, CHECKPOINT, EVAL, GC)}
        own = sum(r.seconds for r in breakdown.rows if r.category not in fixed)
        data = breakdown.seconds(WALL_ROWS[INPUT])
        restart = min(max(0.0, restart_s), data)
        return cls(
            steps=breakdown.steps, input_s=data - restart, restart_s=restart,
            device_s=breakdown.seconds(WALL_ROWS[COMPUTE]),
            sync_s=breakdown.seconds(WALL_ROWS[SYNC]),
            hooks_s={WALL_ROWS[k]: breakdown.seconds(WALL_ROWS[k])
                     for k in (CHECKPOINT, EVAL, GC)},
            own_s=own, steady_steps=steady_steps)


@dataclasses.dataclass(frozen=True)
class SyncCost:
    """What removing one forced sync buys over the run, in seconds: at least ``low``, at most
    ``high``."""

    site: SyncSiteRecord
    low: float
    high: float
    why_low: str


def overlap_unknown_why(backend: str, who: str) -> str:
    """Why a sync's gain may be 0, for a record that times the host only (``who``: what
    timed it): on a backend whose device is the host's cores the host's work cannot overlap
    it; elsewhere the device's busy time after the wait is not in the record."""
    if backend in SHARED_CORES_BACKENDS:
        return ("host and device share the cores on this backend: the host's work cannot "
                "overlap the device's")
    return (f"{who} does not see how long the device stays busy after the wait "
            "(pipecheck profile on a capture shows it)")


def sync_costs(times: LoopTimes, sites: Sequence[SyncSiteRecord], backend: str
               ) -> list[SyncCost]:
    """Each user sync site's cost range (costliest first): at most its wait and at most the
    host's own work that could overlap the device once it is gone (shared by the sites, in
    order); at least 0 (``why_low`` says why)."""
    why = overlap_unknown_why(backend, "the loop")
    room = times.host_work_s
    out = []
    for s in sorted((s for s in sites if not s.internal), key=lambda s: -s.seconds):
        high = max(0.0, min(s.seconds, room))
        room -= high
        out.append(SyncCost(s, 0.0, high, why))
    return out


def restart_excess(starts: Sequence[LoaderStart], steps: StepTable[StepRecord]) -> float:
    """Seconds the loader's restarts (every pass after the first) waited beyond a steady
    batch's wait. At each: the whole data wait of the step that restarted (the previous
    pass's end, a ``grain.DataLoader`` iterator stopping its workers, and the new pass's
    first batch; or that first batch alone where the step is not in the record or waited
    less), and the pass's first steps after it that still wait ``RESTART_TAIL_FACTOR``
    times a steady batch or more (its other workers' first batches), up to
    ``RESTART_TAIL_STEPS``: one iterator over every epoch saves all of it."""
    typical = steady_wait(starts, steps)
    restarts = [s for s in starts if s.index >= 1]
    if not restarts:
        return 0.0
    at = {s.step for s in restarts}
    waits = step_data_waits(steps, {s.step + j for s in restarts
                                    for j in range(RESTART_TAIL_STEPS + 1)})
    lost = 0.0
    for s in restarts:
        lost += max(0.0, max(s.wait_s, waits.get(s.step, 0.0)) - typical)
        for step in range(s.step + 1, s.step + RESTART_TAIL_STEPS + 1):
            wait = waits.get(step)
            if step in at or wait is None or wait < RESTART_TAIL_FACTOR * typical:
                break
            lost += wait - typical
    return float(lost)


def step_data_waits(steps: StepTable[StepRecord], wanted: set[int]) -> dict[int, float]:
    """The data wait of each step of ``wanted`` in ``steps``."""
    if not len(steps) or not wanted:
        return {}
    numbers = steps.column("step")
    rows = np.flatnonzero(np.isin(numbers, sorted(wanted)))
    waits = span_seconds(steps, "data_wait")
    return {int(numbers[i]): float(waits[i]) for i in rows.tolist()}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def loop_verdict(times: LoopTimes, costs: Sequence[SyncCost]) -> tuple[VerdictKind, str]:
    """Pure: the loop's verdict and its reason (see the module docstring)."""
    if times.steady_steps < MIN_VERDICT_STEPS:
        return INCONCLUSIVE, (f"{times.steady_steps} steady step(s); a verdict needs at least "
                              f"{MIN_VERDICT_STEPS} (run {MIN_VERDICT_STEPS - times.steady_steps}"
                              " more)")
    total = times.total_s
    if not total > 0:
        return INCONCLUSIVE, "no time recorded outside compilation"
    sync_high = sum(c.high for c in costs)
    inp = times.input_s + times.restart_s
    hooks = sum(times.hooks_s.values())
    if inp / total >= INPUT_BOUND_SHARE and inp >= sync_high:
        restarts = (f" ({_pct(times.restart_s / total)} in loader restarts)"
                    if times.restart_s >= MATERIAL_GAIN_SHARE * total else "")
        return INPUT_BOUND, (f"the loop waited for its batches {_pct(inp / total)} of its time"
                             f"{restarts}, the device {_pct(times.device_s / total)}")
    if sync_high / total >= FORCED_SYNC_SHARE:
        top = costs[0].site
        return FORCED_SYNC, (
            f"the loop waits for the device at {top.location} ({top.code}): removing its "
            f"syncs buys up to {_pct(sync_high / total)} of its time (their wait "
            f"{_pct(times.sync_s / total)}, bounded by the host's own work that could "
            "overlap the device)")
    waiting = times.device_s + times.sync_s
    host = hooks + times.own_s
    if host / total >= HOST_BOUND_SHARE and waiting / total < COMPUTE_BOUND_SHARE:
        return HOST_BOUND, (f"the host's own work took {_pct(host / total)} of the loop's time "
                            f"(hooks {_pct(hooks / total)}), the device waited for "
                            f"{_pct(waiting / total)}")
    if waiting / total >= COMPUTE_BOUND_SHARE:
        sync = (f"; its forced syncs ({_pct(times.sync_s / total)}) buy at most "
                f"{_pct(sync_high / total)}" if times.sync_s >= MATERIAL_GAIN_SHARE * total
                else "")
        return COMPUTE_BOUND, (f"the loop waited for the device {_pct(waiting / total)} of its "
                               f"time, for batches {_pct(inp / total)}{sync}")
    return INCONCLUSIVE, (f"no part holds the loop's time: batches {_pct(inp / total)}, device "
                          f"{_pct(waiting / total)}, host work {_pct(host / total)}")


def loop_headspace(times: LoopTimes) -> StepInterval:
    """Pure: R less T per step, what any input, sync or host-work fix can buy at most. R is
    the wall time per step (compile left out); the device computes at least while the loop
    waited for it, in dispatch and the lagged sync and in the user's own forced syncs alike,
    so T is at least those waits (the high end: the host's own work, ``host_work_s``) and at
    most R itself, since the device may have computed through all of the host's other time
    (the low end, 0: a loop's record cannot say how much of the host's time overlapped the
    device's); ``value`` is the range's middle, as the gains' predicted step times are."""
    n = max(times.steps, 1)
    high = max(times.host_work_s, 0.0) / n
    return StepInterval(value=high / 2, low=0.0, high=high)


def loop_gains(times: LoopTimes, costs: Sequence[SyncCost]) -> tuple[Gain, ...]:
    """Pure: the changes the record supports, each with its gain per step as a range and the
    step time it predicts (wall time per step, compile left out), ranked by the high end."""
    n = max(times.steps, 1)
    step = times.total_s / n
    out: list[Gain] = []

    def add(kind: GainKind, change: str, low: float, high: float, why: str) -> None:
        lo, hi = low / n, high / n
        if hi >= MATERIAL_GAIN_SHARE * step:
            out.append(bound_gain(kind, change, step, lo, hi, (lo + hi) / 2, why))

    for c in costs:
        s = c.site
        add("sync", f"read the value at {s.location} ({s.code}) one step later, or every N "
            "steps", c.low, c.high, f"at most its wait, and the host's work that could "
            f"overlap; at least 0: {c.why_low}")
    add("loader-setting", "one iterator over every epoch (a repeated dataset), not a new "
        "one per epoch", 0.0, times.restart_s, "at most the restarts' waits beyond a steady "
        "batch's; at least 0: the device may still run queued steps meanwhile")
    add("loader-setting", "a loader that keeps up (pipecheck dataloader times the pipeline "
        "alone; its tuned setting in grain.ReadOptions / MultiprocessingOptions)", 0.0,
        times.input_s, "at most the wait for batches; at least 0: a loader's wait that "
        "overlaps queued device work buys nothing")
    for name, seconds in times.hooks_s.items():
        add("host-work", f"the {name} off the loop (asynchronous) or less often", 0.0,
            seconds, f"at most the {name} spans' time, amortized over the steps; at least 0: "
            "the device may run queued steps during it")
    return ranked(out)
