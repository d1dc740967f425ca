"""Clean-up of a setting's iterators: closed, then collected before shared memory is
flushed, with nothing in ``release`` itself keeping one alive."""

from __future__ import annotations

import weakref

from pipecheck.measure import pipeline


class FakeIterator:
    closes: list[int] = []

    def close(self) -> None:
        FakeIterator.closes.append(id(self))


def test_release_closes_and_lets_every_iterator_be_collected_at_once(monkeypatch):
    waited: list[bool] = []
    real_wait = pipeline.wait_collected

    def wait(refs, wait_s=pipeline.ITERATOR_COLLECT_WAIT_S, poll_s=0.02):
        # no sleeping in a unit test: one collection must free them (poll_s unused)
        waited.append(real_wait(refs, wait_s=0.0, poll_s=poll_s))
        return waited[-1]

    monkeypatch.setattr(pipeline, "wait_collected", wait)
    monkeypatch.setattr(pipeline, "stop_workers", lambda keep: None)
    monkeypatch.setattr(pipeline, "flush_shared_memory_unlinks", lambda: None)
    iterators = [FakeIterator(), FakeIterator()]
    refs = [weakref.ref(it) for it in iterators]
    ids = [id(it) for it in iterators]
    pipeline.release(iterators, before=set(), failed=False)
    assert iterators == [] and FakeIterator.closes == ids
    # the last iterator was held by release's own loop variable: the wait ran out every
    # time (ITERATOR_COLLECT_WAIT_S, 5 s per measured setting)
    assert waited == [True]
    assert all(r() is None for r in refs)


def test_release_of_a_pipeline_that_opened_no_iterator_raises_nothing(monkeypatch):
    """A pipeline that failed while building its iterator (the user's dataset raised) leaves
    nothing to close: the clean-up must not raise and hide that error."""
    monkeypatch.setattr(pipeline, "stop_workers", lambda keep: None)
    monkeypatch.setattr(pipeline, "flush_shared_memory_unlinks", lambda: None)
    pipeline.release([], before=set(), failed=True)
