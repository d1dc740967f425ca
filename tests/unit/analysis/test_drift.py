from pipecheck.analysis.drift import drift_warning


def test_drift_is_reported_beyond_the_tolerance():
    assert drift_warning(0.05, 0.052) is None
    w = drift_warning(0.05, 0.04)
    assert w is not None and "drifted by -20%" in w and "(50.0 ms before, 40.0 ms after)" in w
    assert drift_warning(float("nan"), 0.04) is None
