"""The CPUs this process may run on: its CPU affinity (taskset, a cpuset, a scheduler's
slice of the machine), else the machine's count. The loader search, its findings, the
forked readers and the machine-load check all count these, not the machine's."""

from __future__ import annotations

import os


def usable_cpu_ids() -> frozenset[int] | None:
    """The CPU numbers this process may run on, or None where the platform has no CPU
    affinity."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return None


def usable_cores() -> int:
    """How many CPUs this process may run on: its affinity, else the machine's count."""
    ids = usable_cpu_ids()
    return len(ids) if ids is not None else (os.cpu_count() or 1)
