"""Level shifts: Pettitt's rank test with binary segmentation, and the splits a log names
tested on their own."""

from __future__ import annotations

import numpy as np
import pytest

from pipecheck.analysis import level_shift


def test_no_false_alarm_in_100_seeded_noise_runs():
    for seed in range(100):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(20, 2000))
        noise = 0.5 * rng.lognormal(0.0, 0.05, n)
        assert level_shift.changes(noise) == [], seed
        # a split the log names (a profiler window ended there) is no excuse either
        assert level_shift.changes(noise, [n // 3]) == [], seed


def test_a_shift_in_the_middle_is_found_with_its_two_medians():
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(3.6, 0.05, 40), rng.normal(4.2, 0.05, 60)])
    (change,) = level_shift.changes(values)
    assert change.index == 40
    assert change.before_median == pytest.approx(3.6, abs=0.03)
    assert change.after_median == pytest.approx(4.2, abs=0.03)
    assert change.p_value < level_shift.FALSE_ALARM_RATE


def test_a_short_level_before_a_named_split_needs_the_split():
    # the real GPU log: 5 steady steps at ~3.59 s before the capture ended, 21 at ~4.2 s
    before = [3.053, 3.585, 3.603, 3.587, 3.604]
    after = [4.110, 4.029, 4.197, 4.416, 4.022, 4.495, 4.109, 4.221, 4.311, 4.123, 4.107,
             4.312, 4.309, 4.315, 4.099, 4.417, 4.205, 4.511, 4.199, 4.422, 4.301]
    assert level_shift.changes(before + after) == []  # the search alone cannot tell
    (change,) = level_shift.changes(before + after, [5])
    assert (change.index, change.before_median, change.after_median) == (5, 3.587, 4.221)


def test_a_significant_but_tiny_drift_is_not_a_level():
    values = np.concatenate([np.full(50, 1.00), np.full(50, 1.02)])
    assert level_shift.changes(values) == []
    assert level_shift.changes(np.concatenate([np.full(50, 1.0), np.full(50, 1.1)]))[0].index \
        == 50
