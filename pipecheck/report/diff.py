"""Reporters for ``pipecheck diff`` and ``pipecheck import``: pure functions to text."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from pipecheck.records.diff import BetweenRuns, DiffResult, DiffRow, RunSummary
from pipecheck.records.imported import ImportedRun, OutsideSteps, WallTime
from pipecheck.report.anomalies import anomalies_part
from pipecheck.report.blocks import Part, Table, render_text
from pipecheck.report.format import findings_text, warnings_text
from pipecheck.report.monitor import ended_early
from pipecheck.units import ms, nbytes, p_value


def _num(v: float, signed: bool = False) -> str:
    sign = "+" if signed else ""
    if abs(v) >= 1000:
        return f"{v:{sign},.0f}"
    return f"{v:{sign}.4g}"


def _params(v: float) -> str:
    if abs(v) >= 1e8:
        return f"{v / 1e9:.3f} B"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.2f} M"
    return _num(v)


def value_text(unit: str, v: float | None, signed: bool = False) -> str:
    """A row value in its unit; '-' when unknown ('nan' for a loss that was NaN)."""
    if unit == "loss" and v is not None and math.isnan(v):
        return "nan"
    if v is None or not math.isfinite(v):
        return "-"
    if unit == "s":
        return ms(v, signed)
    if unit == "bytes":
        text = nbytes(int(abs(v)))
        return (("+" if v >= 0 else "-") + text) if signed else text
    if unit == "count":
        return (("+" if v >= 0 else "-") + _params(abs(v))) if signed else _params(v)
    if unit == "fraction":
        return f"{v * 100:+.1f} pp" if signed else f"{v:+.1%}"
    if unit == "steps":
        return f"{v:+.0f}" if signed else f"{v:.0f}"
    return _num(v, signed)


def significance_text(row: DiffRow) -> str:
    if not row.significance:
        return ""
    return f"{row.significance} ({p_value(row.p_value)})"


DIFF_HEADERS = ["", "A", "B", "B-A", "change", "significance"]


def diff_table(rows: Sequence[DiffRow]) -> str:
    return diff_rows_table(rows).text()


def diff_rows_table(rows: Sequence[DiffRow]) -> Table:
    table = []
    for r in rows:
        table.append([
            r.name,
            value_text(r.unit, r.a),
            value_text(r.unit, r.b),
            value_text(r.unit, r.diff, signed=True),
            "-" if r.relative is None or not math.isfinite(r.relative) else f"{r.relative:+.1%}",
            significance_text(r),
        ])
    return Table(table, DIFF_HEADERS)


def inflation_line(label: str, run: RunSummary | ImportedRun) -> str:
    inflation = run.mean_inflation
    n = len(run.anomalies)
    if not math.isfinite(inflation):
        return f"{label}: mean over all steps {value_text('s', run.mean_all_s)}"
    return (f"{label}: the {n} anomalous step(s) inflate the mean by {inflation:+.1%} "
            f"(all steps {value_text('s', run.mean_all_s)} vs steady state "
            f"{value_text('s', run.step_time.summary.mean)}); the headline is the steady-state "
            f"median, {value_text('s', run.step_time.summary.median)}")


def wall_time_lines(label: str, w: WallTime | None) -> list[str]:
    """The goodput-style account of a run's wall time (``analysis.logs.wall_time``): wall time,
    time in steps, time outside them, then each stretch outside them by cause; none where
    the log has no timestamps to tell."""
    if w is None:
        return []
    share = f" ({w.in_steps_s / w.wall_s:.1%})" if w.wall_s > 0 else ""
    head = (f"{label}wall time {value_text('s', w.wall_s)} by the log's timestamps: in steps "
            f"{value_text('s', w.in_steps_s)}{share}, outside them "
            f"{value_text('s', w.outside_s)}")
    return [head, *(f"  {outside_text(o)}" for o in w.outside)]


def outside_text(o: OutsideSteps) -> str:
    """One stretch outside the steps: where, how long, and its time by cause."""
    where = {"before": "before the first step",
             "after": f"after the last step ({o.after_step})",
             "between": f"after step {o.after_step}"}.get(o.where, o.where)
    causes = ", ".join(f"{s.cause} {value_text('s', s.seconds)}" for s in o.shares)
    return f"{where}: {value_text('s', o.seconds)}" + (f" ({causes})" if causes else "")


def format_diff(result: DiffResult) -> str:
    """The side-by-side report: sources, table, verdict, anomalies, warnings."""
    return render_text(diff_parts(result))


def sources_lines(result: DiffResult) -> list[str]:
    """What A and B are: a run each, or with several runs a side, how many and the first."""
    between = result.between_runs
    out = []
    for label, run in (("A", result.a), ("B", result.b)):
        n = 1 if between is None else len(between.runs_a if label == "A" else between.runs_b)
        head = f"{n} runs, the first " if n > 1 else ""
        out.append(f"{label}: {head}{run.source} ({run.description})")
    return out


def run_medians_table(between: BetweenRuns) -> Table:
    """Each run of each side: its number, median and file."""
    rows = [[label, i, value_text("s", median), source]
            for label, sources, medians in (("A", between.sources_a, between.runs_a),
                                            ("B", between.sources_b, between.runs_b))
            for i, (source, median) in enumerate(zip(sources, medians, strict=True), 1)]
    return Table(rows, ["side", "run", "median", "source"])


def diff_parts(result: DiffResult) -> list[Part]:
    """The diff report as parts (``report.blocks``)."""
    a, b = result.a, result.b
    early = [line for label, run in (("A", a), ("B", b))
             if (line := ended_early(run.incomplete, run.total_steps or len(run.steps),
                                     f"{label} ({run.source})"))]
    between = result.between_runs
    parts: list[Part] = [
        *early,
        "pipecheck diff: B compared with A (step times over the steady state)",
        *sources_lines(result),
        "",
        diff_rows_table(result.rows),
    ]
    if between is not None:
        parts += ["", "each run's steady-state median (the step-time median row and verdict "
                      "test these; the other rows are each side's first run):",
                  run_medians_table(between)]
    if result.versions:
        parts += ["", Table([[v.name, v.a or "-", v.b or "-",
                              "?" if v.a is None or v.b is None
                              else "same" if v.a == v.b else "DIFFERENT"]
                             for v in result.versions], ["versions", "A", "B", ""])]
    parts += ["", result.verdict, "", inflation_line("A", a), inflation_line("B", b)]
    walls = wall_time_lines("A: ", a.wall_time) + wall_time_lines("B: ", b.wall_time)
    if walls:
        parts += ["", *walls]
    if a.anomalies or b.anomalies:
        parts += ["", "steps kept out of the steady state:",
                  anomalies_part([("A", a.anomalies), ("B", b.anomalies)])]
    if result.warnings:
        parts += ["", warnings_text(result.warnings)]
    return parts


def _gb(v: float | None) -> str:
    return "-" if v is None else f"{v:g} GB"


CHECKPOINT_EVENT_KINDS = frozenset({
    "checkpoint_save", "checkpoint_saved", "checkpoint_async_start", "checkpoint_wait_previous",
    "checkpoint_wait_step", "async_save_blocking", "async_save_started", "async_save_done",
    "async_save_finalized", "sync_save_start", "sync_save_end"})
"""The events the import report counts as checkpoint events (eval, profiler and restart
lines are events too)."""


def _first_step(run: ImportedRun) -> str:
    first = run.anomalies[0] if run.anomalies else None
    if first is not None and first.step == run.steps[0].step and first.cause == "compilation":
        return value_text("s", first.time_s)
    if first is not None and first.step == run.steps[0].step and first.cause == "start-up":
        return (f"- (step {first.step}, {value_text('s', first.time_s)}, is faster than the "
                "steady state: compiled before the loop)")
    return f"- (the log starts at step {run.steps[0].step}; no compile step seen)"


def _final_loss(run: ImportedRun, losses: Sequence[float]) -> str:
    if run.nonfinite_loss_from is not None:
        return f"nan or inf from step {run.nonfinite_loss_from}"
    return "-" if not losses else _num(losses[-1])


def format_imported(run: ImportedRun) -> str:
    """``pipecheck import``: what was read from the log and its steady state."""
    return render_text(imported_parts(run))


def imported_parts(run: ImportedRun) -> list[Part]:
    """The import report as parts (``report.blocks``)."""
    d, mem = run.step_time.summary, run.memory
    steady = run.steady_mask

    def present(name: str, rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        values = run.steps.column(name)[rows]
        return values[~np.isnan(values)]

    tflops = present("tflops_per_s_per_device", steady)
    tokens = present("tokens_per_s_per_device", steady)
    losses = present("loss")[-1:].tolist()

    def med(xs: np.ndarray) -> str:
        return "-" if not xs.size else _num(float(np.median(xs)))

    rows: list[Sequence[object]] = [
        ["steps logged", f"{len(run.steps)} (steps {run.steps[0].step}..{run.steps[-1].step})"],
        ["steady-state steps (n)", d.n],
        ["step time median (steady)", value_text("s", d.median)],
        ["step time p90 (steady)", value_text("s", d.p90)],
        ["step time mean (steady)", value_text("s", d.mean)],
        ["step time mean (all steps)", f"{value_text('s', run.mean_all_s)} "
                                       f"({run.mean_inflation:+.1%} from anomalies)"
         if math.isfinite(run.mean_inflation) else value_text("s", run.mean_all_s)],
        ["first step (compile)", _first_step(run)],
        ["parameters", "-" if run.params is None else _params(run.params)],
        ["TFLOP/s per device (median)", med(tflops)],
        ["tokens/s per device (median)", med(tokens)],
        ["Total TFLOPs per train step", "-" if run.total_tflops_per_step is None
         else _num(run.total_tflops_per_step)],
        ["final loss", _final_loss(run, losses)],
        ["memory (compiled step)",
         f"{_gb(mem.compiled_total_gb)} (output {_gb(mem.compiled_output_gb)}, "
         f"temp {_gb(mem.compiled_temp_gb)})" if mem.compiled_total_gb is not None else "-"],
        ["memory in use (device, max)", f"{_gb(mem.device_in_use_gb)} / "
                                        f"{_gb(mem.device_limit_gb)}"
         if mem.device_in_use_gb is not None else "-"],
        ["checkpoint events", sum(e.kind in CHECKPOINT_EVENT_KINDS for e in run.events)],
        ["jax / jaxlib", f"{run.env.get('jax', '-')} / {run.env.get('jaxlib', '-')}"],
        ["backend", run.env.get("backend", "-")],
    ]
    parts: list[Part] = [f"pipecheck import: {run.source} (MaxText training log)",
                         Table(rows),
             "", inflation_line("steady state", run)]
    if run.wall_time is not None:
        parts += ["", *wall_time_lines("", run.wall_time)]
    if run.anomalies:
        parts += ["", "steps kept out of the steady state:",
                  anomalies_part([("", run.anomalies)])]
    if run.findings:
        parts += ["", "findings:", findings_text(run.findings)]
    if run.warnings:
        parts += ["", warnings_text(run.warnings)]
    return parts
