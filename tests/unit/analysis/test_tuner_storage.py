"""The searches try read threads before worker processes when the first setting's reads
wait on storage, say so in their outcome, and search the workers first otherwise; on
simulated pipelines (grain_sim), no timing."""

from __future__ import annotations

import dataclasses

from pipecheck.analysis.loader.model_tuner import tune_by_model
from pipecheck.analysis.loader.tuner import tune_grain
from pipecheck.records.grain_settings import GrainSettings

from .grain_sim import SimPipeline
from .test_storage import setting

TARGET_S = 0.050
"""The step the loader must keep up with: a goal of 45 ms a batch."""

def slow_reads() -> SimPipeline:
    """8 reads of 20 ms a batch and 2 ms of CPU: the issue's slow mount (a fresh one: a
    simulation records the settings asked of it)."""
    return SimPipeline(sleep_s=0.160, cpu_s=0.002)

NOTE = "reads wait on storage (20.5 ms a read, 8 reads a batch, the processes computing 3%)"


def joint(sim: SimPipeline, note: str):
    def measure(g: GrainSettings):
        return dataclasses.replace(sim.trial(g), storage=note)

    return tune_grain(measure, TARGET_S, max_workers=8, cores=2), sim.calls


def test_reads_waiting_on_storage_send_the_joint_search_to_read_threads_first():
    out, asked = joint(slow_reads(), NOTE)
    assert asked[:2] == [GrainSettings(0), GrainSettings(0, threads=2)]
    first_workers = next(i for i, g in enumerate(asked) if g.workers > 0) \
        if any(g.workers for g in asked) else len(asked)
    assert all(g.threads > 1 for g in asked[1:first_workers])
    assert out.meets_target and out.chosen.settings == GrainSettings(0, threads=4, prefetch=4)
    assert out.order == NOTE
    assert "read threads without workers meet the target" in out.reason


def test_without_storage_the_joint_search_tries_a_worker_second():
    out, asked = joint(slow_reads(), "")
    assert asked[:2] == [GrainSettings(0), GrainSettings(1)]
    assert out.order == "" and "reads wait on storage" not in out.reason


def test_read_threads_that_do_not_help_leave_the_search_to_the_workers():
    gil_bound = SimPipeline(cpu_s=0.060)  # threads queue on the GIL: no gain from them
    out, asked = joint(gil_bound, NOTE)
    assert asked[:3] == [GrainSettings(0), GrainSettings(0, threads=2), GrainSettings(1)]
    assert out.chosen.workers >= 1 and out.order == NOTE


def test_the_model_search_measures_enough_read_threads_second_and_stops_there():
    asked = []

    def measure(g: GrainSettings):
        asked.append(g)
        return setting(batch_s=slow_reads().batch_s(g), read_s=0.020, cpu_s=0.002, g=g)

    out = tune_by_model(measure, TARGET_S, max_workers=8, cores=2)
    assert asked == [GrainSettings(0), GrainSettings(0, threads=8)]  # 160 / (0.75 x 45): 8
    assert out.meets_target and out.chosen.settings == GrainSettings(0, threads=8)
    assert out.order.startswith("reads wait on storage (20.0 ms a read, 8 reads a batch")


def test_the_model_search_without_storage_measures_a_worker_second():
    asked = []

    def measure(g: GrainSettings):
        asked.append(g)
        return setting(batch_s=slow_reads().batch_s(g), read_s=2e-5, wait=0.05, cpu_s=0.002,
                       g=g)

    out = tune_by_model(measure, TARGET_S, max_workers=8, cores=2)
    assert asked[:2] == [GrainSettings(0), GrainSettings(1)] and out.order == ""
