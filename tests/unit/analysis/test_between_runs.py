"""Several runs a side: the test over run medians, each side's runs against its first,
diff_sides and its min-change rule, the BetweenRuns record."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from pipecheck import stats
from pipecheck.analysis import between_runs, comparable, diff
from pipecheck.logs.runs import load_run
from pipecheck.progress import Progress, Task
from pipecheck.records import store
from pipecheck.records.diff import BetweenRuns, DiffResult
from pipecheck.report.blocks import render_text
from pipecheck.report.diff import format_diff, run_medians_table, sources_lines

from .test_comparable import summary
from .test_diff import DATA, LOG_A, LOG_B

V4_DIFF = DATA / "records_v4" / "diff.json"

A3 = ("a1.json", "a2.json", "a3.json")
B3 = ("b1.json", "b2.json", "b3.json")


def test_identical_sets_of_runs_are_not_significant():
    runs = [0.100, 0.101, 0.099]
    r = between_runs.compare_runs(A3, runs, B3, runs, 0.95)
    assert r.significance == "not significant" and r.spread_from == "A and B"
    assert r.relative == pytest.approx(0.0, abs=1e-12) and r.p_value == pytest.approx(1.0)
    assert r.ci_low < 0 < r.ci_high
    assert (r.sources_a, r.sources_b, r.runs_a) == (A3, B3, tuple(runs))


def test_a_ten_percent_shift_with_a_small_spread_is_significant():
    a = [0.100, 0.101, 0.099]
    r = between_runs.compare_runs(A3, a, B3, [1.1 * x for x in a], 0.95)
    assert r.significance == "significant" and r.p_value < 0.01
    assert r.relative == pytest.approx(0.10, abs=1e-9)
    assert r.ci_low < 0.10 < r.ci_high and r.ci_low > 0.05 and r.ci_high < 0.15
    # equal variances on both sides: Welch's df is the pooled 2n - 2
    assert r.df == pytest.approx(4.0)


def test_identical_workloads_are_called_significant_about_as_often_as_the_level_allows():
    """400 A/A pairs of 3 runs a side, run medians with a 3% between-run spread: the false
    verdict rate is near 1 - confidence (0.05), the t-test's promise."""
    rng = np.random.default_rng(7)
    false = sum(between_runs.compare_runs(A3, 0.1 * np.exp(0.03 * rng.standard_normal(3)),
                                          B3, 0.1 * np.exp(0.03 * rng.standard_normal(3)),
                                          0.95).significance == "significant"
                for _ in range(400))
    assert 0.02 <= false / 400 <= 0.09


def test_a_large_spread_hides_the_same_shift():
    a = [0.100, 0.130, 0.080]
    r = between_runs.compare_runs(A3, a, B3, [1.1 * x for x in a], 0.95)
    assert r.significance == "not significant" and r.p_value > 0.05
    assert r.relative == pytest.approx(0.10, abs=1e-9) and r.ci_low < 0 < r.ci_high


def test_one_run_on_a_side_takes_the_other_sides_spread():
    b = [0.110, 0.111, 0.109]
    r = between_runs.compare_runs(("a.json",), [0.100], B3, b, 0.95)
    assert r.spread_from == "B" and r.df == 2.0
    lb = np.log(b)
    se = math.sqrt(np.var(lb, ddof=1) * (1 + 1 / 3))
    d = lb.mean() - math.log(0.100)
    assert r.p_value == pytest.approx(stats.t_two_sided_p(d / se, 2))
    half = stats.t_quantile(0.975, 2) * se
    assert (r.ci_low, r.ci_high) == pytest.approx((math.expm1(d - half), math.expm1(d + half)))
    mirrored = between_runs.compare_runs(B3, b, ("a.json",), [0.100], 0.95)
    assert mirrored.spread_from == "A" and mirrored.p_value == pytest.approx(r.p_value)


def test_a_run_without_a_median_leaves_it_untested_and_too_few_runs_is_refused():
    r = between_runs.compare_runs(A3, [0.1, math.nan, 0.1], B3, [0.1, 0.1, 0.1], 0.95)
    assert r.significance == "" and r.p_value is None and r.spread_from == ""
    with pytest.raises(ValueError, match="two on one"):
        between_runs.compare_runs(("a",), [0.1], ("b",), [0.1], 0.95)


# --- each side's runs against its first -------------------------------------------------


def _named(run, source):
    return dataclasses.replace(run, source=source)


def test_within_side_names_the_run_that_differs():
    runs = [_named(summary(seed=0), "b1.json"), _named(summary(seed=1), "b2.json"),
            _named(summary(seed=2, config={"batch_size": 64}), "b3.json")]
    (reason,) = comparable.within_side(runs, "B")
    assert reason.rule == "batch" and (reason.a, reason.b) == ("32", "64")
    assert reason.what.startswith("B's run 3 of 3 (b3.json) against its first")
    assert "rerun b3.json as b1.json, or take it out of B" in reason.fix
    assert comparable.within_side(runs[:2], "B") == ()


def test_within_side_allows_only_the_machine_load():
    first = _named(summary(seed=0, load=0.0), "a1.json")
    busy = _named(summary(seed=1, load=10.0), "a2.json")
    (reason,) = comparable.within_side([first, busy], "A")
    assert reason.rule == "machine-load" and "--allow machine-load" in reason.fix
    assert "busier during run 2" in reason.fix
    assert comparable.within_side([first, busy], "A", allow=["machine-load"]) == ()
    # --allow batch names the change from A to B: among A's repeats it still counts
    wide = _named(summary(seed=1, config={"batch_size": 64}), "a2.json")
    assert [r.rule for r in comparable.within_side([first, wide], "A", ["batch"])] == ["batch"]


def test_within_side_names_a_run_with_too_few_steady_steps():
    runs = [_named(summary(seed=0), "a1.json"), _named(summary(seed=1, n=8), "a2.json")]
    (reason,) = comparable.within_side(runs, "A")
    assert reason.rule == "steady-steps" and "a2.json" in reason.what


def test_a_side_of_runs_without_their_config_says_what_it_could_not_check():
    """Real logs that are not repeats of one setup (a maxdiffusion TPU log and a MaxText CPU
    log, neither with MaxText's config lines): the side cannot be checked, and says so."""
    real = DATA / "real"
    a = load_run(str(real / "maxtext_gpu_gpt3_22b_1node.log"))
    side = [load_run(str(real / "maxdiffusion_tpu_v5p8_wan.log")),
            load_run(str(real / "maxtext_cpu_profiler_async_ckpt_eval.log"))]
    within = comparable.side_unchecked(side, "B")
    assert "batch (within B: runs 1 and 2 hold no batch size)" in within
    assert "versions (within B: run 1 holds no JAX or pipecheck version)" in within
    r = diff.diff_sides([a], side)
    assert set(within) <= set(r.unchecked) and r.unchecked[0].startswith("batch (B holds")
    assert comparable.side_unchecked(side[:1], "B") == ()  # one run: nothing within
    assert "batch" not in " ".join(comparable.side_unchecked(side, "B", allow=["batch"]))


def test_a_side_of_pipecheck_records_is_checked_within_and_its_verdict_says_nothing_more():
    side_a = [_named(summary(seed=i), f"a{i}.json") for i in range(3)]
    side_b = [_named(summary(seed=10 + i), f"b{i}.json") for i in range(3)]
    assert comparable.side_unchecked(side_a, "A") == ()
    r = diff.diff_sides(side_a, side_b)
    assert r.unchecked == () and "comparability not checked" not in r.verdict
    # one run without its config among them is named, beside the verdict
    bare = _named(dataclasses.replace(side_b[2], config={}), "b2.json")
    r = diff.diff_sides(side_a, [*side_b[:2], bare])
    assert "batch (within B: run 3 holds no batch size)" in r.unchecked
    assert "comparability not checked for batch (within B: run 3" in r.verdict


class _Tasks(Progress):
    """Progress that keeps the description of each task (each bootstrap says what it tests)."""

    def __init__(self) -> None:
        self.tasks: list[str] = []

    def task(self, description: str, total: int, unit: str = "") -> Task:
        self.tasks.append(description)
        return Task()


def test_with_several_runs_a_side_the_steps_median_is_not_bootstrapped_for_nothing():
    side_a = [_named(summary(seed=i), f"a{i}.json") for i in range(2)]
    side_b = [_named(summary(seed=10 + i), f"b{i}.json") for i in range(2)]
    one, several = _Tasks(), _Tasks()
    diff.diff_sides(side_a[:1], side_b[:1], progress=one)
    r = diff.diff_sides(side_a, side_b, progress=several)
    assert any("step time median" in t for t in one.tasks), one.tasks
    assert not any("step time median" in t for t in several.tasks), several.tasks
    assert r.between_runs is not None
    (row,) = [x for x in r.rows if x.name == "step time median"]
    assert row.significance  # the row is the test over the runs' medians


# --- diff_sides and its min-change rule --------------------------------------------------


def test_default_min_change_is_the_floor_only_for_one_run_a_side():
    assert diff.default_min_change(1, 1) == diff.MIN_CHANGE == 0.04
    assert diff.default_min_change(3, 1) == diff.default_min_change(1, 2) == 0.0
    assert diff.default_min_change(3, 3) == 0.0


def _side(step_s, seeds, name):
    return [_named(summary(step_s, seed=s, n=60), f"{name}{i}.json")
            for i, s in enumerate(seeds, 1)]


def test_one_run_a_side_is_diff_runs():
    a, b = _side(0.04, [0], "a"), _side(0.04, [1], "b")
    result = diff.diff_sides(a, b)
    assert result == diff.diff_runs(a[0], b[0])
    assert result.between_runs is None and result.min_change == diff.MIN_CHANGE


def test_several_runs_a_side_test_the_run_medians():
    # B's runs are A's, 10% longer: every run median exactly 1.1 times its twin's
    a, b = _side(0.04, [0, 1, 2], "a"), _side(0.044, [0, 1, 2], "b")
    result = diff.diff_sides(a, b)
    between = result.between_runs
    assert between is not None and result.min_change == 0.0
    assert between.sources_a == ("a1.json", "a2.json", "a3.json")
    assert between.runs_a == tuple(diff.run_median(r) for r in a)
    assert between.significance == "significant" and result.outcome == "significant"
    assert between.relative == pytest.approx(0.10)
    assert 0 < between.ci_low < 0.10 < between.ci_high
    row = result.row("step time median")
    assert row.a == pytest.approx(between_runs.geometric_mean(between.runs_a))
    assert row.relative == between.relative and row.p_value == between.p_value
    assert (result.a, result.b) == (a[0], b[0])
    assert "over 3 runs of A and 3 of B" in result.verdict
    assert "Welch's t on the logs of the runs' medians" in result.verdict


def test_an_explicit_min_change_is_kept_with_several_runs():
    a, b = _side(0.04, [0, 1, 2], "a"), _side(0.044, [0, 1, 2], "b")
    result = diff.diff_sides(a, b, min_change=0.2)
    assert result.min_change == 0.2 and result.outcome == "not significant"
    assert result.between_runs.significance == "significant"
    assert "under the 20% diff judges" in result.verdict


def test_same_runs_each_side_are_not_significant_and_a_run_that_differs_is_inconclusive():
    a, b = _side(0.04, [0, 1, 2], "a"), _side(0.04, [0, 1, 2], "b")
    assert diff.diff_sides(a, b).outcome == "not significant"
    odd = _named(summary(0.04, seed=6, n=60, config={"batch_size": 64}), "b4.json")
    result = diff.diff_sides(a, [*b, odd])
    assert result.outcome == "inconclusive"
    assert any("B's run 4 of 4 (b4.json)" in r.what for r in result.not_comparable)


# --- the record -------------------------------------------------------------------------


def test_between_runs_round_trips_and_older_records_read_it_as_none():
    a, b = _side(0.04, [0, 1], "a"), _side(0.044, [3, 4, 5], "b")
    result = diff.diff_sides(a, b)
    again = DiffResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.between_runs == result.between_runs and isinstance(again.between_runs,
                                                                     BetweenRuns)
    assert again == result
    older = result.to_dict()
    del older["between_runs"]
    assert DiffResult.from_dict(older).between_runs is None
    assert diff.diff_runs(load_run(LOG_A), load_run(LOG_B)).to_dict()["between_runs"] is None


def test_a_version_4_diff_record_reads_without_between_runs():
    assert store.load(V4_DIFF, expect=DiffResult).between_runs is None


def test_the_report_lists_every_run_and_says_how_many_a_side():
    a, b = _side(0.04, [0, 1, 2], "a"), _side(0.044, [0, 1, 2], "b")
    result = diff.diff_sides(a, b)
    assert sources_lines(result) == [
        "A: 3 runs, the first a1.json (pipecheck synthetic run)",
        "B: 3 runs, the first b1.json (pipecheck synthetic run)"]
    between = BetweenRuns(("a1.json", "a2.json"), ("b1.json",), (0.0208, 0.02013), (0.1,))
    assert render_text([run_medians_table(between)]) == "\n".join([
        "side    run    median    source",
        "------  -----  --------  --------",
        "A       1      20.8 ms   a1.json",
        "A       2      20.1 ms   a2.json",
        "B       1      100.0 ms  b1.json"])
    text = format_diff(result)
    assert "each run's steady-state median" in text and "b3.json" in text
    single = diff.diff_sides(a[:1], b[:1])
    assert "each run's steady-state median" not in format_diff(single)
    assert sources_lines(single)[0] == "A: a1.json (pipecheck synthetic run)"
