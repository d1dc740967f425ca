"""What a loop's loader restarts cost (``loop_verdict.restart_excess``): at each restart the
whole data wait of the step that restarted, the previous pass's end included (a
``grain.DataLoader`` iterator stopping its 2 workers took ~0.7 s on the 2-core machine, the
new pass's first batch ~1.7 s: tests/integration/test_own_loops.py's Grain loop), and the
steps right after it still waiting for the other workers' first batches (0.8 s on the
loaded machine), beyond a steady batch's wait."""

from __future__ import annotations

import pytest

from pipecheck.analysis.loop_verdict import RESTART_TAIL_FACTOR, RESTART_TAIL_STEPS, restart_excess
from pipecheck.records.common import LoaderStart, StepRecord
from pipecheck.records.steps import StepTable
from tests.unit.step_tables import table

STEADY, END, FIRST = 0.001, 0.7, 1.7


def epoch_steps(epochs: int, per_epoch: int, end_s: float) -> StepTable[StepRecord]:
    """Steps of ``epochs`` passes; the last step of each pass but the final one holds the
    pass's end (``end_s``) and the next pass's first batch (``FIRST``)."""
    rows = []
    for i in range(epochs * per_epoch):
        wait = FIRST if i == 0 else STEADY
        if (i + 1) % per_epoch == 0 and i + 1 < epochs * per_epoch:
            wait = end_s + FIRST
        rows.append(StepRecord(step=i, time_s=wait + 0.005, spans={"data_wait": wait}))
    return table(rows)


def starts(epochs: int, per_epoch: int) -> list[LoaderStart]:
    return [LoaderStart(0, 0, FIRST)] + [LoaderStart(k, per_epoch * k - 1, FIRST)
                                          for k in range(1, epochs)]


def test_a_restart_costs_the_previous_pass_end_and_the_new_first_batch() -> None:
    steps = epoch_steps(3, 20, END)
    assert restart_excess(starts(3, 20), steps) == pytest.approx(2 * (END + FIRST - STEADY))


def test_a_pass_that_ends_at_once_costs_its_first_batch() -> None:
    assert restart_excess(starts(3, 20), epoch_steps(3, 20, 0.0)) == pytest.approx(
        2 * (FIRST - STEADY))


def test_a_restart_step_left_out_of_the_record_costs_its_first_batch() -> None:
    steps = table(s for s in epoch_steps(3, 20, END) if s.step != 19)
    assert restart_excess(starts(3, 20), steps) == pytest.approx(
        (FIRST - STEADY) + (END + FIRST - STEADY))


def test_no_restart_costs_nothing() -> None:
    assert restart_excess([LoaderStart(0, 0, FIRST)], epoch_steps(1, 20, END)) == 0.0
    assert restart_excess([], table([])) == 0.0


def with_waits(steps: StepTable[StepRecord], waits: dict[int, float]) -> StepTable[StepRecord]:
    return table(StepRecord(step=s.step, time_s=s.time_s, spans={"data_wait": waits[s.step]})
                 if s.step in waits else s for s in steps)


def test_the_other_workers_first_batches_after_a_restart_are_the_restarts() -> None:
    second = 0.8
    steps = with_waits(epoch_steps(3, 20, END), {20: second, 40: second, 41: second})
    assert restart_excess(starts(3, 20), steps) == pytest.approx(
        2 * (END + FIRST - STEADY) + 3 * (second - STEADY))


def test_the_tail_ends_at_the_first_steady_wait_and_at_its_cap() -> None:
    low = (RESTART_TAIL_FACTOR - 1) * STEADY  # under the factor: steady again
    steps = with_waits(epoch_steps(2, 20, END), {20: 0.5, 21: low, 22: 0.5})
    assert restart_excess(starts(2, 20), steps) == pytest.approx(
        (END + FIRST - STEADY) + (0.5 - STEADY))
    slow = {30 + j: 0.5 for j in range(RESTART_TAIL_STEPS + 5)}
    steps = with_waits(epoch_steps(2, 30, END), slow)
    assert restart_excess(starts(2, 30), steps) == pytest.approx(
        (END + FIRST - STEADY) + RESTART_TAIL_STEPS * (0.5 - STEADY))
