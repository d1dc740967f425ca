"""Slow steps in a user's real Flax NNX loop: found, explained, kept out, listed, plotted.

The loop (examples/nnx_generation_loop.py, copied to a temporary directory outside the
repository and off sys.path) trains an NNX MLP on a Grain pipeline with a worker process,
under ``pipecheck.Monitor``, and runs an eager text generation every 20 steps outside any
span: the first one compiles dozens of small eager functions, the second only costs host
time.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from pipecheck.analysis.steady_state import steady_state
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from pipecheck.report.plot import tag_points
from tests.conftest import REPO, run_cli

from .doc_examples import skeleton_problems

pytestmark = pytest.mark.timing
"""Judges measured times (`-m timing` selects these tests, `-m "not timing"` skips them)."""

NNX_LOOP = REPO / "examples" / "nnx_generation_loop.py"


@pytest.fixture(scope="module")
def nnx_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[pathlib.Path, MonitorResult, str]:
    tmp = tmp_path_factory.mktemp("nnx_user")
    loop = tmp / "nnx_loop.py"  # the user's file: outside the repository, off sys.path
    loop.write_text(NNX_LOOP.read_text())
    out = tmp / "run.json"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, str(loop), str(out)], capture_output=True, text=True,
                       timeout=300, env=env, cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    return out, store.load(out, expect=MonitorResult), r.stdout


def test_generation_steps_are_flagged_with_their_cause(nnx_run) -> None:
    _, run, report = nnx_run
    by = {a.step: a for a in run.anomalies}
    assert {19, 39} <= set(by), run.anomalies
    first, second = by[19], by[39]
    # the first generation compiled its eager functions, named from JAX's compile events
    assert first.cause in ("compilation", "host work outside spans")
    assert "compiled during the step: jit(" in first.evidence
    assert first.evidence.startswith("host work outside spans")
    # the second one hit the caches: host time outside any span, nothing compiled
    assert second.cause == "host work outside spans"
    assert "compiled during the step" not in second.evidence
    for a in (first, second):
        assert a.ratio >= 2.0 and a.time_s >= 2.0 * run.step_time.summary.median
    # listed in the report, with the cause
    assert "anomalous steps (kept out of the steady state):" in report
    assert "host work outside spans" in report
    assert skeleton_problems("monitor-nnx-generation", report) == []  # docs/monitor.md


def test_generation_steps_are_kept_out_of_the_steady_state(nnx_run) -> None:
    _, run, _ = nnx_run
    steps = {s.step: s for s in run.steps}
    steady = [s.step for s in steady_state(run.steps)]
    for i in (19, 39):
        # tagged for the plot and readers (slow, or compile/gc when that happened in it)
        assert set(steps[i].tags) & {"slow", "compile", "gc"}, steps[i]
        assert i not in steady
        assert steps[i].time_s not in run.step_time.samples_s
    # the headline is the median of the other steps, far below the generation steps
    assert run.step_time.summary.n >= 40
    assert max(steps[19].time_s, steps[39].time_s) > 2 * run.step_time.summary.p90


def test_generation_steps_are_marked_in_the_plot(nnx_run, tmp_path: pathlib.Path) -> None:
    path, run, _ = nnx_run
    marked = {step for pts in tag_points(run.steps).values() for step, _ in pts}
    assert {19, 39} <= marked
    png = tmp_path / "run.png"
    r = run_cli("plot", str(path), "-o", str(png))
    assert r.returncode == 0, r.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
