"""``pipecheck compare`` writes the record ``compare_run`` returns for the same config: the
command adds nothing of its own (the workload's kind holds what MaxText does its own way).
compare's stages are faked (as in test_compare_run); MaxText is not needed: its kind's host
work is replaced, the rest of its kind (recommendation, setting text, saved config) is
MaxText's own and pure."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from pipecheck import compare, workloads
from pipecheck.cli import main
from pipecheck.records import store
from pipecheck.records.compare import CompareResult
from pipecheck.workloads import kind_of, maxtext, resolve

from ..test_workload_kinds import input_bound_fixed_by_tuning

ORIGINAL = compare.compare_run


@pytest.fixture
def faked(monkeypatch):
    """compare_run with faked stages wherever it is called; the calls' configs and options."""
    calls: list = []

    def compare_run(config, o=compare.CompareOptions(), *, progress=None, **kwargs):
        assert not kwargs, "the command passes no stages of its own"
        calls.append((config, o))
        return ORIGINAL(config, o, stages=input_bound_fixed_by_tuning())

    monkeypatch.setattr(compare, "compare_run", compare_run)
    monkeypatch.setitem(workloads.REGISTRY, maxtext.NAME, dataclasses.replace(
        kind_of(maxtext.NAME), real_hooks=lambda cfg, w, steps: ()))
    return calls


def command_record(args, tmp_path, capsys) -> tuple[CompareResult, str]:
    out = tmp_path / "c.json"
    assert main(["compare", *args, "--json", str(out), "--quiet"]) == 0
    return store.load(out, expect=CompareResult), capsys.readouterr().out


def same_record(record: CompareResult, direct: CompareResult) -> None:
    assert record.recommendation == direct.recommendation
    assert (record.verdict, record.verdict_reason) == (direct.verdict, direct.verdict_reason)
    assert record.tuning.chosen == direct.tuning.chosen
    assert record.findings == direct.findings and record.config == direct.config


def test_maxtexts_compare_is_compare_run_on_its_config(faked, tmp_path, capsys):
    yml = tmp_path / "run.yml"
    yml.write_text("steps: 10\n")
    saved = tmp_path / "tuned.yml"
    record, out = command_record(["--maxtext", str(yml), "steps=10", "--save-config",
                                  str(saved), "--steps", "12"], tmp_path, capsys)
    config = resolve(maxtext.config_of(str(yml), ["steps=10"]), source=str(yml))
    [(given, opts)] = faked
    assert given == config and opts.steps == 12
    direct = ORIGINAL(config, opts, stages=input_bound_fixed_by_tuning()).result
    same_record(record, direct)
    chosen = direct.tuning.chosen
    assert f"MaxText's {maxtext.overrides_text(chosen)}" in record.recommendation
    # the input-bound finding's fix names the setting as MaxText's keys too, not Grain's code
    [fix] = [f.fix for f in record.findings if f.kind == "input-bound"]
    assert fix == f"use MaxText's {maxtext.overrides_text(chosen)}"
    # the saved config and its line: MaxText's, from its kind
    assert f"wrote {saved}: {maxtext.overrides_text(chosen)}" in out
    assert saved.read_text() == maxtext.saved_config_text(
        config, chosen, {"command": "compare", "loader_s": direct.loader_step_s,
                         "target_s": direct.target_step_s, "real_s": direct.real_step_s,
                         "verdict": direct.verdict})
    assert yaml.safe_load(saved.read_text())["grain_worker_count"] == chosen.workers


def test_the_default_workloads_compare_is_compare_run_on_its_config(faked, tmp_path, capsys):
    saved = tmp_path / "tuned.yml"
    record, out = command_record(["--set", "batch_size=8", "--save-config", str(saved)],
                                 tmp_path, capsys)
    [(given, opts)] = faked
    assert given == resolve(None, ["batch_size=8"])
    direct = ORIGINAL(given, opts, stages=input_bound_fixed_by_tuning()).result
    same_record(record, direct)
    assert direct.tuning.chosen.advice() in record.recommendation
    [fix] = [f.fix for f in record.findings if f.kind == "input-bound"]
    assert fix == f"use {direct.tuning.chosen.advice()}"
    assert f"wrote {saved}: {direct.tuning.chosen.label()}" in out
    assert yaml.safe_load(saved.read_text())["num_workers"] == direct.tuning.chosen.workers
