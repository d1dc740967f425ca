"""Text blocks the reports share: findings, warnings, a distribution's rows, the wall-time
breakdown (units come from ``pipecheck.units``). Pure functions; only the CLI prints."""

from __future__ import annotations

from typing import Mapping, Sequence

from tabulate import tabulate

from pipecheck.records.common import Breakdown, Distribution, Estimate, Finding
from pipecheck.units import ms, rate, short_location


def workload_name(workload: object) -> str:
    """A config's ``workload`` as a person names it: a built-in workload's name; for entry
    points, the files (or modules) they live in, as the config wrote them."""
    if not isinstance(workload, Mapping):
        return "-" if workload is None else str(workload)
    places: list[str] = []
    for ref in workload.values():
        place = str(ref).rpartition(":")[0] or str(ref)
        if place not in places:
            places.append(place)
    return ", ".join(places)


def findings_text(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        where = f" [{short_location(f.location)}]" if f.location else ""
        lines.append(f"- {f.kind}{where}: {f.message}")
        if f.fix:
            lines.append(f"  fix: {f.fix}")
    return "\n".join(lines)


def warnings_text(warnings: Sequence[str]) -> str:
    return "\n".join(f"warning: {w}" for w in warnings)


WALL_PER_STEP_ROW = "wall time per step (steady window)"
"""The row of a step table that holds the throughput beside the median."""


def wall_per_step_text(e: Estimate) -> str:
    """``13.4 ms (13.3 ms to 13.6 ms; 74.6 steps/s)``: the mean, its interval, the rate."""
    steps_per_s = 1.0 / e.value if e.value > 0 else None
    return f"{ms(e.value)} ({ms(e.low)} to {ms(e.high)}; {rate(steps_per_s, 'steps/s')})"


def distribution_rows(d: Distribution, label: str, wall: Estimate | None = None
                      ) -> list[list[str]]:
    """A steady state's rows: the median, with the throughput (``wall``: the wall time per
    step over the steady window) beside it where known, the spread and n."""
    s = d.summary
    return [
        [f"{label} median", ms(s.median)],
        *([[WALL_PER_STEP_ROW, wall_per_step_text(wall)]] if wall is not None else []),
        [f"{label} p10 / p90", f"{ms(s.p10)} / {ms(s.p90)}"],
        [f"{label} IQR", ms(s.iqr)],
        ["steady-state steps (n)", str(s.n)],
    ]


def format_breakdown(b: Breakdown, title: str = "where the wall time went") -> str:
    """A reporter: the table, seconds and share of wall time, largest categories kept in
    table order."""
    rows: Sequence[list[str]] = [
        [r.category, f"{r.seconds:.3f} s", f"{100 * r.share:.1f}%"] for r in b.rows
    ]
    table = tabulate(rows, headers=["category", "seconds", "share"], tablefmt="simple",
                     disable_numparse=True, colalign=("left", "right", "right"))
    return f"{title} ({b.steps} steps, {b.wall_s:.3f} s wall):\n{table}"
