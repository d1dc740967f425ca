"""Pure: where a running Monitor's loop stands, from the record it keeps on disk
(``Monitor(save_to=...)``): what ``pipecheck watch`` shows.

The rate is steps over the wall time the record covers (the sum of its step intervals),
and, between two reads of the file, the steps added over the wall time added. The verdict
so far is the Monitor's own verdict (``analysis.loop_verdict``) on the record as it stands:
the same function, the same thresholds, as the finished record's.
"""

from __future__ import annotations

import collections
import dataclasses

from pipecheck.analysis.loop_verdict import LoopTimes, loop_verdict, restart_excess, sync_costs
from pipecheck.records.kinds import INPUT, WALL_ROWS
from pipecheck.records.monitor import MonitorResult


@dataclasses.dataclass(frozen=True)
class LiveStatus:
    """A Monitor run as its record stands now."""

    state: str
    """``running``, ``finished``, or ``ended early``."""
    end_message: str
    """How a run that ended early ended (one line), else empty."""
    steps: int
    """Steps completed (whose loss was observed)."""
    wall_s: float
    steps_per_s: float
    """Over the whole record."""
    recent_steps_per_s: float | None
    """Since the earlier read (None: no earlier read, or no new step in it)."""
    input_share: float
    """Data wait over the wall time."""
    stalls: int
    """Steps far above the steady state so far (the record's anomalies)."""
    stall_causes: tuple[tuple[str, int], ...]
    """Their likely causes, most frequent first."""
    verdict: str
    """The loop's verdict so far (``kinds.VerdictKind``)."""
    reason: str


def run_state(result: MonitorResult) -> tuple[str, str]:
    """(state, how it ended) of a Monitor record."""
    end = result.incomplete
    if end is None:
        return "finished", ""
    if end.reason == "running":
        return "running", ""
    return "ended early", f"at step {end.step}: {end.message}"


def verdict_so_far(result: MonitorResult) -> tuple[str, str]:
    """Pure: (verdict, reason) of the loop as its record stands (``loop_verdict``)."""
    times = LoopTimes.of(result.breakdown, result.step_time.summary.n,
                         restart_excess(result.loader_starts, result.steps))
    costs = sync_costs(times, result.user_sync_sites, str(result.env.get("backend", "")))
    return loop_verdict(times, costs)


def live_status(result: MonitorResult, earlier: MonitorResult | None = None) -> LiveStatus:
    """Pure: the status of ``result``; ``earlier``: the same file's previous read."""
    state, end_message = run_state(result)
    wall = result.wall_s
    recent = None
    if earlier is not None and result.total_steps > earlier.total_steps \
            and result.wall_s > earlier.wall_s:
        recent = (result.total_steps - earlier.total_steps) / (result.wall_s - earlier.wall_s)
    causes = collections.Counter(a.cause for a in result.anomalies).most_common()
    verdict, reason = verdict_so_far(result)
    return LiveStatus(
        state=state, end_message=end_message, steps=result.total_steps, wall_s=wall,
        steps_per_s=result.total_steps / wall if wall > 0 else 0.0,
        recent_steps_per_s=recent, input_share=result.breakdown.share(WALL_ROWS[INPUT]),
        stalls=len(result.anomalies), stall_causes=tuple(causes), verdict=verdict,
        reason=reason)

