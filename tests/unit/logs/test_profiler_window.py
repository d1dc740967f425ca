"""A profiler window charged to the step that pays for it, on a real MaxText run (MaxText
0.2.5, orbax 0.12.8; tests/data/real/README.md): the XLA profiler's own lines
(``profiler_session.cc``, ``save_profile.cc``, on the profiler's thread) stand several
lines above the step lines of the steps they ran in, which the metric logger writes after
the profiler stopped; by their timestamps the window is step 15's. An async save's
``Finished saving checkpoint (finalized tmp dir)``, which orbax 0.12.8 writes on its
background thread, is no synchronous save."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from pipecheck.analysis.logs import maxtext
from pipecheck.logs.maxtext import import_log, parse_file

REAL = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"
CPU = REAL / "maxtext_cpu_profiler_async_ckpt_eval.log"
DPO = REAL / "maxtext_tpu_dpo_qwen3.log"
GEMMA4 = REAL / "maxtext_tpu_gemma4_profiler_pr4847.log"


def _seconds(clock: str, origin: str = "13:17:04.144539") -> float:
    """Seconds from the log's first header to ``clock`` (the same day)."""
    def secs(c: str) -> float:
        h, m, s = c.split(":")
        return int(h) * 3600 + int(m) * 60 + float(s)
    return round(secs(clock) - secs(origin), 6)


def test_the_profiler_window_is_read_from_the_sessions_own_lines():
    p = parse_file(CPU)
    (window,) = [a for a in maxtext.activities(p.events) if a.family == "profiler"]
    assert (window.first.line, window.first.text) == (113, "Profiler session initializing")
    assert (window.last.line, window.last.text) == (179, "Dumped gzipped tool data")
    kinds = [(e.line, e.kind) for e in p.events if e.kind.startswith("profiler")]
    assert kinds == [(113, "profiler_start"), (114, "profiler_start"),
                     (160, "profiler_collect"), (175, "profiler_stop"),
                     (176, "profiler_collect"), (179, "profiler_collect")]
    # the times are the lines' own headers, as the log prints them
    assert window.first.at_s == _seconds("13:17:44.051440")
    assert window.last.at_s == _seconds("13:17:46.399690")


def test_the_step_that_holds_the_capture_is_charged_by_time_not_line_order():
    p = parse_file(CPU)
    numbers, seconds = p.steps.column("step"), p.steps.column("time_s")
    lines = dict(zip(numbers.tolist(), p.steps.column("line").tolist(), strict=True))
    # the session's lines stand above the lines of the steps they ran in
    assert lines[9] == 145 and lines[13] == 180 and lines[15] == 182
    start, end = maxtext.step_intervals(numbers, seconds, p.line_at)
    row = int(np.flatnonzero(numbers == 15)[0])
    # step 15 (1.937 s) spans the session's stop and the capture's write, by the log's clock
    assert start[row] < _seconds("13:17:44.886566") < _seconds("13:17:46.399690") <= end[row]
    run = import_log(CPU)
    (a,) = [a for a in run.anomalies if a.step == 15]
    assert a.cause == maxtext.CAUSE_PROFILER
    assert a.evidence.startswith("profiler window (lines 113-179, 2.3 s: Profiler session "
                                 "initializing .. Dumped gzipped tool data)")


def test_an_async_saves_finalized_line_is_no_synchronous_save():
    p = parse_file(CPU)
    finalized = [e.line for e in p.events if e.kind == "async_save_finalized"]
    assert finalized == [93, 166, 239, 293]
    assert not [e for e in p.events if e.kind.startswith("sync_save")]
    run = import_log(CPU)
    assert not [a for a in run.anomalies if "synchronous checkpoint save" in a.evidence]
    # on the main thread the same line ends a synchronous save (Tunix's DPO run)
    ends = [e.line for e in parse_file(DPO).events if e.kind == "sync_save_end"]
    assert 46 in ends and 1108 in ends


def test_a_tpu_profiler_session_start_is_a_profiler_event():
    p = parse_file(GEMMA4)
    assert [(e.line, e.kind) for e in p.events if e.kind.startswith("profiler")] == [
        (4, "profiler_start"), (5, "profiler_start")]


@pytest.mark.parametrize("lag", [1, 0])
def test_line_delay_is_how_late_the_bounding_line_came(lag: int):
    numbers = np.arange(5)
    seconds = np.array([1.0, 1.0, 1.0, 1.0, 1.0])
    # the lines of steps 0..4; the line of step 2 written 0.25 s late
    line_at = np.array([1.0, 2.0, 3.25, 4.0, 5.0]) + (1.0 if lag else 0.0)
    start, end = maxtext.step_intervals(numbers, seconds, line_at, lag=lag)
    delay = maxtext.line_delay(numbers, line_at, end, lag=lag)
    late_row = 2 + lag  # the step the late line bounds
    assert delay[late_row] == pytest.approx(0.25)
    assert np.delete(delay, late_row) == pytest.approx(0.0)


def test_maxtext_025s_eval_opens_at_its_starting_line():
    """MaxText 0.2.5 writes ``Starting eval after train step N`` (train.py) when an eval
    begins: the eval window opens there, not at its first ``Completed eval step``."""
    p = parse_file(CPU)
    starts = [(e.line, e.step) for e in p.events if e.kind == "eval_start"]
    assert starts == [(71, 0), (143, 10), (214, 20)]
    evals = [a for a in maxtext.activities(p.events) if a.family == "eval"]
    assert [(a.first.line, a.first.text) for a in evals][0] == (
        71, "Starting eval after train step 0")
    (a,) = [a for a in import_log(CPU).anomalies if a.step == 1]
    assert a.evidence.startswith("evaluation (lines 71-104, 0.9 s: Starting eval after train "
                                 "step 0 .. Completed eval after train step 0)"), a.evidence
