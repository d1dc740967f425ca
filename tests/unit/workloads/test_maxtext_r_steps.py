"""Which of R's steps MaxText's host work lands on, without MaxText: a checkpoint save
(``checkpoint_due``, 0.2.5's default rule, for a MaxText without its own; with MaxText
0.2.5, R asks MaxText's rule) and its profiler's steps (``profiled_steps``). In a real
run: tests/integration/test_maxtext.py."""

import pytest

from pipecheck.workloads.maxtext_model import checkpoint_due, profiled_steps


@pytest.mark.parametrize("period, on_start, due", [
    (30, True, [0, 30]),     # save_checkpoint_on_start (MaxText's default): step 0 too
    (30, False, [30]),
    (25, True, [0, 25, 50]),
    (0, True, []),           # no period: no save
])
def test_checkpoint_is_due_at_maxtexts_steps(period: int, on_start: bool, due: list[int]):
    assert [s for s in range(60) if checkpoint_due(s, period, on_start)] == due


@pytest.mark.parametrize("first, last, period, steps, covered", [
    (1, 5, -1, 60, [0, 1, 2, 3, 4, 5]),      # MaxText's defaults: skip 1 step, profile 5
    (1, 2, 10, 25, [0, 1, 2, 10, 11, 12, 20, 21, 22]),  # again every 10 steps
    (0, 2, -1, 60, [0, 1, 2]),               # from the first step: started before it
    (1, 3, -1, 4, [0, 1, 2, 3]),             # MaxText cuts the last step to the run's
])
def test_the_profiler_covers_maxtexts_steps_and_the_step_that_starts_it(
        first: int, last: int, period: int, steps: int, covered: list[int]):
    assert profiled_steps(first, last, period, steps) == covered
