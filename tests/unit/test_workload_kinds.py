"""What a framework does its own way is held by its workload kind (``WorkloadKind``), and
``compare_run`` applies it: R with the kind's host work, the recommendation in the kind's
words. The stages are faked (as in test_compare_run); MaxText is not needed."""

from __future__ import annotations

import dataclasses

import pytest

from pipecheck import compare, workloads
from pipecheck.config import RunConfig
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.workloads import kind_of, maxtext, maxtext_model, resolve
from pipecheck.workloads.base import Workload

from .test_compare_run import CONFIG, around, loader, real, setting, stages

MAXTEXT = resolve(maxtext.config_of("run.yml", ["steps=10"]), source="run.yml")
SETTING = GrainSettings(workers=4, per_worker_buffer=2, threads=1, prefetch=2)


def hook(step: int) -> None:
    pass


def workload(config: RunConfig) -> Workload:
    return Workload("fake", config, None, None, "train_step", lambda: None, {}, lambda: {},
                    hooks=(hook,))


def input_bound_fixed_by_tuning(build=workload) -> compare.Stages:
    """T 50 ms; D 80 ms without workers, 20 ms with 4: 4 workers chosen, the verdict's
    recommendation names them."""
    return dataclasses.replace(stages(50.0, loader(setting(0, 80.0), setting(4, 20.0)),
                                      real(around(52.0))), build_workload=build)


def test_the_default_kind_adds_nothing_and_writes_pipechecks_own_way():
    kind = kind_of("demo")
    assert kind.own_setting(CONFIG) is None
    assert kind.real_hooks(CONFIG, workload(CONFIG), 12) == ()
    assert kind.setting_text(SETTING) == SETTING.label()
    assert kind.saved_config_text is None  # pipecheck's own YAML (tuned_config.config_text)
    assert kind.recommendation("use 4 Grain workers", SETTING) == "use 4 Grain workers"
    assert kind.own_config is None
    assert {kind_of(name).real_hooks for name in ("demo", "calibrated", "user")} == {
        workloads.no_hooks}


def test_maxtexts_kind_holds_maxtexts_own_ways():
    kind = kind_of(maxtext.NAME)
    assert (kind.own_setting, kind.real_hooks, kind.setting_text, kind.saved_config_text,
            kind.recommendation, kind.own_config) == (
        maxtext.own_setting, maxtext_model.real_hooks, maxtext.overrides_text,
        maxtext.saved_config_text, maxtext.recommendation, maxtext.config_of)
    assert kind.setting_text(SETTING) == maxtext.overrides_text(SETTING)


def test_r_runs_the_kinds_host_work_after_the_workloads_own(monkeypatch):
    """compare's R for MaxText: MaxText's own host work as step hooks after the workload's,
    told the steps asked for (its profiler stops by the last of them); the real stage is
    called exactly as compare calls it (``compare.RealStage``)."""
    asked: list = []
    monkeypatch.setitem(workloads.REGISTRY, maxtext.NAME, dataclasses.replace(
        kind_of(maxtext.NAME),
        real_hooks=lambda cfg, w, steps: asked.append((cfg, steps)) or (print,)))
    ran: list = []
    real_stage = real(around(52.0))

    def record(w, parts, chosen, steps, timeout_s, progress, clock, /, *, profile_dir=None):
        ran.append((w, steps, timeout_s, profile_dir))
        return real_stage(w, parts, chosen, steps, timeout_s, progress, clock,
                          profile_dir=profile_dir)

    s = dataclasses.replace(input_bound_fixed_by_tuning(), real=record)
    compare.compare_run(MAXTEXT, compare.CompareOptions(steps=12, profile_dir="cap"), stages=s)
    # at the chosen setting with the profile, then at the first setting for its gain
    [(trained, steps, timeout_s, profile_dir), (first, first_steps, _, first_profile)] = ran
    assert trained.hooks == (hook, print) and steps == 12 and profile_dir == "cap"
    assert first.hooks == (hook, print) and first_steps == 12 and first_profile is None
    assert asked == [(MAXTEXT, 12), (MAXTEXT, 12)]


def test_a_workload_without_host_work_of_its_own_is_trained_as_built():
    built = workload(CONFIG)
    ran: list = []
    real_stage = real(around(52.0))
    s = dataclasses.replace(
        input_bound_fixed_by_tuning(lambda config: built),
        real=lambda w, *a, **k: ran.append(w) or real_stage(w, *a, **k))
    compare.compare_run(CONFIG, stages=s)
    assert ran == [built, built] and all(w is built for w in ran)  # chosen, then first setting


def test_the_recommendation_is_written_the_kinds_way(monkeypatch):
    """The same measurements give MaxText's record the recommendation with MaxText's Grain
    keys where the default kind's names Grain's options."""
    monkeypatch.setitem(workloads.REGISTRY, maxtext.NAME, dataclasses.replace(
        kind_of(maxtext.NAME), real_hooks=lambda cfg, w, steps: ()))
    demo = compare.compare_run(CONFIG, stages=input_bound_fixed_by_tuning()).result
    mx = compare.compare_run(MAXTEXT, stages=input_bound_fixed_by_tuning()).result
    chosen = demo.tuning.chosen
    assert chosen == mx.tuning.chosen and chosen.workers == 4
    assert chosen.advice() in demo.recommendation
    assert mx.recommendation == maxtext.recommendation(demo.recommendation, chosen)
    assert f"MaxText's {maxtext.overrides_text(chosen)}" in mx.recommendation
    assert (mx.verdict, mx.verdict_reason) == (demo.verdict, demo.verdict_reason)
    # the same findings; the input-bound one's fix names the setting as the recommendation does
    assert [(f.kind, f.message) for f in mx.findings] == \
        [(f.kind, f.message) for f in demo.findings]
    for d, m in zip(demo.findings, mx.findings, strict=True):
        if d.kind == "input-bound":
            assert (d.fix, m.fix) == (f"use {chosen.advice()}",
                                      f"use MaxText's {maxtext.overrides_text(chosen)}")
        else:
            assert m == d
    assert "input-bound" in [f.kind for f in demo.findings]


@pytest.mark.parametrize("workload_value", [["a", "list"], 3])
def test_an_unknown_workload_value_is_still_one_line(workload_value):
    with pytest.raises(workloads.ConfigError, match="unknown workload"):
        resolve({"workload": workload_value})
