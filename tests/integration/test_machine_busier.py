"""A real compare run whose machine gets busier during its real-data run: two CPU hogs start
when compare announces the real-data phase on stderr, and stop when it moves on. The record
shows the other processes' load during R above T's, and the verdict names the busier
machine, not loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.integration.busier_machine import busier_machine

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

HOGS = 2
"""One per core of the 2-core test machine: compute spread over both cores slows clearly."""

HOG = "while True: pass"


def test_hogs_started_with_the_real_data_run_are_named_not_loading(tmp_path):
    out = tmp_path / "c.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.setdefault("PIPECHECK_DATA_DIR", str(REPO / ".pytest_cache" / "pipecheck_data"))
    # compute-bound on a quiet machine: 30 ms of compute, a loader that sleeps 3 ms a batch
    # (a steady D; a loader that costs nothing is all noise)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pipecheck", "compare", "--set", "workload=calibrated",
         "--set", "compute_ms=30", "--set", "load_ms=3", "--workers", "0", "--batches", "20",
         "--steps", "40", "--target-steps", "20", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO)
    hogs: list[subprocess.Popen] = []
    seen = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            seen.append(line)
            if "[3/4] real-data training" in line:
                hogs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(HOGS)]
            elif "real-data step time R" in line:
                break
        for h in hogs:
            h.kill()
        stdout, rest = proc.communicate(timeout=300)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "".join(seen)[-3000:] + rest[-3000:]
    assert hogs, "compare never announced its real-data phase"
    data = json.loads(out.read_text())
    load = data["machine_load"]
    real, target = load["real"], load["target"]
    assert real["other_cpu_s"] / real["wall_s"] > target["other_cpu_s"] / target["wall_s"]
    assert data["verdict"] == "inconclusive", data["verdict_reason"]
    assert "the machine got busier during the real-data run" in data["verdict_reason"]
    assert "competes" not in data["verdict_reason"]
    assert not [f for f in data["findings"] if f["kind"] == "interference"]
    assert busier_machine(data) is not None  # what the other tests rerun on
    assert "other processes' CPU while measuring (cores of " in stdout
