"""Pure: where a running Monitor's loop stands, from the record it keeps on disk
(``Monitor(save_to=...)``): what ``pipecheck watch`` shows.

The rate is steps over the wall time the record covers (the sum of its step intervals),
and, between two reads of the file, the steps added over the wall time added. The verdict
so far is where the loop's time went most, compile left out (a run's first minutes are
mostly compiling): waiting for its next batch (input-bound), dispatching and waiting for the
device in the lagged sync (compute-bound), blocked in a sync that is not the lagged one
(forced-sync), or the loop's own host work (host work). It is the Monitor's view of the loop
alone; ``pipecheck compare --real RUN.json`` measures what compute and the loader would
cost apart and gives the verdict.
"""

from __future__ import annotations

import collections
import dataclasses

from pipecheck.records.kinds import (
    COMPILE,
    COMPUTE,
    COMPUTE_BOUND,
    FORCED_SYNC,
    INCONCLUSIVE,
    INPUT,
    INPUT_BOUND,
    SYNC,
    WALL_ROWS,
)
from pipecheck.records.monitor import MonitorResult

MIN_STEADY_STEPS = 10
"""Fewer steady-state steps than this (the first and compiling steps left out) say nothing
yet about where a loop's time goes: the verdict so far waits for them."""

HOST_WORK = "host work"
"""The verdict so far of a loop whose time goes most to its own host work (outside the
Monitor's data wait, dispatch and syncs): not one of compare's verdicts."""

_LOOP_ROWS = {WALL_ROWS[INPUT]: INPUT_BOUND, WALL_ROWS[COMPUTE]: COMPUTE_BOUND,
              WALL_ROWS[SYNC]: FORCED_SYNC}
"""The breakdown rows that name a verdict so far; every other row (user spans, checkpoint,
eval, gc, other) is the loop's host work."""


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
    """``input-bound``, ``compute-bound``, ``forced-sync``, ``host work``, or
    ``inconclusive`` (too few steps yet)."""
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
    """Pure: (verdict, reason): where the loop's time went most, compile left out."""
    n = result.step_time.summary.n
    if n < MIN_STEADY_STEPS:
        return INCONCLUSIVE, (f"{n} steady-state step(s) so far; the verdict waits for "
                              f"{MIN_STEADY_STEPS}")
    rows = [r for r in result.breakdown.rows if r.category != WALL_ROWS[COMPILE]]
    total = sum(r.seconds for r in rows)
    if total <= 0:
        return INCONCLUSIVE, "no time recorded outside compilation yet"
    by_verdict: dict[str, float] = collections.defaultdict(float)
    for r in rows:
        by_verdict[_LOOP_ROWS.get(r.category, HOST_WORK)] += r.seconds
    verdict = max(by_verdict, key=lambda k: by_verdict[k])
    shares = ", ".join(f"{_label(k)} {100 * v / total:.0f}%"
                       for k, v in sorted(by_verdict.items(), key=lambda kv: -kv[1]))
    return verdict, f"compile left out, the loop's time: {shares}"


def _label(verdict: str) -> str:
    return {INPUT_BOUND: "waiting for input", COMPUTE_BOUND: "dispatch and device",
            FORCED_SYNC: "forced syncs", HOST_WORK: "host work"}.get(verdict, verdict)


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

