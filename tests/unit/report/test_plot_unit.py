"""Plot helpers (pure) and the missing-matplotlib message."""

from __future__ import annotations

import sys

import pytest

from pipecheck.records.common import StepRecord
from pipecheck.report.plot import PlotUnavailableError, _pyplot, default_window, gantt_bars


def test_gantt_bars_follow_loop_order_inside_each_step() -> None:
    steps = [
        StepRecord(4, 0.1, (), {"data_wait": 0.02, "dispatch": 0.01, "sync": 0.06,
                                "other": 0.01}),
        StepRecord(5, 0.3, ("checkpoint",), {"checkpoint": 0.2, "mine": 0.05, "data_wait": 0.02,
                                             "sync": 0.03}),
    ]
    bars, intervals = gantt_bars(steps)
    assert intervals == [(4, 0.0, 0.1), (5, 0.1, 0.3)]
    assert [b[0] for b in bars] == ["data_wait", "dispatch", "sync", "other",
                                    "checkpoint", "mine", "data_wait", "sync"]
    assert bars[4] == ("checkpoint", 0.1, 0.2)
    assert bars[5][1] == pytest.approx(0.3) and bars[7][1] == pytest.approx(0.37)


def test_default_window_surrounds_the_first_special_step() -> None:
    steps = [StepRecord(i, 0.1, ("checkpoint",) if i == 20 else ()) for i in range(40)]
    assert default_window(steps) == (17, 28)
    plain = [StepRecord(i, 0.1) for i in range(5)]
    assert default_window(plain) == (0, 4)


def test_missing_matplotlib_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailableError) as e:
        _pyplot()
    assert str(e.value) == "pipecheck plot needs matplotlib: pip install 'pipecheck[plot]'"
