"""The joint search over Grain's four knobs against simulated pipelines (exact, no timing)."""

import functools
import math

import pytest

from pipecheck.analysis.loader.tuner import (
    MIN_GAIN,
    Trial,
    choose,
    implausible,
    ram_worker_ceiling,
    run_time,
    tune_grain,
)
from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.records.grain_settings import GrainSettings

from .grain_sim import FirstReadingInflated, NoisyReadings, SimPipeline, grid

PIPELINES = {
    "latency-bound": (SimPipeline(sleep_s=0.120), 0.030),
    "latency-bound, threads capped": (SimPipeline(sleep_s=0.120, cpu_s=0.004), 0.020),
    "cpu-bound": (SimPipeline(cpu_s=0.040), 0.030),
    "cpu-bound, falling past the cores": (SimPipeline(cpu_s=0.040, contention=0.3), 0.010),
    "main-process-bound": (SimPipeline(sleep_s=0.060, consumer_s=0.025), 0.020),
    "cheap": (SimPipeline(sleep_s=0.002), 0.050),
}


def _grid_choice(sim, target, max_workers=8):
    trials = [sim.trial(s) for s in grid(max_workers)]
    return choose(trials, target), len(trials)


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_joint_search_matches_the_exhaustive_grid_with_a_quarter_of_its_trials(name):
    sim, target = PIPELINES[name]
    (best, best_ok), n_grid = _grid_choice(SimPipeline(**_fields(sim)), target)
    out = tune_grain(sim.trial, target, max_workers=8, cores=2)
    assert len(out.trials) <= 0.25 * n_grid, [t.settings for t in out.trials]
    assert out.meets_target == best_ok
    if best_ok:  # the cheapest setting meeting the goal: no more workers than the grid's
        assert out.chosen.workers <= best.workers
        assert out.chosen.batch_s <= target * LOADER_HEADROOM
    else:  # the goal is out of reach: as fast as the grid's best, within 5%
        assert out.chosen.batch_s <= best.batch_s * 1.05


def _fields(sim):
    return {k: getattr(sim, k) for k in ("sleep_s", "cpu_s", "consumer_s", "cores",
                                         "contention", "start_s", "start_per_worker_s")}


def test_threads_let_a_latency_bound_pipeline_run_without_workers():
    sim = SimPipeline(sleep_s=0.120)
    out = tune_grain(sim.trial, 0.030, max_workers=8, cores=2)
    # 8 threads in the training process give 15 ms <= 27 ms; 4 give 30 ms
    assert out.chosen.settings == GrainSettings(0, 2, 8, 8)
    assert out.meets_target
    assert "read threads" in out.reason


def test_gil_bound_pipeline_tries_one_thread_step_only():
    sim = SimPipeline(cpu_s=0.040)
    out = tune_grain(sim.trial, 0.030, max_workers=8, cores=2)
    assert out.chosen.workers == 2 and out.chosen.threads == 1
    assert [s.threads for s in sim.calls].count(2) == 1


def test_throughput_falling_past_the_cores_stops_and_takes_the_best_not_the_largest():
    sim = SimPipeline(cpu_s=0.040, contention=0.3)
    out = tune_grain(sim.trial, 0.010, max_workers=8, cores=2)
    assert not out.meets_target
    assert out.chosen.workers == 2
    assert max(t.workers for t in out.trials) > 2  # it did look past the cores
    assert f"gained less than {100 * MIN_GAIN:.0f}%" in out.reason and out.stop == "no-gain"


def test_main_process_bound_pipeline_does_not_pile_up_workers():
    sim = SimPipeline(sleep_s=0.060, consumer_s=0.025)
    out = tune_grain(sim.trial, 0.020, max_workers=8, cores=2)
    assert not out.meets_target
    assert out.chosen.batch_s == pytest.approx(0.025)
    # the cheapest setting at the consumer's limit: read threads instead of workers, and
    # one worker so the consumer's 25 ms overlaps the reads (0 workers: 60/16 + 25 ms)
    assert out.chosen.workers == 1 and out.chosen.threads > 1


def test_ram_budget_caps_the_worker_search_before_it_is_exceeded():
    sim = SimPipeline(sleep_s=0.400, worker_mb=500.0, main_mb=1000.0)
    out = tune_grain(sim.trial, 0.030, max_workers=16, cores=2, ram_budget_mb=3000.0,
                     thread_ladder=(1,))
    assert max(t.workers for t in out.trials) == 4  # (3000 - 1000) / 500
    assert "RAM budget of 3000 MB allows at most 4 workers" in out.reason
    assert out.stop == "ram-ceiling"


def test_ram_worker_ceiling():
    assert ram_worker_ceiling(3000, 1000, 500) == 4
    assert ram_worker_ceiling(900, 1000, 500) == 0
    assert ram_worker_ceiling(3000, math.nan, 500) == 6
    assert ram_worker_ceiling(3000, 1000, math.nan) is None


def test_a_short_run_does_not_pay_for_the_start_up_of_more_workers():
    # 0 workers: 50 ms/batch, starts at once; 4 workers: 12 ms/batch after 2.4 s of start-up
    trials = [Trial(GrainSettings(0), 0.050, first_batch_s=0.05),
              Trial(GrainSettings(4), 0.012, first_batch_s=2.45)]
    target = 0.020
    assert run_time(trials[0], target, 50) == pytest.approx(0.05 + 50 * 0.050)
    short, ok = choose(trials, target, run_steps=50)   # 2.55 s vs 3.45 s
    assert short.workers == 0 and not ok
    long, ok = choose(trials, target, run_steps=5000)  # 250 s vs 102 s
    assert long.workers == 4 and ok
    assert choose(trials, target)[0].workers == 4      # no run length: start-up not weighed


def test_start_up_note_names_the_setting_passed_over():
    sim = SimPipeline(sleep_s=0.120, start_per_worker_s=1.5)
    out = tune_grain(sim.trial, 0.030, max_workers=8, cores=2, thread_ladder=(1,),
                     run_steps=20)
    assert out.chosen.workers == 0
    assert "first batch takes" in out.reason and "run of 20 steps" in out.reason


def test_buffers_shrink_when_the_goal_is_still_met():
    sim = SimPipeline(cpu_s=0.040)
    out = tune_grain(sim.trial, 0.030, max_workers=8, cores=2)
    # a one-slot buffer costs 5% here: 21 ms still meets 27 ms
    assert out.chosen.per_worker_buffer == 1 and out.chosen.prefetch == 1


def test_cheapest_order_is_workers_then_buffers_then_threads():
    a = GrainSettings(1, 4, 1, 1)
    b = GrainSettings(2, 1, 1, 1)
    c = GrainSettings(1, 1, 16, 16)
    assert sorted([b, a, c], key=GrainSettings.cost) == [c, a, b]


def test_the_outcome_says_it_chose_the_cheapest_setting():
    out = tune_grain(SimPipeline(cpu_s=0.040).trial, 0.030, max_workers=8, cores=2)
    assert out.reason.endswith("chose the cheapest setting that meets the target (fewest "
                               "workers, then the smallest buffers): workers=2, buffer=1, "
                               "threads=1, prefetch=1")


def test_read_prefetch_counts_as_buffered_at_start():
    from pipecheck.analysis.steady_state import buffered_at_start, steady_batch_samples

    assert buffered_at_start(0, 2) == 0 and buffered_at_start(3, 2) == 6
    assert buffered_at_start(0, 2, read_prefetch=16) == 16  # the training process reads
    assert buffered_at_start(2, 1, read_prefetch=4) == 2 + 8
    samples = [0.0] * 16 + [0.04] * 32  # 16 threads prefetched while the first was awaited
    assert steady_batch_samples(samples, 0, 2, read_prefetch=16) == tuple([0.04] * 32)


# --- one bad reading in ten (another program took the cores while a setting was measured)
SEEDED_RUNS = 100


@functools.cache
def _grid_choice_of(name: str):
    sim, target = PIPELINES[name]
    return _grid_choice(SimPipeline(**_fields(sim)), target)


def _lands_near_the_grid_best(name: str, seed: int, remeasure: bool) -> bool:
    """One seeded search with one reading in ten inflated 3x: within 5% of the grid's
    best (by the pipeline's true D) in at most a quarter of the grid's trials, readings
    measured again included."""
    sim, target = PIPELINES[name]
    (best, best_ok), n_grid = _grid_choice_of(name)
    truth = SimPipeline(**_fields(sim))
    noisy = NoisyReadings(SimPipeline(**_fields(sim)), seed, bad_share=0.1, factor=3.0)
    out = tune_grain(noisy, target, max_workers=8, cores=2, remeasure=remeasure)
    d = truth.batch_s(out.chosen.settings)
    if noisy.calls > 0.25 * n_grid:
        return False
    if best_ok:  # as cheap as the grid's choice and truly meeting the goal
        return d <= target * LOADER_HEADROOM and out.chosen.workers <= best.workers
    return d <= best.batch_s * 1.05


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_one_bad_reading_in_ten_does_not_mislead_the_search(name):
    landed = sum(_lands_near_the_grid_best(name, seed, remeasure=True)
                 for seed in range(SEEDED_RUNS))
    assert landed >= 95


@pytest.mark.parametrize("name", ["latency-bound", "latency-bound, threads capped", "cpu-bound",
                                  "cpu-bound, falling past the cores"])
def test_without_measuring_again_one_bad_reading_misleads_the_search(name):
    landed = sum(_lands_near_the_grid_best(name, seed, remeasure=False)
                 for seed in range(SEEDED_RUNS))
    assert landed < 95


def test_a_bad_reading_that_would_end_the_worker_search_is_measured_again():
    sim = SimPipeline(sleep_s=0.120)
    bad = GrainSettings(5, threads=1)
    measure = FirstReadingInflated(sim, bad)
    out = tune_grain(measure, 0.030, max_workers=8, cores=2, thread_ladder=(1,))
    # 0, 1 read 120 ms; 5 workers predicted to meet 27 ms read 72 ms (33% of perfect
    # scaling: "stopped scaling"), so 5 is read again (24 ms) before the search ends
    assert sim.calls[:4] == [GrainSettings(0, threads=1), GrainSettings(1, threads=1), bad, bad]
    assert out.chosen.workers == 5 and out.meets_target
    assert [t.batch_s for t in out.remeasured] == [pytest.approx(0.072)]
    assert "measured again" in out.reason and "72.00 ms, kept 24.00 ms" in out.reason
    without = tune_grain(FirstReadingInflated(SimPipeline(sleep_s=0.120), bad), 0.030,
                         max_workers=8, cores=2, thread_ladder=(1,), remeasure=False)
    assert without.stop == "stopped-scaling" and not without.meets_target


def test_a_base_reading_too_slow_for_its_neighbours_is_measured_again():
    # 0 workers read 3x slow once: 1 worker reads faster than perfect scaling allows
    # (120 ms against 360 ms), so 0 workers are read again and meet the goal alone
    sim = SimPipeline(sleep_s=0.010)
    measure = FirstReadingInflated(sim, GrainSettings(0, threads=1))
    out = tune_grain(measure, 0.020, max_workers=8, cores=2)
    assert out.chosen.settings == GrainSettings(0, threads=1) and out.meets_target
    assert out.remeasured[0].settings == GrainSettings(0, threads=1)
    plain = tune_grain(FirstReadingInflated(sim, GrainSettings(0, threads=1)), 0.020,
                       max_workers=8, cores=2, remeasure=False)
    assert plain.chosen.settings != GrainSettings(0, threads=1)  # a costlier one


def test_implausible_names_the_reading_out_of_line():
    def trial(workers, batch_s):
        return Trial.of(GrainSettings(workers, threads=1), batch_s)

    one = trial(1, 0.100)
    assert implausible(trial(2, 0.060), one) is None        # 1.7x faster with 2x the workers
    assert implausible(trial(2, 0.130), one) == trial(2, 0.130)  # slower with more
    assert implausible(trial(2, 0.030), one) == one          # faster than perfect scaling
