import json

import numpy as np
import pytest

from pipecheck.errors import OutputExistsError, OutputPathError, ResultFormatError
from pipecheck.records import store
from pipecheck.records.common import (
    CompileInfo,
    Distribution,
    Estimate,
    Finding,
    StepRecord,
    Throughput,
)
from pipecheck.records.synthetic import SyntheticResult


def make_result(**changes):
    base = dict(
        env={"jax": "0.10.2", "backend": "cpu", "device_count": 4, "device_kind": "cpu"},
        config={"workload": "calibrated", "compute_ms": 60.0},
        step_time=Distribution.of([0.05, 0.06, 0.055]),
        compile=CompileInfo(first_step_s=1.2, compile_s=1.0, train_step_compiles=2,
                            findings=(Finding("recompile", "twice", {"n": 2.0}, "batch['x']",
                                              "fix it"),)),
        throughput=Throughput(examples_per_s=600.0, tflops_per_s=0.1, flops_per_step=5e9,
                              flops_source="workload (analytic)", peak_memory_bytes=1024),
        warnings=("few steps",),
        steps=(StepRecord(0, 1.2, ("compile",), {"dispatch": 1.1, "other": 0.1}, 3.5),
               StepRecord(1, 0.05, (), {"sync": 0.05}, 3.4)),
    )
    base.update(changes)
    return SyntheticResult(**base)


def test_round_trip_through_json(tmp_path):
    r = make_result()
    path = tmp_path / "r.json"
    store.save(r, path)
    back = store.load(path)
    assert back == r
    data = json.loads(path.read_text())
    assert data["format_version"] == store.FORMAT_VERSION
    assert data["kind"] == "synthetic"
    assert set(data["step_time"]) >= {"median_s", "p10_s", "p90_s", "iqr_s", "n", "samples_s"}
    assert set(data["compile"]) == {"first_step_s", "compile_s", "train_step_compiles",
                                    "findings"}


def test_distribution_statistics_come_from_the_samples():
    d = Distribution.of([1.0, 2.0, 3.0, 4.0, 100.0])
    s = d.summary
    assert s.median == 3.0 and s.n == 5 and d.samples_s == (1.0, 2.0, 3.0, 4.0, 100.0)
    assert s.iqr == 2.0
    assert s.mean == 22.0  # the stall moves the mean, not the median


def test_a_files_statistics_are_derived_from_its_samples():
    data = make_result().to_dict()
    assert list(data["step_time"]) == ["median_s", "mean_s", "p10_s", "p90_s", "p99_s",
                                       "iqr_s", "n", "samples_s"]
    assert data["step_time"]["median_s"] == 0.055 and data["step_time"]["n"] == 3
    data["step_time"]["median_s"] = 9.0  # edited by hand: the samples decide
    back = store.load_dict(data)
    assert back.step_time.summary.median == 0.055 and back == make_result()


def test_unknown_version_and_kind_are_refused(tmp_path):
    data = store.to_dict(make_result())
    data["format_version"] = 99
    p = tmp_path / "v.json"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match="format_version 99"):
        store.load(p)
    data["format_version"] = store.FORMAT_VERSION
    data["kind"] = "banana"
    p.write_text(json.dumps(data))
    with pytest.raises(ResultFormatError, match="unknown kind 'banana'"):
        store.load(p)


def test_not_a_result(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("[1, 2]")
    with pytest.raises(ResultFormatError, match="not a pipecheck result"):
        store.load(p)
    p.write_text("{not json")
    with pytest.raises(ResultFormatError, match="not a readable JSON"):
        store.load(p)
    with pytest.raises(ResultFormatError, match="does not exist"):
        store.load(tmp_path / "missing.json")


def test_existing_file_is_not_overwritten_without_force(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("keep me")
    with pytest.raises(OutputExistsError, match="--force"):
        store.save(make_result(), p)
    assert p.read_text() == "keep me"
    store.save(make_result(), p, force=True)
    assert store.load(p) == make_result()


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    p = tmp_path / "r.json"

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(OSError):
        store.save(make_result(), p)
    assert list(tmp_path.iterdir()) == []


def test_missing_directory(tmp_path):
    with pytest.raises(OutputPathError, match="does not exist"):
        store.check_writable(tmp_path / "no" / "r.json", force=False)


@pytest.mark.parametrize("below", ["r.json", "sub/r.json"])
def test_a_file_where_a_directory_should_be(tmp_path, below):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputPathError, match=r"file is a file, not a directory"):
        store.check_writable(tmp_path / "file" / below, force=True)


def test_a_directory_where_the_file_should_be(tmp_path):
    with pytest.raises(OutputPathError, match="is a directory; give a file name"):
        store.check_writable(tmp_path, force=True)


def test_a_directory_nothing_can_be_created_in():
    # /proc refuses new files even to root (permission bits would not).
    with pytest.raises(OutputPathError, match="cannot create a file in /proc"):
        store.check_writable("/proc/r.json", force=False)


def test_the_writability_probe_leaves_nothing_behind(tmp_path):
    store.check_writable(tmp_path / "r.json", force=False)
    assert list(tmp_path.iterdir()) == []


def test_nan_is_written_as_null(tmp_path):
    r = make_result(step_time=Distribution.of([]))
    text = store.record_to_json(r)
    assert '"median_s": null' in text


def test_an_estimate_takes_its_statistic_and_n_from_the_distributions_summary():
    d = Distribution.of([0.05, 0.06, 0.055, 0.3, 0.052])
    assert d.summary is d.summary  # derived once
    e = Estimate.median_of(d)
    assert (e.value, e.n, e.statistic) == (d.summary.median, d.summary.n, "median") == \
        (0.055, 5, "median")
    assert (e.low, e.high) == d.median_ci() and e.low <= e.value <= e.high
    m = Estimate.mean_of(d, block=2)
    assert (m.value, m.n, m.statistic) == (d.summary.mean, 5, "mean")
    assert m.low < m.value < m.high
    assert Estimate.of(d.samples_s) == e and Estimate.of_mean(d.samples_s, 2) == m


def test_dumps_lays_a_record_out_one_key_and_one_list_item_a_line():
    data = {"kind": "imported", "events": [{"kind": "a", "line": 1}, {"kind": "b", "line": 2}],
            "samples": [0.5, 1.25, None], "nested": {"empty": {}, "none": [], "pairs": [[1, 2]]},
            "text": "caf\u00e9 \"q\""}
    text = store.dumps(data)
    assert json.loads(text) == data
    assert text.splitlines() == [
        "{",
        '  "kind": "imported",',
        '  "events": [',
        '    {"kind": "a", "line": 1},',
        '    {"kind": "b", "line": 2}',
        "  ],",
        '  "samples": [0.5, 1.25, null],',
        '  "nested": {',
        '    "empty": {},',
        '    "none": [],',
        '    "pairs": [',
        "      [1, 2]",
        "    ]",
        "  },",
        '  "text": "caf\\u00e9 \\"q\\""',
        "}"]
    with pytest.raises(ValueError):
        store.dumps({"x": float("nan")})


def test_an_encoded_array_is_written_as_json_writes_its_text():
    """Base64 text goes into the file between quotes without being scanned for escapes:
    the same characters json writes for it."""
    from pipecheck.records.codec import Base64Text, encode_array

    encoded = encode_array(np.random.default_rng(0).standard_normal(5000))
    assert type(encoded["zlib_base64"]) is Base64Text
    plain = {"column": {k: str(v) for k, v in encoded.items()}}
    assert store.dumps({"column": encoded}) == store.dumps(plain)
    assert json.loads(store.dumps({"column": encoded})) == plain
