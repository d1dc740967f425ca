"""The storage-bound decision and finding on hand-built settings: the slow mount's numbers
(20 ms a read, 8 reads a batch), CPU-bound pipelines from a local disk, threads queueing on
the GIL, a source that decodes on the CPU, a busy machine; and the fix in Grain's and
MaxText's terms."""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from pipecheck.analysis.loader import storage as st
from pipecheck.analysis.steady_state import loader_estimate
from pipecheck.records.common import Distribution
from pipecheck.records.dataloader import LoaderSetting, Reads, Resources, Stage
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.workloads import kind_of
from pipecheck.workloads.maxtext import read_overrides_text

BATCHES = 40


def setting(batch_s: float, read_s: float, reads: float = 8.0, wait: float = 0.98,
            cpu_s: float = 0.005, queued_s: float = 0.0, workers: int = 0,
            threads: int = 1, g: GrainSettings | None = None) -> LoaderSetting:
    """A measured setting (at ``g``, else at ``workers`` and ``threads``): D of ``batch_s``, a
    reading stage of ``read_s`` a read, the processes spending ``cpu_s`` of CPU per batch and
    waiting ``queued_s`` for a core."""
    g = g or GrainSettings(workers=workers, threads=threads)
    workers = g.workers
    samples = [batch_s] * BATCHES
    r = Resources(batches=BATCHES, wall_s=batch_s * BATCHES, main_cpu_s=cpu_s * BATCHES,
                  worker_cpu_s=0.0, workers_seen=workers, main_rss_mb=200.0,
                  worker_rss_mb=0.0, workers_rss_mb=0.0, main_wait_s=queued_s * BATCHES)
    return LoaderSetting(
        settings=g, first_batch_s=batch_s, batch_time=Distribution.of(samples),
        batches_per_s=1 / batch_s, examples_per_s=8 / batch_s, resources=r,
        reads=Reads("SourceMapDataset(source=ArrayRecordDataSource)", "main", read_s, reads,
                    wait),
        loader_time=loader_estimate(samples, workers, g.per_worker_buffer))


SLOW_MOUNT_1_THREAD = setting(batch_s=0.167, read_s=0.0205, cpu_s=0.005)
"""The issue's slow mount, one read thread: 20 ms a read, 8 reads a batch, 167 ms a batch,
3% of it on the CPU."""
SLOW_MOUNT_16_THREADS = setting(batch_s=0.0103, read_s=0.0205, cpu_s=0.0019, threads=16)


def test_the_slow_mount_is_storage_bound_at_one_thread_and_at_sixteen():
    for s in (SLOW_MOUNT_1_THREAD, SLOW_MOUNT_16_THREADS):
        e = st.evidence_of(s)
        assert e is not None and st.is_storage_bound(e), e
    e = st.evidence_of(SLOW_MOUNT_1_THREAD)
    assert e is not None
    assert e.cpu_share == pytest.approx(0.005 / 0.167)
    assert e.reads.read_s_per_batch == pytest.approx(0.164)
    assert e.read_share == pytest.approx(0.164 / 0.167)


@pytest.mark.parametrize("why, s", [
    ("a CPU-bound map, reads from a local disk",
     setting(batch_s=0.050, read_s=0.00003, wait=0.02, cpu_s=0.049)),
    ("the reading stage waited on, but its reads take microseconds",
     setting(batch_s=0.002, read_s=0.00003, wait=0.9, cpu_s=0.0019)),
    ("a source that decodes on the CPU", setting(batch_s=0.040, read_s=0.005, cpu_s=0.039)),
    ("16 threads queueing on the GIL of a CPU-bound source",  # each read waits 16x its CPU
     setting(batch_s=0.040, read_s=0.080, cpu_s=0.038, threads=16)),
    ("a CPU-bound pipeline waiting for cores on a busy machine",
     setting(batch_s=0.100, read_s=0.011, cpu_s=0.030, queued_s=0.065)),
    ("4 CPU-bound workers on 2 cores, each waiting for a core half the time",
     setting(batch_s=0.025, read_s=0.012, cpu_s=0.050, queued_s=0.050, workers=4)),
])
def test_cpu_work_is_never_storage_bound(why, s):
    e = st.evidence_of(s)
    assert e is not None and not st.is_storage_bound(e), (why, e)


def test_no_cpu_bound_setting_of_a_grid_is_storage_bound():
    """Whatever the reading stage reads, a setting whose processes computed at least
    STORAGE_CPU_SHARE of their time is not storage-bound."""
    for batch_s, read_s, reads, wait, share, workers in itertools.product(
            (0.002, 0.02, 0.2), (1e-5, 1e-3, 0.02, 0.2), (1, 8, 64), (0.1, 0.6, 1.0),
            (0.501, 0.7, 1.0, 1.5), (0, 1, 4)):
        cpu = share * batch_s * max(1, workers)
        e = st.evidence_of(setting(batch_s, read_s, reads, wait, cpu_s=cpu, workers=workers))
        assert e is not None and not st.is_storage_bound(e), e


def test_each_condition_is_needed_at_its_threshold():
    wall = 0.100
    base = dict(batch_s=wall, read_s=0.010, reads=8.0, wait=0.9)
    assert st.storage_bound(setting(**base, cpu_s=0.49 * wall))
    assert not st.storage_bound(setting(**base, cpu_s=0.50 * wall))  # STORAGE_CPU_SHARE
    assert not st.storage_bound(setting(**{**base, "wait": 0.49}, cpu_s=0.01))  # READ_WAIT
    assert st.storage_bound(setting(**{**base, "read_s": 0.05 / 8}, cpu_s=0.01))
    assert not st.storage_bound(setting(**{**base, "read_s": 0.049 / 8}, cpu_s=0.01))


def test_without_a_reading_stage_or_resources_there_is_no_evidence():
    for s in (dataclasses.replace(SLOW_MOUNT_1_THREAD, reads=None),
              dataclasses.replace(SLOW_MOUNT_1_THREAD, resources=None)):
        assert st.evidence_of(s) is None and not st.storage_bound(s)
        assert st.storage_finding([s]) is None and st.storage_note(s) == ""


def test_the_reading_stage_is_read_off_grains_stage_timing():
    stages = (Stage("BatchDatasetIterator(batch_size=8)", "main", 0.0, 0.002, 7e-5, 21),
              Stage("MapMapDataset(transform=TokenizeAndPack)", "main", 0.007, 0.02, 1.4e-4,
                    162),
              Stage("SourceMapDataset(source=IndexedSource)", "main", 0.985, 3.32, 0.0205,
                    162))
    reads = st.reads_of(stages)
    assert reads == Reads("SourceMapDataset(source=IndexedSource)", "main", 0.0205,
                          162 / 21, 0.985)
    assert st.reads_of(stages[:2]) is None  # no source stage: a generator, a DataLoader
    assert st.reads_of(()) is None
    in_workers = (  # as Grain reported a run with 2 workers: the main side's count lags
        Stage("InterleaveDatasetIterator([2 datasets])", "main", 0.011, 0.016, 1.2e-3, 14),
        Stage("BatchDatasetIterator(batch_size=8)", "workers", 0.003, 0.002, 9e-5, 20),
        Stage("RepeatMapDataset(num_epochs=None)", "workers", 0.0, 0.0, float("nan"), 0),
        Stage("SourceMapDataset(source=IndexedSource)", "workers", 0.984, 3.49, 0.0218, 160))
    reads = st.reads_of(in_workers)
    assert reads is not None and reads.where == "workers" and reads.reads_per_batch == 8.0


def test_read_threads_enough_to_hide_the_reads_rounded_up_to_the_ladder():
    e = st.evidence_of(SLOW_MOUNT_1_THREAD)
    assert e is not None
    assert st.read_threads_for(e, goal_s=0.045) == 8  # 164 ms / (0.75 x 45 ms): 5 -> 8
    assert st.read_threads_for(e, goal_s=0.027) == 16  # 164 ms / (0.75 x 27 ms): 9 -> 16
    assert st.read_threads_for(e, goal_s=0.200) == 2
    assert st.read_threads_for(e, goal_s=0.001) == st.MAX_READ_THREADS
    assert st.read_threads_for(e) == st.MAX_READ_THREADS  # below its 5 ms of CPU: 33 -> 16


def test_the_finding_names_latency_reads_per_batch_and_the_cpu_share_with_a_grain_fix():
    f = st.storage_finding([SLOW_MOUNT_16_THREADS, SLOW_MOUNT_1_THREAD])
    assert f is not None and f.kind == "storage-bound"
    assert f.location == "workers=0, threads=1"  # the fewest reads in flight
    assert "each read takes 20.5 ms" in f.message and "8 reads a batch" in f.message
    assert "computed only 3% of the 167.0 ms a batch takes" in f.message
    assert f.numbers["read_s"] == 0.0205 and f.numbers["reads_per_batch"] == 8.0
    assert f.numbers["cpu_share"] == pytest.approx(0.005 / 0.167)
    assert f.fix is not None and f.fix.startswith(
        "read with more threads: grain.ReadOptions(num_threads=16, prefetch_buffer_size=32)")


def test_the_fix_is_the_searchs_choice_where_it_reads_with_more_threads():
    chosen = GrainSettings(0, threads=8, prefetch=8)
    f = st.storage_finding([SLOW_MOUNT_1_THREAD], chosen=chosen, goal_s=0.045)
    assert f is not None and f.fix is not None
    assert "grain.ReadOptions(num_threads=8, prefetch_buffer_size=8)" in f.fix
    fewer = st.storage_finding([SLOW_MOUNT_1_THREAD], chosen=GrainSettings(2), goal_s=0.2)
    assert fewer is not None and fewer.fix is not None
    assert "grain.ReadOptions(num_threads=2, prefetch_buffer_size=4)" in fewer.fix


def test_the_fix_in_each_workloads_own_terms():
    assert GrainSettings(2, threads=8).read_options_text() == \
        "grain.ReadOptions(num_threads=8, prefetch_buffer_size=16) in each of 2 Grain workers"
    assert read_overrides_text(GrainSettings(0, threads=16)) == \
        "grain_num_threads=16 grain_prefetch_buffer_size=32"
    f = st.storage_finding([SLOW_MOUNT_1_THREAD], kind_of("maxtext").read_options_text)
    assert f is not None and f.fix is not None
    assert f.fix.startswith(
        "read with more threads: grain_num_threads=16 grain_prefetch_buffer_size=32;")
    assert kind_of("demo").read_options_text is GrainSettings.read_options_text


def test_the_search_order_note_says_why_threads_go_first():
    note = st.storage_note(SLOW_MOUNT_1_THREAD)
    assert note == ("reads wait on storage (20.5 ms a read, 8 reads a batch, the processes "
                    "computing 3% of the time): read threads tried before worker processes, "
                    "since threads overlap the waiting at little CPU and memory cost")
    assert st.storage_note(setting(batch_s=0.05, read_s=3e-5, wait=0.02, cpu_s=0.049)) == ""
