"""The lagged-sync loop, timed exactly on a simulated asynchronous device."""

from __future__ import annotations

import pytest

from pipecheck.analysis.steady_state import steady_state
from pipecheck.errors import PipelineError
from pipecheck.measure.loop import run_lagged_sync_loop
from pipecheck.measure.spans import SpanRecorder
from tests.fakes import FakeClock, SimDevice, loader


def run(compute_s, load_s, n=10, hooks=(), dispatch_s=0.0, compile_s=0.0):
    clock = FakeClock()
    dev = SimDevice(compute_s, dispatch_s=dispatch_s, compile_s=compile_s, clock=clock)
    rec = SpanRecorder(clock)
    out = run_lagged_sync_loop(dev.step, 0, loader(clock, load_s), n, rec, hooks=hooks,
                               compiles=lambda: dev.compiles, read_loss=dev.read)
    return out, dev, clock


def steady_times(out):
    return [round(s.time_s, 9) for s in steady_state(out.steps)]


def test_compute_bound_steps_cost_the_compute_time():
    out, _, _ = run(compute_s=0.050, load_s=0.0, dispatch_s=0.0002)
    assert len(out.steps) == 10
    assert steady_times(out) == [0.05] * 8


def test_naive_host_wallclock_would_report_dispatch_time_not_compute():
    # What a naive loop measures: host time between iterations.
    clock = FakeClock()
    dev = SimDevice(compute_s=0.050, dispatch_s=0.0002, clock=clock)
    naive = []
    state = 0
    batches = loader(clock, 0.0)
    for _ in range(10):
        t0 = clock()
        state, _ = dev.step(state, next(batches))
        naive.append(round(clock() - t0, 9))
    assert naive == [0.0002] * 10  # 250x too fast: async dispatch hides the compute
    out, _, _ = run(compute_s=0.050, load_s=0.0, dispatch_s=0.0002)
    assert steady_times(out) == [0.05] * 8


def test_input_bound_step_time_is_the_loader_time_not_the_sum():
    out, _, _ = run(compute_s=0.030, load_s=0.050)
    assert steady_times(out) == [0.05] * 8
    last = out.steps[-1]
    assert "drain" in last.tags and round(last.time_s, 9) == 0.03  # why it is kept apart


def test_forced_sync_on_the_current_step_costs_compute_plus_load():
    clock_holder = {}

    def forced_sync(step, state, metrics, recorder):
        with recorder.span("log"):
            clock_holder["dev"].read(metrics["loss"])

    clock = FakeClock()
    dev = SimDevice(0.030, clock=clock)
    clock_holder["dev"] = dev
    rec = SpanRecorder(clock)
    out = run_lagged_sync_loop(dev.step, 0, loader(clock, 0.050), 10, rec, hooks=[forced_sync],
                               compiles=lambda: dev.compiles, read_loss=dev.read)
    assert steady_times(out) == [0.08] * 8
    assert all(round(s.spans["log"], 9) == 0.03 for s in out.steps[1:])


def test_first_step_carries_compile_and_is_kept_out_of_the_steady_state():
    out, _, _ = run(compute_s=0.050, load_s=0.0, compile_s=2.0)
    first = out.steps[0]
    assert "compile" in first.tags
    assert round(first.time_s, 9) == 2.05
    assert steady_times(out) == [0.05] * 8
    assert all(s.step > 0 for s in steady_state(out.steps))


def test_spans_and_other_add_up_to_the_step_time():
    out, _, _ = run(compute_s=0.050, load_s=0.010, dispatch_s=0.001)
    for s in out.steps:
        assert sum(s.spans.values()) == pytest.approx(s.time_s, abs=1e-12)
    mid = out.steps[5]
    assert mid.spans["data_wait"] == pytest.approx(0.010)
    assert mid.spans["dispatch"] == pytest.approx(0.001)
    assert mid.spans["sync"] == pytest.approx(0.039)


def test_loop_never_waits_on_the_step_it_just_dispatched():
    clock = FakeClock()
    dev = SimDevice(0.050, clock=clock)
    read_before_next_dispatch = []

    def read(loss):
        # at the moment of every sync, a newer step must already be queued
        read_before_next_dispatch.append(dev.free_at > loss.ready_at or dev.dispatched == 5)
        return dev.read(loss)

    run_lagged_sync_loop(dev.step, 0, loader(clock, 0.0), 5, SpanRecorder(clock),
                         read_loss=read)
    assert read_before_next_dispatch == [True] * 5
    assert dev.dispatched == 5


def test_losses_are_recorded_per_step():
    out, _, _ = run(compute_s=0.01, load_s=0.0, n=4)
    assert [s.loss for s in out.steps] == [1.0, 1 / 2, 1 / 3, 1 / 4]
    assert [s.step for s in out.steps] == [0, 1, 2, 3]


def test_running_out_of_batches_is_a_pipeline_error():
    clock = FakeClock()
    dev = SimDevice(0.01, clock=clock)
    with pytest.raises(PipelineError, match="ran out after 3 batches"):
        run_lagged_sync_loop(dev.step, 0, iter([1, 2, 3]), 5, SpanRecorder(clock),
                             read_loss=dev.read)


def test_zero_steps_is_refused():
    with pytest.raises(ValueError):
        run_lagged_sync_loop(lambda s, b: (s, {}), 0, iter([]), 0, SpanRecorder(FakeClock()))


def test_a_hook_that_starts_a_capture_annotates_the_next_steps_spans(monkeypatch):
    import sys

    from pipecheck.measure import spans as spans_mod

    entered = []

    class Annotation:
        def __init__(self, name, **kw):
            self.name = name if not kw else f"{name}{kw['step_num']}"

        def __enter__(self):
            entered.append(self.name)

        def __exit__(self, *exc):
            pass

    class Profiler:
        on = False
        annotation = step_annotation = Annotation

        def enabled(self):
            return self.on

    prof = Profiler()
    monkeypatch.setattr(spans_mod, "_profiler", prof)
    monkeypatch.setitem(sys.modules, "jax", sys.modules.get("jax", object()))

    def start_capture(step, state, metrics, recorder):
        if step == 1:  # as compare --profile's window: before step 2 is fetched
            prof.on = True

    run(compute_s=0.01, load_s=0.0, n=3, hooks=(start_capture,))
    assert entered == ["data_wait", "train2", "sync", "sync"]
