"""Where a run's wall time went: a goodput-style table from the step records.

The wall time is the sum of the step intervals (from just before step 0 is fetched to
the sync on the last step's loss). Every second of it is charged to one kind of time
(``records.kinds.TimeKind``; its row named as ``kinds.WALL_ROWS`` says), from the host's
point of view (the host thread that runs the training loop):

========== ==================================================================================
compile    JAX tracing, lowering and compiling the train step inside the timed steps (as
           reported by ``jax.monitoring``; without a report, the dispatch time of the steps
           tagged ``compile``).
data wait  the host waiting for the next batch (``data_wait``) and moving it to the devices
           (``device_put``).
compute    the host dispatching the step and waiting in the *lagged* sync for the device to
           finish the previous step (``dispatch`` + ``sync``, less compile): the device
           compute the host could not hide behind its other work.
sync stall the host blocked in a sync that is not the lagged one: ``log`` spans (logging the
           current step's loss) and, in a Monitor run, forced syncs the sync locator found in
           the user's code outside any span.
checkpoint ``checkpoint`` spans (a blocking save, its device-to-host copy included).
eval       ``eval`` spans.
gc         Python garbage collections (``gc`` spans, wherever they interrupted the loop).
<name>     each user span (``Monitor.span(name)``), under its own name.
other      the rest: Python loop overhead and user code outside any span.
========== ==================================================================================

Host work that overlaps device compute still counts under its own name: with a loader
that runs on the training thread, ``data wait`` includes loading the device could have
hidden. Whether a run is input-bound is decided by comparing step times (``compare``),
not by this table.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import numpy as np

from pipecheck.analysis.steady_state import steady_state
from pipecheck.records.common import Breakdown, BreakdownRow, StepRecord
from pipecheck.records.events import StepTotals
from pipecheck.records.kinds import (
    CHECKPOINT,
    COMPILE,
    COMPUTE,
    EVAL,
    FORCED_SYNC_SPAN,
    GC,
    INPUT,
    OTHER,
    SPAN_NAMES,
    SPANS_OF,
    STEP_SPAN_NAMES,
    SYNC,
    WALL_ROWS,
    TimeKind,
)
from pipecheck.records.steps import StepTable

WALL_TABLE_KINDS: tuple[TimeKind, ...] = (COMPILE, INPUT, COMPUTE, SYNC, CHECKPOINT, EVAL, GC)
"""The kinds of time with a fixed row, in table order (``kinds.WALL_ROWS`` names each row);
user spans follow them, then ``other``."""

_BUILTIN_SPANS = (*STEP_SPAN_NAMES, "other")


def breakdown(
    totals: StepTotals,
    compile_s: float | None = None,
    forced_sync_s: float = 0.0,
) -> Breakdown:
    """Pure: the breakdown of a run from its span totals.

    ``compile_s``: the train step's compile time reported by JAX (capped at the dispatch
    time of the compile-tagged steps, where it happened). ``forced_sync_s``: seconds the
    sync locator found blocked in user syncs outside any span; moved from ``other``
    (capped at it) to ``sync stall``.
    """
    sp = totals.spans

    def spans(kind: TimeKind) -> float:
        return sum(sp.get(name, 0.0) for name in SPANS_OF.get(kind, ()))

    compile_part = totals.compile_dispatch_s if compile_s is None else min(
        compile_s, totals.compile_dispatch_s)
    compile_part = min(compile_part, spans(COMPUTE))
    other = sp.get("other", 0.0)
    moved = min(max(forced_sync_s, 0.0), other)
    by_kind = {kind: spans(kind) for kind in WALL_TABLE_KINDS}
    by_kind.update({COMPILE: compile_part, COMPUTE: by_kind[COMPUTE] - compile_part,
                    SYNC: by_kind[SYNC] + moved})
    seconds = {WALL_ROWS[kind]: by_kind[kind] for kind in WALL_TABLE_KINDS}
    for name in sorted(sp):
        if name not in _BUILTIN_SPANS:
            seconds[name] = sp[name]
    seconds[WALL_ROWS[OTHER]] = other - moved
    wall = totals.wall_s
    rows = tuple(
        BreakdownRow(category=k, seconds=float(v), share=float(v / wall) if wall > 0 else 0.0)
        for k, v in seconds.items()
    )
    return Breakdown(wall_s=float(wall), steps=totals.steps, rows=rows)


def charge_forced_syncs(steps: StepTable[StepRecord], by_step: Mapping[int, float]
                        ) -> StepTable[StepRecord]:
    """The steps with the seconds the sync locator found blocked in user syncs outside any
    span (``by_step``: step number to seconds) as their ``forced_sync`` span, taken out of
    their ``other`` (capped at it), as the table moves them from ``other`` to ``sync
    stall``; the steps as they are when none was found in them."""
    numbers = steps.column("step")
    found = np.fromiter((by_step.get(int(k), 0.0) for k in numbers), float, numbers.size) \
        if by_step else np.zeros(0)
    if not found.any():
        return steps
    spans = steps.map_columns("spans")
    other = np.nan_to_num(spans.get("other", np.zeros(numbers.size)))
    moved = np.minimum(np.maximum(found, 0.0), other)
    return steps.with_map_columns("spans", {FORCED_SYNC_SPAN: np.where(moved > 0, moved, np.nan),
                                            "other": other - moved})


def breakdown_of_steps(
    steps: Iterable[StepRecord],
    compile_s: float | None = None,
    forced_sync_s: float = 0.0,
) -> Breakdown:
    """The breakdown of the given StepRecords (e.g. a run JSON's ``steps``)."""
    return breakdown(StepTotals.of(steps), compile_s, forced_sync_s)


def host_span_means(steps: StepTable[StepRecord]) -> dict[str, float]:
    """Mean seconds per steady-state step spent in each host span (pipecheck's spans in
    report order, ``other``, then the user's spans)."""
    steady = steady_state(steps)
    if not steady:
        return {}
    names = dict.fromkeys([*SPAN_NAMES, "other", *(n for s in steady for n in s.spans)])
    return {n: sum(s.spans.get(n, 0.0) for s in steady) / len(steady) for n in names}
