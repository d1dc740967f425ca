"""compare's loader stage: how many batches to time, the setting to save."""

from __future__ import annotations

import dataclasses
import re

import pytest

from pipecheck.analysis.steady_state import loader_estimate
from pipecheck.measure.dataloader import LoaderParts
from pipecheck.measure.loader_search import batches_for, best_setting
from pipecheck.progress import NO_PROGRESS
from pipecheck.records.common import Distribution
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import (
    DEFAULT_PER_WORKER_BUFFER,
    GrainSettings,
    default_prefetch,
)


def test_batches_cover_the_start_up_buffer():
    assert batches_for(0, 30) == 30
    assert batches_for(8, 30) == 64  # 4 x 8 workers x 2 buffered


def measured(workers: int, mean_ms: float, first_s: float = 1.0) -> LoaderSetting:
    """A setting as `pipecheck dataloader` measured it: steady batches of ``mean_ms``."""
    samples = [mean_ms / 1000.0] * 20
    knobs = GrainSettings(workers, DEFAULT_PER_WORKER_BUFFER, 1, default_prefetch(1))
    return LoaderSetting(
        settings=knobs, first_batch_s=first_s,
        batch_time=Distribution.of(samples), batches_per_s=1000.0 / mean_ms,
        examples_per_s=32000.0 / mean_ms,
        loader_time=loader_estimate(samples, workers, knobs.per_worker_buffer,
                                    parallel=knobs.parallel_reads(), read_prefetch=knobs.prefetch))


def test_the_setting_saved_is_the_cheapest_near_the_fastest_not_the_first_or_last():
    # what `pipecheck dataloader --save-config` writes: 4 workers are within the tuner's
    # margin of 8 (the fastest), 2 are not, so 4, the fewest that are near it
    settings = [measured(0, 120.0), measured(2, 60.0), measured(4, 31.0), measured(8, 30.0)]
    chosen, why = best_setting(settings)
    assert chosen.workers == 4, why
    assert "workers=4" in why


def test_the_setting_saved_weighs_start_up_against_the_run():
    # 8 workers save 10 ms a batch but start 20 s later: worth it over 10,000 steps, not 100
    settings = [measured(2, 40.0, first_s=1.0), measured(8, 30.0, first_s=21.0)]
    assert best_setting(settings, run_steps=10_000)[0].workers == 8
    short, why = best_setting(settings, run_steps=100)
    assert short.workers == 2 and "first batch takes 21.00 s" in why, why


def _fake_measure(asked: list):
    """measure_setting as a fake: records the setting asked for; D falls with the workers."""
    import dataclasses

    def measure(dataset, settings, n_batches, **kwargs):
        asked.append(settings)
        d = dataclasses.replace(measured(settings.workers, 40.0 / (1 + settings.workers)),
                                settings=settings)
        return d

    return measure


def test_a_pipeline_with_its_own_read_options_is_searched_over_workers_only(monkeypatch):
    """A MaxText-shaped IterDataset sets grain.ReadOptions(num_threads=4, ...) itself: every
    setting tried keeps it (pipecheck cannot change it), only workers are searched, and the
    choice says so."""
    import grain

    from pipecheck.measure import loader_search as ls

    own = (grain.MapDataset.range(64).map(lambda i: {"inputs": i})
           .to_iter_dataset(grain.ReadOptions(num_threads=4, prefetch_buffer_size=16))
           .batch(4))
    asked: list = []
    monkeypatch.setattr(ls, "measure_setting", _fake_measure(asked))
    choice = ls.search_loader(LoaderParts(own, lambda b: b, None), 0.012,
                              ls.SearchOptions(batches=5, threads=1, max_workers=4,
                                               ram_budget_mb=1e6),
                              progress=NO_PROGRESS)
    assert asked and {(s.threads, s.prefetch) for s in asked} == {(4, 16)}
    assert len({s.workers for s in asked}) == len(asked) > 1
    assert (choice.chosen.threads, choice.chosen.prefetch) == (4, 16)
    assert choice.warnings and "num_threads=4, prefetch_buffer_size=16" in choice.warnings[0]
    with pytest.raises(ls.ConfigError, match="--threads 2 cannot change"):
        ls.search_loader(LoaderParts(own, lambda b: b, None), 0.012,
                         ls.SearchOptions(batches=5, threads=2, max_workers=4,
                                          search_threads=False), progress=NO_PROGRESS)


def test_a_map_dataset_still_gets_its_read_threads_searched(monkeypatch):
    """The joint search tries read threads on a pipeline that does not fix them (the model
    search asks for them when the model predicts they help: test_model_search.py)."""
    import grain

    from pipecheck.measure import loader_search as ls

    asked: list = []
    monkeypatch.setattr(ls, "measure_setting", _fake_measure(asked))
    ls.search_loader(LoaderParts(grain.MapDataset.range(64), lambda b: b, None), 0.001,
                     ls.SearchOptions(batches=5, threads=1, max_workers=2, ram_budget_mb=1e6,
                                      search="joint"),
                     progress=NO_PROGRESS)
    assert len({s.threads for s in asked}) > 1


def test_a_pipeline_read_without_a_prefetch_buffer_runs_on_the_calling_thread():
    """``to_iter_dataset()`` with no options stores ReadOptions(num_threads=16,
    prefetch_buffer_size=0): Grain then starts no read thread. Reported as it runs."""
    import grain

    from pipecheck.data.grain_pipeline import own_settings

    plain = grain.MapDataset.range(8).to_iter_dataset()
    assert own_settings(plain).read == (16, 0)
    as_run = own_settings(plain).applied(GrainSettings(2))
    assert (as_run.workers, as_run.threads) == (2, 0)
    assert "prefetch_buffer_size=0) in its to_iter_dataset) (a prefetch buffer of 0: Grain " \
           "reads on the calling thread, so threads=0)" in own_settings(plain).note()
    assert own_settings(grain.MapDataset.range(8)).read is None  # pipecheck reads it


def _own_workers_pipeline(workers: int = 2, buffer: int = 3):
    """A user's IterDataset with its own ReadOptions and its own mp_prefetch (real Grain)."""
    import grain

    return (grain.MapDataset.range(64).map(lambda i: {"x": i})
            .to_iter_dataset(grain.ReadOptions(num_threads=2, prefetch_buffer_size=4))
            .batch(4)
            .mp_prefetch(grain.MultiprocessingOptions(num_workers=workers,
                                                      per_worker_buffer_size=buffer)))


def test_a_pipeline_with_its_own_workers_is_measured_as_it_is_and_nothing_searched(monkeypatch):
    """Its own mp_prefetch fixes the workers and its ReadOptions the reads: compare measures
    the pipeline once, as it runs, says so, and refuses what it would have to ignore."""
    from pipecheck.measure import loader_search as ls

    own = _own_workers_pipeline(workers=2, buffer=3)
    asked: list = []
    monkeypatch.setattr(ls, "measure_setting", _fake_measure(asked))
    parts = LoaderParts(own, lambda b: b, None)
    choice = ls.search_loader(parts, 0.001,
                              ls.SearchOptions(batches=5, threads=1, max_workers=4,
                                               ram_budget_mb=1e6),
                              progress=NO_PROGRESS)
    assert [(s.workers, s.per_worker_buffer, s.threads, s.prefetch) for s in asked] == \
        [(2, 3, 2, 4)]
    assert choice.tuning.stop == "pipeline" and "measured as it is" in choice.tuning.reason
    assert "its own worker processes (mp_prefetch(grain.MultiprocessingOptions(" \
           "num_workers=2, per_worker_buffer_size=3)))" in choice.warnings[0]
    for opts, message in (
            (dict(workers=(3,)), "--workers 3 cannot change this pipeline's worker processes: "
                                 "it calls mp_prefetch(grain.MultiprocessingOptions("
                                 "num_workers=2, per_worker_buffer_size=3)) itself"),
            (dict(threads=4, search_threads=False), "--threads 4 cannot change this "
                                                    "pipeline's read threads"),
            (dict(max_workers_given=True), "--max-workers 4 has nothing to search"),
            (dict(fixed=GrainSettings(4)), "the config's num_workers 4 cannot change")):
        with pytest.raises(ls.ConfigError, match=re.escape(message)):
            ls.refuse_ignored(parts, ls.SearchOptions(**{"batches": 5, "threads": 1,
                                                         "max_workers": 4, **opts}))
    # asking for what the pipeline runs anyway is no conflict
    ls.refuse_ignored(parts, ls.SearchOptions(batches=5, threads=2, max_workers=4,
                                              workers=(2,), search_threads=False))


def test_the_configs_own_setting_is_measured_first_as_loaded(monkeypatch):
    """A config that asks for its own Grain setting (MaxText's keys: here 2 workers and 8
    read threads) is measured first, before the search's own first setting, and is the
    baseline the chosen setting is judged against; the search is as without it."""
    import grain

    from pipecheck.data.grain_pipeline import own_settings
    from pipecheck.measure import loader_search as ls

    dataset = grain.MapDataset.range(64)
    own = GrainSettings(2, DEFAULT_PER_WORKER_BUFFER, 8, default_prefetch(8))
    opts = ls.SearchOptions(batches=5, threads=1, max_workers=4, ram_budget_mb=1e6,
                            search="joint")
    plain: list = []
    monkeypatch.setattr(ls, "measure_setting", _fake_measure(plain))
    ls.search_loader(LoaderParts(dataset, lambda b: b, None), 0.001, opts,
                     progress=NO_PROGRESS)
    asked: list = []
    monkeypatch.setattr(ls, "measure_setting", _fake_measure(asked))
    choice = ls.search_loader(LoaderParts(dataset, lambda b: b, None), 0.001,
                              dataclasses.replace(opts, start=own), progress=NO_PROGRESS)
    assert asked[0] == own and asked[1:] == plain
    assert choice.settings[0].settings == own
    assert choice.baseline is not None and choice.baseline.settings == own
    # the search's own first setting, an option or a saved config: nothing measured first
    for start_opts in (dict(start=GrainSettings(0)), dict(start=own, workers=(1,)),
                       dict(start=own, fixed=GrainSettings(1)),
                       dict(start=own, threads=2, search_threads=False)):
        assert ls._own_start(own_settings(dataset), GrainSettings(threads=1),
                             dataclasses.replace(opts, **start_opts)) is None, start_opts


def test_a_configs_own_setting_the_data_set_cannot_fill_leaves_the_search_as_it_is(
        monkeypatch):
    """MaxText's default read prefetch (500 elements) on a short data set: the config's own
    setting runs out of batches; compare says so and searches as without it."""
    import grain

    from pipecheck.errors import PipelineExhaustedError
    from pipecheck.measure import loader_search as ls

    own = GrainSettings(1, 1, 16, 500)
    asked: list = []
    fake = _fake_measure(asked)

    def measure(dataset, settings, n_batches, **kwargs):
        if settings == own:
            raise PipelineExhaustedError("the input pipeline (...) ran out of batches after 200")
        return fake(dataset, settings, n_batches, **kwargs)

    monkeypatch.setattr(ls, "measure_setting", measure)
    choice = ls.search_loader(
        LoaderParts(grain.MapDataset.range(64), lambda b: b, None), 0.001,
        ls.SearchOptions(batches=5, threads=1, max_workers=2, ram_budget_mb=1e6,
                         search="joint", start=own), progress=NO_PROGRESS)
    assert own not in [s.settings for s in choice.settings]
    assert choice.settings[0].settings == asked[0] == GrainSettings(0)
    (note,) = [w for w in choice.warnings if "the config's own setting" in w]
    assert "workers=1" in note and "ran out of batches after 200" in note
