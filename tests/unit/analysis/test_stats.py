import math

import numpy as np

from pipecheck.analysis import stats


def test_summary_of_known_samples():
    s = stats.summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert s.median == 5.5 and s.n == 10
    assert s.p10 == 1.9 and s.p90 == 9.1
    assert s.iqr == 4.5


def test_empty_summary_is_nan():
    s = stats.summarize([])
    assert s.n == 0 and math.isnan(s.median)


def test_quality_warnings():
    assert stats.quality_warnings([1.0] * 20) == []
    few = stats.quality_warnings([1.0] * 3)
    assert len(few) == 1 and "only 3" in few[0]
    spread = stats.quality_warnings([1.0, 1.0, 1.5, 2.0] * 5)
    assert any("large spread" in w for w in spread)


def test_median_ci_contains_the_median_and_is_reproducible():
    rng = np.random.default_rng(1)
    x = rng.normal(1.0, 0.1, 200)
    lo, hi = stats.median_ci(x)
    assert lo < np.median(x) < hi
    assert (lo, hi) == stats.median_ci(x)
    assert hi - lo < 0.1


def test_median_difference_detects_a_real_shift():
    rng = np.random.default_rng(2)
    a = rng.normal(0.040, 0.002, 40)
    b = rng.normal(0.060, 0.002, 40)
    d = stats.median_difference(a, b)
    assert d.significant and d.diff > 0 and d.ci_low > 0
    assert 0.4 < d.relative < 0.6


def test_median_difference_calls_noise_not_significant():
    rng = np.random.default_rng(3)
    a = rng.normal(0.050, 0.005, 40)
    b = rng.normal(0.0502, 0.005, 40)
    d = stats.median_difference(a, b)
    assert not d.significant


def test_a_single_stall_does_not_make_a_difference_significant():
    a = [0.05] * 30
    b = [0.05] * 29 + [5.0]
    assert not stats.median_difference(a, b).significant


def test_mann_whitney_extremes():
    assert stats.mann_whitney_u_p([1, 2, 3, 4, 5, 6], [11, 12, 13, 14, 15, 16]) < 0.01
    assert stats.mann_whitney_u_p([1, 2, 3], [1, 2, 3]) > 0.9
