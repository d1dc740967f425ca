"""A capture without step markers, read without ``--step-fn``: the train step picked
automatically when one jitted function clearly repeats, else the whole capture read as one
window (pure functions of a ``CaptureTimeline``; ``profiling`` chooses between them).

**The picked step.** Each jitted function the training thread calls is a candidate: its
executions are counted where ``--step-fn`` would take them (its module's executions on the
device when the capture tells them apart, else its outermost calls on the thread), and its
share of the device time is its executions' time over all jitted modules' (where the capture
has no per-module device time, a GPU capture without an ``XLA Modules`` line, its share of
the thread's jitted calls). A candidate that runs at least ``AUTO_MIN_EXECUTIONS`` times and
holds more than ``AUTO_DEVICE_SHARE`` of that time is the train step: the capture is read
exactly as with ``--step-fn NAME``.

**The whole-capture reading.** Otherwise the capture, from its first event to its last, is
one window: the device's busy time, its idle time charged to what the thread was doing
(``analysis.profile.split_steps``), the thread's time in input and in syncs, and its jitted
calls. Time the device sat idle while JAX compiled is set apart (as compiling steps are).
The verdict follows compare's rule on these single numbers, without intervals:
host-bound first (shown as host-bound (dispatch)); then a capture clearly longer than the
slower of the device's work and the loading is forced-sync when the thread sat in syncs,
else inconclusive; else the clearly slower part bounds it (input-bound, compute-bound).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from pipecheck.analysis import profile as ap
from pipecheck.analysis.verdict import (
    FORCED_SYNC_EVIDENCE,
    FORCED_SYNC_MARGIN,
    HARMLESS_SYNC_SHARE,
    INPUT_BOUND_MARGIN,
    Verdict,
    dispatch_bound,
    host_bound_verdict,
)
from pipecheck.records.common import Estimate, Finding, SyncSite
from pipecheck.records.kinds import (
    COMPILE,
    COMPUTE_BOUND,
    DISPATCH,
    FORCED_SYNC,
    HOST,
    INCONCLUSIVE,
    INPUT,
    INPUT_BOUND,
    SYNC,
    verdict_text,
)
from pipecheck.units import ms, short_location

AUTO_MIN_EXECUTIONS = 5
"""A function run fewer than 5 times is not picked as the step: 5 executions give 4 steps
(each execution to the next), 3 of them steady once the first is set apart, the fewest
``profiling.MIN_STEPS`` decides on."""

AUTO_DEVICE_SHARE = 0.5
"""The picked function holds more than half of the device time of the capture's jitted
functions: a train step is most of a training loop's device work, and no two functions can
both hold more than half (a loop of several small functions of similar cost has none)."""

LAUNCH_SHARE = 0.10
"""Whole capture: host-bound (dispatch) also needs the thread inside jitted-call launches
(``PjitFunction``) for at least 10% of the device's idle time: the launches themselves pace
the device, not one long stretch of Python between two calls (a loop of many small calls
spends 20-30% of it launching; a loop of one call and heavy Python well under 5%)."""

WHOLE_CAPTURE = "the whole capture"
"""The step source of the whole-capture reading (``config.steps_from``)."""


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A jitted function of the capture as a possible train step."""

    function: str
    executions: int
    device_share: float
    """Its share of the device time of the capture's jitted functions (or of the thread's
    jitted calls, where the capture has no per-module device time)."""


def jitted_calls(t: ap.CaptureTimeline) -> dict[str, int]:
    """The thread's outermost jitted calls per function (calls made while tracing another
    function are nested in its call and not counted)."""
    idx = [i for i, n in enumerate(t.name_table) if n.startswith("PjitFunction(")]
    mask = np.isin(t.names, idx)
    if not mask.any():
        return {}
    top = t.names[mask][ap.outermost(t.starts[mask], t.ends[mask])]
    codes, counts = np.unique(top, return_counts=True)
    return {t.name_table[c][len("PjitFunction("):-1]: int(k)
            for c, k in zip(codes.tolist(), counts.tolist(), strict=True)}


def candidates(t: ap.CaptureTimeline) -> list[Candidate]:
    """Every jitted function the thread calls, the largest device share first."""
    calls = jitted_calls(t)
    device = {name[len("jit_"):]: float((r[:, 1] - r[:, 0]).sum())
              for name, r in t.module_runs.items() if name.startswith("jit_")}
    total = sum(device.values()) if device else float(sum(calls.values()))
    out = []
    for name, n in calls.items():
        runs = t.module_runs.get(f"jit_{name}")
        executions = len(runs) if runs is not None and len(runs) >= 2 else n
        held = device.get(name, 0.0) if device else float(n)
        out.append(Candidate(name, executions, held / total if total > 0 else 0.0))
    return sorted(out, key=lambda c: (-c.device_share, -c.executions, c.function))


def pick_step(t: ap.CaptureTimeline) -> Candidate | None:
    """The jitted function that clearly is the train step (``AUTO_MIN_EXECUTIONS``,
    ``AUTO_DEVICE_SHARE``), or None."""
    for c in candidates(t):
        if c.executions >= AUTO_MIN_EXECUTIONS and c.device_share > AUTO_DEVICE_SHARE:
            return c
    return None


def window(t: ap.CaptureTimeline) -> ap.Steps:
    """The whole capture as one step: from its first event (thread or device) to its last."""
    lo = min(float(t.starts.min()) if len(t.starts) else np.inf, float(t.busy[:, 0].min()))
    hi = max(float(t.ends.max()) if len(t.ends) else -np.inf, float(t.busy[:, 1].max()))
    return ap.Steps(np.zeros(1, dtype=int), np.array([lo]), np.array([hi]), WHOLE_CAPTURE)


@dataclasses.dataclass(frozen=True)
class Reading:
    """The whole capture's numbers (seconds), device idle while compiling set apart."""

    wall: float
    """The capture's length less the device's idle time while JAX compiled."""
    busy: float
    loader: float
    """The loader's time: the thread's input time, or the whole wall when the thread waited
    on a background loader (as ``analysis.profile.estimates`` counts a step)."""
    input_s: float
    sync_s: float
    idle: float
    dispatch_idle: float
    """Device idle while the thread dispatched or ran Python between launches."""
    launching: float
    """The thread's time inside jitted-call launches while the device was idle or not."""
    calls: int
    background_loader: bool
    compile_idle: float


def reading(bd: ap.StepSplit) -> Reading:
    """The one-window breakdown (``window``) as the whole capture's numbers."""
    compile_idle = float(bd.idle_by[COMPILE][0])
    wall = max(float(bd.times[0]) - compile_idle, 1e-12)
    input_s = float(bd.thread_by[INPUT][0])
    background = bool(input_s > 0 and bd.blocked_input[0] >= ap.BACKGROUND_SHARE * input_s)
    waited = background and input_s >= ap.WAITED_SHARE * wall
    return Reading(
        wall=wall, busy=float(bd.busy[0]), loader=max(wall if waited else input_s, ap.NO_INPUT_S),
        input_s=input_s, sync_s=float(bd.thread_by[SYNC][0]),
        idle=max(float(bd.idle[0]) - compile_idle, 0.0),
        dispatch_idle=float(bd.idle_by[DISPATCH][0] + bd.idle_by[HOST][0]),
        launching=float(bd.thread_by[DISPATCH][0]), calls=int(bd.calls[0]),
        background_loader=background, compile_idle=compile_idle)


def estimates(r: Reading) -> ap.ProfileEstimates:
    """The reading as single-sample estimates (n = 1: no intervals), for the record."""
    return ap.ProfileEstimates(
        compute=Estimate.of([r.busy]), loader=Estimate.of([r.loader]),
        step=Estimate.of([r.wall]), sync_share=r.sync_s / r.wall,
        background_loader=r.background_loader, idle_share=r.idle / r.wall,
        dispatch_idle_share=r.dispatch_idle / r.wall, calls_per_step=float(r.calls),
        data_wait=Estimate.of([r.input_s]))


def host_bound(r: Reading) -> bool:
    """The steps' host-bound rule (``analysis.verdict.dispatch_bound``) over the capture,
    with the launches' own share."""
    return (dispatch_bound(r.idle / r.wall, r.dispatch_idle / r.wall, r.calls)
            and r.launching >= LAUNCH_SHARE * r.idle)


def verdict(r: Reading) -> Verdict:
    """compare's rule on the whole capture's numbers (see the module docstring), host-bound
    first."""
    idle, where = 100 * r.idle / r.wall, f"over the whole capture ({ms(r.wall)})"
    if host_bound(r):
        return host_bound_verdict(
            f"the device is idle {idle:.0f}% of the time {where} while the host launches "
            f"{r.calls} jitted calls ({ms(r.busy)} of device work in all)", r.wall, r.busy)
    slower = max(r.busy, r.loader)
    excess = r.wall / slower - 1.0
    parts = f"device busy {ms(r.busy)}, loading {ms(r.loader)}"
    if excess > FORCED_SYNC_MARGIN and r.sync_s >= FORCED_SYNC_EVIDENCE * r.wall:
        return Verdict(FORCED_SYNC,
                       f"{where} the loop takes {100 * excess:.0f}% longer than the slower of "
                       f"its parts ({parts}) and the thread sits in syncs "
                       f"{100 * r.sync_s / r.wall:.0f}% of it: the host waits for the device "
                       "instead of loading while it computes", excess)
    if excess > FORCED_SYNC_MARGIN:
        return Verdict(INCONCLUSIVE,
                       f"{where} the device is idle {idle:.0f}% of the time and neither its "
                       f"work nor loading fills the capture ({parts}); most of the idle time "
                       f"the thread was in {_main_idle(r)}", excess)
    if r.loader > (1.0 + INPUT_BOUND_MARGIN) * r.busy:
        return Verdict(INPUT_BOUND, f"{where} loading ({ms(r.loader)}) takes longer than the "
                       f"device's work ({ms(r.busy)}): the device waits for input "
                       f"{idle:.0f}% of the time", excess)
    if r.busy > (1.0 + INPUT_BOUND_MARGIN) * r.loader:
        return Verdict(COMPUTE_BOUND, f"{where} the device is busy {100 - idle:.0f}% of the "
                       f"time ({ms(r.busy)}); loading takes {ms(r.loader)}", excess)
    return Verdict(INCONCLUSIVE, f"{where} the device's work and loading take about as long "
                   f"({parts})", excess)


def _main_idle(r: Reading) -> str:
    """What the thread did in most of the device's idle time, in words."""
    if r.dispatch_idle >= r.idle / 2:
        return "Python and launches"
    if r.input_s >= r.idle / 2:
        return "input"
    return "several kinds of host work (see the table)"


def sync_findings(sites: Sequence[SyncSite], r: Reading, v: Verdict) -> list[Finding]:
    """The user's syncs over the whole capture: forced when the verdict is, else harmless
    (compare's kinds; their cost as a share of the capture, not of a step)."""
    out = []
    for site in sites:
        share, where = site.seconds / r.wall, short_location(site.location)
        if site.internal or share < HARMLESS_SYNC_SHARE:
            continue
        numbers = {"seconds": site.seconds, "share_of_capture": share,
                   "samples": float(site.samples)}
        cost = (f"waits {ms(site.seconds)} in {site.samples} call(s), about "
                f"{100 * share:.0f}% of the capture")
        if v.verdict == FORCED_SYNC:
            out.append(Finding("forced-sync", f"forced sync at {where} ({site.code}) "
                               f"{cost}", numbers, site.location,
                               "don't read the current step's values on the host: log the "
                               "previous step's loss (or fetch metrics every N steps)"))
        else:
            out.append(Finding("harmless-sync", f"sync at {where} ({site.code}) {cost}, "
                               "but it is harmless here: the run is "
                               f"{verdict_text(v.verdict)}", numbers, site.location))
    return out
