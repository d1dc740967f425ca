"""Per-step data by column: the tuple API and the JSON form."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from pipecheck.errors import ResultFormatError
from pipecheck.records.common import StepRecord
from pipecheck.records.imported import LogStep
from pipecheck.records.steps import StepTable, StepTableBuilder

ROWS = (
    StepRecord(0, 1.2, ("compile",), {"dispatch": 1.1, "other": 0.1}, 3.5),
    StepRecord(1, 0.05, (), {"sync": 0.05}, None),
    StepRecord(2, 0.06, ("checkpoint", "gc"), {}, 3.25),
    StepRecord(3, 0.055, (), {"sync": 0.04, "data_wait": 0.01}, 3.0),
)


def test_a_table_behaves_like_the_tuple_of_its_rows():
    t = StepTable.from_rows(StepRecord, ROWS)
    assert len(t) == 4 and list(t) == list(ROWS)
    assert t == ROWS and ROWS == t and t != ROWS[:3]
    assert t[1] == ROWS[1] and t[-1] == ROWS[-1]
    assert t[1:3] == ROWS[1:3] and t[::-1] == ROWS[::-1]
    with pytest.raises(IndexError):
        t[4]
    assert t.column("time_s").tolist() == [1.2, 0.05, 0.06, 0.055]
    assert np.isnan(t.column("loss")[1])
    assert t.tag_mask(["gc", "compile"]).tolist() == [True, False, True, False]
    assert t.tagged() == {0: ("compile",), 2: ("checkpoint", "gc")}
    assert t.take([3, 0]) == (ROWS[3], ROWS[0])
    assert t.with_tags({1: ("outlier",)})[1].tags == ("outlier",)
    spans = t.map_columns("spans")
    assert set(spans) == {"dispatch", "other", "sync", "data_wait"}
    assert np.isnan(spans["sync"][0]) and spans["sync"][1] == 0.05


def test_json_form_round_trips_exactly_and_is_columnar():
    t = StepTable.from_rows(StepRecord, ROWS)
    data = json.loads(json.dumps(t.to_json()))
    assert data["n"] == 4
    assert set(data["columns"]) == {"step", "time_s", "tags", "spans", "loss"}
    assert data["columns"]["tags"]["names"] == ["compile", "checkpoint", "gc"]
    assert set(data["columns"]["time_s"]) == {"dtype", "zlib_base64"}
    assert StepTable.from_json(StepRecord, data) == ROWS


def test_log_steps_keep_their_metrics_and_line_numbers():
    rows = (LogStep(0, 41.7, ("compile",), 10.8, 0.5, 73.9, {"total_weights": 32768.0}, 22),
            LogStep(1, 0.512, (), None, None, None, {"learning_rate": 2.9e-05}, 23))
    t = StepTable.from_rows(LogStep, rows)
    assert StepTable.from_json(LogStep, json.loads(json.dumps(t.to_json()))) == rows
    as_steps = t.as_rows_of(StepRecord)
    assert as_steps[0] == StepRecord(0, 41.7, ("compile",), {}, 10.8)


def test_malformed_columns_are_one_line_errors():
    data = StepTable.from_rows(StepRecord, ROWS).to_json()
    bad = json.loads(json.dumps(data))
    bad["columns"]["speed"] = bad["columns"]["time_s"]
    with pytest.raises(ResultFormatError, match=r"unexpected column\(s\) \['speed'\]"):
        StepTable.from_json(StepRecord, bad)
    bad = json.loads(json.dumps(data))
    bad["n"] = 5
    with pytest.raises(ResultFormatError, match=r"steps\.step has 4 values, expected 5"):
        StepTable.from_json(StepRecord, bad)
    bad = json.loads(json.dumps(data))
    bad["columns"]["time_s"]["zlib_base64"] = "not base64!"
    with pytest.raises(ResultFormatError, match="steps.time_s cannot be decoded"):
        StepTable.from_json(StepRecord, bad)
    bad = json.loads(json.dumps(data))
    bad["columns"]["loss"]["dtype"] = "object"
    with pytest.raises(ResultFormatError, match="dtype 'object'"):
        StepTable.from_json(StepRecord, bad)


def test_a_million_step_record_stays_small():
    n = 1_000_000
    rng = np.random.default_rng(0)
    b = StepTableBuilder(LogStep)
    b.append(step=0, time_s=40.0, metrics={"total_weights": 32768.0}, line=1)
    t = b.build()
    # a million MaxText-like steps (values printed with three decimals), built by column
    columns = {
        "step": np.arange(n, dtype=np.int64),
        "time_s": np.round(0.5 + rng.gamma(50, 0.0002, n), 3),
        "loss": np.round(10 * np.exp(-np.arange(n) / 3e5) + rng.normal(0, 0.01, n), 3),
        "tflops_per_s_per_device": np.round(41 + rng.normal(0, 0.3, n), 3),
        "tokens_per_s_per_device": np.round(6000 + rng.normal(0, 30, n), 3),
        "line": np.arange(n, dtype=np.int64) + 40,
    }
    t = StepTable(LogStep, n, columns, maps={"metrics": {"total_weights": np.full(n, 32768.0)}})
    text = json.dumps(t.to_json())
    assert len(text) < 25e6  # well under the 50 MB a million-step record may take
    assert sum(c.nbytes for c in columns.values()) < 50e6



def test_parallel_encoding_gives_the_bytes_of_one_at_a_time(monkeypatch):
    from pipecheck.records import steps as steps_mod

    rng = np.random.default_rng(0)
    arrays = [np.round(rng.gamma(20, 0.0256, 300_000), 3), np.arange(200_000),
              np.array([1.5, 2.5])]  # the last below PARALLEL_MIN_BYTES: encoded at once
    serial = [steps_mod.encode_array(a) for a in arrays]
    monkeypatch.setattr(steps_mod.os, "cpu_count", lambda: 4)  # threads even on one CPU
    with steps_mod.parallel_encoding():
        deferred = [steps_mod.encode_array(a) for a in arrays]
        assert [d["zlib_base64"] == "" for d in deferred] == [True, True, False]
    assert deferred == serial
    for a, d in zip(arrays, deferred, strict=True):
        assert np.array_equal(steps_mod.decode_array(d, "x"), a)
    # an error inside leaves nothing deferred for the next encoding
    with pytest.raises(RuntimeError), steps_mod.parallel_encoding():
        steps_mod.encode_array(arrays[0])
        raise RuntimeError("boom")
    assert steps_mod.encode_array(arrays[0]) == serial[0]


def test_an_array_compressed_ahead_encodes_as_it_would_now(monkeypatch):
    from pipecheck.records import steps as steps_module

    rng = np.random.default_rng(0)
    a = rng.standard_normal(300_000)  # 2.4 MB: past PARALLEL_MIN_BYTES
    small = np.arange(10.0)
    expected = steps_module.encode_array(a)
    steps_module.compress_ahead([a, small])
    assert id(a) in steps_module._AHEAD and id(small) not in steps_module._AHEAD
    assert steps_module.encode_array(a) == expected
    assert id(a) not in steps_module._AHEAD  # taken once
    b = rng.standard_normal(300_000)
    steps_module.compress_ahead([b])
    key = id(b)
    steps_module._AHEAD[key].result()
    del b  # an array freed (once compressed) before it is encoded leaves nothing behind
    deadline = time.monotonic() + 10
    while key in steps_module._AHEAD and time.monotonic() < deadline:
        time.sleep(0.01)  # the compressing thread lets go of it as it ends
    assert key not in steps_module._AHEAD


def test_an_error_while_compressing_ahead_is_raised_where_the_result_is_taken(monkeypatch):
    from pipecheck.records import steps as steps_module

    def fail(data):
        raise MemoryError("no room")

    monkeypatch.setattr(steps_module, "_zlib_base64", fail)
    a, b = np.zeros(300_000), np.ones(300_000)
    steps_module.compress_ahead([a, b])
    for x in (a, b):  # the error, not a wait that never ends
        with pytest.raises(MemoryError, match="no room"):
            steps_module.encode_array(x)


def test_an_array_not_yet_compressed_ahead_is_compressed_where_it_is_taken(monkeypatch):
    """Writing does not wait for the one thread compressing ahead to reach an array it
    has not started: that array is compressed where it is taken, the same bytes."""
    import threading

    from pipecheck.records import steps as steps_module

    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(300_000), rng.standard_normal(300_000)
    expected = steps_module.encode_array(b)
    release = threading.Event()
    real = steps_module._zlib_base64
    held, finished = [], []

    def first_held(data):
        if not held:
            held.append(threading.current_thread().name)
            release.wait(30)  # the first array ahead: busy until released
            finished.append(True)
        return real(data)

    monkeypatch.setattr(steps_module, "_zlib_base64", first_held)
    steps_module.compress_ahead([a, b])
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        time.sleep(0.01)
    assert held and held[0].startswith("pipecheck-compress")
    assert steps_module.encode_array(b) == expected  # b not started: compressed here
    assert not finished  # ... not after the thread ahead got through a, then b
    release.set()
    assert np.array_equal(steps_module.decode_array(steps_module.encode_array(a), "a"), a)
    assert id(a) not in steps_module._AHEAD and id(b) not in steps_module._AHEAD
