"""Where a run's wall time went (``analysis.logs.wall_time``): the time its steps cover and the
time outside them by cause, checked on real logs against their own timestamps and on
hand-built intervals; the record field is read from older records as None."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from pipecheck.analysis.diff import diff_runs, summary_from_imported
from pipecheck.analysis.logs import wall_time
from pipecheck.analysis.logs.maxtext import activities
from pipecheck.logs.maxtext import import_log, parse_file
from pipecheck.records.base import to_dict
from pipecheck.records.diff import RunSummary
from pipecheck.records.imported import ImportedRun, LogEvent
from pipecheck.report.diff import format_diff, format_imported

REAL = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"
LINEN = REAL / "maxtext_v6e_linen.log"
CPU = REAL / "maxtext_cpu_profiler_async_ckpt_eval.log"


def _t(clock: str) -> float:
    """A time of day (``15:49:07.593057``) in seconds."""
    h, m, s = clock.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def _shares(o) -> dict[str, float]:
    return {s.cause: s.seconds for s in o.shares}


def test_a_real_runs_final_checkpoint_is_the_time_after_its_last_step():
    """TPU v6e, orbax async saves: after step 9 the run waits 15.3 s for the step-0 save,
    saves step 9 (0.78 s blocking) and waits 52.4 s for its commit."""
    w = import_log(LINEN).wall_time
    assert w is not None
    # from the first absl header (line 4) to the last (line 176, step 9's line)
    assert w.wall_s == pytest.approx(_t("15:51:45.168587") - _t("15:49:07.593057"), abs=1e-6)
    seconds = [15.237, 1.583, 0.041, 0.408, 0.235, 0.229, 0.460, 29.642, 0.234, 0.230]
    assert w.in_steps_s == pytest.approx(sum(seconds), abs=1e-6)
    before, after = w.outside
    # step 1 ends at step 0's line (line 128, the least delayed), so step 0 starts
    # 1.583 + 15.237 s before it and step 9 ends 31.479 s (steps 2-9) after it
    step1_end = _t("15:50:04.751501")
    assert (before.where, before.after_step) == ("before", None)
    assert before.seconds == pytest.approx(step1_end - 1.583 - 15.237 - _t("15:49:07.593057"),
                                           abs=1e-6)
    assert _shares(before) == {wall_time.START_UP: pytest.approx(before.seconds)}
    assert (after.where, after.after_step) == ("after", 9)
    assert after.seconds == pytest.approx(_t("15:51:45.168587") - step1_end - sum(seconds[2:]),
                                          abs=1e-6)
    got = _shares(after)
    # line 150: "Waiting for previous save to complete took 15.297731 seconds", written
    # 15.2977 s after line 141 starts waiting (its own timestamps)
    assert got[wall_time.WAIT_PREVIOUS] == pytest.approx(15.297731, abs=1e-6)
    assert got[wall_time.WAIT_PREVIOUS] == pytest.approx(
        _t("15:50:51.984874") - _t("15:50:36.687137"), abs=1e-5)
    # lines 151-164: "Saving checkpoint at step 9" .. "Started an asynchronous checkpoint
    # save for step 9"
    assert got[wall_time.SAVE_BLOCKING] == pytest.approx(
        _t("15:50:52.767003") - _t("15:50:51.986700"), abs=1e-6)
    # the step-9 save's commit, from its blocking part's end to "Background save thread
    # done" (line 169), is the largest part
    assert got[wall_time.COMMIT] > _t("15:51:45.164677") - _t("15:50:52.767003") > 52.39
    assert after.shares[0].cause == wall_time.COMMIT
    assert sum(got.values()) == pytest.approx(after.seconds, abs=1e-6)
    assert got[wall_time.NOT_NAMED] < 0.01
    assert w.outside_s == pytest.approx(before.seconds + after.seconds, abs=1e-6)


def test_a_cpu_runs_last_save_after_its_last_step():
    w = import_log(CPU).wall_time
    assert w is not None
    (before, after) = w.outside
    assert after.after_step == 29
    got = _shares(after)
    # lines 258 and 277: "Saving checkpoint at step 29" .. "Started an asynchronous ..."
    assert got[wall_time.SAVE_BLOCKING] == pytest.approx(
        _t("13:17:48.126718") - _t("13:17:48.047561"), abs=1e-6)
    # the log ends with step 29's line (13:17:48.263569), after the save's background
    # thread is done (13:17:48.262145)
    assert after.end_s - before.start_s == pytest.approx(
        _t("13:17:48.263569") - _t("13:17:04.144539"), abs=1e-6)


def _event(kind: str, line: int, at: float, **fields) -> LogEvent:
    return LogEvent(kind, line, kind, at_s=at, **fields)


def test_a_break_in_the_chain_of_steps_is_named_by_what_ran_in_it():
    """Steps 0-2, then a restore, then steps 10-11: the time between step 2's end and
    step 10's start is outside the steps; the restore's lines name most of it, the rest is
    steps 3-9, which the log does not show."""
    numbers = np.array([0, 1, 2, 10, 11])
    start = np.array([1.0, 2.0, 3.0, 20.0, 21.0])
    end = np.array([2.0, 3.0, 4.0, 21.0, 22.0])
    events = [_event("restore_start", 50, 6.0), _event("restore_end", 60, 18.0)]
    named = wall_time.named_stretches(events, [], activities(events))
    w = wall_time.wall_time(numbers, start, end, 0.0, 23.0, named)
    assert w is not None
    assert (w.wall_s, w.in_steps_s, w.outside_s) == (23.0, 5.0, 18.0)
    before, between, after = w.outside
    assert (before.start_s, before.end_s, _shares(before)) == (0.0, 1.0,
                                                               {wall_time.START_UP: 1.0})
    assert (between.where, between.after_step, between.start_s, between.end_s) == (
        "between", 2, 4.0, 20.0)
    assert _shares(between) == {wall_time.RESTORE: 12.0, wall_time.NOT_SHOWN: 4.0}
    assert [(s.cause, s.evidence) for s in between.shares][1:] == [
        (wall_time.NOT_SHOWN, "steps 3-9")]
    assert (after.after_step, after.seconds) == (11, 1.0)


def test_a_blocked_thread_names_time_before_an_async_save_in_flight():
    numbers, start, end = np.array([0]), np.array([0.0]), np.array([1.0])
    named = [(1.0, 9.0, wall_time.COMMIT, "save"),
             (2.0, 5.0, wall_time.WAIT_PREVIOUS, "wait")]
    w = wall_time.wall_time(numbers, start, end, 0.0, 10.0, named)
    assert w is not None
    (after,) = w.outside
    assert _shares(after) == {wall_time.COMMIT: 5.0, wall_time.WAIT_PREVIOUS: 3.0,
                              wall_time.NOT_NAMED: 1.0}


def test_short_breaks_count_but_are_not_listed():
    numbers = np.array([0, 1])
    start, end = np.array([0.0, 1.02]), np.array([1.0, 2.0])
    w = wall_time.wall_time(numbers, start, end, 0.0, 2.0, [])
    assert w is not None and w.outside == ()
    assert w.outside_s == pytest.approx(0.02)


def test_no_timestamps_no_wall_time():
    nan = np.array([np.nan])
    assert wall_time.wall_time(np.array([0]), nan, nan, None, None, []) is None
    assert import_log(REAL / "maxtext_gpu_llama2_nsys_a.log").wall_time is None


def test_records_keep_the_wall_time_and_older_records_read_without_it():
    run = import_log(LINEN)
    data = to_dict(run)
    again = ImportedRun.from_dict(data)
    assert again.wall_time == run.wall_time
    older = {k: v for k, v in data.items() if k != "wall_time"}
    assert ImportedRun.from_dict(older).wall_time is None
    summary = summary_from_imported(run)
    assert summary.wall_time == run.wall_time
    sdata = to_dict(summary)
    assert RunSummary.from_dict(sdata).wall_time == run.wall_time
    assert RunSummary.from_dict({k: v for k, v in sdata.items()
                                 if k != "wall_time"}).wall_time is None


def test_the_reports_carry_the_wall_time_line():
    run = import_log(LINEN)
    text = format_imported(run)
    assert "wall time 157.58 s by the log's timestamps: in steps 48.30 s (30.7%), outside " \
           "them 109.28 s" in text
    assert "  after the last step (9): 68.94 s (checkpoint: async save in flight 52.85 s, " \
           "checkpoint: waiting for the previous save 15.30 s, checkpoint: the save's " \
           "blocking part 780.3 ms" in text
    summary = summary_from_imported(run)
    diff = format_diff(diff_runs(summary, summary))
    assert "A: wall time 157.58 s" in diff and "B: wall time 157.58 s" in diff


@pytest.mark.parametrize("log", sorted(REAL.glob("*.log")), ids=lambda p: p.name)
def test_every_real_logs_account_adds_up(log: pathlib.Path):
    """Whatever the log: the steps and the time outside them make the wall time, and each
    stretch's shares make the stretch, within the stretches' rounding."""
    w = import_log(log).wall_time
    if w is None:  # only where no step line has a time
        assert not np.isfinite(parse_file(log).line_at).any()
        return
    assert w.in_steps_s <= w.wall_s + 1e-6
    listed = sum(o.seconds for o in w.outside)
    assert listed <= w.outside_s + 1e-5
    for o in w.outside:
        assert o.seconds >= wall_time.OUTSIDE_MIN_S
        assert sum(s.seconds for s in o.shares) == pytest.approx(o.seconds, abs=1e-5)
        assert w.start_s - 1e-6 <= o.start_s < o.end_s <= w.start_s + w.wall_s + 1e-6


def test_the_steps_an_excerpt_leaves_out_are_time_between_its_steps():
    """The xpk guide's log shows steps 1-5 and 95-99 under Cloud Logging timestamps: the
    time between step 5's end and step 95's start is steps 6-94, at the logged pace."""
    run = import_log(REAL / "maxtext_tpu_v5e_xpk_cloud_logging.log")
    w = run.wall_time
    assert w is not None
    between = next(o for o in w.outside if o.where == "between")
    assert between.after_step == 5
    (share,) = between.shares
    assert (share.cause, share.evidence) == (wall_time.NOT_SHOWN, "steps 6-94")
    # step 4 ends at the stamp above step 3's line (the least delayed), step 5 0.278 s
    # later; step 97 ends at the stamp above step 96's line, steps 95-97 take 0.844 s
    by_stamps = (_t("11:49:06.768") - 0.281 - 0.282 - 0.281) - (_t("11:48:40.589") + 0.278)
    assert between.seconds == pytest.approx(by_stamps, abs=1e-6)
    # 89 steps at the pace of the steps around them
    assert between.seconds == pytest.approx(89 * run.step_time.summary.median, rel=0.01)


def test_a_break_between_consecutive_steps_is_not_named_without_lines():
    numbers = np.array([0, 1])
    start, end = np.array([0.0, 3.0]), np.array([1.0, 4.0])
    w = wall_time.wall_time(numbers, start, end, 0.0, 4.0, [])
    assert w is not None
    (between,) = w.outside
    assert (between.after_step, _shares(between)) == (0, {wall_time.NOT_NAMED: 2.0})
