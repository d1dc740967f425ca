"""Periodic stalls in imported MaxText logs: none in the real logs (tests/data/real,
/work/shared/real-logs where present), and a checkpoint period found in a generated log in
MaxText's line format whose async saves stall the step after each save."""

from __future__ import annotations

import pathlib

import pytest

from pipecheck.logs.maxtext import import_log
from pipecheck.report.diff import format_imported
from tests.conftest import REPO
from tests.maxtext_log import write_log

REAL = sorted((REPO / "tests" / "data" / "real").glob("*.log"))


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_no_period_in_the_real_logs(path: pathlib.Path) -> None:
    run = import_log(str(path))
    assert [f for f in run.findings if f.kind == "periodic-stall"] == []


def test_a_checkpoint_every_ten_steps_is_the_period(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "train.log"
    write_log(log, 80, checkpoint_every=10, stall_s=2.0, save_s=3.0)
    run = import_log(str(log))
    [f] = [f for f in run.findings if f.kind == "periodic-stall"]
    assert f.numbers["period"] == 10 and f.location == "checkpoint"
    # the saves of steps 10 .. 70 stall steps 11 .. 71 by ~2 s each (the one of step 80
    # lands after the log)
    assert f.numbers["stalls"] == 7
    assert 7 * 1.5 < f.numbers["lost_s"] < 7 * 2.5
    assert "findings:" in format_imported(run) and "every 10 steps" in format_imported(run)
