"""The compare report: verdict, evidence, settings tried, host breakdown, findings.

It renders what the record holds: the estimates the verdict was decided on (T, D, R with
their intervals) and the tuning outcome; it computes nothing of its own."""

from __future__ import annotations

from typing import Sequence

from tabulate import tabulate

from pipecheck.records.common import Estimate
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.report.anomalies import anomalies_text
from pipecheck.report.format import findings_text, warnings_text
from pipecheck.units import ms


def _ci(e: Estimate) -> str:
    if e.n < 2:
        return "-"
    return f"{ms(e.low)} .. {ms(e.high)}"


def _evidence(r: CompareResult) -> list[Sequence[object]]:
    t, d, real = r.estimates.target, r.estimates.loader, r.estimates.real
    return [
        ["target step T (compute alone)", "median", ms(r.target.summary.median), _ci(t),
         r.target.summary.n,
         r.sources.get("target", "")],
        [f"loader D ({r.chosen_workers} workers, {r.chosen_threads} threads)", "mean",
         ms(r.loader_step_s), _ci(d), d.n, r.sources.get("loader", "")],
        ["real-data step R", "median", ms(r.real.summary.median), _ci(real), r.real.summary.n,
         r.sources.get("real", "")],
    ]


def _is_chosen(r: CompareResult, s: LoaderSetting) -> bool:
    """The setting the search chose (all four knobs)."""
    return bool(s.settings == r.tuning.chosen)


def _buffers_vary(r: CompareResult) -> bool:
    return len({(s.per_worker_buffer, s.settings.prefetch) for s in r.loader}) > 1


def _tried(r: CompareResult, goal: float) -> list[Sequence[object]]:
    rows: list[Sequence[object]] = []
    buffers = _buffers_vary(r)
    for s in r.loader:
        mark = "<- chosen" if _is_chosen(r, s) else ""
        d = s.loader_time.value
        knobs = [s.workers, s.threads] + ([s.per_worker_buffer if s.workers else "-",
                                           s.settings.prefetch] if buffers else [])
        rows.append([*knobs, ms(s.first_batch_s), ms(d), ms(s.batch_time.summary.median),
                     ms(s.batch_time.summary.p90), "yes" if d <= goal else "no", mark])
    return rows


def format_compare(r: CompareResult) -> str:
    goal = r.tuning.target_s * r.tuning.headroom
    total = sum(r.host_spans.values())
    host = [[name, ms(v), f"{100 * v / total:.0f}%" if total else "-"]
            for name, v in r.host_spans.items() if v > 0]
    parts = [
        f"pipecheck compare: {r.verdict.upper()}",
        r.verdict_reason,
        "",
        tabulate(_evidence(r), headers=["measurement", "statistic", "value", "95% CI", "n",
                                        "source"],
                 tablefmt="simple", disable_numparse=True),
        "",
        f"loader settings tried (goal: D <= {ms(goal)}, {100 * r.tuning.headroom:.0f}% of T "
        "as measured before the search)",
        f"search: {r.tuning.stop_reason}",
        tabulate(_tried(r, goal), headers=["workers", "threads",
                                           *(["buffer", "prefetch"] if _buffers_vary(r) else []),
                                           "first batch", "mean/batch", "median", "p90",
                                           "meets goal", ""],
                 tablefmt="simple", disable_numparse=True),
    ]
    if r.tuning.scaling != "unknown":
        parts.append(f"pipeline scaling: {r.tuning.scaling}")
    if host:
        parts += ["", "host time per real-data step (steady state):",
                  tabulate(host, headers=["span", "per step", "share"], tablefmt="simple",
                           disable_numparse=True)]
    if r.anomalies:
        parts += ["", "real-data " + anomalies_text(r.anomalies)]
    if r.findings:
        parts += ["", "findings:", findings_text(r.findings)]
    parts += ["", f"recommendation: {r.recommendation}"]
    if r.warnings:
        parts += ["", warnings_text(r.warnings)]
    return "\n".join(parts)
