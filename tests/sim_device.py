"""A simulated asynchronous device on a virtual clock, for exact timing tests.

``dispatch`` enqueues a step that finishes at ``max(now, device_free) + compute_s``
and returns at once (after ``dispatch_s``); reading a result advances the clock to
its finish time; the loader advances the clock by ``load_s`` per batch; ``sleep``
advances it by the given seconds. Nothing here touches wall time.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator


@dataclasses.dataclass(frozen=True)
class SimArray:
    """A device value: ready at ``ready_at`` on the virtual clock."""

    value: float
    ready_at: float


class SimDevice:
    def __init__(self, compute_s: float, load_s: float = 0.0, dispatch_s: float = 0.0) -> None:
        self.compute_s = compute_s
        self.load_s = load_s
        self.dispatch_s = dispatch_s
        self.now = 0.0
        self.free_at = 0.0
        self.dispatched = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def step(self, state: Any, batch: Any) -> tuple[SimArray, dict[str, SimArray]]:
        """Dispatch one step: returns immediately; its outputs are ready later."""
        start = max(self.now, self.free_at)
        finish = start + self.compute_s
        self.free_at = finish
        self.dispatched += 1
        self.now += self.dispatch_s
        return SimArray(float(self.dispatched), finish), {"loss": SimArray(1.0 / self.dispatched,
                                                                              finish)}

    def read(self, x: SimArray) -> float:
        """Bring a value to the host: blocks (advances the clock) until it is ready."""
        self.now = max(self.now, x.ready_at)
        return x.value

    def batches(self) -> Iterator[int]:
        i = 0
        while True:
            self.now += self.load_s
            yield i
            i += 1
