"""The one steady-state rule, for steps and for loader batches (exact, hand-built inputs)."""

from __future__ import annotations

import pytest

from pipecheck.analysis.steady_state import (
    loader_estimate,
    steady_batch_samples,
    steady_state,
    tag_warmup,
    warmup_steps,
)
from pipecheck.records.common import StepRecord


def test_warmup_steps_are_kept_out_of_the_steady_state():
    steps = [StepRecord(i, 0.01 if 0 < i < 5 else 0.05) for i in range(12)]
    tagged = tag_warmup(steps, warmup_steps(workers=2, per_worker_buffer=2))
    steady = steady_state(tagged)
    assert [s.step for s in steady] == list(range(5, 12))
    assert all(s.time_s == 0.05 for s in steady)
    assert tagged[0].tags == () and tagged[4].tags == ("warmup",)


def test_tagged_steps_and_the_first_are_not_steady():
    steps = [StepRecord(0, 1.0), StepRecord(1, 0.05), StepRecord(2, 0.5, ("checkpoint",)),
             StepRecord(3, 0.05), StepRecord(4, 0.01, ("drain",))]
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
