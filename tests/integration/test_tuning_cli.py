"""Tuning end to end: real Grain workers, calibrated loaders that hit each limit on purpose,
the CLI in a subprocess run from outside the repository.

Short pipelines (a few ms to tens of ms per batch). Assertions are about which limit the
measured resources show, not about absolute times.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from pipecheck.analysis.loader.whatif import too_unsure
from pipecheck.measure.whatif_check import CHECK_SECONDS
from pipecheck.records.whatif import Interval

from ..conftest import run_cli
from .doc_examples import skeleton_problems

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""


def _dataloader(tmp_path, *args):
    out = tmp_path / "dl.json"
    proc = run_cli("dataloader", "--set", "workload=calibrated", "--json", str(out),
                   "--no-device-put", "--force", *args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc, json.loads(out.read_text())


def test_consumer_work_in_the_training_process_is_main_process_bound_and_saved(tmp_path):
    saved = tmp_path / "tuned.yml"
    proc, data = _dataloader(tmp_path, "--set", "consumer_ms=20", "--set", "load_ms=4",
                             "--workers", "2", "--batches", "20", "--save-config", str(saved))
    (setting,) = data["results"]
    res = setting["resources"]
    assert skeleton_problems("tuning-main-process-bound", proc.stdout) == []  # docs/tuning.md
    assert res["workers_seen"] == 2 and res["worker_rss_mb"] > 0 and res["main_rss_mb"] > 0
    # the resource window holds the steady batches only: past the 2 x 2 worker buffers and
    # the workers' read prefetch of 2 each
    assert res["batches"] == 20 - 8, res
    assert [f["kind"] for f in data["limit_findings"]] == ["main-process-bound"], \
        (res, data["limit_findings"], setting["stages"])
    assert "main-process-bound [workers=2, threads=1]" in proc.stdout, proc.stdout
    assert "main process" in proc.stdout and "RSS per worker" in proc.stdout
    # the saved config is a config: --config reads it back and measures that setting
    text = saved.read_text()
    cfg = yaml.safe_load(text)
    assert cfg["num_workers"] == 2 and cfg["consumer_ms"] == 20
    assert cfg["measured_on"]["command"] == "dataloader"
    proc2, again = _dataloader(tmp_path, "--config", str(saved), "--batches", "5")
    assert [(r["settings"]["workers"], r["settings"]["per_worker_buffer"],
             r["settings"]["threads"], r["settings"]["prefetch"])
            for r in again["results"]] == [(2, cfg["per_worker_buffer_size"],
                                            cfg["num_threads"], cfg["prefetch_buffer_size"])]
    assert "another machine" not in proc2.stderr


def test_sleeping_loader_is_latency_bound_and_cpu_heavy_one_is_cpu_bound(tmp_path):
    proc, data = _dataloader(tmp_path, "--set", "load_ms=30", "--workers", "2",
                             "--batches", "16")
    assert "latency-bound [workers=2, threads=1]" in proc.stdout
    # 36 steady batches of ~15 ms: psutil's CPU times tick every 10 ms, so a window of a
    # few tens of ms (16 batches of 15 ms of CPU: no steady window) can misread the share
    proc, data = _dataloader(tmp_path, "--set", "cpu_ms=30", "--workers", "3",
                             "--batches", "48")
    assert "cpu-bound [workers=3, threads=1]" in proc.stdout, proc.stdout
    assert skeleton_problems("tuning-cpu-bound", proc.stdout) == []  # docs/tuning.md


def test_another_machine_warns_once_on_stderr(tmp_path):
    saved = tmp_path / "tuned.yml"
    saved.write_text("workload: calibrated\nload_ms: 1\nnum_workers: 0\n"
                     "measured_on: {cpu_count: 96, host: tpu-host-7}\n")
    proc, data = _dataloader(tmp_path, "--config", str(saved), "--batches", "3")
    warnings = [ln for ln in proc.stderr.splitlines() if "another machine" in ln]
    assert len(warnings) == 1
    assert "cpu_count 96 there" in warnings[0] and "host tpu-host-7 there" in warnings[0]
    assert data["results"][0]["settings"]["workers"] == 0


def test_save_config_path_clash_and_existing_file_fail_before_measuring(tmp_path):
    existing = tmp_path / "tuned.yml"
    existing.write_text("keep")
    proc = run_cli("dataloader", "--set", "workload=calibrated", "--save-config",
                   str(existing), cwd=tmp_path)
    assert proc.returncode == 2 and "exists; pass --force" in proc.stderr
    assert "Traceback" not in proc.stderr and existing.read_text() == "keep"
    same = tmp_path / "x.json"
    proc = run_cli("dataloader", "--set", "workload=calibrated", "--save-config", str(same),
                   "--json", str(same), cwd=tmp_path)
    assert proc.returncode == 2 and "name the same file" in proc.stderr


def test_compare_searches_read_threads_and_saves_the_setting_it_chose(tmp_path):
    """A sleeping loader: read threads in the training process are the cheapest fix."""
    out, saved = tmp_path / "c.json", tmp_path / "tuned.yml"
    proc = run_cli("compare", "--set", "workload=calibrated", "--set", "compute_ms=20",
                   "--set", "load_ms=40", "--steps", "20", "--target-steps", "10",
                   "--batches", "12", "--json", str(out), "--save-config", str(saved),
                   cwd=tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    chosen = data["tuning"]["chosen"]
    assert data["tuning"]["meets_target"] is True
    tried = [(s["settings"]["workers"], s["settings"]["threads"]) for s in data["loader"]]
    assert any(t > 1 for _, t in tried)  # the threads were searched
    # 40 ms of sleep per batch against ~27 ms (compute_ms=20: the chain is sized from
    # the fastest calibration timings, so a step takes longer than asked): 2 workers meet
    # the goal, and so do 2 read threads without workers, the cheaper setting
    assert (chosen["workers"], chosen["threads"] > 1) == (0, True), tried
    # compare checks its loader model on a setting the search did not try (docs/whatif.md)
    check = data["whatif_check"]
    knobs = check["setting"]
    assert (knobs["workers"], knobs["threads"]) not in tried
    predicted, measured = check["predicted_loader_s"], check["measured_loader_s"]
    assert predicted["low"] <= predicted["value"] <= predicted["high"]
    assert 0.5 < predicted["value"] / measured["value"] < 2.0, check
    assert "what-if self-check: " in proc.stdout
    # the check times at least CHECK_SECONDS of batches as predicted (24 batches of a few
    # ms would be a window one scheduling hiccup moves)
    said = re.search(r"what-if self-check: .*, predicted ([\d.]+) (ms|s); measuring (\d+) "
                     r"batches", proc.stderr)
    assert said is not None, proc.stderr[-2000:]
    seconds = float(said[1]) * (1e-3 if said[2] == "ms" else 1.0)
    assert int(said[3]) * seconds >= CHECK_SECONDS * 0.99, said[0]
    # a reading too unsure to judge a 10% error is read once more, longer, and says so
    first_n, first = int(said[3]), check["first_measured_loader_s"]
    if check["reads"] == 2:
        assert first is not None and check["batches"] >= 2 * first_n, check
        assert too_unsure(Interval.from_dict(first)), check
        assert f"reading {check['batches']} batches" in proc.stderr
    else:
        assert (check["reads"], check["batches"], first) == (1, first_n, None), check
        assert (not too_unsure(Interval.from_dict(measured))
                or "not read longer" in proc.stderr), proc.stderr[-2000:]
    cfg = yaml.safe_load(saved.read_text())
    assert (cfg["num_workers"], cfg["num_threads"], cfg["per_worker_buffer_size"],
            cfg["prefetch_buffer_size"]) == (chosen["workers"], chosen["threads"],
                                             chosen["per_worker_buffer"], chosen["prefetch"])
    assert cfg["measured_on"]["command"] == "compare"
    assert f"wrote {saved}" in proc.stdout
