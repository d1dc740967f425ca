"""Slow samples on real Grain pipelines, as ``pipecheck dataloader`` measures them: a user's
map where 5% of the elements cost 20x the rest (examples/heavy_tail.py, through the CLI)
gives a ``slow-samples`` finding whose predicted batch times agree with the measured ones;
a map of even costs gives none."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

import grain
import numpy as np
import pytest

from pipecheck.config import RunConfig
from pipecheck.data.grain_pipeline import BatchedExamples
from pipecheck.measure.dataloader import LoaderParts, measure_dataloader
from pipecheck.records import store
from pipecheck.records.dataloader import DataloaderResult
from pipecheck.report.dataloader import format_dataloader
from tests.conftest import REPO

from .doc_examples import skeleton_problems

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

CONFIG = RunConfig("demo", {"batch_size": 8})


def even(i):
    time.sleep(0.002)
    return np.full((4,), i, np.float32)


def _measure(fn) -> DataloaderResult:
    ds = BatchedExamples(grain.MapDataset.range(100_000).map(fn), 8)
    return measure_dataloader(CONFIG, workers=(0,), threads=(0,), batches=24,
                              device_put=False, parts=LoaderParts(ds, lambda b: b, None))


@pytest.fixture(scope="module")
def heavy(tmp_path_factory: pytest.TempPathFactory) -> DataloaderResult:
    out = tmp_path_factory.mktemp("slow_samples") / "heavy.json"
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="200")
    r = subprocess.run([sys.executable, "-m", "pipecheck", "dataloader", "--config",
                        "configs/heavy-tail.yml", "--workers", "0", "--batches", "24",
                        "--json", str(out)], capture_output=True, text=True, timeout=240,
                       env=env, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    assert skeleton_problems("dataloader-slow-samples", r.stdout) == []
    return store.load(pathlib.Path(out), expect=DataloaderResult)


def test_a_heavy_tail_is_a_slow_samples_finding(heavy: DataloaderResult):
    costs = heavy.element_costs
    assert costs is not None and costs.stage == "MapMapDataset(transform=decode)"
    assert costs.per_batch == 8 and costs.costs.summary.n == 200
    [f] = heavy.sample_findings
    assert f.kind == "slow-samples"
    n = f.numbers
    assert n["heavy_share"] == pytest.approx(0.05)  # 10 of the first 200 elements
    assert n["p99_s"] >= 0.020 and n["max_s"] >= 0.020  # a sleep lasts at least that long
    assert n["max_s"] > 8 * n["median_s"]
    assert n["inflation"] > 1.4
    # each batch waits for its elements: the predicted batch cost is the measured batch time
    # (no workers, no threads: the batch is built element by element), within load's margin
    assert 0.5 < n["measured_batch_median_s"] / n["predicted_batch_median_s"] < 2.0
    assert n["predicted_batch_p90_s"] > 1.5 * n["predicted_batch_median_s"]
    text = format_dataloader(heavy)
    assert "Per-element cost of MapMapDataset(transform=decode)" in text
    assert "Slow samples" in text and "bucket" in text


def test_even_costs_give_no_finding():
    res = _measure(even)
    assert res.element_costs is not None and res.sample_findings == ()
