"""The one steady-state rule, for steps and for loader batches (exact, hand-built inputs)."""

from __future__ import annotations

import pytest

from pipecheck.analysis.steady_state import (
    MIN_STEADY_STEPS,
    MIN_WINDOW_STEPS,
    STEADY_SHARE,
    buffered_at_start,
    loader_estimate,
    read_prefetch_batches,
    real_steps,
    steady_batch_samples,
    steady_state,
    tag_warmup,
    wall_per_step,
    warmup_steps,
)
from pipecheck.records.common import StepRecord
from tests.unit.step_tables import table


def test_warmup_steps_are_kept_out_of_the_steady_state():
    steps = table(StepRecord(i, 0.01 if 0 < i < 5 else 0.05) for i in range(12))
    tagged = tag_warmup(steps, warmup_steps(workers=2, per_worker_buffer=2))
    steady = steady_state(tagged)
    assert [s.step for s in steady] == list(range(5, 12))
    assert all(s.time_s == 0.05 for s in steady)
    assert tagged[0].tags == () and tagged[4].tags == ("warmup",)


def test_tagged_steps_and_the_first_are_not_steady():
    steps = table([StepRecord(0, 1.0), StepRecord(1, 0.05), StepRecord(2, 0.5, ("checkpoint",)),
                   StepRecord(3, 0.05), StepRecord(4, 0.01, ("drain",))])
    assert [s.step for s in steady_state(steps)] == [1, 3]


def test_loader_time_leaves_out_the_start_up_buffer():
    # 2 workers buffer 4 batches while starting, which then arrive at once
    samples = [0.0001] * 4 + [0.030] * 16
    assert steady_batch_samples(samples, 2, 2) == tuple([0.030] * 16)
    d = loader_estimate(samples, workers=2, per_worker_buffer=2)
    assert d.value == pytest.approx(0.030) and d.statistic == "mean" and d.n == 16
    short = loader_estimate(samples[:6], workers=2, per_worker_buffer=2)
    assert short.value == pytest.approx(sum(samples[:6]) / 6)  # too few to drop any
    assert short.n == 6


# --- start-up buffers in the pipeline's own units (issue 32, item 6) --------------------------
def test_a_read_prefetch_of_elements_is_counted_in_batches():
    # MaxText-shaped: 64 documents read ahead, at least 16 of them per batch of packed rows
    assert read_prefetch_batches(64, elements_per_batch=16) == 4
    assert read_prefetch_batches(65, elements_per_batch=16) == 5  # a part batch counts whole
    assert read_prefetch_batches(500, elements_per_batch=16) == 32
    assert read_prefetch_batches(64) == 64  # a pipeline that reads whole batches
    assert buffered_at_start(0, 2, read_prefetch=64, elements_per_batch=16) == 4
    # each of 2 workers reads ahead on its own, then holds 2 batches in its output buffer
    assert buffered_at_start(2, 2, read_prefetch=64, elements_per_batch=16) == 2 * 2 + 2 * 4
    assert warmup_steps(0, 2, read_prefetch=64, elements_per_batch=16) == 5


def test_the_warmup_of_a_document_prefetch_leaves_a_steady_state():
    # 60 steps: the 64-document prefetch taken as 64 batches tagged every step warm-up
    steps = table(StepRecord(i, 0.001 if 0 < i < 5 else 0.02) for i in range(60))
    assert len(steady_state(tag_warmup(steps, warmup_steps(0, 2, 64)))) == 0
    steady = steady_state(tag_warmup(steps, warmup_steps(0, 2, 64, elements_per_batch=16)))
    assert [s.step for s in steady] == list(range(5, 60))


def test_loader_time_leaves_out_batches_of_read_ahead_elements():
    samples = [0.0001] * 4 + [0.030] * 16  # 64 elements, 16 a batch: 4 arrive at once
    assert steady_batch_samples(samples, 0, 2, 64, elements_per_batch=16) == tuple([0.030] * 16)
    assert steady_batch_samples(samples, 0, 2, 64) == tuple(samples)  # 64 "batches": none left
    d = loader_estimate(samples, 0, 2, read_prefetch=64, elements_per_batch=16)
    assert d.value == pytest.approx(0.030) and d.n == 16


@pytest.mark.parametrize("asked, warmup, runs", [
    (60, 5, 60),      # a short warm-up: the steps asked for
    (60, 33, 64),     # 500 documents at 16 a batch: 33 warm-up, 30 steady, the drain
    (60, 65, 96),     # 64 elements counted as batches (the old rule) would be sized up too
    (6, 5, 11),       # at least MIN_STEADY_STEPS steady
    (20, 0, 20),
])
def test_a_run_whose_warmup_takes_too_many_steps_is_sized_up(asked, warmup, runs):
    assert real_steps(asked, warmup) == runs
    steady = runs - warmup - 1  # the last step drains
    assert steady >= max(MIN_STEADY_STEPS, STEADY_SHARE * asked)


def test_wall_per_step_is_the_mean_over_the_steady_window_waits_included():
    # a loop fed in bursts: a 40 ms wait, then three batches ready (4 ms each); an eval
    # step and the first step are outside the window, the waits are in it
    burst = [0.040, 0.004, 0.004, 0.004]
    steps = [StepRecord(0, 2.0)] + [StepRecord(i + 1, t) for i, t in enumerate(burst * 6)]
    steps.insert(9, StepRecord(99, 1.0, ("eval",)))
    steps = table(steps)
    e = wall_per_step(steps)
    assert e is not None and e.statistic == "mean" and e.n == 24
    assert e.value == pytest.approx(sum(burst) / 4)
    assert e.low <= e.value <= e.high
    # the median is a ready batch's time, well under the wall time per step
    assert float(sorted(s.time_s for s in steady_state(steps))[12]) < e.value / 2


def test_wall_per_step_needs_a_window():
    steps = [StepRecord(i, 0.01) for i in range(MIN_WINDOW_STEPS)]  # the first is apart
    assert wall_per_step(table(steps)) is None
    assert wall_per_step(table([*steps, StepRecord(MIN_WINDOW_STEPS, 0.01)])) is not None
