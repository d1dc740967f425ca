"""Where a MaxText run's wall time went, by its log's timestamps (pure): the time the steps'
own ``seconds`` cover, and the time outside every step, each stretch of it split by what
the log says ran then (a goodput-style account).

MaxText's step times are differences of consecutive clock readings, so its steps tile the
training loop (``analysis.logs.maxtext.step_intervals`` chains them on the step lines' times):
what a checkpoint or an eval costs inside the loop is in the next step's ``seconds``. Time
outside the steps is before the first step starts (start-up: initialization, a restore),
where the chain breaks (a restart, steps the log does not show), and after the last step
ends (the final checkpoint: waiting for the previous save, the last save's blocking part,
then its commit while the run waits for it). The wall time runs from the log's first
timestamp to its last.

Each instant outside the steps is named once, by the first of these that covers it
(``NAMED_IN_ORDER``): the training thread blocked on a checkpoint (a wait for the previous
save, for the step to finish, a save's blocking part), an activity (eval, synchronous save,
restore, profiler), an async save in flight (after the last step: the final save's commit,
which the run waits for); what none covers is the start-up before the first step, steps the
log does not show where the step numbers jump, and otherwise not named by the log (in an
excerpt, steps after its last step line too).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from pipecheck.records.imported import LogEvent, OutsideSteps, TimeShare, WallTime

OUTSIDE_MIN_S = 0.05
"""A stretch outside the steps shorter than this is not listed (it still counts in the
total): a break in the chain of step intervals this short is the step times' millisecond
rounding summed over the steps between two anchors, not time the run spent elsewhere."""

WAIT_PREVIOUS = "checkpoint: waiting for the previous save"
WAIT_STEP = "checkpoint: waiting for the step before saving"
SAVE_BLOCKING = "checkpoint: the save's blocking part"
SYNC_SAVE = "checkpoint: synchronous save"
COMMIT = "checkpoint: async save in flight"
EVAL = "eval"
RESTORE = "restore"
PROFILER = "profiler"
START_UP = "start-up"
NOT_NAMED = "not named by the log"
NOT_SHOWN = "steps the log does not show"

NAMED_IN_ORDER = (WAIT_PREVIOUS, WAIT_STEP, SAVE_BLOCKING, SYNC_SAVE, EVAL, RESTORE, PROFILER,
                  COMMIT)
"""What names an instant outside the steps when several cover it: the first here. A
blocked training thread is what the run waited on; an async save in flight only where
nothing else was going on (the run waiting for it to commit)."""

_BLOCKING = {"checkpoint_wait_previous": WAIT_PREVIOUS, "checkpoint_wait_step": WAIT_STEP,
             "async_save_blocking": SAVE_BLOCKING}
_FAMILIES = {"eval": EVAL, "sync_save": SYNC_SAVE, "restore": RESTORE, "profiler": PROFILER}

Stretch = tuple[float, float, str, str]
"""A stretch of the log's time named by a cause: start, end (seconds since the log's first
timestamp), the cause, its evidence."""


def _when(e: LogEvent) -> str:
    return f"line {e.line}" + (f" ({e.clock})" if e.clock else "")


def save_blocking(events: Sequence[LogEvent]) -> list[Stretch]:
    """The blocking part of each checkpoint save the log brackets: MaxText's ``Saving
    checkpoint at step S`` (orbax's ``CheckpointManager``) to its ``Started an asynchronous
    checkpoint save for step S``, both timed."""
    begun: dict[int, LogEvent] = {}
    out: list[Stretch] = []
    for e in events:
        if e.at_s is None or e.step is None:
            continue
        if e.kind == "checkpoint_save":
            begun[e.step] = e
        elif e.kind == "checkpoint_async_start" and e.step in begun:
            b = begun.pop(e.step)
            assert b.at_s is not None
            out.append((b.at_s, e.at_s, SAVE_BLOCKING,
                        f"step {e.step}'s save, {_when(b)} to {_when(e)}"))
    return out


class Op(Protocol):
    """Something that ran beside the steps (``analysis.logs.maxtext.Background``)."""

    @property
    def start(self) -> float: ...
    @property
    def end(self) -> float: ...
    @property
    def kind(self) -> str: ...
    @property
    def evidence(self) -> str: ...


class Activity(Protocol):
    """A stretch of other work, first line to last (``analysis.logs.maxtext.Activity``)."""

    @property
    def family(self) -> str: ...
    @property
    def first(self) -> LogEvent: ...
    @property
    def last(self) -> LogEvent: ...
    @property
    def timed(self) -> bool: ...
    def evidence(self) -> str: ...


def named_stretches(events: Sequence[LogEvent], ops: Iterable[Op],
                    acts: Iterable[Activity]) -> list[Stretch]:
    """Every timed stretch the log names (``ops``: ``analysis.logs.maxtext.background``;
    ``acts``: its ``activities``)."""
    out = save_blocking(events)
    for op in ops:
        cause = COMMIT if op.kind == "async_save" else _BLOCKING.get(op.kind)
        if cause is not None:
            out.append((op.start, op.end, cause, op.evidence))
    for a in acts:
        cause = _FAMILIES.get(a.family)
        if cause is not None and a.timed:
            assert a.first.at_s is not None and a.last.at_s is not None
            out.append((a.first.at_s, a.last.at_s, cause, a.evidence()))
    return out


def _shares(lo: float, hi: float, stretches: Sequence[Stretch], rest: str,
            rest_evidence: str = "") -> list[TimeShare]:
    """``[lo, hi]`` split by cause: each piece to the first cause in ``NAMED_IN_ORDER``
    whose stretches cover it, the rest to ``rest``; largest first."""
    inside = [(max(s, lo), min(e, hi), c, ev) for s, e, c, ev in stretches
              if s < hi and e > lo]
    cuts = sorted({lo, hi, *(s for s, *_ in inside), *(e for _, e, *_ in inside)})
    seconds: dict[str, float] = {}
    evidence: dict[str, str] = {}
    for a, b in zip(cuts, cuts[1:], strict=False):
        covering = [(NAMED_IN_ORDER.index(c), c, ev) for s, e, c, ev in inside
                    if s <= a and e >= b]
        _, cause, ev = min(covering, default=(len(NAMED_IN_ORDER), rest, rest_evidence))
        seconds[cause] = seconds.get(cause, 0.0) + (b - a)
        evidence.setdefault(cause, ev)
    return [TimeShare(c, round(s, 6), evidence[c])
            for c, s in sorted(seconds.items(), key=lambda kv: -kv[1]) if s > 0]


def wall_time(numbers: np.ndarray, start: np.ndarray, end: np.ndarray, first_at: float | None,
              last_at: float | None, stretches: Sequence[Stretch]) -> WallTime | None:
    """The run's wall time from ``first_at`` to ``last_at`` (the log's first and last
    timestamps), the time its steps cover (``start``/``end``: each step's interval, NaN
    where unknown) and the stretches outside them, named (``stretches``); None where the
    log has no step with a known interval."""
    known = np.isfinite(start) & np.isfinite(end)
    if first_at is None or last_at is None or not known.any():
        return None
    rows = np.flatnonzero(known)
    s, e, step = start[rows], end[rows], numbers[rows]
    lo, hi = min(first_at, float(s[0])), max(last_at, float(e.max()))
    # how far the steps before each one reach (the wall's start before the first)
    reach = np.concatenate(([lo], np.maximum.accumulate(e)[:-1]))
    covered = float(np.maximum(0.0, e - np.maximum(s, reach)).sum())
    outside = [_stretch(float(reach[k]), float(s[k]),
                        None if k == 0 else int(step[k - 1]), stretches,
                        following=int(step[k]))
               for k in np.flatnonzero(s - reach >= OUTSIDE_MIN_S).tolist()]
    last = float(np.max(e))
    if hi - last >= OUTSIDE_MIN_S:
        outside.append(_stretch(last, hi, None, stretches, after=int(step[-1])))
    return WallTime(wall_s=round(hi - lo, 6), in_steps_s=round(covered, 6),
                    outside=tuple(outside), start_s=round(lo, 6))


def _stretch(lo: float, hi: float, previous: int | None, stretches: Sequence[Stretch],
             after: int | None = None, following: int | None = None) -> OutsideSteps:
    """The stretch ``[lo, hi]`` outside the steps: before the first (``previous`` None),
    between two (``previous`` and ``following``: steps the log does not show between them
    ran then, where nothing else is named), or after the last (``after``: the last step)."""
    rest, evidence = NOT_NAMED, ""
    if after is not None:
        where = "after"
    elif previous is None:
        where, rest = "before", START_UP
    else:
        where = "between"
        if following is not None and following > previous + 1:
            rest = NOT_SHOWN
            evidence = (f"step {previous + 1}" if following == previous + 2
                        else f"steps {previous + 1}-{following - 1}")
    step = after if after is not None else previous
    return OutsideSteps(where=where, start_s=round(lo, 6), end_s=round(hi, 6),
                        after_step=step,
                        shares=tuple(_shares(lo, hi, stretches, rest, evidence)))

