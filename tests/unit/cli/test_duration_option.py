"""Durations on the command line (``--read-latency 30ms``): a number and its unit."""

from __future__ import annotations

import pytest

from pipecheck.cli.options import parse_duration


@pytest.mark.parametrize(("text", "seconds"), [
    ("30ms", 0.030), ("0.03s", 0.030), ("2.5ms", 0.0025), ("500us", 0.0005), ("1s", 1.0),
    ("0ms", 0.0), (" 30 MS ", 0.030), ("1e-3s", 0.001),
])
def test_a_number_and_its_unit(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["30", "ms", "", "-1ms", "infs", "nanms", "30min", "3 0ms"])
def test_anything_else_says_how_to_write_one(text):
    with pytest.raises(ValueError, match=r"is not a duration: write a number of 0 or more and "
                                         r"its unit, e\.g\. 30ms, 0\.03s, 2\.5ms or 500us"):
        parse_duration(text)
