"""MaxText log import: parsing, timestamps, steady state, anomaly causes.

The fixtures are written by tests/data/make_maxtext_logs.py with the structure of real logs."""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest

from pipecheck.analysis.logs import maxtext
from pipecheck.errors import LogFormatError
from pipecheck.logs import maxtext as reader
from pipecheck.records import store
from pipecheck.records.imported import ImportedRun, LogEvent, LogMemory, LogStep
from pipecheck.records.steps import StepTable
from tests.maxtext_log import write_log

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
LOG_A = DATA / "maxtext_a.log"
LOG_B = DATA / "maxtext_b.log"


@pytest.fixture(scope="module")
def run_a() -> ImportedRun:
    return reader.import_log(LOG_A)


def test_step_lines_are_parsed_with_their_metrics(run_a):
    assert [s.step for s in run_a.steps] == list(range(60))
    s = run_a.steps[2]
    assert (s.time_s, s.loss, s.tflops_per_s_per_device, s.tokens_per_s_per_device) == (
        0.24, 10.773, 87.969, 34169.962)
    assert s.metrics == {"total_weights": 32768.0}
    assert s.line == 31


def test_header_lines_are_read(run_a):
    assert run_a.env == {"jax": "0.8.1", "jaxlib": "0.8.1", "backend": "PJRT C API"}
    assert run_a.params == pytest.approx(0.552e9)
    assert run_a.total_tflops_per_step == 21.09
    assert run_a.memory == LogMemory(1.8, 0.6, 0.9, 0.61, 31.25)
    assert run_a.config == {"per_device_batch_size": 4, "max_target_length": 2048, "steps": 60,
                            "checkpoint_period": 20, "async_checkpointing": True}


def test_checkpoint_events_carry_their_times(run_a):
    got = [(e.kind, e.line, e.step, e.seconds, e.at_s, e.clock) for e in run_a.events[:10]]
    assert got == [
        ("checkpoint_wait_step", 19, 0, 0.31, 47.04, "10:15:14.158203"),
        # orbax's line when the save's blocking part ends (the composite handler's line
        # after it is not read: it spans the same time)
        ("async_save_blocking", 20, None, 9.840213, 56.880213, "10:15:23.998416"),
        ("async_save_started", 22, None, None, 56.884213, "10:15:24.002416"),
        ("checkpoint_async_start", 23, 0, None, 56.885213, "10:15:24.003416"),
        ("checkpoint_wait_step", 51, 20, 0.31, 62.011779, "10:15:29.129982"),
        # the background thread of the step-0 save, 31 lines and 20 steps later
        ("async_save_done", 53, None, 18.7, 75.584213, "10:15:42.702416"),
        ("checkpoint_wait_previous", 54, None, 13.572434, 75.584213, "10:15:42.702416"),
        ("async_save_blocking", 55, None, 0.412731, 75.996944, "10:15:43.115147"),
        ("async_save_started", 57, None, None, 76.000944, "10:15:43.119147"),
        ("checkpoint_async_start", 58, 20, None, 76.001944, "10:15:43.120147"),
    ]


def _intervals(path):
    p = reader.parse_lines(path.read_text().splitlines())
    start, end = maxtext.step_intervals(p.steps.column("step"), p.steps.column("time_s"),
                                        p.line_at)
    return p, start, end


def test_step_intervals_follow_the_one_step_logging_lag():
    p, start, end = _intervals(LOG_A)
    # the generator's clock: step k ends at T_k = T_0 + the step times after it; a step's
    # line is written after the next step was dispatched (one step late)
    t0 = 5.0 + 41.73  # the generator starts step 0 at 5 s; step 0 takes 41.73 s
    times = p.steps.column("time_s")
    expected = t0 + np.cumsum(np.concatenate([[0.0], times[1:]]))
    assert np.max(np.abs(end - expected)) < 0.005
    assert np.allclose(start, end - times)
    # the save-0 wait and line proximity disagree: step 20's line is written 14 s after step
    # 20 ended (its save waited for the previous one), yet step 20 ends before the wait
    wait = next(e for e in p.events if e.kind == "checkpoint_wait_previous")
    assert end[20] < wait.at_s - wait.seconds < end[21]


def test_step_intervals_are_anchored_by_the_least_delayed_line():
    numbers, seconds = np.arange(6), np.ones(6)
    # true ends 1..6; the line of step k-1 is written at end_k + delay (a save at step 3)
    line_at = np.array([2.0, 3.0, 9.0, 5.0, 6.0, np.nan])
    start, end = maxtext.step_intervals(numbers, seconds, line_at, window=2)
    assert end.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert start.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    # no stamped line: no interval
    start, end = maxtext.step_intervals(numbers, seconds, np.full(6, np.nan))
    assert np.isnan(end).all()


def test_anomalies_are_matched_to_saves_by_timestamp_overlap(run_a):
    got = [(a.step, a.cause) for a in run_a.anomalies]
    assert got == [(0, "compilation"), (1, "checkpoint stall"), (21, "checkpoint stall"),
                   (41, "checkpoint stall"), (55, "unexplained"), (56, "attribution shift")]
    by = {a.step: a for a in run_a.anomalies}
    # step 1 (10.4 s) is mostly the step-0 save's blocking part (9.84 s, ending at its line's
    # time), named first; then the wait for step 0 and the background save that began
    # before step 1 ended, most overlap first
    assert by[1].evidence == (
        "checkpoint save of step 0 blocked training 9.84 s copying the state off the device "
        "(line 20 (10:15:23.998416): [process=0][thread=MainThread] Initiated Pytree "
        "async_save. Time taken: 9.840213s); line 19 (10:15:14.158203): Waited 0.31 seconds "
        "for step 0 to finish before starting checkpointing; async checkpoint save of step 0 "
        "in flight (18.7 s; line 22 (10:15:24.002416), line 23 (10:15:24.003416), line 53 "
        "(10:15:42.702416))")
    # step 21 lies inside that background save; the step-20 save waits for it
    assert by[21].evidence.startswith(
        "async checkpoint save of step 0 in flight (18.7 s; line 22 (10:15:24.002416), "
        "line 23 (10:15:24.003416), line 53 (10:15:42.702416)); line 54 (10:15:42.702416): "
        "Waiting for previous save to complete took 13.572434 seconds; checkpoint save of "
        "step 20 blocked training 0.41 s")
    assert by[41].evidence.startswith("checkpoint save of step 40 blocked training 0.41 s")
    assert by[1].ratio == pytest.approx(10.442 / 0.238)
    # step 55 stalled while no save ran; step 56 was then charged less than its share
    assert by[55].evidence == ("slow, and no checkpoint save was in flight or blocking during "
                               "it by the log's timestamps")
    assert by[56].evidence.startswith("fast right after slow step 55:")
    assert {s.step: s.tags for s in run_a.steps if s.tags} == {
        0: ("compile",), 1: ("checkpoint",), 21: ("checkpoint",), 41: ("checkpoint",),
        55: ("outlier",), 56: ("attribution_shift",)}
    assert run_a.warnings == ("1 step(s) far from the steady state without a known cause: 55",)


def test_steady_state_excludes_first_step_and_anomalies(run_a):
    d = run_a.step_time
    assert d.summary.n == 54
    assert d.summary.median == 0.238  # the headline: a 10.4 s step does not move it
    expected_steady = [s.time_s for s in run_a.steps if s.step not in (0, 1, 21, 41, 55, 56)]
    assert list(d.samples_s) == expected_steady
    assert min(expected_steady) > 0.2 and max(expected_steady) < 0.25
    all_times = [s.time_s for s in run_a.steps]
    assert run_a.mean_all_s == pytest.approx(sum(all_times) / 60)
    assert run_a.mean_inflation == pytest.approx(
        (sum(all_times) / 60) / (sum(expected_steady) / 54) - 1)


def test_bare_step_lines_take_the_time_of_the_next_header():
    run = reader.import_log(LOG_B)
    assert [s.step for s in run.steps] == list(range(60))
    assert [(a.step, a.cause) for a in run.anomalies] == [
        (0, "compilation"), (1, "checkpoint stall"), (21, "checkpoint stall"),
        (41, "checkpoint stall")]
    # each save's blocking part lands in the step after it, named first (the most overlap),
    # with its own save in flight
    for a, step in zip(run.anomalies[1:], (0, 20, 40), strict=True):
        assert a.evidence.startswith(f"checkpoint save of step {step} blocked training 0.41 s")
        assert f"async checkpoint save of step {step} in flight" in a.evidence
    assert "Waited 0.31 seconds for step 20" in run.anomalies[2].evidence
    # a bare line is written by the next header's time: the intervals are still close
    p, _, end = _intervals(LOG_B)
    times = p.steps.column("time_s")
    expected = 5.0 + 42.118 + np.cumsum(np.concatenate([[0.0], times[1:]]))
    assert np.max(np.abs(end - expected)) < 0.05


HEAD_T = "I1122 10:{m:02d}:{s:09.6f} 140711123912512 metric_logger.py:181] "
ASYNC_T = "I1122 10:{m:02d}:{s:09.6f} 140698457904896 async_checkpointer.py:{n}] "


def _at(t: float, head: str = HEAD_T, n: int = 77) -> str:
    return head.format(m=int(t // 60), s=t % 60, n=n)


def test_an_event_next_to_a_step_line_is_not_its_cause_unless_their_times_overlap():
    """Step 12 is slow; the save lines sit right under its line, but by the clock the save
    ran later (during steps 20-22): line proximity would blame it, timestamps do not."""
    lines, t = [], 0.0
    times = [30.0] + [0.5] * 11 + [3.0] + [0.5] * 17
    for k, sec in enumerate(times):
        t += sec
        if k > 0:  # one-step lag
            lines.append(_at(t) + f"completed step: {k - 1}, seconds: {times[k - 1]:.3f}, "
                         "loss: 2.0")
        if k == 13:
            lines.append(_at(t) + "Started an asynchronous checkpoint save for step 12")
    save = (sum(times[:20]) + 0.01, sum(times[:23]))
    lines.append(_at(save[0], ASYNC_T, 77) + "[process=0][thread=async_save] Background save "
                 "thread started. Deadline for this save operation is 2025-11-22 11:00:00")
    lines.append(_at(save[1], ASYNC_T, 169) + "[process=0][thread=async_save] Background save "
                 f"thread done. Time taken: {save[1] - save[0]:f}s.")
    lines.sort(key=lambda x: x[7:22])
    run = reader.import_lines(lines, "inline")
    assert [(a.step, a.cause) for a in run.anomalies] == [(0, "compilation"),
                                                          (12, "unexplained")]


def test_a_save_never_seen_to_finish_is_in_flight_to_the_end():
    events = [LogEvent("async_save_started", 3, "x] Background save thread started",
                               at_s=10.0, clock="10:00:10.000000")]
    (op,) = maxtext.background(events)
    assert (op.start, op.end, op.kind) == (10.0, float("inf"), "async_save")
    assert op.evidence == ("async checkpoint save in flight (not seen to finish; "
                           "line 3 (10:00:10.000000))")


def _steps(times):
    return StepTable.from_rows(LogStep, [LogStep(step=i, time_s=t)
                                         for i, t in enumerate(times)])


STEADY = [0.50, 0.51, 0.49, 0.50, 0.52, 0.50, 0.51, 0.49]


def test_clean_run_has_only_the_compile_step():
    anomalies, med = maxtext.explain_anomalies(_steps([30.0] + STEADY), [])
    assert [(a.step, a.cause) for a in anomalies] == [(0, "compilation")]
    assert med == 0.50


def test_a_first_step_faster_than_a_step_is_start_up_not_a_compile():
    # compiled before the loop: the first step logged only dispatched (MaxText's
    # getting-started page logs step 0 at 0.12x the steady median)
    for first, cause in [(0.06, "start-up"), (0.49, "start-up"), (0.51, "compilation"),
                         (30.0, "compilation")]:
        anomalies, med = maxtext.explain_anomalies(_steps([first] + STEADY), [])
        assert [(a.step, a.cause) for a in anomalies] == [(0, cause)], first
        assert med == 0.50
    anomalies, _ = maxtext.explain_anomalies(_steps([0.06] + STEADY), [])
    assert "0.12x the steady-state median" in anomalies[0].evidence
    assert maxtext.CAUSE_TAGS["start-up"] == "warmup"


def test_a_log_without_its_start_claims_the_first_step_only_where_its_logger_starts():
    # MaxText's metric logger (one step late) counts from 0: a log without start-up lines
    # whose first step is 1 left step 0 out (the real XPK guide's and PR 4847's excerpts);
    # Tunix's trainers (at once) count from 1, so there step 1 is the compile step
    def steps_from_1(times):
        return StepTable.from_rows(LogStep, [LogStep(step=i + 1, time_s=t)
                                             for i, t in enumerate(times)])

    for lag, cause in [(0, "compilation"), (1, "unexplained")]:
        found, _ = maxtext.explain_anomalies(steps_from_1([8.7] + STEADY), [],
                                             start_seen=False, lag=lag)
        assert [(a.step, a.cause) for a in found] == [(1, cause)], lag
    found, _ = maxtext.explain_anomalies(steps_from_1([8.7] + STEADY), [], start_seen=False,
                                         lag=1)
    assert found[0].evidence.endswith("the log starts at it, past the run's first step: "
                                      "what ran before it is not in the log")
    # a fast first step of such an excerpt: its work went to the step the log left out
    found, _ = maxtext.explain_anomalies(steps_from_1([0.03] + STEADY), [],
                                         start_seen=False, lag=1)
    assert [(a.step, a.cause, a.evidence) for a in found] == [
        (1, "unexplained", "implausibly fast, and the step before it is not in the log")]
    # the start-up lines seen, or a first step of 0, still claim it whatever the lag
    for lag in (0, 1):
        found, _ = maxtext.explain_anomalies(steps_from_1([8.7] + STEADY), [], lag=lag)
        assert [(a.step, a.cause) for a in found] == [(1, "compilation")]
        found, _ = maxtext.explain_anomalies(_steps([8.7] + STEADY), [], start_seen=False,
                                             lag=lag)
        assert [(a.step, a.cause) for a in found] == [(0, "compilation")]


def test_slow_step_outside_the_checkpoint_window_is_unexplained():
    times = [30.0] + STEADY[:4] + [3.0] + STEADY[4:]
    save = LogEvent("checkpoint_save", 1, "Saving checkpoint at step 1", step=1, anchor_step=1)
    anomalies, _ = maxtext.explain_anomalies(_steps(times), [save])
    assert [(a.step, a.cause) for a in anomalies] == [(0, "compilation"), (5, "unexplained")]
    # the same slow step right after a save is a checkpoint stall
    save4 = LogEvent("checkpoint_save", 1, "Saving checkpoint at step 4", step=4, anchor_step=4)
    anomalies, _ = maxtext.explain_anomalies(_steps(times), [save4])
    assert [(a.step, a.cause) for a in anomalies] == [(0, "compilation"), (5, "checkpoint stall")]


def test_fast_step_is_attribution_shift_only_after_a_slow_one():
    after_slow = [30.0] + STEADY[:3] + [2.0, 0.05] + STEADY[3:]
    anomalies, _ = maxtext.explain_anomalies(_steps(after_slow), [])
    assert [(a.step, a.cause) for a in anomalies] == [
        (0, "compilation"), (4, "unexplained"), (5, "attribution shift")]
    alone = [30.0] + STEADY[:3] + [0.05] + STEADY[3:]
    anomalies, _ = maxtext.explain_anomalies(_steps(alone), [])
    assert [(a.step, a.cause) for a in anomalies] == [(0, "compilation"), (4, "unexplained")]
    # right after the compile step, a fast step is an attribution shift too
    first = [30.0, 0.05] + STEADY
    anomalies, _ = maxtext.explain_anomalies(_steps(first), [])
    assert [(a.step, a.cause) for a in anomalies] == [
        (0, "compilation"), (1, "attribution shift")]


HEADER = "I0312 09:14:27.118203 140233681626944 train.py:196] "


def _step_line(i, seconds, extra=""):
    return (f"{HEADER}completed step: {i}, seconds: {seconds}, TFLOP/s/device: 41.20, "
            f"Tokens/s/device: 6021.3, total_weights: 32768, loss: 7.911{extra}")


def test_interleaved_and_repeated_lines():
    lines = [
        "some unrelated preamble",
        _step_line(0, 20.0),
        "I0312 09:14:28.000000 140231002330816 grain_pool.py:508] Grain worker 1 started",
        _step_line(1, 0.5, ", moe_lb_loss: 0.01, more: text"),
        "[process=1] " + _step_line(1, 0.7),  # another process logs the same step
        "W0312 09:14:29.000000 1 other.py:1] completed step: 2, seconds: oops",
        _step_line(3, 0.5),
        _step_line(2, 0.5),  # out of order
        "I0312 09:14:27.118203 1 train.py:1] Total TFLOPs: 99.0",  # no 'Per train step:'
    ]
    run = reader.import_lines(lines, "inline")
    assert [(s.step, s.time_s) for s in run.steps] == [(0, 20.0), (1, 0.5), (2, 0.5), (3, 0.5)]
    assert run.steps[1].metrics == {"total_weights": 32768.0, "moe_lb_loss": 0.01}
    assert run.total_tflops_per_step is None
    assert any("1 'completed step' line(s) repeat a step" in w for w in run.warnings)
    assert any("had no readable 'seconds:'" in w for w in run.warnings)


def test_per_train_step_total_tflops_on_a_later_line():
    lines = [HEADER + "Per train step:", "I0312 1:1:1.1 2 x.py:1] interleaved",
             " Total TFLOPs: 6.20 ", _step_line(0, 1.0)]
    assert reader.import_lines(lines, "inline").total_tflops_per_step == 6.20


def test_per_train_step_total_tflops_on_the_older_single_line():
    # MaxText before mid-2024 (the real GPU logs of March 2024): one line, no colon
    lines = ["# Per train step, total TFLOPs will be 137.33, split as 98.65% learnable "
             "weight flops and 1.35% attention flops", _step_line(0, 1.0)]
    assert reader.import_lines(lines, "inline").total_tflops_per_step == 137.33


def test_no_step_lines_is_a_clear_error(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(HEADER + "number parameters: 0.552 billion\nhello\n")
    with pytest.raises(LogFormatError, match="has no 'completed step: N, seconds"):
        reader.import_log(p)
    with pytest.raises(LogFormatError, match="does not exist"):
        reader.import_log(tmp_path / "missing.log")
    b = tmp_path / "bin.log"
    b.write_bytes(b"\x00\x01completed step: 1, seconds: 1")
    with pytest.raises(LogFormatError, match="binary file"):
        reader.import_log(b)


def test_imported_record_round_trips(run_a, tmp_path):
    out = tmp_path / "a.json"
    store.save(run_a, out)
    again = store.load(out, expect=ImportedRun)
    assert again == run_a
    assert again.kind == "imported" and again.format_version == store.FORMAT_VERSION


def test_streamed_log_numbers_lines_as_the_whole_text_would(tmp_path):
    text = LOG_A.read_text()
    # blank lines, Windows line ends and a form feed inside a line
    odd = text.replace("\n", "\r\n", 5).replace("Config param steps", "\n\nConfig param steps")
    odd = odd.replace("Grain pool will", "Grain\x0cpool will")
    p = tmp_path / "odd.log"
    p.write_bytes(odd.encode())
    run = reader.import_log(p)
    lines = odd.splitlines()
    for s in run.steps:
        assert f"completed step: {s.step}," in lines[s.line - 1]
    for e in run.events:
        assert e.text in lines[e.line - 1]


def test_import_reports_progress_over_the_files_bytes():
    from pipecheck.progress import Progress, Task

    calls = []

    class Recording(Progress):
        def task(self, description, total, unit=""):
            calls.append((description, total, unit))
            outer = self
            outer.done = 0

            class T(Task):
                def advance(self, n=1):
                    outer.done += n

            return T()

    p = Recording()
    reader.import_log(LOG_A, progress=p)
    assert calls == [("reading maxtext_a.log", LOG_A.stat().st_size, "B")]
    assert p.done == LOG_A.stat().st_size  # an ASCII log: one character, one byte


def test_steps_are_stored_by_column(run_a):
    from pipecheck.records.steps import StepTable

    assert isinstance(run_a.steps, StepTable)
    assert run_a.steps.column("time_s")[2] == 0.24
    assert run_a.steps.tag_mask("compile").tolist() == [True] + [False] * 59


def _scan_evidence(run, ops, start, end):
    """Every step's evidence as the scan finds it (``checkpoint_evidence`` over all ops)."""
    return [maxtext.checkpoint_evidence((float(s), float(e)), ops) if np.isfinite(e) else []
            for s, e in zip(start, end, strict=True)]


@pytest.mark.parametrize("source", ["generated", "a", "b"])
def test_lookup_finds_what_the_scan_finds_for_every_step(source, tmp_path):
    """The lookup by step gives each step the scan's evidence, in the scan's order, on logs
    with real structure: absl headers with thread ids, the async save thread's lines
    interleaved with the training thread's, the one-step logging lag, bare step lines (B),
    and (generated) async saves that span ~100 steps and collide, so a save waits for the
    previous one."""
    if source == "generated":
        path = tmp_path / "g.log"
        write_log(path, 3000, seed=5, step_s=0.5, checkpoint_every=100, stall_s=2.0,
                  save_s=60.0)
    else:
        path = LOG_A if source == "a" else LOG_B
    with open(path) as f:
        p = reader.parse_lines(f)
    start, end = maxtext.step_intervals(p.steps.column("step"), p.steps.column("time_s"),
                                        p.line_at)
    ops = maxtext.background(p.events)
    lookup = maxtext.BackgroundLookup(ops, start, end)
    found = [lookup.evidence(i) for i in range(len(p.steps))]
    assert found == _scan_evidence(p, ops, start, end)
    saves = [b for b in ops if b.kind == "async_save"]
    if source == "generated":  # the structure the comparison is meant to cover
        assert len(saves) == 29 and sum(b.kind == "checkpoint_wait_previous" for b in ops) > 20
        spans = [int(((start < b.end) & (end > b.start)).sum()) for b in saves]
        assert min(spans) > 90
        assert sum(bool(x) for x in found) > 0.9 * len(found)  # most steps have evidence


def test_every_stall_of_a_generated_log_is_a_checkpoint_stall(tmp_path):
    """The generated logs the long-run benchmark reads carry orbax's async-save lines, so
    every checkpoint stall, the first one too, is explained from the log."""
    path = tmp_path / "g.log"
    write_log(path, 5000, seed=1, step_s=0.512)
    run = reader.import_log(path)
    assert [(a.step, a.cause) for a in run.anomalies] == [
        (0, "compilation"), *((k + 1, "checkpoint stall") for k in range(1000, 5000, 1000))]
    first = run.anomalies[1].evidence
    # the blocking copy (stall_s ~9.8 s) is most of the stall: named first, with the
    # seconds of the line it cites
    m = re.match(r"checkpoint save of step 1000 blocked training (\d+\.\d\d) s copying the "
                 r"state off the device \(line (\d+) ", first)
    assert m, first
    (copy,) = [e for e in run.events if e.line == int(m[2])]
    assert copy.kind == "async_save_blocking" and f"{copy.seconds:.2f}" == m[1]
    assert 9.8 * 0.9 <= copy.seconds <= 9.8 * 1.1
    assert "Waited 0.31 seconds for step 1000 to finish" in first
    assert "async checkpoint save of step 1000 in flight (30.0 s; line " in first
    assert not run.warnings


def test_a_save_done_line_without_its_time_ends_the_save_begun_on_its_thread():
    """Older orbax writes ``Background save thread done.`` with no time taken: the save ran
    from its thread's start line to that line, not to the end of the log."""
    lines, t = [], 0.0
    times = [30.0] + [0.5] * 9 + [3.0] + [0.5] * 9 + [3.0] + [0.5] * 9
    for k, sec in enumerate(times):
        t += sec
        if k > 0:  # one-step lag
            lines.append(_at(t) + f"completed step: {k - 1}, seconds: {times[k - 1]:.3f}, "
                         "loss: 2.0")
    save = (sum(times[:10]) + 0.01, sum(times[:12]))  # over step 10 (slow), not step 20
    lines.append(_at(save[0], ASYNC_T, 77) + "[process=0][thread=async_save] Background save "
                 "thread started.")
    lines.append(_at(save[1], ASYNC_T, 143) + "[process=0][thread=async_save] Background save "
                 "thread done.")
    lines.sort(key=lambda x: x[7:22])
    run = reader.import_lines(lines, "inline")
    assert [(a.step, a.cause) for a in run.anomalies] == [
        (0, "compilation"), (10, "checkpoint stall"), (20, "unexplained")]
    assert "async checkpoint save in flight (3.5 s;" in run.anomalies[1].evidence
    (op,) = maxtext.background(run.events)
    first_line = sum(times[:2])  # the log's times count from its first header
    assert (op.start, op.end) == pytest.approx((save[0] - first_line, save[1] - first_line))


def _without_blocking_lines(path, tmp_path):
    """The log as orbax before 0.11.14 writes it: no ``Initiated ... async_save`` lines."""
    lines = [x for x in path.read_text().splitlines(keepends=True)
             if "Initiated Pytree async_save" not in x
             and "Initiated CompositeCheckpointHandler" not in x]
    out = tmp_path / path.name
    out.write_text("".join(lines))
    return out


def test_a_saves_blocking_part_ends_at_its_line_and_is_named_with_its_seconds():
    """Orbax writes ``Initiated Pytree async_save. Time taken: Xs`` when the blocking part
    ends: it blocked the training thread the X seconds before the line's time."""
    lines = [
        _at(100.0) + "Waited 0.31 seconds for step 20 to finish before starting checkpointing.",
        _at(109.84, HEAD_T.replace("metric_logger.py:181", "base_pytree_checkpoint_handler."
                                   "py:758")) +
        "[process=0][thread=MainThread] Initiated Pytree async_save. Time taken: 9.840213s "
        "(batch_requests_ready=0.021345s, total_serialization_initiated=9.815766s, "
        "others=0.003102s)",
        _at(109.845) + "Started an asynchronous checkpoint save for step 20",
    ]
    p = reader.parse_lines(lines)
    copy = p.events[1]
    assert (copy.kind, copy.seconds, copy.at_s, copy.line) == (
        "async_save_blocking", 9.840213, 9.84, 2)
    ops = maxtext.background(p.events)
    blocking = [b for b in ops if b.kind == "async_save_blocking"]
    assert [(b.start, b.end, b.blocking) for b in blocking] == [
        (pytest.approx(9.84 - 9.840213), 9.84, True)]
    assert blocking[0].evidence == (
        "checkpoint save of step 20 blocked training 9.84 s copying the state off the device "
        "(line 2 (10:01:49.840000): [process=0][thread=MainThread] Initiated Pytree "
        "async_save. Time taken: 9.840213s)")
    # a step over the copy's last second gets it first: it overlaps most
    found = maxtext.checkpoint_evidence((-1.0, 9.9), ops)
    assert found[0] == blocking[0].evidence and "Waited 0.31 seconds" in found[1]


@pytest.mark.parametrize("path", [LOG_A, LOG_B], ids=["a", "b"])
def test_without_the_blocking_line_older_orbax_logs_still_explain_the_stalls(path, tmp_path):
    """Orbax before 0.11.14 writes no ``Initiated Pytree async_save`` line: the same steps
    are checkpoint stalls, from the waits and the saves in flight."""
    new = reader.import_log(path)
    old = reader.import_log(_without_blocking_lines(path, tmp_path))
    assert not any(e.kind == "async_save_blocking" for e in old.events)
    assert [(a.step, a.cause) for a in old.anomalies] == [(a.step, a.cause)
                                                          for a in new.anomalies]
    assert old.step_time.summary == new.step_time.summary
    stalls = [a for a in old.anomalies if a.cause == "checkpoint stall"]
    assert stalls and all("blocked training" not in a.evidence for a in stalls)
    assert all("async checkpoint save of step" in a.evidence for a in stalls)


def test_sliding_min_equals_the_window_view_minimum():
    from pipecheck.analysis.logs.maxtext import sliding_min

    rng = np.random.default_rng(0)
    for n in (1, 5, 128, 129, 130, 1000, 20_001):
        for width in (1, 2, 7, 129):
            x = rng.normal(size=n)
            x[rng.random(n) < 0.2] = np.inf  # steps without a stamped line
            got = sliding_min(x, width)
            if n < width:
                assert got.size == 0
                continue
            assert np.array_equal(got, np.lib.stride_tricks.sliding_window_view(x, width)
                                  .min(axis=1)), (n, width)


def _searched_step_intervals(numbers, seconds, line_at, lag, window=64):
    """``step_intervals`` by another road: each step's row found by search, each chain of
    consecutive steps (a missing step breaks it) on its own, its window's minimum from a
    sliding-window view."""
    n = len(numbers)
    cum = np.cumsum(seconds)
    row = np.minimum(np.searchsorted(numbers, numbers - lag), n - 1)
    has = numbers[row] == numbers - lag
    stamp = np.where(has & np.isfinite(line_at[row]), line_at[row], math.inf)
    offset = stamp - cum
    best = np.empty(n)
    cuts = [0, *(np.flatnonzero(np.diff(numbers) != 1) + 1).tolist(), n]
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        padded = np.concatenate([np.full(window, math.inf), offset[lo:hi],
                                 np.full(window, math.inf)])
        best[lo:hi] = np.lib.stride_tricks.sliding_window_view(
            padded, 2 * window + 1).min(axis=1)
    end = np.where(np.isfinite(best), np.round(cum + best, 6), math.nan)
    return np.round(end - seconds, 6), end


def test_step_intervals_equal_the_searched_ones():
    from pipecheck.analysis.logs import maxtext as mt

    rng = np.random.default_rng(3)
    n = 3000
    seconds = np.round(rng.gamma(20, 0.0256, n), 3)
    line_at = np.cumsum(seconds) + 100.0 + rng.random(n) * 0.01
    line_at[rng.random(n) < 0.3] = np.nan  # lines without a header
    gapped = np.arange(n) + 5
    gapped[n // 2:] += 3  # steps missing from the log: the rows are searched
    gappy = np.arange(n) * 2  # every other step missing: a chain a step, narrower windows
    for numbers in (np.arange(n), np.arange(n) + 7, gapped, gappy):
        for lag in (0, 1):
            got = mt.step_intervals(numbers, seconds, line_at, lag=lag)
            want = _searched_step_intervals(numbers, seconds, line_at, lag)
            for a, b in zip(got, want, strict=True):
                assert np.array_equal(a, b, equal_nan=True), (numbers[0], lag)
