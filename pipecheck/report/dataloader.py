"""Reporter for ``pipecheck dataloader``: a pure function from the result to text."""

from __future__ import annotations

import math
from typing import Sequence

from tabulate import tabulate

from pipecheck.analysis.loader.loader_limits import MEMORY_BOUND, cpu_per_worker, main_share
from pipecheck.analysis.loader.storage import evidence_of, is_storage_bound
from pipecheck.records.common import Finding
from pipecheck.records.dataloader import DataloaderResult, LoaderSetting, Stage, slowest_stage
from pipecheck.report.blocks import Part, Table, render_text
from pipecheck.report.format import findings_text, warnings_text, workload_name
from pipecheck.units import ms, rate

MAX_STAGE_NAME = 60


def _pct(ratio: float) -> str:
    return "-" if ratio is None or not math.isfinite(ratio) else f"{100 * ratio:.1f}%"


def _seconds(s: float) -> str:
    return f"{s:.2f} s" if s >= 1 else ms(s)


def _name(stage: Stage) -> str:
    n = stage.name
    return n if len(n) <= MAX_STAGE_NAME else n[: MAX_STAGE_NAME - 3] + "..."


def _slowest(setting: LoaderSetting) -> str:
    s = slowest_stage(setting.stages)
    return "-" if s is None else f"{_name(s)} ({_pct(s.wait_ratio)})"


def _loader_time(setting: LoaderSetting) -> list[str]:
    """D, the loader time compare's verdict uses, and its interval."""
    d = setting.loader_time
    return [ms(d.value), f"{ms(d.low)} .. {ms(d.high)}" if d.n >= 2 else "-"]


def setting_rows(results: Sequence[LoaderSetting]) -> list[Sequence[object]]:
    rows: list[Sequence[object]] = []
    for r in results:
        d = r.batch_time.summary
        rows.append([
            r.workers, r.threads, _seconds(r.first_batch_s), *_loader_time(r), ms(d.median),
            ms(d.p90),
            ms(d.p99), f"{r.batches_per_s:.1f}" if math.isfinite(r.batches_per_s) else "-",
            rate(r.examples_per_s, "ex/s"), rate(r.tokens_per_s, "tok/s"),
        ])
    return rows


def _share(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.0f}%"


def _mb(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) or x <= 0 else f"{x:.0f} MB"


def cost_rows(results: Sequence[LoaderSetting], findings: Sequence[Finding]
              ) -> list[Sequence[object]]:
    """Per setting: D, start-up, the training process's CPU share, CPU per worker, memory,
    and what limits the setting (the kind of its stored limit finding). Settings measured
    without resources are left out."""

    limits = {f.location: f.kind for f in findings if f.kind != MEMORY_BOUND}
    rows: list[Sequence[object]] = []
    for r in results:
        res = r.resources
        if res is None:
            continue
        rows.append([
            r.workers, r.threads, r.per_worker_buffer if r.workers else "-",
            r.settings.prefetch, ms(r.loader_time.value),
            _seconds(r.first_batch_s),
            _share(main_share(r)), _share(cpu_per_worker(res)),
            _mb(res.worker_rss_mb) if r.workers else "-", _mb(res.main_rss_mb),
            limits.get(r.settings.short_label(), "-"),
        ])
    return rows


COST_HEADERS = ["workers", "threads", "buffer", "prefetch", "D (loader)", "first batch",
                "main process", "CPU per worker", "RSS per worker", "main RSS", "limit"]


def cost_table(results: Sequence[LoaderSetting], findings: Sequence[Finding]) -> str:
    return tabulate(cost_rows(results, findings), headers=COST_HEADERS, tablefmt="simple",
                    disable_numparse=True)


def stage_parts(setting: LoaderSetting) -> Table:
    rows = [[_name(s), s.where, _pct(s.wait_ratio), ms(s.avg_s), s.n]
            for s in setting.stages if s.n > 0]
    return Table(rows, ["stage", "where", "wait", "per element", "elements"])


def stage_table(setting: LoaderSetting) -> str:
    return stage_parts(setting).text()


def _resident(x: float | None) -> str:
    return "unknown" if x is None else f"{100 * x:.0f}%"


def storage_rows(results: Sequence[LoaderSetting]) -> list[Sequence[object]]:
    """Per setting: the reading stage (latency per read, reads per batch, its wait share),
    the processes' CPU share, whether it is storage-bound, and the page cache around it."""
    rows: list[Sequence[object]] = []
    for r in results:
        if r.reads is None and r.page_cache is None:
            continue
        e = evidence_of(r)
        c = r.page_cache
        rows.append([
            r.workers, r.threads,
            ms(r.reads.read_s) if r.reads else "-",
            f"{r.reads.reads_per_batch:.1f}" if r.reads else "-",
            _share(r.reads.wait_ratio) if r.reads else "-",
            _share(e.cpu_share) if e else "-",
            ("yes" if is_storage_bound(e) else "no") if e else "-",
            "-" if c is None else f"{_resident(c.resident_before)} -> "
                                  f"{_resident(c.resident_after)}",
            "-" if c is None else ("yes" if c.evicted else "no"),
        ])
    return rows


STORAGE_HEADERS = ["workers", "threads", "per read", "reads/batch", "read wait", "CPU share",
                   "storage-bound", "page cache", "evicted"]


def storage_parts(result: DataloaderResult) -> list[Part]:
    """The reading stage and the page cache per setting, and the storage-bound finding."""
    rows = storage_rows(result.results)
    if not rows:
        return []
    files = next((r.page_cache for r in result.results if r.page_cache is not None), None)
    data = "" if files is None else (f"; page cache = share of the {files.files} data "
                                     "file(s) in memory before -> after the setting; unknown "
                                     "on FUSE, whose files are not opened for it, and where "
                                     "they cannot be mapped")
    parts: list[Part] = [
        "", "Reading, per setting (per read = the reading stage's wall time per element; "
            "read wait = its share of the pipeline's wait; CPU share = CPU the processes "
            f"spent, and waited for, per batch against the wall time they had{data}):",
        "", Table(rows, STORAGE_HEADERS)]
    if result.storage_findings:
        parts += ["", "Storage (loading that waits on reads, not on CPU work):",
                  findings_text(result.storage_findings)]
    return parts


def format_dataloader(result: DataloaderResult) -> str:
    """The table of settings, then each setting's stage breakdown, then warnings."""
    return render_text(dataloader_parts(result))


SETTING_HEADERS = ["workers", "threads", "first batch", "D/batch", "95% CI", "median", "p90",
                   "p99", "batches/s", "examples/s", "tokens/s"]


def element_cost_parts(result: DataloaderResult) -> list[Part]:
    """The expensive stage's per-element costs, and the slow-samples finding."""
    c = result.element_costs
    if c is None:
        return []
    d = c.costs.summary
    lines: list[Part] = [
        "", f"Per-element cost of {c.stage} ({d.n} elements, each call timed apart from the "
            f"batches; {c.per_batch} per batch): median {ms(d.median)}, p99 {ms(d.p99)}, "
            f"max {ms(max(c.costs.samples_s))}"]
    if result.sample_findings:
        lines += ["", "Slow samples (each batch waits for its elements):",
                  findings_text(result.sample_findings)]
    return lines


def dataloader_parts(result: DataloaderResult) -> list[Part]:
    """The dataloader report as parts (``report.blocks``)."""
    cfg = result.config
    workload = workload_name(cfg.get("workload"))
    source = f", source {cfg['source']}" if "source" in cfg else ""
    put = "with device_put" if result.device_put else "without device_put"
    put += ", the data files evicted from the page cache before each (--cold)" \
        if result.cold else ""
    lines: list[Part] = [
        f"pipecheck dataloader: the input pipeline alone (workload {workload}{source}; "
        f"{result.batches} batches timed after the first, {put})",
        "",
        Table(setting_rows(result.results), SETTING_HEADERS),
        "D/batch: the loader time compare uses, the mean per batch (1 / throughput) without "
        "the batches workers buffered at start-up.",
    ]
    cores = int(result.env.get("cpu_count") or 1)
    if any(r.resources is not None for r in result.results):
        lines += [
            "",
            f"Per setting, what it costs ({cores} cores; D = seconds per batch as the verdict "
            "counts it; main process = its own time per batch as a share of D; CPU per "
            "worker as a share of one core; RSS = peak resident memory):",
            "",
            Table(cost_rows(result.results, result.limit_findings), COST_HEADERS),
        ]
    if result.limit_findings:
        lines += ["", "Why more workers stop helping (or keep helping), per setting:",
                  findings_text(result.limit_findings)]
    if any(r.stages for r in result.results):
        lines += ["", "Stage breakdown (Grain stage timing; wait = share of the pipeline's time "
                      "spent in the stage):"]
    for r in result.results:
        if not r.stages:  # no stage timing for this pipeline (a warning says why)
            continue
        partial = "" if r.stages_complete else " (partial)"
        lines += ["", f"workers={r.workers} threads={r.threads}: slowest stage "
                      f"{_slowest(r)}{partial}", stage_parts(r)]
    lines += storage_parts(result)
    lines += element_cost_parts(result)
    warnings = [f"workers={r.workers} threads={r.threads}: {w}" for r in result.results
                for w in (*r.warnings, *(r.page_cache.warnings if r.page_cache else ()))]
    if warnings:
        lines += ["", warnings_text(warnings)]
    return lines
