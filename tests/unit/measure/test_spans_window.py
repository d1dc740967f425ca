"""SpanRecorder: bounded memory on long runs, detached gc spans, gc tags, annotations."""

from __future__ import annotations

import gc
import sys

import pytest

from pipecheck.measure import spans as spans_mod
from pipecheck.measure.span_fold import close_interval
from pipecheck.measure.spans import GcSpans, SpanRecorder
from pipecheck.records.events import Span, StepTotals
from tests.fakes import FakeClock


def run_steps(rec: SpanRecorder, clock: FakeClock, n: int) -> None:
    rec.start()
    for i in range(n):
        with rec.span("data_wait"):
            clock.advance(0.001)
        with rec.span("dispatch"):
            clock.advance(0.002)
        if i % 100 == 0:
            rec.tag("checkpoint")
        with rec.span("sync"):
            clock.advance(0.007)
        rec.mark()


def test_long_run_keeps_a_bounded_window_and_exact_totals() -> None:
    clock = FakeClock()
    rec = SpanRecorder(clock, raw_window=50, step_window=30)
    run_steps(rec, clock, 5000)
    kept = rec.steps
    assert len(kept) == 31  # the first step + the 30 most recent
    assert [s.step for s in kept] == [0, *range(4970, 5000)]
    assert rec.step_count == 5000 and rec.dropped_steps == 4969
    assert len(rec.raw_spans) == 50 and len(rec.raw_marks) == 50
    assert rec.marks_total == 5001
    t = rec.totals
    assert t.steps == 5000
    assert t.wall_s == pytest.approx(5000 * 0.010)
    assert t.spans["data_wait"] == pytest.approx(5000 * 0.001)
    assert t.spans["dispatch"] == pytest.approx(5000 * 0.002)
    assert t.spans["sync"] == pytest.approx(5000 * 0.007)
    assert t.tag_counts == {"checkpoint": 50}
    # totals of the kept steps agree with a recount
    assert StepTotals.of(kept).steps == 31


def test_window_larger_than_run_keeps_every_step_once() -> None:
    clock = FakeClock()
    rec = SpanRecorder(clock, step_window=100)
    run_steps(rec, clock, 7)
    assert [s.step for s in rec.steps] == list(range(7))
    assert rec.dropped_steps == 0


def test_nested_gc_is_taken_out_of_the_span_it_interrupted() -> None:
    spans = [
        Span("gc", 0.020, 0.025, depth=1),       # inside dispatch
        Span("dispatch", 0.010, 0.040, depth=0),
        Span("gc", 0.050, 0.052, depth=0),       # between spans
        Span("sync", 0.060, 0.090, depth=0),
    ]
    r = close_interval(3, 0.0, 0.100, spans, [("gc", 0.025)], None)
    assert r.spans["dispatch"] == pytest.approx(0.025)
    assert r.spans["gc"] == pytest.approx(0.007)
    assert r.spans["sync"] == pytest.approx(0.030)
    assert r.spans["other"] == pytest.approx(0.100 - 0.025 - 0.007 - 0.030)
    assert sum(r.spans.values()) == pytest.approx(r.time_s)
    assert r.tags == ("gc",)


def test_gc_spans_record_collections_and_tag_only_those_that_matter() -> None:
    clock = FakeClock()
    rec = SpanRecorder(clock)
    rec.start()
    watcher = GcSpans(rec, tag_min_s=0.005)
    watcher._callback("start", {"generation": 0})
    clock.advance(0.001)
    watcher._callback("stop", {"generation": 0})   # young and short: span, no tag
    rec.mark()
    first = rec.steps[-1]
    assert first.spans["gc"] == pytest.approx(0.001) and first.tags == ()
    watcher._callback("start", {"generation": 0})
    clock.advance(0.006)
    watcher._callback("stop", {"generation": 0})   # long: tagged
    rec.mark()
    assert rec.steps[-1].tags == ("gc",)
    watcher._callback("start", {"generation": 2})
    watcher._callback("stop", {"generation": 2})   # oldest generation: tagged
    rec.mark()
    assert rec.steps[-1].tags == ("gc",)


def test_gc_before_the_first_interval_is_not_charged_to_any_step() -> None:
    clock = FakeClock()
    rec = SpanRecorder(clock)
    watcher = GcSpans(rec, tag_min_s=0.005)
    watcher._callback("start", {"generation": 2})
    clock.advance(0.010)
    watcher._callback("stop", {"generation": 2})    # wholly before start(): dropped
    assert watcher.collections == 0 and list(rec.raw_spans) == []
    watcher._callback("start", {"generation": 0})
    clock.advance(0.002)
    rec.start()
    clock.advance(0.001)
    watcher._callback("stop", {"generation": 0})    # straddles start(): only its part after
    rec.mark()
    first = rec.steps[-1]
    assert first.spans["gc"] == pytest.approx(0.001) and first.tags == ()
    assert min(s.start for s in rec.raw_spans) >= rec.start_time


def test_gc_spans_hook_into_real_collections() -> None:
    rec = SpanRecorder()
    rec.start()
    with GcSpans(rec) as watcher:
        gc.collect()
    assert watcher._callback not in gc.callbacks
    assert watcher.collections >= 1
    rec.mark()
    r = rec.steps[-1]
    assert "gc" in r.spans and r.tags == ("gc",)  # gc.collect() collects generation 2


class FakeAnnotation:
    log: list[tuple[str, object]] = []

    def __init__(self, name: str, **kw: object) -> None:
        self.name, self.kw = name, kw

    def __enter__(self) -> None:
        FakeAnnotation.log.append(("enter", (self.name, self.kw)))

    def __exit__(self, *exc: object) -> None:
        FakeAnnotation.log.append(("exit", self.name))


class FakeProfiler:
    def __init__(self, on: bool) -> None:
        self.on = on
        self.annotation = FakeAnnotation
        self.step_annotation = FakeAnnotation

    def enabled(self) -> bool:
        return self.on


def test_annotations_only_while_a_profiler_captures(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeAnnotation.log = []
    prof = FakeProfiler(on=False)  # one object, as JAX's hooks are looked up once
    monkeypatch.setattr(spans_mod, "_profiler", prof)
    monkeypatch.setitem(sys.modules, "jax", sys.modules.get("jax", object()))
    rec = SpanRecorder(FakeClock())
    rec.start()
    with rec.span("dispatch", step_num=3):
        with rec.span("checkpoint"):
            pass
    assert FakeAnnotation.log == []
    prof.on = True  # a capture starts: a dispatch span with its step annotates at once,
    with rec.span("dispatch", step_num=3):  # the names' spans from the step's mark on
        with rec.span("checkpoint"):
            pass
    assert FakeAnnotation.log == [("enter", ("train", {"step_num": 3})), ("exit", "train")]
    FakeAnnotation.log = []
    rec.mark()
    with rec.span("dispatch", step_num=4):
        with rec.span("checkpoint"):
            with rec.span("checkpoint"):
                pass
    assert FakeAnnotation.log == [
        ("enter", ("train", {"step_num": 4})),
        ("enter", ("checkpoint", {})),
        ("enter", ("checkpoint", {})),
        ("exit", "checkpoint"),
        ("exit", "checkpoint"),
        ("exit", "train"),
    ]
    prof.on = False  # the capture stops: the names' contexts annotate no more after a mark
    rec.mark()
    FakeAnnotation.log = []
    with rec.span("checkpoint"):
        with rec.span("checkpoint"):
            pass
    assert FakeAnnotation.log == []
    rec.mark()
    assert [s.name for s in rec.raw_spans] == ["checkpoint", "dispatch"] * 2 + [
        "checkpoint", "checkpoint", "dispatch", "checkpoint", "checkpoint"]
    assert [s.depth for s in rec.raw_spans][-5:] == [2, 1, 0, 1, 0]
    off = SpanRecorder(FakeClock(), annotate=False)
    FakeAnnotation.log = []
    with off.span("sync"):
        pass
    assert FakeAnnotation.log == []


def test_spans_nested_in_their_own_name_keep_each_level() -> None:
    clock = FakeClock()
    rec = SpanRecorder(clock, annotate=False)
    rec.start()
    with rec.span("eval"):
        clock.advance(1.0)
        with rec.span("eval"):
            clock.advance(2.0)
            with pytest.raises(KeyError):
                with rec.span("eval"):
                    clock.advance(4.0)
                    raise KeyError("the body raised")
            with rec.span("log"):
                clock.advance(8.0)
            assert rec.depth == 2
        clock.advance(16.0)
    assert rec.depth == 0
    with rec.span("eval"):  # the name's context, closed, times the next span
        clock.advance(32.0)
    rec.mark()
    assert [(s.name, s.start, s.end, s.depth) for s in rec.raw_spans] == [
        ("eval", 3.0, 7.0, 2), ("log", 7.0, 15.0, 2), ("eval", 1.0, 15.0, 1),
        ("eval", 0.0, 31.0, 0), ("eval", 31.0, 63.0, 0)]
    assert rec.steps[0].spans == {"eval": 63.0, "other": 0.0}


def test_a_recorder_started_during_a_capture_annotates_from_its_first_span(
        monkeypatch: pytest.MonkeyPatch) -> None:
    FakeAnnotation.log = []
    prof = FakeProfiler(on=True)
    monkeypatch.setattr(spans_mod, "_profiler", prof)
    monkeypatch.setitem(sys.modules, "jax", sys.modules.get("jax", object()))
    rec = SpanRecorder(FakeClock())
    rec.start()
    with rec.span("data_wait"):
        pass
    assert FakeAnnotation.log == [("enter", ("data_wait", {})), ("exit", "data_wait")]
