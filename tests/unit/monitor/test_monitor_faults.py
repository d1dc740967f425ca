"""Nothing pipecheck runs inside a user's loop raises into it: faults injected into each of
those paths (the recorder's fold, a span name added while a fold runs, the periodic save's
capture and its writer thread, the TensorBoard hook, the garbage-collection callback, the
compilation listener, the sync locator's thread, the profiler window) are reported once as a
warning naming what was lost, the record keeps the message, and the Monitor goes on timing;
the user's own exceptions pass through unchanged."""

from __future__ import annotations

import gc
import pathlib
import threading
import warnings
from typing import Any, Callable

import pytest

import pipecheck.measure.span_fold as span_fold
import pipecheck.measure.spans as spans
from pipecheck.measure.faults import Faults
from pipecheck.measure.spans import FOLD_STEPS, SpanRecorder
from pipecheck.measure.sync_locator import SyncLocator
from pipecheck.monitor import Monitor
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.fakes import FakeClock, SimDevice

C = 0.01


def monitor_for(dev: SimDevice, **kw: Any) -> Monitor:
    kw = {"locate_syncs": False, "watch_compiles": False, "watch_gc": False, **kw}
    return Monitor(config={"loop": "sim"}, clock=dev.clock, read_loss=dev.read,
                   env={"backend": "sim"}, **kw)


def run_loop(dev: SimDevice, mon: Monitor, n: int,
             each: Callable[[int], None] = lambda i: None) -> MonitorResult:
    state: Any = None
    for i, batch in enumerate(mon.batches(dev.batches())):
        state, _ = mon.step(dev.step, state, batch)
        each(i)
        if i + 1 == n:
            break
    return mon.finish()


def internal(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "internal error" in str(w.message)]


def test_a_span_name_added_while_a_fold_runs_is_no_fault(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The race that ended users' runs: a name numbered (by a gc callback, or another
    thread) between the fold's sums and its columns. With the old fold this raised
    ``IndexError: index 3 is out of bounds for axis 1 with size 3`` from ``Monitor.step``."""
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    real = span_fold._sum_spans_by_step
    added: list[int] = []

    def sums_then_a_new_name(*args: Any) -> Any:
        out = real(*args)
        added.append(mon.recorder.name_id(f"late-{len(added)}"))
        return out

    monkeypatch.setattr(span_fold, "_sum_spans_by_step", sums_then_a_new_name)
    n = 2 * FOLD_STEPS + 10
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_loop(dev, mon, n)
    assert len(added) >= 2  # the folds inside the loop met it, not only finish's
    assert internal(caught) == [] and not [w for w in r.warnings if "internal error" in w]
    assert r.total_steps == n and r.breakdown.steps == n
    assert [s.step for s in r.steps] == list(range(n))


def test_a_fold_that_fails_leaves_its_steps_out_and_recording_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    real = spans.fold_intervals
    calls = []

    def fails_once(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise IndexError("injected")
        return real(*args)

    monkeypatch.setattr(spans, "fold_intervals", fails_once)
    n = 3 * FOLD_STEPS
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_loop(dev, mon, n)
    (message,) = internal(caught)
    assert "the Monitor's step recorder (IndexError: injected)" in message
    assert f"{FOLD_STEPS} steps from step {FOLD_STEPS - 1} on are left out" in message
    assert r.warnings[-1] == message
    numbers = [s.step for s in r.steps]
    # the first fold's steps, then a gap of the failed fold's, then every step after it
    assert numbers == [*range(FOLD_STEPS - 1), *range(2 * FOLD_STEPS - 1, n)]
    assert r.total_steps == r.breakdown.steps == n - FOLD_STEPS  # the steps recorded
    later = [s for s in r.steps if s.step > 2 * FOLD_STEPS]
    assert all(s.time_s == pytest.approx(C) for s in later)


def test_every_fold_failing_reports_once_and_the_loop_ends_normally(
        monkeypatch: pytest.MonkeyPatch) -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)

    def broken(*args: Any) -> Any:
        raise ValueError("always")

    monkeypatch.setattr(spans, "fold_intervals", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state: Any = None
        for i, batch in enumerate(mon.batches(dev.batches())):
            state, _ = mon.step(dev.step, state, batch)
            if i + 1 == 3 * FOLD_STEPS:
                break
    assert len(internal(caught)) == 1
    assert mon.recorder.faults.messages[0].endswith("times]")


def test_the_users_own_exception_passes_through_unchanged() -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    boom = ValueError("loss is nan")

    def step(state: Any, batch: Any) -> Any:
        if batch == 7:
            raise boom
        return dev.step(state, batch)

    with pytest.raises(ValueError) as got:
        state: Any = None
        for batch in mon.batches(dev.batches()):
            state, _ = mon.step(step, state, batch)
    assert got.value is boom
    assert mon.recorder.faults.messages == ()


def test_a_periodic_save_that_cannot_capture_skips_that_write(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = SimDevice(compute_s=C)
    path = tmp_path / "run.json"
    mon = monitor_for(dev, save_to=str(path), save_every_s=1.0)
    real = mon._watchers.capture
    calls = []

    def fails_once(fold: bool = True) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("injected capture")
        return real(fold)

    monkeypatch.setattr(mon._watchers, "capture", fails_once)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_loop(dev, mon, 500)  # 5 s of steps: a write due every second
    (message,) = internal(caught)
    assert "the Monitor's periodic save (RuntimeError: injected capture)" in message
    assert "the next is tried on time" in message
    assert len(calls) >= 4  # the writes after the failed one were tried, one a second
    saved = store.load(path, expect=MonitorResult)
    assert saved.total_steps == 500 and message in saved.warnings and r.total_steps == 500


def test_a_failing_build_on_the_writer_thread_never_reaches_the_loop(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pipecheck.monitor.loop as loop

    dev = SimDevice(compute_s=C)
    path = tmp_path / "run.json"
    mon = monitor_for(dev, save_to=str(path), save_every_s=1.0)
    real = loop.build_result
    failed = threading.Event()

    def fails_while_running(state: Any, env: Any, config: Any, incomplete: Any = None) -> Any:
        if incomplete is not None:
            failed.set()
            raise KeyError("injected build")
        return real(state, env, config, incomplete)

    monkeypatch.setattr(loop, "build_result", fails_while_running)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # a handshake: the loop waits at step 250 until the writer thread has met the fault
        r = run_loop(dev, mon, 300, each=lambda i: failed.wait(120) if i == 250 else None)
    assert failed.is_set()
    assert any("could not build the run's record" in str(w.message) for w in caught)
    assert r.total_steps == 300 and store.load(path, expect=MonitorResult).total_steps == 300


def test_a_step_hook_that_raises_costs_the_hook_not_the_record() -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev)
    mon.start()

    def hook(table: Any) -> None:
        raise OSError("injected hook")

    mon.recorder.on_steps.append(hook)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_loop(dev, mon, FOLD_STEPS + 100)
    (message,) = internal(caught)
    assert "a step hook (" in message and "OSError: injected hook" in message
    assert r.total_steps == FOLD_STEPS + 100 and len(r.steps) == FOLD_STEPS + 100


def test_a_garbage_collection_callback_fault_is_reported_not_printed(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev, watch_gc=True)

    def add_span(span: Any) -> None:
        raise MemoryError("injected gc")

    monkeypatch.setattr(mon.recorder, "add_span", add_span)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_loop(dev, mon, 50, each=lambda i: gc.collect() if i % 10 == 5 else None)
    (message,) = internal(caught)
    assert "the garbage-collection callback (MemoryError: injected gc)" in message
    assert "Exception ignored" not in capsys.readouterr().err
    assert r.total_steps == 50


def test_a_compilation_listener_fault_never_reaches_the_jitted_call(
        monkeypatch: pytest.MonkeyPatch) -> None:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from pipecheck.measure.compile_watch import CompileWatcher

    def on_event(self: Any, *args: Any) -> None:
        raise TypeError("injected listener")

    monkeypatch.setattr(CompileWatcher, "_on_event", on_event)
    mon = Monitor(locate_syncs=False, watch_gc=False, env={"backend": "cpu"})

    @jax.jit
    def step(w: Any, x: Any) -> Any:
        return w + x, {"loss": jnp.sum(w)}

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = jnp.zeros(3)
        for x in mon.batches(range(5)):
            w, _ = mon.step(step, w, jnp.float32(x))
        r = mon.finish()
    (message,) = internal(caught)
    assert "the compilation listener (TypeError: injected listener)" in message
    assert r.total_steps == 5


def test_the_sync_locator_samples_on_after_a_fault() -> None:
    faults = Faults()
    seen = threading.Event()
    calls = []

    def stack(thread_id: int) -> list[Any]:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("injected stack")
        if len(calls) >= 3:
            seen.set()
        return []

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with SyncLocator(interval_s=0.001, get_stack=stack, faults=faults):
            assert seen.wait(60), "the sampling thread stopped after its fault"
    assert len(internal(caught)) == 1 and "the sync locator" in faults.messages[0]


def test_a_profiler_window_that_cannot_start_is_reported(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jax = pytest.importorskip("jax")

    def start_trace(*a: Any, **k: Any) -> None:
        raise RuntimeError("Only one profile may be run at a time.")

    monkeypatch.setattr(jax.profiler, "start_trace", start_trace)
    dev = SimDevice(compute_s=C)
    mon = monitor_for(dev, profile_steps=range(3, 6), profile_dir=str(tmp_path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = run_loop(dev, mon, 10)
    (message,) = internal(caught)
    assert "the profiler window (RuntimeError: Only one profile" in message
    assert "steps 3-5 are not captured" in message and r.total_steps == 10


def test_faults_report_each_place_once_and_never_raise() -> None:
    faults = Faults()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            faults.report("a place", ValueError("x"), "nothing lost")
        faults.report("another", KeyError("k"), "a little")
        guarded = faults.guarded("a callback", "its call", lambda: 1 // 0, default=-1)
        assert guarded() == -1
    assert len(caught) == 3
    assert faults.messages == (
        "pipecheck: internal error in a place (ValueError: x); nothing lost; the training "
        "loop goes on (please report this message) [3 times]",
        "pipecheck: internal error in another (KeyError: 'k'); a little; the training loop "
        "goes on (please report this message)",
        "pipecheck: internal error in a callback (ZeroDivisionError: integer division or "
        "modulo by zero); its call; the training loop goes on (please report this message)")
    assert bool(faults) and not bool(Faults())


def test_a_recorder_numbers_gc_before_any_collection() -> None:
    rec = SpanRecorder(FakeClock(), annotate=False)
    before = list(rec._names)
    spans.GcSpans(rec)
    assert rec._names == [*before, "gc"]
