"""How busy the machine was with other programs while compare measured each phase.

Read at each phase's boundaries (``measure.machine_load``): the CPU the whole machine was
busy, less the CPU of pipecheck's own process and its children (Grain workers), over the
phase's wall time. A phase measured on a machine that other programs kept busier than the
others is slower for that reason alone (``analysis.machine_load``)."""

from __future__ import annotations

import dataclasses

from pipecheck.records.base import Record


@dataclasses.dataclass(frozen=True)
class PhaseLoad(Record):
    """One phase: its wall time and the CPU other processes used during it."""

    wall_s: float
    other_cpu_s: float
    """CPU seconds of every other process on the machine during the phase (system-wide busy
    time less pipecheck's own process and its children)."""

    @property
    def other_cores(self) -> float:
        """The cores other processes kept busy on average during the phase."""
        return max(0.0, self.other_cpu_s) / self.wall_s if self.wall_s > 0 else 0.0

    def __add__(self, other: PhaseLoad) -> PhaseLoad:
        return PhaseLoad(self.wall_s + other.wall_s, self.other_cpu_s + other.other_cpu_s)


@dataclasses.dataclass(frozen=True)
class MachineLoad(Record):
    """The other processes' load during each of compare's measured phases (None: the phase
    was read from a file, or not run)."""

    cores: int
    """The host's cores (every core the system-wide CPU times count)."""
    target: PhaseLoad | None = None
    """T, compute alone, before the loader search."""
    loader: PhaseLoad | None = None
    """D, the loader search (every setting tried)."""
    real: PhaseLoad | None = None
    """R, the real-data run."""
    target_again: PhaseLoad | None = None
    """T again, after the real-data run."""
    real_baseline: PhaseLoad | None = None
    """R at the first setting tried (``--measure-gain``), after R at the chosen one."""

    @property
    def target_all(self) -> PhaseLoad | None:
        """Both T phases together (T's samples are pooled from both)."""
        parts = [p for p in (self.target, self.target_again) if p is not None]
        if not parts:
            return None
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        return total
