"""Which of R's steps MaxText's host work lands on, without MaxText: a checkpoint save
(``checkpoint_due``, 0.2.5's default rule, for a MaxText without its own; with MaxText
0.2.5, R asks MaxText's rule) and its profiler's steps (``profiler_plan``). In a real
run: tests/integration/test_maxtext.py."""

import pytest

from pipecheck.workloads.maxtext_model import checkpoint_due, profiler_plan


@pytest.mark.parametrize("period, on_start, due", [
    (30, True, [0, 30]),     # save_checkpoint_on_start (MaxText's default): step 0 too
    (30, False, [30]),
    (25, True, [0, 25, 50]),
    (0, True, []),           # no period: no save
])
def test_checkpoint_is_due_at_maxtexts_steps(period: int, on_start: bool, due: list[int]):
    assert [s for s in range(60) if checkpoint_due(s, period, on_start)] == due


def maxtext_rules(first: int, last: int, period: int):
    """MaxText 0.2.5's Profiler rules (common/profiler.py), Python's ``%`` and all."""
    def starts(s: int) -> bool:
        return s == first or (period > 0 and (s - first) % period == 0)

    def stops(s: int) -> bool:
        return s == last or (period > 0 and (s - last) % period == 0)

    return starts, stops


@pytest.mark.parametrize("first, last, period, steps, starts, stops, tagged", [
    # MaxText's defaults (skip 1 step, profile 5): step 0's host work starts it
    (1, 5, -1, 60, {1}, {5}, {0, 1, 2, 3, 4, 5}),
    (1, 2, 10, 25, {1, 11, 21}, {2, 12, 22}, {0, 1, 2, 10, 11, 12, 20, 21, 22}),
    (0, 2, -1, 60, {0}, {2}, {0, 1, 2}),           # from the first step: before it
    (1, 3, -1, 4, {1}, {3}, {0, 1, 2, 3}),
    # a periodic window the run ends in: stopped after the last step, as MaxText does
    (1, 2, 4, 10, {1, 5, 9}, {2, 6, 9}, {0, 1, 2, 4, 5, 6, 8, 9}),
    # skip 10, period 5: MaxText's % starts it at step 0 and 5 too (before step 10)
    (10, 14, 5, 20, {0, 5, 10, 15}, {4, 9, 14, 19}, set(range(20))),
])
def test_the_profiler_runs_by_maxtexts_rules_and_stops_with_the_run(
        first, last, period, steps, starts, stops, tagged):
    plan = profiler_plan(steps, *maxtext_rules(first, last, period))
    assert (set(plan.starts), set(plan.stops), set(plan.tagged)) == (starts, stops, tagged)
