"""``pipecheck whatif`` in-process on real records (tests/data/whatif/): the report, the
record it writes, and bad input as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

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


def test_setting_outside_the_valid_range(capsys):
    err = one_line_error(capsys, ["whatif", str(DATALOADER), "--workers", "5000"], 2)
    assert "--workers" in err and "0<=x<=1024" in err
    err = one_line_error(capsys, ["whatif", str(DATALOADER), "--buffer", "0"], 2)
    assert "--buffer" in err


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
