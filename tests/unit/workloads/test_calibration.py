"""The calibrated workload's chain length on a busy machine: timings given by a scripted
clock (the chain runs for real; only its timings are chosen)."""

from __future__ import annotations

import itertools

import jax.numpy as jnp

from pipecheck import workloads
from pipecheck.workloads import calibrated
from pipecheck.workloads.calibrated import CALIBRATION_ITERS, CALIBRATION_REPEATS, calibrate_iters


class ScriptedTimings:
    """A clock whose consecutive (start, end) reads time the given durations, in order."""

    def __init__(self, durations: list[float]) -> None:
        self.reads = iter(itertools.chain.from_iterable(
            (2.0 * i, 2.0 * i + d) for i, d in enumerate(durations)))

    def __call__(self) -> float:
        return next(self.reads)


def test_a_burst_of_load_while_calibrating_does_not_shorten_the_chain():
    # 0.1 ms an iteration: 8 iterations take 0.8 ms, 72 take 7.2 ms when the chain has the
    # CPU. Other processes take it (x4) for 3 timings of the short chain and 4 of the long
    # one: medians would read 0.44 ms an iteration, and make a 10 ms step 2.3 ms of work.
    lo, hi = CALIBRATION_ITERS
    assert CALIBRATION_REPEATS == 7
    short = [4 * lo * 1e-4] * 3 + [lo * 1e-4] * 4
    long = [4 * hi * 1e-4] * 4 + [hi * 1e-4] * 3
    w = jnp.eye(8, dtype=jnp.float32)
    x = jnp.ones((2, 8), jnp.float32)
    iters, per_iter = calibrate_iters(w, x, 10.0, clock=ScriptedTimings(short + long))
    assert abs(per_iter - 1e-4) < 1e-9
    assert iters == 100  # 10 ms of work at 0.1 ms an iteration, no overhead


def test_a_fixed_chain_is_not_calibrated():
    """chain_iters: two runs that must do the same work skip the start-up sizing."""
    def flops(overrides):
        cfg = workloads.resolve(None, ["workload=calibrated", "batch_size=4",
                                       "feature_dim=16", *overrides])
        return calibrated.build(cfg).flops_per_step

    assert flops(["chain_iters=5"]) == 2.0 * 4 * 16 * 16 * 5
    assert flops(["chain_iters=7"]) == 2.0 * 4 * 16 * 16 * 7
