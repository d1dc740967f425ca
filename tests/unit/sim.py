"""A simulated asynchronous device on a fake clock, for exact timing tests.

Dispatch costs ``dispatch_s`` of host time and enqueues the step, which runs
on the device from ``max(now, device free)`` for ``compute_s``. Reading a loss
blocks (advances the clock) until that step has finished. A loader advances the
clock by its latency. Nothing sleeps; every number is exact.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator


class FakeClock:
    def __init__(self, start: float = 100.0) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


@dataclasses.dataclass(frozen=True)
class SimLoss:
    ready_at: float
    value: float


class SimDevice:
    def __init__(self, clock: FakeClock, compute_s: float, dispatch_s: float = 0.0,
                 compile_s: float = 0.0) -> None:
        self.clock = clock
        self.compute_s = compute_s
        self.dispatch_s = dispatch_s
        self.compile_s = compile_s
        self.free_at = clock.t
        self.compiles = 0
        self.steps_run = 0

    def step(self, state: int, batch: Any) -> tuple[int, dict[str, SimLoss]]:
        if self.compiles == 0:
            self.clock.advance(self.compile_s)
            self.compiles += 1
        self.clock.advance(self.dispatch_s)
        start = max(self.clock.t, self.free_at)
        self.free_at = start + self.compute_s
        self.steps_run += 1
        return state + 1, {"loss": SimLoss(self.free_at, float(state))}

    def read(self, loss: SimLoss) -> float:
        self.clock.t = max(self.clock.t, loss.ready_at)
        return loss.value


def loader(clock: FakeClock, latency_s: float) -> Iterator[int]:
    i = 0
    while True:
        clock.advance(latency_s)
        yield i
        i += 1
