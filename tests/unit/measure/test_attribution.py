"""Checkpoint attribution on a simulated async device: pipecheck's order vs a naive loop."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from pipecheck import stats
from pipecheck.analysis.steady_state import steady_state, step_anomalies
from pipecheck.measure.loop import run_lagged_sync_loop
from pipecheck.measure.spans import SpanRecorder
from pipecheck.step_types import StepHook
from pipecheck.workloads.calibrated import blocking_hook
from tests.fakes import SimDevice

C = 0.05     # device compute per step
CKPT = 0.2   # checkpoint cost
EVERY = 5
STEPS = 16


def naive_loop(dev: SimDevice, n_steps: int, recorder: SpanRecorder,
               hooks: Sequence[StepHook]) -> list[Any]:
    """The common loop: checkpoint right after dispatch, *before* flushing the previous
    step's metrics (the lagged loss read that closes the previous step's interval)."""
    state: Any = None
    batches = dev.batches()
    recorder.start()
    previous = None
    for i in range(n_steps):
        with recorder.span("data_wait"):
            batch = next(batches)
        with recorder.span("dispatch"):
            state, metrics = dev.step(state, batch)
        for hook in hooks:
            hook(i, state, metrics, recorder)
        if previous is not None:
            with recorder.span("sync"):
                value = dev.read(previous)
            recorder.mark(value)
        previous = metrics["loss"]
    with recorder.span("sync"):
        value = dev.read(previous)
    recorder.mark(value)
    return recorder.steps


def checkpoint_hook(dev: SimDevice) -> StepHook:
    return blocking_hook("checkpoint", EVERY, CKPT * 1000, wait=dev.read, sleep=dev.sleep)


def pipecheck_run() -> list[Any]:
    dev = SimDevice(compute_s=C)
    rec = SpanRecorder(dev.clock)
    out = run_lagged_sync_loop(dev.step, None, dev.batches(), STEPS, rec,
                               hooks=[checkpoint_hook(dev)], read_loss=dev.read)
    return out.steps


def naive_run() -> list[Any]:
    dev = SimDevice(compute_s=C)
    return naive_loop(dev, STEPS, SpanRecorder(dev.clock), [checkpoint_hook(dev)])


def test_pipecheck_order_charges_checkpoint_to_the_checkpoint_step() -> None:
    steps = pipecheck_run()
    assert [s.step for s in steps if "checkpoint" in s.tags] == [5, 10, 15]
    for s in steps:
        if s.step in (5, 10, 15):
            # the checkpoint waited for step s's state (C), then slept to CKPT in all
            assert s.time_s == pytest.approx(CKPT)
            assert s.spans["checkpoint"] == pytest.approx(CKPT)
        elif s.step >= 1:
            # every other step, including the ones right after a checkpoint, costs C
            assert s.time_s == pytest.approx(C), s
    steady = steady_state(steps)
    assert [s.step for s in steady] == [1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14]
    assert stats.summarize([s.time_s for s in steady]).median == pytest.approx(C)


def test_naive_order_misattributes_and_shows_an_impossibly_fast_step() -> None:
    steps = naive_run()
    by_step = {s.step: s for s in steps}
    # the checkpoint's cost lands on the step *before* the checkpoint step ...
    assert by_step[4].time_s == pytest.approx(CKPT)
    assert "checkpoint" in by_step[4].tags and "checkpoint" not in by_step[5].tags
    # ... and the checkpoint step itself looks free: faster than the device can compute
    assert by_step[5].time_s == pytest.approx(0.0)
    assert by_step[5].time_s < C / 2
    # a fast step after every checkpoint is a quarter of the candidate steps: too frequent
    # for the anomaly rule (MAX_FLAGGED_SHARE), so step 5 enters the steady state, which
    # then holds an impossible time
    steady = steady_state(steps)
    assert 5 in [s.step for s in steady]
    assert min(s.time_s for s in steady) < C / 2
    # pipecheck's order, same device, same checkpoint: nothing under C in the steady state
    assert min(s.time_s for s in steady_state(pipecheck_run())) == pytest.approx(C)
    # and the checkpoint steps are listed as slow for their checkpoint, nothing else
    # (step 15 is the drain interval: kept apart by design, not listed)
    assert [(a.step, a.cause) for a in step_anomalies(pipecheck_run())] == [
        (5, "checkpoint"), (10, "checkpoint")]


def test_step_zero_carries_compile_and_next_step_is_not_fast() -> None:
    dev = SimDevice(compute_s=C)
    compiles = {"n": 0}

    def step(state: Any, batch: Any) -> Any:
        if dev.dispatched == 0:
            dev.sleep(0.5)  # trace + compile inside the first dispatch
            compiles["n"] += 1
        return dev.step(state, batch)

    rec = SpanRecorder(dev.clock)
    steps = run_lagged_sync_loop(step, None, dev.batches(), 4, rec, read_loss=dev.read,
                                 compiles=lambda: compiles["n"]).steps
    assert steps[0].tags == ("compile",)
    assert steps[0].time_s == pytest.approx(0.5 + C)
    assert steps[0].spans["dispatch"] == pytest.approx(0.5)
    assert [s.time_s for s in steps[1:]] == pytest.approx([C, C, C])


def test_loader_bound_steps_cost_the_load_time() -> None:
    dev = SimDevice(compute_s=C, load_s=0.08)
    rec = SpanRecorder(dev.clock)
    steps = run_lagged_sync_loop(dev.step, None, dev.batches(), 6, rec, read_loss=dev.read).steps
    assert [s.time_s for s in steps[1:-1]] == pytest.approx([0.08] * 4)
    assert [s.spans["data_wait"] for s in steps[1:-1]] == pytest.approx([0.08] * 4)
    # the last interval fetches no next batch: it is the device finishing the last step
    assert steps[-1].time_s == pytest.approx(C)
    assert "data_wait" not in steps[-1].spans
