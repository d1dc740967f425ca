"""Did the machine get busier with other programs while the real-data run was timed? Pure.

compare measures T, D and R one after another. On a shared machine another program can
start using the CPU during R and not during T or D: R then comes out slower than both for a
reason that is neither the pipeline nor a sync. The load of other processes during each
phase (``records.machine_load``, read by ``measure.machine_load``) tells the two apart: R
is compared with the phase of the slower of T and D, the one R's excess is measured
against.
"""

from __future__ import annotations

import dataclasses

from pipecheck.records.machine_load import MachineLoad, PhaseLoad

BUSIER_MIN_CORES = 0.25
"""Other processes must use at least a quarter of a core more during R: an eighth of a
2-core host, the least that visibly slows compute spread over every core; the daemons of a
quiet machine move a phase's reading by a few hundredths of a core."""

BUSIER_SHARE_OF_HOST = 0.10
"""...and at least 10% of the host's cores more: compute spread over N cores loses about the
share others take, and 10% is half the forced-sync margin (20%), a good part of an excess
that large (on a 64-core host, a quarter of a core more explains nothing)."""

MIN_PHASE_WALL_S = 0.5
"""A phase shorter than half a second says nothing of the machine's load: the kernel counts
CPU time in ticks of 10 ms per core, so a phase of a few milliseconds reads anything from 0
to several cores (3.6 of 2 cores seen); over 0.5 s the error is under 0.05 of a core, far
below ``BUSIER_MIN_CORES``."""


def _long_enough(phase: PhaseLoad | None) -> PhaseLoad | None:
    return phase if phase is not None and phase.wall_s >= MIN_PHASE_WALL_S else None


@dataclasses.dataclass(frozen=True)
class BusierMachine:
    """Other processes' load during R and during the phase R was measured against."""

    real_cores: float
    bound_cores: float
    bound_phase: str
    """What was timed in that phase: "compute" (T) or "the loader" (D)."""
    cores: int

    def describe(self) -> str:
        return (f"the machine got busier during the real-data run (other processes used "
                f"{self.real_cores:.1f} of {self.cores} cores, against {self.bound_cores:.1f} "
                f"while {self.bound_phase} was timed)")


def busier_margin(cores: int) -> float:
    """How many cores more other processes must use during R to count as busier."""
    return max(BUSIER_MIN_CORES, BUSIER_SHARE_OF_HOST * cores)


def busier_during_real(load: MachineLoad | None, target_s: float,
                       loader_s: float) -> BusierMachine | None:
    """The loads when other processes used clearly more CPU during R than during the phase
    of the slower of T (``target_s``) and D (``loader_s``); None when they did not, or when
    either phase's load is not known (read from a file)."""
    real_phase = _long_enough(load.real) if load is not None else None
    if load is None or real_phase is None:
        return None
    bound, name = ((load.target_all, "compute") if target_s >= loader_s
                   else (load.loader, "the loader"))
    bound_phase = _long_enough(bound)
    if bound_phase is None:
        return None
    real, before = real_phase.other_cores, bound_phase.other_cores
    if real - before < busier_margin(load.cores):
        return None
    return BusierMachine(real, before, name, load.cores)


PHASE_NAMES = (("target", "T"), ("loader", "D"), ("real", "R"),
               ("real_baseline", "R at the first setting"), ("target_again", "T again"))
"""Each phase of ``MachineLoad`` as a report names it."""


def phase_loads(load: MachineLoad) -> list[tuple[str, float]]:
    """The other processes' cores during each measured phase, in the order measured."""
    phases = [(label, _long_enough(getattr(load, name))) for name, label in PHASE_NAMES]
    return [(label, p.other_cores) for label, p in phases if p is not None]


def machine_was_shared(load: MachineLoad | None) -> bool:
    """Other processes kept at least ``busier_margin`` cores busy during some phase: enough
    to slow that phase against the others, so the report shows each phase's load."""
    if load is None:
        return False
    return any(c >= busier_margin(load.cores) for _, c in phase_loads(load))
