"""R's MaxText eval without MaxText: when MaxText's loop evaluates (its ``ran_eval`` rule),
and its eval loop's order (iterator reset, eval step, metric logger, ``eval_steps`` stop).
Real MaxText's eval in R: tests/integration/test_maxtext.py."""

from __future__ import annotations

from typing import Any

import pytest

from pipecheck.workloads import maxtext_model


@pytest.mark.parametrize("interval, start, due", [
    (5, 0, [0, 5, 10]),      # MaxText's own train evaluates after steps 0, 5, 10 (Monitor test)
    (5, 3, [3, 8, 13]),      # eval_start_step: from that step on
    (20, 0, [0]),
    (0, 0, []),              # eval_interval <= 0: no eval
    (-1, 0, []),
])
def test_eval_is_due_at_maxtexts_steps(interval: int, start: int, due: list[int]) -> None:
    assert [s for s in range(15) if maxtext_model.eval_due(s, interval, start)] == due


class Batches:
    """An eval iterator as MaxText's: ``reset`` restarts it at the first batch."""

    def __init__(self, n: int, log: list[tuple[Any, ...]]) -> None:
        self.n, self.log, self.at = n, log, 0

    def reset(self) -> None:
        self.log.append(("reset",))
        self.at = 0

    def __iter__(self) -> Batches:
        return self

    def __next__(self) -> int:
        if self.at >= self.n:
            raise StopIteration
        self.log.append(("fetch", self.at))
        self.at += 1
        return self.at - 1


class Logger:
    def __init__(self, log: list[tuple[Any, ...]]) -> None:
        self.log = log

    def reset_eval_metrics(self) -> None:
        self.log.append(("reset_eval_metrics",))

    def mark_eval_loop_start(self) -> None:
        self.log.append(("mark",))

    def buffer_and_write_metrics(self, metrics: Any, step: int, step_time_delta: Any = None,
                                 is_training: bool = True) -> None:
        self.log.append(("write", metrics, step, is_training))


def _eval(n: int, most: int) -> list[tuple[Any, ...]]:
    log: list[tuple[Any, ...]] = []
    batches = Batches(n, log)
    batches.at = 3  # the previous eval left it there

    def evaluate(state: Any, batch: int) -> str:
        log.append(("eval", state, batch))
        return f"m{batch}"

    maxtext_model._run_eval(batches, evaluate, "S", Logger(log), most)  # type: ignore[arg-type]
    return log


def test_the_eval_loop_stops_after_eval_steps_without_fetching_another() -> None:
    assert _eval(5, 2) == [
        ("reset",), ("reset_eval_metrics",), ("mark",),
        ("fetch", 0), ("eval", "S", 0), ("write", "m0", 0, False),
        ("fetch", 1), ("eval", "S", 1), ("write", "m1", 1, False)]


def test_eval_steps_of_zero_or_less_run_the_whole_eval_set() -> None:
    assert [e[1] for e in _eval(3, -1) if e[0] == "eval"] == ["S"] * 3
    assert [e[2] for e in _eval(3, 0) if e[0] == "write"] == [0, 1, 2]
