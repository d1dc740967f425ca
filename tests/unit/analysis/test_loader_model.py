"""The loader model: fitted to measured settings (simulated pipelines from grain_sim, whose
cost rules were written for the tuner, not for this model; and real dataloader records
in tests/data/whatif/), predicting settings it did not see."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from pipecheck.analysis.loader import loader_model as lm
from pipecheck.analysis.loader.whatif import stage_what_if
from pipecheck.analysis.steady_state import loader_estimate
from pipecheck.records import store
from pipecheck.records.base import from_dict
from pipecheck.records.common import Distribution
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting, Resources
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.whatif import WhatIfSetting

from .grain_sim import SimPipeline

REAL = Path(__file__).parents[2] / "data" / "whatif"


def measured(sim: SimPipeline, g: GrainSettings, jitter: float = 0.02,
             batches: int = 60) -> LoaderSetting:
    """A setting as pipecheck records it: per-batch times around the simulated D (a
    deterministic +-``jitter`` wobble), CPU seconds as the costs say (the transforms' CPU in
    the workers, the consumer's in the training process)."""
    d = sim.batch_s(g)
    samples = [d * (1 + jitter * math.sin(1.7 * i)) for i in range(batches)]
    wall = sum(samples)
    workers_cpu = sim.cpu_s * batches if g.workers else 0.0
    main_cpu = sim.consumer_s * batches + (0.0 if g.workers else sim.cpu_s * batches)
    r = Resources(batches=batches, wall_s=wall, main_cpu_s=main_cpu, worker_cpu_s=workers_cpu,
                  workers_seen=g.workers, main_rss_mb=300.0,
                  worker_rss_mb=200.0 if g.workers else 0.0,
                  workers_rss_mb=200.0 * g.workers)
    dist = Distribution.of(samples)
    return LoaderSetting(settings=g, first_batch_s=0.5, batch_time=dist,
                         batches_per_s=1 / d, examples_per_s=0.0, resources=r,
                         loader_time=loader_estimate(dist.samples_s, g.workers,
                                                     g.per_worker_buffer))


def at(workers: int, threads: int = 1) -> GrainSettings:
    return GrainSettings(workers=workers, threads=threads)


def relative_error(model, sim, g, cores=2):
    p = lm.predict_loader(model, g, cores).interval.value
    return abs(p - sim.batch_s(g)) / sim.batch_s(g)


def test_latency_fitted_from_three_worker_counts_predicts_more_workers():
    sim = SimPipeline(sleep_s=0.040, cpu_s=0.002, consumer_s=0.001)
    model = lm.fit_loader_model([measured(sim, at(w)) for w in (1, 2, 3)], cores=2)
    assert model.latency_s == pytest.approx(0.040, rel=0.1)
    for w in (4, 6, 8):  # workers past the cores keep helping a sleeping transform
        assert relative_error(model, sim, at(w)) < 0.10, w
    p = lm.predict_loader(model, at(8), 2)
    assert p.binding == lm.TRANSFORMS  # no stage timing recorded: the transforms
    assert p.extrapolated and p.interval.low < p.interval.value < p.interval.high


def test_cpu_bound_pipeline_stops_at_the_cores_and_names_them():
    sim = SimPipeline(cpu_s=0.012, consumer_s=0.0005)
    model = lm.fit_loader_model([measured(sim, at(w)) for w in (0, 1, 2)], cores=2)
    p4 = lm.predict_loader(model, at(4), 2)
    assert p4.binding == lm.CPU_CORES
    assert relative_error(model, sim, at(4)) < 0.10
    # on 8 cores the same 4 workers are predicted twice as fast: the cores bound it
    p4_on_8 = lm.predict_loader(model, at(4), 8)
    assert p4_on_8.interval.value < 0.6 * p4.interval.value


def test_consumer_work_binds_the_training_process():
    sim = SimPipeline(sleep_s=0.020, consumer_s=0.008)
    model = lm.fit_loader_model([measured(sim, at(w)) for w in (1, 2, 3)], cores=2)
    p = lm.predict_loader(model, at(6), 2)
    assert p.binding == lm.MAIN_PROCESS
    assert relative_error(model, sim, at(6)) < 0.10


def test_cores_needed_and_the_cheapest_setting_that_keeps_up():
    sim = SimPipeline(cpu_s=0.012, consumer_s=0.0005)
    model = lm.fit_loader_model([measured(sim, at(w)) for w in (0, 1, 2)], cores=2)
    n = lm.cores_needed(model, at(4), goal_s=0.004)
    assert n is not None and n > 2
    assert lm.predict_loader(model, at(4), n).interval.value <= 0.004
    assert lm.predict_loader(model, at(4), n - 1).interval.value > 0.004
    # one worker can never beat its own 12 ms of CPU per batch, whatever the cores
    assert lm.cores_needed(model, at(1), goal_s=0.004) is None
    grid = lm.candidate_settings(8, (1, 2), (1, 2), (1, 2))
    assert lm.cheapest_keeping_up(model, grid, 2, goal_s=0.004) is None  # not on 2 cores
    on_16 = lm.cheapest_keeping_up(model, grid, 16, goal_s=0.004)
    assert on_16 is not None and on_16.workers >= 3


def test_memory_binds_past_the_ram_budget():
    sim = SimPipeline(sleep_s=0.040, cpu_s=0.002)
    model = lm.fit_loader_model([measured(sim, at(w)) for w in (1, 2, 3)], cores=2,
                                ram_budget_mb=1000.0)  # 300 MB + 200 MB per worker
    assert lm.predict_loader(model, at(3), 2).binding != lm.MEMORY
    assert lm.predict_loader(model, at(4), 2).binding == lm.MEMORY


def test_where_prediction_is_not_possible_a_reason_instead_of_a_number():
    sim = SimPipeline(sleep_s=0.040, cpu_s=0.002)
    with pytest.raises(lm.NotPredictable, match="at least 2"):
        lm.fit_loader_model([measured(sim, at(1))], cores=2)
    noisy = [measured(sim, at(w)) for w in (1, 2, 3)]
    noisy = [dataclasses.replace(s, loader_time=dataclasses.replace(
        s.loader_time, low=0.6 * s.loader_time.value, high=1.4 * s.loader_time.value))
        for s in noisy]  # +-40% intervals, as a few batches on a busy machine give
    with pytest.raises(lm.NotPredictable, match="too noisy"):
        lm.fit_loader_model(noisy, cores=2)
    with pytest.raises(lm.NotPredictable, match="no setting with workers"):
        lm.fit_loader_model([measured(sim, at(0, t)) for t in (1, 4)], cores=2)
    # readings no cost structure explains: more workers alternately 4x slower and faster
    wild = [dataclasses.replace(measured(sim, at(w)), loader_time=measured(
        SimPipeline(sleep_s=d), at(1)).loader_time)
            for w, d in ((1, 0.010), (2, 0.040), (3, 0.008), (4, 0.050))]
    with pytest.raises(lm.NotPredictable, match="does not describe"):
        lm.fit_loader_model(wild, cores=2)


def test_the_settings_alone_fit_no_latency_where_there_is_none():
    sim = SimPipeline(cpu_s=0.006)
    model = lm.fit_loader_model([measured(sim, at(w)) for w in (1, 2)], cores=2)
    assert model.latency_s < 0.001


def real_settings(name: str) -> list[LoaderSetting]:
    return list(store.load(REAL / name, expect=DataloaderResult).results)


def test_real_run_three_settings_predict_the_others():
    """A real ``pipecheck dataloader`` run (calibrated: 20 ms of sleep, 3 ms of CPU in the
    transform, 1 ms in the training process; 2 cores, 40 batches per setting). Fitted on
    the settings a tuner measures first (0 and 2 workers with one thread, 1 with 4
    threads), the others, 4 workers with 4 threads aside (16 read threads on 2 cores,
    interval +-58%: that reading is the machine's, not the pipeline's), are predicted
    within 15%; their median error is under 10%."""
    settings = real_settings("dataloader_calibrated_load20_cpu3.json")
    key = {(s.workers, s.threads): s for s in settings}
    seen = [key[(0, 1)], key[(2, 1)], key[(1, 4)]]
    model = lm.fit_loader_model(seen, cores=2)
    errors = []
    for s in settings:
        if s in seen or (s.workers, s.threads) == (4, 4):
            continue
        p = lm.predict_loader(model, s.settings, 2).interval.value
        errors.append(abs(p - s.loader_time.value) / s.loader_time.value)
    assert len(errors) == 4 and max(errors) < 0.15 and sorted(errors)[1] < 0.10, errors
    assert model.stage == "MapMapDataset(transform=CalibratedBatches)"


def twin(name: str) -> tuple[list[LoaderSetting], list[LoaderSetting]]:
    """A pipeline measured with its transform stage and built again without it
    (``benchmarks/stage_whatif_accuracy.py``, each setting's median round of 3)."""
    tables = json.loads((REAL / "stage_twins.json").read_text())

    def table(part: str) -> list[LoaderSetting]:
        return [from_dict(LoaderSetting, d) for d in tables[f"{name}, {part}"]]

    return table("with stage"), table("without stage")


def test_tokenizing_precomputed_predicted_against_the_demo_tokenized_before_the_run():
    """The demo measured as it is (tokenizing each document in its pipeline) and built again
    with every document tokenized before the run (the same source read, no tokenizing
    map), 8 settings each. Fitted to the first, tokenizing taken out, the model predicts the
    second: tokenizing's 1.4 ms per batch by Grain's stage timing, D from 1.9-4.1 ms down to
    1.4-2.5 ms predicted against 0.9-2.2 ms measured (20% off in the median, 52% at worst:
    the workers' CPU per batch fell by more than the stage's timed share, 3.2-4.3 ms to
    1.5-2.3 ms); the tokenizing map binds nothing once it is gone."""
    with_stage, without = twin("demo")
    stage, errors = precomputed_errors(with_stage, without)
    assert stage == "MapMapDataset(transform=TokenizeAndPack(seq_len=128))"
    stage_s = lm.stage_seconds_per_batch(with_stage, stage)
    assert stage_s is not None and 0.001 < stage_s < 0.002
    assert sorted(errors)[len(errors) // 2] < 0.25 and max(errors) < 0.60, errors


def test_the_stage_named_is_the_one_doing_the_work_not_one_waiting_for_the_gil():
    """A real ``pipecheck dataloader`` run of the demo (0, 1 and 2 workers, 1 and 4 read
    threads, 100 batches each). With 4 threads each timed call of the source includes the
    wait for the GIL while another thread tokenizes: the source reads 0.39-0.94 ms per
    element there against 0.16-0.17 ms with one thread, slower than tokenizing at any
    setting. The stage doing the work is tokenizing, at every setting's least time."""
    settings = real_settings("dataloader_demo_threads1_4.json")
    source = "SourceMapDataset(source=IndexedSource)"
    per_element = {(s.workers, s.threads): {st.name: st.avg_s for st in s.stages}
                   for s in settings}
    assert per_element[(2, 4)][source] > 2 * per_element[(2, 1)][source]
    tokenize = "MapMapDataset(transform=TokenizeAndPack(seq_len=128))"
    assert lm.dominant_stage(settings) == tokenize
    # a control: with one thread alone, any rule names tokenizing
    assert lm.dominant_stage([s for s in settings if s.threads == 1]) == tokenize
    assert lm.fit_loader_model(settings, cores=2).stage == tokenize


def test_the_step_is_the_slower_part_times_the_interference_never_faster_than_d():
    from pipecheck.records.whatif import Interval

    t = Interval(0.010, 0.009, 0.011)
    step, binding = lm.predict_step(Interval(0.005, 0.004, 0.006), t, 1.2, "stage")
    assert (step.value, binding) == (pytest.approx(0.012), lm.COMPUTE)
    # R came out faster than T where the run chose: the loader still sets the floor
    step, binding = lm.predict_step(Interval(0.020, 0.018, 0.022), t, 0.9, "stage")
    assert (step.value, step.low, binding) == (0.020, 0.018, "stage")


def precomputed_errors(with_stage: list[LoaderSetting], without: list[LoaderSetting]
                       ) -> tuple[str, list[float]]:
    """The model fitted to ``with_stage``, its stage taken out as ``pipecheck whatif`` takes
    it out (``stage_what_if``), predicting each setting of ``without``: the stage's name and
    the relative errors. Each prediction must be well below the model's with the stage and
    name something else as binding."""
    model = lm.fit_loader_model(with_stage, cores=2)
    errors = []
    for s in without:
        stage_s, p = stage_what_if(with_stage, model, WhatIfSetting.of(s.settings, 2))
        assert stage_s is not None and p is not None
        assert p.binding != model.stage
        assert p.interval.value < 0.8 * lm.predict_loader(model, s.settings, 2).interval.value
        errors.append(abs(p.interval.value - s.loader_time.value) / s.loader_time.value)
    return model.stage, errors


def test_stage_precomputed_predicted_against_the_pipeline_built_without_it():
    """The same calibrated pipeline built both ways and measured for real: with its transform
    stage (20 ms of sleep and 3 ms of CPU per batch) and without it (nothing in the
    transform: its output as if precomputed; the 1 ms consumer kept). The model fitted to
    the first, the stage taken out, predicts the second within 20% in the median over its
    8 settings (no setting over 50%: 4 workers with 4 threads, where the fit's contention
    came from a noisy reading), and the stage's removal is most of the batch's cost."""
    with_stage = real_settings("dataloader_calibrated_load20_cpu3.json")
    without = real_settings("dataloader_calibrated_consumer1_nostage.json")
    stage, errors = precomputed_errors(with_stage, without)
    stage_s = lm.stage_seconds_per_batch(with_stage, stage)
    assert stage_s is not None and 0.020 < stage_s < 0.030
    assert sorted(errors)[len(errors) // 2] < 0.20 and max(errors) < 0.50, errors


def test_without_workers_the_time_that_cannot_overlap_is_at_most_d():
    """The real demo record: without workers the training process's CPU per batch reads past
    D (3.74 ms against 3.55 ms with one read thread, 4.14 against 3.75 with four: the
    threads tokenize partly beside the training thread). The time per batch the model keeps
    for the training process without workers is then no more than the D measured there, not
    its CPU time."""
    settings = real_settings("dataloader_demo_threads1_4.json")
    alone = [s for s in settings if s.workers == 0]
    assert len(alone) == 2
    assert all(s.resources.main_cpu_per_batch_s > 1.04 * s.loader_time.value for s in alone)
    model = lm.fit_loader_model(settings, cores=2)
    assert model.main_alone_s <= max(s.loader_time.value for s in alone) * (1 + 1e-9)
    assert model.main_alone_s < min(s.resources.main_cpu_per_batch_s for s in alone)


def test_without_workers_one_core_runs_all_of_the_training_process_cpu():
    """The same real record: on one core, the training process without workers needs its
    whole CPU per batch from that core, the read threads' share beside the training thread
    included (3.74 and 4.14 ms), not only the part that cannot overlap (at most D): the
    cores bind, at no less than that CPU."""
    settings = real_settings("dataloader_demo_threads1_4.json")
    alone = [s for s in settings if s.workers == 0]
    cpu = sorted(s.resources.main_cpu_per_batch_s for s in alone)
    model = lm.fit_loader_model(settings, cores=2)
    assert model.main_alone_cpu_s == pytest.approx(sum(cpu) / 2)  # the median of two
    for s in alone:
        p = lm.predict_loader(model, s.settings, cores=1)
        assert p.binding == lm.CPU_CORES, p.floors
        assert p.interval.value >= model.cpu_scale * model.main_alone_cpu_s
