"""Reporters: pure functions from results to text. Only the CLI prints."""

from __future__ import annotations

import math
import os
from typing import Any, Sequence

from tabulate import tabulate

from pipecheck.records.common import Distribution, Finding
from pipecheck.records.synthetic import SyntheticResult

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
"""pipecheck's own package directory (its files are shown as ``pipecheck/...``)."""


def short_path(path: str, cwd: str | None = None) -> str:
    """A file path as reports show it: pipecheck's own files as ``pipecheck/...``, files
    under the working directory relative to it, any other path unchanged. Records keep
    the absolute path; only what is printed is shortened."""
    if path.startswith("<"):
        return path
    full = os.path.abspath(path)
    if full.startswith(PACKAGE_DIR + os.sep):
        return "pipecheck/" + os.path.relpath(full, PACKAGE_DIR).replace(os.sep, "/")
    base = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if full.startswith(base + os.sep):
        return os.path.relpath(full, base)
    return path


def short_location(location: str, cwd: str | None = None) -> str:
    """``path:line`` with the path shortened as by :func:`short_path`."""
    path, sep, line = location.rpartition(":")
    if not sep or not line.isdigit():
        return short_path(location, cwd) if os.path.isabs(location) else location
    return f"{short_path(path, cwd)}:{line}"


def ms(seconds: float | None) -> str:
    """Seconds as milliseconds with sensible precision; '-' when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    if abs(seconds) >= 1.0:
        return f"{seconds:.2f} s"
    v = seconds * 1000.0
    return f"{v:.1f} ms" if abs(v) >= 10 else f"{v:.2f} ms"


def rate(value: float | None, unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M{unit}"
    if value >= 1e3:
        return f"{value / 1e3:.2f} k{unit}"
    return f"{value:.1f} {unit}"


def nbytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n = n / 1024  # type: ignore[assignment]
    return str(n)


def distribution_rows(d: Distribution, label: str) -> list[list[str]]:
    return [
        [f"{label} median", ms(d.median_s)],
        [f"{label} p10 / p90", f"{ms(d.p10_s)} / {ms(d.p90_s)}"],
        [f"{label} IQR", ms(d.iqr_s)],
        ["steady-state steps (n)", str(d.n)],
    ]


def findings_text(findings: Sequence[Finding]) -> str:
    lines = []
    for f in findings:
        where = f" [{short_location(f.location)}]" if f.location else ""
        lines.append(f"- {f.kind}{where}: {f.message}")
        if f.fix:
            lines.append(f"  fix: {f.fix}")
    return "\n".join(lines)


def warnings_text(warnings: Sequence[str]) -> str:
    return "\n".join(f"warning: {w}" for w in warnings)


def format_synthetic(result: SyntheticResult) -> str:
    """The synthetic report: target step time, compile, throughput, findings, warnings."""
    c, t = result.compile, result.throughput
    rows: list[list[Any]] = [["workload", result.config.get("workload")]]
    rows += distribution_rows(result.step_time, "target step time")
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
    parts = ["pipecheck synthetic: target step time (compute alone)",
             tabulate(rows, tablefmt="simple", disable_numparse=True)]
    if result.steps:
        from pipecheck.analysis.breakdown import breakdown_of_steps, format_breakdown

        parts += ["", format_breakdown(breakdown_of_steps(result.steps, c.compile_s))]
    if result.anomalies:
        from pipecheck.report.anomalies import anomalies_text  # it imports this module

        parts += ["", anomalies_text(result.anomalies)]
    if c.findings:
        parts += ["", "findings:", findings_text(c.findings)]
    if result.warnings:
        parts += ["", warnings_text(result.warnings)]
    return "\n".join(parts)
