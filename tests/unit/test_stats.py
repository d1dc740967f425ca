import math

import numpy as np
import pytest

from pipecheck import stats


def test_summary_of_known_samples():
    s = stats.summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert s.median == 5.5 and s.n == 10
    assert s.p10 == 1.9 and s.p90 == 9.1
    assert s.iqr == 4.5


def test_empty_summary_is_nan():
    s = stats.summarize([])
    assert s.n == 0 and math.isnan(s.median)


def test_summary_names_in_a_unit():
    s = stats.summarize([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    assert stats.Summary.names("_s") == ("median_s", "mean_s", "p10_s", "p90_s", "p99_s",
                                         "iqr_s", "n")
    assert s.named("_s") == {"median_s": 5.5, "mean_s": 5.5, "p10_s": s.p10, "p90_s": s.p90,
                             "p99_s": s.p99, "iqr_s": 4.5, "n": 10}


def test_quality_warnings():
    assert stats.quality_warnings(stats.summarize([1.0] * 20)) == []
    few = stats.quality_warnings(stats.summarize([1.0] * 3))
    assert len(few) == 1 and "only 3" in few[0]
    spread = stats.quality_warnings(stats.summarize([1.0, 1.0, 1.5, 2.0] * 5))
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


# --- long runs: the scalable methods give the numbers the direct ones gave ---------------


def _old_median_difference(a, b, confidence=0.95, resamples=stats.BOOTSTRAP_RESAMPLES, seed=0):
    """The direct method as it was: every resample gathered whole (resamples x n)."""
    xa, xb = np.asarray(a, float), np.asarray(b, float)
    rng = np.random.default_rng(seed)
    ia = stats._block_resample_indices(xa.size, stats.default_block_length(xa.size), rng,
                                       resamples)
    ib = stats._block_resample_indices(xb.size, stats.default_block_length(xb.size), rng,
                                       resamples)
    diffs = np.median(xb[ib], axis=1) - np.median(xa[ia], axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(diffs, [alpha, 1.0 - alpha])
    return float(np.median(xb)) - float(np.median(xa)), float(lo), float(hi)


def _old_mann_whitney_u_p(a, b):
    """The rank test as it was: a Python loop over the sorted values for the ties."""
    xa, xb = np.asarray(a, float), np.asarray(b, float)
    n1, n2 = xa.size, xb.size
    both = np.concatenate([xa, xb])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(both.size)
    sorted_vals = both[order]
    i, tie_term = 0, 0.0
    while i < both.size:
        j = i
        while j + 1 < both.size and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        tie_term += (j - i + 1) ** 3 - (j - i + 1)
        i = j + 1
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    sigma_sq = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    z = max((abs(u1 - n1 * n2 / 2.0) - 0.5) / math.sqrt(sigma_sq), 0.0)
    return math.erfc(z / math.sqrt(2.0))


def _log_like(rng, n, scale):
    """Step times as MaxText prints them: three decimals, so many ties."""
    return np.round(rng.gamma(20, scale, n), 3)


@pytest.mark.parametrize("n", [5, 40, 700, 3000, 25000])
def test_median_difference_agrees_with_the_direct_method(n):
    rng = np.random.default_rng(n)
    a, b = _log_like(rng, n, 0.010), _log_like(rng, n + 3, 0.0101)
    resamples = 300 if n > stats.DIRECT_MAX_N else stats.BOOTSTRAP_RESAMPLES
    diff, lo, hi = _old_median_difference(a, b, resamples=resamples)
    d = stats.median_difference(a, b, resamples=resamples)
    # same draws (one matrix up to ~90,000 steps), same medians: the same interval exactly
    assert (d.diff, d.ci_low, d.ci_high) == (diff, lo, hi)
    assert d.p_value == pytest.approx(_old_mann_whitney_u_p(a, b), rel=1e-9, abs=1e-300)


def test_window_medians_equal_the_gathered_medians_even_when_the_window_misses(monkeypatch):
    rng = np.random.default_rng(7)
    for n, data in [(1001, np.round(rng.normal(1, 0.1, 1001), 2)),      # heavy ties
                    (30000, rng.normal(1, 0.1, 30000)),
                    (5000, np.repeat(rng.normal(1, 0.1, 50), 100))]:    # slow phases
        blk = stats.default_block_length(n)
        starts = rng.integers(0, n - blk + 1, size=(200, -(-n // blk)))
        direct = np.median(data[stats._indices_of_starts(starts, n, blk)], axis=1)
        assert np.array_equal(stats._window_medians(data, starts, blk), direct)
        # a one-resample pilot sizes the window too small for some: they are done directly
        monkeypatch.setattr(stats, "WINDOW_PILOT_RESAMPLES", 1)
        assert np.array_equal(stats._window_medians(data, starts, blk), direct)
        monkeypatch.undo()


def test_chunked_draws_give_an_interval_within_the_bootstraps_noise(monkeypatch):
    rng = np.random.default_rng(11)
    a, b = _log_like(rng, 1500, 0.010), _log_like(rng, 1500, 0.0101)
    seeds = [_old_median_difference(a, b, seed=s) for s in range(6)]
    lows, highs = [s[1] for s in seeds], [s[2] for s in seeds]
    monkeypatch.setattr(stats, "RESAMPLE_CHUNK_ELEMENTS", 1000)  # many small draws
    d = stats.median_difference(a, b)
    spread_lo, spread_hi = max(lows) - min(lows), max(highs) - min(highs)
    assert min(lows) - spread_lo <= d.ci_low <= max(lows) + spread_lo
    assert min(highs) - spread_hi <= d.ci_high <= max(highs) + spread_hi


def test_bootstrap_of_the_mean_from_block_sums_agrees():
    rng = np.random.default_rng(3)
    x = rng.gamma(20, 0.01, 500)
    r = np.random.default_rng(stats.BOOTSTRAP_SEED)
    blk = stats.default_block_length(x.size)
    means = x[stats._block_resample_indices(x.size, blk, r, stats.BOOTSTRAP_RESAMPLES)].mean(1)
    expected = np.quantile(means, [0.025, 0.975])
    assert stats.bootstrap_ci(x, "mean") == pytest.approx(tuple(expected), rel=1e-12)


def test_bootstrap_reports_progress_by_resample():
    from pipecheck.progress import Progress, Task

    seen = []

    class Recording(Progress):
        def task(self, description, total, unit=""):
            seen.append((description, total))
            outer = self

            class T(Task):
                def advance(self, n=1):
                    outer.done = getattr(outer, "done", 0) + n

            return T()

    p = Recording()
    stats.median_difference([0.05] * 30, [0.06] * 30, progress=p)
    assert seen == [("bootstrapping the median difference", 2 * stats.BOOTSTRAP_RESAMPLES)]
    assert p.done == 2 * stats.BOOTSTRAP_RESAMPLES


@pytest.mark.parametrize("n", [2, 3, 7, 10, 64, 101, 1000])
def test_coverage_medians_equal_the_gathered_medians(n):
    rng = np.random.default_rng(n)
    series = {"smooth": rng.normal(1, 0.1, n),
              "ties": np.round(rng.normal(1, 0.1, n), 1),
              "slow phases": np.repeat(rng.normal(1, 0.1, n // 5 + 1), 5)[:n],
              "stalls": np.where(rng.random(n) < 0.05, 50.0, rng.gamma(20, 0.01, n))}
    for name, data in series.items():
        for blk in {1, stats.default_block_length(n), max(1, n // 3), n}:
            starts = rng.integers(0, n - blk + 1, size=(300, -(-n // blk)))
            direct = stats._gathered_medians(data, starts, blk)
            assert np.array_equal(stats._coverage_medians(data, starts.copy(), blk), direct), \
                (name, blk)


def test_median_ci_is_the_interval_of_the_gathered_medians():
    # the interval median_ci gave before the coverage medians: every resample's median
    # from its gathered values, with the same seeded block starts
    rng = np.random.default_rng(3)
    for data in (np.abs(rng.normal(0.002, 0.0004, 1000)), np.round(rng.gamma(20, 0.01, 777), 3)):
        n, blk = data.size, stats.default_block_length(data.size)
        starts = np.random.default_rng(stats.BOOTSTRAP_SEED).integers(
            0, n - blk + 1, size=(stats.BOOTSTRAP_RESAMPLES, -(-n // blk)))
        medians = np.median(data[stats._indices_of_starts(starts, n, blk)], axis=1)
        lo, hi = np.quantile(medians, [0.025, 0.975])
        assert stats.median_ci(data) == (float(lo), float(hi))


def test_a_series_with_nan_keeps_the_gathered_medians():
    data = np.array([1.0, np.nan, 3.0, 2.0, 5.0, 4.0])
    medians = stats._resample_statistics(data, 3, np.random.default_rng(0), 4, "median")
    starts = np.random.default_rng(0).integers(0, 4, size=(4, 2))
    assert np.array_equal(medians, stats._gathered_medians(data, starts, 3), equal_nan=True)


# --- long series: the median's bootstrap distribution computed, not drawn ----------------


def _drawn_median_interval(x, seed=0, confidence=0.95):
    """The moving-block bootstrap interval as drawn (2,000 resamples), whatever the length."""
    rng = np.random.default_rng(seed)
    medians = stats._resample_statistics(np.asarray(x, float), stats.default_block_length(len(x)),
                                         rng, stats.BOOTSTRAP_RESAMPLES, "median")
    alpha = (1 - confidence) / 2
    return tuple(np.quantile(medians, [alpha, 1 - alpha]))


def _long_series(rng, n):
    return {
        "ties": _log_like(rng, n, 0.0256),                                 # as MaxText prints
        "smooth": rng.gamma(20, 0.0256, n),
        "slow phases": np.repeat(rng.gamma(20, 0.0256, n // 50 + 1), 50)[:n]
        + rng.normal(0, 0.01, n),
        "moving average": 0.5 + np.convolve(rng.normal(0, 0.01, n + 9), np.ones(10), "valid"),
    }


def test_computed_median_interval_agrees_with_the_drawn_bootstrap():
    n = stats.COMPUTED_MIN_N + 1  # odd: one middle value
    for name, x in _long_series(np.random.default_rng(21), n).items():
        computed = stats.bootstrap_ci(x)
        assert computed == tuple(stats.median_quantiles(x, [0.025, 0.975]))
        drawn = _drawn_median_interval(x)
        width = drawn[1] - drawn[0]
        # the 2,000 draws' own noise on an end is ~1.5% of the width; a variance that missed
        # the autocorrelation would be 40% or more off on the dependent series
        assert computed[0] == pytest.approx(drawn[0], abs=0.1 * width + 1e-12), name
        assert computed[1] == pytest.approx(drawn[1], abs=0.1 * width + 1e-12), name


def test_computed_difference_interval_agrees_with_the_drawn_one():
    rng = np.random.default_rng(22)
    n = stats.COMPUTED_MIN_N + 2  # even: two middle values
    for name in ("smooth", "slow phases", "ties"):
        a, b = _long_series(rng, n)[name], _long_series(rng, n)[name] * 1.002
        d = stats.median_difference(a, b)
        ma = stats._resample_statistics(a, stats.default_block_length(n),
                                        np.random.default_rng(0), 2000, "median")
        mb = stats._resample_statistics(b, stats.default_block_length(n),
                                        np.random.default_rng(1), 2000, "median")
        lo, hi = np.quantile(mb - ma, [0.025, 0.975])
        assert d.diff == float(np.median(b) - np.median(a))
        assert (d.median_a, d.median_b) == (float(np.median(a)), float(np.median(b)))
        assert d.ci_low == pytest.approx(lo, abs=0.1 * (hi - lo) + 1e-12), name
        assert d.ci_high == pytest.approx(hi, abs=0.1 * (hi - lo) + 1e-12), name


def test_computed_median_intervals_cover_the_true_median():
    # 95% intervals over seeded series whose true median is 0: independent values, and
    # values correlated over 10 steps (an interval ignoring that would cover ~46% of them)
    n = stats.COMPUTED_MIN_N
    makers = {"independent": lambda r: r.normal(0, 1, n),
              "moving average": lambda r: np.convolve(r.normal(0, 1, n + 9), np.ones(10),
                                                      "valid")}
    for name, make in makers.items():
        hits = sum(lo <= 0 <= hi for lo, hi in
                   (stats.bootstrap_ci(make(np.random.default_rng(s))) for s in range(100)))
        assert hits >= 85, (name, hits)


def test_computed_distribution_of_a_constant_or_two_valued_series():
    n = stats.COMPUTED_MIN_N
    assert stats.bootstrap_ci([0.5] * n) == (0.5, 0.5)
    d = stats.median_difference([0.5] * n, [0.6] * n)
    assert (d.ci_low, d.ci_high) == pytest.approx((0.1, 0.1)) and d.significant
    # a median exactly between two values: the resample medians take either, or their mean
    x = np.tile([1.0, 2.0], n // 2)
    lo, hi = stats.bootstrap_ci(x)
    assert 1.0 <= lo < 1.5 < hi <= 2.0


def test_computed_path_is_used_from_its_threshold_on(monkeypatch):
    rng = np.random.default_rng(23)
    x = rng.gamma(20, 0.01, 3000)
    drawn = stats.bootstrap_ci(x)
    monkeypatch.setattr(stats, "COMPUTED_MIN_N", 3000)
    computed = stats.bootstrap_ci(x)
    assert computed != drawn and computed == tuple(stats.median_quantiles(x, [0.025, 0.975]))
    width = drawn[1] - drawn[0]  # 3,000 steps (~210 blocks of 14) are already close
    assert computed == pytest.approx(drawn, abs=0.15 * width)


def _unique_mann_whitney_u_p(a, b):
    """The rank test as it was before the sorted samples: ranks from ``np.unique`` (which
    puts the NaNs in one group of ties)."""
    xa, xb = np.asarray(a, float), np.asarray(b, float)
    n1, n2 = xa.size, xb.size
    _, inverse, ties = np.unique(np.concatenate([xa, xb]), return_inverse=True,
                                 return_counts=True)
    ranks = (np.cumsum(ties) - (ties - 1) / 2.0)[inverse]
    tie_term = float(np.sum(ties.astype(float) ** 3 - ties))
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    sigma_sq = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1)))
    z = max((abs(u1 - n1 * n2 / 2.0) - 0.5) / math.sqrt(sigma_sq), 0.0)
    return math.erfc(z / math.sqrt(2.0))


@pytest.mark.parametrize("n", [1, 2, 50, 3001])
def test_mann_whitney_from_sorted_samples_equals_the_ranked_one(n):
    rng = np.random.default_rng(n)
    a, b = rng.gamma(20, 0.01, n), rng.gamma(20, 0.0101, n + 5)  # no ties
    assert stats.mann_whitney_u_p(a, b) == pytest.approx(_old_mann_whitney_u_p(a, b),
                                                        rel=1e-9, abs=1e-300)
    b[1] = a[-1]  # a tie across the samples, and NaNs, tied with each other
    a[0], b[-1], b[-2] = math.nan, math.nan, math.nan
    assert stats.mann_whitney_u_p(a, b) == pytest.approx(_unique_mann_whitney_u_p(a, b),
                                                        rel=1e-9, abs=1e-300)


def test_a_long_run_against_a_short_one_mixes_computed_and_drawn():
    rng = np.random.default_rng(24)
    long, short = rng.gamma(20, 0.0256, stats.COMPUTED_MIN_N + 7), rng.gamma(20, 0.026, 3000)
    d = stats.median_difference(long, short)
    ma = stats._resample_statistics(long, stats.default_block_length(long.size),
                                    np.random.default_rng(5), 2000, "median")
    mb = stats._resample_statistics(short, stats.default_block_length(short.size),
                                    np.random.default_rng(6), 2000, "median")
    lo, hi = np.quantile(mb - ma, [0.025, 0.975])
    assert d.ci_low == pytest.approx(lo, abs=0.1 * (hi - lo))
    assert d.ci_high == pytest.approx(hi, abs=0.1 * (hi - lo))


# --- Student's t (the test of several runs a side) ------------------------------------


@pytest.mark.parametrize(("df", "table"), [(1, 12.706), (2, 4.303), (10, 2.228),
                                           (30, 2.042), (1e6, 1.960)])
def test_t_quantile_matches_the_table(df, table):
    assert stats.t_quantile(0.975, df) == pytest.approx(table, abs=5e-4)
    assert stats.t_quantile(0.025, df) == pytest.approx(-table, abs=5e-4)


@pytest.mark.parametrize(("t", "df", "p"), [(2.228, 10, 0.05), (12.706, 1, 0.05),
                                            (3.169, 10, 0.01), (1.0, 1, 0.5), (0.0, 5, 1.0)])
def test_t_two_sided_p_matches_the_table(t, df, p):
    assert stats.t_two_sided_p(t, df) == pytest.approx(p, abs=5e-4)
    assert stats.t_two_sided_p(-t, df) == stats.t_two_sided_p(t, df)


def test_t_quantile_inverts_t_two_sided_p():
    for df in (1.5, 3.96, 17.0):
        t = stats.t_quantile(0.99, df)
        assert stats.t_two_sided_p(t, df) == pytest.approx(0.02, rel=1e-9)
    assert stats.t_quantile(0.5, 4) == 0.0
    assert stats.t_two_sided_p(math.inf, 4) == 0.0
