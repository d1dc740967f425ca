"""What a loader setting costs in CPU and memory, measured without stalling the pipeline.

Read twice per setting, outside every timed interval, at batch boundaries
(``ResourceWindow``): once the batches buffered while the workers started up are consumed
(the steady state the loader time D counts: before it, the training process may sit idle
waiting for a worker that is still starting, or take batches received ahead), and after the
last timed batch; the batches in between are counted exactly. Between the two readings,
nothing touches the loop: CPU times are the kernel's per-process counters
(``psutil.Process.cpu_times``, every thread of the process included), a worker's peak
memory is the kernel's high-water mark (``VmHWM`` in ``/proc/PID/status``), the time
threads were ready to run but waited for a core is the kernel's run-queue delay
(``/proc/PID/task/*/schedstat``: on a machine shared with other programs, CPU-bound
workers wait for cores instead of running), and the training process's peak memory is
sampled by a helper thread every ``RSS_PERIOD_S`` (its own high-water mark would include
earlier settings).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Callable, Iterable, Protocol

import psutil

from pipecheck.records.dataloader import Resources

RSS_PERIOD_S = 0.1
"""The training process's RSS is sampled this often: one /proc read (~20 us) per sample."""

MB = 2**20

RAM_BUDGET_FRACTION = 0.5
"""Default RAM budget for the loader: half of the RAM available when the run starts (the
other half stays for the training process's growth, the model and the rest of the machine)."""


def available_bytes() -> int:
    """Memory available now (free plus reclaimable page cache), bytes: the most the page
    cache can hold of the data files."""
    return int(psutil.virtual_memory().available)


def default_ram_budget_mb() -> float:
    return psutil.virtual_memory().available / MB * RAM_BUDGET_FRACTION


def _cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def peak_rss_mb(pid: int) -> float | None:
    """The kernel's high-water mark of a process's resident memory (Linux), MB."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / MB
    except OSError:
        return None
    return None


def run_queue_wait_s(pid: int) -> float:
    """Seconds a process's threads have waited on a run queue (Linux schedstat; 0 elsewhere)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


class Probe(Protocol):
    """What a resource window needs from a probe (``ResourceProbe``, or a fake in tests)."""

    def start(self) -> None: ...

    def stop(self, batches: int) -> Resources: ...

    def close(self) -> None: ...


class ResourceWindow:
    """A probe's window over timed batches: ``open()`` at the boundary after
    ``start_after`` timed batches, ``close(n_batches)`` after the last; the resources
    count exactly the ``n_batches - start_after`` batches consumed inside it."""

    def __init__(self, probe: Probe, start_after: int) -> None:
        self.probe = probe
        self.start_after = start_after
        self._open = False

    def open(self) -> None:
        self.probe.start()
        self._open = True

    def close(self, n_batches: int) -> Resources:
        if not self._open:
            raise RuntimeError("the resource window was never opened")
        self._open = False
        return self.probe.stop(n_batches - self.start_after)

    def abandon(self) -> None:
        """Stop the probe's sampler if the window is still open (after a failure)."""
        if self._open:
            self.probe.close()
            self._open = False


class ResourceProbe:
    """``start()`` at a batch boundary, ``stop(batches)`` after the last timed batch."""

    def __init__(self, worker_pids: Callable[[], Iterable[int]],
                 clock: Callable[[], float] = time.perf_counter,
                 period_s: float = RSS_PERIOD_S) -> None:
        self.worker_pids = worker_pids
        self.clock = clock
        self.period_s = period_s
        self._main = psutil.Process()  # this process; taken again in start()
        self._workers: dict[int, psutil.Process] = {}
        self._cpu0: dict[int, float] = {}
        self._wait0: dict[int, float] = {}
        self._t0 = 0.0
        self._peak_main = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._peak_main = max(self._peak_main, self._main.memory_info().rss / MB)
            except Exception:  # noqa: BLE001 - a sample is best effort
                pass

    def start(self) -> None:
        self._main = psutil.Process()
        for pid in self.worker_pids():
            try:
                self._workers[pid] = psutil.Process(pid)
            except psutil.Error:
                continue
        self._cpu0 = {0: _cpu_s(self._main)}
        self._wait0 = {0: run_queue_wait_s(self._main.pid)}
        for pid, p in list(self._workers.items()):
            try:
                self._cpu0[pid] = _cpu_s(p)
                self._wait0[pid] = run_queue_wait_s(pid)
            except Exception:  # noqa: BLE001 - a worker that just exited
                self._workers.pop(pid)
        self._peak_main = self._main.memory_info().rss / MB
        self._t0 = self.clock()
        self._thread = threading.Thread(target=self._sample, name="pipecheck-rss", daemon=True)
        self._thread.start()

    def stop(self, batches: int) -> Resources:
        wall = self.clock() - self._t0
        main_cpu = _cpu_s(self._main) - self._cpu0[0]
        main_wait = run_queue_wait_s(self._main.pid) - self._wait0[0]
        worker_cpu = worker_wait = 0.0
        peaks = []
        for pid, p in self._workers.items():
            try:
                worker_cpu += _cpu_s(p) - self._cpu0[pid]
                worker_wait += max(0.0, run_queue_wait_s(pid) - self._wait0[pid])
            except Exception:  # noqa: BLE001 - a worker that exited: its CPU is lost
                pass
            peak = peak_rss_mb(pid)
            if peak is not None:
                peaks.append(peak)
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._peak_main = max(self._peak_main, self._main.memory_info().rss / MB)
        return Resources(
            batches=batches,
            wall_s=wall,
            main_cpu_s=main_cpu,
            worker_cpu_s=worker_cpu,
            workers_seen=len(self._workers),
            main_rss_mb=self._peak_main,
            worker_rss_mb=max(peaks) if peaks else 0.0,
            workers_rss_mb=sum(peaks),
            main_wait_s=max(0.0, main_wait),
            worker_wait_s=worker_wait,
        )

    def close(self) -> None:
        """Stop the sampler (after a failure, when ``stop`` was not reached)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
