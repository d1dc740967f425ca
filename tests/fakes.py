"""The test fakes: one fake clock (every test's) and one simulated asynchronous device, for
exact timing tests. Nothing here sleeps or reads wall time; every number is exact.

Dispatching a step costs ``dispatch_s`` of host time (and ``compile_s`` the first time) and
enqueues it: it runs on the device from ``max(now, device free)`` for ``compute_s``. Reading
a value blocks (advances the clock) until it is ready. A loader advances the clock by its
latency per batch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Iterator


class FakeClock:
    """The tests' one clock. It moves only when told: ``clock()`` reads ``t``, ``advance``
    moves it on, and setting ``t`` puts it at an explicit reading; readings with no move
    between them tie (an injected clock's ties are part of what the recorder must handle).

    ``FakeClock(readings=[...])`` is scripted instead: each call returns the next reading
    (and ``t`` is the last one returned); a call past the script fails the test, as does
    ``advance`` (a scripted clock moves only by its script)."""

    def __init__(self, start: float = 0.0, *, readings: Iterable[float] | None = None) -> None:
        self.t = start
        self._script = None if readings is None else list(readings)

    def __call__(self) -> float:
        script = self._script
        if script is not None:
            if not script:
                raise AssertionError("the fake clock was read more often than its script")
            self.t = script.pop(0)
        return self.t

    def advance(self, dt: float) -> None:
        if self._script is not None:
            raise AssertionError("a scripted fake clock moves only by its script")
        self.t += dt


@dataclasses.dataclass(frozen=True)
class SimArray:
    """A device value: ready at ``ready_at`` on the fake clock."""

    value: float
    ready_at: float


class SimDevice:
    """An asynchronous device on a FakeClock (its own unless one is given)."""

    def __init__(self, compute_s: float, load_s: float = 0.0, dispatch_s: float = 0.0,
                 compile_s: float = 0.0, clock: FakeClock | None = None) -> None:
        self.clock = clock if clock is not None else FakeClock()
        self.compute_s = compute_s
        self.load_s = load_s
        self.dispatch_s = dispatch_s
        self.compile_s = compile_s
        self.free_at = self.clock.t
        self.compiles = 0
        self.dispatched = 0

    @property
    def now(self) -> float:
        return self.clock.t

    def sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def step(self, state: Any, batch: Any) -> tuple[SimArray, dict[str, SimArray]]:
        """Dispatch one step: returns at once; the new state (the step count) and the loss
        (1 / step count) are ready later."""
        if self.compiles == 0 and self.compile_s:
            self.clock.advance(self.compile_s)
        self.compiles = max(self.compiles, 1)
        self.clock.advance(self.dispatch_s)
        start = max(self.clock.t, self.free_at)
        self.free_at = start + self.compute_s
        self.dispatched += 1
        n = self.dispatched
        return SimArray(float(n), self.free_at), {"loss": SimArray(1.0 / n, self.free_at)}

    def read(self, x: SimArray) -> float:
        """Bring a value to the host: blocks (advances the clock) until it is ready."""
        self.clock.t = max(self.clock.t, x.ready_at)
        return x.value

    def batches(self) -> Iterator[int]:
        """Endless batches, each ``load_s`` after the previous one was asked for."""
        return loader(self.clock, self.load_s)


def loader(clock: FakeClock, latency_s: float) -> Iterator[int]:
    """Endless batches on ``clock``, each ``latency_s`` after it was asked for."""
    i = 0
    while True:
        clock.advance(latency_s)
        yield i
        i += 1
