"""The verdict on hand-built estimates (no timing involved)."""

import numpy as np
import pytest

from pipecheck.analysis.verdict import (
    COMPUTE_BOUND,
    FORCED_SYNC,
    INCONCLUSIVE,
    INPUT_BOUND,
    SERIAL_SAVING,
    Estimate,
    beyond_loader_cpu,
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


def test_a_slowdown_beyond_the_loaders_cpu_is_not_blamed_on_loading():
    """CI's default demo once read T 44.3, D 4.05 and R 57.6 ms: loading's 4.1 ms of CPU a
    batch cannot take 13 ms a step from compute. Blaming it would send the user to tune a
    loader that is not the problem."""
    v = decide(est(44.3), est(4.05), est(57.6), sync_share=0.0, loader_cpu_s=0.0041)
    assert v.verdict == INCONCLUSIVE and v.unexplained_slowdown
    assert "more than loading's own CPU (4.10 ms a batch) could take" in v.reason
    assert "the machine's speed changed" in v.reason and "competes" not in v.reason
    # the same slowdown from a loader using 10 ms of CPU a batch: loading competes
    v = decide(est(44.3), est(4.05), est(57.6), sync_share=0.0, loader_cpu_s=0.010)
    assert v.verdict == INCONCLUSIVE and v.unexplained_slowdown
    assert "competes with compute for the CPU (it uses 10.0 ms of CPU a batch)" in v.reason
    # the boundary: 1.5x the loader's CPU
    assert beyond_loader_cpu(0.044, 0.004, 0.044 + 0.0151, 0.010)
    assert not beyond_loader_cpu(0.044, 0.004, 0.044 + 0.0149, 0.010)
    assert not beyond_loader_cpu(0.044, 0.004, 0.080, None)
    assert not beyond_loader_cpu(0.044, 0.004, 0.080, float("nan"))


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


# --- a busy machine (issue 32, item 8): the numbers compare measured with two CPU hogs ------
def ms_est(value, low, high, n):
    return Estimate(value / 1e3, low / 1e3, high / 1e3, n)


NOISY_BUT_APART = (
    # compute_ms=10, load_ms=60 with two hogs: T's interval is +/-36% of its median
    ((1.1, 1.0, 1.8, 38), (66.2, 60.6, 69.8, 8), (62.2, 60.6, 64.1, 36), INPUT_BOUND,
     "the target measurements are noisy, the machine may be busy"),
    # compute_ms=60, load_ms=10 with two hogs: D and R wider than +/-25%
    ((96.0, 77.9, 101.1, 41), (12.8, 6.4, 20.5, 8), (110.4, 88.5, 144.0, 33), COMPUTE_BOUND,
     "the loader, real measurements are noisy"),
)


@pytest.mark.parametrize(("target", "loader", "real", "verdict", "says"), NOISY_BUT_APART)
def test_noisy_intervals_far_apart_still_decide(target, loader, real, verdict, says):
    v = decide(ms_est(*target), ms_est(*loader), ms_est(*real))
    assert v.verdict == verdict, v.reason
    assert says in v.reason


def test_noise_across_the_decision_says_the_machine_is_too_busy():
    # T's interval reaches D's (less than the 10% margin apart): either could bound the run
    v = decide(ms_est(40, 20, 60, 40), ms_est(64, 62, 66, 40), ms_est(66, 64, 68, 40))
    assert v.verdict == INCONCLUSIVE
    assert "too noisy to decide" in v.reason and "the machine is likely too busy" in v.reason
    # T and D apart, but R's median above both by the forced-sync margin and its interval
    # reaching down to them: noise could hide a forced sync, so no verdict
    v = decide(ms_est(20, 18, 22, 40), ms_est(60, 58, 62, 40), ms_est(80, 50, 110, 40))
    assert v.verdict == INCONCLUSIVE and "too noisy" in v.reason
    # the same R with its median within the margin: input-bound however noisy R is
    v = decide(ms_est(20, 18, 22, 40), ms_est(60, 58, 62, 40), ms_est(70, 45, 95, 40))
    assert v.verdict == INPUT_BOUND
    # a noisy R whose median is far below the slower part contradicts it: no verdict
    v = decide(ms_est(50, 49, 51, 40), ms_est(10, 9, 11, 40), ms_est(20, 15, 110, 40))
    assert v.verdict == INCONCLUSIVE and "the real measurements are too noisy" in v.reason


def test_loading_then_syncing_on_the_training_thread_is_forced_sync_however_busy():
    # compute_ms=25, load_ms=45, float(loss) of the step just dispatched, loading on the
    # training thread, two CPU hogs: T drifted during the run and R varied with the load,
    # so their intervals overlap; within R's own steps the thread loaded for 27% of a step,
    # then waited for the device in the user's sync for 73%
    target, loader, real = ms_est(74.6, 72.0, 110.8, 41), ms_est(47.2, 46.4, 48.1, 9), \
        ms_est(170.9, 112.4, 201.0, 37)
    assert decide(target, loader, real, sync_share=0.73).verdict == INCONCLUSIVE
    v = decide(target, loader, real, sync_share=0.73, own_load_share=0.267)
    assert v.verdict == FORCED_SYNC, v.reason
    assert "loads its batch (27% of the step), then waits for the device" in v.reason


def test_a_sync_next_to_little_own_loading_is_not_forced_sync():
    # compute-bound with float(loss) every step: the thread waits for the device most of
    # the step, but loads for only 5% of it: overlapping them saves little
    v = decide(est(60), est(3), est(63), sync_share=0.9, own_load_share=0.05)
    assert v.verdict == COMPUTE_BOUND
    # and a loader running beside the thread (own_load_share None) is never paired
    v = decide(est(20), est(80), est(81), sync_share=0.25)
    assert v.verdict == INPUT_BOUND
    assert SERIAL_SAVING == 1 - 1 / 1.2
