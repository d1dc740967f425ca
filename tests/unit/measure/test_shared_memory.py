"""A failed pipeline reclaims its own workers' shared memory and nobody else's."""

from __future__ import annotations

from multiprocessing import shared_memory

import pytest

from pipecheck.data import grain_pipeline
from pipecheck.measure import pipeline


@pytest.fixture
def restore_names():
    original = shared_memory._make_filename  # type: ignore[attr-defined]
    yield
    shared_memory._make_filename = original  # type: ignore[attr-defined]


def _exists(name: str) -> bool:
    try:
        shared_memory.SharedMemory(name=name).close()
    except FileNotFoundError:
        return False
    return True


def test_tagged_segments_are_reclaimed_and_others_are_left_alone(restore_names):
    tag = grain_pipeline.new_shm_tag()
    other = shared_memory.SharedMemory(create=True, size=64)  # another process's, untagged
    other_tag = shared_memory.SharedMemory(create=True, size=64)
    try:
        grain_pipeline.tag_shared_memory_names(tag)
        ours = [shared_memory.SharedMemory(create=True, size=64) for _ in range(3)]
        for s in ours:
            assert s.name.startswith(f"psm_{tag}")
            s.close()
        names = [s.name for s in ours]
        assert pipeline.reclaim_shared_memory(tag) == 3
        assert not any(_exists(n) for n in names)
        assert _exists(other.name) and _exists(other_tag.name)
        assert pipeline.reclaim_shared_memory(tag) == 0
    finally:
        for s in (other, other_tag):
            s.close()
            s.unlink()


def test_worker_init_tags_then_runs_the_inner_init(restore_names):
    calls = []
    init = grain_pipeline.TagSharedMemory("pcdeadbeef_", lambda i, n: calls.append((i, n)))
    init(1, 4)
    seg = shared_memory.SharedMemory(create=True, size=16)
    try:
        assert seg.name.startswith("psm_pcdeadbeef_")
    finally:
        seg.close()
        seg.unlink()
    assert calls == [(1, 4)]
