"""Raw samples and per-step rates stored as encoded arrays (format version 4)."""

from __future__ import annotations

import json
import math
import pathlib
import pickle

import numpy as np
import pytest

from pipecheck.analysis.diff import diff_runs, summary_from_imported
from pipecheck.errors import ResultFormatError
from pipecheck.logs.maxtext import import_log
from pipecheck.records import store
from pipecheck.records.codec import Floats, decode_array, float_column
from pipecheck.records.common import (
    Breakdown,
    BreakdownRow,
    CompileInfo,
    Distribution,
    Estimate,
    StepRecord,
    Throughput,
)
from pipecheck.records.compare import CompareResult, Estimates, Tuning
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting
from pipecheck.records.diff import DiffResult
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.imported import ImportedRun
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.synthetic import SyntheticResult

LOGS = pathlib.Path(__file__).parents[2] / "data"
STATISTICS = ("median_s", "mean_s", "p10_s", "p90_s", "p99_s", "iqr_s", "n")
"""What users' scripts read from a distribution in a file."""


def through_json(record):
    return store.load_dict(json.loads(store.record_to_json(record)))


SAMPLES = Distribution.of([0.050, 0.061, 0.055, 0.058, 0.052])
STEPS = (StepRecord(0, 1.2, ("compile",), {"dispatch": 1.1}, 3.5),
         StepRecord(1, 0.05, (), {"sync": 0.05}, 3.4))


def synthetic() -> SyntheticResult:
    return SyntheticResult(env={"jax": "0.10.2"}, config={"workload": "calibrated"},
                           step_time=SAMPLES, compile=CompileInfo(1.2, 1.0, 1),
                           throughput=Throughput(600.0), steps=STEPS)


def loader_setting() -> LoaderSetting:
    return LoaderSetting(settings=GrainSettings(workers=2, threads=1), first_batch_s=1.5,
                         batch_time=Distribution.of([0.01, 0.02, 0.03, 0.04]),
                         batches_per_s=40.0, examples_per_s=320.0,
                         loader_time=Estimate(0.025, 0.02, 0.03, 4, "mean"))


def dataloader() -> DataloaderResult:
    return DataloaderResult(env={}, config={"workload": "demo"}, results=(loader_setting(),),
                            batches=4)


def compare() -> CompareResult:
    est = Estimate(0.05, 0.049, 0.051, 4)
    return CompareResult(
        env={}, config={}, target=SAMPLES, loader=(loader_setting(),),
        real=Distribution.of([0.052, 0.053, 0.051]), verdict="compute-bound",
        verdict_reason="T is the step", findings=(), recommendation="nothing to do",
        tuning=Tuning(True, "latency-bound", 0.05, "met", 0.9, 1, "met",
                      loader_setting().settings), host_spans={"sync": 0.05},
        compile=CompileInfo(1.0, 0.9, 1), sources={"target": "measured"}, steps=STEPS,
        estimates=Estimates(est, loader_setting().loader_time, est))  # type: ignore[arg-type]


def monitor() -> MonitorResult:
    return MonitorResult(env={}, config={}, step_time=SAMPLES, first_step_s=1.2, steps=STEPS,
                         sync_sites=(), breakdown=Breakdown(1.3, 2, (BreakdownRow("sync", 1.3,
                                                                                  1.0),)),
                         wall_s=1.3, total_steps=2)


def imported() -> ImportedRun:
    return import_log(LOGS / "maxtext_a.log")


def diff() -> DiffResult:
    return diff_runs(summary_from_imported(import_log(LOGS / "maxtext_a.log")),
                     summary_from_imported(import_log(LOGS / "maxtext_b.log")))


def distributions(data):
    """Every stored distribution in a record's JSON form (found by its fields)."""
    if isinstance(data, dict):
        if "samples_s" in data:
            yield data
        for v in data.values():
            yield from distributions(v)
    elif isinstance(data, list):
        for v in data:
            yield from distributions(v)


@pytest.mark.parametrize("build", [synthetic, dataloader, compare, monitor, imported, diff])
def test_every_record_with_a_distribution_round_trips_with_encoded_samples(build):
    record = build()
    assert through_json(record) == record
    data = record.to_dict()
    assert data["format_version"] == store.FORMAT_VERSION == 6
    found = list(distributions(data))
    assert found
    for d in found:
        samples = decode_array(d["samples_s"], "samples_s")
        assert samples.dtype == np.float64 and samples.size == d["n"]
        # the statistics stay plain numbers for users' scripts
        assert all(isinstance(d[k], (int, float)) or d[k] is None for k in STATISTICS)


def test_nan_in_samples_survives_the_file():
    record = SyntheticResult(env={}, config={}, step_time=Distribution.of([0.05, math.nan]),
                             compile=CompileInfo(1.2, 1.0, 1), throughput=Throughput(600.0))
    back = through_json(record).step_time.samples_s
    assert back[0] == 0.05 and math.isnan(back[1])


def test_a_diffs_rate_series_are_encoded_arrays():
    record = diff()
    data = record.to_dict()
    for side, summary in (("a", record.a), ("b", record.b)):
        for name in ("tflops_per_s_per_device", "tokens_per_s_per_device"):
            column = decode_array(data[side][name], f"{side}.{name}")
            assert column.tolist() == list(getattr(summary, name)) and column.size > 40


def test_a_malformed_sample_column_is_a_one_line_error():
    data = synthetic().to_dict()
    data["step_time"]["samples_s"] = {"dtype": "float64", "zlib_base64": "not base64!"}
    with pytest.raises(ResultFormatError, match=r"Distribution\.samples_s cannot be decoded"):
        store.load_dict(data)


def test_a_long_series_is_far_smaller_than_its_json_list():
    rng = np.random.default_rng(0)
    samples = np.round(0.5 + rng.gamma(50, 0.0002, 100_000), 3)
    d = Distribution.of(samples.tolist())
    encoded = len(json.dumps(d.to_dict()["samples_s"]))
    as_list = len(json.dumps(samples.tolist()))
    assert encoded < as_list / 2


def test_a_float_column_made_from_an_array_keeps_it_read_only():
    import pickle

    from pipecheck.records.codec import Floats, float_column

    arr = np.array([0.5, 0.25, 4.0, 3.0])
    col = float_column(arr)
    assert isinstance(col, Floats) and col == (0.5, 0.25, 4.0, 3.0) and col[1:3] == (0.25, 4.0)
    # numpy reads the kept array (no float-by-float conversion), which nobody can change
    back = np.asarray(col, dtype=float)
    assert back is np.asarray(col) and not back.flags.writeable
    assert not np.shares_memory(back, arr) and np.array_equal(back, arr)
    arr[0] = 9.0  # the column holds a copy: the caller's array stays the caller's
    assert col[0] == 0.5 and np.asarray(col)[0] == 0.5
    assert np.asarray(col, dtype=np.float32).dtype == np.float32
    assert np.array(col, copy=True).flags.writeable
    # a record holding one compares, pickles and round-trips like one holding a plain tuple
    d = Distribution.of(np.array([0.1, 0.2, 0.3]))
    assert d == Distribution((0.1, 0.2, 0.3)) and d.summary.median == 0.2
    assert pickle.loads(pickle.dumps(d)) == d
    again = Distribution.from_dict(json.loads(json.dumps(d.to_dict())))
    assert again == d and isinstance(again.samples_s, Floats)


def test_a_float_column_pickles_as_its_array():
    """diff hands B's summary back from a second process pickled: a column travels as its
    array (8 bytes a value), not as a tuple of floats and the array too."""
    values = np.linspace(0.5, 1.5, 100_000)
    col = float_column(values)
    data = pickle.dumps(col, protocol=pickle.HIGHEST_PROTOCOL)
    back = pickle.loads(data)
    assert type(back) is Floats and back == col
    assert np.array_equal(np.asarray(back), values)
    assert not np.asarray(back).flags.writeable
    assert len(data) < 1.1 * values.nbytes


def test_a_float_column_of_an_array_makes_no_float_objects_until_iterated():
    """A million-step column (diff's step times and rates, twice over) is one array: no
    tuple of a million floats is made to build, measure, index, compare or pickle it."""
    import tracemalloc

    values = np.linspace(0.5, 1.5, 1_000_000)
    tracemalloc.start()
    try:
        col = float_column(values)
        again = pickle.loads(pickle.dumps(col, protocol=pickle.HIGHEST_PROTOCOL))
        assert len(col) == 1_000_000 and col[0] == 0.5 and col[-1] == 1.5
        assert col == again and np.asarray(again)[10] == values[10]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the column's copy, the pickle and the array it holds: 8 MB each; a tuple of floats
    # would add 32 MB each time one is made
    assert peak < 4 * values.nbytes
    assert list(col)[:2] == values[:2].tolist() and sum(1 for _ in col) == 1_000_000


def test_a_float_column_reads_compares_and_hashes_like_its_tuple():
    items = (0.5, math.nan, -1.0, 2.0)
    col = float_column(np.array(items))
    assert len(col) == 4 and col[2] == -1.0 and col[-1] == 2.0 and type(col[0]) is float
    with pytest.raises(IndexError):
        col[4]
    with pytest.raises(IndexError):
        col[-5]
    assert col[2:] == items[2:] and col[::-1][0] == 2.0 and isinstance(col[:2], tuple)
    # a NaN is only equal to itself: as with tuples of distinct float objects
    assert col == col and col != float_column(np.array(items))
    finite = float_column([1.0, 2.0])
    assert finite == (1.0, 2.0) and (1.0, 2.0) == finite and finite == float_column((1.0, 2.0))
    assert finite != (1.0, 2.0, 3.0) and finite != [1.0, 2.0] and finite != float_column([2.0, 1.0])
    assert hash(finite) == hash((1.0, 2.0)) and {finite: 1}[(1.0, 2.0)] == 1
    assert finite + (3.0,) == (1.0, 2.0, 3.0) and (0.0,) + finite == (0.0, 1.0, 2.0)
    assert finite + finite == (1.0, 2.0, 1.0, 2.0)
    assert repr(finite) == "(1.0, 2.0)" and list(reversed(finite)) == [2.0, 1.0]
    assert 2.0 in finite and finite.index(2.0) == 1 and finite.count(1.0) == 1
    assert not float_column([]) and float_column([]) == ()


def test_a_float_column_outside_a_column_field_is_written_as_a_list_of_numbers():
    """Where a column's values land in a field of another type, JSON gets numbers (a
    non-finite one as null), not an error."""
    import dataclasses

    from pipecheck.records.base import to_dict

    @dataclasses.dataclass(frozen=True)
    class Holder:
        values: tuple[float, ...]

    out = json.loads(json.dumps(to_dict(Holder(float_column([0.25, math.inf, 1.0])))))
    assert out == {"values": [0.25, None, 1.0]}
