"""Real MaxText logs (tests/data/real, sources in its README): the importer, the anomaly
rules and diff against what a person reading each log finds (expected.json)."""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest

from pipecheck.analysis.diff import diff_runs
from pipecheck.logs.maxtext import import_log
from pipecheck.logs.runs import load_run

REAL = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"
EXPECTED = json.loads((REAL / "expected.json").read_text())
LOGS = sorted(p.name for p in REAL.glob("*.log"))

MAX_STEADY_RATIO = 5.0
"""No step over this many times the steady median may stay in the steady state."""


def test_every_log_has_its_expectations_and_a_source():
    readme = (REAL / "README.md").read_text()
    assert sorted(EXPECTED) == LOGS
    assert len(LOGS) >= 8
    for name in LOGS:
        assert f"`{name}`" in readme


def _steady_steps(expected: dict) -> list[int]:
    if "steady_steps" in expected:
        return expected["steady_steps"]
    lo, hi = expected["steady_steps_range"]
    return list(range(lo, hi + 1))


@pytest.fixture(scope="module", params=LOGS)
def case(request):
    return request.param, import_log(REAL / request.param), EXPECTED[request.param]


def test_every_slow_step_has_the_cause_the_log_shows(case):
    name, run, expected = case
    got = {str(a.step): a.cause for a in run.anomalies}
    assert got == {k: v[0] for k, v in expected["anomalies"].items()}, name
    for a in run.anomalies:
        if a.cause == "attribution shift":
            neighbour = expected["neighbours"][str(a.step)]
            assert f"after slow step {neighbour}:" in a.evidence
        if a.cause == "unexplained":
            assert "no checkpoint save" in a.evidence or "implausibly fast" in a.evidence


def test_the_steady_state_and_its_median_match_a_hand_computation(case):
    name, run, expected = case
    assert run.steady_steps.column("step").tolist() == _steady_steps(expected), name
    assert run.step_time.summary.median == pytest.approx(expected["steady_median_s"], abs=1e-9)
    times = run.steady_steps.column("time_s")
    assert (times <= MAX_STEADY_RATIO * run.step_time.summary.median).all()


def test_level_shifts_loss_and_unreadable_lines(case):
    name, run, expected = case
    got = [[s.step, round(s.before_median_s, 6), round(s.after_median_s, 6)]
           for s in run.level_shifts]
    assert got == expected["level_shifts"], name
    assert run.nonfinite_loss_from == expected["nonfinite_loss_from"]
    assert run.unreadable_lines == expected["unreadable"]


def test_diff_reads_each_log_as_import_does(case):
    name, run, expected = case
    summary = load_run(REAL / name)
    assert [(a.step, a.cause) for a in summary.anomalies] == [
        (a.step, a.cause) for a in run.anomalies]
    final = expected["final_loss"]
    if final == "nan":
        assert summary.final_loss is not None and math.isnan(summary.final_loss)
    else:
        assert summary.final_loss == pytest.approx(final)
    result = diff_runs(summary, summary)
    median = next(r for r in result.rows if r.name == "step time median")
    if not expected["level_shifts"]:
        assert median.a == pytest.approx(expected["steady_median_s"], abs=1e-9)
    else:  # compared on the level the run ended at
        assert median.a == pytest.approx(expected["level_shifts"][-1][2], abs=1e-9)
        assert any("changed level at step" in w for w in result.warnings)


def test_the_real_linen_and_nnx_diff_compares_steady_medians_not_the_pages_means():
    a, b = load_run(REAL / "maxtext_v6e_linen.log"), load_run(REAL / "maxtext_v6e_nnx.log")
    result = diff_runs(a, b)
    rows = {r.name: r for r in result.rows}
    # the page's own figures are means over steps 1-9, stalls included: 3.674 vs 3.470 s
    assert np.mean(a.steps.column("time_s")[1:]) == pytest.approx(3.674, abs=1e-3)
    assert np.mean(b.steps.column("time_s")[1:]) == pytest.approx(3.470, abs=1e-3)
    # the steady state: no stall inside, medians by hand
    assert rows["step time median"].a == pytest.approx(0.2345)
    assert rows["step time median"].b == pytest.approx(0.2465)
    # (0.408 + 0.235 + 0.229 + 0.460 + 0.234 + 0.230) / 6 and the NNX steps likewise
    assert rows["step time mean"].a == pytest.approx(1.796 / 6)
    assert rows["step time mean"].b == pytest.approx(1.850 / 6)
    assert rows["step time median"].significance == "not significant"
    # six steady steps each: too few to judge, and the verdict says so and what to do
    assert result.outcome == "inconclusive"
    assert [(r.rule, r.a, r.b) for r in result.not_comparable] == [("steady-steps", "6", "6")]
    assert "train it with steps=30 or more" in result.verdict


def test_the_gpu_log_finds_the_level_after_the_capture_and_says_so():
    run = import_log(REAL / "maxtext_gpu_llama2_nsys_a.log")
    # its compile step names the HLO dump XLA_FLAGS turned on
    assert run.anomalies[0].evidence.endswith(
        "the run dumps HLO while compiling (line 157: HloModule dump enabled with path "
        "prefix: , suffix: before_optimizations)")
    assert any("changed level at step 9: median 3.587 s before, 4.221 s" in w
               for w in run.warnings)
    steady = run.steady_steps
    before = steady.column("time_s")[steady.column("step") < 9]
    assert np.median(before) == pytest.approx(3.587)


def test_a_nan_loss_is_reported_from_its_first_step_and_is_the_final_loss():
    run = import_log(REAL / "maxtext_tpu_gemma_nan.log")
    assert any(w.startswith("loss is nan from step 9 on (4 step(s)") and
               "the last finite loss was 11.94 at step 8" in w for w in run.warnings)


def test_the_lag_of_each_log_is_told_from_its_timestamps():
    from pipecheck.analysis.logs.maxtext import log_lag
    from pipecheck.logs.maxtext import parse_lines

    def lag(name: str) -> int:
        with open(REAL / name) as f:
            p = parse_lines(f)
        return log_lag(p.steps.column("step"), p.steps.column("time_s"), p.line_at,
                       p.own_time)

    assert lag("maxtext_v6e_linen.log") == 1  # MaxText's metric logger: one step late
    assert lag("maxtext_tpu_dpo_qwen3.log") == 0  # Tunix's trainer: at once
    assert lag("maxtext_gpu_llama2_nsys_a.log") == 1  # bare lines: MaxText's default


def test_the_xpk_guides_older_step_line_gives_tflops_per_device():
    # Oct 2023 MaxText: "TFLOP/s: 72.958" is the per-device value (its write_metrics)
    run = import_log(REAL / "maxtext_tpu_v5e_xpk_cloud_logging.log")
    assert run.steps[1].tflops_per_s_per_device == 72.958
    steady = run.steady_steps.column("tflops_per_s_per_device")
    assert float(np.median(steady)) == pytest.approx(53.562)


def test_the_older_one_line_total_tflops_is_read_from_the_gpu_logs():
    assert import_log(REAL / "maxtext_gpu_gpt3_22b_1node.log").total_tflops_per_step == 137.33
    assert import_log(REAL / "maxtext_gpu_llama2_nsys_a.log").total_tflops_per_step == 1033.20
