"""compare_run reads the other processes' load around each phase (a fake machine and a fake
clock), decides on it, keeps it in the record and shows it in the report."""

from __future__ import annotations

import dataclasses

from pipecheck import compare
from pipecheck.measure.machine_load import CpuReading
from pipecheck.measure.target import Target
from pipecheck.records.compare import CompareResult
from pipecheck.records.dataloader import Resources
from pipecheck.records.machine_load import MachineLoad, PhaseLoad
from pipecheck.report.compare import format_compare
from tests.fakes import FakeClock
from tests.unit.test_compare_run import CONFIG, around, loader, real, setting, stages, target


class Machine:
    """The machine's busy CPU and pipecheck's own, as a fake reader gives them."""

    def __init__(self) -> None:
        self.busy = self.own = 0.0

    def __call__(self) -> CpuReading:
        return CpuReading(self.busy, self.own)


def busy_phases(machine: Machine, clock: FakeClock, others: dict[str, float],
                s: compare.Stages) -> compare.Stages:
    """Each stage takes 10 s, pipecheck busy for 15 CPU s of it, other processes for
    ``others[phase]`` cores."""

    def wrap(phase, stage):
        def run(*args, **kwargs):
            clock.advance(10.0)
            machine.own += 15.0
            machine.busy += 15.0 + 10.0 * others[phase]
            return stage(*args, **kwargs)
        return run

    return dataclasses.replace(
        s, target=wrap("target", s.target), loader=wrap("loader", s.loader),
        real=wrap("real", s.real), target_again=wrap("target_again", s.target_again),
        cpu=machine, host_cores=lambda: 2)


def run(others: dict[str, float],
        o: compare.CompareOptions = compare.CompareOptions()) -> CompareResult:
    clock = FakeClock()
    s = busy_phases(Machine(), clock, others,
                    stages(50.0, loader(setting(0, 10.0)), real(around(90.0))))
    return compare.compare_run(CONFIG, o, stages=s, clock=clock).result


def test_busier_during_the_real_data_run_is_the_verdicts_reason():
    r = run({"target": 0.1, "loader": 0.1, "real": 0.9, "target_again": 0.1})
    m = r.machine_load
    assert m is not None and m.cores == 2
    assert [m.target, m.loader, m.real, m.target_again] == [
        PhaseLoad(10.0, 1.0), PhaseLoad(10.0, 1.0), PhaseLoad(10.0, 9.0), PhaseLoad(10.0, 1.0)]
    assert r.verdict == "inconclusive"
    assert ("the machine got busier during the real-data run (other processes used 0.9 of 2 "
            "cores, against 0.1 while compute was timed): rerun on a quieter machine"
            ) in r.verdict_reason
    assert not [f for f in r.findings if f.kind == "interference"]
    assert CompareResult.from_dict(r.to_dict()) == r
    text = format_compare(r)
    assert ("other processes' CPU while measuring (cores of 2): T 0.1, D 0.1, R 0.9, "
            "T again 0.1") in text


def test_even_load_still_blames_loading_and_a_quiet_machine_shows_no_line():
    r = run({"target": 0.8, "loader": 0.8, "real": 0.9, "target_again": 0.8})
    assert "loading competes with compute for the CPU" in r.verdict_reason
    assert [f.kind for f in r.findings if f.kind == "interference"] == ["interference"]
    assert "other processes' CPU while measuring" in format_compare(r)
    quiet = run({"target": 0.0, "loader": 0.1, "real": 0.2, "target_again": 0.0})
    assert "other processes' CPU" not in format_compare(quiet)


def test_a_record_without_the_field_reads_as_none():
    r = run({"target": 0.0, "loader": 0.0, "real": 0.0, "target_again": 0.0})
    data = dict(r.to_dict())
    del data["machine_load"]
    assert CompareResult.from_dict(data).machine_load is None


def test_t_read_from_a_file_brings_the_load_its_run_recorded():
    quiet_t = target(50.0)
    recorded = MachineLoad(2, target=PhaseLoad(5.0, 0.5))
    clock = FakeClock()
    s = busy_phases(Machine(), clock, {"loader": 0.1, "real": 0.9},
                    stages(50.0, loader(setting(0, 10.0)), real(around(90.0))))
    s = dataclasses.replace(s, target=lambda *a: Target(
        dataclasses.replace(quiet_t.result, machine_load=recorded)))
    o = compare.CompareOptions(synthetic_file="syn.json")
    r = compare.compare_run(CONFIG, o, stages=s, clock=clock).result
    assert r.machine_load is not None and r.machine_load.target == PhaseLoad(5.0, 0.5)
    assert r.machine_load.target_again is None  # not measured again: T came from the file
    assert "against 0.1 while compute was timed" in r.verdict_reason
    # a file without it (written before it was recorded): no load for T, loading blamed
    s = dataclasses.replace(s, target=lambda *a: quiet_t)
    r = compare.compare_run(CONFIG, o, stages=s, clock=clock).result
    assert r.machine_load is not None and r.machine_load.target is None
    assert "loading competes with compute for the CPU" in r.verdict_reason


def test_a_slowdown_beyond_the_loaders_cpu_names_the_machines_speed_not_loading():
    """R 40 ms above T on an even load, where the chosen setting's loading used 5 ms of CPU a
    batch (its measured resources): not loading's doing, in the verdict and the finding."""
    cheap = dataclasses.replace(setting(0, 10.0), resources=Resources(
        batches=30, wall_s=0.3, main_cpu_s=0.15, worker_cpu_s=0.0, workers_seen=0,
        main_rss_mb=400.0, worker_rss_mb=0.0, workers_rss_mb=0))
    clock = FakeClock()
    s = busy_phases(Machine(), clock, dict.fromkeys(("target", "loader", "real",
                                                     "target_again"), 0.5),
                    stages(50.0, loader(cheap), real(around(90.0))))
    r = compare.compare_run(CONFIG, compare.CompareOptions(), stages=s, clock=clock).result
    assert r.verdict == "inconclusive"
    assert "more than loading's own CPU (5.00 ms a batch) could take" in r.verdict_reason
    (f,) = [f for f in r.findings if f.kind == "interference"]
    assert "the machine's speed changed during the real-data run" in f.message
    assert "competes" not in r.verdict_reason + f.message
