"""Unit tests of pipecheck.measure.dataloader: fake-clock timing, throughput, stages, JSON."""

from __future__ import annotations

import math

import numpy as np
import pytest
from grain.proto import execution_summary_pb2

from pipecheck.measure.dataloader import (
    batch_sizes,
    collect_stages,
    produced_batches,
    settings_grid,
    short_stage_name,
    stages_from_summary,
    throughput,
    time_batches,
)
from pipecheck.records import store
from pipecheck.records.codec import decode_array
from pipecheck.records.common import Distribution, Estimate
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting, Stage, slowest_stage
from pipecheck.records.grain_settings import GrainSettings
from tests.fakes import FakeClock


def test_first_batch_apart_and_samples_between_clock_reads():
    events = []
    clock = FakeClock(readings=[10.0, 12.5, 12.5, 12.75, 13.25, 13.5])

    def open_iterator():
        events.append("open")
        return iter([{"x": i} for i in range(10)])

    def put(batch):
        events.append(("put", batch["x"]))
        return batch

    firsts = []
    timing = time_batches(open_iterator, 3, put=put, clock=clock,
                          arm=lambda: events.append("arm"), on_first=firsts.append)
    assert timing.first_batch_s == 2.5
    assert timing.samples == [0.25, 0.5, 0.25]
    assert firsts == [2.5]
    assert timing.first_batch == {"x": 0}
    assert events == ["arm", "open", ("put", 0), "arm", ("put", 1), "arm", ("put", 2),
                      "arm", ("put", 3)]


def test_time_batches_needs_one_batch():
    with pytest.raises(ValueError):
        time_batches(lambda: iter([]), 0)


def test_throughput_leaves_out_the_first_batch():
    # 4 timed batches in 0.5 s: 8 batches/s; the first batch is in neither count nor time.
    bps, eps, tps = throughput([0.1, 0.1, 0.2, 0.1], examples_per_batch=16,
                               tokens_per_batch=16 * 128)
    assert bps == pytest.approx(8.0, rel=1e-12)
    assert eps == pytest.approx(128.0, rel=1e-12)
    assert tps == pytest.approx(8.0 * 16 * 128, rel=1e-12)
    assert throughput([0.5], 4, None) == (2.0, 8.0, None)


def test_throughput_of_nothing_is_nan():
    bps, eps, tps = throughput([], 4, 10)
    assert math.isnan(bps) and math.isnan(eps) and tps is None


def test_batch_sizes():
    import numpy as np

    batch = {"tokens": np.zeros((8, 128), np.int32), "mask": np.zeros((8, 128))}
    assert batch_sizes(batch, "tokens") == (8, 1024)
    assert batch_sizes(batch, None) == (8, None)
    assert batch_sizes({"x": np.zeros((4, 3))}, "tokens") == (4, None)


def test_settings_grid_keeps_order_and_drops_duplicates():
    assert [(s.workers, s.threads) for s in settings_grid([0, 2, 0], [1, 4])] == \
        [(0, 1), (0, 4), (2, 1), (2, 4)]


def test_settings_grid_has_one_buffer_setting_without_workers():
    grid = settings_grid([0, 1], [1], buffers=[1, 4], prefetch=[0, 8])
    assert [(s.workers, s.per_worker_buffer, s.prefetch) for s in grid] == \
        [(0, 2, 2), (0, 2, 8), (1, 1, 2), (1, 1, 8), (1, 4, 2), (1, 4, 8)]


def _summary(nodes):
    s = execution_summary_pb2.ExecutionSummary()
    for node_id, (name, inputs, ratio, total_ns, n, prefetch) in nodes.items():
        node = s.nodes[node_id]
        node.id = node_id
        node.name = name
        node.inputs.extend(inputs)
        node.wait_time_ratio = ratio
        node.total_processing_time_ns = total_ns
        node.num_produced_elements = n
        node.is_prefetch = prefetch
    return s


WORKER_SUMMARY = {
    0: ("InterleaveDatasetIterator([2 datasets], cycle_length=2)", [1], 0.01, 2_000_000, 21,
        False),
    1: ("ThreadPrefetchDatasetIterator(prefetch_buffer_size=2)", [2], 0.0, 9_000_000, 21, True),
    2: ("ProcessPrefetchDatasetIterator(buffer_size=2)", [3], 0.0, 0, 0, True),
    3: ("BatchDatasetIterator(batch_size=8, drop_remainder=True)", [4], 0.05, 4_000_000, 24,
        False),
    4: ("PrefetchDatasetIterator(read_options=ReadOptions(num_threads=1))", [5], 0.0,
        1_000_000, 192, True),
    5: ("MapMapDataset(transform=TokenizeAndPack(seq_len=128) @ .../tokenizer.py:80)", [6],
        0.64, 48_000_000, 192, False),
    6: ("SourceMapDataset(source=IndexedSource)", [], 0.30, 9_600_000, 192, False),
}


def test_stages_from_summary():
    stages = stages_from_summary(_summary(WORKER_SUMMARY))
    assert stages == (
        Stage("InterleaveDatasetIterator([2 datasets], cycle_length=2)", "main", 0.01, 0.002,
              0.002 / 21, 21),
        Stage("BatchDatasetIterator(batch_size=8, drop_remainder=True)", "workers", 0.05, 0.004,
              0.004 / 24, 24),
        Stage("MapMapDataset(transform=TokenizeAndPack(seq_len=128))", "workers", 0.64, 0.048,
              0.048 / 192, 192),
        Stage("SourceMapDataset(source=IndexedSource)", "workers", 0.30, 0.0096, 0.0096 / 192,
              192),
    )
    assert slowest_stage(stages).name == "MapMapDataset(transform=TokenizeAndPack(seq_len=128))"


def test_produced_batches_counts_worker_outputs_else_the_output_node():
    assert produced_batches(_summary(WORKER_SUMMARY)) == 24
    main_only = {0: ("BatchDatasetIterator(batch_size=8)", [1], 0.1, 1000, 7, False),
                 1: ("SourceMapDataset", [], 0.9, 9000, 56, False)}
    assert produced_batches(_summary(main_only)) == 7


def test_short_stage_name():
    assert short_stage_name("MapMapDataset(transform=f @ .../x.py:4)") == \
        "MapMapDataset(transform=f)"
    assert short_stage_name("ShuffleMapDataset") == "ShuffleMapDataset"
    assert short_stage_name(
        "MapMapDataset(transform=<pipecheck.workloads.calibrated.CalibratedBatches object at "
        "0x7f3a2c1d0e50> @ .../calibrated.py:98)") == "MapMapDataset(transform=CalibratedBatches)"


def test_slowest_stage_ignores_stages_without_elements():
    assert slowest_stage(()) is None
    idle = Stage("RepeatMapDataset", "main", 0.9, 0.0, math.nan, 0)
    busy = Stage("MapMapDataset", "main", 0.1, 1.0, 0.01, 100)
    assert slowest_stage([idle, busy]) is busy


def test_collect_stages_reads_until_the_summary_covers_every_batch():
    lagging = {0: ("BatchDatasetIterator", [], 1.0, 1000, 5, False)}
    current = {0: ("BatchDatasetIterator", [], 1.0, 3000, 21, False)}
    summaries = [_summary(lagging), _summary(lagging), _summary(current)]
    sleeps = []
    stages, complete = collect_stages(lambda: summaries.pop(0), consumed=21, wait_s=10,
                                      clock=FakeClock(readings=[0.0, 1.0, 2.0, 3.0]),
                                      sleep=sleeps.append, poll_s=0.5)
    assert complete
    assert stages[0].n == 21
    assert sleeps == [0.5, 0.5]


def test_collect_stages_gives_up_after_the_wait():
    lagging = _summary({0: ("BatchDatasetIterator", [], 1.0, 1000, 5, False)})
    stages, complete = collect_stages(lambda: lagging, consumed=21, wait_s=2,
                                      clock=FakeClock(readings=[0.0, 1.0, 2.0]),
                                      sleep=lambda s: None)
    assert not complete
    assert stages[0].n == 5


def make_result():
    setting = LoaderSetting(
        settings=GrainSettings(workers=2, threads=1), first_batch_s=1.5,
        batch_time=Distribution.of([0.01, 0.02, 0.03, 0.04]),
        batches_per_s=40.0, examples_per_s=320.0, tokens_per_s=40960.0, examples_per_batch=8,
        stages=stages_from_summary(_summary(WORKER_SUMMARY)), stages_complete=True,
        warnings=("large spread",),
        loader_time=Estimate(0.025, 0.015, 0.035, 4, "mean"),
    )
    return DataloaderResult(env={"jax": "0.10.2"}, config={"workload": "demo", "source": "demo"},
                            results=(setting,), batches=4, device_put=True, timeout_s=120.0)


def test_json_round_trip_and_field_names():
    result = make_result()
    data = result.to_dict()
    assert data["kind"] == "dataloader"
    assert data["format_version"] == store.FORMAT_VERSION
    row = data["results"][0]
    for key in ("settings", "first_batch_s", "batch_time", "batches_per_s",
                "examples_per_s", "stages"):
        assert key in row
    assert (row["settings"]["workers"], row["settings"]["threads"]) == (2, 1)
    for key in ("median_s", "p90_s", "p99_s", "n", "samples_s"):
        assert key in row["batch_time"]
    samples = decode_array(row["batch_time"]["samples_s"], "samples_s")
    assert samples.dtype == np.float64 and samples.tolist() == [0.01, 0.02, 0.03, 0.04]
    assert store.load_dict(data) == result


def test_load_refuses_another_format_version():
    data = make_result().to_dict()
    data["format_version"] = 99
    with pytest.raises(store.ResultFormatError):
        store.load_dict(data)


def test_records_written_before_limit_findings_were_stored_still_load():
    data = make_result().to_dict()
    assert data["limit_findings"] == []
    del data["limit_findings"]
    assert store.load_dict(data).limit_findings == ()
