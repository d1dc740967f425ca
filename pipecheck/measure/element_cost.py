"""Per-element cost of the pipeline's expensive stage, timed apart from the timed batches.

Grain's stage timing gives each stage's total and its min/max per element, not the
distribution: whether a few elements cost many times the rest is not in it. So, after a
setting's batches are timed (never during: the measurement must not change what it
measures), the stage with the most processing time in Grain's summary is found in the
dataset's graph, and its function is called on the elements its parent gives, one at a
time in this process, each call timed: up to ``MAX_ELEMENTS`` elements or
``BUDGET_S`` seconds of calls. Only plain maps are timed (``MapMapDataset``,
``MapIterDataset``: a function of one element); a random map or a map with index, a
grain.DataLoader (no stage timing) and a pipeline without a map give nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from typing import Any, Callable, Iterable, Sequence, TypeVar

from pipecheck.data.grain_pipeline import (
    BatchedExamples,
    InputPipeline,
    MainProcessMap,
    grain_graph,
)
from pipecheck.records.dataloader import Stage

E = TypeVar("E")

MAX_ELEMENTS = 200
"""Elements timed at most: a tail of a few percent shows as several heavy elements."""

BUDGET_S = 1.0
"""Seconds of calls at most (an expensive stage is timed on fewer elements): a second
added to a ``pipecheck dataloader`` run, against the batches it times."""

RETIME_RATIO = 2.0
"""An element whose call took this many times the median or more is called again and keeps
the shorter time: a heavy element costs again, a busy machine's hiccup (a 5-15 ms time
slice lost on a loaded 2-core host) does not."""

TIMED_MAPS = ("MapMapDataset", "MapIterDataset")
"""Grain's datasets whose function takes one element (what is timed)."""


@dataclasses.dataclass(frozen=True)
class TimedStage:
    """The stage whose elements were timed, its costs, and elements per batch."""

    name: str
    costs: tuple[float, ...]
    per_batch: int


def _maps(dataset: InputPipeline) -> list[Any]:
    if isinstance(dataset, MainProcessMap):
        dataset = dataset.dataset
    root = dataset.examples if isinstance(dataset, BatchedExamples) else dataset
    return [n for n in grain_graph(root)
            if type(n).__name__ in TIMED_MAPS and len(getattr(n, "_parents", ())) == 1]


def expensive_map(dataset: InputPipeline, stages: Sequence[Stage],
                  name_of: Callable[[str], str]) -> tuple[Any, Stage] | None:
    """The map node of ``dataset`` that Grain's ``stages`` say took the most processing time,
    with its stage (``name_of``: a node's name as the stages give it); None when no timed
    stage is a plain map."""
    by_name = {name_of(str(n)): n for n in _maps(dataset)}
    timed = [s for s in stages if s.n > 0 and s.name in by_name]
    if not timed:
        return None
    top = max(timed, key=lambda s: s.total_s)
    return by_name[top.name], top


def _elements(parent: Any) -> Iterable[Any]:
    """The parent's elements in order: by index for a MapDataset (None: filtered out)."""
    if hasattr(parent, "__getitem__") and hasattr(parent, "__len__"):
        return (e for e in (parent[i] for i in range(len(parent))) if e is not None)
    return iter(parent)


def time_elements(fn: Callable[[E], object], elements: Iterable[E], *,
                  max_elements: int = MAX_ELEMENTS, budget_s: float = BUDGET_S,
                  clock: Callable[[], float] = time.perf_counter) -> tuple[float, ...]:
    """Seconds of each call ``fn(element)`` (the element fetched before the clock is read),
    until ``max_elements`` calls or ``budget_s`` seconds of calls; an element at
    ``RETIME_RATIO`` x the median or more is called again and keeps the shorter time."""

    def call(element: E) -> float:
        t0 = clock()
        fn(element)
        return clock() - t0

    kept: list[E] = []
    costs: list[float] = []
    for element in itertools.islice(elements, max_elements):
        kept.append(element)
        costs.append(call(element))
        if sum(costs) >= budget_s:
            break
    if costs:
        med = sorted(costs)[len(costs) // 2]
        costs = [min(c, call(e)) if c >= RETIME_RATIO * med else c
                 for e, c in zip(kept, costs, strict=True)]
    return tuple(costs)


PER_ELEMENT_COUNT_RATIO = 1.5
"""A stage that produced this many times the output stage's count (or more) works on the
batch's elements, not on whole batches (Grain's counts of worker stages lag each other by a
report or two, so the exact ratio is not the batch size)."""


def per_batch_of(stage: Stage, stages: Sequence[Stage], examples_per_batch: int) -> int:
    """Elements of ``stage`` per batch: ``examples_per_batch`` (the first batch's leading
    dimension) when Grain's counts say the stage works on elements, else 1 (it maps whole
    batches)."""
    out = next((s for s in stages if s.n > 0), None)
    if out is None or out is stage or stage.n < PER_ELEMENT_COUNT_RATIO * out.n:
        return 1
    return max(1, examples_per_batch)


def timed_stage(dataset: InputPipeline, stages: Sequence[Stage],
                name_of: Callable[[str], str], examples_per_batch: int, *,
                max_elements: int = MAX_ELEMENTS,
                budget_s: float = BUDGET_S,
                clock: Callable[[], float] = time.perf_counter) -> TimedStage | None:
    """The expensive stage's per-element costs (``expensive_map``, ``time_elements``)."""
    found = expensive_map(dataset, stages, name_of)
    if found is None:
        return None
    node, stage = found
    elements = _elements(node._parents[0])
    try:
        costs = time_elements(node._map_fn, elements, max_elements=max_elements,
                              budget_s=budget_s, clock=clock)
    finally:
        close = getattr(elements, "close", None)
        if close is not None:
            close()
    return TimedStage(stage.name, costs, per_batch_of(stage, stages, examples_per_batch)) \
        if costs else None
