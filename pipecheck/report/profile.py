"""The ``pipecheck profile`` report: the verdict, the estimates, where the device's time went."""

from __future__ import annotations

from typing import Sequence

from pipecheck.records.kinds import verdict_text
from pipecheck.records.profile import ProfileResult
from pipecheck.report.anomalies import anomalies_parts
from pipecheck.report.blocks import Part, Table, render_text
from pipecheck.report.format import (
    distribution_rows,
    findings_text,
    format_breakdown,
    ms,
    warnings_text,
)
from pipecheck.report.gains import INTERVALS_LOW_WHY, gains_parts


def _estimate(e: object) -> str:
    value, low, high = (getattr(e, k) for k in ("value", "low", "high"))
    return f"{ms(value)} [{ms(low)}, {ms(high)}]"


def format_profile(result: ProfileResult) -> str:
    """Reporter: the verdict with its evidence, the estimates, the device-time table, the
    hosts, sync sites (as findings), anomalies and warnings."""
    return render_text(profile_parts(result))


def profile_gains_parts(result: ProfileResult) -> list[Part]:
    """What each change buys: the headspace, the notes and the ranked gains."""
    return gains_parts(result.headspace_s, result.gains, result.gains_notes, INTERVALS_LOW_WHY)


def profile_parts(result: ProfileResult, gains: bool = True) -> list[Part]:
    """The profile report as parts (``report.blocks``); ``gains`` False leaves out what each
    change buys (a page shows it in a section of its own)."""
    parts: list[Part] = [verdict_line(result), f"why: {result.reason}"]
    if (how := steps_found(result)) is not None:
        parts.append(how)
    if result.whole_capture:
        parts += _whole_capture_parts(result)
    else:
        parts += _steps_parts(result)
    if result.hosts:
        host_rows = [[h.host, h.steps, ms(h.step_s), ms(h.device_busy_s), ms(h.input_idle_s),
                      verdict_text(h.verdict)] for h in result.hosts]
        parts += ["", Table(host_rows, ["host", "steps", "step", "device busy",
                                        "idle: input", "verdict"])]
        parts += [f"straggler: {result.straggler.evidence}" if result.straggler else
                  "straggler: none (no host waits for data clearly longer than the others)"]
    if result.anomalies:
        parts += ["", *anomalies_parts(result.anomalies)]
    if result.findings:
        parts += ["", "findings:", findings_text(result.findings)]
    what_buys = profile_gains_parts(result) if gains else []
    if what_buys:
        parts += ["", *what_buys]
    parts += ["", f"recommendation: {result.recommendation}"]
    if result.xprof is not None:
        parts += ["", *xprof_parts(result)]
    if result.warnings:
        parts += ["", warnings_text(result.warnings)]
    return parts


def verdict_line(result: ProfileResult) -> str:
    """The headline: the record's ``verdict`` as every report shows a verdict."""
    return f"pipecheck profile: {verdict_text(result.verdict)}"


def steps_found(result: ProfileResult) -> str | None:
    """How a capture without step markers was read without ``--step-fn`` (None otherwise):
    the jitted function picked as the train step, or the whole capture."""
    if result.picked_step is not None:
        p = result.picked_step
        return (f"steps: the repeating jitted function `{p.function}` ({p.executions} calls, "
                f"{100 * p.device_share:.0f}% of the jitted device time), no step markers in "
                "the capture")
    if result.whole_capture:
        return ("no steps found: whole-capture reading (no step markers in the capture, no "
                "--step-fn, and no jitted function repeats clearly enough to be the train "
                "step)")
    return None


def _capture_row(result: ProfileResult) -> list[object]:
    cfg = result.config
    return ["capture", f"{cfg.get('file')} ({cfg.get('device')}; steps from "
                       f"{cfg.get('steps_from')}; thread {cfg.get('thread')!s})"]


def _steps_parts(result: ProfileResult) -> list[Part]:
    """The estimates over the steady steps and where the device's time went in them."""
    est = result.estimates
    rows: list[Sequence[object]] = [
        _capture_row(result),
        ["steps", f"{len(result.steps)} ({result.device_time.steps} steady)"],
        *distribution_rows(result.step_time, "step time"),
        ["compute T (device busy / step)", _estimate(est.compute)],
        ["loader D (input / batch)", _estimate(est.loader)
         + (" (background loader)" if est.background_loader else "")],
        ["step R", _estimate(est.step)],
        ["device idle (median share)", f"{100 * est.idle_share:.0f}%"],
        ["thread blocked in your syncs", f"{100 * min(est.sync_share, 1.0):.0f}%"],
    ]
    return [Table(rows), "",
            format_breakdown(result.device_time, "where the device's time went")]


def _whole_capture_parts(result: ProfileResult) -> list[Part]:
    """The whole capture's numbers (single values, no intervals) and where the device's
    time went over it."""
    est, b = result.estimates, result.device_time
    wall = est.step.value
    rows: list[Sequence[object]] = [
        _capture_row(result),
        ["capture length (device idle while compiling set apart)", ms(wall)],
        ["device busy", f"{ms(est.compute.value)} ({100 * est.compute.value / wall:.0f}%)"],
        ["loading (the thread's input time)", ms(est.loader.value)
         + (" (background loader)" if est.background_loader else "")],
        ["device idle", f"{100 * est.idle_share:.0f}%"],
        ["thread blocked in your syncs", f"{100 * min(est.sync_share, 1.0):.0f}%"],
    ]
    table = Table([[r.category, f"{r.seconds:.3f} s", f"{100 * r.share:.1f}%"] for r in b.rows],
                  ["category", "seconds", "share"], ("left", "right", "right"))
    return [Table(rows), "",
            f"where the device's time went over the whole capture ({b.wall_s:.3f} s):", table]


def xprof_parts(result: ProfileResult) -> list[Part]:
    """XProf's reading next to pipecheck's: the step time and its breakdown, then XProf's
    conclusion."""
    x = result.xprof
    assert x is not None
    n = max(result.device_time.steps, 1)
    ours = [[row.category, ms(row.seconds / n)] for row in result.device_time.rows
            if row.seconds > 0]
    theirs = [[label, ms(seconds)] for label, seconds in x.breakdown_s.items()]
    height = max(len(ours), len(theirs))
    ours += [["", ""]] * (height - len(ours))
    theirs += [["", ""]] * (height - len(theirs))
    rows = [["step time", ms(result.estimates.step.value), "step time", ms(x.step_s)]]
    rows += [[*a, *b] for a, b in zip(ours, theirs, strict=True)]
    return ["XProf's input-pipeline analyzer on the same capture:",
            Table(rows, ["pipecheck (per step)", "", "XProf (per step)", ""]),
            f"XProf concludes: {x.conclusion}",
            f"pipecheck concludes: {verdict_text(result.verdict)}"]
