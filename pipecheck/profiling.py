"""Orchestration of one ``pipecheck profile`` run: read the capture, find the steps, say
where their time went, and decide (``analysis.profile``)."""

from __future__ import annotations

import dataclasses
import os
from typing import Required, Sequence, TypedDict, Unpack

import numpy as np

from pipecheck.analysis import profile as ap
from pipecheck.analysis import steady_state, unmarked
from pipecheck.analysis.loader.findings import sync_findings, user_sync_share
from pipecheck.analysis.profile_gains import profile_gains
from pipecheck.analysis.straggler import HostValue, find_straggler
from pipecheck.analysis.verdict import Verdict
from pipecheck.errors import CaptureError
from pipecheck.logs import capture, xprof_view
from pipecheck.progress import NO_PROGRESS, Progress
from pipecheck.records.codec import float_column
from pipecheck.records.common import (
    Breakdown,
    BreakdownRow,
    Distribution,
    Finding,
    StepRecord,
    SyncSite,
)
from pipecheck.records.hosts import Straggler
from pipecheck.records.kinds import (
    DEVICE_BUSY_ROW,
    HOST,
    HOST_BOUND,
    IDLE_ROWS,
    INPUT,
    THREAD_SPANS,
)
from pipecheck.records.profile import (
    CaptureEstimates,
    DeviceIdle,
    HostProfile,
    PickedStep,
    ProfileResult,
)
from pipecheck.records.steps import StepTable, no_steps

MIN_STEPS = 3
"""Fewer steady steps than this have no median worth deciding on."""

FUSE_FIX = "fuse the small jitted calls into one jitted step"
"""The host-bound finding's fix."""

FEW_STEPS = 10
"""Fewer steady steps than this get a warning: bootstrap intervals of so few steps are wide,
and one odd step weighs a tenth of the median."""


@dataclasses.dataclass(frozen=True)
class ProfileOptions:
    path: str
    run: str | None = None
    step_fn: str | None = None
    source_dirs: tuple[str, ...] = ()
    """Folders searched for the user's source files (to name the sync's line)."""
    xprof: bool = False
    """Also run XProf's input-pipeline analyzer on the capture (the ``xprof`` extra)."""


def _step_records(bd: ap.StepSplit) -> StepTable[StepRecord]:
    times = bd.times
    out = []
    for i, number in enumerate(bd.steps.numbers.tolist()):
        spans = {THREAD_SPANS[c]: float(bd.thread_by[c][i]) for c in ap.THREAD_KINDS
                 if bd.thread_by[c][i] > 0}
        tags = ("compile",) if bd.compiled[i] else ()
        out.append(StepRecord(int(number), float(times[i]), tags, spans))
    return StepTable.from_rows(StepRecord, out)


def _device_time(bd: ap.StepSplit, steady: np.ndarray, steps: int | None = None) -> Breakdown:
    wall = float(bd.times[steady].sum())
    rows = [BreakdownRow(DEVICE_BUSY_ROW, float(bd.busy[steady].sum()), 0.0)]
    rows += [BreakdownRow(IDLE_ROWS[c], float(bd.idle_by[c][steady].sum()), 0.0)
             for c in (*ap.THREAD_KINDS, HOST)]
    rows = [dataclasses.replace(r, share=r.seconds / wall if wall > 0 else 0.0) for r in rows]
    return Breakdown(wall, int(steady.sum()) if steps is None else steps, tuple(rows))


def _device_idle(bd: ap.StepSplit, per_step: bool = True) -> DeviceIdle:
    """The device's idle seconds in each step by cause (``per_step`` False: a whole-capture
    reading, no steps, so empty columns as its ``device_busy_s``)."""
    return DeviceIdle(**{c: float_column(bd.idle_by[c] if per_step else ())
                         for c in (*ap.THREAD_KINDS, HOST)})


def _sync_sites(t: ap.CaptureTimeline, steps: ap.Steps, steady: np.ndarray,
                search: Sequence[str]) -> list[SyncSite]:
    sites = []
    for call in ap.sync_calls(t, steps, steady):
        location, code = capture.locate(call, search)
        sites.append(SyncSite(location, call.function, code, call.seconds, call.count,
                              call.internal))
    return sites


def _warnings(t: ap.CaptureTimeline, n_steady: int | None) -> list[str]:
    """Warnings on the capture (``n_steady`` None: read whole, no steps)."""
    out = []
    if not t.python_frames:
        out.append("the capture has no Python frames (python_tracer_level=0): device idle "
                   "time cannot be told apart as input wait or host work, and a sync cannot "
                   "be named; capture with jax.profiler.ProfileOptions().python_tracer_level=1")
    if n_steady is not None and n_steady < FEW_STEPS:
        out.append(f"only {n_steady} steady-state steps in the capture; capture more steps "
                   "for a firmer verdict")
    return out


def analyze_host(t: ap.CaptureTimeline, options: ProfileOptions,
                 search: Sequence[str]) -> ProfileResult:
    """One host's timeline as a ``profile`` record: its steps from the markers, from
    ``--step-fn``, or, with neither, from the jitted function that clearly repeats
    (``analysis.unmarked.pick_step``); with none of these, the whole capture read as one
    window (``_whole_capture``)."""
    if not len(t.busy):
        raise CaptureError(
            f"{t.host}: the capture shows no device activity (no XLA ops on any device); "
            "capture while the training loop runs its jitted steps")
    picked = None
    if options.step_fn is None and not len(t.marker_starts):
        picked = unmarked.pick_step(t)
        if picked is None:
            return _whole_capture(t, options, search, ())
    steps = ap.find_steps(t, options.step_fn or (picked.function if picked else None))
    bd = ap.split_steps(t, steps)
    tagged, anomalies = steady_state.with_anomalies(_step_records(bd))
    steady = steady_state.steady_mask(tagged)
    if steady.sum() < MIN_STEPS and picked is not None:
        return _whole_capture(t, options, search, (
            f"`{picked.function}` repeats ({picked.executions} executions) but gives "
            f"{int(steady.sum())} steady step(s), fewer than {MIN_STEPS}: the capture is read "
            "whole",))
    if steady.sum() < MIN_STEPS:
        raise CaptureError(
            f"{t.host}: {int(steady.sum())} steady-state step(s) in the capture "
            f"({len(tagged)} in all, the first and compiling ones set apart); capture at "
            f"least {MIN_STEPS + 2} steps")
    result = _stepped(t, options, search, bd, tagged, steady)
    return dataclasses.replace(result, anomalies=anomalies, picked_step=None if picked is None
                               else PickedStep(picked.function, picked.executions,
                                               picked.device_share))


def _stepped(t: ap.CaptureTimeline, options: ProfileOptions, search: Sequence[str],
             bd: ap.StepSplit, tagged: StepTable[StepRecord],
             steady: np.ndarray) -> ProfileResult:
    """The record of a capture read step by step."""
    steps = bd.steps
    sites = _sync_sites(t, steps, steady, search)
    est = ap.estimates(bd, steady)
    if t.python_frames:  # the user's syncs only, as compare counts them (not the lagged one)
        est = dataclasses.replace(est, sync_share=user_sync_share(
            sites, int(steady.sum()), est.step.value))
    verdict = ap.profile_verdict(est)
    findings: list[Finding] = sync_findings(sites, int(steady.sum()), est.step.value, verdict)
    if verdict.verdict == HOST_BOUND:
        findings.append(Finding(
            "host-bound", verdict.reason,
            {"idle_share": est.idle_share, "device_busy_s": est.compute.value,
             "step_s": est.step.value},
            fix=FUSE_FIX))
    return _result(t, options, steps.source, verdict, est, findings,
                   step_time=Distribution.of(bd.times[steady]), steps=tagged,
                   device_busy_s=tuple(bd.busy.tolist()), device_time=_device_time(bd, steady),
                   device_idle=_device_idle(bd),
                   warnings=tuple(_warnings(t, int(steady.sum()))))


def _whole_capture(t: ap.CaptureTimeline, options: ProfileOptions, search: Sequence[str],
                   notes: tuple[str, ...]) -> ProfileResult:
    """The record of a capture with no steps found: the whole capture as one window."""
    window = unmarked.window(t)
    bd = ap.split_steps(t, window)
    r = unmarked.reading(bd)
    verdict = unmarked.verdict(r)
    sites = _sync_sites(t, window, np.ones(1, dtype=bool), search)
    findings = unmarked.sync_findings(sites, r, verdict)
    if verdict.verdict == HOST_BOUND:
        findings.append(Finding(
            "host-bound", verdict.reason,
            {"idle_share": r.idle / r.wall, "device_busy_s": r.busy, "capture_s": r.wall,
             "jitted_calls": float(r.calls)},
            fix=FUSE_FIX))
    warnings = [*notes, *_warnings(t, None)]
    return _result(t, options, window.source, verdict, unmarked.estimates(r),
                   findings, step_time=Distribution.of([]), steps=no_steps(StepRecord)(),
                   device_busy_s=(),
                   device_time=_device_time(bd, np.ones(1, dtype=bool), steps=0),
                   device_idle=_device_idle(bd, per_step=False),
                   warnings=tuple(warnings), whole_capture=True)


class _ReadFields(TypedDict, total=False):
    """The record's fields that depend on how the capture was read (by steps, or whole)."""

    step_time: Required[Distribution]
    steps: Required[StepTable[StepRecord]]
    device_busy_s: Required[tuple[float, ...]]
    device_time: Required[Breakdown]
    device_idle: DeviceIdle
    warnings: tuple[str, ...]
    whole_capture: bool


def _result(t: ap.CaptureTimeline, options: ProfileOptions, steps_from: str, verdict: Verdict,
            est: ap.ProfileEstimates, findings: list[Finding],
            **fields: Unpack[_ReadFields]) -> ProfileResult:
    """The record's common part: how the capture was read, the verdict, the estimates;
    ``fields``: what a stepped or a whole-capture reading found."""
    sync_text = next((f.message for f in findings if f.kind == "forced-sync"), None)
    config = {"capture": options.path, "file": t.host, "steps_from": steps_from,
              "device": t.device, "thread": t.thread, "python_frames": t.python_frames}
    result = ProfileResult(
        env=dict(t.env), config=config, verdict=verdict.verdict, reason=verdict.reason,
        estimates=CaptureEstimates(est.compute, est.loader, est.step, est.sync_share,
                                   est.idle_share, est.background_loader, est.data_wait),
        findings=tuple(findings),
        recommendation=ap.profile_recommendation(verdict, est, sync_text),
        **fields)
    gains = profile_gains(result)
    return dataclasses.replace(result, headspace_s=gains.headspace, gains=gains.gains,
                               gains_notes=gains.notes)


def _host_profile(r: ProfileResult) -> HostProfile:
    steady = Distribution.of(r.step_time.samples_s)
    rows = {row.category: row.seconds for row in r.device_time.rows}
    n = max(r.device_time.steps, 1)
    return HostProfile(str(r.env.get("host", "")), len(r.steps), steady.summary.median,
                       r.estimates.compute.value, rows.get(IDLE_ROWS[INPUT], 0.0) / n,
                       r.verdict)


def profile_capture(options: ProfileOptions, progress: Progress = NO_PROGRESS) -> ProfileResult:
    """Read and analyze a capture. With one file per host, every host's summary and the
    straggler go into the record of the straggler (the host every other one waits for at
    each step's collectives), or of the first host when there is none."""
    files = capture.capture_files(options.path, options.run)
    if options.xprof:
        xprof_view.check_available()
    search = [*options.source_dirs, os.getcwd()]
    results = []
    with progress.task("reading the capture", len(files), "file") as task:
        for f, host in zip(files, capture.host_labels(files), strict=True):
            results.append(analyze_host(capture.read_timeline(f, host), options, search))
            task.advance()
    first = results[0]
    if options.xprof:
        first = dataclasses.replace(first, xprof=xprof_view.xprof_input_pipeline(files))
    if len(results) == 1:
        return first
    straggler = _straggler(results)
    # every host steps at the straggler's pace (collectives): its record is the job's answer
    base = results[straggler.process_id] if straggler is not None else first
    return dataclasses.replace(base, xprof=first.xprof,
                               hosts=tuple(_host_profile(r) for r in results),
                               straggler=straggler)


def _straggler(results: Sequence[ProfileResult]) -> Straggler | None:
    """The host the others wait for, from each host's data wait per step."""
    values = [HostValue(i, str(r.env.get("host", i)), w.value, w.low, w.high)
              for i, r in enumerate(results) if (w := r.estimates.data_wait) is not None]
    return find_straggler(values, "data wait",
                          step_s=float(np.median([r.estimates.step.value for r in results])))

