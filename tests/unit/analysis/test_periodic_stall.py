"""The periodic-stall detector on step-time sequences: periods found and matched, silence on
seeded noise and one-off stalls."""

from __future__ import annotations

import numpy as np
import pytest

from pipecheck.analysis import periodic_stall as ps
from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable
from tests.unit.step_tables import table


def _run(n: int, period: int, phase: int = 0, base: float = 0.010, stall: float = 0.030,
         seed: int = 0, jitter: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    numbers = np.arange(1, n + 1)
    t = base * rng.lognormal(0.0, jitter, n)
    t[numbers % period == phase] += stall
    return numbers, t


@pytest.mark.parametrize("period", [2, 4, 8, 32])
def test_finds_the_period_and_the_seconds_lost(period: int) -> None:
    numbers, t = _run(12 * period, period, phase=period - 1)
    found = ps.find_periodic_stall(numbers, t)
    assert found is not None
    assert found.period == period and found.phase == period - 1
    assert len(found.stall_steps) == 12
    assert found.lost_s == pytest.approx(12 * 0.030, rel=0.15)
    # 10 ms of work plus 30 ms stall per period: the loader needs (P*10 + 30)/(P*10)
    assert found.keep_ahead_factor == pytest.approx((period * 10 + 30) / (period * 10),
                                                    rel=0.15)


def test_a_stall_split_over_two_steps_of_three_is_one_period() -> None:
    # 3 workers out of phase, as measured: two waits of ~35 ms a round, then a 5 ms step
    rng = np.random.default_rng(7)
    numbers = np.arange(1, 46)
    t = np.where(numbers % 3 == 0, 0.005, 0.038) * rng.lognormal(0.0, 0.05, numbers.size)
    found = ps.find_periodic_stall(numbers, t)
    assert found is not None and (found.period, found.width) == (3, 2)
    assert len(found.stall_steps) == 30 and found.positions == 15
    assert found.lost_s == pytest.approx(30 * 0.033, rel=0.1)


def test_a_period_with_a_few_missed_stalls_is_still_found() -> None:
    numbers, t = _run(320, 32, phase=0, seed=3)
    t[numbers == 64] = 0.010  # one refill was on time
    found = ps.find_periodic_stall(numbers, t)
    assert found is not None and found.period == 32
    assert len(found.stall_steps) == 9 and found.positions == 10


@pytest.mark.parametrize("seed", range(5))
def test_stalls_that_wander_by_a_step_are_one_period(seed: int) -> None:
    rng = np.random.default_rng(seed)
    numbers = np.arange(1, 330)
    t = 0.010 * rng.lognormal(0.0, 0.05, numbers.size)
    for start in range(16, 321, 16):  # each round late at step 16k or 16k + 1
        t[numbers == start + int(rng.integers(0, 2))] += 0.050
    found = ps.find_periodic_stall(numbers, t)
    assert found is not None and (found.period, found.phase, found.width) == (16, 0, 2)
    assert len(found.stall_steps) == 20
    [f] = ps.periodic_stall_findings(table([StepRecord(0, 1.0), *(
        StepRecord(int(i), float(x)) for i, x in zip(numbers, t, strict=True))]))
    assert "on two adjacent steps" in f.message


@pytest.mark.parametrize("seed", range(200))
def test_silent_on_seeded_noise(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 400))
    kind = seed % 3
    if kind == 0:  # lognormal, a wide spread
        t = 0.010 * rng.lognormal(0.0, 0.4, n)
    elif kind == 1:  # heavy tail: Pareto
        t = 0.010 * (1 + rng.pareto(2.0, n))
    else:  # a bursty loader with random bursts: 15% of steps 3x
        t = 0.010 * np.where(rng.random(n) < 0.15, 3.0, 1.0) * rng.lognormal(0, 0.05, n)
    assert ps.find_periodic_stall(np.arange(1, n + 1), t) is None


@pytest.mark.parametrize("stalls", [[50], [50, 150], [7, 93]])
def test_silent_on_one_off_stalls(stalls: list[int]) -> None:
    numbers, t = _run(200, 1000)  # no period inside the run
    for s in stalls:
        t[numbers == s] = 2.0
    assert ps.find_periodic_stall(numbers, t) is None


def test_a_negligible_period_is_not_a_finding() -> None:
    numbers, t = _run(400, 10, stall=0.0, jitter=0.01)
    t[numbers % 10 == 0] = 0.016  # 1.6x, every 10 steps: real, but 6 ms in 100 ms = 6%
    assert ps.find_periodic_stall(numbers, t) is not None
    t[numbers % 10 == 0] = 0.0151  # still slow, and cheap: a 0.5% share
    old = ps.MIN_LOST_SHARE
    try:
        ps.MIN_LOST_SHARE = 0.06
        assert ps.find_periodic_stall(numbers, t) is None
    finally:
        ps.MIN_LOST_SHARE = old


def test_hypergeometric_tail_is_exact_on_small_cases() -> None:
    # 3 of 3 draws from 10 holding 3 successes: 1 / C(10, 3)
    got = ps.hypergeom_tail(np.array([3, 1, 0]), 10, 3, np.array([3, 3, 3]))
    assert got[0] == pytest.approx(1 / 120)
    assert got[1] == pytest.approx(1 - (7 * 6 * 5) / (10 * 9 * 8))
    assert got[2] == 1.0
    # 3 of 3 draws from 320 holding 9: C(9, 3) / C(320, 3)
    got = ps.hypergeom_tail(np.array([3, 2]), 320, 9, np.array([3, 10]))
    assert got[0] == pytest.approx(84 / (320 * 319 * 318 / 6))
    from math import comb
    exact = sum(comb(9, x) * comb(311, 10 - x) for x in range(2, 10)) / comb(320, 10)
    assert got[1] == pytest.approx(exact)


def _steps(t: np.ndarray, tags: dict[int, tuple[str, ...]] | None = None
           ) -> StepTable[StepRecord]:
    tags = tags or {}
    return table(StepRecord(i, float(x), tags.get(i, ())) for i, x in enumerate(t))


def test_finding_matches_workers_and_gives_the_worker_count_that_keeps_ahead() -> None:
    _, t = _run(160, 4, phase=0, jitter=0.0)
    steps = _steps(np.concatenate([[1.0], t]))  # step 0: the first step, left out
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(workers=4, per_worker_buffer=2))
    assert f.kind == "periodic-stall" and f.numbers["period"] == 4
    assert "the loader's 4 workers" in f.message
    # 4 x 10 ms + 30 ms = 70 ms for 4 batches: 1.75x, so 7 workers
    assert "from 4 to 7" in (f.fix or "")


def test_finding_matches_the_buffer_the_prefetch_and_the_epoch() -> None:
    _, t = _run(320, 8, phase=0)
    steps = _steps(np.concatenate([[1.0], t]))
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(workers=4, per_worker_buffer=2))
    assert "output buffers (4 workers x 2 batches)" in f.message
    assert f.location == "per_worker_buffer"
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(prefetch_batches=8))
    assert f.location == "prefetch"
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(epoch_steps=8))
    assert f.location == "epoch" and "repeat" in (f.fix or "")
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(epoch_starts=tuple(range(8, 321, 8))))
    assert f.location == "epoch"
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(workers=3, per_worker_buffer=2))
    assert f.location is None and "nothing pipecheck knows" in f.message
    # no workers, 16 read threads, 2 elements a batch: 8 batches finish together
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(threads=16, elements_per_batch=2))
    assert f.location == "threads" and "from 16 to" in (f.fix or "")
    [f] = ps.periodic_stall_findings(steps, ps.LoaderShape(workers=1, threads=16,
                                                           elements_per_batch=2))
    assert f.location is None  # in a worker, the threads' rounds are not the steps'
    assert ps.shape_of_config({"num_threads": 8, "batch_size": 4, "dataset_size": 40}) == \
        ps.LoaderShape(epoch_steps=10, threads=8, elements_per_batch=4)


def test_finding_matches_checkpoint_tags() -> None:
    _, t = _run(300, 25, phase=0, stall=0.5)
    tags = {i: ("checkpoint",) for i in range(1, 301) if i % 25 == 0}
    [f] = ps.periodic_stall_findings(_steps(np.concatenate([[1.0], t]), tags))
    assert f.location == "checkpoint" and "async" in (f.fix or "")
    assert f.numbers["lost_s"] == pytest.approx(12 * 0.5, rel=0.05)


def test_compile_and_warmup_steps_are_not_looked_at() -> None:
    t = np.full(100, 0.010)
    tags = {i: ("compile",) for i in range(10, 100, 10)}
    t[10::10] = 0.5
    assert ps.periodic_stall_findings(_steps(t, tags)) == []
    assert ps.periodic_stall_findings(_steps(t)) != []


def test_long_draws_take_a_bound_never_below_the_exact_tail() -> None:
    from math import comb
    for hits, at_most in ((20, 0.02), (30, 1e-6), (60, 1e-30)):
        exact = sum(comb(100, x) * comb(900, 100 - x) for x in range(hits, 101)) / comb(1000, 100)
        [bound] = ps.hypergeom_tail(np.array([hits]), 1000, 100, np.array([100]))
        assert exact <= bound <= at_most


def test_a_long_run_with_gaps_finds_its_period() -> None:
    numbers, t = _run(80_000, 1000, phase=7, stall=0.5, seed=1, jitter=0.2)
    keep = np.ones(numbers.size, bool)
    keep[50_000:50_100] = False  # steps missing from the record (a gap)
    found = ps.find_periodic_stall(numbers[keep], t[keep])
    assert found is not None and (found.period, found.phase) == (1000, 7)
    # searched over the last 50,000 steps (29,901 on): 30,007 .. 79,007 but 50,007
    assert found.positions == 49 and len(found.stall_steps) == 49
    assert found.stall_steps[0] == 30_007 and 50_007 not in found.stall_steps


def test_a_busy_machines_jitter_does_not_hide_an_epoch_period() -> None:
    # measured: examples/monitor_loader_dynamics.py's generator run beside a CPU hog (ms);
    # its short steps jitter to 8-10 ms, past 1.5x the typical 5 ms, at random
    ms = [158, 4, 4, 5, 10, 155, 4, 4, 4, 8, 4, 155, 4, 8, 4, 5, 5, 159, 5, 8, 6, 10, 5, 155,
          5, 8, 5, 5, 5, 158, 5, 5, 5, 5, 9, 155, 5, 8, 5, 5, 7, 155, 5, 8, 5, 5, 7, 4]
    [f] = ps.periodic_stall_findings(table(StepRecord(i, x / 1e3) for i, x in enumerate(ms)),
                                     ps.LoaderShape(epoch_steps=6))
    assert f.numbers["period"] == 6 and f.numbers["stalls"] == 7 and f.location == "epoch"
