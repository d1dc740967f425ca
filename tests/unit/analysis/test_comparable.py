"""diff's comparability rules, on hand-built runs: every reason, --allow, too few steps."""

from __future__ import annotations

import dataclasses
import json

import pytest

from pipecheck.analysis import comparable, diff
from pipecheck.analysis.machine_load import MIN_PHASE_WALL_S
from pipecheck.cli import main

from .test_diff import ENV, run_dict, write, written

CONFIG = {"workload": "calibrated", "compute_ms": 40.0, "batch_size": 32, "num_workers": 2}


def summary(step_s=0.04, seed=0, n=30, env=None, config=None, load=None, cores=2,
            wall_s=10.0):
    data = written(run_dict(step_s, seed, n, env={**ENV, "pipecheck": "0.9", **(env or {})},
                            config={**CONFIG, **(config or {})}))
    if load is not None:  # other programs' CPU seconds over the steps' wall_s
        data["machine_load"] = {"cores": cores,
                                "target": {"wall_s": wall_s, "other_cpu_s": load}}
    return diff.summary_from_record(data, "run")


@pytest.mark.parametrize("rule, b_kwargs, a_value, b_value, fix", [
    ("batch", {"config": {"batch_size": 64}}, "32", "64", "rerun B with batch_size=32"),
    ("model", {"config": {"workload": "demo"}}, "calibrated", "demo", "rerun B with workload="),
    ("devices", {"env": {"device_count": 4}}, "1", "4", "rerun B with device_count=1"),
    ("devices", {"env": {"device_kind": "TPU v6e"}}, "cpu", "TPU v6e", "device_kind=cpu"),
    ("versions", {"env": {"jax": "0.9.0"}}, "0.10.2", "0.9.0", "rerun B with jax=0.10.2"),
    ("versions", {"env": {"pipecheck": "1.0"}}, "0.9", "1.0", "pipecheck=0.9"),
    ("loader", {"config": {"num_workers": 8}}, "2", "8", "rerun B with num_workers=2"),
    ("config", {"config": {"compute_ms": 60.0, "seed": 3}}, "compute_ms=40.0",
     "compute_ms=60.0", "change one at a time"),
])
def test_each_rule_names_both_values_and_the_fix(rule, b_kwargs, a_value, b_value, fix):
    a = summary(config={"seed": 0})
    b = summary(seed=1, **{k: ({"seed": 0, **v} if k == "config" and "seed" not in v else v)
                           for k, v in b_kwargs.items()})
    (reason,) = comparable.not_comparable(a, b)
    assert reason.rule == rule
    assert a_value in reason.a and b_value in reason.b
    assert fix in reason.fix and (rule == "config" or f"--allow {rule}" in reason.fix)
    result = diff.diff_runs(a, b)
    assert result.outcome == "inconclusive" and result.not_comparable == (reason,)
    assert result.verdict.startswith("step time: inconclusive")
    assert reason.describe() in result.verdict
    # allowed, it is the change under test and the diff judges it
    allowed = diff.diff_runs(a, b, allow=[rule])
    assert allowed.not_comparable == () and allowed.outcome == "not significant"


def test_one_config_key_is_the_change_under_test():
    a, b = summary(), summary(seed=1, config={"compute_ms": 60.0})
    assert comparable.not_comparable(a, b) == ()
    assert diff.diff_runs(a, b).outcome in ("significant", "not significant")


def test_a_config_key_can_be_allowed_by_name():
    a, b = summary(), summary(seed=1, config={"compute_ms": 60.0, "seed": 3})
    assert comparable.not_comparable(a, b, allow=["seed"]) == ()


def test_machine_load_reason_names_the_busier_run():
    a, b = summary(load=1.0), summary(seed=1, load=12.0)  # 0.1 vs 1.2 of 2 cores
    (reason,) = comparable.not_comparable(a, b)
    assert (reason.rule, reason.a, reason.b) == ("machine-load", "0.10", "1.20")
    assert "B ran on a busier machine" in reason.fix
    (reason,) = comparable.not_comparable(summary(load=5.0), summary(seed=1, load=1.0))
    assert "A ran on a busier machine" in reason.fix


@pytest.mark.parametrize("cores, a_load, b_load, fires", [
    (2, 1.0, 1.9, False),   # 0.09 of a core more: under the 0.1 the readings resolve
    (2, 1.0, 2.1, True),    # 0.11 more: the A/A pairs that misled diff differed by 0.1-0.4
    (2, 0.0, 4.0, True),    # 0.4 more, under the old half-core threshold
    (64, 0.0, 30.0, False), # 3.0 of 64 cores: under 5% of the host (3.2)
    (64, 0.0, 34.0, True),  # 3.4 of 64
])
def test_machine_load_threshold_is_a_tenth_of_a_core_or_5_percent_of_the_host(
        cores, a_load, b_load, fires):
    assert comparable.LOAD_DIFF_MIN_CORES == 0.1 and comparable.LOAD_DIFF_SHARE_OF_HOST == 0.05
    a = summary(load=a_load, cores=cores)
    b = summary(seed=1, load=b_load, cores=cores)
    assert [r.rule for r in comparable.not_comparable(a, b)] == (
        ["machine-load"] if fires else [])


def test_a_load_phase_shorter_than_the_minimum_wall_gives_no_reading():
    """A phase of a few milliseconds reads anything (machine_load.MIN_PHASE_WALL_S): it must
    not make the diff inconclusive."""
    short = summary(seed=1, load=0.4, wall_s=0.2)  # would read 2 cores
    assert (short.other_cores, short.host_cores) == (None, None)
    assert comparable.not_comparable(summary(load=0.0), short) == ()
    at_the_minimum = summary(seed=1, load=1.0, wall_s=MIN_PHASE_WALL_S)
    assert at_the_minimum.other_cores == pytest.approx(1.0 / MIN_PHASE_WALL_S)


def test_too_few_steady_steps_is_inconclusive_and_cannot_be_allowed():
    n = comparable.MIN_STEADY_STEPS  # step 0 compiles: n - 1 steady steps
    a, b = summary(n=n), summary(seed=1)
    (reason,) = comparable.not_comparable(a, b, allow=comparable.RULES)
    assert (reason.rule, reason.a, reason.b) == ("steady-steps", str(n - 1), "29")
    assert "A has 9: rerun it with --steps 30" in reason.fix
    assert diff.diff_runs(a, b).outcome == "inconclusive"
    assert comparable.not_comparable(summary(n=n + 1), b) == ()


def test_reasons_are_listed_in_rule_order():
    a = summary()
    b = summary(seed=1, n=5, env={"jax": "0.9.0"}, config={"batch_size": 64})
    assert [r.rule for r in comparable.not_comparable(a, b)] == [
        "batch", "versions", "steady-steps"]


def test_cli_not_comparable_exits_0_and_writes_the_reasons(tmp_path, capsys):
    a = write(tmp_path, "a.json", run_dict(0.04, 0, config=dict(CONFIG)))
    b = write(tmp_path, "b.json", run_dict(0.04, 1, config={**CONFIG, "batch_size": 64}))
    out = tmp_path / "d.json"
    assert main(["diff", str(a), str(b), "--json", str(out), "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "step time: inconclusive" in text
    assert "batch size batch_size 32 vs 64: rerun B with batch_size=32" in text
    data = json.loads(out.read_text())
    assert data["outcome"] == "inconclusive"
    assert data["not_comparable"][0]["rule"] == "batch"
    out.unlink()
    assert main(["diff", str(a), str(b), "--allow", "batch", "--quiet"]) == 0
    assert "step time: inconclusive" not in capsys.readouterr().out


def test_cli_unknown_allow_is_a_usage_error(tmp_path, capsys):
    a = write(tmp_path, "a.json", run_dict(0.04, 0))
    assert main(["diff", str(a), str(a), "--allow", "nonsense"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow" in err and "batch" in err


def test_too_few_steps_in_a_maxtext_log_names_maxtexts_key():
    a, b = summary(n=5), summary(seed=1)
    log = dataclasses.replace(a, kind="imported")
    (reason,) = comparable.not_comparable(log, b)
    assert "train it with steps=30 or more (MaxText's key)" in reason.fix
    assert "--steps" not in reason.fix


def test_what_one_run_does_not_hold_is_named_as_not_checked_beside_the_verdict():
    """A log excerpt holds no config or environment: the rules that compare them cannot
    fire, and the verdict must not read as if they had been checked."""
    a, b = summary(), summary(seed=1)
    assert comparable.unchecked(a, b) == ()
    bare = dataclasses.replace(b, config={}, env={})
    assert comparable.unchecked(a, bare) == (
        "batch (B holds no batch size)", "model (B holds no model)",
        "devices (B holds no device kind or count)",
        "versions (B holds no JAX or pipecheck version)")
    assert comparable.unchecked(bare, bare, allow=["batch", "model"]) == (
        "devices (A and B hold no device kind or count)",
        "versions (A and B hold no JAX or pipecheck version)")
    result = diff.diff_runs(a, bare)
    assert result.unchecked == comparable.unchecked(a, bare)
    assert result.outcome in ("significant", "not significant")
    assert "comparability not checked for batch (B holds no batch size)" in result.verdict
    assert "comparability not checked" not in diff.diff_runs(a, b).verdict
    again = type(result).from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.unchecked == result.unchecked


def test_keys_naming_the_run_or_its_folders_are_not_differences():
    """Two runs of one MaxText config differ in run_name and the folders derived from it
    (seen in two real GPU logs, tests/data/real/maxtext_gpu_llama2_nsys_*.log)."""
    a = summary(config={"run_name": "a", "checkpoint_dir": "gs://x/a/checkpoints/",
                        "base_output_directory": "gs://x/a", "metrics_file": "a.txt"})
    b = summary(seed=1, config={"run_name": "b", "checkpoint_dir": "gs://x/b/checkpoints/",
                                "base_output_directory": "gs://x/b", "metrics_file": "b.txt"})
    assert comparable.not_comparable(a, b) == ()
