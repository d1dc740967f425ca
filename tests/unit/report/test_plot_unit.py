"""Plot helpers (pure) and the missing-matplotlib message."""

from __future__ import annotations

import sys

import pytest

from pipecheck.errors import PlotUnavailableError
from pipecheck.records.common import StepRecord
from pipecheck.report.plot import _pyplot, default_window, gantt_bars
from tests.unit.step_tables import table


def test_gantt_bars_follow_loop_order_inside_each_step() -> None:
    steps = table([
        StepRecord(4, 0.1, (), {"data_wait": 0.02, "dispatch": 0.01, "sync": 0.06,
                                "other": 0.01}),
        StepRecord(5, 0.3, ("checkpoint",), {"checkpoint": 0.2, "mine": 0.05, "data_wait": 0.02,
                                             "sync": 0.03}),
    ])
    bars, intervals = gantt_bars(steps)
    assert intervals == [(4, 0.0, 0.1), (5, 0.1, 0.3)]
    assert [b[0] for b in bars] == ["data_wait", "dispatch", "sync", "other",
                                    "checkpoint", "mine", "data_wait", "sync"]
    assert bars[4] == ("checkpoint", 0.1, 0.2)
    assert bars[5][1] == pytest.approx(0.3) and bars[7][1] == pytest.approx(0.37)


def test_default_window_surrounds_the_first_special_step() -> None:
    steps = table(StepRecord(i, 0.1, ("checkpoint",) if i == 20 else ()) for i in range(40))
    assert default_window(steps) == (17, 28)
    plain = table(StepRecord(i, 0.1) for i in range(5))
    assert default_window(plain) == (0, 4)


def test_missing_matplotlib_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailableError) as e:
        _pyplot()
    assert str(e.value) == "pipecheck plot needs matplotlib: pip install 'pipecheck[plot]'"


def test_binned_band_summarizes_each_run_of_consecutive_steps() -> None:
    import numpy as np

    from pipecheck.report.plot import binned_band

    numbers = np.arange(1, 1001)
    values = np.tile(np.arange(10.0), 100)  # every bin of 100 holds 0..9 ten times
    band = binned_band(numbers, values, bins=10)
    assert band.first.tolist() == list(range(1, 1001, 100))
    assert band.last.tolist() == list(range(100, 1001, 100))
    assert band.low.tolist() == [0.0] * 10 and band.high.tolist() == [9.0] * 10
    assert band.p10.tolist() == [1.0] * 10 and band.p90.tolist() == [8.0] * 10
    assert band.median.tolist() == [5.0] * 10  # nearest rank of 99 * 0.5 + 0.5 -> 50th
    uneven = binned_band(np.arange(7), np.array([5.0, 1, 2, 9, 3, 4, 0]), bins=3)
    assert uneven.first.tolist() == [0, 3, 5] and uneven.high.tolist() == [5.0, 9.0, 4.0]


def test_a_run_without_spans_gets_the_anomaly_table_not_an_empty_gantt() -> None:
    from pipecheck.records.imported import Anomaly
    from pipecheck.report.plot import anomaly_rows, render_png

    steps = table(StepRecord(i, 40.0 if i == 0 else 0.5) for i in range(20))
    assert anomaly_rows(steps) == []
    anomalies = [Anomaly(0, 40.0, 80.0, "compilation", "first step")]
    assert anomaly_rows(steps, anomalies) == [["0", "40000.0", "80.0x", "compilation"]]
    png, lower = render_png(steps, default_window(steps), "t", anomalies)
    assert lower == "anomalies" and png[:4] == b"\x89PNG"
    _, lower = render_png(steps, default_window(steps), "t")
    assert lower == "none"  # no spans, nothing kept apart: one panel, no empty one
    with_spans = table(StepRecord(i, 0.5, (), {"sync": 0.4}) for i in range(20))
    assert render_png(with_spans, default_window(with_spans), "t")[1] == "gantt"


def test_a_long_run_is_plotted_as_a_band_with_every_tagged_step(tmp_path) -> None:
    import numpy as np

    from pipecheck.records import store
    from pipecheck.records.common import Distribution
    from pipecheck.records.imported import ImportedRun, LogStep
    from pipecheck.records.steps import StepTable
    from pipecheck.report.plot import BAND_MIN_STEPS, plot_run

    n = 4 * BAND_MIN_STEPS
    times = np.full(n, 0.5)
    times[[0, 1001, 2001]] = [40.0, 9.0, 9.5]
    table = StepTable(LogStep, n, {"step": np.arange(n), "time_s": times,
                                   "line": np.arange(n)})
    table = table.with_tags({0: ("compile",), 1001: ("checkpoint",), 2001: ("checkpoint",)})
    run = ImportedRun(source="gen.log", env={}, config={}, steps=table,
                      step_time=Distribution.of(times[2:100]), mean_all_s=float(times.mean()))
    store.save(run, tmp_path / "r.json")
    out = plot_run(tmp_path / "r.json", tmp_path / "r.png")
    assert out.banded and out.lower == "anomalies" and out.window is None
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_reports_progress_stage_by_stage(tmp_path) -> None:
    """A long record takes seconds to read and to draw: plot_run reports each stage done
    (the CLI draws it as a bar on a terminal, nothing when piped)."""
    from pipecheck.progress import Progress, Task
    from pipecheck.records import store
    from pipecheck.records.common import Distribution
    from pipecheck.records.imported import ImportedRun, LogStep
    from pipecheck.report.plot import PLOT_STAGES, plot_run

    events = []

    class Recording(Progress):
        def task(self, description, total, unit=""):
            events.append(("task", description, total, unit))

            class T(Task):
                def advance(self, n=1):
                    events.append(("advance", n, (tmp_path / "r.png").exists()))

                def close(self):
                    events.append(("close",))

            return T()

    steps = tuple(LogStep(step=i, time_s=t) for i, t in enumerate([30.0] + [0.5] * 20))
    run = ImportedRun(source="gen.log", env={}, config={}, steps=steps,
                      step_time=Distribution.of([0.5] * 20), mean_all_s=1.9)
    store.save(run, tmp_path / "r.json")
    plot_run(tmp_path / "r.json", tmp_path / "r.png", progress=Recording())
    assert events == [("task", "plotting r.json", PLOT_STAGES, "stage"),
                      ("advance", 1, False), ("advance", 1, False), ("advance", 1, True),
                      ("close",)]


def test_plot_title_gives_the_steady_state_median(tmp_path, monkeypatch) -> None:
    """The title names the run's steady-state median in milliseconds (not "-")."""
    from pipecheck.records import store
    from pipecheck.records.common import Distribution
    from pipecheck.records.imported import ImportedRun, LogStep
    from pipecheck.report import plot

    titles = []
    real_render = plot.render_png

    def render(steps, window, title, anomalies=(), **kwargs):
        titles.append(title)
        return real_render(steps, window, title, anomalies, **kwargs)

    monkeypatch.setattr(plot, "render_png", render)
    steps = tuple(LogStep(step=i, time_s=t) for i, t in enumerate([30.0] + [0.5] * 20))
    run = ImportedRun(source="gen.log", env={}, config={}, steps=steps,
                      step_time=Distribution.of([0.5] * 20), mean_all_s=1.9)
    store.save(run, tmp_path / "r.json")
    plot.plot_run(tmp_path / "r.json", tmp_path / "r.png")
    assert titles == ["r.json (imported): steady-state median 500.0 ms"]


def test_the_plots_gantt_names_the_sync_lane_as_the_device_wait() -> None:
    from pipecheck.report.plot import ANY_SYNC, _gantt_panel

    plt = _pyplot()
    steps = table(StepRecord(i, 0.1, (), {"data_wait": 0.02, "sync": 0.07}) for i in range(5))
    for label, shown in ((None, "device wait\n(lagged sync)"),
                         (ANY_SYNC, "device wait\n(syncs: lagged and forced)")):
        fig, ax = plt.subplots()
        try:
            if label is None:
                _gantt_panel(ax, steps, (0, 4))
            else:
                _gantt_panel(ax, steps, (0, 4), label)
            assert [t.get_text() for t in ax.get_yticklabels()] == ["data_wait", shown]
        finally:
            plt.close(fig)
