"""compare_run, its stages faked: hand-made T, D and R give each verdict, in milliseconds,
with the chosen setting, the findings and the recommendation the real stages would feed."""

from __future__ import annotations

import dataclasses
from typing import Callable, cast

import pytest

from pipecheck import compare
from pipecheck.analysis.loader.tuner import outcome
from pipecheck.config import RunConfig
from pipecheck.errors import ConfigError
from pipecheck.measure.dataloader import LoaderParts
from pipecheck.measure.loader_search import LoaderChoice, SearchOptions, loader_trial
from pipecheck.measure.real_run import RealRun, read_real_run
from pipecheck.measure.target import Target
from pipecheck.progress import Progress
from pipecheck.records import store
from pipecheck.records.common import (
    Breakdown,
    CompileInfo,
    Distribution,
    Estimate,
    StepRecord,
    SyncSite,
    Throughput,
)
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import LoaderSetting
from pipecheck.records.grain_settings import GrainSettings
from pipecheck.records.monitor import MonitorResult
from pipecheck.records.synthetic import SyntheticResult
from pipecheck.workloads.base import Workload
from tests.unit.step_tables import table

CONFIG = RunConfig("demo", {"batch_size": 8, "run_steps": 0})
SYNC_LINE = "/home/me/train.py:42"
WORKLOAD = cast(Workload, "workload")
"""What the faked build gives: the fakes never look inside it."""


def around(ms: float, n: int = 40, spread: float = 0.01) -> list[float]:
    """``n`` samples within +/-``spread`` of ``ms`` milliseconds (seconds), deterministic."""
    return [ms / 1000.0 * (1 + spread * ((i * 7) % 5 - 2) / 2) for i in range(n)]


def target(ms: float) -> Target:
    return Target(SyntheticResult(env={}, config={}, step_time=Distribution.of(around(ms)),
                                  compile=CompileInfo(1.0, 0.5, 1),
                                  throughput=Throughput(100.0)))


def setting(workers: int, ms: float) -> LoaderSetting:
    """D = ``ms`` per batch, every batch steady (an estimate of its own samples)."""
    samples = around(ms)
    return LoaderSetting(
        settings=GrainSettings(workers=workers, threads=1), first_batch_s=0.5,
        batch_time=Distribution.of(samples),
        batches_per_s=1000.0 / ms, examples_per_s=8000.0 / ms,
        loader_time=Estimate.mean_of(Distribution.of(samples)))


def loader(*settings: LoaderSetting) -> compare.LoaderStage:
    """The loader stage: the settings in the order tried, the tuner's choice among them."""

    def stage(config: RunConfig, path: str | None, parts: Callable[[], LoaderParts],
              target_s: float, opts: SearchOptions, progress: Progress,
              clock: Callable[[], float]) -> LoaderChoice:
        tuning = outcome([loader_trial(s) for s in settings], target_s, 2, "fixed", "faked")
        chosen = next(s for s in settings if s.settings == tuning.chosen.settings)
        return LoaderChoice(tuple(settings), chosen, tuning)

    return stage


class real:  # noqa: N801 (a stage, called like the functions beside it)
    """The real-data stage: steps of ``ms`` (``at``: of other step times at these worker
    counts); ``sync_s`` per step blocked at SYNC_LINE; ``ran``: the settings it ran at and
    ``steps``: the steps asked at each."""

    def __init__(self, ms: list[float], sync_s: float = 0.0,
                 at: dict[int, list[float]] | None = None) -> None:
        self.ms, self.sync_s, self.at = ms, sync_s, at or {}
        self.ran: list[GrainSettings] = []
        self.steps: list[int] = []

    def __call__(self, workload: Workload, parts: Callable[[], LoaderParts],
                 chosen: LoaderSetting, steps: int, timeout_s: float | None,
                 progress: Progress, clock: Callable[[], float], /, *,
                 profile_dir: str | None = None) -> RealRun:
        self.ran.append(chosen.settings)
        self.steps.append(steps)
        ms, sync_s = self.at.get(chosen.settings.workers, self.ms), self.sync_s
        sites = (SyncSite(SYNC_LINE, "train", "float(loss)", sync_s * len(ms), len(ms),
                          False),) if sync_s else ()
        return RealRun(table(StepRecord(i, t) for i, t in enumerate(ms)), sites)


def stages(t_ms: float, loader_stage: compare.LoaderStage,
           real_stage: compare.RealStage) -> compare.Stages:
    return compare.Stages(
        build_workload=lambda config: WORKLOAD,
        loader_parts=lambda config, workload: LoaderParts(None, lambda b: b, None),
        target=lambda config, path, steps, workload, progress, clock: target(t_ms),
        target_again=lambda config, steps, workload, before, clock: (tuple(around(t_ms, 20)),
                                                                     None),
        loader=loader_stage, real=real_stage, env=lambda: {"backend": "fake"},
        cores=lambda: 2, ram_budget_mb=lambda: 4096.0)


def run(t_ms: float, loader_stage: compare.LoaderStage,
        real_stage: compare.RealStage) -> CompareResult:
    return compare.compare_run(CONFIG, stages=stages(t_ms, loader_stage, real_stage)).result


def test_compute_bound():
    real_stage = real(around(51.0))
    result = run(50.0, loader(setting(0, 10.0)), real_stage)
    assert result.verdict == "compute-bound", result.verdict_reason
    assert result.target_step_s == pytest.approx(0.050, rel=0.01)
    assert result.loader_step_s == pytest.approx(0.010, rel=0.01)
    assert result.real_step_s == pytest.approx(0.051, rel=0.01)
    assert real_stage.ran == [setting(0, 10.0).settings]  # R measured at the chosen setting
    assert result.target.summary.n == 60  # T before and again after the real-data run


def test_input_bound_fixed_by_tuning():
    real_stage = real(around(52.0), at={0: around(83.0, 30)})
    result = run(50.0, loader(setting(0, 80.0), setting(4, 20.0)), real_stage)
    assert result.verdict == "input-bound", result.verdict_reason
    assert result.verdict_reason.startswith("input-bound as loaded at first (80.0 ms per batch "
                                            "against 50.0 ms of compute; real-data steps took "
                                            "83.0 ms)")
    assert result.chosen_workers == 4
    # R at the chosen setting, then at the first one with half the steps, for its gain
    assert real_stage.ran == [setting(4, 20.0).settings, setting(0, 80.0).settings]
    assert real_stage.steps == [compare.CompareOptions().steps, compare.baseline_steps(
        compare.CompareOptions().steps)]
    assert result.estimates.baseline is not None
    assert result.estimates.baseline.value == pytest.approx(0.080, rel=0.01)
    assert result.estimates.real_baseline is not None
    assert result.estimates.real_baseline.value == pytest.approx(0.083, rel=0.01)
    assert "4 Grain workers" in result.recommendation
    (gain,) = [g for g in result.gains if g.kind == "loader-setting"]
    assert gain.how == "measured"
    assert 0.029 < gain.gain_s.low <= gain.gain_s.high < 0.033  # 83 less 52 ms, +-1%


def test_a_first_setting_that_keeps_up_is_not_trained_at_again():
    """The config's own setting measured first (4 workers) keeps up with compute; the search
    chose a cheaper one that does too: nothing to buy over it, so no second real-data run."""
    real_stage = real(around(51.0))
    result = run(50.0, loader(setting(4, 20.0), setting(0, 30.0)), real_stage)
    assert result.verdict == "compute-bound", result.verdict_reason
    assert result.chosen_workers == 0 and real_stage.ran == [setting(0, 30.0).settings]
    assert result.estimates.real_baseline is None


def test_no_measure_gain_trains_at_the_chosen_setting_only():
    real_stage = real(around(52.0), at={0: around(83.0, 30)})
    result = compare.compare_run(CONFIG, compare.CompareOptions(measure_gain=False), stages=stages(
        50.0, loader(setting(0, 80.0), setting(4, 20.0)), real_stage)).result
    assert real_stage.ran == [setting(4, 20.0).settings]
    assert result.estimates.real_baseline is None
    assert "real-data steps took" not in result.verdict_reason
    (gain,) = [g for g in result.gains if g.kind == "loader-setting"]
    assert gain.how == "model"


def test_forced_sync_names_the_line():
    result = run(50.0, loader(setting(0, 10.0)), real(around(90.0), sync_s=0.035))
    assert result.verdict == "forced-sync", result.verdict_reason
    [sync] = [f for f in result.findings if f.kind == "forced-sync"]
    assert sync.location == SYNC_LINE


def test_slower_than_both_without_a_sync_is_inconclusive():
    result = run(50.0, loader(setting(0, 10.0)), real(around(90.0)))
    assert result.verdict == "inconclusive", result.verdict_reason
    assert "the sampler found no host sync that explains it" in result.verdict_reason


def test_too_noisy_is_inconclusive():
    noisy = [0.02 if i % 2 else 0.2 for i in range(40)]
    result = run(50.0, loader(setting(0, 10.0)), real(noisy))
    assert result.verdict == "inconclusive", result.verdict_reason
    assert "too noisy" in result.verdict_reason


def monitor_run(tmp_path, config: dict) -> str:
    run = MonitorResult(env={}, config=config, step_time=Distribution.of(around(20.0)),
                        first_step_s=1.0,
                        steps=table(StepRecord(i, t) for i, t in enumerate(around(20.0))),
                        sync_sites=(), breakdown=Breakdown(wall_s=1.0, steps=40, rows=()),
                        wall_s=1.0, total_steps=40)
    path = tmp_path / f"run{len(list(tmp_path.iterdir()))}.json"
    store.save(run, path)
    return str(path)


def test_a_monitor_run_of_the_users_loop_is_not_judged_against_the_demo(tmp_path):
    """--real RUN.json from the user's own loop, without --config: T and D would come from
    the built-in demo. Refused before anything is measured, in one line saying how."""
    path = monitor_run(tmp_path, {"example": "nnx_train", "lr": 0.1})
    built: list[RunConfig] = []

    def build(config: RunConfig) -> Workload:
        built.append(config)
        return WORKLOAD

    s = dataclasses.replace(stages(50.0, loader(setting(0, 10.0)), real([])),
                            build_workload=build)
    with pytest.raises(ConfigError) as e:
        compare.compare_run(CONFIG, compare.CompareOptions(real_file=path), stages=s)
    assert str(e.value).startswith(
        f"--real {path}: it timed your own training loop, and T and D would be measured on "
        "the built-in demo workload; a verdict needs T, D and R from one workload: point "
        "compare at your loop's code with --config FILE")
    assert "\n" not in str(e.value) and built == []


def test_a_monitor_run_is_read_when_the_workloads_can_be_one(tmp_path):
    mine = {"init": "my.py:init", "train_step": "my.py:step", "dataset": "my.py:data"}
    users = monitor_run(tmp_path, {"lr": 0.1})
    assert len(read_real_run(users, {"workload": mine}).steps) == 40
    demo = monitor_run(tmp_path, CONFIG.to_dict())
    assert len(read_real_run(demo, CONFIG.to_dict()).steps) == 40
    assert read_real_run(monitor_run(tmp_path, {"workload": "my-lm"}), {"workload": mine}).steps
    with pytest.raises(ConfigError, match="it timed workload calibrated, and T and D would be "
                                          "measured on the built-in demo"):
        read_real_run(monitor_run(tmp_path, {"workload": "calibrated"}), CONFIG.to_dict())
    # T and D from files of the user's workload: only their own config checks apply
    assert read_real_run(users, CONFIG.to_dict(), one_workload=False).steps


def test_compare_real_without_config_refuses_in_one_line(capsys, tmp_path):
    """`pipecheck compare --real RUN.json` with no --config: no verdict from two workloads."""
    from pipecheck.cli import main

    path = monitor_run(tmp_path, {"example": "nnx_train"})
    assert main(["compare", "--real", path, "--quiet"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith(f"pipecheck: error: --real {path}: it timed your own training loop")
    assert "--config FILE" in err and "\n" not in err and captured.out == ""


def test_compare_reports_its_stages_through_progress():
    said: list[str] = []

    class Lines(Progress):
        def say(self, line: str) -> None:
            said.append(line)

    compare.compare_run(CONFIG, progress=Lines(),
                        stages=stages(50.0, loader(setting(0, 10.0)), real(around(51.0))))
    assert said == ["      real-data step time R = 51.0 ms",
                    "[4/4] target step time again: 15 steps"]


def test_a_compare_record_is_plotted_with_rs_median_in_its_title(tmp_path, monkeypatch):
    from pipecheck.report import plot

    result = run(50.0, loader(setting(0, 10.0)), real(around(51.0)))
    store.save(result, tmp_path / "c.json")
    titles: list[str] = []

    def render_png(steps: object, window: object, title: str, anomalies: object = (),
                   **_: object) -> tuple[bytes, str]:
        titles.append(title)
        return b"png", "none"

    monkeypatch.setattr(plot, "render_png", render_png)
    plot.plot_run(tmp_path / "c.json", tmp_path / "c.png")
    assert titles == ["c.json (compare): steady-state median 51.0 ms"]


def own_workers_pipeline():
    """A user's IterDataset with its own ReadOptions and mp_prefetch(num_workers=2)."""
    import grain

    return (grain.MapDataset.range(64).map(lambda i: {"x": i})
            .to_iter_dataset(grain.ReadOptions(num_threads=2, prefetch_buffer_size=4))
            .batch(4).mp_prefetch(grain.MultiprocessingOptions(num_workers=2)))


def test_an_option_the_pipeline_would_ignore_is_refused_before_anything_is_measured():
    measured: list[str] = []

    def measure_t(*args: object) -> Target:
        measured.append("T")
        return target(50.0)

    s = dataclasses.replace(
        stages(50.0, loader(setting(2, 10.0)), real([])),
        loader_parts=lambda config, workload: LoaderParts(own_workers_pipeline(), lambda b: b,
                                                          None),
        target=measure_t)
    for opts, start in ((dict(workers=(4,)), "--workers 4 cannot change this pipeline's worker "
                                             "processes: it calls mp_prefetch("),
                        (dict(max_workers=6, max_workers_given=True),
                         "--max-workers 6 has nothing to search"),
                        (dict(threads=8, search_threads=False), "--threads 8 cannot change")):
        with pytest.raises(ConfigError) as e:
            compare.compare_run(CONFIG, compare.CompareOptions(**opts), stages=s)
        assert str(e.value).startswith(start), str(e.value)
    assert measured == []


def pipeline_as_it_is(workers: int, ms: float) -> compare.LoaderStage:
    """The loader stage on a pipeline that runs its own workers: one setting, no search."""

    def stage(config: RunConfig, path: str | None, parts: Callable[[], LoaderParts],
              target_s: float, opts: SearchOptions, progress: Progress,
              clock: Callable[[], float]) -> LoaderChoice:
        s = setting(workers, ms)
        tuning = outcome([loader_trial(s)], target_s, 2, "pipeline", "measured as it is")
        return LoaderChoice((s,), s, tuning)

    return stage


def test_input_bound_with_the_pipelines_own_workers_says_to_change_the_pipeline():
    """No worker count pipecheck could name would be applied: the recommendation and the
    finding say what to change in the pipeline instead."""
    result = run(20.0, pipeline_as_it_is(2, 60.0), real(around(61.0)))
    assert result.verdict == "input-bound", result.verdict_reason
    assert result.tuning.stop == "pipeline" and result.chosen_workers == 2
    assert result.recommendation.startswith(
        "change the pipeline itself: its own mp_prefetch runs 2 worker(s) and pipecheck "
        "cannot change them; raise num_workers")
    assert "Grain workers (grain.MultiprocessingOptions" not in result.recommendation
    [finding] = [f for f in result.findings if f.kind == "input-bound"]
    assert finding.message.startswith("the pipeline as it is, with its own 2 worker(s), gives")
    assert finding.fix == result.recommendation


def test_own_loading_then_a_sync_is_forced_sync_when_busy_intervals_overlap():
    """Loading on the training thread (no workers, no read threads), then a user sync: within
    R's own steps the two follow each other, however wide a busy machine made R's interval
    (T 75 ms, D 47 ms; R 85 ms, or 200 ms while the machine was busiest)."""
    busy = [0.085 * (1 + 0.01 * (i % 3)) if i % 9 < 5 else 0.2 for i in range(40)]
    steps = table(StepRecord(i, t, spans={"data_wait": 0.046}) for i, t in enumerate(busy))

    def real_stage(workload: Workload, parts: Callable[[], LoaderParts], chosen: LoaderSetting,
                   n: int, timeout_s: float | None, progress: Progress,
                   clock: Callable[[], float], profile_dir: str | None = None) -> RealRun:
        sites = (SyncSite(SYNC_LINE, "train", "float(loss)", 0.05 * len(steps), len(steps),
                          False),)
        return RealRun(steps, sites)

    own = dataclasses.replace(setting(0, 47.0), settings=GrainSettings(workers=0, threads=0))
    result = run(75.0, loader(own), real_stage)
    assert result.verdict == "forced-sync", result.verdict_reason
    assert result.verdict_reason.startswith("in each real-data step")
    assert result.estimates.real.low < 1.2 * result.estimates.target.high  # intervals overlap
    # the same steps with a read thread loading beside the training thread: its data wait
    # is not its own loading, and the intervals alone show no forced sync
    result = run(75.0, loader(setting(0, 47.0)), real_stage)
    assert result.verdict != "forced-sync", result.verdict_reason


def test_a_periodic_stall_of_the_real_data_run_is_a_finding_matched_to_its_loader():
    from pipecheck.analysis.periodic_stall import LoaderShape

    ms = [s * (4.0 if i % 8 == 0 else 1.0) for i, s in enumerate(around(50.0, 81))]

    class stalling(real):  # noqa: N801
        def __call__(self, *args, **kwargs) -> RealRun:
            run = super().__call__(*args, **kwargs)
            return dataclasses.replace(run, loader=LoaderShape(4, 2))

    result = run(50.0, loader(setting(4, 10.0)), stalling(ms))
    [f] = [f for f in result.findings if f.kind == "periodic-stall"]
    assert f.numbers["period"] == 8 and f.location == "per_worker_buffer"
    assert f.numbers["stalls"] == 10  # steps 8 .. 80
    assert f.numbers["lost_s"] == pytest.approx(10 * 3 * 0.050, rel=0.05)
    assert run(50.0, loader(setting(4, 10.0)), real(around(50.0, 81))).findings == ()


def test_the_first_batch_beside_the_compile_is_in_the_record_and_a_finding():
    slow_start = dataclasses.replace(setting(4, 10.0), first_batch_s=3.0)
    result = run(50.0, loader(slow_start), real(around(50.0)))
    assert result.startup is not None
    assert (result.startup.first_batch_s, dict(result.startup.work)) == (3.0, {"compile": 0.5})
    [f] = [f for f in result.findings if f.kind == "first-batch"]
    assert f.numbers["hideable_s"] == pytest.approx(0.5)  # the compile's 0.5 s, at most
    from pipecheck.report.compare import format_compare
    assert "start-up: first batch 3.00 s; beside it compile 0.50 s" in format_compare(result)
    quick = run(50.0, loader(setting(4, 10.0)), real(around(50.0)))  # 0.5 s: nothing to hide
    assert [f for f in quick.findings if f.kind == "first-batch"] == []


def test_cold_is_refused_before_anything_is_measured_where_nothing_can_be_evicted(tmp_path):
    """--cold on a pipeline whose files pipecheck cannot see (a MapDataset of numbers here),
    whether compare searches the loader or reads its settings from a file, and with both
    the loader settings and R read from files: one ConfigError, before T."""
    import grain

    measured: list[str] = []

    def measure_t(*args: object) -> Target:
        measured.append("T")
        return target(50.0)

    s = dataclasses.replace(
        stages(50.0, loader(setting(0, 10.0)), real([0.05] * 10)),
        loader_parts=lambda config, workload: LoaderParts(
            grain.MapDataset.range(64).map(lambda i: {"x": i}), lambda b: b, None),
        target=measure_t)
    run_file = monitor_run(tmp_path, CONFIG.to_dict())
    for opts, start in ((dict(cold=True), "--cold cannot tell which files"),
                        (dict(cold=True, dataloader_file="dl.json"),
                         "--cold cannot tell which files"),
                        (dict(cold=True, dataloader_file="dl.json", real_file=run_file),
                         "--cold has nothing to evict for")):
        with pytest.raises(ConfigError) as e:
            compare.compare_run(CONFIG, compare.CompareOptions(**opts), stages=s)
        assert str(e.value).startswith(start), str(e.value)
    assert measured == []
