"""Periodic stalls: slow steps that recur with a period, what sets the period, and the fix.

A loader can keep up on average and still stall the run at regular steps: a buffer of B
batches refilled in one go stalls every B steps when the refill takes longer than B steps
of compute; W workers that each hand over a batch in turn stall every W steps when they
fall behind; a data set read epoch by epoch stalls at each epoch boundary; a checkpoint
or an eval every N steps stalls every N steps. ``anomalies`` flags such steps one by one;
this module says they recur.

The rule (``find_periodic_stall``). A step is *slow* when it takes at least one of
``STALL_RATIOS`` times the typical step (the ``TYPICAL_QUANTILE`` of the steps looked at: a
low quantile, so that with one stall in every two steps it is still a step that did not
stall). For every period P from ``MIN_PERIOD`` up to a ``MIN_OCCURRENCES``-th of the run
(at most ``MAX_PERIOD``) and every phase (step number mod P), the slow steps at that phase
are counted. Under "no period" (the slow steps at random positions among the steps looked
at), that count is hypergeometric (from ``JITTER_MIN_PERIOD`` on, the slow steps on a
pair of adjacent phases are counted too: stalls that wander by a step); a (period, phase)
is a periodic stall when its tail probability, times the number of pairs tested
(Bonferroni), is below ``FALSE_ALARM_RATE``, at least ``MIN_OCCURRENCES`` slow steps fall
on it, and they fill at least ``MIN_COVERAGE`` of its steps. The most significant pair
wins (a multiple of the true period holds only some of its stalls, a divisor has more steps
without one), and the stalls must cost at least ``MIN_LOST_SHARE`` of the time of the
steps looked at. So a seeded noise run, however heavy its tail, and a one-off stall (or
two) never make a period (the unit tests run 200 seeded noise runs). A long run is searched
over its last ``MAX_STEPS`` steps.

What the period matches (``match_period``): the loader's workers (W) or their output
buffers (W x per-worker buffer), its read prefetch buffer (in batches), an epoch boundary
(the data set's batches per epoch, or a Monitor's ``batches`` called once a pass), or the
steps tagged checkpoint, eval or epoch. The fix
(``periodic_stall_finding``): over one period the loader delivered P batches in
``P x typical + stall`` seconds; to keep ahead it must deliver them in ``P x typical``,
so the knob the period matches must grow by that factor.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

import numpy as np

from pipecheck.records.common import Finding, StepRecord
from pipecheck.records.imported import LogStep
from pipecheck.records.steps import StepTable
from pipecheck.units import ms

Steps = StepTable[StepRecord] | StepTable[LogStep]
"""A run's steps: measured by pipecheck, or read from a MaxText log."""

STALL_RATIOS = (1.5, 3.0, 10.0)
"""A step at least this many times the typical step stalled, at one of these levels (each
searched, the Bonferroni factor multiplied by their number): 1.5x is half a step's worth
lost, beyond the jitter of a quiet machine's steady steps (their IQR is ~10%); on a busy
one, short steps jitter past 1.5x at random and hide a period of 30x stalls among them
(measured: 5 ms steps at 8-10 ms beside 155 ms epoch stalls), which 3x or 10x keeps."""

TYPICAL_QUANTILE = 0.25
"""The typical step is this quantile of the steps looked at: with one stall every two steps
(period 2) the median may be a stall, the lower quartile is not."""

MIN_PERIOD = 2
"""The shortest period: every step slow is a slow run, not a periodic stall."""

MAX_PERIOD = 5000
"""The longest period searched: an epoch or a checkpoint interval of a long run fits; a
longer one needs a run of at least MIN_OCCURRENCES x 5000 steps anyway."""

MIN_OCCURRENCES = 3
"""A period needs at least this many stalls on it: two stalls make a distance, not a
recurrence."""

JITTER_MIN_PERIOD = 3
"""From this period on, stalls on two adjacent steps are also counted together: a stall
that wanders by a step (a worker a little late one round, early the next), or one split
over two steps (3 workers out of phase: two short waits a round, measured here); with
period 2 the pair would be every step."""

MIN_COVERAGE = 0.5
"""At least this share of the steps at the period's phase must be slow: a stall that
recurs, not a few slow steps that happen to share a remainder."""

FALSE_ALARM_RATE = 1e-3
"""Bound on the chance that a run whose slow steps lie at random positions gets a period
(all (period, phase) pairs tested together: Bonferroni)."""

MIN_LOST_SHARE = 0.01
"""The periodic stalls must cost at least this share of the time of the steps looked at;
below it they are real but not worth a finding."""

EXCLUDED_TAGS = ("compile", "drain", "warmup")
"""Steps never looked at: a compilation (once, not periodic), the loop's last interval, and
batches served from the start-up buffer (fast by design). Checkpoint and eval steps are
kept: they may be the period."""

MAX_STEPS = 50_000
"""A longer run is searched over its last this many steps looked at: a period of up to
MAX_PERIOD recurs 10 times in them, and a million-step log is searched in under a second
instead of several."""

TAG_MATCH_SHARE = 0.5
"""A period is a checkpoint (or eval) period when at least this share of its stalls carry
that tag."""


@dataclasses.dataclass(frozen=True)
class LoaderShape:
    """What is known of the loader that fed the steps (0 or None: not known)."""

    workers: int = 0
    per_worker_buffer: int = 0
    prefetch_batches: int = 0
    """The read prefetch buffer, counted in batches."""
    epoch_steps: int | None = None
    """Batches in one epoch of the data set (its size over the batch size)."""
    epoch_starts: tuple[int, ...] = ()
    """Steps at which a new pass over the data began (a Monitor's ``batches`` called again)."""
    threads: int = 0
    """Read threads (``ReadOptions.num_threads``)."""
    elements_per_batch: int = 1
    """Elements the read threads produce for one batch."""


@dataclasses.dataclass(frozen=True)
class PeriodicStall:
    """Slow steps recurring every ``period`` steps, at step numbers ``phase`` mod period."""

    period: int
    phase: int
    stall_steps: tuple[int, ...]
    """The slow steps at the period's phase."""
    positions: int
    """Steps looked at that lie at the period's phase (stalled or not)."""
    typical_s: float
    lost_s: float
    """Seconds the stalls took beyond a typical step, together."""
    looked_at_s: float
    """Seconds of all the steps looked at."""
    p_value: float
    """Tail probability of so many slow steps at one phase, times the pairs tested."""
    width: int = 1
    """1: the stalls fall on one phase; 2: on ``phase`` or the next (they wander by a
    step)."""

    @property
    def mean_stall_s(self) -> float:
        """Extra seconds per stall, on average."""
        return self.lost_s / len(self.stall_steps)

    @property
    def keep_ahead_factor(self) -> float:
        """How much faster the loader must deliver a period's batches to keep ahead: it gave
        ``period`` batches in ``period x typical + stall`` seconds, the stall being the
        seconds lost per period (``positions`` of them)."""
        work = self.period * self.typical_s
        per_period = self.lost_s / max(1, self.positions)
        return (work + per_period) / work if work > 0 else math.inf


EXACT_MAX_DRAWS = 64
"""Tail probabilities of up to this many draws are summed exactly; beyond, the Chernoff
bound (Hoeffding: a hypergeometric tail is at most the binomial's bound) stands in: never
below the true value, so the false-alarm bound holds, and cheap on long runs."""


def _log_factorials(top: int) -> np.ndarray:
    """``log(a!)`` (``math.lgamma(a + 1)``) for ``a`` = ``top``, ``top - 1``, ...,
    ``top - EXACT_MAX_DRAWS``, in that order (nan below 0): entry ``j`` is ``log((top -
    j)!)``, the table the exact tails read."""
    return np.array([math.lgamma(top - j + 1) if top - j >= 0 else math.nan
                     for j in range(EXACT_MAX_DRAWS + 1)])


def _exact_tails(hits: np.ndarray, population: int, successes: int,
                 draws: np.ndarray) -> np.ndarray:
    """P(X >= hits), elementwise, summed exactly from log-binomials over ``x`` = ``hits`` ..
    ``min(draws, successes)`` (those that leave at most ``population - successes`` failures
    drawn), for draws of at most ``EXACT_MAX_DRAWS``: the terms of all the tails in one
    array, each tail a ``logaddexp`` over its segment, in the order of ``x``."""
    others = population - successes
    first = np.maximum(hits, draws - others)
    count = np.maximum(np.minimum(draws, successes) - first + 1, 0)
    out = np.zeros(hits.shape, dtype=float)
    some = np.flatnonzero(count > 0)
    if some.size == 0:
        return out
    count = count[some]
    starts = np.cumsum(count) - count
    x = np.repeat(first[some] - starts, count) + np.arange(int(count.sum()))
    c = np.repeat(draws[some], count)
    small = _log_factorials(EXACT_MAX_DRAWS)[::-1]  # log(a!) for a = 0 .. EXACT_MAX_DRAWS
    chosen, rest, every = (_log_factorials(v) for v in (successes, others, population))
    total = every[0] - small[c] - every[c]
    terms = (chosen[0] - small[x] - chosen[x]) + (rest[0] - small[c - x] - rest[c - x]) - total
    out[some] = np.minimum(1.0, np.exp(np.logaddexp.reduceat(terms, starts)))
    return out


def _chernoff(hits: int, draws: int, q: float) -> float:
    """The Chernoff bound ``exp(-draws * KL(hits/draws || q))`` on P(X >= hits)."""
    a = hits / draws
    kl = a * math.log(a / q) + ((1 - a) * math.log((1 - a) / (1 - q)) if a < 1 else 0.0)
    return math.exp(-draws * kl)


def hypergeom_tail(hits: np.ndarray, population: int, successes: int,
                   draws: np.ndarray) -> np.ndarray:
    """P(X >= hits) for X hypergeometric (``draws`` from ``population`` holding
    ``successes``), elementwise: exact (log-binomials) up to ``EXACT_MAX_DRAWS`` draws,
    else the Chernoff bound ``exp(-draws * KL(hits/draws || successes/population))``; 1
    where ``hits`` is at most its mean, 0 where it is more than can be drawn."""
    hits = np.asarray(hits, dtype=np.int64)
    draws = np.asarray(draws, dtype=np.int64)
    out = np.ones(hits.shape, dtype=float)
    q = successes / population
    tested = (hits > 0) & (hits > draws * q)
    can = hits <= np.minimum(draws, successes)
    out[tested & ~can] = 0.0
    exact = tested & can & (draws <= EXACT_MAX_DRAWS)
    out[exact] = _exact_tails(hits[exact], population, successes, draws[exact])
    long = np.flatnonzero(tested & can & (draws > EXACT_MAX_DRAWS))
    out[long] = [_chernoff(h, c, q)
                 for h, c in zip(hits[long].tolist(), draws[long].tolist(), strict=True)]
    return out


CHUNK_ELEMENTS = 1 << 16
"""The (period, slow step) pairs counted in one go: enough that numpy's cost per call is
small beside the counting, few enough that the arrays stay in the CPU's cache."""


def _modes(values: np.ndarray, periods: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each of ``periods``: the phase (``values`` mod the period) holding the most of
    ``values`` and how many, then the phase whose pair (it and the next phase, mod the
    period) holds the most and how many; the first phase where several hold as many, as
    numpy's argmax over all the phases gives it. ``values`` is not empty.

    Each period's phases are sorted (one row of a chunk of periods), so that equal phases
    lie together: a run of them is a phase holding values, its length how many. A phase and
    its count make one key, ``count * scale + (scale - 1 - phase)``: the largest key is the
    most values, on the first phase. A pair is most full on a phase holding values (its
    count plus the next phase's), or on the phase just before the fullest single phase,
    which holds it alone: no other phase can be first with as many."""
    scale = int(periods.max()) + 1
    base = int(values.min())
    rel = values - base
    k = values.size
    small = int(rel.max()) + scale < 2**31 and (2 * k + 1) * scale < 2**31
    kind = np.int32 if small else np.int64
    rel = rel.astype(kind)
    out = [np.empty(periods.size, dtype=np.int64) for _ in range(4)]
    rows = max(1, CHUNK_ELEMENTS // k)
    for lo in range(0, periods.size, rows):
        whole = periods[lo:lo + rows]
        p = whole.astype(kind)
        phase = (rel + (base % whole).astype(kind)[:, None]) % p[:, None]
        phase.sort(axis=1)
        flat = phase.ravel()
        new = np.empty(flat.size, dtype=bool)
        np.not_equal(flat[1:], flat[:-1], out=new[1:])
        new[::k] = True  # each row (period) begins a run
        first = np.flatnonzero(new)
        held = flat[first]  # the phases holding values, row by row, in order
        count = np.empty(first.size, dtype=kind)  # how many each holds
        np.subtract(first[1:], first[:-1], out=count[:-1])
        count[-1] = flat.size - first[-1]
        row_first = np.searchsorted(first, np.arange(0, flat.size, k))
        row_last = np.append(row_first[1:], held.size) - 1
        key = count * scale
        np.subtract(key, held, out=key)
        np.add(key, scale - 1, out=key)
        single = np.maximum.reduceat(key, row_first)
        adjacent = held[1:] == held[:-1] + 1
        adjacent[row_last[:-1]] = False
        after = np.empty_like(count)  # how many the next phase holds
        np.multiply(count[1:], adjacent, out=after[:-1])
        after[-1] = 0
        wrap = np.flatnonzero((phase[:, -1] == p - 1) & (phase[:, 0] == 0))
        after[row_last[wrap]] = count[row_first[wrap]]
        np.multiply(after, scale, out=after)
        np.add(after, key, out=after)
        pair = np.maximum(np.maximum.reduceat(after, row_first),
                          single + (single % scale != scale - 1))
        for dest, got in zip(out, (single // scale, scale - 1 - single % scale,
                                   pair // scale, scale - 1 - pair % scale), strict=True):
            dest[lo:lo + rows] = got
    return out[0], out[1], out[2], out[3]


def _phase_sizes(lo: int, hi: int, gaps: np.ndarray, periods: np.ndarray,
                 phases: np.ndarray) -> np.ndarray:
    """How many step numbers in ``lo..hi``, ``gaps`` (those missing) left out, lie at
    each of ``phases`` of its period, elementwise."""
    first = lo + (phases - lo) % periods
    sizes = np.where(first <= hi, (hi - first) // periods + 1, 0)
    if gaps.size == 0 or periods.size == 0:
        return sizes
    rows = max(1, CHUNK_ELEMENTS // gaps.size)
    for at in range(0, periods.size, rows):
        p, f = periods[at:at + rows, None], phases[at:at + rows, None]
        sizes[at:at + rows] -= np.count_nonzero(gaps % p == f, axis=1)
    return sizes


@dataclasses.dataclass(frozen=True)
class _Candidate:
    period: int
    phase: int
    width: int
    """Phases the stalls may fall on: 1, or 2 (``phase`` and the next) when they wander."""
    hits: int
    draws: int
    """Steps at those phases."""
    positions: int
    """Steps at ``phase`` alone: one stall a period is expected."""


@dataclasses.dataclass(frozen=True)
class _Candidates:
    """``_Candidate`` fields by column, one entry a candidate, by period, and for each
    period width 1 before width 2."""

    period: np.ndarray
    phase: np.ndarray
    width: np.ndarray
    hits: np.ndarray
    draws: np.ndarray
    positions: np.ndarray

    def __len__(self) -> int:
        return int(self.period.size)

    def at(self, i: int) -> _Candidate:
        """The ``i``-th candidate."""
        return _Candidate(int(self.period[i]), int(self.phase[i]), int(self.width[i]),
                          int(self.hits[i]), int(self.draws[i]), int(self.positions[i]))


def _candidates(numbers: np.ndarray, slow: np.ndarray) -> _Candidates:
    """Each period's phase with the most slow steps, and (from ``JITTER_MIN_PERIOD`` on)
    its pair of adjacent phases with the most, where enough stalls lie on them, by period
    (width 1 before width 2). A period whose every phase holds more steps than the slow
    steps over ``MIN_COVERAGE`` has none, and is not counted."""
    n = numbers.size
    lo, hi = int(numbers[0]), int(numbers[-1])
    gaps = numbers[:0] if hi - lo + 1 == n and bool(np.all(numbers[1:] > numbers[:-1])) \
        else np.setdiff1d(np.arange(lo, hi + 1), numbers, assume_unique=True)
    slow_numbers = numbers[slow]
    k = slow_numbers.size
    periods = np.arange(MIN_PERIOD, min(MAX_PERIOD, n // MIN_OCCURRENCES) + 1)
    # every phase of P holds at least (hi - lo + 1) // P - len(gaps) steps
    periods = periods[MIN_COVERAGE * ((hi - lo + 1) // periods - gaps.size) <= k]
    if k < MIN_OCCURRENCES or periods.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Candidates(*(empty,) * 6)
    h1, phase1, h2, phase2 = _modes(slow_numbers, periods)
    one = h1 >= MIN_OCCURRENCES
    two = (h2 >= MIN_OCCURRENCES) & (periods >= JITTER_MIN_PERIOD)
    size1 = np.zeros(periods.size, dtype=np.int64)
    size1[one] = _phase_sizes(lo, hi, gaps, periods[one], phase1[one])
    size2 = np.zeros(periods.size, dtype=np.int64)
    draws2 = np.zeros(periods.size, dtype=np.int64)
    if two.any():
        p2, f2 = periods[two], phase2[two]
        size2[two] = _phase_sizes(lo, hi, gaps, p2, f2)
        draws2[two] = size2[two] + _phase_sizes(lo, hi, gaps, p2, (f2 + 1) % p2)
    one &= h1 >= MIN_COVERAGE * np.maximum(size1, 1)
    two &= h2 >= MIN_COVERAGE * np.maximum(size2, 1)
    keep = np.stack([one, two], axis=1).ravel()

    def column(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.stack([a, b], axis=1).ravel()[keep]

    return _Candidates(column(periods, periods), column(phase1, phase2),
                       column(np.ones_like(periods), np.full_like(periods, 2)),
                       column(h1, h2), column(size1, draws2), column(size1, size2))


def _tests(n: int) -> int:
    """The (period, phase) pairs and adjacent-phase pairs a run of ``n`` steps tests: the
    Bonferroni factor."""
    top = min(MAX_PERIOD, n // MIN_OCCURRENCES)
    return max(1, sum(range(MIN_PERIOD, top + 1))
               + sum(range(JITTER_MIN_PERIOD, top + 1)))


def _best_at(numbers: np.ndarray, slow: np.ndarray, tests: int
             ) -> tuple[_Candidate, float] | None:
    """The most significant candidate among the steps marked ``slow``, with its p-value
    (times ``tests``), or None; the first of equal p-values by width, then by period."""
    k = int(slow.sum())
    if k < MIN_OCCURRENCES:
        return None
    found = _candidates(numbers, slow)
    if len(found) == 0:
        return None
    p = hypergeom_tail(found.hits, numbers.size, k, found.draws) * tests
    best = int(np.lexsort((found.period, found.width, p))[0])
    return found.at(best), float(p[best])


def find_periodic_stall(numbers: np.ndarray, seconds: np.ndarray) -> PeriodicStall | None:
    """The most significant period of the slow steps among ``numbers``/``seconds`` (the
    steps to look at, in order; the last ``MAX_STEPS`` of them), at the level of
    ``STALL_RATIOS`` that makes it most significant, or None (see the module docstring)."""
    numbers = np.asarray(numbers, dtype=np.int64)[-MAX_STEPS:]
    seconds = np.asarray(seconds, dtype=float)[-MAX_STEPS:]
    n = numbers.size
    if n < MIN_OCCURRENCES * MIN_PERIOD:
        return None
    typical = float(np.quantile(seconds, TYPICAL_QUANTILE))
    if not typical > 0:
        return None
    tests = _tests(n) * len(STALL_RATIOS)
    best: tuple[_Candidate, float, np.ndarray] | None = None
    seen: set[int] = set()
    for ratio in STALL_RATIOS:
        slow = seconds >= ratio * typical
        if int(slow.sum()) in seen:  # the same steps as a lower level: the same answer
            continue
        seen.add(int(slow.sum()))
        found = _best_at(numbers, slow, tests)
        if found is not None and (best is None or found[1] < best[1]):
            best = (*found, slow)
    if best is None or best[1] >= FALSE_ALARM_RATE:
        return None
    c, p, slow = best
    at = slow & ((numbers - c.phase) % c.period < c.width)
    lost = float(np.sum(seconds[at] - typical))
    total = float(seconds.sum())
    if lost < MIN_LOST_SHARE * total:
        return None
    return PeriodicStall(c.period, c.phase, tuple(int(s) for s in numbers[at]), c.positions,
                         typical, lost, total, p, c.width)


def steps_looked_at(steps: Steps) -> np.ndarray:
    """Which steps the detector looks at: not the first, none tagged
    ``EXCLUDED_TAGS``."""
    return (steps.column("step") >= 1) & ~steps.tag_mask(EXCLUDED_TAGS)


def stall_of_steps(steps: Steps) -> PeriodicStall | None:
    """``find_periodic_stall`` on a run's steps (``steps_looked_at``)."""
    if len(steps) == 0:
        return None
    mask = steps_looked_at(steps)
    return find_periodic_stall(steps.column("step")[mask],
                               steps.column("time_s")[mask])


@dataclasses.dataclass(frozen=True)
class Match:
    """What a period matches, in words, the knob to change and its current value."""

    what: str
    knob: str | None = None
    value: int = 0


def shape_of_config(config: Mapping[str, object]) -> LoaderShape:
    """What a run's config says of its loader: ``num_workers``, ``per_worker_buffer_size``,
    ``num_threads`` (pipecheck's config keys, as a Monitor's ``config`` may hold them; the
    threads read examples, ``batch_size`` a batch) and, for the epoch, ``dataset_size`` over
    ``batch_size`` (examples per epoch over examples per batch)."""

    def whole(key: str) -> int:
        value = config.get(key)
        return int(value) if isinstance(value, (int, float)) and value > 0 else 0

    size, batch = whole("dataset_size"), whole("batch_size")
    return LoaderShape(workers=whole("num_workers"),
                       per_worker_buffer=whole("per_worker_buffer_size"),
                       epoch_steps=size // batch if size and batch and size >= batch else None,
                       threads=whole("num_threads"), elements_per_batch=max(1, batch))


MATCHED_TAGS = ("checkpoint", "eval", "epoch")
"""Step tags a period may match: a save, an evaluation, or a pass over the data that begins
(``Monitor.tag("epoch")``)."""


def _tag_match(stall: PeriodicStall, tagged: dict[str, set[int]]) -> Match | None:
    for tag in MATCHED_TAGS:
        on = sum(1 for s in stall.stall_steps if s in tagged.get(tag, set()))
        if on >= TAG_MATCH_SHARE * len(stall.stall_steps):
            what = "an epoch boundary" if tag == "epoch" else f"the {tag}"
            return Match(f"{what} every {stall.period} steps (its steps are tagged {tag})",
                         tag)
    return None


def _epoch_match(stall: PeriodicStall, shape: LoaderShape) -> Match | None:
    starts = set(shape.epoch_starts)
    if len(starts) >= 2:
        # the wait for a pass's first batch lands in the step before it (the lagged sync)
        on = sum(1 for s in stall.stall_steps if {s - 1, s, s + 1} & starts)
        if on >= TAG_MATCH_SHARE * len(stall.stall_steps):
            return Match(f"an epoch boundary: a new pass over the data every {stall.period} "
                         "steps", "epoch")
    if shape.epoch_steps and abs(shape.epoch_steps - stall.period) <= 1:
        return Match(f"an epoch boundary: the data set holds {shape.epoch_steps} batches",
                     "epoch")
    return None


def match_period(stall: PeriodicStall, shape: LoaderShape,
                 tagged: dict[str, set[int]] | None = None) -> Match:
    """What sets the period: a checkpoint or eval (most stalls tagged so), an epoch
    boundary, the loader's workers or buffers; else nothing known."""
    p = stall.period
    found = _tag_match(stall, tagged or {}) or _epoch_match(stall, shape)
    if found is not None:
        return found
    w, k = shape.workers, shape.per_worker_buffer
    if w >= 2 and p == w:
        return Match(f"the loader's {w} workers, each handing over a batch in turn", "workers",
                     w)
    if w and k and p == w * k:
        return Match(f"the workers' output buffers ({w} workers x {k} batches)",
                     "per_worker_buffer", k)
    if shape.prefetch_batches >= 2 and p == shape.prefetch_batches:
        return Match(f"the read prefetch buffer ({p} batches)", "prefetch", p)
    t, per = shape.threads, max(1, shape.elements_per_batch)
    if not w and t >= 2 and t % per == 0 and p == t // per:
        return Match(f"the {t} read threads finishing their elements together ({t} elements, "
                     f"{per} a batch)", "threads", t)
    return Match(f"nothing pipecheck knows of the loader (workers {w or '?'}, "
                 f"per-worker buffer {k or '?'}, epoch "
                 f"{shape.epoch_steps or '?'} batches)")


def _ceil(x: float) -> int:
    """The whole number at or above ``x``, a rounding error below a whole number ignored."""
    return math.ceil(x - 1e-9)


def _fix(stall: PeriodicStall, match: Match, shape: LoaderShape) -> str:
    f = stall.keep_ahead_factor
    need = f"{f:.2f}x its throughput over each period"
    if match.knob == "workers":
        return (f"raise the workers from {match.value} to {_ceil(match.value * f)} (the "
                f"loader needs {need}), or make each batch cheaper")
    if match.knob == "per_worker_buffer":
        return (f"raise the per-worker buffer from {match.value} to "
                f"{_ceil(match.value * f)}, or the workers from {shape.workers} to "
                f"{_ceil(shape.workers * f)} (the loader needs {need})")
    if match.knob == "threads":
        return (f"raise the read threads (ReadOptions.num_threads) from {match.value} to "
                f"{_ceil(match.value * f)} (the loader needs {need}), or add workers")
    if match.knob == "prefetch":
        return (f"raise the read prefetch buffer (ReadOptions.prefetch_buffer_size) to "
                f"{_ceil(match.value * f)} batches' worth, or add read threads")
    if match.knob == "epoch":
        return ("read across the epoch boundary: repeat the data set (Grain: ds.repeat() "
                "before to_iter_dataset/mp_prefetch) instead of starting a new iterator each "
                "epoch, so the workers prefetch the next epoch's first batches")
    if match.knob == "checkpoint":
        return "save asynchronously (Orbax's async checkpointing) or less often"
    if match.knob == "eval":
        return "evaluate less often, or on other devices while training goes on"
    return (f"look at what runs every {stall.period} steps; a loader behind it needs {need} "
            "(more workers, or a larger buffer)")


def periodic_stall_finding(stall: PeriodicStall, shape: LoaderShape,
                           tagged: dict[str, set[int]] | None = None) -> Finding:
    """The finding of kind ``periodic-stall``: the period, what it matches, the seconds
    lost and the fix, with the stalled steps as evidence."""
    match = match_period(stall, shape, tagged)
    shown = ", ".join(map(str, stall.stall_steps[:8]))
    more = len(stall.stall_steps) - 8
    share = stall.lost_s / stall.looked_at_s if stall.looked_at_s > 0 else math.nan
    wander = ", on two adjacent steps" if stall.width > 1 else ""
    return Finding(
        kind="periodic-stall",
        message=(f"steps stall every {stall.period} steps ({len(stall.stall_steps)} stalls "
                 f"over {stall.positions} periods{wander}, e.g. steps {shown}"
                 f"{f' and {more} more' if more > 0 else ''}): {ms(stall.mean_stall_s)} "
                 f"extra each over a typical {ms(stall.typical_s)} step, "
                 f"{stall.lost_s:.2f} s lost ({100 * share:.0f}% of the steps' time); the "
                 f"period matches {match.what}"),
        numbers={"period": float(stall.period), "stalls": float(len(stall.stall_steps)),
                 "lost_s": stall.lost_s, "mean_stall_s": stall.mean_stall_s,
                 "typical_s": stall.typical_s, "keep_ahead_factor": stall.keep_ahead_factor,
                 "p_value": stall.p_value},
        location=match.knob,
        fix=_fix(stall, match, shape),
    )


def tagged_steps(steps: Steps) -> dict[str, set[int]]:
    """Step numbers carrying each of ``MATCHED_TAGS``."""
    numbers = steps.column("step")
    return {tag: set(numbers[steps.tag_mask((tag,))].tolist()) for tag in MATCHED_TAGS}


def periodic_stall_findings(steps: Steps,
                            shape: LoaderShape = LoaderShape()) -> list[Finding]:
    """The run's periodic-stall finding, or none."""
    stall = stall_of_steps(steps)
    if stall is None:
        return []
    return [periodic_stall_finding(stall, shape, tagged_steps(steps))]
