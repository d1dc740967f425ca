"""The worker search against modelled pipelines (exact, no timing)."""

from pipecheck.analysis.loader.tuner import CPU_BOUND, LATENCY_BOUND, choose, tune


def latency_bound(load_s):
    """A sleeping pipeline: W workers give a batch every load/W seconds."""
    def measure(w, threads):
        return load_s / max(w, 1)
    return measure


def cpu_bound(cost_s, cores=2):
    def measure(w, threads):
        return cost_s / min(max(w, 1), cores)
    return measure


def test_latency_bound_pipeline_gets_the_smallest_sufficient_count():
    calls = []

    def measure(w, t):
        calls.append(w)
        return 0.120 / max(w, 1)

    out = tune(measure, target_s=0.040, max_workers=16, cores=2)
    # goal 36 ms: perfect scaling predicts ceil(120 / 36) = 4 (30 ms); 3 gives 40 ms
    assert out.chosen.workers == 4 and out.meets_target
    assert calls == [0, 1, 4, 3]


def test_prediction_needs_at_most_half_the_trials_of_a_sweep():
    out = tune(latency_bound(0.120), target_s=0.030, max_workers=8, cores=2)
    assert out.chosen.workers == 5  # 24 ms <= 27 ms; 4 workers give 30 ms
    assert [t.workers for t in out.trials] == [0, 1, 5, 4]
    assert len(out.trials) <= 9 / 2  # the sweep of 0..8 has 9


def test_imperfect_scaling_is_predicted_again_from_the_rate_reached():
    def measure(w, t):  # each worker adds only 70% of a perfect one past the first
        return 0.120 / (1 + 0.7 * (max(w, 1) - 1))

    out = tune(measure, target_s=0.030, max_workers=16, cores=2)
    goal = 0.027
    assert out.meets_target and measure(out.chosen.workers, 0) <= goal
    assert measure(out.chosen.workers - 1, 0) > goal  # the smallest such count
    assert len(out.trials) <= 6


def test_cheap_loader_needs_no_workers():
    out = tune(latency_bound(0.005), target_s=0.060, max_workers=16, cores=2)
    assert out.chosen.workers == 0 and len(out.trials) == 1


def test_cpu_bound_pipeline_stops_at_the_plateau_and_stays_input_bound():
    out = tune(cpu_bound(0.200), target_s=0.040, max_workers=16, cores=2)
    assert not out.meets_target
    assert out.chosen.workers == 2  # the fewest workers as fast as any
    assert out.scaling == CPU_BOUND
    assert "stopped scaling" in out.reason and out.stop == "stopped-scaling"
    assert [t.workers for t in out.trials] == [0, 1, 6, 3, 2]


def test_latency_bound_scaling_is_noticed():
    out = tune(latency_bound(1.0), target_s=0.010, max_workers=8, cores=2)
    assert out.scaling == LATENCY_BOUND
    assert out.chosen.workers == 8 and not out.meets_target


def test_fixed_workers_measure_exactly_those():
    out = tune(latency_bound(0.120), target_s=0.040, max_workers=16, cores=2,
               fixed_workers=[1, 2])
    assert [t.workers for t in out.trials] == [1, 2]
    assert out.chosen.workers == 2 and not out.meets_target and out.stop == "fixed"


def test_choose_prefers_fewest_workers_meeting_goal():
    from pipecheck.analysis.loader.tuner import Trial
    from pipecheck.records.grain_settings import GrainSettings

    trials = [Trial(GrainSettings(4, threads=0), 0.010),
              Trial(GrainSettings(2, threads=0), 0.030),
              Trial(GrainSettings(1, threads=0), 0.050)]
    assert choose(trials, 0.040)[0].workers == 2
