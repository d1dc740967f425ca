"""The read-latency what-if's model on hand-built inputs: added latency per read is waiting,
overlapped by a process's reads in flight and by the workers, never a CPU cost; and on a
real dataloader record, what it needs and what it writes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pipecheck.analysis.loader import loader_model as lm
from pipecheck.analysis.loader.whatif import Asked, what_if
from pipecheck.records import store
from pipecheck.records.dataloader import Reads
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.whatif import LoaderModelFit

DATALOADER = Path(__file__).parents[2] / "data" / "whatif" / \
    "dataloader_calibrated_load20_cpu3.json"


def model(latency_s: float = 0.040, cpu_s: float = 0.001) -> LoaderModelFit:
    """A latency-bound source: 40 ms waiting and 1 ms CPU per batch, a cheap training
    process, 2 cores, the sharpest norm (the largest floor alone, within 1%)."""
    return LoaderModelFit(
        worker_cpu_s=cpu_s, latency_s=latency_s, main_s=0.0002, main_alone_s=cpu_s,
        main_alone_cpu_s=cpu_s, sharpness=16.0, contention=0.0, cpu_scale=1.0, cores=2,
        stage="ArrayRecordDataSource", settings_fitted=4, fit_error=0.03, noise=0.02,
        max_workers_measured=2, max_reads_measured=4)


def d(m: LoaderModelFit, g: GrainSettings) -> float:
    return lm.predict_loader(m, g, m.cores).interval.value


def test_added_latency_is_waiting_per_read_times_reads_per_batch():
    slower = lm.with_read_latency(model(), 0.010, reads=8)
    assert slower.latency_s == pytest.approx(0.040 + 8 * 0.010)
    assert dataclasses.replace(slower, latency_s=0.040) == model()  # nothing else moves
    assert lm.with_read_latency(model(), -1.0, reads=8) == model()  # never faster


@pytest.mark.parametrize(("g", "in_flight"), [
    (GrainSettings(0, threads=1, prefetch=2), 1),
    (GrainSettings(0, threads=4, prefetch=8), 4),
    (GrainSettings(0, threads=8, prefetch=2), 2),    # the prefetch caps the reads in flight
    (GrainSettings(2, threads=1, prefetch=2), 2),    # two workers, one read each
    (GrainSettings(2, threads=4, prefetch=8), 8),
])
def test_added_waiting_is_overlapped_by_reads_in_flight_across_workers(g, in_flight):
    base, slower = model(), lm.with_read_latency(model(), 0.030, reads=8)
    added = d(slower, g) - d(base, g)
    assert added == pytest.approx(8 * 0.030 / in_flight, rel=0.02)


def test_reads_inline_without_threads_wait_one_after_the_other():
    g = GrainSettings(0, threads=0, prefetch=0)
    added = d(lm.with_read_latency(model(), 0.030, reads=8), g) - d(model(), g)
    assert added == pytest.approx(8 * 0.030, rel=0.02)


def test_latency_takes_no_core_and_a_cpu_bound_loader_stays_cpu_bound_until_it_waits():
    cpu_bound = model(latency_s=0.0, cpu_s=0.050)
    g = GrainSettings(4, threads=4, prefetch=8)
    slower = lm.predict_loader(lm.with_read_latency(cpu_bound, 0.005, reads=8), g, 2)
    before = lm.predict_loader(cpu_bound, g, 2)
    assert slower.floors[lm.CPU_CORES] == before.floors[lm.CPU_CORES]
    assert before.binding == slower.binding == lm.CPU_CORES
    assert slower.interval.value == pytest.approx(before.interval.value, rel=0.01)
    # one inline reader, 8 x 40 ms a batch: the reads bind now, not the cores
    inline = GrainSettings(0, threads=0, prefetch=0)
    waiting = lm.predict_loader(lm.with_read_latency(cpu_bound, 0.040, reads=8), inline, 2)
    assert waiting.binding == "ArrayRecordDataSource"


def test_what_if_on_a_real_record_adds_the_latency_per_example_and_says_so():
    record = store.load(DATALOADER)
    g = Asked(workers=1, threads=4, prefetch=8)
    base = what_if(record, "dl.json", g)
    slower = what_if(record, "dl.json", dataclasses.replace(g, read_latency_s=0.002))
    reads = record.results[0].examples_per_batch
    assert slower.reads_per_batch == reads and slower.read_latency_s == 0.002
    assert slower.model == base.model  # the record keeps the fit to what was measured
    added = slower.predicted_loader_s.value - base.predicted_loader_s.value
    assert 0.5 * reads * 0.002 / 4 < added <= reads * 0.002 / 4 * 1.01
    assert any("every read 2.00 ms slower" in n for n in slower.notes)
    assert slower.precomputed_loader_s is None and base.precomputed_loader_s is not None


def test_a_record_without_examples_per_batch_cannot_count_its_reads():
    record = store.load(DATALOADER)
    bare = dataclasses.replace(record, results=tuple(
        dataclasses.replace(s, examples_per_batch=0) for s in record.results))
    assert what_if(bare, "dl.json", Asked()).reads_per_batch is None
    with pytest.raises(lm.MissingNumbers, match="examples per batch"):
        what_if(bare, "dl.json", Asked(read_latency_s=0.03))


def test_reads_counted_at_the_reading_stage_win_over_one_per_example():
    """A source that reads two records an example (or packs several examples a read) makes
    a count at the reading stage differ from the examples per batch: the count is used."""
    record = store.load(DATALOADER)
    examples = record.results[0].examples_per_batch
    counted = dataclasses.replace(record, results=tuple(
        dataclasses.replace(s, reads=Reads(stage="SourceMapDataset", where="main",
                                           read_s=0.001, reads_per_batch=2.0 * examples,
                                           wait_ratio=0.5))
        for s in record.results))
    slower = what_if(counted, "dl.json", Asked(read_latency_s=0.002))
    assert slower.reads_per_batch == 2 * examples
    assert any("counted at the reading stage" in n for n in slower.notes)
    assert lm.reads_per_batch(record.results) == examples
