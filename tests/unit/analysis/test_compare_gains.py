"""What each change a compare record supports would buy: the headspace from T's and R's
intervals, each gain a range ranked by its high end, syncs' low end 0 (overlap unknown), a
compute-bound run's fixes all about 0, and a record without the numbers a gain needs."""

from __future__ import annotations

import dataclasses
import json

from pipecheck.analysis.gain_ranges import NEAR_FLOOR_MARGIN
from pipecheck.analysis.loader.compare_gains import compare_gains, compare_headspace
from pipecheck.analysis.loop_verdict import MATERIAL_GAIN_SHARE
from pipecheck.records import store
from pipecheck.records.common import Estimate, Finding, StepRecord
from pipecheck.records.compare import CompareResult, Estimates
from pipecheck.records.gains import StepInterval
from pipecheck.records.kinds import FindingKind
from pipecheck.report.compare import format_compare
from tests.unit.report.test_report_compare import make_compare


def est(ms: float, half_ms: float = 0.5, n: int = 20) -> Estimate:
    return Estimate(ms / 1e3, (ms - half_ms) / 1e3, (ms + half_ms) / 1e3, n)


def sync_finding(location: str, per_step_ms: float, kind: FindingKind = "forced-sync"
                 ) -> Finding:
    return Finding(kind, f"sync at {location} waits {per_step_ms} ms", location=location,
                   numbers={"seconds_per_step": per_step_ms / 1e3, "share_of_step": 0.5,
                            "samples": 10.0})


def record(target_ms: float, loader_ms: float, real_ms: float, *findings: Finding,
           backend: str = "gpu", host_spans: dict[str, float] | None = None,
           steps: tuple[StepRecord, ...] = (), baseline: Estimate | None = None
           ) -> CompareResult:
    """make_compare's record with these estimates (the chosen setting its first, unless a
    baseline is given) and findings."""
    r = make_compare()
    loader = r.loader if baseline is not None else (r.loader[2],)
    return dataclasses.replace(
        r, env={"backend": backend, "cpu_count": 2}, findings=findings, steps=steps,
        loader=loader, host_spans=host_spans or {"data_wait": 0.0, "sync": real_ms / 1e3},
        estimates=Estimates(est(target_ms), est(loader_ms), est(real_ms), baseline))


def test_the_headspace_is_r_less_t_with_its_ends_from_their_intervals() -> None:
    h = compare_headspace(est(40.0, 1.0), est(50.0, 2.0))
    assert h is not None
    assert (round(h.value * 1e3, 6), round(h.low * 1e3, 6), round(h.high * 1e3, 6)) == \
        (10.0, 7.0, 13.0)
    overlapping = compare_headspace(est(40.0, 1.0), est(40.5, 1.0))
    assert overlapping is not None and overlapping.low == 0.0


def test_a_forced_sync_buys_at_most_r_less_the_slower_part_and_at_least_0() -> None:
    r = record(40.0, 30.0, 73.0, sync_finding("train.py:58", 42.0))
    g = compare_gains(r)
    (sync,) = [x for x in g.gains if x.kind == "sync"]
    assert sync.gain_s.low == 0.0  # overlap cannot be known from a host-only record
    assert abs(sync.predicted_step_s.value - 0.040) < 1e-9  # 73 less min(42, 73 - 40)
    assert abs(sync.gain_s.high - min(0.042, 0.0735 - 0.0395)) < 1e-9
    assert "at least 0: compare does not see how long the device stays busy" in sync.why
    assert "train.py:58" in sync.change and sync.how == "bound"
    assert g.notes == () or all("within" not in n for n in g.notes)


def test_on_the_cpu_backend_the_syncs_low_end_says_the_cores_are_shared() -> None:
    g = compare_gains(record(40.0, 30.0, 73.0, sync_finding("t.py:1", 42.0), backend="cpu"))
    assert "host and device share the cores" in g.gains[0].why


def test_a_sync_whose_wait_overlaps_a_slower_loader_buys_only_down_to_d() -> None:
    # the loader (60 ms) is slower than compute: once the sync is gone the step waits for it
    r = record(40.0, 60.0, 75.0, sync_finding("t.py:9", 35.0, "harmless-sync"))
    (sync,) = compare_gains(r).gains
    assert abs(sync.predicted_step_s.value - 0.060) < 1e-9


def test_a_compute_bound_run_buys_about_nothing_and_says_why_once() -> None:
    steps = tuple(StepRecord(i, 0.041, spans={"sync": 0.03}) for i in range(30))
    r = record(40.0, 5.0, 40.6, sync_finding("t.py:3", 30.0, "harmless-sync"), steps=steps,
               host_spans={"data_wait": 0.004, "sync": 0.03})
    g = compare_gains(r)
    assert all(x.gain_s.high <= NEAR_FLOOR_MARGIN * 0.040 for x in g.gains)
    assert all(x.predicted_step_s.value >= 0.040 - 1e-9 for x in g.gains)
    (note,) = [n for n in g.notes if "within" in n]
    assert note.startswith("R (40.6 ms) is within 10% of T (40.0 ms)")
    assert "no further change buys more than that margin (4.00 ms a step)" in note


def test_gains_are_ranked_by_their_high_end_and_small_ones_left_out() -> None:
    steps = tuple(StepRecord(i, 0.08, tags=("checkpoint",) if i % 10 == 5 else (),
                             spans={"checkpoint": 0.2} if i % 10 == 5 else {})
                  for i in range(41))
    r = record(40.0, 10.0, 80.0, sync_finding("a.py:1", 10.0), sync_finding("b.py:2", 30.0),
               sync_finding("c.py:3", 0.1), steps=steps,
               host_spans={"data_wait": 0.005, "sync": 0.04})
    g = compare_gains(r)
    highs = [x.gain_s.high for x in g.gains]
    assert highs == sorted(highs, reverse=True)
    assert [x.kind for x in g.gains] == ["sync", "host-work", "sync", "prefetch"]
    assert "b.py:2" in g.gains[0].change and "c.py:3" not in str(g.gains)
    checkpoint = g.gains[1]
    assert abs(checkpoint.gain_s.high - 4 * 0.2 / 40) < 1e-9  # amortized over 40 steps
    assert all(x.gain_s.high >= MATERIAL_GAIN_SHARE * 0.08 for x in g.gains)
    assert all(x.gain_s.low <= x.gain_s.high for x in g.gains)


def test_the_chosen_setting_is_measured_at_r_and_its_gain_is_the_model_s() -> None:
    r = record(40.0, 30.0, 41.0, baseline=est(120.0))
    (chosen,) = [x for x in compare_gains(r).gains if x.kind == "loader-setting"]
    assert chosen.how == "model" and chosen.measured_step_s == 0.041
    assert "compare ran R at the chosen setting only" in chosen.why
    assert chosen.gain_s.low > 0.07 and chosen.gain_s.high < 0.09  # about 120 less 41 ms
    from_file = dataclasses.replace(r, sources={**r.sources, "real": "run.json"})
    (chosen,) = [x for x in compare_gains(from_file).gains if x.kind == "loader-setting"]
    assert chosen.measured_step_s is None and "--real" in chosen.why


def test_r_trained_at_both_settings_makes_the_chosen_settings_gain_measured() -> None:
    r = record(40.0, 30.0, 41.0, baseline=est(120.0))
    # trained at the first setting, steps took 100 ms, not the 120 ms its D predicts
    both = dataclasses.replace(r, estimates=dataclasses.replace(
        r.estimates, real_baseline=est(100.0, half_ms=2.0)))
    (chosen,) = [x for x in compare_gains(both).gains if x.kind == "loader-setting"]
    assert chosen.how == "measured" and chosen.measured_step_s == 0.041
    # the two Rs' intervals: 98..102 less 40.5..41.5 ms
    assert abs(chosen.gain_s.low - 0.0565) < 1e-9 and abs(chosen.gain_s.high - 0.0615) < 1e-9
    assert "R measured at both: 100.0 ms at the first setting" in chosen.why
    assert "had predicted 123.0 ms" in chosen.why  # 120 ms times the interference 41 / 40
    # an R at the first setting too short for an interval leaves the gain modelled
    few = dataclasses.replace(r, estimates=dataclasses.replace(
        r.estimates, real_baseline=Estimate(0.1, 0.1, 0.1, 2)))
    (chosen,) = [x for x in compare_gains(few).gains if x.kind == "loader-setting"]
    assert chosen.how == "model"


def test_a_record_without_the_numbers_gives_no_gains_and_says_why() -> None:
    r = record(40.0, 30.0, 73.0, sync_finding("t.py:1", 42.0))
    few = dataclasses.replace(r, estimates=dataclasses.replace(
        r.estimates, real=Estimate(0.07, 0.06, 0.08, 2)))
    g = compare_gains(few)
    assert (g.headspace, g.gains) == (None, ())
    assert g.notes == ("no gains: T or R has too few samples to subtract (run more steps)",)
    # settings without the CPU the loader model is fitted to: no model gains, and why
    assert any(n.startswith("no loader-model gains") for n in compare_gains(r).notes)


def test_a_real_compare_record_gives_its_chosen_setting_and_no_fix_past_compute() -> None:
    r = store.load("tests/data/whatif/compare_calibrated_load40_cpu2.json")
    assert isinstance(r, CompareResult)
    g = compare_gains(r)
    assert [x.kind for x in g.gains] == ["loader-setting"]  # R is at T: nothing else pays
    assert g.headspace is not None and g.headspace.high == 0.0
    assert any("within 10% of T" in n for n in g.notes)


def test_the_new_fields_round_trip_and_an_older_file_reads_without_them() -> None:
    r = record(40.0, 30.0, 73.0, sync_finding("train.py:58", 42.0))
    g = compare_gains(r)
    r = dataclasses.replace(r, headspace_s=g.headspace, gains=g.gains, gains_notes=g.notes)
    data = json.loads(store.record_to_json(r))
    assert set(data["headspace_s"]) == {"value", "low", "high"}
    assert set(data["gains"][0]["gain_s"]) == {"low", "high"}
    assert data["gains"][0]["measured_step_s"] is None
    back = CompareResult.from_dict(data)
    assert back == r and isinstance(back.headspace_s, StepInterval)
    for key in ("headspace_s", "gains", "gains_notes"):
        del data[key]
    old = CompareResult.from_dict(data)
    assert (old.headspace_s, old.gains, old.gains_notes) == (None, (), ())


def test_the_compare_report_prints_the_headspace_and_the_gains_as_ranges() -> None:
    r = record(40.0, 30.0, 73.0, sync_finding("train.py:58", 42.0))
    g = compare_gains(r)
    text = format_compare(dataclasses.replace(r, headspace_s=g.headspace, gains=g.gains,
                                              gains_notes=g.notes))
    assert ("headspace (R less T: what any input, sync or host-work fix can buy at most): "
            "32.0 ms to 34.0 ms per step") in text
    row = next(line for line in text.splitlines() if line.startswith("1 ") and "sync" in line)
    assert "0.00 ms to 34.0 ms" in row and "bound" in row


def _chosen(r: CompareResult, workers: int, threads: int) -> CompareResult:
    chosen = dataclasses.replace(r.tuning.chosen, workers=workers, threads=threads)
    return dataclasses.replace(r, tuning=dataclasses.replace(r.tuning, chosen=chosen))


def test_a_training_thread_that_loads_expects_its_whole_wait_back_a_prefetch_half() -> None:
    # the loader keeps up on average (D 30 ms < T 40 ms), yet R's steps wait 20 ms each
    base = record(40.0, 30.0, 62.0, host_spans={"data_wait": 0.020, "sync": 0.040})
    inline = _chosen(base, 0, 0)
    (threads,) = [x for x in compare_gains(inline).gains if x.kind == "prefetch"]
    assert "read threads" in threads.change and "all of it" in threads.why
    assert abs(threads.predicted_step_s.value - 0.042) < 1e-9  # 62 less its 20 ms wait
    assert threads.gain_s.low == 0.0 and abs(threads.gain_s.high - 0.020) < 1e-9
    (deeper,) = [x for x in compare_gains(_chosen(base, 1, 1)).gains if x.kind == "prefetch"]
    assert "a larger prefetch" in deeper.change and "half" in deeper.why
    assert abs(deeper.predicted_step_s.value - 0.052) < 1e-9  # half the wait expected
    assert deeper.gain_s == threads.gain_s  # the same bounds: 0 to the whole wait
    # the wait beyond the headspace buys nothing more: R less T caps both ends
    capped = _chosen(record(40.0, 30.0, 50.0, host_spans={"data_wait": 0.020,
                                                         "sync": 0.040}), 0, 0)
    (g,) = [x for x in compare_gains(capped).gains if x.kind == "prefetch"]
    assert abs(g.predicted_step_s.value - 0.040) < 1e-9  # 50 less the 10 ms headspace
    assert abs(g.gain_s.high - 0.011) < 1e-9  # its high end: 50.5 less 39.5 ms
