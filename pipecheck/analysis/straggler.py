"""Which host holds the job back? A pure analysis of per-host summaries.

In SPMD training every step ends in a cross-host collective, so every host's step time is
the slowest host's: step times cannot name a slow host. Each host's own loader time D
and data wait can. Three patterns are told apart:

(a) **one slow host** (a straggler): its D (or its data wait per step) is above the median
    host's by more than noise: its whole interval above the median host's interval, by
    ``STRAGGLER_MARGIN``, and at least ``STRAGGLER_MIN_RATIO`` times the median host;
(b) **all hosts slow together** (a synchronized stall: start-up, a checkpoint, a shared
    file system): steps that stalled on at least ``SYNCHRONIZED_SHARE`` of the hosts at the
    same time, with the wait not in one host's data path;
(c) **none**: the hosts load at the same speed.

A stall of one step on one host that everyone waited for is reported as such, but it is
not a straggler: that needs the host's whole distribution to be slower, not one step.
Everything here is a function of its inputs; ``summarize_host`` reduces one host's run to a
bounded summary (the only thing gathered to process 0).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence

import numpy as np

from pipecheck import stats
from pipecheck.records.common import Finding
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.hosts import HostLoader, HostSummary, Straggler
from pipecheck.records.kinds import FindingKind

STRAGGLER_MARGIN = 0.10
"""A straggler's interval low end must clear the median host's high end by 10%: the
intervals are separated, with room for the jitter between two otherwise equal machines."""

STRAGGLER_MIN_RATIO = 1.25
"""...and it must take at least 1.25x the median host: a smaller gap costs the job little
and is within the spread seen between identical hosts."""

STRAGGLER_MIN_EXCESS_S = 0.002
"""...and at least 2 ms more per batch or step: sub-millisecond gaps in an idle loader
are not worth a report."""

RATIO_FLOOR_S = 0.001
"""Ratios of data wait divide by at least 1 ms: a host that never waits has a data wait
near zero, and a ratio to zero says nothing."""

STALL_FACTOR = 2.0
"""A step taking more than twice the host's median step time is a stall."""

STALL_MIN_S = 0.010
"""...and at least 10 ms longer than the median: tiny steps double on a scheduler tick."""

MAX_STALLS = 32
"""Stalled steps one host sends to process 0 (the longest kept): bounds the payload."""

SYNCHRONIZED_SHARE = 0.75
"""A stall seen on at least 75% of the hosts at the same step is job-wide."""

STALL_STEP_TOLERANCE = 1
"""Stalls on different hosts up to one step apart are the same event: the lagged sync
charges a wait to the step before or after depending on where it happened."""

DATA_WAIT_CAUSE_SHARE = 0.5
"""A host whose data wait is at least half of the event's longest data wait (and at least
``STALL_MIN_S``) is among the event's causes."""

STRAGGLER: FindingKind = "straggler"
SYNCHRONIZED_STALL: FindingKind = "synchronized-stall"
ONE_HOST_STALL: FindingKind = "one-host-stall"
HOSTS_EQUAL: FindingKind = "hosts-equal"


@dataclasses.dataclass(frozen=True)
class HostValue:
    """One host's value of the compared metric, with its interval (seconds)."""

    process_id: int
    hostname: str
    value: float
    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class StallEvent:
    """Consecutive steps in which several hosts stalled."""

    first_step: int
    last_step: int
    hosts: tuple[int, ...]
    causes: tuple[int, ...]
    """Hosts whose own data wait explains the stall (empty: nobody waited for data)."""
    data_wait_s: float
    """The longest data wait of a host in the event."""


@dataclasses.dataclass(frozen=True)
class HostsAnalysis:
    straggler: Straggler | None
    findings: tuple[Finding, ...]


def _ms(s: float) -> str:
    return f"{s * 1e3:.1f} ms"


# --- one host's bounded summary ----------------------------------------------------------
def summarize_host(
    process_id: int,
    hostname: str,
    loader: Sequence[HostLoader] = (),
    steps: Sequence[tuple[int, float, float]] = (),
    with_data_wait: bool = True,
) -> HostSummary:
    """Reduce one host's run to a ``HostSummary``.

    ``steps`` are the host's steps as (step index, step time, data wait), after the first,
    seconds. The summary holds order statistics, the interval of the median data wait, and
    at most ``MAX_STALLS`` stalled steps: its size does not grow with the run.
    ``with_data_wait=False`` for a run without an input pipeline (``synthetic``).
    """
    if not steps:
        return HostSummary(process_id, hostname, tuple(loader))
    idx = np.asarray([s[0] for s in steps], dtype=int)
    times = np.asarray([s[1] for s in steps], dtype=float)
    waits = np.asarray([s[2] for s in steps], dtype=float)
    median_step = float(np.median(times))
    stalled = np.nonzero((times > STALL_FACTOR * median_step)
                         & (times - median_step >= STALL_MIN_S))[0]
    if stalled.size > MAX_STALLS:
        stalled = stalled[np.argsort(-times[stalled], kind="stable")[:MAX_STALLS]]
    stalled = np.sort(stalled)
    wait_summary = stats.summarize(waits)
    low, high = stats.median_ci(waits)
    return HostSummary(
        process_id=process_id,
        hostname=hostname,
        loader=tuple(loader),
        data_wait_median_s=wait_summary.median if with_data_wait else None,
        data_wait_p90_s=wait_summary.p90 if with_data_wait else None,
        data_wait_low_s=low if with_data_wait else None,
        data_wait_high_s=high if with_data_wait else None,
        step_s=median_step,
        steps=int(times.size),
        stalls=tuple(int(i) for i in idx[stalled]),
        stall_data_wait_s=tuple(float(w) for w in waits[stalled]),
    )


# --- (a) one slow host ---------------------------------------------------------------------
def _clearly_above(h: HostValue, ref_value: float, ref_high: float) -> bool:
    return (h.low > ref_high * (1.0 + STRAGGLER_MARGIN)
            and h.value >= STRAGGLER_MIN_RATIO * max(ref_value, RATIO_FLOOR_S)
            and h.value - ref_value >= STRAGGLER_MIN_EXCESS_S)


def find_straggler(values: Sequence[HostValue], metric: str,
                   setting: str | None = None, step_s: float | None = None) -> Straggler | None:
    """The slowest host, when it is clearly slower than the median of the others.

    The reference is the median of the *other* hosts' values and of their interval high
    ends, so the slow host itself never sets the bar it is measured against; with two hosts
    the reference is the other host.
    """
    usable = [v for v in values if math.isfinite(v.value) and math.isfinite(v.low)
              and math.isfinite(v.high)]
    if len(usable) < 2:
        return None
    ranked = sorted(usable, key=lambda v: (-v.value, v.process_id))
    slowest, rest = ranked[0], ranked[1:]
    ref_value = float(np.median([v.value for v in rest]))
    ref_high = float(np.median([v.high for v in rest]))
    if not _clearly_above(slowest, ref_value, ref_high):
        return None
    others = tuple(v.process_id for v in rest[: len(rest) // 2]
                   if _clearly_above(v, ref_value, ref_high))
    ratio = slowest.value / max(ref_value, RATIO_FLOOR_S)
    floor = ", over a 1 ms floor" if ref_value < RATIO_FLOOR_S else ""
    if metric == "loader time":
        what = (f"its loader gives a batch in {_ms(slowest.value)}, the median host's in "
                f"{_ms(ref_value)}")
    else:
        what = (f"it waits {_ms(slowest.value)} per step for data, the median host "
                f"{_ms(ref_value)}")
    evidence = (f"every host waits for process {slowest.process_id} ({slowest.hostname}) at "
                f"each step's all-reduce: {what} ({ratio:.1f}x{floor})")
    if setting:
        evidence += f" at {setting}"
    if step_s is not None and math.isfinite(step_s):
        evidence += f"; steps take {_ms(step_s)} on every host"
    if others:
        evidence += f"; also slow: process {', '.join(str(o) for o in others)}"
    return Straggler(
        process_id=slowest.process_id, hostname=slowest.hostname, ratio=ratio, metric=metric,
        value_s=slowest.value, median_s=ref_value, evidence=evidence, setting=setting,
        others=others,
    )


# --- (b) all hosts slow together -------------------------------------------------------------
def stall_events(hosts: Sequence[HostSummary]) -> list[StallEvent]:
    """Group the hosts' stalled steps into events (steps at most ``STALL_STEP_TOLERANCE``
    apart), with the hosts that stalled and those whose data wait caused it."""
    marks = sorted((step, h.process_id, wait) for h in hosts
                   for step, wait in zip(h.stalls, h.stall_data_wait_s, strict=True))
    groups: list[list[tuple[int, int, float]]] = []
    for mark in marks:
        if groups and mark[0] - groups[-1][-1][0] <= STALL_STEP_TOLERANCE:
            groups[-1].append(mark)
        else:
            groups.append([mark])
    events = []
    for g in groups:
        wait_by_host: dict[int, float] = {}
        for _, pid, wait in g:
            wait_by_host[pid] = max(wait, wait_by_host.get(pid, 0.0))
        longest = max(wait_by_host.values())
        causes = tuple(sorted(
            pid for pid, w in wait_by_host.items()
            if w >= STALL_MIN_S and w >= DATA_WAIT_CAUSE_SHARE * longest))
        events.append(StallEvent(g[0][0], g[-1][0], tuple(sorted(wait_by_host)), causes,
                                 longest))
    return events


def _steps_text(events: Sequence[StallEvent], limit: int = 6) -> str:
    parts = [str(e.first_step) if e.first_step == e.last_step
             else f"{e.first_step}-{e.last_step}" for e in events[:limit]]
    return ", ".join(parts) + (" ..." if len(events) > limit else "")


def stall_findings(hosts: Sequence[HostSummary]) -> list[Finding]:
    """Job-wide stalls: synchronized (every host slow at once) or caused by one host."""
    n = len(hosts)
    if n < 2:
        return []
    job_wide = [e for e in stall_events(hosts) if len(e.hosts) >= SYNCHRONIZED_SHARE * n]
    synchronized = [e for e in job_wide if len(e.causes) != 1]
    one_host = [e for e in job_wide if len(e.causes) == 1]
    findings = []
    if synchronized:
        in_data = [e for e in synchronized if e.causes]
        where = ("every host waited for its data at once (a shared file system, or a "
                 "pipeline restarting)" if len(in_data) == len(synchronized)
                 else "the hosts were slow together outside the data path (start-up, a "
                 "checkpoint, an eval, or a shared resource)")
        findings.append(Finding(
            kind=SYNCHRONIZED_STALL,
            message=(f"synchronized stall at step(s) {_steps_text(synchronized)} on "
                     f"{max(len(e.hosts) for e in synchronized)} of {n} hosts: {where}; "
                     "no single host is to blame"),
            numbers={"events": float(len(synchronized)),
                     "longest_data_wait_s": max(e.data_wait_s for e in synchronized)},
        ))
    if one_host:
        culprits = sorted({e.causes[0] for e in one_host})
        findings.append(Finding(
            kind=ONE_HOST_STALL,
            message=(f"at step(s) {_steps_text(one_host)} every host waited for process(es) "
                     f"{', '.join(str(c) for c in culprits)}, which waited "
                     f"{_ms(max(e.data_wait_s for e in one_host))} for data: a stall of "
                     "that host's input pipeline held up the whole job"),
            numbers={"events": float(len(one_host)),
                     "longest_data_wait_s": max(e.data_wait_s for e in one_host)},
        ))
    return findings


# --- the whole analysis ------------------------------------------------------------------------
def loader_values(hosts: Sequence[HostSummary], settings: GrainSettings) -> list[HostValue]:
    """D with its interval on every host that timed ``settings``."""
    out = []
    for h in hosts:
        for s in h.loader:
            if s.settings == settings:
                out.append(HostValue(h.process_id, h.hostname, s.loader_s, s.low_s, s.high_s))
    return out


def data_wait_values(hosts: Sequence[HostSummary]) -> list[HostValue]:
    return [HostValue(h.process_id, h.hostname, h.data_wait_median_s,
                      h.data_wait_low_s if h.data_wait_low_s is not None else math.nan,
                      h.data_wait_high_s if h.data_wait_high_s is not None else math.nan)
            for h in hosts if h.data_wait_median_s is not None]


def _settings(hosts: Sequence[HostSummary]) -> list[GrainSettings]:
    seen: list[GrainSettings] = []
    for h in hosts:
        for s in h.loader:
            if s.settings not in seen:
                seen.append(s.settings)
    return seen


def _median_step(hosts: Sequence[HostSummary]) -> float | None:
    steps = [h.step_s for h in hosts if h.step_s is not None]
    return float(np.median(steps)) if steps else None


def analyze(hosts: Sequence[HostSummary],
            setting: GrainSettings | None = None) -> HostsAnalysis:
    """The straggler (or None) and the findings about the hosts.

    The loader time D is compared at ``setting`` (the one training used), or at every
    setting timed, keeping the largest ratio; without loader timings, the real-data data
    wait per step is compared.
    """
    if len(hosts) < 2:
        return HostsAnalysis(None, ())
    step_s = _median_step(hosts)
    candidates: list[Straggler] = []
    settings = [setting] if setting is not None else _settings(hosts)
    for g in settings:
        s = find_straggler(loader_values(hosts, g), "loader time", g.short_label(), step_s)
        if s is not None:
            candidates.append(s)
    if not settings:
        s = find_straggler(data_wait_values(hosts), "data wait", None, step_s)
        if s is not None:
            candidates.append(s)
    compared = bool(settings) or bool(data_wait_values(hosts))
    straggler = max(candidates, key=lambda s: s.ratio, default=None)
    findings = []
    if straggler is not None:
        findings.append(Finding(
            kind=STRAGGLER, message=straggler.evidence,
            numbers={"process_id": float(straggler.process_id), "ratio": straggler.ratio,
                     "value_s": straggler.value_s, "median_s": straggler.median_s},
            location=f"process {straggler.process_id} ({straggler.hostname})",
            fix=f"look at process {straggler.process_id}'s host: its input pipeline (more "
                "Grain workers, a closer copy of the data, a busy or throttled CPU)",
        ))
    findings += stall_findings(hosts)
    if compared and straggler is None and not findings:
        findings.append(Finding(
            kind=HOSTS_EQUAL,
            message=f"no straggler: the {len(hosts)} hosts load their shards at the same "
                    "speed, within noise",
        ))
    return HostsAnalysis(straggler, tuple(findings))
