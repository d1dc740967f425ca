"""The Monitor report: step time, breakdown, sync sites, findings and warnings."""

from __future__ import annotations

from typing import Sequence

from tabulate import tabulate

from pipecheck.records.monitor import MonitorResult
from pipecheck.report.anomalies import anomalies_text
from pipecheck.report.format import (
    distribution_rows,
    findings_text,
    format_breakdown,
    warnings_text,
)
from pipecheck.units import ms, short_location


def format_monitor(result: MonitorResult, max_sites: int = 5) -> str:
    """Reporter: step time, breakdown, sync sites, findings and warnings of a Monitor run."""
    rows: list[Sequence[object]] = list(distribution_rows(result.step_time, "step time"))
    rows += [["first step (incl. compile)", ms(result.first_step_s)]]
    if result.compile is not None:
        rows += [["compile time (step function)", ms(result.compile.compile_s)],
                 ["step function compilations", result.compile.train_step_compiles]]
    rows += [["steps", result.total_steps]]
    parts = ["pipecheck monitor: your training loop",
             tabulate(rows, tablefmt="simple", disable_numparse=True), "",
             format_breakdown(result.breakdown)]
    if result.sync_sites:
        site_rows = [[short_location(s.location), s.code[:50], f"{s.seconds:.3f} s",
                      f"{100 * s.share:.1f}%",
                      "pipecheck lagged sync (expected)" if s.internal else "your code"]
                     for s in result.sync_sites[:max_sites]]
        parts += ["", "where the loop waited for the device:",
                  tabulate(site_rows, headers=["location", "code", "seconds", "share", ""],
                           tablefmt="simple", disable_numparse=True)]
    if result.anomalies:
        parts += ["", anomalies_text(result.anomalies)]
    if result.findings:
        parts += ["", "findings:", findings_text(result.findings)]
    if result.warnings:
        parts += ["", warnings_text(result.warnings)]
    return "\n".join(parts)
