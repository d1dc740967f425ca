"""A million steps with periodic saves, four rounds in one process, under garbage-collection
pressure from another thread: the run that ended users' loops (``IndexError`` raised from
``Monitor.step`` by the fold, rounds 3 and 4). Every round must finish with no exception, no
internal-error warning, every step recorded, and a record on disk that loads."""

from __future__ import annotations

import gc
import pathlib
import threading
import warnings
from typing import Any

from pipecheck.monitor import Monitor
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult

STEPS = 1_000_000
ROUNDS = 4
SAVE_EVERY_S = 0.5
GC_THRESHOLDS = (200, 5, 5)
"""Young collections every 200 allocations: many collections land inside folds and writes."""


def null_step(state: Any, x: int) -> tuple[Any, dict[str, float]]:
    return state, {"loss": 0.0}


class Garbage(threading.Thread):
    """Makes cyclic garbage on a thread of its own until stopped: collections then run on
    that thread too, while the loop's thread folds."""

    def __init__(self) -> None:
        super().__init__(daemon=True, name="garbage")
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for _ in range(500):
                a: list[Any] = []
                a.append(a)
            self.stop.wait(0.001)


def test_a_million_steps_with_periodic_saves_four_rounds(tmp_path: pathlib.Path) -> None:
    thresholds = gc.get_threshold()
    gc.set_threshold(*GC_THRESHOLDS)
    garbage = Garbage()
    garbage.start()
    try:
        for r in range(ROUNDS):
            path = tmp_path / f"run{r}.json"
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                mon = Monitor(save_to=str(path), save_every_s=SAVE_EVERY_S, force=True,
                              locate_syncs=False, watch_compiles=False)
                for x in mon.batches(range(STEPS)):
                    mon.step(null_step, 0, x)
                result = mon.finish()
            problems = [str(w.message) for w in caught if "pipecheck" in str(w.message)]
            assert problems == [], (r, problems)
            assert not [w for w in result.warnings if "internal error" in w], result.warnings
            assert result.total_steps == STEPS == result.breakdown.steps, r
            assert mon._saver is not None and mon._saver.writes >= 2, r  # saves ran
            saved = store.load(path, expect=MonitorResult)
            assert saved.total_steps == STEPS and saved.incomplete is None
    finally:
        garbage.stop.set()
        garbage.join()
        gc.set_threshold(*thresholds)
