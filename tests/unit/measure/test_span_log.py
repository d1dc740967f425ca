"""The span log (starts' clock readings and ends' markers in the order they happened, and
the ends' clock readings) resolved at fold time: the spans, their depth and their steps are
the ones that happened, whatever the order of nesting, folds and reads, with an injected
clock whose readings tie."""

from __future__ import annotations

import ast
import pathlib
import random
import struct

import numpy as np
import pytest

from pipecheck.measure import spans as spans_module
from pipecheck.measure.span_fold import close_interval, end_marker, read_log, resolve_spans
from pipecheck.measure.spans import SpanRecorder
from pipecheck.records.events import Span
from tests.fakes import FakeClock


def simulate(seed: int) -> None:
    """A random run of nested spans, garbage collections, marks and reads, checked
    against what happened."""
    rnd = random.Random(seed)
    clock = FakeClock()
    rec = SpanRecorder(clock, annotate=False, raw_window=10**6, step_window=10**6)
    rec.start()
    names = ["a", "b", "c", "data_wait"]
    open_: list[tuple[object, str, float, int]] = []  # (context, name, start, depth)
    ended: list[tuple[str, float, float, int]] = []  # in the order they ended
    steps: list[list[Span]] = [[]]
    starts = [0.0]
    for _ in range(rnd.randrange(50, 400)):
        clock.advance(rnd.choice([0.0, 0.0, 1.0, 2.5]))
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
            clock.advance(0.5)
            gc_span = Span("gc", clock.t - 0.25, clock.t, rec.depth)
            rec.add_span(gc_span)
            ended.append(("gc", gc_span.start, gc_span.end, len(open_)))
            steps[-1].append(gc_span)
            clock.advance(0.5)
        elif op < 0.955:
            rec.read_logs()  # the logs read into arrays now, folded later
        elif op < 0.97:
            rec.snapshot()  # a fold now, spans open or ended after the last mark
        else:
            assert rec.depth == len(open_)
    while open_:
        ctx, name, t0, depth = open_.pop()
        ctx.__exit__(None, None, None)  # type: ignore[attr-defined]
        ended.append((name, t0, clock.t, depth))
        steps[-1].append(Span(name, t0, clock.t, depth))
    clock.advance(1.0)
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


def test_end_markers_are_nans_that_carry_their_name() -> None:
    ids = [0, 1, 2, 255, 256, 70_000, 2**32 - 1]
    markers = [end_marker(i) for i in ids]
    assert all(np.isnan(m) for m in markers)
    starts, exits = read_log([0.5, *markers], [1.0 + i for i in range(len(ids))])
    assert starts.tolist() == [0.5]
    assert exits[:, 1].tolist() == ids
    assert exits[:, 0].tolist() == [1.0 + i for i in range(len(ids))]
    assert exits[:, 2].tolist() == [1] * len(ids)  # each end came after the one start
    for bad in (-1, 2**32):
        with pytest.raises(ValueError, match="out of range"):
            end_marker(bad)


def test_a_log_reads_as_starts_and_ends_with_how_many_had_started() -> None:
    a, b = end_marker(3), end_marker(0)
    # start, start, end (b), start, end (a), end (a): nested, then one inside the first
    log = [1.0, 2.0, b, 4.0, a, a, 7.0]
    starts, exits = read_log(log, [3.0, 5.0, 6.0])
    assert starts.tolist() == [1.0, 2.0, 4.0, 7.0]
    assert exits.tolist() == [[3.0, 0, 2], [5.0, 3, 3], [6.0, 3, 3]]
    rows, still_open = resolve_spans(starts, exits)
    assert rows.tolist() == [[0, 2.0, 3.0, 1], [3, 4.0, 5.0, 1], [3, 1.0, 6.0, 0]]
    assert still_open.tolist() == [False, False, False, True]
    # an end past the last marker (its marker is not logged yet) is not read
    starts, exits = read_log(log, [3.0, 5.0, 6.0, 8.0])
    assert exits[:, 0].tolist() == [3.0, 5.0, 6.0]


def test_a_clock_that_reads_nan_starts_a_span_and_ends_none() -> None:
    starts, exits = read_log([float("nan"), 2.0, end_marker(1), end_marker(1)], [3.0, 4.0])
    assert np.isnan(starts[0]) and starts[1] == 2.0
    assert exits[:, 2].tolist() == [2, 2]


@pytest.mark.parametrize("bits", [0x7FF8_0000_0000_0001, 0xFFF8_0000_0000_0000,
                                  0x7FFD_2C5B_0000_0000, 0x7FFD_2C5A_0000_0000 ^ (1 << 63)])
def test_a_clock_that_reads_a_nan_with_a_payload_starts_a_span(bits: int) -> None:
    """A NaN whose payload is not an end marker's (a signalling one, a negative one, one a
    bit away from the tag) is a start, in a recorder as in the log alone."""
    odd = struct.unpack("<d", struct.pack("<Q", bits))[0]
    readings = iter([0.0, odd, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    rec = SpanRecorder(lambda: next(readings), annotate=False)
    rec.start()
    for _ in range(3):
        with rec.span("a"):
            pass
    rec.mark()
    got = [(s.name, s.start, s.end) for s in rec.raw_spans]
    assert np.isnan(got[0][1]) and got[0][2] == 2.0
    assert got[1:] == [("a", 3.0, 4.0), ("a", 5.0, 6.0)]
    assert len(rec.steps) == 1


def test_an_end_whose_marker_is_not_logged_yet_is_folded_whole_later() -> None:
    """A fold from a signal handler between an end's clock reading and its marker takes
    the spans logged whole, and the next fold the one it interrupted."""
    clock = FakeClock()
    rec = SpanRecorder(clock, annotate=False)
    rec.start()
    ctx = rec.span("io")
    for t in (1.0, 2.0):  # one whole span, 1.0 to 2.0
        clock.t = t
        ctx.__enter__() if t == 1.0 else ctx.__exit__(None, None, None)
    clock.t = 3.0
    ctx.__enter__()
    clock.t = 4.0
    rec._ends.append(clock())  # the second span's end, as its ``__exit__`` logs it first
    assert [(s.start, s.end) for s in rec.raw_spans] == [(1.0, 2.0)]
    rec.fold()  # the interrupted end stays in the logs
    rec._log.append(end_marker(rec.name_id("io")))  # ... and its ``__exit__`` goes on
    clock.t = 5.0
    rec.mark()
    assert [(s.name, s.start, s.end, s.depth) for s in rec.raw_spans] == [
        ("io", 1.0, 2.0, 0), ("io", 3.0, 4.0, 0)]
    assert rec.steps[0].spans["io"] == pytest.approx(2.0)


def test_a_log_of_alternating_starts_and_ends_reads_the_same_way() -> None:
    a, b = end_marker(0), end_marker(1)
    starts, exits = read_log([1.0, a, 3.0, b], [2.0, 4.0])
    assert starts.tolist() == [1.0, 3.0]
    assert exits.tolist() == [[2.0, 0, 1], [4.0, 1, 2]]
    # a start whose clock read NaN where an end would be: three starts, one end
    starts, exits = read_log([1.0, float("nan"), 2.0, b], [5.0])
    assert starts[[0, 2]].tolist() == [1.0, 2.0] and np.isnan(starts[1])
    assert exits.tolist() == [[5.0, 1, 3]]


def test_a_fold_between_a_marks_counts_and_its_append_leaves_later_folds_working() -> None:
    """A signal handler may fold after a mark read the logs' lengths and before it appended
    them: that step's count is stale (its spans go to the next step, as they always did),
    and the folds after it still work."""
    clock = FakeClock()
    rec = SpanRecorder(clock, annotate=False)
    rec.start()
    ctx = rec.span("a")
    for step in range(3):
        clock.advance(1)
        ctx.__enter__()
        clock.advance(1)
        ctx.__exit__(None, None, None)
        clock.advance(1)
        stale = (clock.t, 1.0, len(rec._spans), len(rec._ends))
        if step == 1:
            rec.fold()
        rec._marks.append(stale)
    assert len(rec.steps) == 3
    for _ in range(3):
        clock.advance(1)
        rec.mark()
    assert len(rec.steps) == 6 and rec.steps[0].spans["a"] == pytest.approx(1.0)


def test_only_the_recorder_touches_its_logs() -> None:
    """The span log and the mark layout have one owner: no other module of pipecheck that
    uses the recorder reads or writes its private state (a loop that times spans inline
    uses ``log_start``, ``end_logger`` and ``take_mark``)."""
    private = {name for name in vars(SpanRecorder()) if name.startswith("_")}
    package = pathlib.Path(spans_module.__file__).parents[1]
    touched = []
    for path in sorted(package.rglob("*.py")):
        if path == pathlib.Path(spans_module.__file__):
            continue
        tree = ast.parse(path.read_text())
        if not any(isinstance(n, ast.ImportFrom) and n.module == "pipecheck.measure.spans"
                   for n in ast.walk(tree)):
            continue
        touched += [f"{path.relative_to(package)}:{n.lineno} {ast.unparse(n)}"
                    for n in ast.walk(tree)
                    if isinstance(n, ast.Attribute) and n.attr in private
                    and not (isinstance(n.value, ast.Name) and n.value.id == "self")]
    assert {"_log", "_marks", "_ends", "_spans"} <= private
    assert touched == []
