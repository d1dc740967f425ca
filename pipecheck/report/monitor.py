"""The Monitor report: step time, breakdown, sync sites, findings and warnings."""

from __future__ import annotations

from typing import Sequence

from pipecheck.analysis.first_batch import work_text
from pipecheck.records.common import StartUp
from pipecheck.records.kinds import COMPILE, WALL_ROWS
from pipecheck.records.monitor import MonitorResult, RunEnd
from pipecheck.report.anomalies import anomalies_parts
from pipecheck.report.blocks import Part, Table, render_text
from pipecheck.report.format import (
    distribution_rows,
    findings_text,
    format_breakdown,
    warnings_text,
)
from pipecheck.report.gains import gains_parts
from pipecheck.units import library_module, ms, short_location


def ended_early(end: RunEnd | None, total_steps: int, source: str = "") -> str | None:
    """The line a reader puts first when a Monitor record holds a run that did not finish:
    at which step it ended and why (None for a finished run)."""
    if end is None:
        return None
    where = f"{source}: " if source else ""
    if end.reason == "running":
        return (f"pipecheck: {where}this run ended early or is still going: the record was "
                f"written at step {end.step}, while the run was going (no end was recorded: "
                f"the process was killed, or goes on); it holds {total_steps} completed steps")
    return (f"pipecheck: {where}this run ended early at step {end.step} ({end.message}); "
            f"the record holds the {total_steps} steps completed before it")


def startup_rows(startup: StartUp | None) -> list[Sequence[object]]:
    """The first batch and the start-up work beside it (none when not known)."""
    if startup is None:
        return []
    return [["first batch (step 0's data wait)", ms(startup.first_batch_s)],
            ["start-up work beside it", work_text(startup.work) or "-"]]


def wall_per_step(result: MonitorResult) -> float | None:
    """The loop's throughput as time: wall time per step, compile left out (None: no step)."""
    b = result.breakdown
    if b.steps <= 0:
        return None
    return (b.wall_s - b.seconds(WALL_ROWS[COMPILE])) / b.steps


def site_owner(location: str, internal: bool) -> str:
    """Whose code a sync site is: pipecheck's lagged sync, a library's (by its module), or
    yours."""
    if internal:
        return "pipecheck lagged sync (expected)"
    module = library_module(location.rsplit(":", 1)[0])
    return f"library ({module})" if module is not None else "your code"


def format_monitor(result: MonitorResult, max_sites: int = 5) -> str:
    """Reporter: step time, breakdown, sync sites, findings and warnings of a Monitor run."""
    return render_text(monitor_parts(result, max_sites))


def verdict_line(result: MonitorResult) -> str:
    """The loop's verdict and its reason, as the report and the page show it."""
    return f"verdict: {result.verdict}" + (f" ({result.reason})" if result.reason else "")


def monitor_parts(result: MonitorResult, max_sites: int = 5, gains: bool = True
                  ) -> list[Part]:
    """The Monitor report as parts (``report.blocks``); ``gains`` False leaves out the
    headspace and gains (a page shows them in a section of their own)."""
    rows: list[Sequence[object]] = list(distribution_rows(result.step_time, "step time",
                                                          result.wall_per_step_s))
    rows += [["first step (incl. compile)", ms(result.first_step_s)]]
    rows += startup_rows(result.startup)
    if result.compile is not None:
        rows += [["compile time (step function)", ms(result.compile.compile_s)],
                 ["step function compilations", result.compile.train_step_compiles]]
    rows += [["steps", result.total_steps]]
    per_step = wall_per_step(result)
    if per_step is not None:
        rows += [["wall time per step (all steps, compile left out)", ms(per_step)]]
    early = ended_early(result.incomplete, result.total_steps)
    parts: list[Part] = [*([early] if early else []),
                         "pipecheck monitor: your training loop", Table(rows), "",
                         verdict_line(result), "",
             format_breakdown(result.breakdown)]
    if result.sync_sites:
        site_rows = [[short_location(s.location), s.code, f"{s.seconds:.3f} s",
                      f"{100 * s.share:.1f}%", site_owner(s.location, s.internal)]
                     for s in result.sync_sites[:max_sites]]
        parts += ["", "where the loop waited for the device:",
                  Table(site_rows, ["location", "code", "seconds", "share", ""])]
    if gains and (result.headspace_s is not None or result.gains):
        parts += ["", *gains_parts(result.headspace_s, result.gains)]
    if result.anomalies:
        parts += ["", *anomalies_parts(result.anomalies)]
    if result.findings:
        parts += ["", "findings:", findings_text(result.findings)]
    if result.warnings:
        parts += ["", warnings_text(result.warnings)]
    return parts
