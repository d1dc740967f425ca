"""Timing a stage's elements: each call timed with the element fetched outside the clock,
within the element and time budgets (fake clock); the expensive map found in a real Grain
graph by Grain's stage names."""

from __future__ import annotations

import grain

from pipecheck.data.grain_pipeline import BatchedExamples
from pipecheck.measure.dataloader import short_stage_name
from pipecheck.measure.element_cost import expensive_map, per_batch_of, time_elements
from pipecheck.records.dataloader import Stage
from tests.fakes import FakeClock


def test_each_call_is_timed_and_the_budget_stops_it():
    clock = FakeClock()

    def elements():
        for i in range(100):
            clock.advance(5.0)  # fetching an element is not the stage's cost
            yield i

    def fn(i):
        clock.advance(1.0 if i % 4 else 3.0)

    assert time_elements(fn, elements(), max_elements=5, budget_s=100, clock=clock) == (
        3.0, 1.0, 1.0, 1.0, 3.0)
    assert time_elements(fn, elements(), max_elements=50, budget_s=6, clock=clock) == (
        3.0, 1.0, 1.0, 1.0)


def test_a_hiccup_is_timed_again_and_a_heavy_element_stays_heavy():
    clock = FakeClock()
    calls: list[int] = []

    def fn(i):
        calls.append(i)
        hiccup = i == 2 and calls.count(2) == 1  # the machine was busy the first time only
        clock.advance(10.0 if hiccup else 3.0 if i == 5 else 1.0)

    assert time_elements(fn, iter(range(8)), budget_s=100, clock=clock) == (
        1.0, 1.0, 1.0, 1.0, 1.0, 3.0, 1.0, 1.0)
    assert calls == [0, 1, 2, 3, 4, 5, 6, 7, 2, 5]  # the two slow ones, again


def decode(i):
    return i * 2


def scale(x):
    return x + 1


def test_the_expensive_map_is_the_one_grain_timed_longest():
    ds = BatchedExamples(grain.MapDataset.range(10).map(decode).map(scale), 4)
    stages = (Stage("BatchDatasetIterator(batch_size=4, drop_remainder=True)", "main", 0.0,
                    0.001, 0.0001, 10),
              Stage("MapMapDataset(transform=scale)", "main", 0.1, 0.01, 0.0002, 40),
              Stage("MapMapDataset(transform=decode)", "main", 0.9, 0.5, 0.01, 40))
    node, stage = expensive_map(ds, stages, short_stage_name)
    assert node._map_fn is decode and stage is stages[2]
    assert per_batch_of(stage, stages, 4) == 4
    assert per_batch_of(stages[1], stages[:2], 4) == 4
    on_batches = Stage("MapIterDataset(transform=scale)", "main", 0.1, 0.01, 0.0002, 11)
    assert per_batch_of(on_batches, (stages[0], on_batches), 4) == 1  # maps whole batches
    assert expensive_map(ds, stages[:1], short_stage_name) is None
