"""How many batches compare's self-check times: at least CHECK_SECONDS of them, as
predicted, within its floor and ceiling."""

import math

from pipecheck.measure.whatif_check import (
    CHECK_BATCHES,
    CHECK_SECONDS,
    MAX_CHECK_BATCHES,
    MAX_SPEEDUP,
    check_batches,
)


def test_short_batches_are_timed_for_check_seconds():
    # the demo on two workers: ~2 ms a batch; 24 of them would be a 50 ms window
    assert check_batches(0.002) == math.ceil(CHECK_SECONDS / 0.002) > 2 * CHECK_BATCHES


def test_slow_batches_keep_the_floor():
    assert check_batches(0.040) == CHECK_BATCHES == 24 > CHECK_SECONDS / 0.040


def test_a_prediction_far_too_fast_is_capped():
    assert check_batches(1e-6) == MAX_CHECK_BATCHES


def test_no_usable_prediction_times_the_floor():
    for bad in (0.0, -1.0, math.nan, math.inf):
        assert check_batches(bad) == CHECK_BATCHES


def test_a_prediction_far_faster_than_anything_measured_is_not_believed():
    # predicted 0.1 ms where the fastest setting measured took 25 ms: taken as 25 / 4 ms
    taken = math.ceil(CHECK_SECONDS / (0.025 / MAX_SPEEDUP))
    assert check_batches(0.0001, 0.025) == taken < check_batches(0.0001) / 10
    # a setting predicted somewhat faster than the fastest measured keeps its prediction
    assert check_batches(0.002, 0.004) == math.ceil(CHECK_SECONDS / 0.002)
    # no measured D usable: the prediction alone
    assert check_batches(0.002, math.nan) == check_batches(0.002, 0.0) == check_batches(0.002)
