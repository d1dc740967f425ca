"""How long compare's self-check reads its setting: once when the reading is sure enough to
judge a 10% error, once more and longer when it is not, never past the bound; each said on
progress and kept in the record, and the report line says so."""

from __future__ import annotations

import math

from pipecheck.analysis.loader.whatif import (
    CHECK_PRECISION,
    MAX_LONGER_BATCHES,
    MAX_LONGER_SECONDS,
    longer_batches,
    plus_minus,
    too_unsure,
)
from pipecheck.measure.whatif_check import read_until_sure
from pipecheck.progress import Progress
from pipecheck.records.common import Distribution, Estimate
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.whatif import Interval, WhatIfCheck, WhatIfSetting
from pipecheck.report.compare import whatif_check_line


def around(value: float, width: float) -> Interval:
    """``value`` with an interval of relative half-width ``width``."""
    return Interval(value, value * (1 - width), value * (1 + width))


class Lines(Progress):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, line: str) -> None:
        self.lines.append(line)


def reading(d_s: float, width: float, batches: int) -> LoaderSetting:
    """A reading of ``batches`` at ``d_s`` a batch, its D interval +-``width``."""
    samples = [d_s] * batches
    return LoaderSetting(
        settings=GrainSettings(workers=2, threads=1), first_batch_s=1.0,
        batch_time=Distribution.of(samples), batches_per_s=1 / d_s, examples_per_s=8 / d_s,
        loader_time=Estimate(d_s, d_s * (1 - width), d_s * (1 + width), batches, "mean"))


class FakeMeasure:
    """Readings in turn, each of the batches it is asked for; the batches asked kept."""

    def __init__(self, *readings: tuple[float, float]) -> None:
        self.readings = list(readings)
        self.asked: list[int] = []

    def __call__(self, batches: int) -> LoaderSetting:
        self.asked.append(batches)
        d_s, width = self.readings[len(self.asked) - 1]
        return reading(d_s, width, batches)


def test_a_reading_within_the_precision_is_sure_enough():
    assert not too_unsure(around(0.010, CHECK_PRECISION * 0.99))
    assert too_unsure(around(0.010, CHECK_PRECISION * 1.01))
    assert too_unsure(Interval(math.nan, math.nan, math.nan))
    assert too_unsure(Interval(0.0, 0.0, 0.0))


def test_a_width_near_the_precision_is_said_to_a_tenth():
    # +-5.04% is too unsure: said "+-5.0%", not "+-5%", beside "too unsure"
    assert (plus_minus(0.0504), plus_minus(0.049), plus_minus(0.6)) == \
        ("+-5.0%", "+-4.9%", "+-60%")


def test_no_longer_reading_where_the_first_is_sure_enough():
    assert longer_batches(25, around(0.010, 0.04)) is None


def test_a_longer_reading_is_sized_for_the_precision():
    # +-10% over 25 batches: a mean's interval narrows as the root of the batches, so
    # (10 / 5)^2 = 4x the batches for +-5%
    assert longer_batches(25, around(0.002, 0.10)) == 100
    # just past the precision: still at least twice the batches
    assert longer_batches(25, around(0.002, CHECK_PRECISION * 1.1)) == 50


def test_a_longer_reading_stops_at_the_bound():
    # +-60% on 9 ms batches wants 3,600 batches (32 s): two seconds of them instead
    n = longer_batches(25, around(0.009, 0.60))
    assert n == math.floor(MAX_LONGER_SECONDS / 0.009) < 3600
    assert n is not None and n * 0.009 <= MAX_LONGER_SECONDS
    # tiny batches: the batch ceiling
    assert longer_batches(2000, around(1e-5, 0.5)) == MAX_LONGER_BATCHES


def test_no_longer_reading_where_the_bound_allows_less_than_twice_the_batches():
    # 100 batches of 15 ms (1.5 s): twice them would take 3 s, past the bound
    assert longer_batches(100, around(0.015, 0.30)) is None
    assert longer_batches(25, Interval(math.nan, math.nan, math.nan)) is None


def test_a_sure_reading_is_read_once():
    measure, lines = FakeMeasure((0.010, 0.02)), Lines()
    r = read_until_sure(measure, 25, lines)
    assert (measure.asked, r.batches, r.reads, r.first) == ([25], 25, 1, None)
    assert lines.lines == ["      measured 10.0 ms +-2.0%"]


def test_an_unsure_reading_is_read_longer_and_says_so():
    measure, lines = FakeMeasure((0.002, 0.12), (0.0021, 0.04)), Lines()
    r = read_until_sure(measure, 125, lines)
    assert measure.asked == [125, 720]  # 125 x (12 / 5)^2
    assert (r.batches, r.reads, r.setting.loader_time.value) == (720, 2, 0.0021)
    assert r.first is not None and r.first.loader_time.value == 0.002
    assert lines.lines == ["      measured 2.00 ms +-12%",
                           "      too unsure to judge a 10% error: reading 720 batches",
                           "      measured 2.10 ms +-4.0%"]


def test_a_reading_still_unsure_at_the_bound_is_judged_as_read_and_says_so():
    measure, lines = FakeMeasure((0.009, 0.60), (0.0095, 0.20)), Lines()
    r = read_until_sure(measure, 25, lines)
    assert measure.asked == [25, 222] and r.reads == 2  # 222 x 9 ms: the two seconds
    assert lines.lines[-1] == "      measured 9.50 ms +-20% (still too unsure: judged as read)"


def test_an_unsure_reading_the_bound_leaves_no_room_for_is_read_once_and_says_so():
    measure, lines = FakeMeasure((0.015, 0.30)), Lines()
    r = read_until_sure(measure, 100, lines)
    assert (measure.asked, r.reads) == ([100], 1)
    assert lines.lines[-1] == ("      wider than +-5%; not read longer: twice the batches "
                               "take more than 2 s")


def check(measured: Interval, **kw) -> WhatIfCheck:
    return WhatIfCheck(WhatIfSetting(2, 1, 1, 1, 2), Interval(0.0103, 0.0082, 0.0124),
                       measured, "cpu-cores", **kw)


def test_the_report_line_says_how_the_setting_was_read():
    sure = whatif_check_line(check(around(0.010, 0.03), batches=25))
    assert "measured 10.0 ms: error 3%" in sure
    longer = whatif_check_line(check(around(0.0095, 0.04), batches=222, reads=2,
                                     first_measured_loader_s=around(0.0093, 0.6)))
    assert ("measured 9.50 ms over 222 batches, +-4.0% (read longer: the first reading, "
            "9.30 ms +-60%, was too unsure to judge a 10% error): error 8%") in longer
    still = whatif_check_line(check(around(0.0095, 0.2), batches=222, reads=2,
                                    first_measured_loader_s=around(0.0093, 0.6)))
    assert "+-20%, still too unsure (read longer" in still
    once = whatif_check_line(check(around(0.010, 0.3), batches=100))
    assert "measured 10.0 ms (+-30%: too unsure to judge a 10% error): error 3%" in once


def test_a_check_written_before_its_readings_were_kept_reads_as_one_reading():
    old = check(around(0.010, 0.03)).to_dict()
    for key in ("batches", "reads", "first_measured_loader_s"):
        del old[key]
    back = WhatIfCheck.from_dict(old)
    assert (back.batches, back.reads, back.first_measured_loader_s) == (0, 1, None)
    new = check(around(0.0095, 0.04), batches=222, reads=2,
                first_measured_loader_s=around(0.0093, 0.6))
    assert WhatIfCheck.from_dict(new.to_dict()) == new
