"""Adaptive search over Grain's performance knobs. Pure logic over an injected measurement.

The knobs (``GrainSettings``): worker processes and each worker's output buffer
(``MultiprocessingOptions``), read threads and the read prefetch buffer (``ReadOptions``).
Goal: the *cheapest* setting (fewest workers, then the smallest buffers, then the fewest
threads) whose loader time D is safely below the target step time
(D <= LOADER_HEADROOM * T), in few trials. ``measure(settings) -> Trial``.

1. Workers, at the base read settings. 0 workers (loading in the training process), then
   1: often enough already. Then predict: a pipeline that scales perfectly needs
   ceil(D(1) / goal) workers. Measure that count; if it misses, predict again from the rate
   it reached (ceil(W * D(W) / goal)), until the goal is met, a step gains less than
   ``MIN_GAIN`` (the pipeline stopped scaling: throughput flat or *falling* past the
   cores), the pipeline reaches less than ``SCALING_EFFICIENCY_FLOOR`` of perfect scaling,
   or a ceiling is reached (``max_workers``; the RAM budget, from the peak RSS per worker
   measured in the first setting with workers). Refine: confirm that one worker fewer
   misses the goal (bisecting further down if it does not). If no count met the goal, the
   fewest workers within ``MIN_GAIN`` of the fastest.
2. Read threads, the cheaper way to parallel reads: climb the thread ladder in the
   training process (0 workers) while each step gains at least ``MIN_GAIN`` (threads help
   I/O-like transforms, not GIL-holding ones: one trial tells), and stop at the first count
   that meets the goal. If none does but threads helped, the workers are searched again with
   the fastest thread count, from one worker (fewer workers are needed, or more become
   useful).
3. Buffers, at that setting: a smaller read prefetch buffer and per-worker buffer are kept
   when the goal is still met (or the setting stays as fast); when the goal is not met, a
   larger per-worker buffer is tried for bursty pipelines.
4. Choice (``choose``) among everything measured; with a run length (``run_steps``) a
   setting whose start-up (first batch) costs more than its faster batches save over the
   run is not chosen.

One bad reading (another program took the cores while a setting was measured) must not
send the search down a wrong branch, so a reading that disagrees with what the search
knows beyond ``READING_NOISE`` is measured again before it is used (``remeasure=True``):
a setting with more of every knob than another (``_at_least``) reads slower than it, or
faster than perfect scaling of its parallel reads allows (``_capacity``), or a worker count
that would end the worker search (no gain, stopped scaling) missed its prediction. A
setting is read at most ``MAX_READINGS`` times and its fastest reading counts:
interference only ever slows a pipeline down. A setting slower than one with less of every
knob is left alone once two of its readings agree (contention past the cores does that);
one beaten by more than perfect scaling is not (no pipeline does that).

Whether the pipeline keeps scaling past the core count tells its nature:
latency-bound (I/O-like, sleeping) pipelines do, CPU-bound ones do not; the
result says which, from the measurements.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Sequence

from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.records.grain_settings import (
    DEFAULT_PER_WORKER_BUFFER,
    DEFAULT_THREADS,
    GrainSettings,
    SettingsKnobs,
)
from pipecheck.records.kinds import (  # noqa: F401 - re-exported for the tuner's callers
    CPU_BOUND,
    LATENCY_BOUND,
    UNKNOWN_SCALING,
    Scaling,
    StopKind,
)

MIN_GAIN = 0.10
"""A change of setting that improves batch time by less than 10% has stopped helping."""

SCALING_EFFICIENCY_FLOOR = 0.5
"""A count that reaches less than half of perfect scaling from one worker (D(1) / (W * D(W)))
means the pipeline stopped scaling below it: the search looks no higher."""

THREAD_LADDER = (1, 2, 4, 8, 16)
"""Read thread counts tried, up to Grain's own default of 16."""

BUFFER_LADDER = (1, 2, 4)
"""Per-worker buffer sizes tried: 1 is Grain's default, 4 absorbs bursty workers."""

PREFETCH_FACTORS = (1, 2)
"""Read prefetch buffer as a multiple of the thread count: fewer than one element per
thread leaves threads idle; two keep each thread's next element queued."""

READING_NOISE = 0.25
"""Readings of one setting on the shared 2-core machine differ by up to about 25%
(docs/performance.md); a disagreement larger than that is a bad reading until measured
again."""

MAX_READINGS = 3
"""Readings of one setting at most: a second bad reading in a row is still out of line with
the other settings, and a third settles it (one bad reading in ten makes three in a row
one in a thousand)."""

STARTUP_MARGIN = 0.05
"""A setting is passed over for its start-up only when another's whole run (first batch
plus ``run_steps`` steps) is more than 5% shorter: smaller differences are noise."""



@dataclasses.dataclass(frozen=True)
class Trial(SettingsKnobs):
    """One measured setting: D (``batch_s``: mean seconds per batch, 1 / throughput, the
    loader time the verdict uses), its start-up and its memory."""

    settings: GrainSettings
    batch_s: float
    first_batch_s: float = 0.0
    worker_rss_mb: float = math.nan
    """Peak resident memory of one worker process (the largest), MB."""
    main_rss_mb: float = math.nan
    """Peak resident memory of the training process, MB."""
    storage: str = ""
    """Why this setting's reads wait on storage (``analysis.loader.storage.storage_note``: latency
    per read, reads per batch, the CPU share), "" when they do not: a search that reads it
    on its first setting tries read threads before worker processes."""

    @classmethod
    def of(cls, settings: GrainSettings, batch_s: float, *, first_batch_s: float = 0.0,
           worker_rss_mb: float = math.nan, main_rss_mb: float = math.nan,
           storage: str = "") -> Trial:
        return cls(settings, batch_s, first_batch_s, worker_rss_mb, main_rss_mb, storage)


@dataclasses.dataclass(frozen=True)
class TuningOutcome:
    trials: tuple[Trial, ...]
    chosen: Trial
    meets_target: bool
    scaling: Scaling
    stop: StopKind
    """Why the (last) worker search ended."""
    reason: str
    """The search in words, with the numbers."""
    remeasured: tuple[Trial, ...] = ()
    """The readings set aside: for each setting measured more than once, its slower
    readings (the fastest is in ``trials``)."""
    order: str = ""
    """Why the search tried read threads before worker processes (the reads of its first
    setting wait on storage), "" when it searched the workers first."""


def _scaling(trials: Sequence[Trial], cores: int) -> Scaling:
    """From the trials that differ from the first only in the worker count."""
    if not trials:
        return UNKNOWN_SCALING
    base = trials[0].settings
    by_w = {t.workers: t.batch_s for t in trials
            if dataclasses.replace(t.settings, workers=base.workers) == base}
    beyond = [w for w in by_w if w > cores]
    at_cores = max((w for w in by_w if 0 < w <= cores), default=None)
    if at_cores is None or not beyond:
        return UNKNOWN_SCALING
    best_beyond = min(by_w[w] for w in beyond)
    return LATENCY_BOUND if best_beyond < by_w[at_cores] * (1 - MIN_GAIN) else CPU_BOUND


def run_time(trial: Trial, target_s: float, run_steps: int) -> float:
    """Expected wall time of a run of ``run_steps`` steps at this setting: its start-up
    (first batch), then one step per batch at the slower of compute and loading."""
    return trial.first_batch_s + run_steps * max(target_s, trial.batch_s)


def _cheapest(trials: Sequence[Trial]) -> Trial:
    return min(trials, key=lambda t: t.settings.cost())


def choose(trials: Sequence[Trial], target_s: float, run_steps: int = 0
           ) -> tuple[Trial, bool]:
    """The cheapest setting meeting the goal; else the fastest, where settings within
    ``MIN_GAIN`` of the fastest count as equally fast (the cheapest among them).

    With ``run_steps`` > 0, start-up is weighed: when another setting's expected run time
    (``run_time``) is shorter than the choice's by more than ``STARTUP_MARGIN``, that
    setting's quicker start saves more than its slower batches cost over the run, and the
    cheapest setting within ``STARTUP_MARGIN`` of the shortest run time is chosen instead.
    """
    if not trials:
        raise ValueError("no loader settings to choose from")
    goal = target_s * LOADER_HEADROOM
    meeting = [t for t in trials if t.batch_s <= goal]
    if meeting:
        chosen, ok = _cheapest(meeting), True
    else:
        fastest = min(t.batch_s for t in trials)
        chosen, ok = _cheapest([t for t in trials if t.batch_s <= fastest * (1 + MIN_GAIN)]),\
            False
    if run_steps > 0:
        shortest = min(run_time(t, target_s, run_steps) for t in trials)
        limit = shortest * (1 + STARTUP_MARGIN)
        if run_time(chosen, target_s, run_steps) > limit:
            chosen = _cheapest([t for t in trials if run_time(t, target_s, run_steps) <= limit])
            ok = chosen.batch_s <= goal
    return chosen, ok


def startup_note(trials: Sequence[Trial], chosen: Trial, target_s: float,
                 run_steps: int) -> str | None:
    """Why a faster setting was passed over for its start-up, when it was."""
    if run_steps <= 0:
        return None
    plain, _ = choose(trials, target_s, 0)
    if plain == chosen:
        return None
    return (f"{plain.settings.label()} would be faster per batch, but its first batch takes "
            f"{plain.first_batch_s:.2f} s against {chosen.first_batch_s:.2f} s, more than it "
            f"saves over a run of {run_steps} steps")


def outcome(trials: Sequence[Trial], target_s: float, cores: int, stop: StopKind,
            reason: str, run_steps: int = 0) -> TuningOutcome:
    """The choice, and the pipeline's scaling, from settings already measured."""
    chosen, ok = choose(trials, target_s, run_steps)
    note = startup_note(trials, chosen, target_s, run_steps)
    return TuningOutcome(tuple(trials), chosen, ok, _scaling(trials, cores), stop,
                         f"{reason}; {note}" if note else reason)


def remeasured_outcome(result: TuningOutcome, set_aside: Sequence[Trial]) -> TuningOutcome:
    """``result`` with the readings set aside, and their settings named in its reason."""
    if not set_aside:
        return result
    kept = {t.settings: t for t in result.trials}
    note = "measured again after a reading that disagreed with the others: " + "; ".join(
        f"{t.settings.label()} ({1e3 * t.batch_s:.2f} ms, kept "
        f"{1e3 * kept[t.settings].batch_s:.2f} ms)" for t in set_aside)
    return dataclasses.replace(result, remeasured=tuple(set_aside),
                               reason=f"{result.reason}; {note}")


def ram_worker_ceiling(budget_mb: float, main_rss_mb: float, worker_rss_mb: float) -> int | None:
    """Most workers whose measured peak memory (the training process's plus one worker's
    per worker) fits the budget; None when not measured."""
    if not (math.isfinite(budget_mb) and math.isfinite(worker_rss_mb) and worker_rss_mb > 0):
        return None
    main = main_rss_mb if math.isfinite(main_rss_mb) else 0.0
    return max(0, int((budget_mb - main) // worker_rss_mb))


def _capacity(s: GrainSettings) -> int:
    """Reads a setting runs at once, doubled when workers read (their reads also overlap
    the training process's own work): how much faster than another setting it can be at
    most is the ratio of their capacities (perfect scaling)."""
    return (2 if s.workers else 1) * s.parallel_reads()


def _at_least(a: GrainSettings, b: GrainSettings) -> bool:
    """``a`` has at least as much of every knob as ``b`` (the per-worker buffer means
    nothing without workers)."""
    buffers = a.workers == 0 or b.workers == 0 or a.per_worker_buffer >= b.per_worker_buffer
    return (a.workers >= b.workers and a.threads >= b.threads and a.prefetch >= b.prefetch
            and buffers)


def implausible(more: Trial, less: Trial) -> Trial | None:
    """The reading to measure again when two settings' readings disagree beyond
    ``READING_NOISE``, ``more`` having at least as much of every knob as ``less``: ``more``
    when it reads slower than ``less`` (more of everything rarely costs that much), ``less``
    when ``more`` reads faster than perfect scaling allows; None when they agree."""
    if more.batch_s > less.batch_s * (1 + READING_NOISE):
        return more
    scaling = _capacity(less.settings) / _capacity(more.settings)
    if more.batch_s < less.batch_s * scaling * (1 - READING_NOISE):
        return less
    return None


class _Search:
    """The trials so far (the fastest reading of each setting), a cache by setting, and the
    ceilings. With ``remeasure``, a reading that disagrees with the other settings'
    (``implausible``) is measured again as soon as it arrives."""

    def __init__(self, measure: Callable[[GrainSettings], Trial], goal: float,
                 max_workers: int, ram_budget_mb: float | None, remeasure: bool = True) -> None:
        self.measure = measure
        self.goal = goal
        self.max_workers = max_workers
        self.ram_budget_mb = ram_budget_mb
        self.remeasure = remeasure
        self.ram_cap: int | None = None
        self.trials: list[Trial] = []
        self.cache: dict[GrainSettings, Trial] = {}
        self.set_aside: list[Trial] = []
        self.agreed: set[GrainSettings] = set()
        """Settings two of whose readings agreed within the noise: that slow for real."""
        self.readings_of: dict[GrainSettings, int] = {}
        """Readings of the settings measured more than once."""

    def _read(self, s: GrainSettings) -> Trial:
        t = self.measure(s)
        return dataclasses.replace(t, batch_s=float(t.batch_s))

    @staticmethod
    def _key(s: GrainSettings) -> GrainSettings:
        if s.workers == 0:  # the per-worker buffer means nothing without workers
            return dataclasses.replace(s, per_worker_buffer=DEFAULT_PER_WORKER_BUFFER)
        return s

    def d(self, s: GrainSettings) -> float:
        s = self._key(s)
        if s not in self.cache:
            t = self._read(s)
            self.cache[s] = t
            self.trials.append(t)
            if s.workers > 0 and self.ram_budget_mb is not None and self.ram_cap is None:
                self.ram_cap = ram_worker_ceiling(self.ram_budget_mb, t.main_rss_mb,
                                                  t.worker_rss_mb)
            for _ in range(MAX_READINGS - 1 if self.remeasure else 0):
                suspects = [x for x in self._disagreeing(s)
                            if self.readings_of.get(x, 1) < MAX_READINGS]
                for suspect in suspects:
                    self.again(suspect)
                if not suspects:
                    break
        return self.cache[s].batch_s

    def _disagreeing(self, s: GrainSettings) -> list[GrainSettings]:
        """Settings whose reading disagrees with ``s``'s (``s`` itself among them). A
        setting that reads slower than one with less of every knob is left alone once two
        of its readings agree (contention past the cores can make it so); one that another
        setting beats by more than perfect scaling is not (no pipeline does that)."""
        new = self.cache[s]
        out: list[GrainSettings] = []
        for other, t in self.cache.items():
            if other == s:
                continue
            if _at_least(s, other):
                more, less, bad = s, other, implausible(new, t)
            elif _at_least(other, s):
                more, less, bad = other, s, implausible(t, new)
            else:
                continue
            if bad is None:
                continue
            suspect = more if bad is self.cache[more] else less
            if suspect == more and suspect in self.agreed:
                continue
            if suspect not in out:
                out.append(suspect)
        return out

    def again(self, s: GrainSettings) -> float:
        """Measure a setting once more (up to ``MAX_READINGS``); the fastest reading counts."""
        s = self._key(s)
        first = self.cache[s]
        n = self.readings_of.get(s, 1)
        if n >= MAX_READINGS:
            return first.batch_s
        self.readings_of[s] = n + 1
        second = self._read(s)
        kept, slower = (second, first) if second.batch_s < first.batch_s else (first, second)
        if slower.batch_s <= kept.batch_s * (1 + READING_NOISE):
            self.agreed.add(s)  # two readings within the noise: the setting is that fast
        self.cache[s] = kept
        self.trials[self.trials.index(first)] = kept
        self.set_aside.append(slower)
        return kept.batch_s

    def storage_first(self, s: GrainSettings) -> str:
        """Why read threads go first (the reason the setting's reads wait on storage), once
        ``s`` is measured and misses the goal; "" when workers go first."""
        if self.d(s) <= self.goal:
            return ""
        return self.cache[self._key(s)].storage

    def confirmed(self, s: GrainSettings) -> float:
        """D at ``s``, measured a second time first when re-measuring is on (unless it was
        already): before a reading ends a branch of the search."""
        self.d(s)
        key = self._key(s)
        if self.remeasure and key not in self.readings_of:
            return self.again(key)
        return self.cache[key].batch_s

    def ceiling(self) -> int:
        cap = self.max_workers
        if self.ram_cap is not None:
            cap = min(cap, max(1, self.ram_cap))
        return cap

    def measured(self, like: GrainSettings) -> dict[int, float]:
        """Worker count -> D for the trials that differ from ``like`` only in workers."""
        out = {}
        for s, t in self.cache.items():
            if s.workers == 0:
                same = (s.threads, s.prefetch) == (like.threads, like.prefetch)
            else:
                same = dataclasses.replace(s, workers=like.workers) == like
            if same:
                out[s.workers] = t.batch_s
        return out

    def smallest(self, base: GrainSettings, ok: Callable[[float], bool], hi: int,
                 confirm_first: bool) -> int:
        """Lower ``hi`` (ok) towards the largest measured count that is not ok."""
        known = self.measured(base)
        lo = max((w for w, d in known.items() if w < hi and not ok(d)), default=-1)
        first = confirm_first
        while hi - lo > 1:
            # A prediction is usually tight: confirm one fewer first, then bisect.
            mid = hi - 1 if first else (lo + hi) // 2
            first = False
            if ok(self.d(dataclasses.replace(base, workers=mid))):
                hi = mid
            else:
                lo = mid
        return hi

    def climb(self, base: GrainSettings) -> bool:
        """Hill-climb over worker counts from the fastest measured; True if the goal is met."""
        while True:
            known = self.measured(base)
            best = min(known, key=lambda w: (known[w], w))
            for n in (best - 1, best + 1):
                if 0 <= n <= self.ceiling() and n not in known:
                    self.d(dataclasses.replace(base, workers=n))
            known = self.measured(base)
            if min(known, key=lambda w: (known[w], w)) == best:
                return known[best] <= self.goal

    @staticmethod
    def _ends_search(workers: int, d: float, best_before: float, d1: float | None) -> bool:
        """Whether a count missing the goal with reading ``d`` ends the worker search: it
        gains less than ``MIN_GAIN`` over the best so far, or reaches less than
        ``SCALING_EFFICIENCY_FLOOR`` of perfect scaling from one worker."""
        if d > best_before * (1 - MIN_GAIN):
            return True
        return d1 is not None and d > 0 and d1 / (workers * d) < SCALING_EFFICIENCY_FLOOR

    def workers(self, base: GrainSettings, start: Sequence[int]
                ) -> tuple[int, bool, StopKind, str]:
        """The worker search at ``base``'s other knobs: (workers, goal met, why it stopped,
        in words)."""
        goal = self.goal
        at = lambda w: dataclasses.replace(base, workers=w)  # noqa: E731
        stop: StopKind = "ceiling"
        stop_reason = f"reached the ceiling of {self.max_workers} workers"
        met = False
        w = 0
        for w in start:
            if w > self.ceiling() and w > 0:
                break
            met = self.d(at(w)) <= goal
            if met:
                break
        while not met and 1 <= w < self.ceiling():
            d = self.d(at(w))
            if not math.isfinite(d):
                break
            nxt = min(self.ceiling(), max(w + 1, math.ceil(w * d / goal)))
            best_before = min(self.measured(base).values())
            dn = self.d(at(nxt))
            if dn > goal and self._ends_search(nxt, dn, best_before, self.measured(base).get(1)):
                dn = self.confirmed(at(nxt))
            met = dn <= goal
            if not met and dn > best_before * (1 - MIN_GAIN):
                stop = "no-gain"
                stop_reason = (f"going from {w} to {nxt} workers gained less than "
                               f"{100 * MIN_GAIN:.0f}%")
                # The jump may have passed a peak (throughput falling past the cores):
                # walk from the fastest count measured to a faster neighbour while any is.
                met = self.climb(base)
                break
            d1 = self.measured(base).get(1)
            efficiency = d1 / (nxt * dn) if d1 is not None and dn > 0 else 1.0
            if not met and efficiency < SCALING_EFFICIENCY_FLOOR:
                stop = "stopped-scaling"
                stop_reason = (f"{nxt} workers reach only {100 * efficiency:.0f}% of perfect "
                               "scaling: the pipeline stopped scaling below that")
                break
            w = nxt
        if not met and self.ram_cap is not None and self.ceiling() < self.max_workers \
                and w >= self.ceiling():
            stop = "ram-ceiling"
            stop_reason = (f"the RAM budget of {self.ram_budget_mb:.0f} MB allows at most "
                           f"{self.ceiling()} workers (peak RSS per worker measured)")
        known = self.measured(base)
        if any(d <= goal for d in known.values()):
            hi = min(w for w, d in known.items() if d <= goal)
            best = self.smallest(base, lambda d: d <= goal, hi, confirm_first=True)
            return best, True, "met", f"{best} workers meet the target with headroom"
        fastest = min(known.values())
        near = min(w for w, d in known.items() if d <= fastest * (1 + MIN_GAIN))
        best = self.smallest(base, lambda d: d <= fastest * (1 + MIN_GAIN), near,
                             confirm_first=False)
        return best, False, stop, stop_reason


def tune(
    measure: Callable[[int, int], float],
    target_s: float,
    *,
    max_workers: int,
    cores: int,
    threads: int = DEFAULT_THREADS,
    prefetch: int = 0,
    fixed_workers: Sequence[int] | None = None,
    run_steps: int = 0,
    remeasure: bool = True,
) -> TuningOutcome:
    """Search worker counts only, with ``measure(workers, threads) -> seconds per batch``, at
    ``threads`` read threads and a read prefetch of ``prefetch`` (0: the default);
    ``remeasure``: measure a reading that disagrees with the others again (fixed worker
    counts are measured once each, as asked)."""

    def measure_settings(s: GrainSettings) -> Trial:
        return Trial.of(s, measure(s.workers, s.threads))

    base = GrainSettings(0, DEFAULT_PER_WORKER_BUFFER, threads, prefetch)
    search = _Search(measure_settings, target_s * LOADER_HEADROOM, max_workers, None,
                     remeasure and not fixed_workers)
    if fixed_workers:
        for w in fixed_workers:
            search.d(dataclasses.replace(base, workers=w))
        return outcome(search.trials, target_s, cores, "fixed",
                       "worker counts fixed by --workers", run_steps)
    _, _, stop, reason = search.workers(base, [0, 1] if max_workers >= 1 else [0])
    return remeasured_outcome(outcome(search.trials, target_s, cores, stop, reason, run_steps),
                              search.set_aside)


def _try_buffers(search: _Search, best: GrainSettings, met: bool,
                 prefetch_factors: Sequence[int], buffer_ladder: Sequence[int]) -> None:
    """Measure smaller read prefetch and per-worker buffers next to ``best`` (kept when as
    good), and larger per-worker buffers when the goal is not met (bursty workers); the
    choice is made later among every trial."""
    fastest = min(t.batch_s for t in search.trials)

    def good(s: GrainSettings) -> bool:
        return search.d(s) <= (search.goal if met else fastest * (1 + MIN_GAIN))

    for f in sorted(prefetch_factors):
        smaller = dataclasses.replace(best, prefetch=max(1, f * best.threads))
        if smaller.prefetch < best.prefetch and good(smaller):
            best = smaller
            break
    if best.workers > 0:
        for b in sorted(buffer_ladder):
            if b >= best.per_worker_buffer:
                break
            smaller = dataclasses.replace(best, per_worker_buffer=b)
            if good(smaller):
                best = smaller
                break
        if not met:
            for b in sorted(b for b in buffer_ladder if b > best.per_worker_buffer):
                larger = dataclasses.replace(best, per_worker_buffer=b)
                if search.d(larger) > search.d(best) * (1 - MIN_GAIN):
                    break
                best = larger


@dataclasses.dataclass(frozen=True)
class _Best:
    """The setting the search holds so far, whether it meets the goal, and why the worker
    search behind it stopped."""

    settings: GrainSettings
    met: bool
    stop: StopKind


def _threads_without_workers(search: _Search, base: GrainSettings,
                             thread_ladder: Sequence[int]) -> GrainSettings:
    """Climb the thread ladder in the training process (0 workers) while each step gains
    at least ``MIN_GAIN``; stop at the first count that meets the goal."""
    current = dataclasses.replace(base, workers=0)
    for t in (t for t in thread_ladder if t > base.threads):
        nxt = dataclasses.replace(current, threads=t, prefetch=0)  # 0: the default for t
        if search.d(nxt) > search.d(current) * (1 - MIN_GAIN):
            break
        current = nxt
        if search.d(current) <= search.goal:
            break
    return current


def _search_threads(search: _Search, base: GrainSettings, best: _Best,
                    thread_ladder: Sequence[int], reasons: list[str]) -> _Best:
    """Read threads, a cheaper way to parallel reads than workers: enough of them without
    workers, or, when they helped but do not meet the goal alone, the workers searched
    again with them, from one worker (fewer are needed, or more become useful)."""
    threaded = _threads_without_workers(search, base, thread_ladder)
    if threaded == dataclasses.replace(base, workers=0):
        return best  # threads did not help
    if search.d(threaded) <= search.goal:
        reasons.append(f"{threaded.threads} read threads without workers meet the target")
        return _Best(threaded, True, "met")
    start = [1, best.settings.workers] if best.met else [1]
    w, met, stop, why = search.workers(threaded, start)
    if best.met and not met:
        return best  # the workers alone met the goal; with threads they do not
    reasons.append(f"with {threaded.threads} read threads: {why}")
    return _Best(dataclasses.replace(threaded, workers=w), met, stop)


def tune_grain(
    measure: Callable[[GrainSettings], Trial],
    target_s: float,
    *,
    max_workers: int,
    cores: int,
    base: GrainSettings | None = None,
    thread_ladder: Sequence[int] = THREAD_LADDER,
    buffer_ladder: Sequence[int] = BUFFER_LADDER,
    prefetch_factors: Sequence[int] = PREFETCH_FACTORS,
    ram_budget_mb: float | None = None,
    run_steps: int = 0,
    remeasure: bool = True,
) -> TuningOutcome:
    """The joint search over workers, read threads, per-worker and prefetch buffers;
    ``remeasure``: measure a reading that disagrees with the others again."""
    base = base or GrainSettings()
    search = _Search(measure, target_s * LOADER_HEADROOM, max_workers, ram_budget_mb,
                     remeasure)
    no_workers = dataclasses.replace(base, workers=0)
    reasons: list[str] = []
    order = search.storage_first(no_workers)
    best = _Best(no_workers, False, "no-gain")
    if order:  # 1'. reads wait on storage: read threads first, the workers with them
        best = _search_threads(search, base, best, thread_ladder, reasons)
    if best.settings == no_workers:
        best = _workers_then_threads(search, base, thread_ladder, reasons)
    # 3. buffers: smaller when as good, larger when the goal is not met (nothing cheaper
    # to look for when the base read settings without workers met it)
    if not (best.met and best.settings == no_workers):
        _try_buffers(search, best.settings, best.met, prefetch_factors, buffer_ladder)
    result = remeasured_outcome(outcome(search.trials, target_s, cores, best.stop,
                                        "; ".join(reasons), run_steps), search.set_aside)
    return _explained(dataclasses.replace(result, order=order))


def _workers_then_threads(search: _Search, base: GrainSettings, thread_ladder: Sequence[int],
                          reasons: list[str]) -> _Best:
    """1. The workers at the base read settings; 2. read threads, unless no workers at the
    base read settings met the goal already."""
    w, met, stop, why = search.workers(base, [0, 1] if search.max_workers >= 1 else [0])
    reasons.append(why)
    best = _Best(dataclasses.replace(base, workers=w), met, stop)
    if not (met and w == 0):
        best = _search_threads(search, base, best, thread_ladder, reasons)
    return best


def _explained(result: TuningOutcome) -> TuningOutcome:
    return dataclasses.replace(result, reason=f"{result.reason}; {choice_note(result)}")


def choice_note(result: TuningOutcome) -> str:
    """The rule behind the choice, in words."""
    label = result.chosen.settings.label()
    if result.meets_target:
        return (f"chose the cheapest setting that meets the target (fewest workers, then the "
                f"smallest buffers): {label}")
    return (f"no setting meets the target; chose the cheapest within "
            f"{100 * MIN_GAIN:.0f}% of the fastest: {label}")
