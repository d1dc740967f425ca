"""The resource window over timed batches: opened at a batch boundary past the batches
buffered at start-up, counting exactly the batches inside it. Simulated time and CPU."""

from __future__ import annotations

import pytest

from pipecheck.analysis.loader.loader_limits import MAIN_PROCESS_BOUND, limit_of, main_share
from pipecheck.analysis.steady_state import loader_estimate, steady_batch_start
from pipecheck.measure.dataloader import time_batches
from pipecheck.measure.resources import ResourceWindow
from pipecheck.records.common import Distribution
from pipecheck.records.dataloader import LoaderSetting, Resources
from pipecheck.records.grain_settings import GrainSettings

CONSUME_S = 0.020
"""CPU the training process spends on every batch (a consumer_ms=20 transform)."""


class Machine:
    """Simulated wall clock and the training process's CPU counter."""

    def __init__(self) -> None:
        self.now = 0.0
        self.main_cpu = 0.0

    def clock(self) -> float:
        return self.now

    def idle(self, s: float) -> None:
        self.now += s

    def compute(self, s: float) -> None:
        self.now += s
        self.main_cpu += s


class FakeProbe:
    """ResourceProbe's contract, reading the simulated machine."""

    def __init__(self, machine: Machine) -> None:
        self.m = machine
        self.started_at: float | None = None
        self.closed = False

    def start(self) -> None:
        self.started_at = self.m.now
        self.cpu0 = self.m.main_cpu

    def stop(self, batches: int) -> Resources:
        assert self.started_at is not None
        return Resources(batches=batches, wall_s=self.m.now - self.started_at,
                         main_cpu_s=self.m.main_cpu - self.cpu0, worker_cpu_s=0.1,
                         workers_seen=2, main_rss_mb=300.0, worker_rss_mb=200.0,
                         workers_rss_mb=400.0)

    def close(self) -> None:
        self.closed = True


def consumer_bound_pipeline(m: Machine, n: int, second_worker_late_s: float):
    """2 workers: the first batch after 5 s of start-up; the second worker is still starting
    when the training process asks for the next batch (it waits, idle); after that every
    batch costs the training process CONSUME_S of CPU and nothing else waits."""

    def batches():
        m.idle(5.0)
        m.compute(CONSUME_S)
        yield 0
        m.idle(second_worker_late_s)
        for i in range(1, n + 1):
            m.compute(CONSUME_S)
            yield i

    return batches


def measured(window_at: int, n: int = 20) -> LoaderSetting:
    m = Machine()
    window = ResourceWindow(FakeProbe(m), window_at)
    timing = time_batches(consumer_bound_pipeline(m, n, 0.3), n, clock=m.clock,
                          window_at=window.start_after, on_window=window.open)
    usage = window.close(n)
    return LoaderSetting(settings=GrainSettings(workers=2, threads=1),
                         first_batch_s=timing.first_batch_s,
                         batch_time=Distribution.of(timing.samples), batches_per_s=0.0,
                         examples_per_s=0.0, resources=usage,
                         loader_time=loader_estimate(timing.samples, 2, 2))


def test_a_window_past_the_start_up_batches_reads_the_consumer_share_right():
    start = steady_batch_start(20, workers=2, per_worker_buffer=2, read_prefetch=2)
    assert start == 8
    s = measured(window_at=start)
    assert s.resources.batches == 12  # exactly the batches consumed inside the window
    assert s.resources.wall_s == pytest.approx(12 * CONSUME_S)
    assert main_share(s) == pytest.approx(1.0)
    assert limit_of(s, cores=2) == MAIN_PROCESS_BOUND


def test_a_window_opened_at_the_first_batch_undercounts_it():
    # the same run, the window opened right after the first batch: the idle wait for the
    # late worker is in it, and 20 batches do not dilute it
    s = measured(window_at=0)
    assert s.resources.batches == 20
    assert main_share(s) == pytest.approx(20 * CONSUME_S / (0.3 + 20 * CONSUME_S))
    assert main_share(s) < 0.6
    assert limit_of(s, cores=2) != MAIN_PROCESS_BOUND


def test_the_window_opens_outside_the_timed_intervals():
    m = Machine()
    opened_at = []

    def open_window() -> None:
        opened_at.append(m.now)
        m.idle(0.5)  # a slow probe start is in no batch's time

    timing = time_batches(consumer_bound_pipeline(m, 6, 0.0), 6, clock=m.clock,
                          window_at=3, on_window=open_window)
    assert opened_at == [pytest.approx(5.0 + 4 * CONSUME_S)]
    assert timing.samples == pytest.approx([CONSUME_S] * 6)


def test_window_bounds_and_abandon():
    m = Machine()
    with pytest.raises(ValueError, match="window_at must be in 0..5, got 6"):
        time_batches(consumer_bound_pipeline(m, 6, 0.0), 6, clock=m.clock, window_at=6)
    probe = FakeProbe(m)
    window = ResourceWindow(probe, 2)
    window.abandon()  # never opened: nothing to stop
    assert not probe.closed
    with pytest.raises(RuntimeError, match="never opened"):
        window.close(6)
    window.open()
    window.abandon()
    assert probe.closed
