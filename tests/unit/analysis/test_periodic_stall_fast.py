"""The vectorized periodic-stall search against the straightforward one it replaced (kept
here as the reference: one period at a time, exact tails summed term by term): the same
candidates, in the same order, the same p-values and the same stall on seeded runs with
planted periods, wandering stalls, noise, ties and gaps in the step numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pipecheck.analysis import periodic_stall as ps

# --- the reference: the per-period search as it was ----------------------------------


def ref_hypergeom_tail(hits: np.ndarray, population: int, successes: int,
                       draws: np.ndarray) -> np.ndarray:
    out = np.ones(hits.shape, dtype=float)
    lg = math.lgamma
    q = successes / population

    def log_choose(a: int, b: int) -> float:
        return lg(a + 1) - lg(b + 1) - lg(a - b + 1)

    for i, (h, c) in enumerate(zip(hits.tolist(), draws.tolist(), strict=True)):
        top = min(c, successes)
        if h <= 0 or h <= c * q:
            continue
        if h > top:
            out[i] = 0.0
        elif c > ps.EXACT_MAX_DRAWS:
            a = h / c
            kl = a * math.log(a / q) + ((1 - a) * math.log((1 - a) / (1 - q)) if a < 1 else 0.0)
            out[i] = math.exp(-c * kl)
        else:
            total = log_choose(population, c)
            terms = [log_choose(successes, x) + log_choose(population - successes, c - x)
                     - total for x in range(h, top + 1) if c - x <= population - successes]
            out[i] = min(1.0, float(np.exp(np.logaddexp.reduce(terms)))) if terms else 0.0
    return out


def ref_phase_size(lo: int, hi: int, gaps: np.ndarray, period: int, phase: int) -> int:
    first = lo + (phase - lo) % period
    full = (hi - first) // period + 1 if first <= hi else 0
    return full - int(np.count_nonzero(gaps % period == phase))


Row = tuple[int, int, int, int, int, int]
"""A candidate: period, phase, width, hits, draws, positions."""


def ref_candidates(numbers: np.ndarray, slow: np.ndarray) -> list[Row]:
    n = numbers.size
    lo, hi = int(numbers[0]), int(numbers[-1])
    gaps = np.setdiff1d(np.arange(lo, hi + 1), numbers, assume_unique=True)
    slow_numbers = numbers[slow]
    out = []
    for period in range(ps.MIN_PERIOD, min(ps.MAX_PERIOD, n // ps.MIN_OCCURRENCES) + 1):
        hits = np.bincount(slow_numbers % period, minlength=period)
        widths = [(1, hits)]
        if period >= ps.JITTER_MIN_PERIOD:
            widths.append((2, hits + np.roll(hits, -1)))
        for width, counts in widths:
            phase = int(np.argmax(counts))
            h = int(counts[phase])
            if h < ps.MIN_OCCURRENCES:
                continue
            size = ref_phase_size(lo, hi, gaps, period, phase)
            draws = size if width == 1 else size + ref_phase_size(lo, hi, gaps, period,
                                                                  (phase + 1) % period)
            if h >= ps.MIN_COVERAGE * max(size, 1):
                out.append((period, phase, width, h, draws, size))
    return out


def ref_best_at(numbers: np.ndarray, slow: np.ndarray, tests: int
                ) -> tuple[Row, float] | None:
    k = int(slow.sum())
    found = ref_candidates(numbers, slow) if k >= ps.MIN_OCCURRENCES else []
    if not found:
        return None
    p = ref_hypergeom_tail(np.array([c[3] for c in found]), numbers.size, k,
                           np.array([c[4] for c in found])) * tests
    best = min(range(len(found)), key=lambda i: (p[i], found[i][2], found[i][0]))
    return found[best], float(p[best])


def ref_find(numbers: np.ndarray, seconds: np.ndarray) -> ps.PeriodicStall | None:
    numbers = np.asarray(numbers, dtype=np.int64)[-ps.MAX_STEPS:]
    seconds = np.asarray(seconds, dtype=float)[-ps.MAX_STEPS:]
    n = numbers.size
    if n < ps.MIN_OCCURRENCES * ps.MIN_PERIOD:
        return None
    typical = float(np.quantile(seconds, ps.TYPICAL_QUANTILE))
    if not typical > 0:
        return None
    tests = ps._tests(n) * len(ps.STALL_RATIOS)
    best: tuple[Row, float, np.ndarray] | None = None
    seen: set[int] = set()
    for ratio in ps.STALL_RATIOS:
        slow = seconds >= ratio * typical
        if int(slow.sum()) in seen:
            continue
        seen.add(int(slow.sum()))
        found = ref_best_at(numbers, slow, tests)
        if found is not None and (best is None or found[1] < best[1]):
            best = (*found, slow)
    if best is None or best[1] >= ps.FALSE_ALARM_RATE:
        return None
    (period, phase, width, _, _, positions), p, slow = best
    at = slow & ((numbers - phase) % period < width)
    lost = float(np.sum(seconds[at] - typical))
    total = float(seconds.sum())
    if lost < ps.MIN_LOST_SHARE * total:
        return None
    return ps.PeriodicStall(period, phase, tuple(int(s) for s in numbers[at]), positions,
                            typical, lost, total, p, width)


# --- seeded runs ------------------------------------------------------------------------


def seeded_run(seed: int, n_max: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    """Step numbers (from a random start, some missing) and seconds: noise of one of
    several kinds, with a planted period (stalls that may wander by a step or be missed)
    in most runs."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(12, n_max))
    start = int(rng.integers(0, 1_000_000)) if seed % 4 else 1
    numbers = np.arange(start, start + n)
    noise = seed % 5
    if noise == 0:
        t = 0.010 * rng.lognormal(0.0, 0.05, n)
    elif noise == 1:
        t = 0.010 * rng.lognormal(0.0, 0.4, n)
    elif noise == 2:
        t = 0.010 * (1 + rng.pareto(2.0, n))
    elif noise == 3:  # bursty: 15% of steps 3x
        t = 0.010 * np.where(rng.random(n) < 0.15, 3.0, 1.0) * rng.lognormal(0, 0.05, n)
    else:  # a clock of 1 ms: many equal times, levels with the same slow steps
        t = np.round(0.004 * rng.lognormal(0.0, 0.3, n), 3) + 0.001
    if seed % 7:
        period = int(rng.integers(2, max(3, n // 4)))
        phase = int(rng.integers(0, period))
        at = numbers[(numbers % period) == phase]
        if seed % 3 == 0:  # wander by a step, round by round
            at = at + rng.integers(0, 2, at.size)
        at = at[rng.random(at.size) < (0.8 if seed % 2 else 1.0)]  # some rounds on time
        t[np.isin(numbers, at)] += 0.010 * float(rng.choice([0.6, 2.5, 20.0]))
    if seed % 3 == 1:  # a few steps missing: recompiles, a block left out
        keep = rng.random(n) > 0.02
        if n > 100:
            a = int(rng.integers(0, n - 50))
            keep[a:a + int(rng.integers(1, 40))] = False
        keep[0] = keep[-1] = True
        numbers, t = numbers[keep], t[keep]
    return numbers, t


def candidate_rows(found: ps._Candidates) -> list[Row]:
    return [(c.period, c.phase, c.width, c.hits, c.draws, c.positions)
            for c in (found.at(i) for i in range(len(found)))]


def assert_same_stall(got: ps.PeriodicStall | None, want: ps.PeriodicStall | None) -> None:
    if want is None:
        assert got is None
        return
    assert got is not None
    assert (got.period, got.phase, got.width, got.stall_steps, got.positions) == \
        (want.period, want.phase, want.width, want.stall_steps, want.positions)
    assert (got.typical_s, got.lost_s, got.looked_at_s) == \
        (want.typical_s, want.lost_s, want.looked_at_s)
    assert got.p_value == pytest.approx(want.p_value, rel=1e-9, abs=0)


@pytest.mark.parametrize("seed", range(120))
def test_candidates_p_values_and_stall_match_the_reference(seed: int) -> None:
    numbers, t = seeded_run(seed)
    typical = float(np.quantile(t, ps.TYPICAL_QUANTILE))
    tests = ps._tests(numbers.size) * len(ps.STALL_RATIOS)
    for ratio in ps.STALL_RATIOS:
        slow = t >= ratio * typical
        want = ref_candidates(numbers, slow)
        got = ps._candidates(numbers, slow)
        assert candidate_rows(got) == want
        if want:
            k = int(slow.sum())
            np.testing.assert_allclose(
                ps.hypergeom_tail(got.hits, numbers.size, k, got.draws),
                ref_hypergeom_tail(np.array([c[3] for c in want]), numbers.size, k,
                                   np.array([c[4] for c in want])), rtol=1e-9, atol=0)
        best, ref = ps._best_at(numbers, slow, tests), ref_best_at(numbers, slow, tests)
        if ref is None:
            assert best is None
        else:
            assert best is not None
            c = best[0]
            assert (c.period, c.phase, c.width, c.hits, c.draws, c.positions) == ref[0]
            assert best[1] == pytest.approx(ref[1], rel=1e-9, abs=0)
    assert_same_stall(ps.find_periodic_stall(numbers, t), ref_find(numbers, t))


@pytest.mark.parametrize("seed", range(4))
def test_long_runs_with_gaps_match_the_reference(seed: int) -> None:
    # periods up to a few thousand, as on a Monitor's 10,000 kept steps
    numbers, t = seeded_run(1000 + 3 * seed, n_max=12_000)  # seeds 1 mod 3: with gaps
    assert_same_stall(ps.find_periodic_stall(numbers, t), ref_find(numbers, t))


@pytest.mark.parametrize("chunk", [1, 7, 100])
def test_small_chunks_give_the_same_candidates(chunk: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ps, "CHUNK_ELEMENTS", chunk)
    for seed in range(10):
        numbers, t = seeded_run(seed, n_max=400)
        slow = t >= 1.5 * float(np.quantile(t, ps.TYPICAL_QUANTILE))
        assert candidate_rows(ps._candidates(numbers, slow)) == ref_candidates(numbers, slow)


def test_stalls_either_side_of_the_wrap_are_one_pair() -> None:
    # stalls at phases P - 1 and 0 (the pair wraps), and at isolated phases around them
    numbers = np.arange(1, 301)
    for period, extra in ((10, [5]), (7, []), (12, [1, 2])):
        for wander in range(3):
            slow = np.isin(numbers % period, [period - 1, 0]) & (numbers % 3 != wander)
            slow |= np.isin(numbers, [period * 4 + e for e in extra])
            assert candidate_rows(ps._candidates(numbers, slow)) == \
                ref_candidates(numbers, slow)


def ref_modes(values: np.ndarray, period: int) -> tuple[int, int, int, int]:
    hits = np.bincount(values % period, minlength=period)
    pairs = hits + np.roll(hits, -1)
    return (int(hits.max()), int(np.argmax(hits)), int(pairs.max()), int(np.argmax(pairs)))


@pytest.mark.parametrize("offset", [0, 123_456_789_012])
def test_modes_match_argmax_over_the_phases(offset: int) -> None:
    # far apart values take 64-bit phases; close ones 32-bit
    rng = np.random.default_rng(5)
    for spread in (50, 3000, 2**33 if offset else 10**6):
        values = np.unique(rng.integers(0, spread, 40)) + offset
        periods = np.arange(2, 400)
        got = np.stack(ps._modes(values, periods), axis=1)
        want = np.array([ref_modes(values, int(p)) for p in periods])
        assert (got[:, :2] == want[:, :2]).all()
        assert (got[1:, 2:] == want[1:, 2:]).all()  # a pair: from period 3 on


def test_hypergeometric_tails_match_the_reference() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        population = int(rng.integers(2, 60_000))
        successes = int(rng.integers(0, population + 1))
        draws = rng.integers(1, min(population, 3 * ps.EXACT_MAX_DRAWS) + 1, 50)
        hits = np.minimum(draws + 2, rng.integers(0, 12, 50) + (draws * successes) // population)
        np.testing.assert_allclose(ps.hypergeom_tail(hits, population, successes, draws),
                                   ref_hypergeom_tail(hits, population, successes, draws),
                                   rtol=1e-9, atol=0)
    empty = np.zeros(0, dtype=np.int64)
    assert ps.hypergeom_tail(empty, 10, 3, empty).shape == (0,)
