"""`pipecheck synthetic` on real JAX: the target step time is the compute time."""

from __future__ import annotations

import json
import statistics
import time

import pytest

from pipecheck.measure.synthetic import measure_synthetic
from pipecheck.records import store
from pipecheck.records.codec import decode_array
from pipecheck.records.common import StepRecord
from pipecheck.records.steps import StepTable
from pipecheck.workloads import build_workload, resolve

from ..conftest import run_cli
from .doc_examples import skeleton_problems

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

AGREEMENT = 0.20
"""The bound: synthetic median within 20% of the sync-every-step compute time."""


def sync_every_step_times(workload, steps):
    """The reference: the same step, in isolation, waiting for each one to finish."""
    state = workload.init_state()
    batch = workload.put(workload.host_batch())
    state, m = workload.train_step(state, batch)
    m["loss"].block_until_ready()
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        state, m = workload.train_step(state, batch)
        m["loss"].block_until_ready()
        out.append(time.perf_counter() - t0)
    return out


def test_synthetic_median_matches_isolated_compute_time():
    cfg = resolve({"workload": "calibrated", "compute_ms": 60})
    workload = build_workload(cfg)
    ratios = []
    # Short side-by-side pairs: this machine's speed drifts in phases lasting seconds, so
    # only adjacent measurements are comparable; the median of the pair ratios ignores the
    # one pair a phase change may straddle.
    for _ in range(8):
        result = measure_synthetic(cfg, steps=8, workload=workload)
        reference = sync_every_step_times(workload, 6)
        ratios.append(result.step_time.summary.median / statistics.median(reference))
    ratio = statistics.median(ratios)
    assert abs(ratio - 1.0) <= AGREEMENT, ratios
    load = result.machine_load  # other processes' CPU over the steps, read around them
    assert load is not None and load.target is not None and load.cores >= 1
    assert load.target.wall_s >= sum(result.step_time.samples_s)


def run_synthetic_json(tmp_path, name, *sets):
    out = tmp_path / f"{name}.json"
    args = ["synthetic", "--steps", "6", "--json", str(out)]
    for s in sets:
        args += ["--set", s]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text()), proc


def test_first_step_includes_the_compilation(tmp_path):
    # A fresh process: JAX's compilation cache is per process and keyed on the function.
    data, _ = run_synthetic_json(tmp_path, "c60", "workload=calibrated", "compute_ms=60")
    c = data["compile"]
    assert c["train_step_compiles"] == 1 and c["compile_s"] > 0
    steps = StepTable.from_json(StepRecord, data["steps"])  # stored by column
    assert "compile" in steps[0].tags  # (a gc tag may come with it)
    assert c["first_step_s"] >= c["compile_s"]  # the first step includes the compilation
    assert c["first_step_s"] > 1.5 * data["step_time"]["median_s"]
    assert all("compile" not in s.tags for s in steps[1:])


def test_aot_sharding_mismatch_compiles_twice_and_is_explained(tmp_path):
    data, proc = run_synthetic_json(tmp_path, "bad", "workload=calibrated", "compute_ms=5",
                                    "devices=4", "aot_sharding_mismatch=true")
    c = data["compile"]
    assert c["train_step_compiles"] == 2
    (finding,) = c["findings"]
    assert finding["kind"] == "recompile"
    assert finding["location"] == "batch['x']"
    assert "sharding" in finding["message"]
    assert "sharding=" in finding["fix"]
    assert data["env"]["device_count"] == 4
    assert "changed sharding" in proc.stdout
    assert skeleton_problems("synthetic-double-compile", proc.stdout) == []  # docs/synthetic.md

    good, _ = run_synthetic_json(tmp_path, "good", "workload=calibrated", "compute_ms=5",
                                 "devices=4", "aot_sharding_mismatch=false")
    assert good["compile"]["train_step_compiles"] == 1
    assert good["compile"]["findings"] == []


def test_default_demo_run_writes_a_complete_record(tmp_path):
    data, proc = run_synthetic_json(tmp_path, "demo")
    assert skeleton_problems("synthetic-default", proc.stdout) == []  # docs/synthetic.md
    assert data["kind"] == "synthetic" and data["format_version"] == store.FORMAT_VERSION
    assert data["config"]["workload"] == "demo"
    for key in ("jax", "jaxlib", "grain", "tfds", "backend", "device_kind", "device_count",
                "host", "python"):
        assert data["env"][key] is not None, key
    st = data["step_time"]
    # 6 steps less the first and the drain
    assert st["n"] == decode_array(st["samples_s"], "samples_s").size == 4
    assert st["p10_s"] <= st["median_s"] <= st["p90_s"]
    t = data["throughput"]
    assert t["tokens_per_s"] > t["examples_per_s"] > 0
    assert t["tflops_per_s"] > 0 and t["peak_memory_bytes"] > 0
    assert data["steps"]["n"] == 6
    assert "target step time median" in proc.stdout
    assert any("only 4 steady-state" in w for w in data["warnings"])


def test_user_workload_from_entry_points(tmp_path):
    out = tmp_path / "user.json"
    proc = run_cli("synthetic", "--config", "configs/user-example.yml", "--steps", "8",
                   "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["config"]["workload"]["train_step"] == "examples/my_model.py:train_step"
    assert data["compile"]["train_step_compiles"] == 1
    assert data["throughput"]["examples_per_s"] > 0
