"""The compare report: verdict, evidence, settings tried, host breakdown, findings."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from pipecheck.analysis import stats
from pipecheck.analysis.verdict import LOADER_HEADROOM
from pipecheck.compare import loader_estimate, loader_time
from pipecheck.records.common import Distribution
from pipecheck.records.compare import CompareResult
from pipecheck.report.anomalies import anomalies_text
from pipecheck.report.format import findings_text, ms, warnings_text


def _ci(d: Distribution) -> str:
    if d.n < 2:
        return "-"
    lo, hi = stats.median_ci(d.samples_s)
    return f"{ms(lo)} .. {ms(hi)}"


def format_compare(r: CompareResult) -> str:
    chosen = next((s for s in r.loader if s.workers == r.chosen_workers
                   and s.threads == r.chosen_threads), None)
    loader_dist = chosen.batch_time if chosen is not None else Distribution.of([])
    loader_ci, loader_n = "-", 0
    if chosen is not None and loader_dist.n >= 2:
        est = loader_estimate(chosen)
        loader_ci, loader_n = f"{ms(est.low)} .. {ms(est.high)}", est.n
    evidence = [
        ["target step T (compute alone)", "median", ms(r.target.median_s), _ci(r.target),
         r.target.n, r.sources.get("target", "")],
        [f"loader D ({r.chosen_workers} workers, {r.chosen_threads} threads)", "mean",
         ms(loader_time(chosen)) if chosen is not None else "-", loader_ci, loader_n,
         r.sources.get("loader", "")],
        ["real-data step R", "median", ms(r.real.median_s), _ci(r.real), r.real.n,
         r.sources.get("real", "")],
    ]
    searched_with = float(r.tuning.get("target_s", r.target_step_s))
    goal = searched_with * LOADER_HEADROOM
    tried: list[list[Any]] = []
    for s in r.loader:
        mark = "<- chosen" if (s.workers, s.threads) == (r.chosen_workers, r.chosen_threads) \
            else ""
        tried.append([s.workers, s.threads, ms(s.first_batch_s), ms(loader_time(s)),
                      ms(s.batch_time.median_s), ms(s.batch_time.p90_s),
                      "yes" if loader_time(s) <= goal else "no", mark])
    total = sum(r.breakdown.values())
    host = [[name, ms(v), f"{100 * v / total:.0f}%" if total else "-"]
            for name, v in r.breakdown.items() if v > 0]
    parts = [
        f"pipecheck compare: {r.verdict.upper()}",
        r.verdict_reason,
        "",
        tabulate(evidence, headers=["measurement", "statistic", "value", "95% CI", "n", "source"],
                 tablefmt="simple", disable_numparse=True),
        "",
        f"loader settings tried (goal: D <= {ms(goal)}, {100 * LOADER_HEADROOM:.0f}% of T "
        "as measured before the search)",
        f"search: {r.tuning.get('stop_reason', '')}",
        tabulate(tried, headers=["workers", "threads", "first batch", "mean/batch", "median",
                                 "p90", "meets goal", ""],
                 tablefmt="simple", disable_numparse=True),
    ]
    if r.tuning.get("scaling") not in (None, "unknown"):
        parts.append(f"pipeline scaling: {r.tuning['scaling']}")
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
