"""compare's findings and its recommendation: pure functions of what was measured.

Each finding names what holds the run back, with the numbers behind it and, where there is
one, the fix. Which findings apply depends on the verdict: a sync is a problem only when
the run is forced-sync, a slow loader only when it is (or was, before tuning) input-bound.
"""

from __future__ import annotations

import os
from typing import Mapping, Sequence

from pipecheck.analysis.loader.loader_limits import limit_findings
from pipecheck.analysis.loader.tuner import TuningOutcome
from pipecheck.analysis.verdict import HARMLESS_SYNC_SHARE, Verdict, beyond_loader_cpu
from pipecheck.records.common import Finding, SyncSite
from pipecheck.records.compare import Estimates
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import DEFAULT_THREADS, GrainSettings
from pipecheck.records.kinds import (
    COMPUTE_BOUND,
    CPU_BOUND,
    FORCED_SYNC,
    INPUT_BOUND,
    LATENCY_BOUND,
    verdict_text,
)
from pipecheck.records.monitor import SyncSiteRecord
from pipecheck.units import ms, short_location


def user_sync_share(sites: Sequence[SyncSite], n_steps: int, real_median_s: float) -> float:
    """Share of a real-data step spent blocked in the user's syncs (pipecheck's own excluded)."""
    if n_steps <= 0 or not real_median_s > 0:
        return 0.0
    return sum(s.seconds for s in sites if not s.internal) / n_steps / real_median_s


def sync_findings(sites: Sequence[SyncSite], n_steps: int, real_median_s: float,
                  verdict: Verdict) -> list[Finding]:
    """Name the user's syncs, with their cost per step; harmless unless the verdict is
    forced-sync."""
    findings = []
    for site in sites:
        if site.internal or n_steps <= 0 or real_median_s <= 0:
            continue
        per_step = site.seconds / n_steps
        share = per_step / real_median_s
        if share < HARMLESS_SYNC_SHARE:
            continue
        numbers = {"seconds_per_step": per_step, "share_of_step": share,
                   "samples": float(site.samples)}
        where = short_location(site.location)
        if verdict.verdict == FORCED_SYNC:
            findings.append(Finding(
                kind="forced-sync",
                message=(f"forced sync at {where} ({site.code}) waits {ms(per_step)} per step, "
                         f"about {100 * share:.0f}% of each step"),
                numbers=numbers, location=site.location,
                fix="don't read the current step's values on the host: log the previous "
                    "step's loss (or accumulate metrics on the device and fetch them every N "
                    "steps)",
            ))
        else:
            findings.append(Finding(
                kind="harmless-sync",
                message=(f"sync at {where} ({site.code}) waits {ms(per_step)} per step, but it "
                         f"is harmless here: the run is {verdict_text(verdict.verdict)} and the "
                         "wait overlaps with it"),
                numbers=numbers, location=site.location,
            ))
    return findings


def interference_finding(target_s: float, loader_s: float, real_s: float,
                         workers: int, loader_cpu_s: float | None = None) -> Finding:
    """Real-data steps clearly slower than both parts, with no host sync to explain it:
    loading competing for the CPU, or, beyond what loading's CPU per batch
    (``loader_cpu_s``) could take from compute, the machine's speed."""
    slower = real_s / max(target_s, loader_s) - 1.0
    cause = (f"the {workers} loader worker(s) compete with compute for "
             f"{os.cpu_count()} CPU core(s)" if workers else
             "loading on the training process competes with compute for the CPU")
    if beyond_loader_cpu(target_s, loader_s, real_s, loader_cpu_s):
        cause = (f"the machine's speed changed during the real-data run: loading uses "
                 f"{ms(loader_cpu_s or 0.0)} of CPU a batch, less than the slowdown")
    return Finding(
        kind="interference",
        message=(f"real-data steps ({ms(real_s)}) are {100 * slower:.0f}% slower than the "
                 f"slower of compute ({ms(target_s)}) and loading ({ms(loader_s)}), but the "
                 f"sampler found no host sync that explains it: most likely {cause}"),
        numbers={"target_s": target_s, "loader_s": loader_s, "real_s": real_s,
                 "slowdown": slower},
        fix="give the loader fewer CPU cycles (cheaper transforms, preprocessing offline) or "
            "run it on other cores/hosts; on an accelerator host the CPU is usually idle",
    )


def _search_fix(tuning: TuningOutcome) -> str:
    """What to try when no setting pipecheck measured keeps up."""
    if tuning.stop == "fixed":
        return "let pipecheck search the worker count (leave out --workers), or preprocess offline"
    if tuning.scaling == LATENCY_BOUND:
        return ("raise --max-workers or the read threads; latency-bound pipelines keep gaining "
                "from parallel reads")
    return ("preprocess offline (tokenize and pack once, store the result), cache, or make "
            "the transform cheaper")


def _no_setting_keeps_up(chosen: LoaderSetting, d_chosen: float, tuning: TuningOutcome,
                         target_s: float) -> Finding:
    nature = {CPU_BOUND: "it is CPU-bound (stops scaling with workers)",
              LATENCY_BOUND: "it is latency-bound (still scaling past the cores)"}.get(
                  tuning.scaling, "")
    if tuning.stop == "pipeline":  # its own workers: nothing pipecheck could set
        message = (f"the pipeline as it is, with its own {chosen.workers} worker(s), gives "
                   f"{ms(d_chosen)}/batch against the {ms(target_s)} target")
        fix = pipeline_fix(chosen.workers)
    else:
        message = (f"no worker count brings the loader below the {ms(target_s)} target: the "
                   f"fastest, {chosen.workers} worker(s), gives {ms(d_chosen)}/batch")
        fix = _search_fix(tuning)
    return Finding(
        kind="input-bound",
        message=message + (f"; {nature}" if nature else ""),
        numbers={"target_s": target_s, "chosen_workers": float(chosen.workers),
                 "chosen_batch_s": d_chosen},
        fix=fix,
    )


def loader_findings(settings: Sequence[LoaderSetting], chosen: LoaderSetting,
                    tuning: TuningOutcome, target_s: float, verdict: Verdict) -> list[Finding]:
    """What the worker search found: a count that fixes it, or that none does; and the stage
    the pipeline waits on when the run is input-bound."""
    findings = []
    first = settings[0]
    d_first, d_chosen = loader_time(first), loader_time(chosen)
    if verdict.verdict == INPUT_BOUND or d_first > target_s:
        if tuning.meets_target and chosen is not first:
            findings.append(Finding(
                kind="input-bound",
                message=(f"{first.workers} worker(s) give {ms(d_first)}/batch against a "
                         f"{ms(target_s)} target; {_knobs(chosen)} give {ms(d_chosen)}"),
                numbers={"target_s": target_s, "first_workers": float(first.workers),
                         "first_batch_s": d_first, "chosen_workers": float(chosen.workers),
                         "chosen_batch_s": d_chosen},
                fix=f"use {chosen.settings.advice()}",
            ))
        elif not tuning.meets_target:
            findings.append(_no_setting_keeps_up(chosen, d_chosen, tuning, target_s))
    slow = max(chosen.stages, key=lambda s: s.wait_ratio, default=None)
    if slow is not None and verdict.verdict == INPUT_BOUND:
        findings.append(Finding(
            kind="slow-stage",
            message=(f"the pipeline waits on {slow.name} ({slow.where}) "
                     f"{100 * slow.wait_ratio:.0f}% of the time"),
            numbers={"wait_ratio": slow.wait_ratio, "avg_s": slow.avg_s},
            location=slow.name,
        ))
    return findings


def loader_time(setting: LoaderSetting) -> float:
    """D at a setting (seconds per steady batch), as stored with it."""
    return setting.loader_time.value


def _knobs(setting: LoaderSetting) -> str:
    """``N workers``, with the read threads when they are not the default."""
    extra = f" with {setting.threads} read threads" if setting.threads != DEFAULT_THREADS else ""
    return f"{setting.workers} workers{extra}"


def pipeline_fix(workers: int) -> str:
    """What to change in a pipeline that runs its own ``mp_prefetch`` workers (pipecheck
    cannot tune them)."""
    return (f"change the pipeline itself: its own mp_prefetch runs {workers} worker(s) and "
            "pipecheck cannot change them; raise num_workers in its grain.MultiprocessingOptions, "
            "or return the dataset without mp_prefetch so pipecheck searches the workers "
            "(pipecheck compare), or preprocess offline")


def recommendation_for(verdict: Verdict, chosen_workers: int, findings: Sequence[Finding],
                       meets_target: bool, settings: GrainSettings | None = None, *,
                       fixed_by_pipeline: bool = False) -> str:
    """One sentence: what to do first. ``fixed_by_pipeline``: the pipeline runs its own
    workers, so no setting pipecheck could recommend would be applied."""
    if verdict.verdict == FORCED_SYNC:
        syncs = [f for f in findings if f.kind == "forced-sync"]
        if syncs:
            return (f"remove the forced sync: {syncs[0].message}. "
                    "Log the previous step's loss instead.")
        return ("the host waits for the device somewhere outside the loop's own sync; run your "
                "loop under pipecheck.Monitor to locate it (pipecheck compare --real RUN.json)")
    if verdict.verdict == INPUT_BOUND:
        if fixed_by_pipeline:
            return pipeline_fix(chosen_workers)
        if verdict.fixed_by_tuning or meets_target:
            use = (settings or GrainSettings(chosen_workers)).advice()
            return f"use {use}: the loader then keeps up with compute"
        return ("the input pipeline cannot keep up even at its fastest setting: preprocess "
                "offline, cache, or simplify the transforms")
    if verdict.verdict == COMPUTE_BOUND:
        return (f"compute-bound: the input pipeline keeps up with {chosen_workers} worker(s); "
                "speed up the model step (larger batch, better sharding, mixed precision)")
    return verdict.reason


def compare_findings(compile_findings: Sequence[Finding], settings: Sequence[LoaderSetting],
                     chosen: LoaderSetting, tuning: TuningOutcome, estimates: Estimates,
                     verdict: Verdict, sites: Sequence[SyncSite], n_steps: int,
                     cores: int = 1, ram_budget_mb: float | None = None) -> list[Finding]:
    """Every finding of a compare run, compile findings first."""
    target_s, real_s = estimates.target.value, estimates.real.value
    findings = list(compile_findings)
    findings += loader_findings(settings, chosen, tuning, target_s, verdict)
    findings += limit_findings(settings, cores, ram_budget_mb)
    findings += sync_findings(sites, n_steps, real_s, verdict)
    if verdict.unexplained_slowdown:
        findings.append(interference_finding(target_s, estimates.loader.value, real_s,
                                             chosen.workers, chosen.cpu_per_batch_s))
    return findings


def host_sync_findings(sites: Sequence[SyncSiteRecord],
                       buys_s: Mapping[str, float] | None = None,
                       steps: int = 0) -> list[Finding]:
    """The user's sync sites costing at least ``HARMLESS_SYNC_SHARE`` of the wall time, each
    with what removing it buys at most per step (``buys_s``: seconds over the run by
    location, from ``analysis.loop_verdict.sync_costs``; at least 0, the loop cannot see
    more)."""
    buys_s = buys_s or {}
    out = []
    for s in sites:
        if s.internal or s.share < HARMLESS_SYNC_SHARE:
            continue
        high = buys_s.get(s.location)
        buys = ("" if high is None or steps <= 0 else
                f"; removing it buys 0 to {1e3 * high / steps:.2f} ms a step (at most its wait "
                "and the host's own work that could overlap the device)")
        out.append(Finding(
            kind="host-sync",
            message=(f"the loop waits for the device at {short_location(s.location)} "
                     f"({s.code}): {s.seconds:.3f} s, {100 * s.share:.1f}% of the wall time"
                     f"{buys}"),
            numbers={"seconds": s.seconds, "share": s.share,
                     **({"buys_high_s": high} if high is not None else {})},
            location=s.location,
            fix=("if it costs step time: read values of the previous step instead (keep the "
                 "step's metrics and convert them one step later), or do it every N steps"),
        ))
    return out
