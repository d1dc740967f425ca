"""The first batch beside start-up work, on hand-built steps."""

from __future__ import annotations

import pytest

from pipecheck.analysis.first_batch import (
    MIN_HIDDEN_S,
    compare_startup,
    first_batch_finding,
    monitor_startup,
)
from pipecheck.records.common import StartUp, StepRecord
from pipecheck.records.steps import StepTable
from tests.unit.step_tables import table


def _steps(first_wait: float, **own: float) -> StepTable[StepRecord]:
    first = StepRecord(0, first_wait + 1.0, ("compile",),
                       {"data_wait": first_wait, "dispatch": 0.9, "other": 0.3, "gc": 0.01,
                        **own})
    return table([first, *(StepRecord(i, 0.1, (), {"data_wait": 0.002, "dispatch": 0.05})
                            for i in range(1, 20))])


def test_a_restore_before_workers_that_start_at_the_first_batch():
    s = monitor_startup(_steps(2.5, restore=3.0), compile_s=0.8)
    assert s == StartUp(2.5, {"restore": 3.0, "compile": 0.8}, 0.002)
    # the loader's 2.5 s (less a steady wait) fits inside 3.8 s of work
    assert s.hideable_s == pytest.approx(2.498)
    f = first_batch_finding(s)
    assert f is not None and f.kind == "first-batch"
    assert "restore 3.00 s, compile 0.80 s" in f.message and "hide up to 2.50 s" in f.message
    assert "start_prefetch()" in (f.fix or "") and "lower(" in (f.fix or "")


def test_the_hidden_time_is_capped_by_the_work():
    s = monitor_startup(_steps(5.0), compile_s=0.6)
    assert s is not None and s.work == {"compile": 0.6}
    assert s.hideable_s == pytest.approx(0.6)


def test_a_loader_already_running_has_nothing_to_hide():
    s = monitor_startup(_steps(0.003, restore=4.0), compile_s=1.0)
    assert s is not None and s.hideable_s < MIN_HIDDEN_S
    assert first_batch_finding(s) is None


def test_no_step_zero_or_no_data_wait_gives_no_startup():
    steps = _steps(2.0)
    assert monitor_startup(steps[1:], 1.0) is None
    bare = table([StepRecord(0, 1.0, (), {"dispatch": 1.0}), *steps[1:]])
    assert monitor_startup(bare, 1.0) is None


def test_compare_startup_from_the_chosen_setting_and_the_compile():
    s = compare_startup(1.7, 0.02, 0.9)
    assert s.hideable_s == pytest.approx(0.9)
    assert first_batch_finding(s) is not None
    assert first_batch_finding(compare_startup(0.3, 0.02, 5.0)) is None  # a quick start
    s = compare_startup(4.0, 0.02, 0.9, init_s=2.0)
    assert s.work == {"init": 2.0, "compile": 0.9} and s.hideable_s == pytest.approx(2.9)
