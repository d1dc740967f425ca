"""What a user's own Grain pipeline fixes itself, read from Grain's dataset graph (real Grain
datasets, built as users write them; nothing is iterated, no worker starts)."""

from __future__ import annotations

import grain
import pytest

from pipecheck.data.grain_pipeline import (
    IN_PROCESS,
    Asked,
    BatchedExamples,
    MainProcessMap,
    OwnSettings,
    build_iter_dataset,
    own_settings,
)
from pipecheck.errors import ConfigError
from pipecheck.records.grain_settings import GrainSettings


def read(threads: int = 4, prefetch: int = 16) -> grain.IterDataset:
    return (grain.MapDataset.range(64).map(lambda i: {"x": i})
            .to_iter_dataset(grain.ReadOptions(num_threads=threads,
                                               prefetch_buffer_size=prefetch))
            .batch(4))


def mp(ds: grain.IterDataset, workers: int, buffer: int = 1) -> grain.IterDataset:
    return ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=workers,
                                                       per_worker_buffer_size=buffer))


@pytest.mark.parametrize("workers", [1, 2, 5])
def test_its_own_mp_prefetch_is_found_with_its_workers_and_buffer(workers):
    assert own_settings(mp(read(), workers, buffer=3)) == OwnSettings((4, 16), (workers, 3))


def test_found_below_what_follows_it_and_through_main_process_maps():
    """Transforms after mp_prefetch (in the training process), packing, and pipecheck's own
    MainProcessMap wrapper do not hide it; neither do read options below the workers."""
    ds = grain.experimental.FirstFitPackIterDataset(
        read(), length_struct={"x": 4}, num_packing_bins=2)
    ds = mp(ds, 2, buffer=2).map(lambda b: b).batch(2)
    assert own_settings(ds) == OwnSettings((4, 16), (2, 2))
    assert own_settings(MainProcessMap(ds, lambda b: b)) == OwnSettings((4, 16), (2, 2))


def test_mp_prefetch_without_options_is_grains_ten_workers():
    ds = grain.MapDataset.range(8).to_iter_dataset().mp_prefetch()
    assert own_settings(ds) == OwnSettings((16, 0), (10, 1))


def test_pipelines_pipecheck_sets_fix_nothing():
    examples = grain.MapDataset.range(8).map(lambda i: {"x": i})
    assert own_settings(examples) == OwnSettings()
    assert own_settings(BatchedExamples(examples, 4)) == OwnSettings()
    assert own_settings(read()) == OwnSettings((4, 16), None)  # its reads only
    assert own_settings(mp(read(), 0)) == OwnSettings((4, 16), None)  # Grain: a no-op


def test_pipecheck_adds_no_second_mp_prefetch():
    """A setting with workers keeps the pipeline's one mp_prefetch: Grain's graph of what
    pipecheck builds still has exactly the pipeline's 2 workers (not 2 more, nested)."""
    own = mp(read(), 2, buffer=3)
    built = build_iter_dataset(own, GrainSettings(workers=4), stage_timing=True)
    assert own_settings(built).workers == (2, 3)
    # a pipeline without its own gets pipecheck's workers
    assert own_settings(build_iter_dataset(read(), GrainSettings(workers=4))).workers == (4, 2)
    assert own_settings(build_iter_dataset(read(), IN_PROCESS)).workers is None


def test_the_settings_as_they_run_are_the_pipelines_own():
    own = OwnSettings((4, 16), (2, 3))
    asked = GrainSettings(workers=8, per_worker_buffer=1, threads=1, prefetch=2)
    assert own.applied(asked) == GrainSettings(2, 3, 4, 16)
    assert OwnSettings((4, 16)).applied(asked) == GrainSettings(8, 1, 4, 16)
    assert OwnSettings().applied(asked) == asked


def test_values_the_pipeline_would_not_run_with_are_refused_naming_the_fix():
    own = OwnSettings((16, 64), (2, 1))
    with pytest.raises(ConfigError) as e:
        own.refuse([Asked("--workers", "workers", (0, 3))])
    assert str(e.value) == (
        "--workers 0,3 cannot change this pipeline's worker processes: it calls "
        "mp_prefetch(grain.MultiprocessingOptions(num_workers=2, per_worker_buffer_size=1)) "
        "itself; drop --workers, or remove mp_prefetch from the pipeline to let pipecheck set "
        "the workers")
    with pytest.raises(ConfigError) as e:
        own.refuse([Asked("--threads", "threads", (4,))])
    assert str(e.value).startswith(
        "--threads 4 cannot change this pipeline's read threads: it sets "
        "grain.ReadOptions(num_threads=16, prefetch_buffer_size=64) in its own "
        "to_iter_dataset; drop --threads")
    with pytest.raises(ConfigError, match="per-worker buffer"):
        own.refuse([Asked("--per-worker-buffer-size", "per_worker_buffer", (2,))])
    with pytest.raises(ConfigError, match="read prefetch buffer"):
        own.refuse([Asked("the config's prefetch_buffer_size", "prefetch", (8,))])
    # what it runs with anyway, and knobs it does not fix, pass
    own.refuse([Asked("--workers", "workers", (2,)), Asked("--threads", "threads", (16,))])
    OwnSettings((16, 64)).refuse([Asked("--workers", "workers", (0, 3)),
                                  Asked("--max-workers", "max_workers", (8,))])
    OwnSettings().refuse([Asked("--threads", "threads", (4,))])
