"""Chrome trace export from a hand-built timeline (exact events)."""

from __future__ import annotations

from pipecheck.measure.spans import SpanRecorder
from pipecheck.records.events import Span
from pipecheck.report.trace import chrome_trace, timeline_of, validate_chrome_trace
from tests.fakes import FakeClock


def recorded() -> SpanRecorder:
    c = FakeClock(10.0)
    rec = SpanRecorder(c)
    rec.start()
    for i in range(3):
        with rec.span("data_wait"):
            c.advance(0.001)
        with rec.span("dispatch", step_num=i):
            c.advance(0.0005)
        if i == 1:
            with rec.span("checkpoint"):
                rec.tag("checkpoint")
                with rec.span("save_opt"):
                    c.advance(0.002)
                rec.add_span(Span("gc", c.t, c.t + 0.0001, depth=1))
                c.advance(0.0001)
        with rec.span("sync"):
            c.advance(0.0065)
        rec.mark()
    return rec


def test_events_in_microseconds_on_named_tracks() -> None:
    trace = chrome_trace(timeline_of(recorded()), "pipecheck test")
    assert validate_chrome_trace(trace) == []
    ev = trace["traceEvents"]
    assert ev[0] == {"ph": "M", "name": "process_name", "pid": 1, "tid": 0,
                     "args": {"name": "pipecheck test"}}
    steps = [e for e in ev if e.get("cat") == "step"]
    assert [(e["name"], e["ts"], e["dur"]) for e in steps] == [
        ("step 0", 0.0, 8000.0), ("step 1", 8000.0, 10100.0), ("step 2", 18100.0, 8000.0)]
    assert steps[1]["args"] == {"step": 1, "time_ms": 10.1, "tags": ["checkpoint"]}
    data = [(e["name"], e["ts"], e["dur"]) for e in ev if e["ph"] == "X" and e["tid"] == 3]
    assert data == [("data_wait", 0.0, 1000.0), ("data_wait", 8000.0, 1000.0),
                    ("data_wait", 18100.0, 1000.0)]
    host = [(e["name"], e["ts"], e["dur"]) for e in ev if e["ph"] == "X" and e["tid"] == 2]
    assert ("checkpoint", 9500.0, 2100.0) in host and ("save_opt", 9500.0, 2000.0) in host
    assert ("gc", 11500.0, 100.0) in host
    assert [e["name"] for e in ev if e["ph"] == "i"] == ["checkpoint"]


def test_validator_catches_overlap_and_missing_fields() -> None:
    bad = {"traceEvents": [
        {"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
        {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10},
        {"ph": "X", "name": "c", "pid": 1, "tid": "x", "ts": 0, "dur": 1},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1},
    ]}
    problems = validate_chrome_trace(bad)
    assert any("b [5.0, 15.0] overlaps a" in p for p in problems)
    assert any("tid is not an integer" in p for p in problems)
    assert any("missing ph or name" in p for p in problems)


def test_overlapping_spans_are_clipped_to_nest() -> None:
    c = FakeClock(10.0)
    rec = SpanRecorder(c)
    rec.start()
    rec.add_span(Span("checkpoint", 10.0, 10.010))
    rec.add_span(Span("gc", 10.009, 10.012, depth=1))  # jitter: ends after its parent
    c.t = 10.02
    rec.mark()
    trace = chrome_trace(timeline_of(rec))
    assert validate_chrome_trace(trace) == []
    gc = [e for e in trace["traceEvents"] if e["name"] == "gc"][0]
    assert (gc["ts"], gc["dur"]) == (9000.0, 1000.0)
