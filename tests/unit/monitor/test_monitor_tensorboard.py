"""Monitor(tensorboard_dir=...) on a simulated async device (a fake clock): the event file
read back holds each step's scalars, equal to the record's, handed over while the run goes."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from pipecheck.errors import MonitorError
from pipecheck.monitor import Monitor
from pipecheck.monitor.tensorboard import SCALAR_TAGS, step_columns
from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable
from tests.conftest import REPO
from tests.fakes import SimDevice
from tests.tensorboard_events import read_scalars

C, LOAD, DISPATCH = 0.25, 0.125, 0.0625
"""Binary fractions: every span and step time is exact, in float32 too."""


def sim_monitor(dev: SimDevice, logdir: pathlib.Path, every_s: float) -> Monitor:
    return Monitor(clock=dev.clock, read_loss=dev.read, locate_syncs=False,
                   watch_compiles=False, watch_gc=False, env={"backend": "sim"},
                   tensorboard_dir=str(logdir), tensorboard_every_s=every_s)


def test_step_columns_leave_a_span_a_step_does_not_have_as_nan() -> None:
    table = StepTable.from_rows(StepRecord, [
        StepRecord(step=0, time_s=0.5, tags=(), spans={"data_wait": 0.25, "other": 0.25}),
        StepRecord(step=1, time_s=0.25, tags=(), spans={"sync": 0.125, "other": 0.125}),
    ])
    steps, walls, values = step_columns(table, 100.0)
    assert steps.tolist() == [0, 1] and walls.tolist() == [100.5, 100.75]
    assert list(SCALAR_TAGS) == ["time_s", "data_wait", "sync", "dispatch"]
    np.testing.assert_array_equal(values, [[0.5, 0.25, np.nan, np.nan],
                                           [0.25, np.nan, 0.125, np.nan]])


def test_an_event_encoded_wrong_stops_the_writer_with_one_warning(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("tensorboardX")
    import pipecheck.monitor.tensorboard as tb

    real = tb.scalar_events
    monkeypatch.setattr(tb, "scalar_events", lambda s, w, t, v: real(s + 1, w, t, v))
    dev = SimDevice(compute_s=C, load_s=LOAD, dispatch_s=DISPATCH)
    mon = sim_monitor(dev, tmp_path / "tb", every_s=0.5)
    state: Any = None
    with pytest.warns(RuntimeWarning, match="an event encoded wrong") as caught:
        for step, batch in enumerate(mon.batches(dev.batches())):
            state, _ = mon.step(dev.step, state, batch)
            if step == 8:
                break
        mon.finish()
    assert len(caught) == 1
    assert read_scalars(tmp_path / "tb") == {}  # nothing wrong was written


def test_the_event_file_holds_every_step_as_the_record_has_it(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("tensorboardX")
    dev = SimDevice(compute_s=C, load_s=LOAD, dispatch_s=DISPATCH)
    logdir = tmp_path / "tb"
    mon = sim_monitor(dev, logdir, every_s=1.0)
    state: Any = None
    seen_mid_run = []
    for step, batch in enumerate(mon.batches(dev.batches())):
        state, _ = mon.step(dev.step, state, batch)
        assert mon._scalars is not None and mon._scalars.drain()
        seen_mid_run.append(len(read_scalars(logdir).get("pipecheck/step_time_s", {})))
        if step == 11:
            break
    result = mon.finish()
    # while the run went, the file had the steps of the last fold (one at least every
    # simulated second, steps of ~0.44 s): never more than 3 steps behind the marks
    closed = list(range(12))  # after step i's dispatch, steps before i are closed
    assert seen_mid_run[-1] >= 8
    assert all(c - s <= 3 for c, s in zip(closed, seen_mid_run, strict=True))
    assert seen_mid_run == sorted(seen_mid_run)
    got = read_scalars(logdir)
    assert set(got) == set(SCALAR_TAGS.values())
    steps = list(result.steps)
    assert len(steps) == 12 and sorted(got["pipecheck/step_time_s"]) == list(range(12))
    for s in steps:
        assert got["pipecheck/step_time_s"][s.step] == np.float32(s.time_s)
        for name in ("data_wait", "sync", "dispatch"):
            tag = SCALAR_TAGS[name]
            if name in s.spans:
                assert got[tag][s.step] == np.float32(s.spans[name])
            else:
                assert s.step not in got[tag]
    assert got["pipecheck/data_wait_s"][5] == LOAD
    assert got["pipecheck/dispatch_s"][5] == DISPATCH
    assert got["pipecheck/step_time_s"][5] == C  # compute-bound: the device's pace
    assert 11 not in got["pipecheck/data_wait_s"]  # the drain: no batch fetched


def test_a_process_exiting_without_finish_hands_every_closed_step_over(
        tmp_path: pathlib.Path) -> None:
    """What ``atexit`` runs (``ScalarWriter._at_exit``): the Monitor's fold, then the close;
    with an interval no step reached, nothing was in the file before it."""
    pytest.importorskip("tensorboardX")
    dev = SimDevice(compute_s=C, load_s=LOAD, dispatch_s=DISPATCH)
    logdir = tmp_path / "tb"
    mon = sim_monitor(dev, logdir, every_s=1e6)
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        state, _ = mon.step(dev.step, state, batch)
        if step == 6:
            break
    assert mon._scalars is not None and mon._scalars.drain()
    assert read_scalars(logdir) == {}
    mon._scalars._at_exit()
    assert sorted(read_scalars(logdir)["pipecheck/step_time_s"]) == list(range(6))


def test_without_tensorboardx_the_error_names_the_install(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorboardX", None)
    monkeypatch.setitem(sys.modules, "tensorboardX.proto.event_pb2", None)
    with pytest.raises(MonitorError) as e:
        Monitor(tensorboard_dir=str(tmp_path))
    assert str(e.value).count("\n") == 0
    assert "pip install 'pipecheck[tensorboard]'" in str(e.value)


def test_a_file_as_tensorboard_dir_is_refused_before_the_run(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("tensorboardX")
    f = tmp_path / "taken"
    f.write_text("")
    with pytest.raises(MonitorError, match="that is a file, not a directory"):
        Monitor(tensorboard_dir=str(f))


def test_importing_the_monitor_does_not_import_tensorboardx() -> None:
    code = ("import sys, pipecheck.monitor.loop, pipecheck.monitor.tensorboard; "
            "assert 'tensorboardX' not in sys.modules, 'imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
