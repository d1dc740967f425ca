"""What each change buys, as report parts: the headspace (R less T) as a range, then the
ranked gains, every one as a range (never a single number), and why each range's ends are
where they are. One renderer for every record that holds ``gains``."""

from __future__ import annotations

from typing import Sequence

from pipecheck.records.gains import Gain, StepInterval
from pipecheck.report.blocks import Part, Table
from pipecheck.units import ms

GAINS_TITLE = "what each change buys (per step; low: what overlap may already hide):"


def headspace_line(h: StepInterval) -> str:
    """The headspace in one line: its range and what it bounds."""
    return (f"headspace (R less T: what any input, sync or host-work fix can buy at most): "
            f"{ms(h.low)} to {ms(h.high)} per step"
            + (" (low 0: the record cannot say how much of the host's time the device "
               "computed through)" if h.low == 0.0 and h.high > 0.0 else ""))


def gains_parts(headspace: StepInterval | None, gains: Sequence[Gain]) -> list[Part]:
    """The headspace line, the gains table ranked as the record holds it, and each row's
    reason (a row's number in the table)."""
    parts: list[Part] = [headspace_line(headspace)] if headspace is not None else []
    if not gains:
        return parts
    rows = [[str(i), g.kind, g.change, f"{ms(g.gain_s.low)} to {ms(g.gain_s.high)}",
             f"{ms(g.predicted_step_s.low)} to {ms(g.predicted_step_s.high)}", g.how]
            for i, g in enumerate(gains, 1)]
    why = "\n".join(f"{i}. {g.why}" for i, g in enumerate(gains, 1) if g.why)
    parts += [GAINS_TITLE, Table(rows, ["#", "kind", "change", "gain", "predicted step",
                                        "how"])]
    return parts + ([f"why each range:\n{why}"] if why else [])
