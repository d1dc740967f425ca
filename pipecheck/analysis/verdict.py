"""The verdict: compute-bound, input-bound, forced-sync, host-bound or inconclusive. Pure
functions.

Inputs are three estimates, each a statistic of raw samples with its confidence interval
(block bootstrap of the samples):

- T, the target step time (compute alone, ``synthetic``), a median, measured before and
  after the real-data run so that a drift of the machine's speed cannot pass
  for a slowdown;
- D, the loader's time per batch at the chosen worker setting (``dataloader``): the
  *mean* batch time, the inverse of its throughput, since workers deliver in bursts;
- R, the real-data step time, a median.

Decisions compare intervals, not single numbers, with the named margins below;
a run whose numbers cannot separate the cases is ``inconclusive`` and says
what to do. A noisy estimate (a busy machine) makes the run inconclusive only when its
interval reaches across the decision: T and D whose whole intervals lie apart by the margin
decide input- or compute-bound however wide they are. A compute-bound run measured twice
must never be called forced-sync because of noise: that needs R's whole interval above the
slower of T and D's intervals by ``FORCED_SYNC_MARGIN``, or, within R's own steps, the
training thread's own loading and its wait in the user's sync one after the other
(``SERIAL_SAVING``), which noise cannot make.

R slower than both with no sync to explain it is blamed on loading competing with compute,
unless other programs used clearly more CPU during R than while the slower of T and D was
timed (``analysis.machine_load``): then the reason names the busier machine, and a noisy R
on it names it too.

**Host-bound** (``host_bound_verdict``) is decided before T, D and R, from where the
device's idle time went: a device idle at least ``DISPATCH_BOUND_SHARE`` of each step, at
least that share of it while the host dispatched or ran Python between launches, in steps
that launch at least ``DISPATCH_MIN_CALLS`` jitted calls, waits for the host to launch its
work (``dispatch_bound``). ``profile`` reads these shares off a capture; any command that
measures them can call the same rule and gives the same ``Verdict``.
"""

from __future__ import annotations

import dataclasses
import math

from pipecheck.analysis.machine_load import BusierMachine, busier_during_real
from pipecheck.records.common import Estimate
from pipecheck.records.kinds import (  # noqa: F401 - the verdicts' home is records.kinds
    COMPUTE_BOUND,
    FORCED_SYNC,
    HOST_BOUND,
    INCONCLUSIVE,
    INPUT_BOUND,
    VERDICTS,
    VerdictKind,
    verdict_text,
)
from pipecheck.records.machine_load import MachineLoad
from pipecheck.units import ms

FORCED_SYNC_MARGIN = 0.20
"""R's lower bound must exceed the slower of T and D (upper bounds) by 20% to call forced-sync."""

INPUT_BOUND_MARGIN = 0.10
"""D must exceed T by 10%, with separated intervals, to call the run input-bound."""

LOADER_HEADROOM = 0.90
"""The tuner picks the smallest setting with D <= 0.9 T: 10% headroom for jitter."""

MAX_RELATIVE_HALF_WIDTH = 0.25
"""An estimate whose interval half-width exceeds 25% of its median is too noisy to decide on
(unless the intervals lie apart whatever their width: ``_apart_despite_noise``)."""

FORCED_SYNC_EVIDENCE = 0.10
"""Calling forced-sync also needs the sync locator to find user syncs costing at least 10%
of a real-data step; slower-than-both without them is interference (CPU contention)."""

SERIAL_SAVING = 1.0 - 1.0 / (1.0 + FORCED_SYNC_MARGIN)
"""A training thread that loads its own batches and then waits in the user's sync, each for
at least 1/6 of the same real-data steps, would save that share by overlapping them: its
steps are the forced-sync margin (20%) slower than they need be."""

HARMLESS_SYNC_SHARE = 0.02
"""User syncs costing less than 2% of wall time are not worth naming at all."""

CPU_CONTENTION_ALLOWANCE = 1.5
"""Loading that competes with compute for the cores can slow a step by about its own CPU time
per batch at most (a parallel step waits for the thread whose core it took); a slowdown
beyond 1.5x that (scheduling overhead, noise) is more than loading can explain."""

DISPATCH_BOUND_SHARE = 0.5
"""A device idle at least half of each step, at least half of that while the thread was
dispatching or running Python between launches (not input, syncs or compiling), is
host-bound when the step launches many jitted calls: the launches pace it."""

DISPATCH_MIN_CALLS = 10
"""Many small jitted calls: at least 10 a step (a train step is one or two)."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    verdict: VerdictKind
    reason: str
    excess_over_bound: float
    """R / max(T, D) - 1: how much slower real training is than its slower part."""
    fixed_by_tuning: bool = False
    """Input-bound at the baseline setting, and the chosen setting keeps up with compute."""
    unexplained_slowdown: bool = False
    """R is clearly above max(T, D) but neither a host sync nor a machine that other
    programs kept busier during R explains it (e.g. loading competes with compute)."""


def dispatch_bound(idle_share: float, dispatch_idle_share: float,
                   calls_per_step: float) -> bool:
    """The host-bound rule: the device idle at least ``DISPATCH_BOUND_SHARE`` of a step
    (``idle_share``), at least that share of its idle time while the host dispatched or ran
    Python between launches (``dispatch_idle_share``, a share of the step), with at least
    ``DISPATCH_MIN_CALLS`` jitted calls a step."""
    return (idle_share >= DISPATCH_BOUND_SHARE
            and dispatch_idle_share >= DISPATCH_BOUND_SHARE * idle_share
            and calls_per_step >= DISPATCH_MIN_CALLS)


def host_bound_verdict(evidence: str, step_s: float, device_busy_s: float) -> Verdict:
    """The host-bound verdict: ``evidence`` (the device's idle share and the host's
    launches, in words) and why that bounds the steps. ``excess_over_bound`` is the step
    over the device's own work per step, less one."""
    return Verdict(HOST_BOUND,
                   f"{evidence}: {verdict_text(HOST_BOUND)}, the device waits for the host to "
                   "launch its work",
                   step_s / max(device_busy_s, 1e-12) - 1.0)


def _clearly_slower(loader: Estimate, target: Estimate) -> bool:
    return loader.value > target.value * (1.0 + INPUT_BOUND_MARGIN) and loader.low > target.high


def _too_noisy(e: Estimate, real: Estimate, parts_of_real: bool) -> bool:
    """The interval is wider than the margin: of its own median, or of R's (``decide``)."""
    if not parts_of_real:
        return e.relative_half_width > MAX_RELATIVE_HALF_WIDTH
    return not (e.high - e.low) / 2.0 <= MAX_RELATIVE_HALF_WIDTH * real.value


def slower_than_both(target: Estimate, loader: Estimate, real: Estimate) -> bool:
    """R's whole interval above the slower of T and D's intervals, by the margin."""
    return real.low > max(target.high, loader.high) * (1.0 + FORCED_SYNC_MARGIN)


def _median_beyond_margin(target: Estimate, loader: Estimate, real: Estimate) -> bool:
    """R's median above the slower of T and D's intervals by the margin, its interval perhaps
    not: on a machine that got busier during R, its first steps (before the other programs
    took the cores) widen R's interval down towards T, and the slowdown is still the
    machine's, not compute's."""
    return real.value > max(target.high, loader.high) * (1.0 + FORCED_SYNC_MARGIN)


def beyond_loader_cpu(target: float, loader: float, real: float,
                      loader_cpu_s: float | None) -> bool:
    """R exceeds the slower of T and D by more than loading's own CPU time per batch could
    take from compute (``CPU_CONTENTION_ALLOWANCE``); False when that CPU is not known."""
    if loader_cpu_s is None or not math.isfinite(loader_cpu_s):
        return False
    return real - max(target, loader) > CPU_CONTENTION_ALLOWANCE * loader_cpu_s


def decide(target: Estimate, loader: Estimate, real: Estimate,
           baseline: Estimate | None = None, sync_share: float | None = None,
           parts_of_real: bool = False, own_load_share: float | None = None,
           machine: MachineLoad | None = None, loader_cpu_s: float | None = None,
           real_baseline: Estimate | None = None) -> Verdict:
    """Classify a run (see ``_decide``); flag a slowdown that no host sync explains.
    ``parts_of_real``: T and D were read off the same steps as R (a profiler capture), so
    their noise is judged against R's median, not their own (a 1 ms spread in a 5 ms
    compute time cannot change the verdict of a 35 ms step). ``own_load_share``: the share
    of a real-data step the training thread spent loading its batches itself (no workers,
    no read threads; None: loading runs beside it). ``machine``: the CPU other processes
    used during each phase; when they used clearly more during R than while the slower of
    T and D was timed, that, not loading, is said to explain the slowdown. ``loader_cpu_s``:
    the loader's CPU seconds per batch at the chosen setting (None: not measured); a
    slowdown beyond what it could take from compute is not blamed on loading.
    ``real_baseline``: R at the first setting, when it was trained at too (the verdict of a
    run fixed by tuning then names the step it fixed; it decides nothing)."""
    busier = busier_during_real(machine, target.value, loader.value)
    v = _decide(target, loader, real, baseline, sync_share, parts_of_real, own_load_share,
                busier, real_baseline)
    usable = target.usable and loader.usable and real.usable
    beyond = slower_than_both(target, loader, real) or (
        busier is not None and _median_beyond_margin(target, loader, real))
    if v.verdict == FORCED_SYNC or not usable or not beyond:
        return v
    slower = (f"real-data steps ({ms(real.value)}) are {100 * v.excess_over_bound:.0f}% "
              f"slower than compute ({ms(target.value)}) and loading ({ms(loader.value)})")
    if busier is not None:
        if v.verdict != COMPUTE_BOUND:  # the verdict stands; the slowdown is explained
            return v
        return Verdict(
            INCONCLUSIVE,
            f"{slower}, but {busier.describe()}: rerun on a quieter machine",
            v.excess_over_bound,
        )
    if v.verdict == COMPUTE_BOUND:
        # Neither compute nor loading explains R, and no host sync was found: calling it
        # compute-bound would send the user to speed up a step that is not the problem.
        why = _unexplained(target, loader, real, loader_cpu_s)
        return Verdict(INCONCLUSIVE, f"{slower}, {why}", v.excess_over_bound,
                       unexplained_slowdown=True)
    return dataclasses.replace(v, unexplained_slowdown=True)


def _unexplained(target: Estimate, loader: Estimate, real: Estimate,
                 loader_cpu_s: float | None) -> str:
    """What most likely slowed R, when no host sync explains it: loading competing with
    compute for the CPU, unless R's excess is more than loading's CPU could take."""
    if beyond_loader_cpu(target.value, loader.value, real.value, loader_cpu_s):
        assert loader_cpu_s is not None
        return (f"more than loading's own CPU ({ms(loader_cpu_s)} a batch) could take from "
                "compute, and the sampler found no host sync that explains it: most likely "
                "the machine's speed changed during the real-data run (another program, or a "
                "neighbour on the same host whose CPU no process here shows). Rerun on a "
                "quieter machine, and run your loop under pipecheck.Monitor to rule out a sync "
                "the sampler cannot see")
    uses = f" (it uses {ms(loader_cpu_s)} of CPU a batch)" if loader_cpu_s is not None \
        and math.isfinite(loader_cpu_s) else ""
    return ("but the sampler found no host sync that explains it: most likely loading "
            f"competes with compute for the CPU{uses}. Try fewer loader threads/workers or "
            "cheaper transforms, and run your loop under pipecheck.Monitor to rule out a sync "
            "the sampler cannot see")


def _decide(target: Estimate, loader: Estimate, real: Estimate,
            baseline: Estimate | None = None, sync_share: float | None = None,
            parts_of_real: bool = False, own_load_share: float | None = None,
            busier: BusierMachine | None = None,
            real_baseline: Estimate | None = None) -> Verdict:
    """Classify a run from its target (T), loader (D, at the chosen setting) and real-data
    (R) step times. ``baseline`` is D at the first setting tried (fewest workers): when it is
    clearly slower than T and the chosen setting is not, the run is input-bound and the
    chosen setting fixes it. ``sync_share`` is the share of a real-data step the sync
    locator found blocked in the user's syncs (None: not located, e.g. no sampler ran).
    ``busier``: other processes used clearly more CPU during R (named when R is noisy)."""
    for name, e in (("target step time", target), ("loader batch time", loader),
                    ("real-data step time", real)):
        if not e.usable:
            return Verdict(INCONCLUSIVE, f"too few {name} samples ({e.n}); run more steps",
                           math.nan)
    bound = max(target.value, loader.value)
    excess = real.value / bound - 1.0
    forced = _forced_sync(target, loader, real, sync_share, own_load_share, excess)
    if forced is not None:
        return forced
    noisy = [name for name, e in (("target", target), ("loader", loader), ("real", real))
             if _too_noisy(e, real, parts_of_real)]
    if noisy and not _apart_despite_noise(target, loader, real):
        cause = (busier.describe() if busier is not None and "real" in noisy else
                 "the machine is likely too busy (other processes competing for the CPU)")
        return Verdict(
            INCONCLUSIVE,
            f"the {', '.join(noisy)} measurements are too noisy to decide (confidence "
            f"interval wider than +/-{100 * MAX_RELATIVE_HALF_WIDTH:.0f}% of the median): "
            f"{cause}; run more steps (--steps, --batches) on a quieter machine",
            excess,
        )
    v = _loader_or_compute(target, loader, real, baseline, excess, real_baseline)
    if not noisy:
        return v
    return dataclasses.replace(v, reason=(
        f"{v.reason} (the {', '.join(noisy)} measurements are noisy, the machine may be "
        "busy, but their intervals lie too far apart for it to change the verdict)"))


def _forced_sync(target: Estimate, loader: Estimate, real: Estimate,
                 sync_share: float | None, own_load_share: float | None,
                 excess: float) -> Verdict | None:
    """Forced-sync, when R's whole interval lies above the slower of T and D by the margin
    (with the user's syncs as evidence), or when, within R's own steps, the training thread
    loaded and then waited in the user's sync, one after the other, each for
    ``SERIAL_SAVING`` of a step (paired within the same steps, a busy machine that slows
    T, D and R at different times can neither fake nor hide it)."""
    if slower_than_both(target, loader, real) and (
            sync_share is None or sync_share >= FORCED_SYNC_EVIDENCE):
        return Verdict(
            FORCED_SYNC,
            f"real-data steps ({ms(real.value)}) are {100 * excess:.0f}% slower "
            f"than the slower of compute ({ms(target.value)}) and loading "
            f"({ms(loader.value)}): the host waits for the device somewhere",
            excess,
        )
    if sync_share is None or own_load_share is None or \
            min(sync_share, own_load_share) < SERIAL_SAVING:
        return None
    return Verdict(
        FORCED_SYNC,
        f"in each real-data step ({ms(real.value)}) the training thread loads its batch "
        f"({100 * own_load_share:.0f}% of the step), then waits for the device in a sync "
        f"of your code ({100 * sync_share:.0f}%), one after the other: without the sync "
        "the device would compute while the next batch loads",
        excess,
    )


def _apart_despite_noise(target: Estimate, loader: Estimate, real: Estimate) -> bool:
    """Noise cannot change the verdict: one of T and D lies above the other's whole interval
    by ``INPUT_BOUND_MARGIN`` (input- or compute-bound, wherever in their intervals they
    are), and R's median sits where that verdict puts it, at the slower one's interval within
    ``FORCED_SYNC_MARGIN`` either way (above: R's noise could hide a forced sync its median
    shows; below: steps faster than their slower part contradict T or D). A busy machine
    widens every interval; it must not hide a verdict that no point of them contradicts."""
    margin = 1.0 + INPUT_BOUND_MARGIN
    if loader.low > target.high * margin:
        slower = loader
    elif target.low > loader.high * margin:
        slower = target
    else:
        return False
    band = 1.0 + FORCED_SYNC_MARGIN
    return slower.low / band <= real.value <= slower.high * band


def _loader_or_compute(target: Estimate, loader: Estimate, real: Estimate,
                       baseline: Estimate | None, excess: float,
                       real_baseline: Estimate | None = None) -> Verdict:
    """No forced sync and usable numbers: input-bound (now, or before tuning),
    compute-bound, or too close to call."""
    if _clearly_slower(loader, target):
        return Verdict(
            INPUT_BOUND,
            f"the loader needs {ms(loader.value)} per batch, more than the "
            f"{ms(target.value)} a step of compute takes; real-data steps take "
            f"{ms(real.value)}",
            excess,
        )
    if loader.value <= target.value * (1.0 + INPUT_BOUND_MARGIN):
        if baseline is not None and baseline.usable and _clearly_slower(baseline, target):
            return Verdict(
                INPUT_BOUND,
                f"input-bound as loaded at first ({ms(baseline.value)} per batch "
                f"against {ms(target.value)} of compute"
                + (f"; real-data steps took {ms(real_baseline.value)}"
                   if real_baseline is not None and real_baseline.usable else "")
                + f"); the chosen setting gives {ms(loader.value)} and real-data steps "
                f"then take {ms(real.value)}",
                excess,
                fixed_by_tuning=True,
            )
        return Verdict(
            COMPUTE_BOUND,
            f"compute ({ms(target.value)}/step) is the slower part; the loader "
            f"gives a batch in {ms(loader.value)} and real-data steps take "
            f"{ms(real.value)}",
            excess,
        )
    return Verdict(
        INCONCLUSIVE,
        f"the loader ({ms(loader.value)}) and compute ({ms(target.value)}) "
        "are too close to tell which bounds the run; run more batches and steps",
        excess,
    )
