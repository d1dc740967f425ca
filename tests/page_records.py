"""Records of every kind for the HTML page's tests, built from the unit tests' builders
with steps, spans, tags, anomalies and hosts added (real runs are made where cheap, in
the integration test)."""

from __future__ import annotations

import dataclasses
import pathlib

import numpy as np

from pipecheck.records.common import Anomaly, Breakdown, BreakdownRow, Distribution, StepRecord
from pipecheck.records.hosts import HostLoader, HostSummary, Straggler
from pipecheck.records.monitor import MonitorResult, SyncSiteRecord
from pipecheck.records.steps import StepTable
from tests.unit.measure.test_dataloader import make_result as make_dataloader
from tests.unit.records.test_store import make_result as make_synthetic
from tests.unit.report.test_report_compare import make_compare

LOGS = pathlib.Path(__file__).resolve().parent / "data"

__all__ = ["make_compare", "make_dataloader", "make_synthetic", "compare_with_steps",
           "monitor_record", "long_steps", "run_steps"]


def run_steps(n: int = 60, seed: int = 0) -> tuple[StepTable[StepRecord], tuple[Anomaly, ...]]:
    """A loop's steps: a compile step, a checkpoint at n/2, a slow step, spans in each."""
    rng = np.random.default_rng(seed)
    steps = []
    for i in range(n):
        wait = 0.002 + 0.001 * rng.random()
        sync = 0.040 + 0.002 * rng.random()
        spans = {"data_wait": wait, "dispatch": 0.0005, "sync": sync}
        tags: tuple[str, ...] = ()
        if i == 0:
            spans, tags = {"dispatch": 1.1}, ("compile",)
        elif i == n // 2:
            spans["checkpoint"], tags = 0.3, ("checkpoint",)
        elif i == n // 3:
            spans["data_wait"], tags = 0.2, ("slow",)
        steps.append(StepRecord(i, sum(spans.values()) + 0.001, tags, spans, 3.0 - i / n))
    slow = steps[n // 3]
    anomalies = (Anomaly(slow.step, slow.time_s, slow.time_s / 0.045, "data stall",
                         "data_wait 200.0 ms of the step"),)
    return StepTable.from_rows(StepRecord, steps), anomalies


def two_hosts() -> tuple[tuple[HostSummary, ...], Straggler]:
    hosts = (HostSummary(0, "host-a", (HostLoader(4, 1, 0.030, 0.029, 0.031, 1.0),), 0.002,
                         0.003, 0.0018, 0.0022, 0.045, 60),
             HostSummary(1, "host-b", (HostLoader(4, 1, 0.060, 0.058, 0.062, 1.5),), 0.020,
                         0.025, 0.018, 0.022, 0.045, 60, (20,), (0.2,)))
    return hosts, Straggler(1, "host-b", 10.0, "data wait", 0.020, 0.002,
                            "process 1 waits 10x longer for data than the median host")


def compare_with_steps():
    steps, anomalies = run_steps()
    hosts, straggler = two_hosts()
    return dataclasses.replace(make_compare(), steps=steps, anomalies=anomalies,
                               hosts=hosts, straggler=straggler,
                               warnings=("the machine was busy",))


def monitor_record(n: int = 60):
    steps, anomalies = run_steps(n)
    steady = [s.time_s for s in steps if not s.tags]
    wall = sum(s.time_s for s in steps)
    return MonitorResult(
        env={"jax": "0.10.2", "backend": "cpu"}, config={"step_window": 1000},
        step_time=Distribution.of(steady), first_step_s=steps[0].time_s, steps=steps,
        sync_sites=(SyncSiteRecord("/home/u/train.py:42", "train", "loss = float(loss)",
                                   0.5, 50, False, 0.5 / wall),),
        breakdown=Breakdown(wall, n, (BreakdownRow("compute", wall * 0.9, 0.9),
                                      BreakdownRow("data wait", wall * 0.1, 0.1))),
        wall_s=wall, total_steps=n, anomalies=anomalies)


def long_steps(n: int, tag_every: int = 1000) -> StepTable[StepRecord]:
    """``n`` steps by column, with spans and a checkpoint tag every ``tag_every`` steps (a
    long Monitor run)."""
    rng = np.random.default_rng(1)
    times = 0.040 + 0.004 * rng.random(n)
    wait = 0.002 + 0.001 * rng.random(n)
    cols = {"step": np.arange(n, dtype=np.int64), "time_s": times, "loss": np.full(n, np.nan)}
    table = StepTable(StepRecord, n, cols,
                      maps={"spans": {"data_wait": wait, "sync": times - wait - 0.001}})
    return table.with_tags({i: ("checkpoint",) for i in range(tag_every, n, tag_every)})


def imported_and_diff():
    """A real import of the two MaxText test logs, and their real diff."""
    from pipecheck.analysis.diff import diff_runs
    from pipecheck.logs.maxtext import import_log
    from pipecheck.logs.runs import load_run

    a = import_log(str(LOGS / "maxtext_a.log"))
    diff = diff_runs(load_run(str(LOGS / "maxtext_a.log")), load_run(str(LOGS / "maxtext_b.log")))
    return a, diff


def profile_record():
    """A profile of two hosts' captures: the loop's steps with the training thread's
    categories, the device busy ~40 ms a step, a straggler."""
    from pipecheck.records.common import Estimate, Finding
    from pipecheck.records.profile import CaptureEstimates, HostProfile, ProfileResult

    steps, anomalies = run_steps()
    times = [s.time_s for s in steps[1:] if not s.tags]
    busy = tuple(0.040 if i else 0.9 for i in range(len(steps)))
    device = Breakdown(sum(s.time_s for s in steps), len(steps), (
        BreakdownRow("device busy", 2.4, 0.86), BreakdownRow("idle: input wait", 0.3, 0.11),
        BreakdownRow("idle: sync", 0.08, 0.03)))
    hosts, straggler = two_hosts()
    return ProfileResult(
        env={"host": "host-a", "jax": "0.10.0"},
        config={"file": "run.xplane.pb", "device": "cpu", "steps_from": "markers",
                "thread": "python3"},
        verdict="compute-bound", reason="the device is busy 86% of each step",
        estimates=CaptureEstimates(Estimate.of([0.040] * 20), Estimate.of([0.003] * 20),
                                   Estimate.of(times), 0.1, 0.14, False),
        step_time=Distribution.of(times), steps=steps, device_busy_s=busy, device_time=device,
        findings=(Finding("compute-bound", "the device is busy 86% of each step"),),
        recommendation="speed up the model step", anomalies=anomalies,
        hosts=(HostProfile("host-a", 60, 0.045, 0.040, 0.002, "compute-bound"),
               HostProfile("host-b", 60, 0.045, 0.040, 0.020, "compute-bound")),
        straggler=straggler)


def every_kind() -> dict[str, object]:
    """One record of each kind the page renders."""
    imported, diff = imported_and_diff()
    return {"compare": compare_with_steps(), "monitor": monitor_record(),
            "synthetic": dataclasses.replace(make_synthetic(), steps=run_steps()[0]),
            "dataloader": make_dataloader(), "imported": imported, "diff": diff,
            "profile": profile_record()}
