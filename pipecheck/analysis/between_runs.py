"""Several runs a side: is B's step time different from A's beyond how much runs of one
side differ among themselves? Pure.

A single run's steps show only the noise within that run; two runs of one workload also
differ by their start-up, compile and the machine's load at the time (a 5% longer chain
measured +0.4% to +13.2% from one pair of single runs to the next: benchmarks/diff_power.py).
With several runs a side that between-run spread is measured: the test is Welch's t on the
logarithms of the runs' steady-state medians (step times are compared as ratios, and a
log makes a slow run and a fast one weigh alike), with its interval of the relative change
at the diff's confidence. With one run on one side, the other side's runs give the spread
for both (a t-test with that side's variance and its degrees of freedom).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from pipecheck import stats
from pipecheck.records.diff import BetweenRuns

MIN_RUNS_FOR_SPREAD = 2
"""Runs a side needs to measure the between-run spread (a sample variance needs two)."""


def _spread(la: np.ndarray, lb: np.ndarray) -> tuple[float, float, str]:
    """(standard error of the difference of mean logs, degrees of freedom, whose runs
    measured the spread)."""
    na, nb = la.size, lb.size
    if na >= MIN_RUNS_FOR_SPREAD and nb >= MIN_RUNS_FOR_SPREAD:
        wa, wb = float(np.var(la, ddof=1)) / na, float(np.var(lb, ddof=1)) / nb
        se2 = wa + wb
        welch = se2 * se2 / (wa * wa / (na - 1) + wb * wb / (nb - 1)) if se2 > 0 else 0.0
        return math.sqrt(se2), (welch or float(na + nb - 2)), "A and B"
    many, side = (la, "A") if na >= MIN_RUNS_FOR_SPREAD else (lb, "B")
    variance = float(np.var(many, ddof=1))
    return math.sqrt(variance * (1.0 / na + 1.0 / nb)), float(many.size - 1), side


def compare_runs(sources_a: Sequence[str], runs_a: Sequence[float],
                 sources_b: Sequence[str], runs_b: Sequence[float],
                 confidence: float) -> BetweenRuns:
    """B's run medians against A's (seconds, one per run; at least one side with
    ``MIN_RUNS_FOR_SPREAD`` runs): significant when the ``confidence`` interval of the
    relative change excludes 0 and p < 1 - ``confidence``. A median that is not a positive
    number (a run without steady steps) leaves it untested."""
    base = BetweenRuns(tuple(sources_a), tuple(sources_b), tuple(map(float, runs_a)),
                       tuple(map(float, runs_b)))
    la, lb = np.asarray(runs_a, dtype=float), np.asarray(runs_b, dtype=float)
    if max(la.size, lb.size) < MIN_RUNS_FOR_SPREAD or min(la.size, lb.size) < 1:
        raise ValueError("compare_runs needs a run on each side and two on one")
    if not (np.all(np.isfinite(la) & (la > 0)) and np.all(np.isfinite(lb) & (lb > 0))):
        return base
    la, lb = np.log(la), np.log(lb)
    d = float(lb.mean() - la.mean())
    se, df, spread_from = _spread(la, lb)
    if se > 0:
        p = stats.t_two_sided_p(d / se, df)
        half = stats.t_quantile(1.0 - (1.0 - confidence) / 2.0, df) * se
    else:  # every run of both sides had the same median: no spread to allow for
        p, half = (1.0 if d == 0 else 0.0), 0.0
    lo, hi = math.expm1(d - half), math.expm1(d + half)
    significant = (lo > 0 or hi < 0) and p < 1.0 - confidence
    return BetweenRuns(
        base.sources_a, base.sources_b, base.runs_a, base.runs_b, spread_from,
        relative=math.expm1(d), ci_low=lo, ci_high=hi, p_value=p, df=df,
        significance="significant" if significant else "not significant")


def geometric_mean(xs: Sequence[float]) -> float:
    """The geometric mean of positive numbers: what ``compare_runs`` compares, in seconds."""
    return float(np.exp(np.mean(np.log(np.asarray(xs, dtype=float)))))
