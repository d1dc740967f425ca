"""Pure: what each change a ``profile`` capture shows would buy per step, and the headspace.

A capture times both sides: the device's busy time per step (T) and the step (R), read off
the same steps, so the headspace is R less T paired step by step: the device's idle time
per steady step (``paired_headspace``). The gains it supports:

- ``sync``: each sync site the capture's host reads named (``analysis.profile.host_reads``):
  at most its wait a step and the headspace, and (expected) R less the loader's time (the
  device still computes, the loader still loads); its low end is what the estimates'
  intervals leave where the device runs beside the host (the capture shows its busy time),
  0 where the device is the host's cores (the host's work cannot overlap it);
- ``loader-setting``: the device's idle time while the thread waited for input: at most
  that, at least 0 (the thread's own part of loading stays);
- ``host-work``: the device's idle time while the thread checkpointed.

A capture read as one window (no steps) supports none: its estimates are single numbers.
Kinds a capture cannot support (other loader settings, the stage, cores) are absent.
"""

from __future__ import annotations

import math

from pipecheck.analysis.gain_ranges import (
    RecordGains,
    bound_gain,
    near_floor_note,
    ranked,
    sync_sites,
)
from pipecheck.analysis.loop_verdict import (
    MATERIAL_GAIN_SHARE,
    SHARED_CORES_BACKENDS,
    overlap_unknown_why,
)
from pipecheck.records.common import Estimate
from pipecheck.records.gains import Gain, StepInterval
from pipecheck.records.kinds import CHECKPOINT, IDLE_ROWS, INPUT
from pipecheck.records.profile import ProfileResult
from pipecheck.units import ms, short_location


def profile_gains(r: ProfileResult) -> RecordGains:
    """Pure: the headspace, the gains ranked by their high end, and the notes."""
    est = r.estimates
    headspace = None if r.whole_capture else paired_headspace(r)
    if headspace is None:
        why = ("the capture was read as one window (no steps): its numbers are single "
               "readings, with no interval to bound a gain" if r.whole_capture else
               "too few steady steps to subtract the device's busy time from the step")
        return RecordGains(None, (), (f"no gains: {why}",))
    notes = [n for n in (near_floor_note(est.compute, est.step),) if n]
    gains = [*_sync_gains(r, headspace), *_idle_gains(r, headspace)]
    return RecordGains(headspace, ranked(gains), tuple(notes))


def paired_headspace(r: ProfileResult) -> StepInterval | None:
    """The device's idle time per steady step (the step less its own busy time, paired step
    by step: a busy machine slows both together), its median with its interval; None with
    fewer than 3 steady steps."""
    idle = [s.time_s - b for s, b in zip(r.steps, r.device_busy_s, strict=False)
            if not s.tags and math.isfinite(s.time_s - b)]
    e = Estimate.of(idle) if idle else None
    if e is None or not e.usable and not (e.n >= 3 and e.value == 0.0):
        return None
    return StepInterval(max(0.0, e.value), max(0.0, e.low), max(0.0, e.high))


def _sync_gains(r: ProfileResult, headspace: StepInterval) -> list[Gain]:
    est, device = r.estimates, str(r.config.get("device", ""))
    shared = device in SHARED_CORES_BACKENDS
    out = []
    for location, wait in sync_sites(r.findings):
        expected = min(wait, headspace.value, max(0.0, est.step.value - est.loader.value))
        high = max(expected, min(wait, headspace.high))
        low = 0.0 if shared else min(expected, headspace.low)
        if expected < MATERIAL_GAIN_SHARE * est.step.value:
            continue
        low_why = (overlap_unknown_why(device, "the capture") if shared else
                   "what the step's and the device's intervals leave: the capture shows the "
                   "device busy beside the host, so the host's other work runs while it "
                   "computes once the sync is gone")
        out.append(bound_gain(
            "sync", f"read the value at {short_location(location)} one step later, or every "
            "N steps", est.step.value, low, high, expected,
            f"at most its wait ({ms(wait)} a step) and the device's idle time a step; at "
            f"least {ms(low) if low else 0}: {low_why}"))
    return out


def _idle_gains(r: ProfileResult, headspace: StepInterval) -> list[Gain]:
    """The device's idle time per steady step while the thread waited for input, and while
    it checkpointed."""
    n, step = r.device_time.steps, r.estimates.step.value
    if n <= 0:
        return []
    out = []
    for kind, change, why in (
            (INPUT, "a loader that keeps up (pipecheck compare on the pipeline finds its "
             "setting), or batches prefetched beside the step",
             "at least 0: the thread's own part of loading (collation, device_put) stays"),
            (CHECKPOINT, "the checkpoint off the loop (asynchronous) or less often",
             "at least 0: the device may run queued steps during it")):
        idle = r.device_time.seconds(IDLE_ROWS[kind]) / n
        high = min(idle, headspace.high)
        if high < MATERIAL_GAIN_SHARE * step:
            continue
        out.append(bound_gain(
            "loader-setting" if kind == INPUT else "host-work", change, step, 0.0, high, high,
            f"at most the device's idle time while the thread did it ({ms(idle)} a step); "
            f"{why}"))
    return out
