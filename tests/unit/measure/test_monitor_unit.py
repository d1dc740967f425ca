"""Monitor on a simulated async device: ordering, attribution, record round trip."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from pipecheck.errors import PipecheckError
from pipecheck.measure.monitor import Monitor, MonitorError, default_loss
from pipecheck.records import store
from pipecheck.records.common import StepRecord
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.steps import StepTable
from tests.sim_device import SimDevice

C = 0.05
CKPT = 0.2


def monitor_for(dev: SimDevice, **kw: Any) -> Monitor:
    return Monitor(config={"loop": "sim"}, clock=dev.clock, read_loss=dev.read,
                   locate_syncs=False, watch_compiles=False, watch_gc=False,
                   env={"backend": "sim"}, **kw)


def user_loop(dev: SimDevice, mon: Monitor, n: int, every: int = 5) -> None:
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        state, metrics = mon.step(dev.step, state, batch)
        if step and step % every == 0:
            with mon.span("checkpoint"):
                dev.read(state)          # blocking device-to-host copy of the state
                dev.sleep(CKPT - dev.compute_s)  # writing it
        if step + 1 == n:
            break


def test_monitor_charges_a_checkpoint_to_the_step_that_ran_it() -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    user_loop(dev, mon, 16)
    r = mon.finish()
    assert r.total_steps == 16 and [s.step for s in r.steps] == list(range(16))
    by = {s.step: s for s in r.steps}
    for i in (5, 10):
        assert by[i].tags == ("checkpoint",)
    assert by[15].tags == ("checkpoint", "drain")  # the last interval is also the drain
    for i in (5, 10, 15):
        assert by[i].time_s == pytest.approx(CKPT)
    for i in (6, 11):
        assert by[i].time_s == pytest.approx(C)  # not faster than the steady state
    assert r.step_time.median_s == pytest.approx(C)
    assert r.step_time.n == 12  # 15 steps after the first, minus 3 checkpoint steps
    assert r.breakdown.seconds("checkpoint") == pytest.approx(3 * CKPT)
    assert r.breakdown.wall_s == pytest.approx(sum(s.time_s for s in r.steps))


def test_monitor_never_waits_for_the_step_it_just_dispatched() -> None:
    dev = SimDevice(compute_s=C, load_s=0.01)
    mon = monitor_for(dev)
    reads: list[float] = []
    mon._read_loss = lambda x: (reads.append(x.ready_at), dev.read(x))[1]
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        state, metrics = mon.step(dev.step, state, batch)
        # inside the loop body, the step just dispatched is still running
        assert metrics["loss"].ready_at > dev.now
        if step == 9:
            break
    mon.finish()
    assert len(reads) == 10


def test_record_round_trips_through_json(tmp_path: Any) -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    user_loop(dev, mon, 8)
    path = tmp_path / "run.json"
    r = mon.save(str(path))
    data = json.loads(path.read_text())
    assert data["kind"] == "monitor" and data["format_version"] == store.FORMAT_VERSION
    assert {"env", "config", "step_time", "first_step_s", "steps", "sync_sites", "breakdown",
            "warnings"} <= set(data)
    step5 = StepTable.from_json(StepRecord, data["steps"])[5]  # stored by column
    assert (step5.step, step5.time_s, step5.tags, step5.loss) == (
        5, pytest.approx(CKPT), ("checkpoint",), pytest.approx(1 / 6))
    loaded = store.load(path, expect=MonitorResult)
    assert loaded == r
    with pytest.raises(PipecheckError, match="exists"):
        mon.save(str(path))


def test_monitor_keeps_a_bounded_window_on_long_runs() -> None:
    dev = SimDevice(compute_s=0.001)
    mon = monitor_for(dev, step_window=50)
    user_loop(dev, mon, 3000, every=1000)
    r = mon.finish()
    assert r.total_steps == 3000 and len(r.steps) == 51 and r.dropped_steps == 2949
    assert r.breakdown.steps == 3000
    assert r.breakdown.seconds("checkpoint") == pytest.approx(2 * CKPT)
    assert any("not kept" in w for w in r.warnings)


def test_default_loss_finds_common_shapes_and_explains_otherwise() -> None:
    class Scalar:
        shape = ()

    s = Scalar()
    assert default_loss((None, {"loss": s})) is s
    assert default_loss((None, s)) is s
    assert default_loss({"loss": s}) is s
    with pytest.raises(MonitorError, match="could not find the loss"):
        default_loss((1, 2, 3))


def test_misuse_is_a_clear_error() -> None:
    dev = SimDevice(compute_s=C)
    with pytest.raises(MonitorError, match="no steps"):
        monitor_for(dev).finish()
    with pytest.raises(MonitorError, match="takes a mapping"):
        Monitor(config=42)


def test_import_pipecheck_does_not_import_jax() -> None:
    import subprocess

    code = "import sys, pipecheck; pipecheck.Monitor; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "False"
