"""The first batch: its time beside the start-up work it could overlap, and the finding.

A loop that creates its loader's iterator when it asks for the first batch, after
restoring or initializing its state, and compiles its train step on that batch, pays the
loader's start-up (worker processes, their imports, the first reads) on top of the rest:
nothing runs beside it. Started first (the iterator created and its ``start_prefetch()``
called before the restore, the step compiled ahead of time meanwhile), the loader's
start-up hides behind that work, up to its length (``StartUp.hideable_s``).

From a Monitor run (``monitor_startup``): the first batch is step 0's data wait, the work
is the train step's compilation and the user's own spans in step 0 (``mon.span("restore")``
around the restore before the loop). From compare (``compare_startup``): the first batch
at the chosen setting as ``pipecheck dataloader`` timed it, the work the state's
initialization (host time, as the real-data run took it) and the train step's compilation
as the target run timed it. The finding (``first_batch_finding``) is given
when the first batch could hide ``MIN_HIDDEN_S`` or more.

A loop that begins each epoch with a new iterator (``Monitor.batches`` called again, a
``grain.DataLoader`` iterated again) starts its workers again every time: each pass's first
batch is a ``LoaderStart`` of the record, and ``loader_restart_findings`` gives the
``loader-restart`` finding when the restarts cost ``MIN_RESTART_SHARE`` of the run.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from pipecheck.analysis.anomalies import span_seconds
from pipecheck.records.common import Finding, LoaderStart, StartUp, StepRecord
from pipecheck.records.kinds import STEP_SPAN_NAMES
from pipecheck.records.steps import StepTable

MIN_HIDDEN_S = 0.5
"""Starting the loader earlier is a finding when it hides at least this much: a second of
badput per start or restart is what users chase; below half of one, a busy machine's
start-up jitter (a worker's imports alone take ~0.5 s here)."""

NOT_START_UP = frozenset({*STEP_SPAN_NAMES, "other"})
"""Step 0's spans that are not start-up work of the user's: pipecheck's own spans and the
time outside any span."""


def monitor_startup(steps: StepTable[StepRecord], compile_s: float | None) -> StartUp | None:
    """A Monitor run's start-up: step 0's data wait, beside the train step's compilation
    and the user's own spans in step 0; the typical wait is the median data wait of the
    steps after it. None when step 0 is not in the record or has no data wait."""
    if len(steps) == 0 or int(steps.column("step")[0]) != 0:
        return None
    first = steps[0].spans
    if "data_wait" not in first:
        return None
    work = {name: float(s) for name, s in first.items()
            if name not in NOT_START_UP and s > 0}
    if compile_s:
        work["compile"] = float(compile_s)
    waits = span_seconds(steps, "data_wait")[1:]
    typical = float(np.median(waits)) if waits.size else 0.0
    return StartUp(float(first["data_wait"]), work, typical)


def compare_startup(first_batch_s: float, loader_s: float, compile_s: float | None,
                    init_s: float | None = None) -> StartUp:
    """compare's start-up: the first batch at the chosen setting (``loader_s`` its steady
    time per batch) beside the state's initialization (host seconds, as the real-data run
    took them) and the train step's compilation."""
    work = {name: float(s) for name, s in (("init", init_s), ("compile", compile_s)) if s}
    return StartUp(first_batch_s, work, loader_s if math.isfinite(loader_s) else 0.0)


def work_text(work: Mapping[str, float]) -> str:
    """``restore 3.10 s, compile 1.20 s``, longest first."""
    return ", ".join(f"{name} {s:.2f} s" for name, s in
                     sorted(work.items(), key=lambda kv: (-kv[1], kv[0])))


def first_batch_finding(startup: StartUp) -> Finding | None:
    """The ``first-batch`` finding: the loader started only after the start-up work, and
    starting it before would hide ``MIN_HIDDEN_S`` or more."""
    hidden = startup.hideable_s
    if hidden < MIN_HIDDEN_S:
        return None
    return Finding(
        kind="first-batch",
        message=(f"the first batch took {startup.first_batch_s:.2f} s beside "
                 f"{startup.work_s:.2f} s of start-up work ({work_text(startup.work)}): a "
                 "loader started before that work (not when the first batch is asked for) "
                 f"would hide up to {hidden:.2f} s of every start and restart"),
        numbers={"first_batch_s": startup.first_batch_s, "work_s": startup.work_s,
                 "hideable_s": hidden, "typical_wait_s": startup.typical_wait_s},
        fix=("create the loader's iterator first and call its start_prefetch() (Grain 0.2: "
             "it = iter(dataset); it.start_prefetch(), for a grain.DataLoader's iterator "
             "too) so its "
             "workers start and fill their buffers while you restore or initialize the state; "
             "compile the train step ahead of time (jax.jit(step).lower(*specs).compile()) "
             "instead of on the first batch; then take the first batch"),
    )


MIN_RESTART_SHARE = 0.05
"""Loader restarts are a finding when their waits beyond a steady batch's cost at least this
share of the run's wall time: the share a fix must win to be worth a change of the loop (a
1-2 s worker start per epoch of a minute is 2-3%, below it; per epoch of 20 s, above)."""


def steady_wait(starts: Sequence[LoaderStart], steps: StepTable[StepRecord]) -> float:
    """The median data wait of the steps that began no pass (step 0 left out)."""
    if not len(steps):
        return 0.0
    numbers = steps.column("step")
    steady = ~np.isin(numbers, [0, *(s.step for s in starts if s.index >= 1)])
    waits = span_seconds(steps, "data_wait")
    return float(np.median(waits[steady])) if steady.any() else 0.0


def loader_restart_findings(starts: Sequence[LoaderStart], steps: StepTable[StepRecord],
                            wall_s: float) -> list[Finding]:
    """The ``loader-restart`` finding: the passes after the first began with a new iterator
    whose first batch waited, beyond a steady batch's wait, ``MIN_RESTART_SHARE`` of the
    run or more; the eval spans of the same steps are named (an eval loader made anew each
    time pays its start-up there)."""
    restarts = [s for s in starts if s.index >= 1]
    if not restarts or not wall_s > 0:
        return []
    numbers = steps.column("step") if len(steps) else np.zeros(0, np.int64)
    restart_steps = {s.step for s in restarts}
    typical = steady_wait(starts, steps)
    lost = float(sum(max(0.0, s.wait_s - typical) for s in restarts))
    share = lost / wall_s
    if share < MIN_RESTART_SHARE:
        return []
    longest = max(s.wait_s for s in restarts)
    shortest = min(s.wait_s for s in restarts)
    span = (f"{shortest:.2f} s" if math.isclose(shortest, longest, rel_tol=0.05)
            else f"{shortest:.2f}-{longest:.2f} s")
    rows = np.flatnonzero(np.isin(numbers, list(restart_steps))).tolist()
    with_eval = len([i for i in rows if "eval" in steps[i].tags])  # type: ignore[attr-defined]
    evals = (f"; an eval span ran in the same step at {with_eval} of them (an eval loader "
             "made anew each time starts its workers there too)" if with_eval else "")
    return [Finding(
        kind="loader-restart",
        message=(f"the loader started again at each of {len(restarts)} passes after the first "
                 f"(a new iterator each epoch): their first batches waited {span} (a steady "
                 f"batch {typical * 1e3:.1f} ms), {lost:.2f} s in all, {share:.0%} of the "
                 f"run{evals}"),
        numbers={"restarts": float(len(restarts)), "lost_s": lost, "share": share,
                 "longest_wait_s": longest, "typical_wait_s": typical},
        fix=("iterate one iterator over every epoch: repeat the dataset "
             "(grain.MapDataset.repeat(num_epochs), or a grain.DataLoader whose "
             "IndexSampler has num_epochs=N) and end each epoch by counting steps, or keep "
             "the iterator alive across epochs; keep an eval loader's iterator the same way"),
    )]
