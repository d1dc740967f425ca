"""Which intervals may overlap each row of a run, found by lookup instead of a scan.

Rows are a run's steps in order, each with a (start, end) interval in seconds (NaN where
unknown); intervals are what ran beside them (async saves, blocking waits). Comparing every
anomalous step with every interval costs anomalies x intervals, which grows with the square
of a run's length (a million-step run has thousands of both). ``RowIndex`` files each
interval under the rows it can overlap, once, and answers for a row in O(log n).

The rows an interval can overlap are a contiguous range whatever the rows' times are: row
``i`` overlaps ``[a, b)`` only if ``end[i] > a`` and ``start[i] < b``; so ``i`` lies where
the running maximum of the ends (non-decreasing) exceeds ``a`` and the minimum of the
starts from ``i`` on (non-decreasing too) is below ``b``, and both are found by bisection.
For steps that tile the run in order this range is exactly the steps the interval
overlaps; for out-of-order timestamps it is wider, never narrower, so a caller that checks
the overlap of each candidate gets what a scan gets. A range is filed as the aligned
power-of-two blocks that cover it (at most two per level, as in a segment tree), so an
interval spanning a million steps costs ~40 entries, not a million.
"""

from __future__ import annotations

import numpy as np


class RowIndex:
    """The intervals ``(starts[j], ends[j])`` filed under the rows whose intervals
    ``(row_start[i], row_end[i])`` they may overlap (see the module docstring)."""

    def __init__(self, row_start: np.ndarray, row_end: np.ndarray,
                 starts: np.ndarray, ends: np.ndarray) -> None:
        row_start = np.asarray(row_start, dtype=float)
        row_end = np.asarray(row_end, dtype=float)
        self.size = n = len(row_start)
        # NaN rows can overlap nothing: they must not raise the running max or lower the min
        run_max_end = np.maximum.accumulate(np.where(np.isnan(row_end), -np.inf, row_end)) \
            if n else np.zeros(0)
        clean_start = np.where(np.isnan(row_start), np.inf, row_start)
        min_start_after = np.minimum.accumulate(clean_start[::-1])[::-1] if n else np.zeros(0)
        lo = np.searchsorted(run_max_end, np.asarray(starts, dtype=float), side="right")
        hi = np.searchsorted(min_start_after, np.asarray(ends, dtype=float), side="left")
        self._blocks: dict[tuple[int, int], list[int]] = {}
        self.levels = max(n, 1).bit_length()
        for j, (a, b) in enumerate(zip(lo.tolist(), hi.tolist(), strict=True)):
            while a < b:
                level = (a & -a).bit_length() - 1 if a else self.levels
                while a + (1 << level) > b:
                    level -= 1
                self._blocks.setdefault((level, a >> level), []).append(j)
                a += 1 << level

    def candidates(self, row: int) -> list[int]:
        """The intervals (their positions, ascending) that may overlap ``row``: every one
        that does, and some that only come near. O(log n) lookups."""
        if not 0 <= row < self.size:
            return []
        found: list[int] = []
        for level in range(self.levels + 1):
            found += self._blocks.get((level, row >> level), ())
        found.sort()
        return found
