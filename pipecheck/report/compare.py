"""The compare report: verdict, evidence, settings tried, host breakdown, findings.

It renders what the record holds: the estimates the verdict was decided on (T, D, R with
their intervals) and the tuning outcome; it computes nothing of its own."""

from __future__ import annotations

from typing import Sequence

from pipecheck.analysis.first_batch import work_text
from pipecheck.analysis.loader.whatif import plus_minus, too_unsure
from pipecheck.analysis.machine_load import machine_was_shared, phase_loads
from pipecheck.records.common import Estimate, StartUp
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.kinds import verdict_text
from pipecheck.records.machine_load import MachineLoad
from pipecheck.records.whatif import WhatIfCheck
from pipecheck.report.anomalies import anomalies_parts
from pipecheck.report.blocks import Part, Table, render_text
from pipecheck.report.format import WALL_PER_STEP_ROW, findings_text, warnings_text
from pipecheck.report.gains import INTERVALS_LOW_WHY, gains_parts
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
        *([[f"real-data {WALL_PER_STEP_ROW}", "mean", ms(w.value), _ci(w), w.n,
            r.sources.get("real", "")]] if (w := r.wall_per_step_s) is not None else []),
        *([[f"R at the first setting ({r.loader[0].workers} workers, "
            f"{r.loader[0].threads} threads)", "median", ms(b.value), _ci(b), b.n,
            "measured"]] if (b := r.estimates.real_baseline) is not None and r.loader else []),
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
        mark = "yes" if _is_chosen(r, s) else ""
        d = s.loader_time.value
        knobs = [s.workers, s.threads] + ([s.per_worker_buffer if s.workers else "-",
                                           s.settings.prefetch] if buffers else [])
        rows.append([*knobs, ms(s.first_batch_s), ms(d), ms(s.batch_time.summary.median),
                     ms(s.batch_time.summary.p90), "yes" if d <= goal else "no", mark])
    return rows


def format_compare(r: CompareResult) -> str:
    return render_text(compare_parts(r))


def verdict_line(r: CompareResult) -> str:
    return f"pipecheck compare: {verdict_text(r.verdict).upper()}"


def recommendation_line(r: CompareResult) -> str:
    return f"recommendation: {r.recommendation}"


EVIDENCE_HEADERS = ["measurement", "statistic", "value", "95% CI", "n", "source"]


def tried_table(r: CompareResult) -> Table:
    """The loader settings tried, in the order tried, the chosen one marked."""
    goal = r.tuning.target_s * r.tuning.headroom
    return Table(_tried(r, goal), ["workers", "threads",
                                   *(["buffer", "prefetch"] if _buffers_vary(r) else []),
                                   "first batch", "mean/batch", "median", "p90",
                                   "meets goal", "chosen"])


def whatif_check_line(c: WhatIfCheck) -> str:
    """compare's self-check: a setting the loader model did not see, predicted vs measured."""
    p, m = c.predicted_loader_s, c.measured_loader_s
    return (f"what-if self-check: {c.setting.grain().short_label()} (not tried by the search) "
            f"predicted D = {ms(p.value)} ({ms(p.low)} .. {ms(p.high)}), measured "
            f"{ms(m.value)}{_how_read(c)}: error {100 * c.error:.0f}% (docs/whatif.md)")


def _how_read(c: WhatIfCheck) -> str:
    """How sure the check's reading is, where that is news: read twice, or too unsure."""
    m, first = c.measured_loader_s, c.first_measured_loader_s
    sure = plus_minus(m.relative_half_width())
    if c.reads > 1 and first is not None:
        still = ", still too unsure" if too_unsure(m) else ""
        return (f" over {c.batches} batches, {sure}{still} (read longer: the first reading, "
                f"{ms(first.value)} {plus_minus(first.relative_half_width())}, was too "
                "unsure to judge a 10% error)")
    return f" ({sure}: too unsure to judge a 10% error)" if too_unsure(m) else ""


def machine_load_line(m: MachineLoad) -> str:
    """The CPU other processes used during each phase, compactly."""
    each = ", ".join(f"{label} {cores:.1f}" for label, cores in phase_loads(m))
    return f"other processes' CPU while measuring (cores of {m.cores}): {each}"


def startup_line(s: StartUp) -> str:
    """Time to the first batch next to the start-up work it could overlap."""
    return (f"start-up: first batch {s.first_batch_s:.2f} s; beside it "
            f"{work_text(s.work) or 'no start-up work recorded'}")


def compare_gains_parts(r: CompareResult) -> list[Part]:
    """What each change buys: the headspace, the notes and the ranked gains."""
    return gains_parts(r.headspace_s, r.gains, r.gains_notes, INTERVALS_LOW_WHY)


def compare_parts(r: CompareResult, gains: bool = True) -> list[Part]:
    """The compare report as parts: verdict, evidence, settings tried, host time,
    anomalies, findings, what each change buys (``gains`` False leaves it out: a page shows
    it in a section of its own), recommendation, warnings."""
    goal = r.tuning.target_s * r.tuning.headroom
    total = sum(r.host_spans.values())
    host = [[name, ms(v), f"{100 * v / total:.0f}%" if total else "-"]
            for name, v in r.host_spans.items() if v > 0]
    parts: list[Part] = [
        verdict_line(r),
        r.verdict_reason,
        "",
        Table(_evidence(r), EVIDENCE_HEADERS),
        *([machine_load_line(r.machine_load)] if r.machine_load is not None
          and machine_was_shared(r.machine_load) else []),
        "",
        f"loader settings tried (goal: D <= {ms(goal)}, {100 * r.tuning.headroom:.0f}% of T "
        "as measured before the search)",
        f"search: {r.tuning.stop_reason}",
        *([f"search order: {r.tuning.order}"] if r.tuning.order else []),
        tried_table(r),
    ]
    if r.tuning.scaling != "unknown":
        parts.append(f"pipeline scaling: {r.tuning.scaling}")
    if r.whatif_check is not None:
        parts.append(whatif_check_line(r.whatif_check))
    if r.startup is not None:
        parts.append(startup_line(r.startup))
    if host:
        parts += ["", "host time per real-data step (steady state):",
                  Table(host, ["span", "per step", "share"])]
    if r.anomalies:
        parts += ["", *anomalies_parts(r.anomalies, "real-data ")]
    if r.findings:
        parts += ["", "findings:", findings_text(r.findings)]
    what_buys = compare_gains_parts(r) if gains else []
    if what_buys:
        parts += ["", *what_buys]
    parts += ["", recommendation_line(r)]
    if r.warnings:
        parts += ["", warnings_text(r.warnings)]
    return parts
