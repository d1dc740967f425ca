"""``pipecheck whatif`` end to end: a real ``pipecheck dataloader`` run with Grain workers
(calibrated: 12 ms of sleep and 1 ms of CPU per batch), then the prediction for a worker
count it did not measure, in subprocesses."""

from __future__ import annotations

import json

import pytest

from ..conftest import run_cli

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""


def test_whatif_predicts_a_worker_count_the_run_did_not_measure(tmp_path):
    run, out = tmp_path / "dl.json", tmp_path / "w.json"
    proc = run_cli("dataloader", "--set", "workload=calibrated", "--set", "load_ms=12",
                   "--set", "cpu_ms=1", "--workers", "0,1,2", "--batches", "16",
                   "--no-device-put", "--json", str(run), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    measured = {r["settings"]["workers"]: r["loader_time"]["value"]
                for r in json.loads(run.read_text())["results"]}
    proc = run_cli("whatif", str(run), "--workers", "4", "--json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["setting"]["workers"] == 4 and data["predicted_step_s"] is None
    loader = data["predicted_loader_s"]
    # a sleeping transform: 4 workers are predicted faster than the 2 measured, and no
    # faster than the ideal 2x (4 workers overlap twice the sleeping of 2); how much faster
    # depends on how well 2 workers scaled on this machine (on a busy one, less)
    assert 0.45 * measured[2] < loader["value"] < measured[2], (loader, measured)
    assert data["loader_binding"] in ("MapMapDataset(transform=CalibratedBatches)",
                                      "main-process", "cpu-cores")
    assert "predicted loader time D:" in proc.stdout and f"wrote {out}" in proc.stdout
