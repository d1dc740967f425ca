"""``pipecheck whatif`` in-process on real records (tests/data/whatif/): the report, the
record it writes, and bad input as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipecheck.cli import main
from pipecheck.records import store
from pipecheck.records.whatif import WhatIfResult

from .test_cli_errors import one_line_error

DATA = Path(__file__).parents[2] / "data" / "whatif"
DATALOADER = DATA / "dataloader_calibrated_load20_cpu3.json"


def test_prediction_from_a_real_dataloader_record_and_its_record(capsys, tmp_path):
    out = tmp_path / "w.json"
    assert main(["whatif", str(DATALOADER), "--workers", "3", "--threads", "1",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pipecheck whatif: workers=3, buffer=2, threads=1, prefetch=2, cores=2" in text
    assert "binds: MapMapDataset(transform=CalibratedBatches)" in text
    assert "a dataloader record holds no T" in text and f"wrote {out}" in text
    data = json.loads(out.read_text())
    assert data["kind"] == "whatif" and data["format_version"] == store.FORMAT_VERSION
    assert data["setting"] == {"workers": 3, "per_worker_buffer": 2, "threads": 1,
                               "prefetch": 2, "cores": 2}
    loader = data["predicted_loader_s"]
    assert set(loader) == {"value", "low", "high"}
    assert loader["low"] < loader["value"] < loader["high"]
    # 20 ms of sleep and 3 ms of CPU per batch over 3 workers: between 2 and 1 worker's
    # measured D (11.7 ms and 23.8 ms in the record), near a third of one worker's
    assert 0.0065 < loader["value"] < 0.0095, loader
    assert data["predicted_step_s"] is None and data["binding"]
    again = store.load(out, expect=WhatIfResult)
    assert again.predicted_loader_s.value == loader["value"]


def test_more_cores_move_only_the_cpu_floor(capsys):
    assert main(["whatif", str(DATALOADER), "--workers", "8", "--threads", "4"]) == 0
    on_2 = capsys.readouterr().out
    assert main(["whatif", str(DATALOADER), "--workers", "8", "--threads", "4",
                 "--cores", "16"]) == 0
    on_16 = capsys.readouterr().out
    assert "binds: cpu-cores" in on_2 and "binds: cpu-cores" not in on_16
    assert "measured on 2 cores; predicted for 16" in on_16


def test_record_of_another_kind_is_refused(capsys, tmp_path):
    out = tmp_path / "w.json"
    assert main(["whatif", str(DATALOADER), "--json", str(out)]) == 0
    capsys.readouterr()
    err = one_line_error(capsys, ["whatif", str(out)], 2)
    assert "holds a 'whatif' record; whatif reads a 'compare' or 'dataloader'" in err


@pytest.mark.parametrize("text", ['{"a": 1}', "# a README, not JSON\n"])
def test_a_file_that_is_no_record_says_which_file_to_pass(capsys, tmp_path, text):
    path = tmp_path / "notes.json"
    path.write_text(text)
    err = one_line_error(capsys, ["whatif", str(path)], 2)
    assert str(path) in err
    assert err.rstrip().endswith("pass the file that pipecheck compare --json or pipecheck "
                                 "dataloader --json wrote")


def test_setting_outside_the_valid_range(capsys):
    err = one_line_error(capsys, ["whatif", str(DATALOADER), "--workers", "5000"], 2)
    assert "--workers" in err and "0<=x<=1024" in err
    err = one_line_error(capsys, ["whatif", str(DATALOADER), "--per-worker-buffer-size", "0"], 2)
    assert "--per-worker-buffer-size" in err and "1<=x<=1024" in err


def test_old_record_without_the_resources_is_bad_input(capsys, tmp_path):
    data = json.loads(DATALOADER.read_text())
    for s in data["results"]:
        s.pop("resources")
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    err = one_line_error(capsys, ["whatif", str(old)], 2)
    assert "no CPU and memory measurements" in err and "measure again" in err


def test_one_setting_is_no_prediction_in_one_line(capsys, tmp_path):
    data = json.loads(DATALOADER.read_text())
    data["results"] = data["results"][2:3]
    one = tmp_path / "one.json"
    one.write_text(json.dumps(data))
    err = one_line_error(capsys, ["whatif", str(one)], 1)
    assert "no prediction from" in err and "at least 2" in err


COMPARE = DATA / "compare_calibrated_load40_cpu2.json"
"""A real ``pipecheck compare`` run (calibrated: 10 ms of compute asked, 40 ms of sleep and
2 ms of CPU per batch; T 13.4 ms, 7 settings searched, 4 read threads without workers
chosen at 10.6 ms, R 12.1 ms)."""


def test_prediction_from_a_real_compare_record_gives_the_step_and_the_host(capsys, tmp_path):
    out = tmp_path / "w.json"
    assert main(["whatif", str(COMPARE), "--workers", "1", "--threads", "1",
                 "--json", str(out)]) == 0
    slow = capsys.readouterr().out
    data = json.loads(out.read_text())
    # one worker with one read thread was measured at 42.7 ms: the loader binds the step
    assert data["binding"] == "MapMapDataset(transform=CalibratedBatches)"
    step, loader = data["predicted_step_s"], data["predicted_loader_s"]
    assert set(step) == {"value", "low", "high"} and step["value"] >= loader["value"] * 0.8
    assert 0.030 < loader["value"] < 0.055, loader
    assert "no number of cores keeps up with T" in slow  # 40 ms of sleep is not CPU
    assert main(["whatif", str(COMPARE)]) == 0  # the chosen setting keeps up: compute binds
    chosen = capsys.readouterr().out
    assert "binds: compute (T = 13.4 ms" in chosen
    assert "keeps up with T (13.4 ms) from 1 core" in chosen
    assert "the cheapest setting predicted to keep up: workers=0, buffer=2, threads=4" in chosen


def test_read_latency_predicts_a_slower_loader_and_records_what_was_asked(capsys, tmp_path):
    assert main(["whatif", str(DATALOADER), "--workers", "1", "--threads", "4"]) == 0
    base = capsys.readouterr().out
    out = tmp_path / "slow.json"
    assert main(["whatif", str(DATALOADER), "--workers", "1", "--threads", "4",
                 "--read-latency", "2.5ms", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("pipecheck whatif: workers=1, buffer=2, threads=4, prefetch=8, "
                           "cores=2, every read 2.50 ms slower (model fitted to")
    assert "note: every read 2.50 ms slower: 32 reads a batch (one per example) add " \
           "80.0 ms of waiting per batch" in text
    assert "if MapMapDataset" in base and "were precomputed" not in text
    data = json.loads(out.read_text())
    assert data["read_latency_s"] == 0.0025 and data["reads_per_batch"] == 32
    slower = store.load(out, expect=WhatIfResult)
    assert slower.predicted_loader_s.value > 0.0


@pytest.mark.parametrize("value", ["30", "fast", "-3ms", "30 minutes", "nanms"])
def test_a_read_latency_that_does_not_parse_is_one_line_with_the_fix(capsys, value):
    err = one_line_error(capsys, ["whatif", str(DATALOADER), "--read-latency", value], 2)
    assert "--read-latency" in err and f"{value!r} is not a duration" in err
    assert "e.g. 30ms, 0.03s, 2.5ms or 500us" in err


def test_read_latency_on_a_record_without_examples_per_batch_is_one_line(capsys, tmp_path):
    data = json.loads(DATALOADER.read_text())
    for s in data["results"]:
        s["examples_per_batch"] = 0
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    err = one_line_error(capsys, ["whatif", str(path), "--read-latency", "30ms"], 2)
    assert str(path) in err and "examples per batch" in err
