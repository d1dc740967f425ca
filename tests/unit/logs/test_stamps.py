"""Timestamp lines of a log viewer (Cloud Logging writes each entry's time on a line of its
own above it, ``2023-10-03 11:48:40.025 PDT``): each times the line below it as that
line's own absl header would, unless the line has one."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from pipecheck.logs import maxtext
from pipecheck.logs.maxtext import halves
from tests.unit.logs.test_halves import _here, _line_ends, _one_pass, _same

REAL = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"
XPK = REAL / "maxtext_tpu_v5e_xpk_cloud_logging.log"


def _parse(tmp_path: pathlib.Path, text: str) -> maxtext.ParsedLog:
    log = tmp_path / "stamped.log"
    log.write_text(text)
    return maxtext.parse_file(log)


def test_the_xpk_guides_steps_are_timed_by_the_timestamps_above_them():
    p = maxtext.parse_file(XPK)
    steps = p.steps.column("step").tolist()
    assert steps == [1, 2, 3, 4, 5, 95, 96, 97, 98, 99]
    # steps 1-5 and 96-99 have a timestamp line above them; step 95 follows "# ..."
    assert p.own_time.tolist() == [s != 95 for s in steps]
    # 11:48:40.025, 40.308, 40.589, 40.871, 41.152; 11:49:06.768 (96) ... 07.612 (99)
    np.testing.assert_allclose(p.line_at[:5], [0.0, 0.283, 0.564, 0.846, 1.127], atol=1e-9)
    np.testing.assert_allclose(p.line_at[6:] - p.line_at[0],
                               [26.743, 27.024, 27.305, 27.587], atol=1e-9)
    assert p.line_at[5] == p.line_at[6]  # a bare step line: the next header's time
    run = maxtext.import_log(XPK)
    assert "by the log's timestamps" in run.anomalies[0].evidence


CLOUD = """\
2023-10-03 11:48:39.100 PDT
Config param steps: 5
2023-10-03 11:48:39.500 PDT
completed step: 0, seconds: 30.000, loss: 10.000
2023-10-03 11:48:40.000 PDT
completed step: 1, seconds: 0.500, loss: 9.900
2023-10-03 11:48:40.100 PDT
Running evaluation on train step 1
2023-10-03 11:48:40.200 PDT
I1003 11:48:40.150000 140 train.py:1] completed step: 2, seconds: 0.500, loss: 9.800
2023-10-03 11:48:40.700 PDT
completed step: 3, seconds: 0.500, loss: 9.700
Completed eval after train step 3
2023-10-03 11:48:41.200 PDT
"""


def test_each_line_below_a_timestamp_line_takes_its_time(tmp_path: pathlib.Path) -> None:
    p = _parse(tmp_path, CLOUD)
    assert p.steps.column("step").tolist() == [0, 1, 2, 3]
    assert p.own_time.tolist() == [True, True, True, True]
    assert p.line_at[0] == pytest.approx(0.4) and p.line_at[3] == pytest.approx(1.6)
    assert p.line_at[2] == pytest.approx(1.05)  # its own absl header, not the line above
    events = {e.kind: e for e in p.events}
    # an eval line is timed by its own header only: the timestamp line above it is one
    assert events["eval_start"].at_s == pytest.approx(1.0)
    assert events["eval_start"].clock == "11:48:40.100"
    assert events["eval_end"].at_s is None  # no timestamp line above it
    assert p.config == {"steps": 5} and p.lines == 14


@pytest.mark.parametrize("stamp", ["2023-10-03T18:48:40.025Z", "2023-10-03T18:48:40.025+00:00",
                                   "# 2023-10-03 18:48:40.025 UTC", "2023-10-03 18:48:40.025"])
def test_timestamp_lines_as_log_viewers_write_them(tmp_path: pathlib.Path, stamp: str) -> None:
    later = stamp.replace("40.025", "41.030")
    p = _parse(tmp_path, f"{stamp}\ncompleted step: 0, seconds: 1.000\n"
                         f"{later}\ncompleted step: 1, seconds: 1.000\n")
    assert p.own_time.all() and p.line_at.tolist() == pytest.approx([0.0, 1.005])


def test_a_line_with_a_date_and_more_is_not_a_timestamp_line(tmp_path: pathlib.Path) -> None:
    p = _parse(tmp_path, "2023-10-03 11:48:39.100 PDT saved\n"
                         "completed step: 0, seconds: 1.000\n"
                         "Deadline for this save operation is 2025-11-22 10:44:08.370840\n"
                         "completed step: 1, seconds: 1.000\n")
    assert not p.own_time.any()


@pytest.mark.parametrize("log", [XPK], ids=lambda p: p.name)
def test_a_stamped_log_cut_anywhere_reads_as_in_one_pass(log: pathlib.Path) -> None:
    whole = _one_pass(log)
    for cut in _line_ends(log):
        _same(whole, halves.parse_in_halves(log, cut, start=_here), f"cut {cut}")


def test_a_stamped_log_cut_between_a_stamp_and_its_line(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "cloud.log"
    log.write_text(CLOUD)
    whole = _one_pass(log)
    assert whole.own_time.all()
    for cut in _line_ends(log):
        _same(whole, halves.parse_in_halves(log, cut, start=_here), f"cut {cut}")


ZONES = """\
2023-10-03 11:48:40.000 PDT
I1003 18:48:40.050000 140 checkpointing.py:1] Saving checkpoint at step 0
2023-10-03 11:48:41.000 PDT
completed step: 1, seconds: 0.500
2023-10-03 11:48:41.500 PDT
I1003 18:48:41.550000 141 a.py:7] [process=0][thread=save] Background save thread done.
2023-10-03 11:48:42.000 PDT
completed step: 2, seconds: 0.500
"""


def test_timestamps_in_the_viewers_zone_are_put_on_the_headers_clock(tmp_path):
    """Cloud Logging stamps in the viewer's zone (PDT); the pod's absl headers are UTC: the
    stamps above headed lines tell the offset (7 h, to the quarter hour), and the stamped
    step lines fall between the headed events on one clock."""
    p = _parse(tmp_path, ZONES)
    assert p.own_time.all()
    saves = [e for e in p.events if e.kind in ("checkpoint_save", "async_save_done")]
    assert [e.at_s for e in saves] == pytest.approx([0.0, 1.5])  # their own headers
    assert p.line_at.tolist() == pytest.approx([0.95, 1.95])  # 18:48:41 and 18:48:42
    assert saves[0].at_s < p.line_at[0] < saves[1].at_s < p.line_at[1]


def test_timestamps_that_cannot_be_put_on_the_headers_clock_are_not_used(tmp_path):
    """A log with absl headers and no timestamp line above any of them: the stamps' zone
    is unknown, so they time nothing (the lines below them read as they would alone)."""
    text = ("I1003 18:48:40.050000 140 train.py:1] Config param steps: 9\n"
            "2023-10-03 11:48:41.000 PDT\ncompleted step: 1, seconds: 0.500\n"
            "I1003 18:48:41.550000 140 train.py:1] Config param steps: 9\n")
    p = _parse(tmp_path, text)
    assert not p.own_time.any() and p.line_at.tolist() == pytest.approx([1.5])
