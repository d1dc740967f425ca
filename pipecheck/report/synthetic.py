"""The synthetic report: target step time, compile, throughput, breakdown, findings."""

from __future__ import annotations

from typing import Sequence

from pipecheck.analysis.breakdown import breakdown_of_steps
from pipecheck.records.synthetic import SyntheticResult
from pipecheck.report.anomalies import anomalies_parts
from pipecheck.report.blocks import Part, Table, render_text
from pipecheck.report.format import (
    distribution_rows,
    findings_text,
    format_breakdown,
    warnings_text,
    workload_name,
)
from pipecheck.units import ms, nbytes, rate


def format_synthetic(result: SyntheticResult) -> str:
    """The synthetic report: target step time, compile, throughput, findings, warnings."""
    return render_text(synthetic_parts(result))


def synthetic_parts(result: SyntheticResult) -> list[Part]:
    """The synthetic report as parts (``report.blocks``)."""
    c, t = result.compile, result.throughput
    rows: list[Sequence[object]] = [["workload", workload_name(result.config.get("workload"))]]
    rows += distribution_rows(result.step_time, "target step time", result.wall_per_step_s)
    rows += [
        ["first step (incl. compile)", ms(c.first_step_s)],
        ["compile time (train step)", ms(c.compile_s)],
        ["train step compilations", c.train_step_compiles],
        ["examples/s", rate(t.examples_per_s, "ex/s")],
    ]
    if t.tokens_per_s is not None:
        rows.append(["tokens/s", rate(t.tokens_per_s, "tok/s")])
    if t.tflops_per_s is not None:
        source = f" ({t.flops_source})" if t.flops_source else ""
        rows.append(["TFLOP/s", f"{t.tflops_per_s:.4f}{source}"])
    rows.append(["peak memory (compiled step)", nbytes(t.peak_memory_bytes)])
    env = result.env
    rows.append(["devices", f"{env.get('device_count')} x {env.get('device_kind')} "
                            f"({env.get('backend')})"])
    parts: list[Part] = ["pipecheck synthetic: target step time (compute alone)",
                         Table(rows)]
    if result.steps:
        parts += ["", format_breakdown(breakdown_of_steps(result.steps, c.compile_s))]
    if result.anomalies:
        parts += ["", *anomalies_parts(result.anomalies)]
    if c.findings:
        parts += ["", "findings:", findings_text(c.findings)]
    if result.warnings:
        parts += ["", warnings_text(result.warnings)]
    return parts
