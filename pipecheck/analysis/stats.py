"""Pure statistics over raw samples.

Everything here is a function of its inputs: no clocks, no globals. The
headline of a distribution is its median; a single stalled sample must not
move it. Intervals are bootstrap intervals with a seeded generator, so a
report is reproducible from the stored samples.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

# Quality thresholds (named, so reports and tests speak the same language).
MIN_STEADY_SAMPLES = 10
"""Fewer steady-state samples than this and the result carries a warning."""

LARGE_SPREAD_IQR_FRACTION = 0.10
"""IQR at or above this fraction of the median is reported as a large spread (cf. pyperf)."""

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


@dataclasses.dataclass(frozen=True)
class Summary:
    """Order statistics of a set of raw samples (seconds or any unit)."""

    median: float
    p10: float
    p90: float
    p99: float
    iqr: float
    mean: float
    n: int


def summarize(samples: Sequence[float]) -> Summary:
    """Median, percentiles, IQR and mean of ``samples``; NaNs for an empty input."""
    arr = np.asarray(samples, dtype=float)
    if arr.size == 0:
        nan = math.nan
        return Summary(nan, nan, nan, nan, nan, nan, 0)
    p10, p25, p50, p75, p90, p99 = np.percentile(arr, [10, 25, 50, 75, 90, 99])
    return Summary(
        median=float(p50),
        p10=float(p10),
        p90=float(p90),
        p99=float(p99),
        iqr=float(p75 - p25),
        mean=float(arr.mean()),
        n=int(arr.size),
    )


def quality_warnings(samples: Sequence[float], what: str = "step time") -> list[str]:
    """Warnings, as data, about how far a distribution can be trusted."""
    warnings: list[str] = []
    s = summarize(samples)
    if s.n < MIN_STEADY_SAMPLES:
        warnings.append(
            f"only {s.n} steady-state {what} samples (fewer than {MIN_STEADY_SAMPLES}); "
            "run more steps for a trustworthy median"
        )
    if s.n and s.median > 0 and s.iqr >= LARGE_SPREAD_IQR_FRACTION * s.median:
        warnings.append(
            f"large spread: {what} IQR is {100 * s.iqr / s.median:.0f}% of the median "
            f"(>= {100 * LARGE_SPREAD_IQR_FRACTION:.0f}%); the machine may be busy"
        )
    return warnings


def _block_resample_indices(
    n: int, block: int, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """Index matrix (resamples x n) of moving-block bootstrap resamples of a length-n series."""
    block = max(1, min(block, n))
    n_blocks = math.ceil(n / block)
    starts = rng.integers(0, n - block + 1, size=(resamples, n_blocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(resamples, -1)
    return idx[:, :n]


def default_block_length(n: int) -> int:
    """Block length for step-time series: ~n^(1/3), the usual rate for the median."""
    return max(1, round(n ** (1.0 / 3.0)))


def bootstrap_ci(
    samples: Sequence[float],
    statistic: str = "median",
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    block: int | None = None,
) -> tuple[float, float]:
    """Moving-block bootstrap confidence interval of the median (or the mean).

    Blocks keep neighbouring steps together, so autocorrelated step times
    (a slow phase lasting several steps) do not give a falsely narrow interval.
    """
    arr = np.asarray(samples, dtype=float)
    if arr.size == 0:
        return (math.nan, math.nan)
    if arr.size == 1:
        return (float(arr[0]), float(arr[0]))
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be 'median' or 'mean', got {statistic!r}")
    rng = np.random.default_rng(seed)
    blk = block or default_block_length(arr.size)
    resampled = arr[_block_resample_indices(arr.size, blk, rng, resamples)]
    values = np.median(resampled, axis=1) if statistic == "median" else resampled.mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def median_ci(
    samples: Sequence[float],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    block: int | None = None,
) -> tuple[float, float]:
    """Moving-block bootstrap confidence interval of the median."""
    return bootstrap_ci(samples, "median", confidence, resamples, seed, block)


@dataclasses.dataclass(frozen=True)
class MedianDifference:
    """B minus A: the difference of medians with its bootstrap interval."""

    diff: float
    ci_low: float
    ci_high: float
    relative: float
    p_value: float
    significant: bool


def median_difference(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> MedianDifference:
    """Difference of medians (b - a), block-bootstrap interval and Mann-Whitney p-value.

    Significant only when the interval excludes zero *and* the rank test agrees,
    so neither a heavy tail nor autocorrelation alone produces a false speed-up.
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        nan = math.nan
        return MedianDifference(nan, nan, nan, nan, nan, False)
    rng = np.random.default_rng(seed)
    ba, bb = default_block_length(xa.size), default_block_length(xb.size)
    ma = np.median(xa[_block_resample_indices(xa.size, ba, rng, resamples)], axis=1)
    mb = np.median(xb[_block_resample_indices(xb.size, bb, rng, resamples)], axis=1)
    diffs = mb - ma
    alpha = (1.0 - confidence) / 2.0
    lo, hi = (float(v) for v in np.quantile(diffs, [alpha, 1.0 - alpha]))
    med_a = float(np.median(xa))
    diff = float(np.median(xb)) - med_a
    p = mann_whitney_u_p(xa, xb)
    significant = (lo > 0 or hi < 0) and p < (1.0 - confidence)
    rel = diff / med_a if med_a else math.nan
    return MedianDifference(diff, lo, hi, rel, p, significant)


def mann_whitney_u_p(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided Mann-Whitney U test p-value (normal approximation, tie-corrected)."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    n1, n2 = xa.size, xb.size
    if n1 == 0 or n2 == 0:
        return math.nan
    both = np.concatenate([xa, xb])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(both.size)
    sorted_vals = both[order]
    # average ranks for ties
    i = 0
    tie_term = 0.0
    while i < both.size:
        j = i
        while j + 1 < both.size and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        t = j - i + 1
        tie_term += t**3 - t
        i = j + 1
    r1 = ranks[:n1].sum()
    u1 = r1 - n1 * (n1 + 1) / 2.0
    mu = n1 * n2 / 2.0
    n = n1 + n2
    sigma_sq = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if sigma_sq <= 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(sigma_sq)
    z = max(z, 0.0)
    return float(math.erfc(z / math.sqrt(2.0)))


OUTLIER_ROBUST_Z = 3.5
"""Modified z-score (0.6745 * |x - median| / MAD) above which a sample is an outlier
(Iglewicz and Hoaglin's customary cut-off)."""

OUTLIER_MIN_RELATIVE = 0.25
"""...and it must also lie at least this fraction of the median away from the median, so a
very steady series (tiny MAD) does not call a 3% blip an outlier."""


def robust_outliers(
    samples: Sequence[float],
    z: float = OUTLIER_ROBUST_Z,
    min_relative: float = OUTLIER_MIN_RELATIVE,
) -> list[int]:
    """Indices of samples far from the median, by modified z-score *and* relative distance.

    Both tests must flag a sample: the modified z-score (median and MAD, so the outliers
    themselves do not widen the yardstick) adapts to a noisy series, the relative distance
    to a very steady one. With a MAD of zero only the relative test applies.
    """
    arr = np.asarray(samples, dtype=float)
    if arr.size < 3:
        return []
    med = float(np.median(arr))
    mad = float(np.median(np.abs(arr - med)))
    out = []
    for i, x in enumerate(arr):
        dev = abs(float(x) - med)
        if med > 0 and dev < min_relative * med:
            continue
        if mad > 0 and 0.6745 * dev / mad <= z:
            continue
        if dev == 0:
            continue
        out.append(i)
    return out
