"""What each change buys, as report parts: the headspace (R less T) as a range, then the
ranked gains, every one as a range (never a single number), and why each range's ends are
where they are. One renderer for every record that holds ``gains``."""

from __future__ import annotations

from typing import Sequence

from pipecheck.records.gains import Gain, StepInterval
from pipecheck.report.blocks import Part, Table
from pipecheck.units import ms

GAINS_TITLE = "what each change buys (per step; low: what overlap may already hide):"


LOOP_LOW_WHY = ("the record cannot say how much of the host's time the device computed "
                "through")
"""Why a loop's headspace starts at 0 (a Monitor record times the host only)."""

INTERVALS_LOW_WHY = "R's and T's intervals overlap"
"""Why a headspace taken from two estimates' intervals starts at 0."""


def headspace_line(h: StepInterval, low_why: str = LOOP_LOW_WHY) -> str:
    """The headspace in one line: its range and what it bounds (``low_why``: why a low end
    of 0 is 0)."""
    return (f"headspace (R less T: what any input, sync or host-work fix can buy at most): "
            f"{ms(h.low)} to {ms(h.high)} per step"
            + (f" (low 0: {low_why})" if h.low == 0.0 and h.high > 0.0 else ""))


def gains_parts(headspace: StepInterval | None, gains: Sequence[Gain],
                notes: Sequence[str] = (), low_why: str = LOOP_LOW_WHY) -> list[Part]:
    """The headspace line, the notes (what bounds every gain, why a kind is missing), the
    gains table ranked as the record holds it, and each row's reason (a row's number in
    the table)."""
    parts: list[Part] = [headspace_line(headspace, low_why)] if headspace is not None else []
    parts += list(notes)
    if not gains:
        return parts
    rows = [[str(i), g.kind, g.change, f"{ms(g.gain_s.low)} to {ms(g.gain_s.high)}",
             f"{ms(g.predicted_step_s.low)} to {ms(g.predicted_step_s.high)}", g.how]
            for i, g in enumerate(gains, 1)]
    why = "\n".join(f"{i}. {g.why}" for i, g in enumerate(gains, 1) if g.why)
    parts += [GAINS_TITLE, Table(rows, ["#", "kind", "change", "gain", "predicted step",
                                        "how"])]
    return parts + ([f"why each range:\n{why}"] if why else [])
