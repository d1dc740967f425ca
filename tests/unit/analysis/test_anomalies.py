"""The anomaly rule: which steps are far from the steady state, and their likely cause."""

from __future__ import annotations

import numpy as np
import pytest

from pipecheck.analysis import anomalies
from pipecheck.analysis.anomalies import Flag, flag_outliers
from pipecheck.analysis.steady_state import (
    STEADY_STATE_EXCLUDED_TAGS,
    steady_state,
    with_anomalies,
)
from pipecheck.records.common import StepRecord
from tests.unit.step_tables import table


def test_no_flags_in_a_steady_series():
    flags, med = flag_outliers([0.50, 0.51, 0.49, 0.50, 0.52, 0.50])
    assert flags == [] and med == 0.50


def test_slow_and_fast_steps_are_flagged_with_their_ratio():
    flags, med = flag_outliers([0.50, 0.51, 0.49, 2.30, 0.10, 0.50, 0.52, 0.50])
    assert med == 0.50
    assert flags == [Flag(3, True, pytest.approx(2.30 / 0.50)),
                     Flag(4, False, pytest.approx(0.10 / 0.50))]


def test_a_blip_below_the_ratio_is_not_flagged_however_steady_the_series():
    # MAD is tiny, so the z-score alone would flag 0.9 s; it is under SLOW_STEP_RATIO
    xs = [0.500, 0.500, 0.501, 0.500, 0.90, 0.500]
    assert flag_outliers(xs)[0] == []
    # at the ratio it is flagged, with a MAD of zero too
    assert [f.index for f in flag_outliers([1.0, 1.0, 1.0, 1.0, 2.0])[0]] == [4]


def test_a_bursty_series_keeps_its_slow_half():
    # an input-bound loop whose workers deliver in bursts: 2.5x steps are its nature
    xs = [0.1, 0.25, 0.1, 0.1, 0.25, 0.1, 0.25, 0.1, 0.25, 0.1, 0.1, 0.25]
    assert flag_outliers(xs)[0] == []
    # the same in a noisy run (a MAD above zero, still small against the bursts)
    noisy = [x * (1 + 0.01 * (i % 3)) for i, x in enumerate(xs)]
    assert flag_outliers(noisy)[0] == []
    # one stall among 12 steps is rare enough to be an anomaly; a fifth of them is not
    assert [f.index for f in flag_outliers([0.1] * 11 + [0.3])[0]] == [11]
    assert flag_outliers([0.1] * 7 + [0.3] * 3)[0] == []


def test_too_few_samples_flag_nothing():
    assert flag_outliers([1.0, 9.0]) == ([], 5.0)
    assert flag_outliers([])[0] == []


def test_thresholds_are_the_named_constants():
    med = 0.5
    base = [med] * 9
    just_slow = base + [anomalies.SLOW_STEP_RATIO * med]
    just_fast = base + [anomalies.FAST_STEP_RATIO * med]
    assert [f.slow for f in flag_outliers(just_slow)[0]] == [True]
    assert [f.slow for f in flag_outliers(just_fast)[0]] == [False]
    assert flag_outliers(base + [anomalies.SLOW_STEP_RATIO * med * 0.99])[0] == []
    assert flag_outliers(base + [anomalies.FAST_STEP_RATIO * med * 1.01])[0] == []


def step(i, t, tags=(), **spans):
    spans.setdefault("sync", t - sum(spans.values()))
    return StepRecord(i, t, tuple(tags), spans)


def nnx_like_run():
    """Step 0 compiles; step 5 runs an eager generation outside any span (3 s, with small
    eager functions compiling); step 6 is then fast (its device work was done during the
    generation); step 9 checkpoints; the last step drains."""
    steps = [step(0, 2.0, ("compile",), dispatch=1.9)]
    steps += [step(i, 0.02, data_wait=0.001, dispatch=0.0005) for i in range(1, 5)]
    steps.append(step(5, 3.0, data_wait=0.001, dispatch=0.0005, other=2.98))
    steps.append(step(6, 0.002, data_wait=0.001, dispatch=0.0005))
    steps += [step(i, 0.021, data_wait=0.001, dispatch=0.0005) for i in (7, 8)]
    steps.append(step(9, 0.5, ("checkpoint",), checkpoint=0.48))
    steps += [step(i, 0.019, data_wait=0.001, dispatch=0.0005) for i in (10, 11, 12)]
    steps.append(step(13, 0.02, ("drain",)))
    return table(steps)


COMPILES = {0: {"jit(train_step)": 1.8},
            5: {"jit(broadcast_in_dim)": 0.01, "jit(_where)": 0.02, "jit(generate)": 0.1}}


def test_slow_steps_are_listed_with_their_likely_cause():
    found = anomalies.step_anomalies(nnx_like_run(), STEADY_STATE_EXCLUDED_TAGS, COMPILES)
    assert [(a.step, a.cause) for a in found] == [
        (0, "compilation"), (5, "host work outside spans"), (6, "attribution shift"),
        (9, "checkpoint")]
    by = {a.step: a for a in found}
    assert by[5].ratio == pytest.approx(3.0 / 0.02)
    assert by[5].evidence == (
        "host work outside spans 2.98 s of the step's 3.00 s (99%; typical 0.0 ms); "
        "compiled during the step: jit(generate) 100.0 ms, jit(_where) 20.0 ms, "
        "jit(broadcast_in_dim) 10.0 ms")
    assert by[0].evidence.startswith("dispatch 1.90 s of the step's 2.00 s")
    assert "compiled during the step: jit(train_step) 1.80 s" in by[0].evidence
    assert "after slow step 5" in by[6].evidence
    assert by[9].evidence.startswith("checkpoint 480.0 ms of the step's 500.0 ms")


def test_compilation_is_the_cause_when_it_holds_most_of_the_extra_time():
    steps = [step(i, 0.02, dispatch=0.001) for i in range(10)]
    steps[4] = step(4, 1.0, other=0.98)
    cause, evidence = anomalies.explain_step(steps[4], {"other": 0.0}, 0.02,
                                             {"jit(generate)": 0.6})
    assert cause == "compilation"
    assert evidence.endswith("compiled during the step: jit(generate) 600.0 ms")
    # under COMPILE_CAUSE_SHARE of the extra time, compilation only contributed
    cause, _ = anomalies.explain_step(steps[4], {"other": 0.0}, 0.02, {"jit(generate)": 0.3})
    assert cause == "host work outside spans"


def test_user_span_and_gc_causes():
    typical = {"sync": 0.02, "gc": 0.0, "tokenize": 0.001}
    gc_step = step(3, 0.3, gc=0.27, sync=0.02)
    assert anomalies.explain_step(gc_step, typical, 0.02)[0] == "garbage collection"
    user = step(4, 0.3, tokenize=0.28, sync=0.02)
    assert anomalies.explain_step(user, typical, 0.02)[0] == "span 'tokenize'"
    assert anomalies.explain_step(step(5, 0.3, sync=0.3), typical, 0.02)[0] == (
        "waiting for the device")
    bare = StepRecord(6, 0.3)  # no spans (an imported log): nothing to go on
    assert anomalies.explain_step(bare, {}, 0.02) == (
        "unexplained", "no span or compile event accounts for it")


def test_steady_state_leaves_anomalies_out_and_is_stable_on_tagged_records():
    steps = nnx_like_run()
    steady = [s.step for s in steady_state(steps)]
    assert steady == [1, 2, 3, 4, 7, 8, 10, 11, 12]
    tagged, found = with_anomalies(steps, COMPILES)
    assert {s.step: s.tags for s in tagged if s.tags} == {
        0: ("compile",), 5: ("slow",), 6: ("attribution_shift",), 9: ("checkpoint",),
        13: ("drain",)}
    # read back with its anomaly tags, a record has the same steady state
    assert [s.step for s in steady_state(tagged)] == steady
    assert with_anomalies(tagged, COMPILES) == (tagged, found)


def test_a_fast_step_alone_is_unexplained():
    steps = table(step(i, 0.004 if i == 4 else 0.02) for i in range(10))
    found = anomalies.step_anomalies(steps, STEADY_STATE_EXCLUDED_TAGS)
    assert [(a.step, a.cause) for a in found] == [(4, "unexplained")]
    assert found[0].evidence == "implausibly fast, and the step before it was not slow"


def test_compile_events_land_in_the_step_they_ended_in():
    marks = [10.0, 11.0, 12.0, 13.0]  # marks 5..8: steps 5, 6, 7
    events = [("jit(a)", 9.5, 0.1),    # before the first kept mark: dropped
              ("jit(a)", 10.5, 0.2), ("jit(b)", 10.7, 0.05), ("jit(a)", 11.0, 0.1),
              ("jit(c)", 12.5, 0.3),
              ("jit(d)", 13.5, 1.0)]   # after the last mark: dropped
    assert anomalies.compiles_by_step(events, marks, first_mark=5) == {
        5: {"jit(a)": pytest.approx(0.3), "jit(b)": 0.05}, 7: {"jit(c)": 0.3}}


def test_compile_text_names_the_costliest_first():
    text = anomalies.compile_text({"jit(a)": 0.001, "jit(b)": 1.5, "jit(c)": 0.2,
                                   "jit(d)": 0.01})
    assert text == "jit(b) 1.50 s, jit(c) 200.0 ms, jit(d) 10.0 ms (+1 more)"


def test_the_run_of_fast_steps_after_a_slow_one_is_an_attribution_shift():
    # a 1 s stall while the loader kept filling its buffer: the next three steps are served
    # from it; then the loop is back to normal, and a later fast step is not excused
    times = [0.1] * 6 + [1.0, 0.01, 0.02, 0.01, 0.1] + [0.1] * 20 + [0.01] + [0.1] * 3
    steps = table(step(i, t) for i, t in enumerate(times))
    found = anomalies.step_anomalies(steps, STEADY_STATE_EXCLUDED_TAGS)
    assert [(a.step, a.cause) for a in found] == [
        (6, "waiting for the device"), (7, "attribution shift"), (8, "attribution shift"),
        (9, "attribution shift"), (31, "unexplained")]
    assert found[1].evidence.startswith("fast right after slow step 6:")
    assert found[2].evidence.startswith("fast in the run of fast steps after slow step 6:")


def test_an_isolated_stall_is_an_anomaly_whatever_the_share_of_slow_steps():
    # the real v6e run: two of nine steps slow (22%), but a 126x stall and a 7x one are
    # not a pattern; the fast step right after the 7x one was charged less than its share
    times = [1.583, 0.041, 0.408, 0.235, 0.229, 0.460, 29.642, 0.234, 0.230]
    flags, med = flag_outliers(times)
    assert [(f.index, f.slow) for f in flags] == [(0, True), (1, False), (6, True)]
    assert med == pytest.approx(0.2345)


def test_a_burst_pattern_is_not_an_anomaly_on_10_steps_or_on_a_million():
    # an input-bound loop fed by 3 workers: every third step waits for the next burst
    short = [0.1, 0.1, 0.32] * 3 + [0.1]
    assert flag_outliers(short)[0] == []
    rng = np.random.default_rng(0)
    n = 1_000_000
    long = np.where(np.arange(n) % 3 == 2, 0.32, 0.1) * rng.uniform(0.9, 1.1, n)
    assert flag_outliers(long)[0] == []
    # one stall inside either pattern stands alone at its level: flagged, only it
    long[500_000] = 12.6
    assert [f.index for f in flag_outliers(long)[0]] == [500_000]
    stalled = short[:5] + [12.6] + short[6:]
    assert [f.index for f in flag_outliers(stalled)[0]] == [5]


def test_the_run_of_below_median_steps_after_a_compile_step_is_an_attribution_shift():
    # the real Gemma log: steps 1-2 are short after the compile step, step 2 at 0.50x
    times = [31.731, 0.277, 0.215, 0.434, 0.434, 0.434, 0.443, 0.443, 0.439, 0.440]
    steps = table(step(i, t) for i, t in enumerate(times))
    found = anomalies.step_anomalies(steps, STEADY_STATE_EXCLUDED_TAGS)
    assert [a.step for a in found] == [0, 2]
    assert found[1].cause == "attribution shift"
    assert found[1].evidence.startswith("fast in the run of fast steps after slow step 0:")


def test_a_blip_of_a_loaded_machine_in_a_short_run_is_not_isolated_enough():
    # four steady steps, one 2.5x on a busy machine: over the share, and below
    # ISOLATED_RATIO, so the run keeps it (a 4x one would not be kept)
    assert flag_outliers([0.10, 0.25, 0.10, 0.11])[0] == []
    assert [f.index for f in flag_outliers([0.10, 0.45, 0.10, 0.11])[0]] == [1]


def _bursty(bursts: int = 4, normal: int = 7) -> tuple[list[float], list[float]]:
    """A loop fed in bursts: a step that waits 7.9 ms of its 8 ms for its batch, two whose
    batches were then ready (0.2 ms, no wait), and ``normal`` 1 ms steps whose batch came
    just in time (0.3 ms wait); seconds."""
    times: list[float] = []
    waits: list[float] = []
    for _ in range(bursts):
        times += [8e-3, 0.2e-3, 0.2e-3] + [1e-3 * (1 + 0.02 * (i % 3)) for i in range(normal)]
        waits += [7.9e-3, 0.0, 0.0] + [0.3e-3] * normal
    return times, waits


def test_ready_batches_are_the_fast_steps_after_an_input_wait():
    times, waits = _bursty(bursts=1)
    med = float(np.median(times))
    ready = anomalies.ready_batches(np.array(times), np.array(waits), med)
    assert np.flatnonzero(ready).tolist() == [1, 2]
    # the step before waited less than INPUT_WAIT_SHARE of its time: not ready batches
    short_wait = [anomalies.INPUT_WAIT_SHARE * 0.99 * 8e-3, *waits[1:]]
    assert not anomalies.ready_batches(np.array(times), np.array(short_wait), med).any()
    # a fast step that itself waited half its time did not find its batch ready
    own_wait = [waits[0], anomalies.INPUT_WAIT_SHARE * 0.2e-3, *waits[2:]]
    assert np.flatnonzero(anomalies.ready_batches(np.array(times), np.array(own_wait),
                                                  med)).tolist() == [2]


def test_ready_batches_after_an_input_wait_are_not_anomalies():
    times, waits = _bursty()
    flags, med = flag_outliers(times, waits)
    # the waits (4 of 40) are rare and far: anomalies; the ready batches after them are not
    assert [f.index for f in flags] == [0, 10, 20, 30] and all(f.slow for f in flags)
    assert med == pytest.approx(float(np.median([t for i, t in enumerate(times)
                                                 if i % 10])))
    # without the waits, the same fast steps read as charged less than their share
    blind = [f.index for f in flag_outliers(times)[0]]
    assert blind == [i + k for i in (0, 10, 20, 30) for k in (0, 1, 2)]


def test_ready_batches_stay_in_the_steady_state_of_step_records():
    times, waits = _bursty()
    steps = [StepRecord(0, 1.0, spans={"data_wait": 0.9})] + [
        StepRecord(i + 1, t, spans={"data_wait": w, "dispatch": t - w})
        for i, (t, w) in enumerate(zip(times, waits, strict=True))]
    steps = table(steps)
    steady = [s.step for s in steady_state(steps)]
    waited = [1, 11, 21, 31]
    assert steady == [s.step for s in steps[1:] if s.step not in waited]
    _, found = with_anomalies(steps)
    assert [(a.step, a.cause) for a in found] == [(0, "input wait")] + [
        (i, "input wait") for i in waited]


def test_a_burst_pattern_whose_waits_vary_is_one_level_whatever_their_z_score():
    # a quarter of the steps wait 4-5.4x the median for their batch (four workers' batches,
    # one wait each): the pattern of the run, none an anomaly, though the slower waits alone
    # pass the z-score and the faster ones do not
    waits = [14.0, 15.0, 16.0, 17.0, 18.0, 19.0]
    xs: list[float] = []
    for i in range(48):
        xs += [waits[i % len(waits)], 2.0, 0.3, 5.0]
    waited = [x if x in waits else 0.0 for x in xs]
    flags, med = flag_outliers(xs, waited)
    assert med == 3.5
    mad = float(np.median(np.abs(np.array(xs) - med)))
    assert 0.6745 * (19.0 - med) / mad > anomalies.ROBUST_Z > 0.6745 * (14.0 - med) / mad
    assert flags == []
    # the same times without their waits: the slower steps are rare enough to be flagged
    assert {xs[f.index] for f in flag_outliers(xs)[0] if f.slow} == {16.0, 17.0, 18.0, 19.0}


def test_the_batches_buffered_while_the_workers_started_are_ready_not_shifted():
    # step 0 waits 1.5 s for the workers (kept out of the steady state by design); steps
    # 1-3 take the batches they buffered meanwhile; then the loop runs at 16 ms a step
    steps = [StepRecord(0, 1.7, spans={"data_wait": 1.5, "dispatch": 0.2})]
    steps += [StepRecord(i, 0.004, spans={"data_wait": 0.0001}) for i in (1, 2, 3)]
    steps += [StepRecord(i, 0.016 * (1 + 0.01 * (i % 3)), spans={"data_wait": 0.001})
              for i in range(4, 40)]
    steps = table(steps)
    steady = [s.step for s in steady_state(steps)]
    assert steady == list(range(1, 40))
    _, found = with_anomalies(steps)
    assert [(a.step, a.cause) for a in found] == [(0, "input wait")]
    # a slow step 0 that did not wait for its batch (it compiled): its fast followers
    # were charged less than their share, as before
    compiled = table([StepRecord(0, 1.7, ("compile",), {"data_wait": 0.001, "dispatch": 1.7}),
                      *steps[1:]])
    _, found = with_anomalies(compiled)
    assert [a.cause for a in found] == ["compilation"] + ["attribution shift"] * 3
