"""The row index: every interval that overlaps a row is among its candidates, whatever
order the rows' times are in, and no candidate lies outside the interval's row range."""

from __future__ import annotations

import numpy as np
import pytest

from pipecheck.analysis.logs import maxtext
from pipecheck.analysis.logs.intervals import RowIndex
from pipecheck.records.imported import LogEvent


def _overlapping(start, end, a, b):
    with np.errstate(invalid="ignore"):
        lap = np.minimum(end, b) - np.maximum(start, a)
    return set(np.flatnonzero(np.isfinite(end) & (lap > 0)).tolist())


@pytest.mark.parametrize("shuffled", [False, True])
def test_every_overlapping_interval_is_a_candidate(shuffled):
    rng = np.random.default_rng(3)
    n = 3000
    seconds = rng.uniform(0.1, 1.0, n)
    end = np.cumsum(seconds)
    if shuffled:  # timestamps out of order (clock jumps, merged processes)
        end = end + rng.normal(0, 30, n) * (rng.random(n) < 0.01)
    start = end - seconds
    end[rng.random(n) < 0.02] = np.nan  # steps with no stamped line near
    start[np.isnan(end)] = np.nan
    a = rng.uniform(-50, end[np.isfinite(end)].max(), 400)
    b = a + rng.exponential(20, 400)
    b[:5] = np.inf  # saves never seen to finish
    a[5:10] = -np.inf
    index = RowIndex(start, end, a, b)
    hits = {j: _overlapping(start, end, a[j], b[j]) for j in range(len(a))}
    for i in range(n):
        got = index.candidates(i)
        assert got == sorted(got)
        assert {j for j in range(len(a)) if i in hits[j]} <= set(got)
    if not shuffled:  # rows in time order: a known row's candidates are what overlaps it
        assert all(index.candidates(i) == [j for j in range(len(a)) if i in hits[j]]
                   for i in range(0, n, 7) if np.isfinite(end[i]))
    assert index.candidates(-1) == [] and index.candidates(n) == []


def test_an_interval_over_a_million_rows_is_filed_in_a_few_blocks():
    n = 1_000_000
    end = np.arange(1, n + 1, dtype=float)
    index = RowIndex(end - 1, end, np.array([0.5]), np.array([n - 0.5]))
    assert sum(len(v) for v in index._blocks.values()) <= 2 * index.levels
    assert index.candidates(0) == index.candidates(n - 1) == [0]


def test_nearest_line_picks_as_min_does_ties_included():
    rng = np.random.default_rng(4)
    times = rng.integers(0, 40, 200).astype(float)  # many equal times
    events = [LogEvent("checkpoint_async_start", k, "x", at_s=float(t))
              for k, t in enumerate(times)]
    nearest = maxtext.NearestLine(events)
    for t in np.arange(-3, 45, 0.25):
        assert nearest(t) is min(events, key=lambda e: abs(e.at_s - t))
    assert nearest(-np.inf) is events[0]
    assert maxtext.NearestLine([])(1.0) is None
