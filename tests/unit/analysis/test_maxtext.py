"""MaxText log import: parsing, steady state, anomaly causes (hand-written logs)."""

from __future__ import annotations

import pathlib

import pytest

from pipecheck.analysis import maxtext
from pipecheck.records import store
from pipecheck.records.imported import LogEvent, LogStep

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
LOG_A = DATA / "maxtext_a.log"


@pytest.fixture(scope="module")
def run_a() -> maxtext.ImportedRun:
    return maxtext.import_log(LOG_A)


def test_step_lines_are_parsed_with_their_metrics(run_a):
    assert [s.step for s in run_a.steps] == list(range(30))
    s = run_a.steps[1]
    assert (s.time_s, s.loss, s.tflops_per_s_per_device, s.tokens_per_s_per_device) == (
        0.512, 10.773, 41.191, 6021.484)
    assert s.metrics == {"total_weights": 32768.0, "learning_rate": 2.9e-05}
    assert s.line == 22


def test_header_lines_are_read(run_a):
    assert run_a.env == {"jax": "0.8.1", "jaxlib": "0.8.1", "backend": "PJRT C API"}
    assert run_a.params == pytest.approx(0.552e9)
    assert run_a.total_tflops_per_step == 21.09
    assert run_a.memory == maxtext.LogMemory(1.8, 0.6, 0.9, 0.61, 15.75)
    assert run_a.config == {"per_device_batch_size": 4, "max_target_length": 2048, "steps": 30,
                            "checkpoint_period": 10, "async_checkpointing": True}


def test_checkpoint_events_and_their_anchor_steps(run_a):
    got = [(e.kind, e.step, e.seconds, e.anchor_step) for e in run_a.events]
    assert got == [
        ("checkpoint_wait_step", 10, 0.31, 10),
        ("checkpoint_save", 10, None, 10),
        ("checkpoint_async_start", 10, None, 10),
        ("checkpoint_save", 20, None, 20),
        # names no step: anchored to the last step completed before it
        ("checkpoint_wait_previous", None, 9.815202, 20),
        ("checkpoint_async_start", 20, None, 20),
    ]


def test_steady_state_excludes_first_step_and_anomalies(run_a):
    d = run_a.step_time
    assert d.n == 25
    assert d.median_s == 0.512  # the headline: one 10 s step does not move it
    expected_steady = [s.time_s for s in run_a.steps if s.step not in (0, 11, 12, 21, 26)]
    assert list(d.samples_s) == expected_steady
    all_times = [s.time_s for s in run_a.steps]
    assert run_a.mean_all_s == pytest.approx(sum(all_times) / 30)
    assert run_a.mean_inflation == pytest.approx(
        (sum(all_times) / 30) / (sum(expected_steady) / 25) - 1)
    assert run_a.mean_inflation > 3  # the mean is more than 4x the typical step


def test_anomaly_causes(run_a):
    got = [(a.step, a.cause) for a in run_a.anomalies]
    assert got == [
        (0, "compilation"),
        (11, "checkpoint stall"),
        (12, "attribution shift"),
        (21, "checkpoint stall"),
        (26, "unexplained"),
    ]
    by_step = {a.step: a for a in run_a.anomalies}
    assert "Waiting for previous save to complete took 9.815202 seconds" in by_step[21].evidence
    assert "Waited 0.31 seconds for step 10" in by_step[11].evidence
    assert "after slow step 11" in by_step[12].evidence
    assert by_step[21].ratio == pytest.approx(10.347 / 0.512)
    assert {s.step: s.tags for s in run_a.steps if s.tags} == {
        0: ("compile",), 11: ("checkpoint",), 12: ("attribution_shift",),
        21: ("checkpoint",), 26: ("outlier",)}
    assert run_a.warnings == ("1 step(s) far from the steady state without a known cause: 26",)


def _steps(times):
    return [LogStep(step=i, time_s=t) for i, t in enumerate(times)]


STEADY = [0.50, 0.51, 0.49, 0.50, 0.52, 0.50, 0.51, 0.49]


def test_clean_run_has_only_the_compile_step():
    anomalies, med = maxtext.explain_anomalies(_steps([30.0] + STEADY), [])
    assert [(a.step, a.cause) for a in anomalies] == [(0, "compilation")]
    assert med == 0.50


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
    run = maxtext.import_lines(lines, "inline")
    assert [(s.step, s.time_s) for s in run.steps] == [(0, 20.0), (1, 0.5), (2, 0.5), (3, 0.5)]
    assert run.steps[1].metrics == {"total_weights": 32768.0, "moe_lb_loss": 0.01}
    assert run.total_tflops_per_step is None
    assert any("1 'completed step' line(s) repeat a step" in w for w in run.warnings)
    assert any("had no readable 'seconds:'" in w for w in run.warnings)


def test_per_train_step_total_tflops_on_a_later_line():
    lines = [HEADER + "Per train step:", "I0312 1:1:1.1 2 x.py:1] interleaved",
             " Total TFLOPs: 6.20 ", _step_line(0, 1.0)]
    assert maxtext.import_lines(lines, "inline").total_tflops_per_step == 6.20


def test_no_step_lines_is_a_clear_error(tmp_path):
    p = tmp_path / "train.log"
    p.write_text(HEADER + "number parameters: 0.552 billion\nhello\n")
    with pytest.raises(maxtext.LogFormatError, match="has no 'completed step: N, seconds"):
        maxtext.import_log(p)
    with pytest.raises(maxtext.LogFormatError, match="does not exist"):
        maxtext.import_log(tmp_path / "missing.log")
    b = tmp_path / "bin.log"
    b.write_bytes(b"\x00\x01completed step: 1, seconds: 1")
    with pytest.raises(maxtext.LogFormatError, match="binary file"):
        maxtext.import_log(b)


def test_imported_record_round_trips(run_a, tmp_path):
    out = tmp_path / "a.json"
    store.save(run_a, out)
    again = store.load(out, expect=maxtext.ImportedRun)
    assert again == run_a
    assert again.kind == "imported" and again.format_version == store.FORMAT_VERSION


def test_streamed_log_numbers_lines_as_the_whole_text_would(tmp_path):
    text = LOG_A.read_text()
    # blank lines, Windows line ends and a form feed inside a line
    odd = text.replace("\n", "\r\n", 5).replace("Config param steps", "\n\nConfig param steps")
    odd = odd.replace("Grain pool will", "Grain\x0cpool will")
    p = tmp_path / "odd.log"
    p.write_bytes(odd.encode())
    run = maxtext.import_log(p)
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
    maxtext.import_log(LOG_A, progress=p)
    assert calls == [("reading maxtext_a.log", LOG_A.stat().st_size, "B")]
    assert p.done == LOG_A.stat().st_size  # an ASCII log: one character, one byte


def test_steps_are_stored_by_column(run_a):
    from pipecheck.records.steps import StepTable

    assert isinstance(run_a.steps, StepTable)
    assert run_a.steps.column("time_s")[1] == 0.512
    assert run_a.steps.tag_mask("compile").tolist() == [True] + [False] * 29
