"""The Monitor's record: what it is built from (``RunState``, captured on the loop's thread),
the pure build of a ``MonitorResult`` from it, and its JSON."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

from pipecheck.analysis.anomalies import compiles_by_step
from pipecheck.analysis.breakdown import breakdown, charge_forced_syncs
from pipecheck.analysis.first_batch import (
    first_batch_finding,
    loader_restart_findings,
    monitor_startup,
)
from pipecheck.analysis.loader.findings import host_sync_findings
from pipecheck.analysis.loop_verdict import (
    LoopTimes,
    SyncCost,
    loop_gains,
    loop_headspace,
    loop_verdict,
    restart_excess,
    sync_costs,
)
from pipecheck.analysis.periodic_stall import (
    LoaderShape,
    periodic_stall_findings,
    shape_of_config,
)
from pipecheck.analysis.steady_state import wall_per_step, with_anomalies
from pipecheck.encoding import ParallelEncoder
from pipecheck.measure.spans import Snapshot
from pipecheck.measure.synthetic import steady_distribution
from pipecheck.records import store
from pipecheck.records.base import to_dict
from pipecheck.records.common import (
    Breakdown,
    CompileInfo,
    Finding,
    LoaderStart,
    StepRecord,
    SyncSite,
)
from pipecheck.records.events import CompileEvent
from pipecheck.records.monitor import MonitorResult, RunEnd, SyncSiteRecord
from pipecheck.records.steps import ChunkEncoder, StepTable, no_steps


@dataclasses.dataclass(frozen=True)
class RunState:
    """What a Monitor record is built from, captured on the loop's thread at one moment (the
    recorder's arrays are immutable; the rest is copied), so that any thread can build it."""

    snapshot: Snapshot
    sites: tuple[SyncSite, ...]
    outside_spans_s: float
    """Seconds the sync locator found the loop blocked in user syncs outside any span."""
    located: bool
    compile_events: tuple[CompileEvent, ...]
    watched: str | None
    """The step function's name, when compilations were watched and a step was taken."""
    compile_s: float
    train_step_compiles: int
    compile_findings: tuple[Finding, ...]
    passes: tuple[int, ...] = ()
    """The step at which each ``Monitor.batches`` call began (each a pass over the data)."""
    loader_starts: tuple[LoaderStart, ...] = ()
    """Each ``Monitor.batches`` call's first batch (a pass over the data begun)."""
    faults: tuple[str, ...] = ()
    """Faults of pipecheck's own code during the run, as warned (``measure/faults.py``)."""
    outside_by_step: Mapping[int, float] = dataclasses.field(default_factory=dict)
    """``outside_spans_s`` by the step it was sampled in (step number: seconds)."""


def build_result(
    state: RunState,
    env: Mapping[str, object],
    config: Mapping[str, object],
    incomplete: RunEnd | None = None,
) -> MonitorResult:
    """Pure: the MonitorResult of a captured state (``incomplete``: how the run ended, when
    it did not finish)."""
    snap = state.snapshot
    marks = snap.marks.tolist()
    compiles = compiles_by_step(((e.fun_name, e.at, e.duration_s)
                                 for e in state.compile_events),
                                marks, snap.marks_total - len(marks)) \
        if state.compile_events else {}
    steps, anomalies = with_anomalies(
        charge_forced_syncs(snap.steps, state.outside_by_step), compiles)
    step_time, warnings = steady_distribution(steps, "Monitor's run")
    wall = snap.totals.wall_s
    sites = tuple(SyncSiteRecord.of(s, wall) for s in state.sites)
    first_step_s = float(steps[0].time_s)
    compile_s = state.compile_s if state.watched is not None else None
    compile_info = None if state.watched is None else CompileInfo(
        first_step_s=first_step_s, compile_s=state.compile_s,
        train_step_compiles=state.train_step_compiles, findings=state.compile_findings)
    table = breakdown(snap.totals, compile_s, state.outside_spans_s)
    startup = monitor_startup(steps, compile_s)
    first_batch = first_batch_finding(startup) if startup is not None else None
    times, costs = loop_costs(table, step_time.summary.n, state.loader_starts, steps, sites,
                              env)
    verdict, reason = loop_verdict(times, costs)
    findings = [*(compile_info.findings if compile_info else ()), *host_sync_findings(
                    sites, {c.site.location: c.high for c in costs}, times.steps),
                *periodic_stall_findings(steps, loader_shape(config, state.passes)),
                *([first_batch] if first_batch else []),
                *loader_restart_findings(state.loader_starts, steps, wall)]
    warnings += state_warnings(state)
    return MonitorResult(
        env=dict(env),
        config=dict(config),
        step_time=step_time,
        first_step_s=first_step_s,
        steps=steps,
        sync_sites=sites,
        breakdown=table,
        wall_s=wall,
        total_steps=snap.step_count,
        dropped_steps=snap.dropped_steps,
        compile=compile_info,
        anomalies=anomalies,
        findings=tuple(findings),
        warnings=tuple(warnings),
        incomplete=incomplete,
        startup=startup,
        verdict=verdict,
        reason=reason,
        headspace_s=loop_headspace(times), gains=loop_gains(times, costs),
        loader_starts=state.loader_starts,
        wall_per_step_s=wall_per_step(steps),
    )


def state_warnings(state: RunState) -> list[str]:
    """What the captured state itself warns of: steps not kept, the sync locator off, faults
    of pipecheck's own code."""
    snap = state.snapshot
    out = []
    if snap.dropped_steps:
        out.append(
            f"{snap.dropped_steps} of {snap.step_count} steps are not kept as records "
            f"(step_window={snap.step_window}); the step-time distribution "
            "covers the kept steps, the breakdown covers all")
    if not state.located:
        out.append("the sync locator was off: forced syncs in the loop are not located")
    return [*out, *state.faults]


def loop_costs(table: Breakdown, steady_steps: int, starts: Sequence[LoaderStart],
               steps: StepTable[StepRecord], sites: Sequence[SyncSiteRecord],
               env: Mapping[str, object]) -> tuple[LoopTimes, list[SyncCost]]:
    """The loop's times (compile left out) and each user sync's cost range."""
    times = LoopTimes.of(table, steady_steps, restart_excess(starts, steps))
    return times, sync_costs(times, sites, str(env.get("backend", "")))


def loader_shape(config: Mapping[str, object], passes: tuple[int, ...]) -> LoaderShape:
    """What the run's config says of its loader, with the steps where a new pass over the
    data began when ``Monitor.batches`` was called more than once (an epoch each)."""
    shape = shape_of_config(config)
    return dataclasses.replace(shape, epoch_starts=passes) if len(passes) >= 2 else shape


def encode_result(encoder: ChunkEncoder, result: MonitorResult) -> str:
    """``store.record_to_json``, with the steps' columns compressed only where new since
    ``encoder``'s last table (a run's writes share one encoder)."""
    data = to_dict(dataclasses.replace(result, steps=no_steps(StepRecord)()), ParallelEncoder())
    data["steps"] = encoder.table_json(result.steps)
    return store.dumps(data)
