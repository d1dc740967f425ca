"""Monitor on a simulated async device: ordering, attribution, record round trip."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from pipecheck.errors import MonitorError, PipecheckError
from pipecheck.monitor import Monitor, default_loss
from pipecheck.records import store
from pipecheck.records.common import StepRecord
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.steps import StepTable
from tests.fakes import SimDevice

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
    assert r.step_time.summary.median == pytest.approx(C)
    assert r.step_time.summary.n == 12  # 15 steps after the first, minus 3 checkpoint steps
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


def test_a_slow_step_of_host_work_is_flagged_explained_and_kept_out() -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        state, metrics = mon.step(dev.step, state, batch)
        if step == 19:
            dev.sleep(1.5)  # an eager text generation, outside any span
        if step + 1 == 30:
            break
    r = mon.finish()
    assert [(a.step, a.cause) for a in r.anomalies] == [(19, "host work outside spans")]
    assert r.anomalies[0].ratio == pytest.approx(1.5 / C)
    assert r.anomalies[0].evidence.startswith("host work outside spans 1.50 s of the step's")
    by = {s.step: s for s in r.steps}
    assert by[19].tags == ("slow",) and by[20].tags == ()
    assert r.step_time.summary.n == 27  # steps 1..28 (29 drains), less the slow one
    assert r.step_time.summary.median == pytest.approx(C) and max(r.step_time.samples_s) < 2 * C
    text = mon.report()
    assert "anomalous steps (kept out of the steady state):" in text
    assert "host work outside spans" in text
    again = MonitorResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again.anomalies == r.anomalies


def test_compile_events_are_charged_to_the_step_whose_interval_they_end_in() -> None:
    from pipecheck.measure.loop import compiles_per_step
    from pipecheck.measure.spans import SpanRecorder
    from pipecheck.records.events import CompileEvent

    dev = SimDevice(compute_s=C)
    rec = SpanRecorder(dev.clock, raw_window=3)  # keeps only the last 3 marks
    rec.start()
    for _ in range(4):   # marks at 1, 2, 3, 4; kept: 2, 3, 4 (marks 2..4)
        dev.sleep(1.0)
        rec.mark()
    events = [CompileEvent("/jax/core/compile/backend_compile_duration", "jit(f)", 0.2, 2.5),
              CompileEvent("/jax/core/compile/jaxpr_trace_duration", "jit(f)", 0.1, 3.0),
              CompileEvent("/jax/core/compile/backend_compile_duration", "jit(g)", 0.3, 0.5)]
    assert compiles_per_step(rec, events) == {2: {"jit(f)": pytest.approx(0.3)}}


def test_user_spans_are_timed_every_time_and_only_tagging_names_tag() -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    with mon.span("setup"):  # before the loop: starts the Monitor, charged to step 0
        dev.sleep(0.5)
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        state, metrics = mon.step(dev.step, state, batch)
        with mon.span("log"):
            dev.sleep(0.01)
        if step in (2, 4):
            with mon.span("eval"):
                dev.sleep(0.1)
        if step == 5:
            break
    r = mon.finish()
    assert [s.spans["log"] for s in r.steps] == pytest.approx([0.01] * 6)
    assert r.steps[0].spans["setup"] == pytest.approx(0.5)
    assert [s.step for s in r.steps if "setup" in s.spans] == [0]
    assert {s.step: s.tags for s in r.steps} == {
        0: ("slow",), 1: (), 2: ("eval",), 3: (), 4: ("eval",), 5: ("drain",)}
    assert r.breakdown.seconds("eval") == pytest.approx(0.2)


def test_a_user_span_around_the_step_holds_the_loops_own_spans() -> None:
    dev = SimDevice(compute_s=C, load_s=0.01, dispatch_s=0.002)
    mon = monitor_for(dev)
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        with mon.span("train"):  # dispatch and the previous step's sync, nested in it
            state, metrics = mon.step(dev.step, state, batch)
        if step == 5:
            break
    r = mon.finish()
    for s in r.steps[1:-1]:  # each train span ends in the interval after its sync's mark
        assert set(s.spans) == {"data_wait", "train", "other"}, s.spans
        assert s.spans["data_wait"] == pytest.approx(0.01)
    assert r.breakdown.seconds("dispatch") == 0.0 and r.breakdown.seconds("sync") == 0.0


def test_a_capture_makes_the_names_spans_annotations_from_the_next_step(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from pipecheck.measure import spans as spans_mod
    from pipecheck.monitor import loop as monitor_mod

    entered: list[str] = []

    class Annotation:
        def __init__(self, name: str, **kw: object) -> None:
            self.name = name

        def __enter__(self) -> None:
            entered.append(self.name)

        def __exit__(self, *exc: object) -> None:
            pass

    class Profiler:
        on = False
        annotation = step_annotation = Annotation

        def enabled(self) -> bool:
            return self.on

    prof = Profiler()
    monkeypatch.setattr(spans_mod, "_profiler", prof)
    monkeypatch.setattr(monitor_mod, "profiler", lambda: prof)
    monkeypatch.setitem(sys.modules, "jax", sys.modules.get("jax", object()))
    dev = SimDevice(compute_s=C)
    mon = Monitor(config={"loop": "sim"}, clock=dev.clock, read_loss=dev.read,
                  locate_syncs=False, watch_compiles=False, watch_gc=False,
                  env={"backend": "sim"})
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        prof.on = step in (2, 3)
        state, metrics = mon.step(dev.step, state, batch)
        with mon.span("log"):
            dev.sleep(0.01)
        if step == 5:
            break
    r = mon.finish()
    # a capture on from step 2's dispatch to step 4's: the dispatch, sync and log spans of
    # steps 2 and 3 (log a name's span, switched by the step) and the fetches of 3 and 4
    assert entered == ["train", "sync", "log", "data_wait", "train", "sync", "log",
                       "data_wait"]
    assert [s.spans["log"] for s in r.steps] == pytest.approx([0.01] * 6)


def test_a_loop_over_epochs_stalls_at_each_new_pass_and_the_record_says_so() -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)

    def one_epoch():  # reopening the files costs 0.3 s at the start of each pass
        dev.sleep(0.3)
        yield from range(6)

    state: Any = None
    for _ in range(8):
        for batch in mon.batches(one_epoch()):
            state, _ = mon.step(dev.step, state, batch)
    r = mon.finish()
    [f] = [f for f in r.findings if f.kind == "periodic-stall"]
    assert f.numbers["period"] == 6 and f.location == "epoch"
    assert "a new pass over the data every 6 steps" in f.message
    # each stalled step takes the 0.3 s wait, the device's 50 ms step running beside it:
    # 0.25 s more than a typical step
    assert f.numbers["stalls"] == 7 and f.numbers["lost_s"] == pytest.approx(7 * 0.25)
    # one pass only: the same stalls, and nothing says what they are
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)

    def epochs():
        for _ in range(8):
            yield from one_epoch()

    for batch in mon.batches(epochs()):
        state, _ = mon.step(dev.step, state, batch)
    [f] = [f for f in mon.finish().findings if f.kind == "periodic-stall"]
    assert f.location is None and "nothing pipecheck knows" in f.message


def test_the_sync_locator_charges_user_syncs_outside_spans_to_the_step_they_ran_in():
    from pipecheck.measure.spans import SpanRecorder
    from pipecheck.measure.sync_locator import FrameInfo
    from pipecheck.monitor.watchers import LoopSyncLocator

    now = [0.0]
    rec = SpanRecorder(lambda: now[0])
    loc = LoopSyncLocator(rec, 0.001, lambda: now[0])
    user_sync = [FrameInfo("/site-packages/jax/_src/array.py", 623, "_value"),
                 FrameInfo("/home/me/train.py", 88, "train")]
    loc.record(user_sync, 0.003)  # before the loop's start: no step yet
    rec.start()
    loc.record(user_sync, 0.002)  # step 0 (from the start to the first mark)
    rec.mark()
    loc.record(user_sync, 0.004)  # step 1
    with rec.span("eval"):
        loc.record(user_sync, 0.5)  # inside a span: the span's time, not a stall
    loc.record([FrameInfo("/home/me/train.py", 10, "train", "x = 1")], 0.1)  # no sync
    assert loc.outside_by_step == {0: 0.002, 1: 0.004}
    assert loc.outside_spans_s == pytest.approx(0.009)
