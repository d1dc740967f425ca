"""Real calibrated runs through the CLI: checkpoint attribution, --trace, plot."""

from __future__ import annotations

import json
import os
import pathlib
import shutil

import pytest

from pipecheck.analysis.steady_state import steady_state
from pipecheck.records import store
from pipecheck.records.common import StepRecord
from pipecheck.report.trace import validate_chrome_trace
from tests.conftest import run_cli

from .doc_examples import skeleton_problems

CKPT_S = 0.200


@pytest.fixture(scope="module")
def ckpt_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, pathlib.Path]:
    d = tmp_path_factory.mktemp("ckpt")
    paths = {"json": d / "run.json", "trace": d / "trace.json"}
    r = run_cli("synthetic", "--set", "workload=calibrated", "--set", "compute_ms=30",
                "--set", "checkpoint_every=5", "--set", "checkpoint_ms=200",
                "--set", "eval_every=7", "--set", "eval_ms=50", "--steps", "17",
                "--json", str(paths["json"]), "--trace", str(paths["trace"]))
    assert r.returncode == 0, r.stderr
    assert "where the wall time went" in r.stdout and "checkpoint" in r.stdout
    assert skeleton_problems("timeline-synthetic", r.stdout) == []  # docs/timeline.md
    return paths


def test_checkpoint_cost_lands_on_checkpoint_steps(ckpt_run: dict[str, pathlib.Path]) -> None:
    res = store.load(ckpt_run["json"])
    steps: list[StepRecord] = list(res.steps)
    by = {s.step: s for s in steps}
    assert [s.step for s in steps if "checkpoint" in s.tags] == [5, 10, 15]
    assert [s.step for s in steps if "eval" in s.tags] == [7, 14]
    steady = steady_state(res.steps)
    fastest = min(s.time_s for s in steady)
    assert sorted(res.step_time.samples_s) == sorted(s.time_s for s in steady)
    assert not any(t in s.tags for s in steady for t in ("checkpoint", "eval", "compile"))
    for i in (5, 10, 15):
        # the checkpoint (a sleep to CKPT_S) is inside its own step's interval ...
        assert by[i].time_s >= by[i].spans["checkpoint"] >= CKPT_S * 0.98
    for i in (6, 11, 16):
        # ... and none of it in the next step's, whose device work did not run hidden under
        # the checkpoint: it is not faster than the fastest steady step (margin: noise; the
        # median would not do, a busy machine inflates it while this step may run quietly);
        # the steady state holds no checkpoint time at all
        assert "checkpoint" not in by[i].spans
        assert by[i].time_s >= 0.7 * fastest, (i, by[i].time_s, fastest)
    assert not any("checkpoint" in s.spans for s in steady)


def test_trace_is_valid_chrome_trace_json(ckpt_run: dict[str, pathlib.Path]) -> None:
    trace = json.loads(ckpt_run["trace"].read_text())
    assert validate_chrome_trace(trace) == []
    res = store.load(ckpt_run["json"])
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"steps", "host", "data", "compile"}
    step_slices = {e["args"]["step"]: e for e in events
                   if e["ph"] == "X" and e.get("cat") == "step"}
    assert sorted(step_slices) == list(range(17))
    for s in res.steps:  # microseconds, the same intervals as the run JSON
        assert step_slices[s.step]["dur"] == pytest.approx(s.time_s * 1e6, abs=0.002)
        assert step_slices[s.step]["args"]["tags"] == list(s.tags)
    data = {e["name"] for e in events if e["ph"] == "X" and e["tid"] == 3}
    assert data == {"data_wait"}
    host = {e["name"] for e in events if e["ph"] == "X" and e["tid"] == 2}
    assert {"dispatch", "sync", "checkpoint", "eval"} <= host
    assert {e["name"] for e in events if e["ph"] == "X" and e["tid"] == 4} >= {"backend compile"}


def test_plot_png_of_a_run(ckpt_run: dict[str, pathlib.Path], tmp_path: pathlib.Path) -> None:
    out = tmp_path / "plot.png"
    r = run_cli("plot", str(ckpt_run["json"]), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "Gantt of steps 2-13" in r.stdout
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    review_dir = os.environ.get("PIPECHECK_REVIEW_DIR")  # keep the PNG to look at in review
    if review_dir:
        shutil.copyfile(out, pathlib.Path(review_dir) / "pipecheck_plot_review.png")
    again = run_cli("plot", str(ckpt_run["json"]), "-o", str(out))
    assert again.returncode == 2 and "exists" in again.stderr


def test_trace_and_plot_bad_input_are_one_line_errors(tmp_path: pathlib.Path) -> None:
    missing_dir = tmp_path / "nope" / "t.json"
    r = run_cli("synthetic", "--set", "workload=calibrated", "--steps", "3",
                "--trace", str(missing_dir))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "does not exist" in r.stderr
    assert not missing_dir.parent.exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = run_cli("plot", str(bad), "-o", str(tmp_path / "x.png"))
    assert r.returncode == 2 and "not a pipecheck result" in r.stderr
    assert not (tmp_path / "x.png").exists()
    r = run_cli("plot", str(bad), "-o", str(tmp_path / "x.png"), "--window", "9:3")
    assert r.returncode == 2 and "FIRST:LAST" in r.stderr
