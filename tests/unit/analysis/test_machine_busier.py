"""A busier machine during the real-data run, told from loading competing with compute
(hand-built loads, no timing involved)."""

import pytest

from pipecheck.analysis.machine_load import (
    BUSIER_MIN_CORES,
    BUSIER_SHARE_OF_HOST,
    MIN_PHASE_WALL_S,
    busier_during_real,
    busier_margin,
    phase_loads,
)
from pipecheck.analysis.verdict import COMPUTE_BOUND, FORCED_SYNC, INCONCLUSIVE, decide
from pipecheck.records.common import Estimate
from pipecheck.records.machine_load import MachineLoad, PhaseLoad


def est(median_ms, spread_ms=1.0):
    m = median_ms / 1e3
    return Estimate(m, m - spread_ms / 1e3, m + spread_ms / 1e3, 40)


def load(target, loader, real, cores=2, again=None):
    """Each phase 10 s long, other processes keeping ``cores`` busy on average."""
    def phase(c):
        return None if c is None else PhaseLoad(10.0, 10.0 * c)

    return MachineLoad(cores, phase(target), phase(loader), phase(real), phase(again))


# the demo's run beside another test: R far above T and D, no host sync found
T, D, R = est(48.5), est(3.5, 0.1), est(83.6)


def test_busier_during_real_names_the_machine_not_loading():
    v = decide(T, D, R, sync_share=0.0, machine=load(0.1, 0.1, 0.9))
    assert v.verdict == INCONCLUSIVE and not v.unexplained_slowdown
    assert v.reason == (
        "real-data steps (83.6 ms) are 72% slower than compute (48.5 ms) and loading "
        "(3.50 ms), but the machine got busier during the real-data run (other processes "
        "used 0.9 of 2 cores, against 0.1 while compute was timed): rerun on a quieter machine")
    assert "competes" not in v.reason


def test_even_load_keeps_blaming_loading():
    v = decide(T, D, R, sync_share=0.0, machine=load(0.8, 0.8, 0.9))
    assert v.verdict == INCONCLUSIVE and v.unexplained_slowdown
    assert "loading competes with compute for the CPU" in v.reason
    # no load known (R from a file, an old record): as before
    assert decide(T, D, R, sync_share=0.0).reason == v.reason


def test_compared_with_the_phase_of_the_slower_part():
    # T bounds the run: a quiet loader phase does not matter when T was as busy as R
    assert busier_during_real(load(0.9, 0.0, 0.9), T.value, D.value) is None
    b = busier_during_real(load(0.0, 0.9, 0.9), T.value, D.value)
    assert b is not None and b.bound_phase == "compute"
    # D bounds it: its phase is the one compared
    assert busier_during_real(load(0.0, 0.9, 0.9), 0.01, 0.05) is None
    b = busier_during_real(load(0.9, 0.0, 0.9), 0.01, 0.05)
    assert b is not None and b.bound_phase == "the loader" and b.bound_cores == 0.0


def test_both_target_phases_count_by_their_wall_time():
    # T quiet for 10 s before, busy (1.4 cores) for 10 s after: 0.7 on average
    assert busier_during_real(load(0.0, 0.0, 0.9, again=1.4), T.value, D.value) is None
    assert busier_during_real(load(0.0, 0.0, 0.9, again=0.2), T.value, D.value) is not None


@pytest.mark.parametrize("cores, margin", [(1, BUSIER_MIN_CORES), (2, BUSIER_MIN_CORES),
                                           (64, BUSIER_SHARE_OF_HOST * 64)])
def test_the_margin_scales_with_the_host(cores, margin):
    assert busier_margin(cores) == margin
    assert busier_during_real(load(0.0, 0.0, margin * 0.99, cores), T.value, D.value) is None
    assert busier_during_real(load(0.0, 0.0, margin * 1.01, cores), T.value, D.value) \
        is not None


def test_unknown_phases_decide_nothing():
    assert busier_during_real(None, T.value, D.value) is None
    assert busier_during_real(load(0.0, 0.0, None), T.value, D.value) is None
    assert busier_during_real(load(None, 0.0, 0.9), T.value, D.value) is None


def test_busier_machine_never_overrides_other_verdicts():
    busy = load(0.0, 0.0, 1.5)
    # a located sync: still forced-sync
    assert decide(T, D, R, sync_share=0.4, machine=busy).verdict == FORCED_SYNC
    # R within the margin of T: still compute-bound
    assert decide(T, D, est(50), sync_share=0.0, machine=busy).verdict == COMPUTE_BOUND
    # input-bound, fixed by tuning, slower than both: kept, and not blamed on loading
    v = decide(est(40), est(30), est(60), baseline=est(120), sync_share=0.0, machine=busy)
    assert v.fixed_by_tuning and not v.unexplained_slowdown


def test_noisy_real_data_steps_on_a_busier_machine_name_it():
    noisy_r = Estimate(0.0836, 0.040, 0.130, 40)
    v = decide(T, D, noisy_r, sync_share=0.0, machine=load(0.1, 0.1, 0.9))
    assert v.verdict == INCONCLUSIVE
    assert v.reason == (
        "the real measurements are too noisy to decide (confidence interval wider than "
        "+/-25% of the median): the machine got busier during the real-data run (other "
        "processes used 0.9 of 2 cores, against 0.1 while compute was timed); run more "
        "steps (--steps, --batches) on a quieter machine")
    # even load: the reason as before
    assert "the machine is likely too busy" in decide(
        T, D, noisy_r, sync_share=0.0, machine=load(0.8, 0.8, 0.9)).reason
    # a noisy target, D close to it, R steady: a busier real-data run explains nothing
    v = decide(Estimate(0.0485, 0.02, 0.08, 40), Estimate(0.040, 0.039, 0.041, 40), est(50),
               sync_share=0.0, machine=load(0.1, 0.1, 0.9))
    assert v.verdict == INCONCLUSIVE and v.reason.startswith("the target measurements")
    assert "the machine is likely too busy" in v.reason


def test_a_phase_too_short_to_read_decides_nothing():
    """Milliseconds of phase (compare's stages faked) read noise: 3.6 of 2 cores was seen."""
    load = MachineLoad(2, PhaseLoad(0.003, 0.0), PhaseLoad(0.002, 0.0),
                       PhaseLoad(0.004, 0.0144), None)
    assert load.real is not None and load.real.other_cores > 2
    assert busier_during_real(load, 0.050, 0.010) is None
    assert phase_loads(load) == []
    long_enough = MachineLoad(2, PhaseLoad(MIN_PHASE_WALL_S, 0.0), None,
                              PhaseLoad(MIN_PHASE_WALL_S, 0.5), None)
    busier = busier_during_real(long_enough, 0.050, 0.010)
    assert busier is not None and busier.real_cores == 1.0


def test_a_busier_real_run_whose_interval_reaches_down_is_not_compute_bound():
    """Seen in CI: hogs started with R, T 29.7 ms, R's median 46.6 ms (57% above) but its
    first steps, before the hogs took the cores, widen its interval down to T's margin."""
    t, d = Estimate(0.0297, 0.0290, 0.0305, 20), Estimate(0.00323, 0.0031, 0.0034, 20)
    r = Estimate(0.0466, 0.0330, 0.0520, 40)
    quiet = decide(t, d, r, sync_share=0.0, machine=load(0.1, 0.1, 0.1))
    assert quiet.verdict == COMPUTE_BOUND  # no busier machine: the interval decides, as before
    v = decide(t, d, r, sync_share=0.0, machine=load(0.1, 0.1, 1.6))
    assert v.verdict == INCONCLUSIVE, v.reason
    assert "the machine got busier during the real-data run" in v.reason
    # R's median within the margin of T: the busier machine changes nothing
    near = Estimate(0.0340, 0.0300, 0.0380, 40)
    assert decide(t, d, near, sync_share=0.0, machine=load(0.1, 0.1, 1.6)).verdict == \
        COMPUTE_BOUND
