"""Pure: the pieces every record's gains are built from (compare's, profile's): the ranked
gains with their notes, a gain bounded by a record's numbers, the line said when the step
is within the verdict's margin of its floor, and the sync sites a record's findings name."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from pipecheck.analysis.verdict import INPUT_BOUND_MARGIN
from pipecheck.records.common import Estimate, Finding
from pipecheck.records.gains import Gain, GainKind, GainRange, StepInterval
from pipecheck.units import ms

NEAR_FLOOR_MARGIN = INPUT_BOUND_MARGIN
"""R within this share of T leaves nothing to buy beyond it: the verdict tells two step
times apart only past this margin (``verdict.INPUT_BOUND_MARGIN``)."""

SYNC_FINDINGS = ("forced-sync", "harmless-sync")
"""compare's findings that name a user's sync site with its wait per step."""

@dataclasses.dataclass(frozen=True)
class RecordGains:
    """The headspace (None: T or R unusable), the ranked gains, and the notes: what bounds
    them all, and why a kind of gain is missing."""

    headspace: StepInterval | None
    gains: tuple[Gain, ...]
    notes: tuple[str, ...]


def near_floor_note(target: Estimate, real: Estimate) -> str | None:
    """The one line said when R is within ``NEAR_FLOOR_MARGIN`` of T (None otherwise)."""
    if not (target.usable and real.usable) or \
            real.value > target.value * (1.0 + NEAR_FLOOR_MARGIN):
        return None
    return (f"R ({ms(real.value)}) is within {100 * NEAR_FLOOR_MARGIN:.0f}% of T "
            f"({ms(target.value)}), the margin inside which the verdict tells no two step "
            "times apart: compute is the floor, and no further change buys more than that "
            f"margin ({ms(NEAR_FLOOR_MARGIN * target.value)} a step)")


def bound_gain(kind: GainKind, change: str, step: float, low: float, high: float,
               expected: float, why: str) -> Gain:
    """A gain bounded by the record's numbers: ``low`` to ``high`` over ``step``."""
    return Gain(kind=kind, change=change,
                predicted_step_s=StepInterval(step - expected, step - high, step - low),
                gain_s=GainRange(low, high), how="bound", why=why)


def sync_sites(findings: Sequence[Finding]) -> list[tuple[str, float]]:
    """(location, wait per step) of each user sync site named in ``findings`` (compare's
    and profile's sync findings)."""
    return [(f.location, f.numbers["seconds_per_step"]) for f in findings
            if f.kind in SYNC_FINDINGS and f.location and "seconds_per_step" in f.numbers]


def ranked(gains: Sequence[Gain]) -> tuple[Gain, ...]:
    """The gains by their high end, largest first (ties: by the low end)."""
    return tuple(sorted(gains, key=lambda g: (-g.gain_s.high, -g.gain_s.low)))
