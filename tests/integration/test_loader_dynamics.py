"""Loader dynamics on loops written as users write them (examples/monitor_loader_dynamics.py,
copied outside the repository and run as a subprocess): a Grain pipeline with workers whose
batches arrive in bursts, a generator that pays at each epoch boundary, and a clean loop.
Their Monitor records must hold a ``periodic-stall`` finding with the right period and
cause, and none on the clean loop; and a ``first-batch`` finding where the workers start
only after the restore."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest

from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.conftest import REPO

from .doc_examples import skeleton_problems

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

EXAMPLE = REPO / "examples" / "monitor_loader_dynamics.py"
"""The user's script (docs/monitor.md's example), copied outside the repository to run."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, MonitorResult]:
    tmp = tmp_path_factory.mktemp("loader_dynamics")
    script = tmp / "my_train.py"
    script.write_text(EXAMPLE.read_text())
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, str(script), str(tmp / "run")], capture_output=True,
                       text=True, timeout=240, env=env, cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    assert skeleton_problems("monitor-loader-dynamics", r.stdout) == []
    return {name: store.load(tmp / f"run.{name}.json", expect=MonitorResult)
            for name in ("grain", "epochs", "clean")}


def _periodic(run: MonitorResult) -> list:
    return [f for f in run.findings if f.kind == "periodic-stall"]


def test_grain_workers_in_bursts_stall_every_three_steps(runs: dict[str, MonitorResult]
                                                         ) -> None:
    [f] = _periodic(runs["grain"])
    times = [round(s.time_s * 1e3) for s in runs["grain"].steps]
    assert f.numbers["period"] == 3, times
    assert f.location == "workers" and "the loader's 3 workers" in f.message
    # ~80 ms a round of 3 batches against ~3 x 5 ms of training (on a quiet machine: ~5x;
    # a busy one stretches the training steps, and the factor falls)
    factor = f.numbers["keep_ahead_factor"]
    assert factor > 1.0 + 0.5 / 3  # a stall is half a typical step or more
    assert f"raise the workers from 3 to {math.ceil(3 * factor - 1e-9)} " in (f.fix or "")


def test_generator_epoch_boundary_is_the_period(runs: dict[str, MonitorResult]) -> None:
    [f] = _periodic(runs["epochs"])
    assert f.numbers["period"] == 6
    assert f.location == "epoch" and "the data set holds 6 batches" in f.message
    # 7 boundaries after the first step, 150 ms each
    assert f.numbers["stalls"] == 7
    assert 0.7 * 7 * 0.15 < f.numbers["lost_s"] < 2.0 * 7 * 0.15


def test_clean_loop_has_no_periodic_stall(runs: dict[str, MonitorResult]) -> None:
    assert _periodic(runs["clean"]) == []


def test_workers_started_after_the_restore_are_a_first_batch_finding(
        runs: dict[str, MonitorResult]) -> None:
    run = runs["grain"]
    assert run.startup is not None
    # three worker processes start at the first batch: a second or more here
    assert run.startup.first_batch_s > 0.8
    assert run.startup.work["restore"] >= 0.8 and "compile" in run.startup.work
    [f] = [f for f in run.findings if f.kind == "first-batch"]
    # the restore (0.8 s) and the compile would hide as much of the workers' start-up
    assert f.numbers["hideable_s"] == pytest.approx(
        min(run.startup.first_batch_s - run.startup.typical_wait_s, run.startup.work_s))
    assert f.numbers["hideable_s"] >= 0.8
    assert "start_prefetch()" in (f.fix or "")
    from pipecheck.report.monitor import format_monitor
    text = format_monitor(run)
    assert "first batch (step 0's data wait)" in text and "restore 0." in text


def test_a_generator_that_starts_at_once_has_no_first_batch_finding(
        runs: dict[str, MonitorResult]) -> None:
    for name in ("epochs", "clean"):
        assert [f for f in runs[name].findings if f.kind == "first-batch"] == []
