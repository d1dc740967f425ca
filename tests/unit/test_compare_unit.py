"""compare's pure parts on hand-built inputs: warm-up, sync findings, drift, the report."""

from __future__ import annotations

import pytest

from pipecheck.analysis.verdict import COMPUTE_BOUND, FORCED_SYNC, INPUT_BOUND, Verdict
from pipecheck.compare import (
    batches_for,
    drift_warning,
    recommendation_for,
    sync_findings,
    tag_warmup,
    user_sync_share,
    warmup_steps,
)
from pipecheck.measure.loop import steady_state
from pipecheck.records.common import CompileInfo, Distribution, Finding, StepRecord, SyncSite
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.report.compare import format_compare

USER = SyncSite("/home/me/train.py:88", "train", "float(loss)", seconds=2.0, samples=600,
                internal=False)
OURS = SyncSite("/x/pipecheck/measure/loop.py:34", "read_scalar", "float(x)", seconds=5.0,
                samples=900, internal=True)


def test_warmup_steps_are_kept_out_of_the_steady_state():
    steps = [StepRecord(i, 0.01 if 0 < i < 5 else 0.05) for i in range(12)]
    tagged = tag_warmup(steps, warmup_steps(workers=2, per_worker_buffer=2))
    steady = steady_state(tagged)
    assert [s.step for s in steady] == list(range(5, 12))
    assert all(s.time_s == 0.05 for s in steady)
    assert tagged[0].tags == () and tagged[4].tags == ("warmup",)


def test_loader_time_leaves_out_the_start_up_buffer():
    from pipecheck.compare import loader_time

    # 2 workers buffer 4 batches while starting, which then arrive at once
    samples = [0.0001] * 4 + [0.030] * 16
    s = LoaderSetting(workers=2, threads=1, first_batch_s=1.0,
                      batch_time=Distribution.of(samples), batches_per_s=0.0,
                      examples_per_s=0.0)
    assert loader_time(s) == pytest.approx(0.030)
    short = LoaderSetting(workers=2, threads=1, first_batch_s=1.0,
                          batch_time=Distribution.of(samples[:6]), batches_per_s=0.0,
                          examples_per_s=0.0)
    assert loader_time(short) == pytest.approx(sum(samples[:6]) / 6)  # too few to drop any


def test_batches_cover_the_start_up_buffer():
    assert batches_for(0, 30) == 30
    assert batches_for(8, 30) == 64  # 4 x 8 workers x 2 buffered


def test_user_sync_share_ignores_pipecheck_and_counts_per_step():
    assert user_sync_share([USER, OURS], n_steps=100, real_median_s=0.05) == pytest.approx(0.4)


def test_sync_findings_forced_or_harmless_by_verdict():
    forced = Verdict(FORCED_SYNC, "r", 0.7)
    (f,) = sync_findings([USER, OURS], 100, 0.05, forced)
    assert f.kind == "forced-sync" and f.location == USER.location
    assert f.numbers["seconds_per_step"] == pytest.approx(0.02)
    assert f.numbers["share_of_step"] == pytest.approx(0.4)
    assert "train.py:88 (float(loss)) waits 20.0 ms per step, about 40%" in f.message
    (h,) = sync_findings([USER], 100, 0.05, Verdict(INPUT_BOUND, "r", 0.0))
    assert h.kind == "harmless-sync" and "harmless here: the run is input-bound" in h.message
    tiny = SyncSite("/a.py:1", "f", "x.item()", seconds=0.05, samples=10, internal=False)
    assert sync_findings([tiny], 100, 0.05, forced) == []  # 1% of a step: not worth naming


def test_recommendations_say_what_to_do():
    sync = Finding("forced-sync", "forced sync at train.py:88 ...", location="/t.py:88")
    assert "Log the previous step's loss" in recommendation_for(
        Verdict(FORCED_SYNC, "r", 0.5), 0, [sync], True)
    fixed = Verdict(INPUT_BOUND, "r", 0.0, fixed_by_tuning=True)
    assert recommendation_for(fixed, 4, [], True).startswith("use 4 Grain workers")
    assert "preprocess offline" in recommendation_for(Verdict(INPUT_BOUND, "r", 0.0), 2, [],
                                                      False)
    assert "speed up the model step" in recommendation_for(Verdict(COMPUTE_BOUND, "r", 0.0),
                                                           0, [], True)


def test_drift_is_reported_beyond_the_tolerance():
    assert drift_warning([0.05] * 10, [0.052] * 10) is None
    w = drift_warning([0.05] * 10, [0.04] * 10)
    assert w is not None and "drifted by -20%" in w


def setting(workers, mean_ms, first_s=1.0):
    samples = [mean_ms / 1000.0] * 10
    return LoaderSetting(workers=workers, threads=1, first_batch_s=first_s,
                         batch_time=Distribution.of(samples), batches_per_s=1000.0 / mean_ms,
                         examples_per_s=32000.0 / mean_ms, examples_per_batch=32)


def make_compare():
    loader = (setting(0, 120.0, 0.12), setting(1, 120.0), setting(4, 30.0, 2.0),
              setting(3, 40.0, 1.5))
    return CompareResult(
        env={}, config={"workload": "calibrated"},
        target_step_s=0.040, target=Distribution.of([0.040] * 20),
        loader=loader, chosen_workers=4, chosen_threads=1, loader_step_s=0.030,
        real_step_s=0.041, real=Distribution.of([0.041] * 20),
        verdict=INPUT_BOUND, verdict_reason="input-bound as loaded at first",
        findings=(Finding("input-bound", "0 worker(s) give 120.0 ms/batch", fix="use 4"),),
        recommendation="use 4 Grain workers",
        tuning={"meets_target": True, "scaling": "latency-bound", "target_s": 0.040,
                "stop_reason": "4 workers meet the target with headroom"},
        breakdown={"data_wait": 0.001, "sync": 0.039, "other": 0.001},
        compile=CompileInfo(1.0, 0.9, 1), sources={"target": "measured", "loader": "measured",
                                                   "real": "measured"},
    )


EXPECTED = """\
pipecheck compare: INPUT-BOUND
input-bound as loaded at first

measurement                      statistic    value    95% CI              n    source
-------------------------------  -----------  -------  ------------------  ---  --------
target step T (compute alone)    median       40.0 ms  40.0 ms .. 40.0 ms  20   measured
loader D (4 workers, 1 threads)  mean         30.0 ms  30.0 ms .. 30.0 ms  10   measured
real-data step R                 median       41.0 ms  41.0 ms .. 41.0 ms  20   measured

loader settings tried (goal: D <= 36.0 ms, 90% of T as measured before the search)
search: 4 workers meet the target with headroom
workers    threads    first batch    mean/batch    median    p90       meets goal
---------  ---------  -------------  ------------  --------  --------  ------------  ---------
0          1          120.0 ms       120.0 ms      120.0 ms  120.0 ms  no
1          1          1.00 s         120.0 ms      120.0 ms  120.0 ms  no
4          1          2.00 s         30.0 ms       30.0 ms   30.0 ms   yes           <- chosen
3          1          1.50 s         40.0 ms       40.0 ms   40.0 ms   no
pipeline scaling: latency-bound

host time per real-data step (steady state):
span       per step    share
---------  ----------  -------
data_wait  1.00 ms     2%
sync       39.0 ms     95%
other      1.00 ms     2%

findings:
- input-bound: 0 worker(s) give 120.0 ms/batch
  fix: use 4

recommendation: use 4 Grain workers"""


def test_compare_report_exact():
    assert format_compare(make_compare()) == EXPECTED


def test_compare_record_round_trips_with_its_loader_settings():
    r = make_compare()
    assert CompareResult.from_dict(r.to_dict()) == r
