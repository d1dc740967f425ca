"""The storage what-if on a real slow FUSE mount: ``pipecheck dataloader`` measures an
ArrayRecord pipeline at one latency per read, and ``pipecheck whatif --read-latency``
predicts D at a latency it did not see, within a margin of D measured there."""

from __future__ import annotations

import pathlib

import pytest

from pipecheck.cli import main
from pipecheck.records import store
from pipecheck.records.dataloader import DataloaderResult
from pipecheck.records.whatif import WhatIfResult
from pipecheck.testing.storage_pipeline import config_text, write_array_record
from tests.storage_fixtures import slow_mount  # noqa: F401

MARGIN = 0.25
"""The benchmark's largest error allowed (docs/performance.md): a short run on a shared
machine, so the test allows its ceiling rather than its median goal."""


def _dataloader(mount_dir: pathlib.Path, tmp: pathlib.Path, name: str, *args: str
                ) -> DataloaderResult:
    cfg = tmp / f"{name}.yml"
    cfg.write_text(config_text(mount_dir / "data.array_record"))
    out = tmp / f"{name}.json"
    assert main(["dataloader", "--config", str(cfg), "--no-device-put", "--batches", "30",
                 "--json", str(out), *args]) == 0
    return store.load(out, expect=DataloaderResult)


@pytest.mark.timing  # it judges a measured D: run with the timing tests, on pinned cores
def test_prediction_at_an_unseen_latency_is_near_its_measurement(slow_mount, tmp_path,  # noqa: F811
                                                                 capsys):
    src = tmp_path / "src"
    src.mkdir()
    write_array_record(src / "data.array_record", records=600)
    base = _dataloader(slow_mount(src, latency_s=0.002).path, tmp_path, "base",
                       "--workers", "0,1", "--threads", "1,4")
    slower = _dataloader(slow_mount(src, latency_s=0.010).path, tmp_path, "slower",
                         "--workers", "0", "--threads", "4")
    measured = slower.results[0].loader_time.value
    out = tmp_path / "whatif.json"
    capsys.readouterr()
    assert main(["whatif", str(tmp_path / "base.json"), "--workers", "0", "--threads", "4",
                 "--read-latency", "8ms", "--json", str(out)]) == 0
    assert "every read 8.00 ms slower" in capsys.readouterr().out
    predicted = store.load(out, expect=WhatIfResult).predicted_loader_s.value
    as_measured = min(s.loader_time.value for s in base.results
                      if (s.workers, s.threads) == (0, 4))
    # the latency added moves D well past the base's noise: the test can tell a model that
    # ignores it (predicts the base D) from one that adds it
    assert measured > 2 * as_measured
    assert abs(predicted - measured) / measured < MARGIN, (predicted, measured)
