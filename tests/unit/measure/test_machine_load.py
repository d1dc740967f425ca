"""The other processes' load over a phase, from fake CPU readings and a fake clock."""

import collections
import os
import subprocess
import sys
import time

import psutil
import pytest

from pipecheck.measure.machine_load import (
    CpuReading,
    PhaseLoads,
    PhaseMeter,
    busy_seconds,
    busy_seconds_of,
    cores_of,
    own_seconds,
    read_cpu,
)
from pipecheck.records.machine_load import MachineLoad, PhaseLoad
from tests.fakes import FakeClock
from tests.handshake import lines_until

Times = collections.namedtuple(
    "Times", "user nice system idle iowait irq softirq steal guest guest_nice")


def test_busy_seconds_leave_out_idle_iowait_and_guest():
    t = Times(user=10, nice=1, system=2, idle=100, iowait=5, irq=0.5, softirq=0.5, steal=1,
              guest=3, guest_nice=1)
    assert busy_seconds(t) == 10 + 1 + 2 + 0.5 + 0.5 + 1


def scripted(readings):
    it = iter(readings)
    return lambda: next(it)


def test_other_processes_are_the_busy_time_less_our_own():
    clock = FakeClock(100.0)
    # 4 s of wall: the machine busy for 7 CPU s, ours (with workers) 5 of them
    reader = scripted([CpuReading(1000.0, 50.0), CpuReading(1007.0, 55.0)])
    meter = PhaseMeter(reader, clock)
    meter.start()
    clock.advance(4.0)
    p = meter.stop()
    assert p == PhaseLoad(wall_s=4.0, other_cpu_s=2.0)
    assert p.other_cores == 0.5


def test_never_below_zero():
    clock = FakeClock()
    meter = PhaseMeter(scripted([CpuReading(0.0, 0.0), CpuReading(1.0, 1.2)]), clock)
    meter.start()
    clock.advance(1.0)
    assert meter.stop().other_cpu_s == 0.0


def test_stop_without_start_fails():
    with pytest.raises(RuntimeError, match="never started"):
        PhaseMeter(read_cpu, FakeClock()).stop()


def test_phases_by_name_and_a_file_phase_left_out():
    clock = FakeClock()
    reader = scripted([CpuReading(0.0, 0.0), CpuReading(2.0, 1.0),
                       CpuReading(2.0, 1.0), CpuReading(12.0, 2.0)])
    loads = PhaseLoads(reader, clock)
    with loads.phase("target", measured=False):
        clock.advance(5.0)  # T read from a file: no reading
    with loads.phase("loader"):
        clock.advance(2.0)
    with loads.phase("real"):
        clock.advance(4.0)
    m = loads.record(cores=2)
    assert m == MachineLoad(2, target=None, loader=PhaseLoad(2.0, 1.0),
                            real=PhaseLoad(4.0, 9.0))
    assert m.real.other_cores == 2.25 and m.target_all is None
    assert PhaseLoads(reader, clock).record(2) is None
    assert MachineLoad.from_dict(m.to_dict()) == m


TICKS = 0.05
"""Five of the kernel's 10 ms CPU-time ticks."""


def _children_s(me):
    """own_seconds less this process's own CPU: what it counts for the children."""
    total = own_seconds(me)
    t = me.cpu_times()
    return total - (t.user + t.system)


def test_own_seconds_count_live_and_reaped_children():
    me = psutil.Process()
    before = _children_s(me)
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt=time.process_time()\n"
                              "while time.process_time()-t<0.3: pass\n"
                              "time.sleep(600)"])  # alive until killed below
    try:
        proc = psutil.Process(child.pid)
        end = time.monotonic() + 120
        while sum(proc.cpu_times()[:2]) < 0.3:  # it spun its 0.3 s (however slowly)
            assert child.poll() is None, "the child ended before spinning 0.3 s"
            assert time.monotonic() < end, "the child did not spin 0.3 s within 120 s"
            time.sleep(0.02)
        # the live child's CPU counts (less a few 10 ms ticks: this process's own time,
        # read a moment apart by own_seconds and by _children_s, advances between them)
        assert _children_s(me) - before >= 0.3 - TICKS
    finally:
        child.kill()
        child.wait()
    assert _children_s(me) - before >= 0.3 - TICKS  # and still once it is reaped


def _busy(user):
    return Times(user=user, nice=0, system=0, idle=50, iowait=0, irq=0, softirq=0, steal=0,
                 guest=0, guest_nice=0)


def test_the_busy_time_of_some_cores_is_theirs_alone():
    per_cpu = [_busy(1.0), _busy(20.0), _busy(300.0), _busy(4000.0)]
    assert busy_seconds_of(per_cpu, frozenset({0, 2})) == 301.0
    # every core, none, or a core the list lacks: the caller reads the machine's total
    assert busy_seconds_of(per_cpu, frozenset({0, 1, 2, 3})) is None
    assert busy_seconds_of(per_cpu, None) is None
    assert busy_seconds_of(per_cpu, frozenset({1, 7})) is None


def test_the_cores_counted_are_ours_only_when_fewer_and_all_online():
    assert cores_of(frozenset({1}), 4, 4) == {1}
    assert cores_of(frozenset({0, 1, 2, 3}), 4, 4) is None   # every core: the machine's
    assert cores_of(frozenset({2}), 3, 4) is None            # a CPU offline: unmatched
    assert cores_of(frozenset({5}), 4, 4) is None            # a number past the list
    assert cores_of(None, 4, 4) is None                      # no affinity on this platform


_PINNED_METER = """
import os, sys, time
import psutil
from pipecheck.measure.machine_load import PhaseMeter, busy_seconds, own_seconds
os.sched_setaffinity(0, {int(sys.argv[1])})
me = psutil.Process()
whole0, own0 = busy_seconds(psutil.cpu_times()), own_seconds(me)
meter = PhaseMeter()
meter.start()
time.sleep(1.0)
load = meter.stop()
whole = busy_seconds(psutil.cpu_times()) - whole0 - (own_seconds(me) - own0)
print(load.other_cpu_s, whole)
"""

_SPINNER = ("import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\n"
            "print('spinning', flush=True)\n"
            "while True: pass")  # until killed, however long the meter takes to start


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two CPUs this process may run on")
def test_a_process_kept_to_one_core_does_not_count_another_cores_work():
    """A real spinner on the other core, no child of the measuring process: the machine's
    busy time less the process's own sees it, the phase load of a process kept to its own
    core does not."""
    mine, other = sorted(os.sched_getaffinity(0))[:2]
    spinner = subprocess.Popen([sys.executable, "-c", _SPINNER, str(other)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert spinner.stdout is not None
        # the meter starts once the spinner spins (a handshake, not a head start)
        lines_until(spinner, spinner.stdout, lambda line: line == "spinning\n",
                    "the spinner spinning on its core", stop=spinner.kill)
        out = subprocess.run([sys.executable, "-c", _PINNED_METER, str(mine)],
                             capture_output=True, text=True, timeout=60, check=True).stdout
    finally:
        spinner.kill()
        spinner.wait()
    other_cpu_s, whole_machine_s = map(float, out.split())
    # the spinner's second on the other core; what is left here is whatever else ran on
    # this core meanwhile
    assert other_cpu_s < whole_machine_s - 0.7, (other_cpu_s, whole_machine_s)
