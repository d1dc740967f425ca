"""The verdict on hand-built estimates (no timing involved)."""

import numpy as np

from pipecheck.analysis.verdict import (
    COMPUTE_BOUND,
    FORCED_SYNC,
    INCONCLUSIVE,
    INPUT_BOUND,
    Estimate,
    decide,
)


def est(median_ms, spread_ms=1.0):
    m = median_ms / 1e3
    return Estimate(m, m - spread_ms / 1e3, m + spread_ms / 1e3, 40)


def test_compute_bound():
    v = decide(est(60), est(20), est(61))
    assert v.verdict == COMPUTE_BOUND


def test_input_bound():
    v = decide(est(40), est(120), est(121))
    assert v.verdict == INPUT_BOUND
    assert "120.0 ms per batch" in v.reason


def test_input_bound_fixed_by_tuning_names_the_baseline():
    v = decide(est(40), est(30), est(41), baseline=est(120))
    assert v.verdict == INPUT_BOUND and v.fixed_by_tuning
    assert "120.0 ms per batch" in v.reason


def test_fast_baseline_stays_compute_bound():
    v = decide(est(40), est(10), est(41), baseline=est(10))
    assert v.verdict == COMPUTE_BOUND and not v.fixed_by_tuning


def test_forced_sync_when_real_exceeds_both_clearly():
    v = decide(est(40), est(30), est(70))
    assert v.verdict == FORCED_SYNC
    assert round(v.excess_over_bound, 2) == 0.75


def test_slower_than_both_without_a_located_sync_is_not_forced_sync():
    v = decide(est(40), est(30), est(60), baseline=est(120), sync_share=0.01)
    assert v.verdict == INPUT_BOUND and v.fixed_by_tuning and v.unexplained_slowdown
    v = decide(est(40), est(30), est(60), sync_share=0.4)
    assert v.verdict == FORCED_SYNC and not v.unexplained_slowdown
    # without tuning to credit, slower than both and no sync: not "compute-bound"
    v = decide(est(50), est(20), est(80), sync_share=0.0)
    assert v.verdict == INCONCLUSIVE and v.unexplained_slowdown
    assert "competes with compute for the CPU" in v.reason
    assert not decide(est(40), est(30), est(41), sync_share=0.0).unexplained_slowdown


def test_forced_sync_needs_the_whole_interval_above_the_margin():
    # 15% slower, but within the margin: not a forced sync
    assert decide(est(40), est(30), est(46)).verdict == COMPUTE_BOUND
    # 30% slower median but a wide interval reaching down to the bound: not forced-sync
    wide = Estimate(0.052, 0.040, 0.064, 40)
    assert decide(est(40), est(30), wide).verdict != FORCED_SYNC


def test_noise_is_inconclusive_not_a_verdict():
    noisy_target = Estimate(0.040, 0.020, 0.060, 40)
    v = decide(noisy_target, est(60), est(62))
    assert v.verdict == INCONCLUSIVE and "too noisy" in v.reason
    assert decide(est(40), est(30), Estimate(0.04, 0.04, 0.04, 1)).verdict == INCONCLUSIVE


def test_close_loader_and_compute_is_inconclusive():
    v = decide(est(40, 4), est(46, 4), est(47, 4))
    assert v.verdict == INCONCLUSIVE and "too close" in v.reason


def test_repeated_compute_bound_runs_are_never_forced_sync():
    # Simulated repeated runs of one compute-bound job on a noisy machine: T and R drawn
    # from the same skewed distribution (occasional stalls), D well below.
    rng = np.random.default_rng(7)
    for _ in range(200):
        base = rng.normal(0.060, 0.003, 40) + rng.exponential(0.004, 40)
        real = rng.normal(0.060, 0.003, 40) + rng.exponential(0.004, 40)
        loader = rng.normal(0.020, 0.002, 30)
        v = decide(Estimate.of(base), Estimate.of(loader), Estimate.of(real))
        assert v.verdict in (COMPUTE_BOUND, INCONCLUSIVE)


def test_bursty_loader_mean_is_decided_with_burst_blocks():
    from pipecheck.analysis.steady_state import burst_block

    # 4 workers in lockstep: a 120 ms wait, then three batches at once (~30 ms per batch)
    samples = [0.120, 0.0003, 0.0003, 0.0003] * 9
    narrow = Estimate.of_mean(samples, block=burst_block(4, len(samples)))
    assert abs(narrow.value - 0.0302) < 1e-3
    assert narrow.relative_half_width < 0.10
    wide = Estimate.of_mean(samples)  # blocks shorter than a burst: a falsely wide interval
    assert wide.relative_half_width > narrow.relative_half_width
