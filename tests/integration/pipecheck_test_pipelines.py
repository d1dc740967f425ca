"""User-workload entry points whose input pipelines misbehave on purpose.

Imported by name (``pipecheck_test_pipelines:...``) from the CLI subprocess and from its
Grain workers; the tests put this directory on PYTHONPATH.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

SHAPE = (4, 8)


def init(config: dict[str, Any]) -> dict[str, Any]:
    return {"w": np.zeros((), np.float32)}


def train_step(state: Any, batch: Any) -> Any:  # pipecheck dataloader never calls it
    return state, {"loss": state["w"]}


def batch(config: dict[str, Any]) -> dict[str, np.ndarray]:
    return {"x": np.zeros(SHAPE, np.float32)}


class FailAt:
    """Batch ``index`` raises, as a bad record or a bug in a user transform would."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __call__(self, i: int) -> dict[str, np.ndarray]:
        if i == self.index:
            raise ValueError(f"cannot parse record {i}: unexpected end of data")
        return {"x": np.full(SHAPE, i, np.float32)}


class HangAt:
    """From batch ``index`` on, the pipeline stops producing (a read that never returns)."""

    def __init__(self, index: int, sleep_s: float = 0.0) -> None:
        self.index = index
        self.sleep_s = sleep_s

    def __call__(self, i: int) -> dict[str, np.ndarray]:
        if i >= self.index:
            time.sleep(3600)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return {"x": np.full(SHAPE, i, np.float32)}


def failing_dataset(config: dict[str, Any]) -> Any:
    import grain

    return grain.MapDataset.range(1 << 30).map(FailAt(int(config["params"].get("fail_at", 5))))


def hanging_dataset(config: dict[str, Any]) -> Any:
    import grain

    params = config["params"]
    return grain.MapDataset.range(1 << 30).map(
        HangAt(int(params.get("hang_at", 3)), float(params.get("sleep_s", 0.0))))
