"""The span log (starts, and ends with how many had started) resolved at fold time: the
spans, their depth and their steps are the ones that happened, whatever the order of
nesting, folds and reads, with an injected clock whose readings tie."""

from __future__ import annotations

import random

import numpy as np
import pytest

from pipecheck.measure.spans import SpanRecorder, close_interval, resolve_spans
from pipecheck.records.events import Span


class TieClock:
    """A clock that moves only when told (so many readings are equal)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def simulate(seed: int) -> None:
    """A random run of nested spans, garbage collections, marks and reads, checked
    against what happened."""
    rnd = random.Random(seed)
    clock = TieClock()
    rec = SpanRecorder(clock, annotate=False, raw_window=10**6, step_window=10**6)
    rec.start()
    names = ["a", "b", "c", "data_wait"]
    open_: list[tuple[object, str, float, int]] = []  # (context, name, start, depth)
    ended: list[tuple[str, float, float, int]] = []  # in the order they ended
    steps: list[list[Span]] = [[]]
    starts = [0.0]
    for _ in range(rnd.randrange(50, 400)):
        clock.t += rnd.choice([0.0, 0.0, 1.0, 2.5])
        op = rnd.random()
        if op < 0.4 and len(open_) < 5:
            name = rnd.choice(names)
            ctx = rec.span(name)
            ctx.__enter__()
            open_.append((ctx, name, clock.t, len(open_)))
        elif op < 0.8 and open_:
            ctx, name, t0, depth = open_.pop()
            ctx.__exit__(None, None, None)  # type: ignore[attr-defined]
            ended.append((name, t0, clock.t, depth))
            steps[-1].append(Span(name, t0, clock.t, depth))
        elif op < 0.92:
            rec.mark()
            steps.append([])
            starts.append(clock.t)
        elif op < 0.94:  # a garbage collection, timed elsewhere, at the depth open now
            clock.t += 0.5
            gc_span = Span("gc", clock.t - 0.25, clock.t, rec.depth)
            rec.add_span(gc_span)
            ended.append(("gc", gc_span.start, gc_span.end, len(open_)))
            steps[-1].append(gc_span)
            clock.t += 0.5
        elif op < 0.97:
            rec.snapshot()  # a fold now, spans open or ended after the last mark
        else:
            assert rec.depth == len(open_)
    while open_:
        ctx, name, t0, depth = open_.pop()
        ctx.__exit__(None, None, None)  # type: ignore[attr-defined]
        ended.append((name, t0, clock.t, depth))
        steps[-1].append(Span(name, t0, clock.t, depth))
    clock.t += 1.0
    rec.mark()
    starts.append(clock.t)
    assert [(s.name, s.start, s.end, s.depth) for s in rec.raw_spans] == ended
    got = rec.steps
    assert len(got) == len(steps)
    for i, spans in enumerate(steps):
        want = close_interval(i, starts[i], starts[i + 1], spans, [], None)
        assert got[i].spans == pytest.approx(want.spans), i


@pytest.mark.parametrize("seed", range(40))
def test_random_runs_resolve_to_what_happened(seed: int) -> None:
    simulate(seed)


def test_a_log_of_sequential_spans_inside_open_ones() -> None:
    # two spans open (started 0 and 1), then three that end before the next starts
    enters = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 9.0])
    exits = np.array([[2.5, 7, 3], [3.5, 8, 4], [4.5, 7, 5]])
    rows, still_open = resolve_spans(enters, exits)
    assert rows.tolist() == [[7, 2.0, 2.5, 2], [8, 3.0, 3.5, 2], [7, 4.0, 4.5, 2]]
    assert still_open.tolist() == [True, True, False, False, False, True]


def test_nested_ends_close_the_last_start_still_open() -> None:
    enters = np.array([0.0, 1.0, 2.0, 5.0])
    exits = np.array([[3.0, 1, 3], [4.0, 2, 3], [6.0, 3, 4]])
    rows, still_open = resolve_spans(enters, exits)
    assert rows.tolist() == [[1, 2.0, 3.0, 2], [2, 1.0, 4.0, 1], [3, 5.0, 6.0, 1]]
    assert still_open.tolist() == [True, False, False, False]


def test_a_malformed_log_ends_spans_with_no_length() -> None:
    rows, still_open = resolve_spans(np.array([1.0]), np.array([[0.5, 4, 0], [2.0, 5, 1]]))
    assert rows.tolist() == [[4, 0.5, 0.5, 0], [5, 1.0, 2.0, 0]]
    assert still_open.tolist() == [False]
