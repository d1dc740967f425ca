"""Per-step data by column: the tuple API and the JSON form."""

from __future__ import annotations

import json

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
