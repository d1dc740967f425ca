"""Level shifts: where a run's steady state changes level (after a profiler window, a
restore, a data-set change), found by a change-point test with a known false-alarm rate.

The test is Pettitt's (1979) rank test for one change in the middle of a series: with ranks
``r`` of the ``n`` values, ``U_t = 2 * sum(r[:t]) - t * (n + 1)`` and ``K = max |U_t|``;
under "no change" (the values exchangeable) ``P(K >= k) <= 2 exp(-6 k^2 / (n^3 + n^2))``.
It needs no distribution (ranks), so one stalled step cannot fake a shift, and costs a sort.
A change is reported when that bound is below ``FALSE_ALARM_RATE``, both sides hold
``MIN_SEGMENT_STEPS`` steps, and the medians differ by ``MIN_SHIFT`` or more (a
significant but tiny drift is not a new level). Several shifts are found by binary
segmentation: each side of a found change is tested again, up to ``MAX_SHIFTS``. The
test says whether there is a change; where it lies is the split with the least squared
deviation from the two sides' means (``best_split``).

Searching every split costs power: on 26 steps, 5 at one level and 21 at another, the
bound cannot go below 0.05. Where the log says where a change may be (the end of a
profiler window, a restore, a restart: ``candidates``), that split is tested on its own
with the Mann-Whitney U test (``stats.mann_whitney_u_p``) at ``FALSE_ALARM_RATE`` divided
by the number of candidates, before the search.

False alarms: each test raises one with probability at most ``FALSE_ALARM_RATE`` on
exchangeable values (the candidates together, too); a run holds at most
``2 * MAX_SHIFTS + 2`` tests, so at most ``(2 * MAX_SHIFTS + 2) * FALSE_ALARM_RATE`` of
runs without a shift get a false one (0.8%; the unit tests run 100 seeded noise series,
with and without a candidate split, without one). Step times that drift slowly
(autocorrelated, not exchangeable) raise the rate of the rank test; ``MIN_SHIFT`` keeps
such drifts below 5% from being reported.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from pipecheck import stats

FALSE_ALARM_RATE = 1e-3
"""Bound on the chance that one test reports a change in values that have none."""

MIN_SEGMENT_STEPS = 5
"""A level needs this many steady steps on each side to be a level and not a blip."""

MIN_SHIFT = 0.05
"""Medians this far apart (relative) or more are two levels; below it, a drift."""

MAX_SHIFTS = 3
"""At most this many changes are reported (a run that changes level more often has no
steady state to speak of, and the warnings say so through its spread)."""


@dataclasses.dataclass(frozen=True)
class Change:
    """One change of level: ``index`` is the first value of the new level."""

    index: int
    before_median: float
    after_median: float
    p_value: float


def pettitt(values: np.ndarray) -> tuple[int, float]:
    """Pettitt's test: the most likely change (index of the first value after it) and the
    bound on its p-value (1.0 for fewer than 2 values)."""
    n = values.size
    if n < 2:
        return 0, 1.0
    order = np.argsort(values)  # any order of equal values: ties get their mean rank below
    ranks = np.empty(n, dtype=np.float64)
    ranks[order] = np.arange(1, n + 1, dtype=np.float64)
    # ties share their average rank (exchangeable ties must not look like a change)
    sorted_vals = values[order]
    starts = np.flatnonzero(np.concatenate([[True], sorted_vals[1:] != sorted_vals[:-1]]))
    if starts.size < n:
        ends = np.concatenate([starts[1:], [n]])
        mean_rank = (starts + ends + 1) / 2.0
        ranks[order] = np.repeat(mean_rank, ends - starts)
    t = np.arange(1, n, dtype=np.float64)
    u = 2.0 * np.cumsum(ranks)[:-1] - t * (n + 1)
    k = int(np.argmax(np.abs(u)))
    big_k = abs(u[k])
    p = min(1.0, 2.0 * math.exp(-6.0 * big_k ** 2 / (float(n) ** 3 + float(n) ** 2)))
    return k + 1, p


def best_split(values: np.ndarray) -> int:
    """Where a change found by the rank test lies: the split that leaves the least squared
    deviation from the two sides' means (the rank statistic's own maximum drifts into the
    new level by a few steps), with ``MIN_SEGMENT_STEPS`` on each side. O(n)."""
    n = values.size
    x = values - values.mean()
    s1, s2 = np.cumsum(x), np.cumsum(x * x)
    t = np.arange(MIN_SEGMENT_STEPS, n - MIN_SEGMENT_STEPS + 1)
    left = s2[t - 1] - s1[t - 1] ** 2 / t
    right = (s2[-1] - s2[t - 1]) - (s1[-1] - s1[t - 1]) ** 2 / (n - t)
    return int(t[np.argmin(left + right)])


def _change(seg: np.ndarray, cut: int, lo: int, p: float) -> Change | None:
    """The change at ``cut`` of ``seg`` (which starts at ``lo``) if it passes the rules
    other than the test itself."""
    if min(cut, seg.size - cut) < MIN_SEGMENT_STEPS or p >= FALSE_ALARM_RATE:
        return None
    before, after = float(np.median(seg[:cut])), float(np.median(seg[cut:]))
    if not (before > 0 and abs(after - before) / before >= MIN_SHIFT):
        return None
    return Change(lo + cut, before, after, p)


def changes(values: Sequence[float] | np.ndarray, candidates: Sequence[int] = ()
            ) -> list[Change]:
    """The level changes of ``values`` (steady step times in step order), in order.
    ``candidates``: indices where the log says a change may start (tested first)."""
    arr = np.asarray(values, dtype=float)
    arr = arr[np.isfinite(arr)] if arr.size else arr
    found: list[Change] = []
    cuts = sorted({int(c) for c in candidates if 0 < c < arr.size})
    for k, c in enumerate(cuts):
        lo = cuts[k - 1] if k else 0
        hi = cuts[k + 1] if k + 1 < len(cuts) else arr.size
        p = stats.mann_whitney_u_p(arr[lo:c], arr[c:hi]) * len(cuts)
        if (change := _change(arr[lo:hi], c - lo, lo, p)) is not None:
            found.append(change)
    bounds = [0, *(c.index for c in found), arr.size]
    pending = list(zip(bounds[:-1], bounds[1:], strict=True))
    while pending and len(found) < MAX_SHIFTS:
        lo, hi = pending.pop(0)
        if hi - lo < 2 * MIN_SEGMENT_STEPS:
            continue
        seg = arr[lo:hi]
        _, p = pettitt(seg)
        if p >= FALSE_ALARM_RATE:
            continue
        cut = best_split(seg)
        if (change := _change(seg, cut, lo, p)) is None:
            continue
        found.append(change)
        pending += [(lo, lo + cut), (lo + cut, hi)]
    found.sort(key=lambda c: c.index)
    return found[:MAX_SHIFTS]
