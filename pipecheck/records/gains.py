"""What a change buys: a gain as a range, with the step time it predicts and how it was
obtained (the ``gains`` of a record, ranked by gain)."""

from __future__ import annotations

import dataclasses
from typing import Literal

from pipecheck.records.base import Record

GainKind = Literal["loader-setting", "sync", "stage", "cores", "prefetch", "host-work"]
"""What a change changes: the loader's setting (or its use: one iterator across epochs), a
forced sync removed, a pipeline stage precomputed, more host cores, a larger prefetch, host
work (a checkpoint, an eval, logging, gc) moved off the loop or done less often."""

GainHow = Literal["measured", "model", "bound"]
"""How a gain was obtained: measured with the change made, predicted by a model, or bounded
by what the record holds (the range's ends are the bounds)."""


@dataclasses.dataclass(frozen=True)
class StepInterval(Record):
    """A time per step (a predicted step time, a headspace): its middle and its range, in
    seconds."""

    value: float
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class GainRange(Record):
    """Seconds a step may gain: ``low`` what overlap may already hide (0 where it cannot be
    known), ``high`` the change in isolation."""

    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class Gain(Record):
    """One change the measurements support, and what it buys per step."""

    kind: GainKind
    change: str
    """The change in words, with the line or the setting."""
    predicted_step_s: StepInterval
    gain_s: GainRange
    how: GainHow
    measured_step_s: float | None = None
    """The step time measured with the change made (None: not measured)."""
    why: str = ""
    """Why the range's ends are where they are (a low end of 0 says why it cannot be known)."""
