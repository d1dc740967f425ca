"""A user's grain.DataLoader rebuilt with pipecheck's setting: the same batches in the same
order (same source, sampler, operations), with the worker count pipecheck chose."""

from __future__ import annotations

import itertools

import grain
import numpy as np

from pipecheck.data.grain_dataloader import is_data_loader, with_settings
from pipecheck.data.grain_pipeline import build_iter_dataset
from pipecheck.records.grain_settings import GrainSettings


class Source:
    def __len__(self):
        return 100

    def __getitem__(self, i):
        return {"x": np.full((2,), i, np.int64)}


class AddOne(grain.transforms.Map):
    def map(self, element):
        return {"x": element["x"] + 1}


def loader(worker_count=0):
    return grain.DataLoader(
        data_source=Source(),
        sampler=grain.samplers.IndexSampler(100, shuffle=True, seed=3, num_epochs=1,
                                            shard_options=grain.sharding.NoSharding()),
        operations=[AddOne(), grain.transforms.Batch(4, drop_remainder=True)],
        worker_count=worker_count)


def test_a_data_loader_is_recognised():
    assert is_data_loader(loader())
    assert not is_data_loader(grain.MapDataset.range(3))
    assert not is_data_loader([1, 2])


def test_rebuilt_with_pipecheck_settings_it_yields_the_users_batches():
    theirs = [b["x"].tolist() for b in itertools.islice(iter(loader(worker_count=0)), 5)]
    ours = [b["x"].tolist() for b in
            itertools.islice(iter(with_settings(loader(), GrainSettings(0, 2, 2, 4))), 5)]
    assert ours == theirs
    assert theirs[0] != [[1, 1], [2, 2], [3, 3], [4, 4]]  # shuffled: the sampler is kept


def test_build_iter_dataset_takes_a_data_loader():
    it = iter(build_iter_dataset(loader(), GrainSettings(workers=0, threads=1)))
    assert next(it)["x"].shape == (4, 2)


def test_clean_up_waits_until_closed_iterators_are_collected(monkeypatch):
    import time
    import types
    import weakref

    from pipecheck.measure import pipeline
    from pipecheck.measure.pipeline import wait_collected

    class Iterator:
        pass

    held = Iterator()
    gone = Iterator()
    refs = [weakref.ref(gone)]
    del gone
    assert wait_collected(refs, wait_s=0.0)

    # A prefetch thread's pending task holds the iterator a moment longer: it lets go
    # while wait_collected waits (at its first pause between collections), never at a
    # time that a loaded machine could move past the wait.
    holder = [held]
    refs = [weakref.ref(held)]
    del held
    pauses = []

    def pause(seconds):
        pauses.append(seconds)
        holder.clear()

    monkeypatch.setattr(pipeline, "time", types.SimpleNamespace(monotonic=time.monotonic,
                                                                sleep=pause))
    assert wait_collected(refs, wait_s=60.0)
    assert len(pauses) == 1  # it waited once, then found the iterator gone
    monkeypatch.undo()
    alive = Iterator()
    assert not wait_collected([weakref.ref(alive)], wait_s=0.05)  # gives up after the wait
