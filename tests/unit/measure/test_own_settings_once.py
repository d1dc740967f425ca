"""What a pipeline fixes itself (``own_settings``, a walk of its Grain graph) is read once
per pipeline (``LoaderParts.own``) and handed to every setting measured on it."""

from __future__ import annotations

from pipecheck.data import grain_pipeline
from pipecheck.measure import dataloader
from pipecheck.measure import loader_search as ls
from pipecheck.measure.dataloader import LoaderParts
from pipecheck.progress import NO_PROGRESS
from pipecheck.records.grain_settings import GrainSettings


def _counted(monkeypatch) -> list[object]:
    """Every dataset ``own_settings`` reads, wherever it is called from."""
    read: list[object] = []
    real = grain_pipeline.own_settings

    def counted(dataset):
        read.append(dataset)
        return real(dataset)

    for module in (grain_pipeline, dataloader):
        monkeypatch.setattr(module, "own_settings", counted)
    return read


def test_the_search_reads_the_pipelines_own_settings_once(monkeypatch):
    import grain

    pipeline = (grain.MapDataset.range(64).map(lambda i: {"x": i})
                .to_iter_dataset(grain.ReadOptions(num_threads=2, prefetch_buffer_size=4))
                .batch(4))
    read = _counted(monkeypatch)
    asked: list[GrainSettings] = []

    def measure(dataset, settings, n_batches, *, own, **kwargs):
        asked.append(settings)
        assert own.read == (2, 4)  # handed over, not read again
        return dataloader_setting(settings)

    monkeypatch.setattr(ls, "measure_setting", measure)
    parts = LoaderParts(pipeline, lambda b: b, None)
    opts = ls.SearchOptions(batches=5, threads=1, max_workers=4, ram_budget_mb=1e6)
    ls.refuse_ignored(parts, opts)
    ls.search_loader(parts, 0.001, opts, progress=NO_PROGRESS)
    assert len(asked) > 1 and read == [pipeline]


def dataloader_setting(settings: GrainSettings):
    from pipecheck.records.common import Distribution, Estimate
    from pipecheck.records.dataloader import LoaderSetting

    samples = [0.04 / (1 + settings.workers)] * 10
    return LoaderSetting(settings=settings, first_batch_s=0.5,
                         batch_time=Distribution.of(samples), batches_per_s=1 / samples[0],
                         examples_per_s=4 / samples[0],
                         loader_time=Estimate.mean_of(Distribution.of(samples)))


def test_a_setting_measured_with_the_settings_given_does_not_read_them_again(monkeypatch):
    import grain

    pipeline = grain.MapDataset.range(16).batch(4)
    own = grain_pipeline.own_settings(pipeline)
    read = _counted(monkeypatch)
    s = dataloader.measure_setting(pipeline, GrainSettings(0, threads=1), 3, put=None,
                                   tokens_key=None, stage_wait_s=0.0, resources=False, own=own)
    assert s.settings.workers == 0 and read == []
    dataloader.measure_setting(pipeline, GrainSettings(0, threads=1), 3, put=None,
                               tokens_key=None, stage_wait_s=0.0, resources=False)
    assert read == [pipeline]  # not given: read there, once
