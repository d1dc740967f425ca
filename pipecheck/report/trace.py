"""Chrome trace event JSON of a run: open it in Perfetto (ui.perfetto.dev) or
chrome://tracing.

One process, four tracks (threads):

- ``steps``: one slice per step interval (``step 12``), its tags in ``args`` and as
  instant events at the moment each was tagged;
- ``host``: the training loop's spans (dispatch, sync, checkpoint, eval, gc, log and
  user spans), nested as they ran;
- ``data``: ``data_wait`` and ``device_put``, on their own track;
- ``compile``: JAX's trace / lower / backend-compile events, when they were watched.

Times are microseconds from the start of the run (the first mark). Slices on one track
nest; a slice that overlaps its parent by clock jitter is clipped to it. The trace holds
what the recorder still has: on long runs, the most recent spans and marks
(``spans.RAW_SPAN_WINDOW``).

``timeline_of`` takes a SpanRecorder (any command that times steps with one can export
its trace), ``chrome_trace`` is pure, ``write_trace`` writes atomically (gzip when the
path ends in ``.gz``).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
from typing import Iterable, Mapping, Protocol, Required, Sequence, TypedDict

from pipecheck.records.common import StepRecord
from pipecheck.records.dataloader import DataloaderResult
from pipecheck.records.events import CompileEvent, Span
from pipecheck.records.kinds import DATA_SPANS
from pipecheck.records.steps import StepTable
from pipecheck.records.store import write_text_atomic

PID = 1
TRACKS = {"steps": 1, "host": 2, "data": 3, "compile": 4}

_COMPILE_NAMES = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower to MLIR",
    "/jax/core/compile/backend_compile_duration": "backend compile",
}


@dataclasses.dataclass(frozen=True)
class CompileSlice:
    """A compile phase that ended at ``at`` (clock reading) and lasted ``duration_s``."""

    name: str
    fun_name: str
    duration_s: float
    at: float


@dataclasses.dataclass(frozen=True)
class Timeline:
    """What a trace is made of (clock readings in seconds)."""

    origin: float
    spans: tuple[Span, ...]
    marks: tuple[float, ...]
    first_mark_index: int
    """Index of ``marks[0]`` among all the run's marks (0: the start of step 0)."""
    tags: tuple[tuple[str, float], ...] = ()
    step_tags: Mapping[int, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    compiles: tuple[CompileSlice, ...] = ()


class RecordedRun(Protocol):
    """What a trace is drawn from: a recorder's retained spans, marks and tags, and its steps
    (``measure.spans.SpanRecorder`` is one)."""

    @property
    def raw_spans(self) -> Iterable[Span]: ...

    @property
    def raw_marks(self) -> Iterable[float]: ...

    @property
    def raw_tags(self) -> Iterable[tuple[str, float]]: ...

    @property
    def start_time(self) -> float | None: ...

    @property
    def marks_total(self) -> int: ...

    @property
    def steps(self) -> StepTable[StepRecord]: ...


def compile_slices(events: Iterable[CompileEvent]) -> tuple[CompileSlice, ...]:
    """CompileSlices from ``compile_watch.CompileEvent`` objects (event, fun_name, ...)."""
    return tuple(
        CompileSlice(_COMPILE_NAMES.get(e.event, e.event), e.fun_name, e.duration_s, e.at)
        for e in events
    )


def timeline_of(recorder: RecordedRun, compile_events: Iterable[CompileEvent] = (),
                steps: Iterable[StepRecord] | None = None) -> Timeline:
    """The recorder's retained spans, marks and tags (plus compile events) as a Timeline.
    ``steps``: the record's steps, whose tags (anomalies included) label the step slices;
    by default the recorder's own."""
    marks = tuple(recorder.raw_marks)
    spans = tuple(recorder.raw_spans)
    origin = recorder.start_time
    if origin is None:
        origin = min([s.start for s in spans] + list(marks), default=0.0)
    return Timeline(
        origin=origin,
        spans=spans,
        marks=marks,
        first_mark_index=recorder.marks_total - len(marks),
        tags=tuple(recorder.raw_tags),
        step_tags={s.step: s.tags for s in (recorder.steps if steps is None else steps)
                   if s.tags},
        compiles=compile_slices(compile_events),
    )


class TraceEvent(TypedDict, total=False):
    """One Chrome trace event: metadata (``M``), a complete slice (``X``, ``ts`` and
    ``dur`` in microseconds) or an instant (``i``)."""

    ph: Required[str]
    name: Required[str]
    pid: Required[int]
    tid: Required[int]
    cat: str
    ts: float
    dur: float
    s: str
    args: Mapping[str, object]


class ChromeTrace(TypedDict):
    """A Chrome trace event JSON object, as Perfetto and chrome://tracing open it."""

    traceEvents: list[TraceEvent]
    displayTimeUnit: str
    otherData: Mapping[str, str]


def _us(t: float, origin: float) -> float:
    return round((t - origin) * 1e6, 3)


def _slice(start: float, end: float, origin: float) -> tuple[float, float]:
    """(ts, dur) in microseconds from rounded endpoints, so that adjacent slices share
    their boundary exactly."""
    ts = _us(start, origin)
    return ts, round(max(0.0, _us(end, origin) - ts), 3)


def _nest(events: list[TraceEvent]) -> list[TraceEvent]:
    """Sort one track's slices and clip any that overlap their enclosing slice's end."""
    events.sort(key=lambda e: (e["ts"], -e["dur"]))
    stack: list[float] = []
    for e in events:
        while stack and e["ts"] >= stack[-1] - 1e-6:
            stack.pop()
        end = e["ts"] + e["dur"]
        if stack and end > stack[-1]:
            e["dur"] = round(max(0.0, stack[-1] - e["ts"]), 3)
            end = e["ts"] + e["dur"]
        stack.append(end)
    return events


def chrome_trace(timeline: Timeline, process_name: str = "pipecheck") -> ChromeTrace:
    """Pure: the Chrome trace event JSON object (``{"traceEvents": [...]}``)."""
    o = timeline.origin
    meta: list[TraceEvent] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0,
         "args": {"name": process_name}},
    ]
    for name, tid in TRACKS.items():
        meta.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": tid,
                     "args": {"name": name}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": tid,
                     "args": {"sort_index": tid}})
    by_track: dict[int, list[TraceEvent]] = {tid: [] for tid in TRACKS.values()}

    marks = timeline.marks
    for k in range(len(marks) - 1):
        step = timeline.first_mark_index + k
        tags = list(timeline.step_tags.get(step, ()))
        ts, dur = _slice(marks[k], marks[k + 1], o)
        by_track[TRACKS["steps"]].append({
            "ph": "X", "name": f"step {step}", "cat": "step", "pid": PID,
            "tid": TRACKS["steps"], "ts": ts, "dur": dur,
            "args": {"step": step, "time_ms": round((marks[k + 1] - marks[k]) * 1e3, 3),
                     "tags": tags},
        })
    for s in timeline.spans:
        track = "data" if s.name in DATA_SPANS else "host"
        ts, dur = _slice(s.start, s.end, o)
        by_track[TRACKS[track]].append({
            "ph": "X", "name": s.name, "cat": "span", "pid": PID, "tid": TRACKS[track],
            "ts": ts, "dur": dur,
            "args": {"depth": s.depth},
        })
    for c in timeline.compiles:
        ts, dur = _slice(c.at - max(0.0, c.duration_s), c.at, o)
        by_track[TRACKS["compile"]].append({
            "ph": "X", "name": c.name, "cat": "compile", "pid": PID, "tid": TRACKS["compile"],
            "ts": ts, "dur": dur,
            "args": {"function": c.fun_name},
        })
    instants: list[TraceEvent] = [
        {"ph": "i", "s": "t", "name": name, "cat": "tag", "pid": PID, "tid": TRACKS["steps"],
         "ts": _us(t, o)}
        for name, t in timeline.tags
    ]
    events = meta
    for tid in sorted(by_track):
        events += _nest(by_track[tid])
    events += instants
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "pipecheck", "clock": "seconds from the first mark"}}


def validate_chrome_trace(trace: Mapping[str, object]) -> list[str]:
    """Problems with a Chrome trace event object (empty list: valid as far as checked).

    Checks the fields Perfetto and chrome://tracing need, numeric microsecond
    timestamps, and that complete ("X") slices nest on every (pid, tid).
    """
    problems: list[str] = []
    events = trace.get("traceEvents") if isinstance(trace, Mapping) else None
    if not isinstance(events, list):
        return ["no traceEvents list"]
    per_track: dict[tuple[object, object], list[tuple[float, float, str]]] = {}
    for i, e in enumerate(events):
        if not isinstance(e, Mapping) or "ph" not in e or "name" not in e:
            problems.append(f"event {i}: missing ph or name")
            continue
        for key in ("pid", "tid"):
            if not isinstance(e.get(key), int):
                problems.append(f"event {i} ({e['name']}): {key} is not an integer")
        if e["ph"] == "M":
            continue
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or ts < 0:
            problems.append(f"event {i} ({e['name']}): bad ts {ts!r}")
            continue
        if e["ph"] == "X":
            dur = e.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                problems.append(f"event {i} ({e['name']}): bad dur {dur!r}")
                continue
            per_track.setdefault((e.get("pid"), e.get("tid")), []).append(
                (float(ts), float(ts) + float(dur), str(e["name"])))
    eps = 1e-3  # microseconds: rounding to 3 decimals
    for track, slices in per_track.items():
        slices.sort(key=lambda x: (x[0], -x[1]))
        stack: list[tuple[float, float, str]] = []
        for s in slices:
            while stack and s[0] >= stack[-1][1] - eps:
                stack.pop()
            if stack and s[1] > stack[-1][1] + eps:
                problems.append(f"track {track}: {s[2]} [{s[0]}, {s[1]}] overlaps "
                                f"{stack[-1][2]} [{stack[-1][0]}, {stack[-1][1]}]")
            stack.append(s)
    return problems


def trace_bytes(trace: Mapping[str, object], path: str | os.PathLike[str]) -> bytes:
    data = json.dumps(trace, separators=(",", ":"), allow_nan=False).encode()
    return gzip.compress(data) if str(path).endswith(".gz") else data


def write_trace(path: str | os.PathLike[str], trace: Mapping[str, object],
                force: bool = False) -> None:
    """Write a trace object atomically (gzip-compressed when ``path`` ends in ``.gz``)."""
    write_text_atomic(path, trace_bytes(trace, path), force)


def write_recorder_trace(
    path: str | os.PathLike[str],
    recorder: RecordedRun,
    compile_events: Sequence[CompileEvent] = (),
    process_name: str = "pipecheck",
    force: bool = False,
    steps: Iterable[StepRecord] | None = None,
) -> None:
    """Write the recorder's Chrome trace for ``--trace PATH`` (``steps``: the record's
    steps, for their tags)."""
    write_trace(path, chrome_trace(timeline_of(recorder, compile_events, steps), process_name),
                force)


SETTING_GAP_S = 0.05
"""Gap drawn between two loader settings in a dataloader trace (they ran one after another)."""


def dataloader_trace(result: DataloaderResult,
                     process_name: str = "pipecheck dataloader") -> ChromeTrace:
    """Pure: a Chrome trace of a ``DataloaderResult``, one track per setting.

    The timing loop reads the clock only between consecutive ``next()`` calls, so a
    setting's batches are contiguous: ``first batch`` (iterator creation and worker start)
    then one slice per timed batch (its wait, plus device_put unless disabled), rebuilt
    from the recorded samples. Settings are laid out one after another, as they ran.
    """
    events: list[TraceEvent] = [
        {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": process_name}},
    ]
    t = 0.0
    for i, s in enumerate(result.results, start=1):
        events.append({"ph": "M", "name": "thread_name", "pid": PID, "tid": i,
                       "args": {"name": f"workers={s.workers} threads={s.threads}"}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": PID, "tid": i,
                       "args": {"sort_index": i}})
        slices = [("first batch", s.first_batch_s)] + [
            (f"batch {k}", d) for k, d in enumerate(s.batch_time.samples_s, start=1)]
        for name, dur in slices:
            events.append({"ph": "X", "name": name, "cat": "data_wait", "pid": PID, "tid": i,
                           "ts": round(t * 1e6, 3), "dur": round(max(dur, 0.0) * 1e6, 3),
                           "args": {"ms": round(dur * 1e3, 3)}})
            t += max(dur, 0.0)
        t += SETTING_GAP_S
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "pipecheck", "clock": "seconds from the first setting"}}
