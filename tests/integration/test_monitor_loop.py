"""A user's own loop (tests/data/user_loop.py, outside the package) under Monitor."""

from __future__ import annotations

import gc
import json
import os
import pathlib
import subprocess
import sys

import pytest

from pipecheck.records import store
from pipecheck.records.kinds import SPAN_NAMES
from pipecheck.records.monitor import MonitorResult
from pipecheck.report.trace import validate_chrome_trace
from tests.conftest import REPO

from .doc_examples import skeleton_problems

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

USER_LOOP = REPO / "tests" / "data" / "user_loop.py"


def forced_sync_line() -> int:
    for n, line in enumerate(USER_LOOP.read_text().splitlines(), start=1):
        if "# FORCED-SYNC" in line:
            return n
    raise AssertionError("marker not found")


def run_user_loop(tmp: pathlib.Path, mode: str,
                  steps: int = 40) -> tuple[MonitorResult, dict, str]:
    """The record, the trace and the loop's stdout (the Monitor's report)."""
    out, trace = tmp / f"{mode}.json", tmp / f"{mode}.trace.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, str(USER_LOOP), str(out), str(steps), mode, str(trace)],
                       capture_output=True, text=True, timeout=240, env=env, cwd=tmp)
    assert r.returncode == 0, r.stderr
    return store.load(out, expect=MonitorResult), json.loads(trace.read_text()), r.stdout


def test_current_step_float_loss_is_a_user_sync_site(tmp_path: pathlib.Path) -> None:
    res, trace, _ = run_user_loop(tmp_path, "current")
    user = res.user_sync_sites
    assert user, res.sync_sites
    top = user[0]
    assert top.location == f"{USER_LOOP}:{forced_sync_line()}"
    assert not top.internal and "float(metrics[\"loss\"])" in top.code
    assert top.share > 0.2
    assert any(f.kind == "host-sync" and f.location == top.location for f in res.findings)
    # the time goes to "sync stall", not to "compute" or "other"
    assert res.breakdown.share("sync stall") > res.breakdown.share("compute")
    assert res.breakdown.share("sync stall") > 0.2
    assert validate_chrome_trace(trace) == []


def test_lagged_loop_has_no_user_sync_at_that_line(tmp_path: pathlib.Path) -> None:
    res, _, report = run_user_loop(tmp_path, "lagged")
    line = f"{USER_LOOP}:{forced_sync_line()}"
    assert all(s.location != line for s in res.sync_sites)
    internal = [s for s in res.sync_sites if s.internal]
    assert internal and internal[0].location.startswith(str(REPO / "pipecheck"))
    assert res.breakdown.share("compute") > res.breakdown.share("sync stall")
    # record content: checkpoints every 10 steps and the eval at step 7 are tagged
    tagged = {s.step: s.tags for s in res.steps if s.tags}
    assert {10, 20, 30} <= {k for k, v in tagged.items() if "checkpoint" in v}
    assert "eval" in tagged[7] and "compile" in tagged[0]
    assert res.total_steps == 40 and res.config["mode"] == "lagged"
    assert res.first_step_s == res.steps[0].time_s > res.step_time.summary.median
    # the report has the tables of examples/monitor_loop.py's (a loop like this one) in docs
    assert skeleton_problems("monitor-loop", report) == []  # docs/monitor.md


def test_trace_shows_every_span_kind(tmp_path: pathlib.Path) -> None:
    """A real calibrated loop with log, checkpoint, eval, device_put and a collection."""
    from pipecheck.measure.compile_watch import CompileWatcher
    from pipecheck.measure.loop import run_lagged_sync_loop
    from pipecheck.measure.spans import GcSpans, SpanRecorder
    from pipecheck.report.trace import chrome_trace, timeline_of
    from pipecheck.workloads import build_workload, resolve

    cfg = resolve(None, ["workload=calibrated", "compute_ms=5", "host_sync=every_step",
                         "checkpoint_every=3", "checkpoint_ms=20", "eval_every=4", "eval_ms=10"])
    wl = build_workload(cfg)

    def collect(step, state, metrics, recorder):  # noqa: ANN001
        if step == 2:
            gc.collect()

    rec = SpanRecorder()
    batches = iter(lambda: wl.host_batch(), None)
    with CompileWatcher(wl.train_step_name, rec.clock) as watcher, GcSpans(rec):
        run_lagged_sync_loop(wl.train_step, wl.init_state(), batches, 6, rec, put=wl.put,
                             hooks=[*wl.hooks, collect], compiles=lambda: watcher.compiles)
    trace = chrome_trace(timeline_of(rec, watcher.events))
    assert validate_chrome_trace(trace) == []
    names = {e["name"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert set(SPAN_NAMES) <= names
    assert {f"step {i}" for i in range(6)} <= names
    path = tmp_path / "t.json.gz"
    from pipecheck.report.trace import write_trace

    write_trace(path, trace)
    import gzip

    assert json.loads(gzip.decompress(path.read_bytes())) == trace


def test_xprof_capture_carries_pipecheck_steps(tmp_path: pathlib.Path) -> None:
    """Under jax.profiler.trace, steps are StepTraceAnnotations and spans TraceAnnotations."""
    import gzip

    import jax

    from pipecheck.measure.loop import run_lagged_sync_loop
    from pipecheck.measure.spans import SpanRecorder
    from pipecheck.workloads.calibrated import blocking_hook, wait_for_state

    step = jax.jit(lambda s, b: (s + b, {"loss": (s + b).sum()}))
    rec = SpanRecorder()
    hook = blocking_hook("checkpoint", 2, 1.0, wait_for_state)
    with jax.profiler.trace(str(tmp_path)):
        run_lagged_sync_loop(step, jax.numpy.zeros(4), iter(lambda: jax.numpy.ones(4), None),
                             5, rec, hooks=[hook])
    files = list(tmp_path.rglob("*.trace.json.gz"))
    assert files, "jax.profiler.trace wrote no Chrome trace (it does on CPU with jax 0.10)"
    events = json.loads(gzip.decompress(files[0].read_bytes()))["traceEvents"]
    names = [e.get("name", "") for e in events]
    steps = sorted(int(e["args"]["step_num"]) for e in events
                   if e.get("name") == "train" and "step_num" in e.get("args", {}))
    assert steps == [0, 1, 2, 3, 4]
    assert {"sync", "data_wait", "checkpoint"} <= set(names)
