"""Pure statistics over raw samples (order statistics, bootstrap intervals, rank test).

Everything here is a function of its inputs: no clocks, no globals. The
headline of a distribution is its median; a single stalled sample must not
move it. Intervals are bootstrap intervals with a seeded generator, so a
report is reproducible from the stored samples.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Callable, Iterator, Sequence, Union

import numpy as np

from pipecheck.progress import NO_PROGRESS, Progress

Samples = Union[Sequence[float], np.ndarray]
"""Raw samples: a list, a tuple or a numpy array."""

# Quality thresholds (named, so reports and tests speak the same language).
MIN_STEADY_SAMPLES = 10
"""Fewer steady-state samples than this and the result carries a warning."""

LARGE_SPREAD_IQR_FRACTION = 0.10
"""IQR at or above this fraction of the median is reported as a large spread (cf. pyperf)."""

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


@dataclasses.dataclass(frozen=True)
class Summary:
    """Order statistics of a set of raw samples (seconds or any unit). Records store it
    under the names ``named`` gives (``median_s``, ...), and ``records.common.Distribution``
    derives it from the raw samples it keeps."""

    median: float
    mean: float
    p10: float
    p90: float
    p99: float
    iqr: float
    n: int

    @classmethod
    def names(cls, unit: str) -> tuple[str, ...]:
        """The statistics' names with a unit suffix (``median_s`` for ``"_s"``); the count
        ``n`` has no unit."""
        return tuple(f.name if f.name == "n" else f.name + unit for f in dataclasses.fields(cls))

    def named(self, unit: str) -> dict[str, float]:
        """The statistics under ``names(unit)``, in field order."""
        values = (getattr(self, f.name) for f in dataclasses.fields(self))
        return dict(zip(self.names(unit), values, strict=True))


def summarize(samples: Samples) -> Summary:
    """Median, percentiles, IQR and mean of ``samples``; NaNs for an empty input."""
    arr = np.asarray(samples, dtype=float)
    if arr.size == 0:
        nan = math.nan
        return Summary(nan, nan, nan, nan, nan, nan, 0)
    p10, p25, p50, p75, p90, p99 = np.percentile(arr, [10, 25, 50, 75, 90, 99])
    return Summary(
        median=float(p50),
        mean=float(arr.mean()),
        p10=float(p10),
        p90=float(p90),
        p99=float(p99),
        iqr=float(p75 - p25),
        n=int(arr.size),
    )


def quality_warnings(s: Summary, what: str = "step time") -> list[str]:
    """Warnings, as data, about how far a distribution (its summary) can be trusted."""
    warnings: list[str] = []
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


RESAMPLE_CHUNK_ELEMENTS = 1 << 22
"""Resampled values (or block starts) held at once while bootstrapping: 4M numbers, 32 MB.
Up to ~90,000 steps all block starts fit in one draw, so the generator is drawn exactly
as before the chunking (same intervals); above, a chunk of resamples at a time."""

DIRECT_MAX_N = 2000
"""Up to this many samples a resample's median is taken from its gathered values; above,
from the ranks near the median only (``_window_medians``): the same numbers, found without
touching the values far from the median (measured faster from ~1,000 samples on: 4x at
10,000)."""


def _block_resample_indices(
    n: int, block: int, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """Index matrix (resamples x n) of moving-block bootstrap resamples of a length-n series."""
    block = max(1, min(block, n))
    n_blocks = math.ceil(n / block)
    starts = rng.integers(0, n - block + 1, size=(resamples, n_blocks))
    return _indices_of_starts(starts, n, block)


def _indices_of_starts(starts: np.ndarray, n: int, block: int) -> np.ndarray:
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(starts.shape[0], -1)
    return idx[:, :n]


def _block_starts(n: int, block: int, rng: np.random.Generator,
                  resamples: int) -> Iterator[np.ndarray]:
    """The block starts of ``resamples`` moving-block resamples, a chunk of rows at a time
    (one draw, as ``_block_resample_indices`` makes it, when they fit in one chunk)."""
    n_blocks = math.ceil(n / block)
    rows = max(1, RESAMPLE_CHUNK_ELEMENTS // n_blocks)
    for first in range(0, resamples, rows):
        yield rng.integers(0, n - block + 1, size=(min(rows, resamples - first), n_blocks))


COVERAGE_MIN_RESAMPLES = 64
"""Resamples per chunk from which ``_coverage_medians`` is used: its running sums cost a
Python step per value of the series whatever the number of resamples, so they pay off
only over many resamples at once (2,000 in one chunk up to ``DIRECT_MAX_N`` values)."""

WINDOW_PILOT_RESAMPLES = 64
"""Resamples whose middles size the rank window of ``_window_medians`` (the others that
fall outside it are computed directly, so a small pilot costs speed, never exactness)."""


@dataclasses.dataclass(frozen=True)
class _Ranked:
    """A series with each value's rank (ties broken by position): computed once, used by
    every chunk of resamples."""

    values: np.ndarray
    sorted_values: np.ndarray
    rank: np.ndarray

    @classmethod
    def of(cls, arr: np.ndarray) -> _Ranked:
        order = np.argsort(arr, kind="stable")
        rank = np.empty(arr.size, dtype=np.int64)
        rank[order] = np.arange(arr.size)
        return cls(arr, arr[order], rank)

    def prefix_below(self, r: int) -> np.ndarray:
        """prefix[i]: how many of the first i values have a rank below ``r`` (int32: the
        random look-ups into it stay in cache longer)."""
        return np.concatenate(([0], np.cumsum(self.rank < r, dtype=np.int32)))


def _window_medians(arr: np.ndarray | _Ranked, starts: np.ndarray, block: int) -> np.ndarray:
    """Medians of the moving-block resamples with these ``starts`` (rows), equal to
    ``np.median(arr[_indices_of_starts(starts, n, block)], axis=1)`` without building it.

    Each value is replaced by its rank (ties broken by position), so a resample's median
    is the value at its middle rank(s). Counting, per block, the ranks below a window around
    the middle needs only prefix sums; only the ranks inside the window are gathered and
    partitioned. The window is sized from a pilot of resamples; a resample whose middle
    falls outside it is computed directly. Work per resample: its number of blocks plus
    the window, not n."""
    ranked = arr if isinstance(arr, _Ranked) else _Ranked.of(arr)
    n = ranked.values.size
    n_blocks = starts.shape[1]
    last_length = n - (n_blocks - 1) * block
    starts = starts.astype(np.int32 if n < 2**31 - 1 else np.int64)
    k1, k2 = (n - 1) // 2, n // 2

    def per_resample(prefix: np.ndarray, rows: slice = slice(None)) -> np.ndarray:
        """Per resample: how many of its values the prefix counts."""
        full = np.take(prefix[block:] - prefix[: prefix.size - block], starts[rows, :-1])
        tail = starts[rows, -1]
        return full.sum(axis=1) + (np.take(prefix, tail + last_length) - np.take(prefix, tail))

    # a resample's middle rank moves by as much as its count below the sample's middle
    shift = k2 - per_resample(ranked.prefix_below(k2), slice(0, WINDOW_PILOT_RESAMPLES))
    reach = int(np.abs(shift).max())
    margin = 2 * reach + 4 * math.isqrt(max(1, reach) * block) + 2 * block + 64
    lo, hi = max(0, k2 + int(shift.min()) - margin), min(n, k2 + int(shift.max()) + margin + 1)
    prefix_lo = ranked.prefix_below(lo)
    below = per_resample(prefix_lo)
    # the ranks inside the window, in position order, and where each block's run of them
    # begins in that list (prefix_in) and how long it is (per_block)
    inside_ranks = ranked.rank[(ranked.rank >= lo) & (ranked.rank < hi)]
    prefix_in = ranked.prefix_below(hi) - prefix_lo
    del prefix_lo
    first = np.take(prefix_in, starts)
    per_block = np.take(prefix_in, starts + block) if n_blocks > 1 else first
    if n_blocks > 1:
        per_block[:, -1] = np.take(prefix_in, starts[:, -1] + last_length)
    else:
        per_block = np.take(prefix_in, starts + last_length)
    per_block -= first
    inside = per_block.sum(axis=1)
    out = np.empty(starts.shape[0])
    for r in range(starts.shape[0]):
        a, b = k1 - below[r], k2 - below[r]
        if a < 0 or b >= inside[r]:  # the middle is outside the window: do it directly
            out[r] = np.median(ranked.values[_indices_of_starts(starts[r : r + 1], n, block)])
            continue
        counts = per_block[r]
        gather = np.repeat(first[r] - np.cumsum(counts) + counts, counts) + np.arange(inside[r])
        ranks = np.partition(inside_ranks[gather], (a, b) if a != b else a)
        out[r] = (ranked.sorted_values[ranks[a]] + ranked.sorted_values[ranks[b]]) / 2.0
    return out


def _gathered_medians(arr: np.ndarray, starts: np.ndarray, block: int) -> np.ndarray:
    """Medians of the moving-block resamples with these ``starts`` (rows), from their
    gathered values."""
    return np.median(arr[_indices_of_starts(starts, arr.size, block)], axis=1)


def _coverage_medians(arr: np.ndarray, starts: np.ndarray, block: int) -> np.ndarray:
    """``_gathered_medians`` (NaN-free ``arr``) without gathering or partitioning.

    A resample holds each position of the series as many times as its blocks cover it. With
    positions as rows and resamples as columns: the full blocks' starts counted per position
    (one ``bincount``; each also ends ``block`` rows later) and the short last block's start
    and end give, by a running sum down the positions, each position's copies per resample.
    Each value has a rank (ties broken by position); a running sum of the copies in rank
    order gives, per resample, how many of its values have rank <= r, and its middle ranks
    are where that count passes (n - 1) // 2 and n // 2. That sum runs over the ranks
    between two that bracket every resample's middle (``_middle_bracket``), from the count
    below the first. Running sums add one row of all resamples at a time in 16-bit counts
    (numpy's own cumsum down axis 0 is many times slower)."""
    n = arr.size
    resamples, n_blocks = starts.shape
    count: type[np.signedinteger[Any]] = np.int16 if n < 2**15 else np.int32
    columns = np.arange(resamples)
    ends = starts + block
    ends[:, -1] = starts[:, -1] + n - (n_blocks - 1) * block  # the last block is short
    full = np.bincount((starts[:, :-1] * resamples + columns[:, None]).ravel(),
                       minlength=(n + 1) * resamples).astype(count).reshape(n + 1, resamples)
    edges = full.copy()
    edges[block:] -= full[: n + 1 - block]
    flat = edges.reshape(-1)  # one short block per resample: no index repeats here
    flat[starts[:, -1] * resamples + columns] += 1
    flat[ends[:, -1] * resamples + columns] -= 1
    copies = np.empty((n, resamples), dtype=count)
    running = np.zeros(resamples, dtype=count)
    for i in range(n):
        running += edges[i]
        copies[i] = running
    order = np.argsort(arr, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    k1, k2 = (n - 1) // 2, n // 2
    lo, hi, below_lo = _middle_bracket(rank, starts, ends, block, k1, k2)
    ranked_copies = copies[order[lo:hi]]
    at_or_below = copies[: hi - lo]  # reused: row j, values of rank <= lo + j per resample
    running[:] = below_lo
    for j in range(hi - lo):
        running += ranked_copies[j]
        at_or_below[j] = running
    low = lo + np.count_nonzero(at_or_below <= k1, axis=0)
    high = lo + np.count_nonzero(at_or_below <= k2, axis=0)
    ranked = arr[order]
    return (ranked[low] + ranked[high]) / 2.0


def _middle_bracket(rank: np.ndarray, starts: np.ndarray, ends: np.ndarray, block: int,
                    k1: int, k2: int) -> tuple[int, int, np.ndarray]:
    """Ranks ``lo`` < ``hi`` such that every resample has at most ``k1`` values of rank
    below ``lo`` and more than ``k2`` below ``hi`` (its middle ranks lie between), and the
    count below ``lo`` per resample; widened from a narrow guess until it holds."""
    n = rank.size

    def below(r: int) -> np.ndarray:
        prefix = np.concatenate(([0], np.cumsum(rank < r)))
        return (np.take(prefix, ends) - np.take(prefix, starts)).sum(axis=1)

    reach = max(8, math.isqrt(n * block))  # about the spread of the middle ranks
    while True:
        lo, hi = max(0, k1 - reach), min(n, k2 + reach + 1)
        below_lo = below(lo)
        if (below_lo <= k1).all() and (hi == n or (below(hi) > k2).all()):
            return lo, hi, below_lo
        reach *= 2


def _resample_statistics(arr: np.ndarray, block: int, rng: np.random.Generator,
                         resamples: int, statistic: str,
                         advance: Callable[[int], None] | None = None) -> np.ndarray:
    """The statistic (median or mean) of each of ``resamples`` moving-block resamples,
    a chunk of resamples at a time (bounded memory at any length)."""
    n = arr.size
    block = max(1, min(block, n))
    prefix = np.concatenate(([0.0], np.cumsum(arr))) if statistic == "mean" else None
    ranked = _Ranked.of(arr) if statistic == "median" and n > DIRECT_MAX_N else None
    out = []
    for starts in _block_starts(n, block, rng, resamples):
        if statistic == "mean":
            assert prefix is not None
            lengths = np.full(starts.shape[1], block)
            lengths[-1] = n - (starts.shape[1] - 1) * block
            out.append((prefix[starts + lengths] - prefix[starts]).sum(axis=1) / n)
        elif n <= DIRECT_MAX_N:
            rows = max(1, RESAMPLE_CHUNK_ELEMENTS // n)
            by_coverage = rows >= COVERAGE_MIN_RESAMPLES and not np.isnan(arr).any()
            medians = _coverage_medians if by_coverage else _gathered_medians
            out += [medians(arr, starts[i : i + rows], block)
                    for i in range(0, starts.shape[0], rows)]
        else:
            assert ranked is not None
            out.append(_window_medians(ranked, starts, block))
        if advance is not None:
            advance(starts.shape[0])
    return np.concatenate(out)



# --- the median's bootstrap distribution of a long series, computed ------------------------

COMPUTED_MIN_N = 50_000
"""From this many samples on, the moving-block bootstrap distribution of the median is
computed (``median_quantiles``) instead of drawn: drawing 2,000 resamples of a million steps
takes seconds (20 million block starts), computing it a sort and a few passes. There a
resample has at least 1,357 blocks (n^(2/3)), so the normal law of its block sums is far
closer than the 2,000 draws' own noise (tested against the draws); below, the resamples are
drawn, as every interval was before."""

QUANTILE_GRID = 1000
"""Points of each median's bootstrap quantile function from which the interval of the
difference of two medians is taken (all pairs: a million differences; the grid's step,
0.1% of probability, is well inside the 2.5% tail the interval cuts)."""

TAIL_Z = 6.0
"""The quantile function is computed over the ranks within this many standard deviations
of the middle: beyond, a resample's median falls with probability under 1e-8."""


def _count_moments(arr: np.ndarray, t: float, block: int) -> tuple[float, float]:
    """Mean and variance, over the moving-block bootstrap, of how many values at or below
    ``t`` a resample holds: its blocks are drawn independently, each starting anywhere in
    ``[0, n - block]`` (the last one cut short), so both are sums over its blocks of the
    mean and variance of the block counts over all starts (exact, from prefix sums)."""
    n = arr.size
    n_blocks = math.ceil(n / block)
    last = n - (n_blocks - 1) * block
    prefix: np.ndarray[Any, np.dtype[np.signedinteger[Any]]] = np.empty(
        n + 1, dtype=np.int32 if n < 2**31 - 1 else np.int64)
    prefix[0] = 0
    np.cumsum(arr <= t, out=prefix[1:])
    starts = n - block + 1
    mean = var = 0.0
    lengths = ((block, n_blocks),) if last == block else ((block, n_blocks - 1), (last, 1))
    for length, times in lengths:
        # exact integer sums (numpy's own loop: a float dot would wake the BLAS threads,
        # which then spin on the CPU after it)
        counts = (prefix[length : length + starts] - prefix[:starts]).astype(np.int64)
        m = int(counts.sum()) / starts
        mean += times * m
        var += times * max(0.0, int(np.dot(counts, counts)) / starts - m * m)
    return mean, var


def _normal_quantiles(probs: np.ndarray) -> np.ndarray:
    """Phi^-1 of each probability (-inf at 0, inf at 1)."""
    inv = statistics.NormalDist().inv_cdf
    return np.array([inv(q) if 0 < q < 1 else (-math.inf if q <= 0 else math.inf)
                     for q in probs.tolist()])


def median_quantiles(samples: Samples, probs: Samples, block: int | None = None) -> np.ndarray:
    """Quantiles at ``probs`` of the median of a moving-block bootstrap resample of
    ``samples`` (NaN-free, in series order), computed rather than drawn.

    A resample's k-th smallest value (0-based) is at or below ``t`` exactly when it holds
    more than k values at or below ``t``. That count is a sum of independent block counts,
    whose mean and variance over the bootstrap are exact (``_count_moments``); with many
    blocks it is normal, so P(k-th value <= t) = Phi((mean(t) - k - 1/2) / sd(t)) for every
    value ``t`` near the middle. The moments are computed at the middle value(s) and at the
    nearest distinct values on each side (where ties put the jumps); elsewhere the mean
    is the rank plus the bootstrap's small edge shift and the variance, both interpolated
    between those. The median of an even count is the mean of the two middle values'
    quantiles (adjacent order statistics, which move together)."""
    x = np.asarray(samples, dtype=float)
    return _median_quantiles(x, np.sort(x), np.asarray(probs, dtype=float), block)


def _median_quantiles(x: np.ndarray, s: np.ndarray, p: np.ndarray,
                      block: int | None = None) -> np.ndarray:
    """``median_quantiles`` of ``x``, whose sorted values ``s`` are given."""
    n = s.size
    blk = max(1, min(block or default_block_length(n), n))
    k1, k2 = (n - 1) // 2, n // 2
    first, past = int(np.searchsorted(s, s[k1], "left")), int(np.searchsorted(s, s[k2], "right"))
    ts = np.unique([*s[max(0, first - 1) : first], s[k1], s[k2], *s[past : past + 1]])
    moments = np.array([_count_moments(x, t, blk) for t in ts])
    at_or_below = np.searchsorted(s, ts, side="right").astype(float)
    shift, var = moments[:, 0] - at_or_below, moments[:, 1]
    reach = int(TAIL_Z * math.sqrt(var.max()) + np.abs(shift).max()) + 2
    window = s[max(0, k1 - reach) : min(n, k2 + reach + 1)]
    ranks = np.searchsorted(s, window, side="right").astype(float)
    mean_w = ranks + np.interp(ranks, at_or_below, shift)
    sd_w = np.sqrt(np.interp(ranks, at_or_below, var))
    z_p = _normal_quantiles(p)
    out = np.zeros(p.size)
    for k in (k1, k2):
        # the first value whose P(k-th value <= it) = Phi(z) reaches each probability
        gap = mean_w - k - 0.5
        z = np.divide(gap, sd_w, out=np.where(gap > 0, np.inf, -np.inf), where=sd_w > 0)
        z = np.maximum.accumulate(z)
        out += window[np.minimum(np.searchsorted(z, z_p, side="left"), window.size - 1)]
    return out / 2.0


def _computed(x: np.ndarray, s: np.ndarray) -> bool:
    """Whether the median's bootstrap distribution of ``x`` (sorted: ``s``, NaNs last) is
    computed (``median_quantiles``) rather than drawn."""
    return x.size >= COMPUTED_MIN_N and not np.isnan(s[-1])


def _median_draws(x: np.ndarray, s: np.ndarray, rng: np.random.Generator, resamples: int,
                  advance: Callable[[int], None]) -> np.ndarray:
    """Values whose spread is the bootstrap distribution of the median of ``x``: the
    computed quantiles on a grid of ``QUANTILE_GRID`` probabilities, or the medians of
    ``resamples`` drawn moving-block resamples."""
    if _computed(x, s):
        advance(resamples)
        return _median_quantiles(x, s, (np.arange(QUANTILE_GRID) + 0.5) / QUANTILE_GRID)
    return _resample_statistics(x, default_block_length(x.size), rng, resamples, "median",
                                advance)


def default_block_length(n: int) -> int:
    """Block length for step-time series: ~n^(1/3), the usual rate for the median."""
    return max(1, round(n ** (1.0 / 3.0)))


def bootstrap_ci(
    samples: Samples,
    statistic: str = "median",
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    block: int | None = None,
    progress: Progress = NO_PROGRESS,
) -> tuple[float, float]:
    """Moving-block bootstrap confidence interval of the median (or the mean).

    Blocks keep neighbouring steps together, so autocorrelated step times
    (a slow phase lasting several steps) do not give a falsely narrow interval. From
    ``COMPUTED_MIN_N`` NaN-free samples on, the median's interval is the computed bootstrap
    distribution's (``median_quantiles``; ``resamples`` and ``seed`` do not apply).
    """
    arr = np.asarray(samples, dtype=float)
    if arr.size == 0:
        return (math.nan, math.nan)
    if arr.size == 1:
        return (float(arr[0]), float(arr[0]))
    if statistic not in ("median", "mean"):
        raise ValueError(f"statistic must be 'median' or 'mean', got {statistic!r}")
    if statistic == "median" and arr.size >= COMPUTED_MIN_N and not np.isnan(arr).any():
        alpha = (1.0 - confidence) / 2.0
        lo, hi = median_quantiles(arr, [alpha, 1.0 - alpha], block)
        return (float(lo), float(hi))
    rng = np.random.default_rng(seed)
    blk = block or default_block_length(arr.size)
    with progress.task(f"bootstrapping the {statistic}", resamples, " resamples") as task:
        values = _resample_statistics(arr, blk, rng, resamples, statistic, task.advance)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(values, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def median_ci(
    samples: Samples,
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
    median_a: float = math.nan
    median_b: float = math.nan


def median_difference(
    a: Samples,
    b: Samples,
    confidence: float = 0.95,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    progress: Progress = NO_PROGRESS,
    what: str = "the median difference",
) -> MedianDifference:
    """Difference of medians (b - a), block-bootstrap interval and Mann-Whitney p-value.

    Significant only when the interval excludes zero *and* the rank test agrees,
    so neither a heavy tail nor autocorrelation alone produces a false speed-up. A run of
    ``COMPUTED_MIN_N`` samples or more has its median's bootstrap distribution computed
    (``_median_draws``), a shorter one drawn.
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        nan = math.nan
        return MedianDifference(nan, nan, nan, nan, nan, False)
    alpha = (1.0 - confidence) / 2.0
    sa, sb = np.sort(xa), np.sort(xb)  # NaNs last
    rng = np.random.default_rng(seed)
    with progress.task(f"bootstrapping {what}", 2 * resamples, " resamples") as task:
        ma = _median_draws(xa, sa, rng, resamples, task.advance)
        mb = _median_draws(xb, sb, rng, resamples, task.advance)
    # resample i of A against resample i of B; a computed distribution against every value
    # of the other (its grid points are not draws to pair)
    diffs = (mb[:, None] - ma[None, :]).ravel() if _computed(xa, sa) or _computed(xb, sb) \
        else mb - ma
    lo, hi = (float(v) for v in np.quantile(diffs, [alpha, 1.0 - alpha]))
    med_a, med_b = float(np.median(sa)), float(np.median(sb))
    diff = med_b - med_a
    p = _mann_whitney_sorted(sa, sb)
    significant = (lo > 0 or hi < 0) and p < (1.0 - confidence)
    rel = diff / med_a if med_a else math.nan
    return MedianDifference(diff, lo, hi, rel, p, significant, med_a, med_b)


def mann_whitney_u_p(a: Samples, b: Samples) -> float:
    """Two-sided Mann-Whitney U test p-value (normal approximation, tie-corrected)."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.size == 0 or xb.size == 0:
        return math.nan
    return _mann_whitney_sorted(np.sort(xa), np.sort(xb))


def _mann_whitney_sorted(sa: np.ndarray, sb: np.ndarray) -> float:
    """``mann_whitney_u_p`` of two samples given sorted (NaNs last, as ``np.sort`` puts them).
    U counts, over the pairs, the B values below each A value (ties count a half): from the
    sorted samples, O(n log n), no n x m work; the tie correction from their sorted union."""
    n1, n2 = sa.size, sb.size
    firsts = np.flatnonzero(np.concatenate(([True], sa[1:] != sa[:-1])))  # A's distinct values
    copies = np.diff(np.append(firsts, n1))
    values = sa[firsts]
    halves = np.searchsorted(sb, values, "left") + np.searchsorted(sb, values, "right")
    u1 = float(np.dot(copies, halves)) / 2.0
    both = np.sort(np.concatenate([sa, sb]), kind="stable")  # a merge of two sorted runs
    same = both[1:] == both[:-1]
    same |= np.isnan(both[1:]) & np.isnan(both[:-1])
    edges = np.flatnonzero(~same)
    ties = np.diff(np.concatenate(([-1], edges, [both.size - 1])))
    tie_term = float(np.sum(ties.astype(float) ** 3 - ties))
    mu = n1 * n2 / 2.0
    n = n1 + n2
    sigma_sq = n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if sigma_sq <= 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / math.sqrt(sigma_sq)
    z = max(z, 0.0)
    return float(math.erfc(z / math.sqrt(2.0)))


BETA_FRACTION_TERMS = 300
"""Terms of the incomplete beta's continued fraction at most: it converges in a few dozen
for the degrees of freedom a t-test of run medians has (1 to a few hundred)."""


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz), for
    ``x < (a + 1) / (a + b + 2)`` where it converges fast."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, BETA_FRACTION_TERMS):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return h


def regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b), the regularized incomplete beta function (0 at x <= 0, 1 at x >= 1)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (any df > 0)."""
    if math.isinf(t):
        return 0.0
    return min(1.0, regularized_beta(df / (df + t * t), df / 2.0, 0.5))


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (0 < q < 1), by
    bisection on ``t_two_sided_p`` to 1e-12 of its scale."""
    if q == 0.5:
        return 0.0
    tail = 2.0 * min(q, 1.0 - q)  # the two-sided p at the quantile
    hi = 1.0
    while t_two_sided_p(hi, df) > tail:
        hi *= 2.0
    lo = 0.0
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if t_two_sided_p(mid, df) > tail else (lo, mid)
    t = (lo + hi) / 2.0
    return t if q > 0.5 else -t
