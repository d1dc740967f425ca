"""compare's findings and recommendation on hand-built inputs."""

from __future__ import annotations

import pytest

from pipecheck.analysis.loader.findings import (
    loader_findings,
    recommendation_for,
    sync_findings,
    user_sync_share,
)
from pipecheck.analysis.loader.tuner import Trial, TuningOutcome
from pipecheck.analysis.steady_state import loader_estimate
from pipecheck.analysis.verdict import COMPUTE_BOUND, FORCED_SYNC, INPUT_BOUND, Verdict
from pipecheck.records.common import Distribution, Finding, SyncSite
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings

USER = SyncSite("/home/me/train.py:88", "train", "float(loss)", seconds=2.0, samples=600,
                internal=False)
OURS = SyncSite("/x/pipecheck/measure/loop.py:34", "read_scalar", "float(x)", seconds=5.0,
                samples=900, internal=True)


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


def setting(workers, mean_ms):
    samples = [mean_ms / 1000.0] * 10
    return LoaderSetting(settings=GrainSettings(workers=workers, threads=1), first_batch_s=1.0,
                         batch_time=Distribution.of(samples), batches_per_s=1000.0 / mean_ms,
                         examples_per_s=32000.0 / mean_ms,
                         loader_time=loader_estimate(samples, workers, 2))


@pytest.mark.parametrize("stop, scaling, fix", [
    ("fixed", "latency-bound", "let pipecheck search the worker count"),
    ("ceiling", "latency-bound", "raise --max-workers"),
    ("no-gain", "cpu-bound", "preprocess offline (tokenize and pack once"),
])
def test_a_loader_no_setting_fixes_gets_the_fix_its_search_outcome_calls_for(stop, scaling, fix):
    slow = [setting(1, 120.0), setting(2, 80.0)]
    trials = tuple(Trial(s.settings, s.loader_time.value) for s in slow)
    tuning = TuningOutcome(trials, trials[1], False, scaling, stop, "any words at all")
    (f,) = loader_findings(slow, slow[1], tuning, 0.040, Verdict(INPUT_BOUND, "r", 0.0))
    assert f.kind == "input-bound" and f.fix is not None and f.fix.startswith(fix)
    assert "the fastest, 2 worker(s), gives 80.0 ms/batch" in f.message
