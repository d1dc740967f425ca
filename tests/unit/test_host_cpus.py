"""The CPUs this process may run on: its affinity, where the platform has one."""

import os
import subprocess
import sys

import pytest

from pipecheck.host_cpus import usable_cores, usable_cpu_ids


def test_the_cores_are_the_affinity():
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        assert usable_cpu_ids() == frozenset(os.sched_getaffinity(0))
        assert usable_cores() == len(os.sched_getaffinity(0))


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_a_process_kept_to_one_cpu_counts_one():
    """A child started under an affinity of one CPU (as taskset or a cpuset starts it)
    counts that CPU alone, whatever the machine has."""
    cpu = min(os.sched_getaffinity(0))
    code = (f"import os; os.sched_setaffinity(0, {{{cpu}}}); "
            "from pipecheck.host_cpus import usable_cores, usable_cpu_ids; "
            "print(usable_cores(), sorted(usable_cpu_ids()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split(maxsplit=1)
    assert out == ["1", f"[{cpu}]\n"]
