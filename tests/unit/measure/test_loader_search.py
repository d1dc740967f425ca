"""compare's loader stage: how many batches to time, D for settings read from older files."""

from __future__ import annotations

import pytest

from pipecheck.measure.loader_search import batches_for, with_loader_time
from pipecheck.records.common import Distribution
from pipecheck.records.dataloader import LoaderSetting


def test_batches_cover_the_start_up_buffer():
    assert batches_for(0, 30) == 30
    assert batches_for(8, 30) == 64  # 4 x 8 workers x 2 buffered


def test_a_setting_without_a_stored_d_gets_it_from_its_batch_times():
    samples = [0.0001] * 4 + [0.030] * 16
    old = LoaderSetting(workers=2, threads=1, first_batch_s=1.0,
                        batch_time=Distribution.of(samples), batches_per_s=0.0,
                        examples_per_s=0.0)
    assert old.loader_time is None
    filled = with_loader_time(old)
    assert filled.loader_time is not None and filled.loader_time.value == pytest.approx(0.030)
    assert with_loader_time(filled) is filled
