"""The slow-samples rule on hand-built per-element costs."""

from __future__ import annotations

import numpy as np
import pytest

from pipecheck.analysis.loader.slow_samples import (
    HEAVY_RATIO,
    matters,
    slow_samples,
    slow_samples_finding,
)


def test_five_percent_at_twenty_times_is_a_finding_with_its_predicted_batches():
    costs = [0.020 if i % 20 == 0 else 0.001 for i in range(200)]
    batch = [0.008] * 10 + [0.027] * 5
    s = slow_samples("MapMapDataset(transform=decode)", costs, 8, batch)
    assert s is not None
    assert (s.median_s, s.max_s, s.heavy, s.n) == (0.001, 0.020, 10, 200)
    assert s.inflation == pytest.approx((0.95 * 0.001 + 0.05 * 0.020) / 0.001)  # 1.95
    assert s.batches_with_heavy == pytest.approx(1 - 0.95 ** 8)  # 34%
    # 8 light elements: 8 ms; one heavy among them: 27 ms
    assert s.predicted_median_s == pytest.approx(0.008)
    assert s.predicted_p90_s == pytest.approx(0.027)
    assert (s.measured_median_s, s.measured_p90_s) == (0.008, 0.027)
    f = slow_samples_finding(s)
    assert f is not None and f.kind == "slow-samples"
    assert f.location == "MapMapDataset(transform=decode)"
    assert "bucket" in (f.fix or "") and "precompute" in (f.fix or "")
    assert "5% cost 5x the median or more" in f.message


@pytest.mark.parametrize("seed", range(20))
def test_even_costs_with_noise_are_silent(seed):
    rng = np.random.default_rng(seed)
    s = slow_samples("map", 0.002 * rng.lognormal(0, 0.3, 200), 8, [0.016] * 10)
    assert s is not None and slow_samples_finding(s) is None


def test_one_heavy_element_is_not_a_tail():
    costs = [0.001] * 199 + [1.0]
    s = slow_samples("map", costs, 8, [])
    assert s is not None and s.heavy == 1 and s.inflation > 5
    assert not matters(s)


def test_a_tail_too_light_to_matter():
    costs = [HEAVY_RATIO * 0.001 if i % 50 == 0 else 0.001 for i in range(200)]  # 2% at 5x
    s = slow_samples("map", costs, 8, [])
    assert s is not None and s.heavy == 4 and s.inflation < 1.25
    assert slow_samples_finding(s) is None


def test_a_tail_in_a_stage_that_is_a_small_part_of_the_batch_is_silent():
    costs = [0.020 if i % 20 == 0 else 0.001 for i in range(200)]
    # the tail adds 8 x 0.95 ms = 7.6 ms to a batch: most of 8 ms, 3.8% of 200 ms
    assert slow_samples_finding(slow_samples("map", costs, 8, [0.008] * 10)) is not None
    assert slow_samples_finding(slow_samples("map", costs, 8, [0.200] * 10)) is None


def test_no_costs():
    assert slow_samples("map", [], 8, []) is None
