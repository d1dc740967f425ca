"""The worker search against modelled pipelines (exact, no timing)."""

from pipecheck.tuner import CPU_BOUND, LATENCY_BOUND, choose, tune, worker_ladder


def latency_bound(load_s):
    """A sleeping pipeline: W workers give a batch every load/W seconds."""
    def measure(w, threads):
        return load_s / max(w, 1)
    return measure


def cpu_bound(cost_s, cores=2):
    def measure(w, threads):
        return cost_s / min(max(w, 1), cores)
    return measure


def test_ladder():
    assert worker_ladder(8) == [0, 1, 2, 4, 8]
    assert worker_ladder(6) == [0, 1, 2, 4, 6]
    assert worker_ladder(1) == [0, 1]


def test_latency_bound_pipeline_gets_the_smallest_sufficient_count():
    calls = []

    def measure(w, t):
        calls.append(w)
        return 0.120 / max(w, 1)

    out = tune(measure, target_s=0.040, max_workers=16, cores=2)
    # 0.9 * 40 ms = 36 ms goal: 4 workers give 30 ms, 3 give 40 ms -> 4 is the smallest
    assert out.chosen.workers == 4 and out.meets_target
    assert calls == [0, 1, 2, 4, 3]


def test_bisection_finds_the_smallest_between_doublings():
    out = tune(latency_bound(0.600), target_s=0.100, max_workers=16, cores=2)
    # goal 90 ms: 600/7 = 85.7 ms meets, 600/6 = 100 ms does not
    assert out.chosen.workers == 7
    assert [t.workers for t in out.trials] == [0, 1, 2, 4, 8, 6, 7]


def test_cheap_loader_needs_no_workers():
    out = tune(latency_bound(0.005), target_s=0.060, max_workers=16, cores=2)
    assert out.chosen.workers == 0 and len(out.trials) == 1


def test_cpu_bound_pipeline_stops_at_the_plateau_and_stays_input_bound():
    out = tune(cpu_bound(0.200), target_s=0.040, max_workers=16, cores=2)
    assert not out.meets_target
    assert out.chosen.workers == 2  # fastest; 4 workers are no faster
    assert [t.workers for t in out.trials] == [0, 1, 2, 4]
    assert out.scaling == CPU_BOUND
    assert "gained less than 10%" in out.reason


def test_latency_bound_scaling_is_noticed():
    out = tune(latency_bound(1.0), target_s=0.010, max_workers=8, cores=2)
    assert out.scaling == LATENCY_BOUND
    assert out.chosen.workers == 8 and not out.meets_target


def test_fixed_workers_measure_exactly_those():
    out = tune(latency_bound(0.120), target_s=0.040, max_workers=16, cores=2,
               fixed_workers=[1, 2])
    assert [t.workers for t in out.trials] == [1, 2]
    assert out.chosen.workers == 2 and not out.meets_target


def test_choose_prefers_fewest_workers_meeting_goal():
    from pipecheck.tuner import Trial
    trials = [Trial(4, 0, 0.010), Trial(2, 0, 0.030), Trial(1, 0, 0.050)]
    assert choose(trials, 0.040)[0].workers == 2
