"""The CPU other processes use while compare measures a phase, read at its boundaries.

The busy CPU time of the cores this process may run on (``psutil.cpu_times()``: every
state but idle and iowait; guest time is already counted in user time on Linux, as psutil's
own ``cpu_percent`` has it), read per core where the process's CPU affinity leaves it fewer
cores than the machine has (a job kept to some cores by ``taskset`` or a cpuset does not
compete with the programs on the others), less the CPU of this process and its children
(Grain workers: live ones recursively, and the children already reaped, whose times the
kernel adds to ours), over the phase's wall time. Read once at the start and once at the
end of a phase, never inside a timed loop: a few /proc reads, no device sync, nothing per
step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Callable, Iterator, Protocol, Sequence

import psutil

from pipecheck.host_cpus import usable_cpu_ids
from pipecheck.records.machine_load import MachineLoad, PhaseLoad

NOT_BUSY_FIELDS = ("idle", "iowait", "guest", "guest_nice")
"""The system-wide CPU time fields that are not busy time of their own (idle, waiting on
I/O; guest time is counted in user time too)."""


@dataclasses.dataclass(frozen=True)
class CpuReading:
    """One reading: the machine's busy CPU seconds and our own (with our children)."""

    busy_s: float
    own_s: float


class CpuReader(Protocol):
    def __call__(self) -> CpuReading: ...


class CpuTimes(Protocol):
    """A ``psutil.cpu_times()`` result: a named tuple of seconds, its fields by platform."""

    def _asdict(self) -> dict[str, float]: ...


def busy_seconds(times: CpuTimes) -> float:
    """The busy CPU seconds of a ``psutil.cpu_times()`` result (any platform's fields)."""
    fields = times._asdict()
    return sum(v for k, v in fields.items() if k not in NOT_BUSY_FIELDS)


def own_seconds(proc: psutil.Process) -> float:
    """CPU seconds of ``proc``, its children already reaped, and its live children."""
    t = proc.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in proc.children(recursive=True):
        try:
            c = child.cpu_times()
        except psutil.Error:  # exited between the listing and the read
            continue
        total += c.user + c.system
    return float(total)


def busy_seconds_of(per_cpu: Sequence[CpuTimes], cpus: frozenset[int] | None) -> float | None:
    """The busy CPU seconds of ``cpus`` among the per-core times ``per_cpu`` (indexed by
    CPU number), or None when ``cpus`` is every core or names one the list lacks."""
    if cpus is None or len(cpus) >= len(per_cpu) or max(cpus) >= len(per_cpu):
        return None
    return sum(busy_seconds(per_cpu[i]) for i in cpus)


def cores_of(cpus: frozenset[int] | None, per_cpu_count: int,
             cpu_count: int) -> frozenset[int] | None:
    """The CPUs whose busy time is read: ``cpus`` (this process's), when fewer than the
    machine's ``cpu_count`` and psutil's ``per_cpu_count`` per-core times can be matched to
    them (every CPU online); None: the whole machine."""
    if cpus is None or per_cpu_count != cpu_count or len(cpus) >= cpu_count or \
            max(cpus) >= cpu_count:
        return None
    return cpus


def cores_counted(per_cpu: Sequence[CpuTimes] | None = None) -> frozenset[int] | None:
    """The CPUs whose busy time is read (``cores_of``), now, matched against the per-core
    times ``per_cpu`` (read here when not given)."""
    if per_cpu is None:
        per_cpu = psutil.cpu_times(percpu=True)
    return cores_of(usable_cpu_ids(), len(per_cpu), psutil.cpu_count() or 0)


def busy_seconds_here() -> float:
    """The busy CPU seconds of the cores counted (``cores_counted``), now: the per-core
    times read once."""
    per_cpu = psutil.cpu_times(percpu=True)
    on_ours = busy_seconds_of(per_cpu, cores_counted(per_cpu))
    return on_ours if on_ours is not None else busy_seconds(psutil.cpu_times())


def read_cpu() -> CpuReading:
    """The busy CPU seconds of this process's cores and its own (with its children), now."""
    return CpuReading(busy_seconds_here(), own_seconds(psutil.Process()))


def host_cores() -> int:
    """The cores the busy CPU time counts (``cores_counted``)."""
    cpus = cores_counted()
    return len(cpus) if cpus is not None else (psutil.cpu_count() or 1)


class PhaseMeter:
    """``start()`` at a phase's start, ``stop()`` at its end: the phase's ``PhaseLoad``."""

    def __init__(self, reader: CpuReader = read_cpu,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.reader = reader
        self.clock = clock
        self._start: tuple[float, CpuReading] | None = None

    def start(self) -> None:
        self._start = (self.clock(), self.reader())

    def stop(self) -> PhaseLoad:
        if self._start is None:
            raise RuntimeError("the phase was never started")
        t0, r0 = self._start
        r1, t1 = self.reader(), self.clock()
        self._start = None
        other = (r1.busy_s - r0.busy_s) - (r1.own_s - r0.own_s)
        # a child reaped by a grandparent we are not: its CPU leaves our count; never below 0
        return PhaseLoad(wall_s=t1 - t0, other_cpu_s=max(0.0, other))


class PhaseLoads:
    """The other processes' load over each of compare's phases, by name (the fields of
    ``MachineLoad``): ``with loads.phase("real"): ...`` around a phase's work."""

    def __init__(self, reader: CpuReader = read_cpu,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.reader = reader
        self.clock = clock
        self.loads: dict[str, PhaseLoad] = {}

    @contextlib.contextmanager
    def phase(self, name: str, measured: bool = True) -> Iterator[None]:
        """Read the load around the block; not at all when ``measured`` is False (the phase
        is read from a file)."""
        if not measured:
            yield
            return
        meter = PhaseMeter(self.reader, self.clock)
        meter.start()
        yield
        self.loads[name] = meter.stop()

    def given(self, name: str, phase: PhaseLoad | None) -> None:
        """A phase read from a file, with the load its own run recorded (if any)."""
        if phase is not None:
            self.loads[name] = phase

    def record(self, cores: int) -> MachineLoad | None:
        """The phases read, or None when none was measured here."""
        return MachineLoad(cores, **self.loads) if self.loads else None
