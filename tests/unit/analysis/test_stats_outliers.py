from pipecheck.analysis import stats


def test_no_outliers_in_a_steady_series():
    assert stats.robust_outliers([0.50, 0.51, 0.49, 0.50, 0.52, 0.50]) == []


def test_slow_and_fast_outliers_are_flagged():
    xs = [0.50, 0.51, 0.49, 2.30, 0.10, 0.50, 0.52, 0.50]
    assert stats.robust_outliers(xs) == [3, 4]


def test_small_relative_blip_in_a_very_steady_series_is_not_an_outlier():
    # MAD is tiny, so the z-score alone would flag 0.55; it is only 10% off the median
    xs = [0.500, 0.500, 0.501, 0.500, 0.550, 0.500]
    assert stats.robust_outliers(xs) == []


def test_zero_mad_uses_the_relative_test_alone():
    assert stats.robust_outliers([1.0, 1.0, 1.0, 1.0, 3.0]) == [4]


def test_noisy_series_needs_a_large_z_score():
    # 40% above the median, but the series itself spreads that much
    xs = [1.0, 1.4, 0.7, 1.3, 0.75, 1.35, 1.0, 0.8, 1.4]
    assert stats.robust_outliers(xs) == []


def test_too_few_samples():
    assert stats.robust_outliers([1.0, 9.0]) == []
