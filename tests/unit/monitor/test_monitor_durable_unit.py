"""Monitor(save_to=...) in-process: the vectorized fold equals close_interval, incremental
encoding, the signal chain, a failing disk, an exception, and the readers' first line."""

from __future__ import annotations

import errno
import json
import os
import pathlib
import random
import signal
import sys
import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from pipecheck.cli import cli
from pipecheck.errors import MonitorError, OutputPathError
from pipecheck.measure.span_fold import close_interval, fold_intervals
from pipecheck.monitor import Monitor
from pipecheck.monitor.run_saver import RUNNING_MESSAGE, SignalChain, remove_stale_temporaries
from pipecheck.records import store
from pipecheck.records.codec import decode_array
from pipecheck.records.common import StepRecord
from pipecheck.records.events import Span
from pipecheck.records.monitor import MonitorResult, RunEnd
from pipecheck.records.steps import ChunkEncoder, StepTable, concat
from pipecheck.report.monitor import ended_early
from tests.fakes import FakeClock

NAMES = ["data_wait", "dispatch", "sync", "gc", "checkpoint"]
FIRST = 5


def random_intervals(rng: random.Random, n: int) -> tuple[float, np.ndarray, np.ndarray, list]:
    """``n`` intervals of random spans (nested, detached gc, clipped at the start)."""
    t = 10.0
    start = t
    marks, spans, tags = [], [], []
    for i in range(n):
        t0 = t
        for _ in range(rng.randint(0, 5)):
            a = t + rng.uniform(0.0, 0.002)
            b = a + rng.uniform(0.0, 0.004)
            name = rng.randrange(len(NAMES))
            depth = 1 if rng.random() < 0.2 else 0
            if rng.random() < 0.1:
                a = t0 - 0.001  # began in the interval before: clipped
            spans.append((name, a, b, depth))
            if depth == 0 and rng.random() < 0.3:  # a gc inside it
                spans.append((3, a + (b - a) / 3, a + (b - a) / 2, 1))
            t = max(t, b)
        if rng.random() < 0.2:
            # (name, clock, marks taken before it, the start mark included): step FIRST + i
            tags.append((rng.choice(["compile", "checkpoint"]), t, FIRST + 1 + i))
        t += rng.uniform(0.0, 0.003)
        marks.append((t, rng.random() if rng.random() < 0.8 else np.nan, len(spans)))
    return start, np.asarray(marks, float).reshape(-1, 3), np.asarray(spans, float).reshape(
        -1, 4), tags


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_fold_gives_each_step_what_close_interval_gives(seed: int) -> None:
    start, marks, spans, tags = random_intervals(random.Random(seed), 300)
    table = fold_intervals(FIRST, start, marks, spans, tags, NAMES)
    ends = marks[:, 0]
    begins = np.concatenate([[start], ends[:-1]])
    for i, row in enumerate(table):
        lo = 0 if i == 0 else int(marks[i - 1, 2])
        inside = [Span(NAMES[int(k)], a, b, int(d)) for k, a, b, d in spans[lo:int(marks[i, 2])]]
        expected = close_interval(FIRST + i, begins[i], ends[i], inside,
                                  [(name, at) for name, at, before in tags
                                   if before == FIRST + 1 + i],
                                  None if np.isnan(marks[i, 1]) else marks[i, 1])
        assert row.step == expected.step and row.tags == expected.tags
        assert row.time_s == pytest.approx(expected.time_s, rel=1e-12, abs=1e-15)
        assert row.loss == expected.loss
        assert row.spans.keys() == expected.spans.keys()
        for name, value in expected.spans.items():
            assert row.spans[name] == pytest.approx(value, rel=1e-9, abs=1e-12), (i, name)


def test_the_chunk_encoder_compresses_only_new_pieces() -> None:
    rng = np.random.default_rng(0)
    rows = [StepRecord(i, float(rng.random()), ("compile",) if i % 97 == 0 else (),
                       {"dispatch": float(rng.random()), "other": 0.0}, float(i))
            for i in range(6000)]
    encoder = ChunkEncoder()
    first = StepTable.from_rows(StepRecord, rows[:5000])
    got = encoder.table_json(first)
    assert StepTable.from_json(StepRecord, got) == first
    assert decode_array(got["columns"]["time_s"], "t").tolist() == first.column("time_s").tolist()
    after_first = encoder.compressed_bytes
    # the window slides: drops its first 500 steps, gains 1000
    grown = StepTable.from_rows(StepRecord, rows[500:6000])
    assert StepTable.from_json(StepRecord, encoder.table_json(grown)) == grown
    new = encoder.compressed_bytes - after_first
    # only the pieces at the two ends (partial chunks of 1024 steps) and the new steps
    assert 0 < new < after_first / 2
    assert concat([first[:10], grown[:5]]) == [*rows[:10], *rows[500:505]]


def test_the_signal_chain_saves_then_calls_the_handler_before_it() -> None:
    calls: list[str] = []
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, lambda s, f: calls.append("user"))
    try:
        chain = SignalChain(lambda s: calls.append(f"save {signal.Signals(s).name}")).install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert calls == ["save SIGTERM", "user"]
        chain.uninstall()
        os.kill(os.getpid(), signal.SIGTERM)
        assert calls == ["save SIGTERM", "user", "user"]
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # an ignored signal stays ignored
        ignored = SignalChain(lambda s: calls.append("save")).install()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        ignored.uninstall()
    finally:
        signal.signal(signal.SIGTERM, previous)


def fake_loop(mon: Monitor, clock: FakeClock, steps: int, raise_at: int | None = None) -> None:
    def step(w: float, x: int) -> tuple[float, dict[str, float]]:
        clock.advance(0.010)
        return w, {"loss": float(x)}

    w = 0.0
    for i, x in enumerate(mon.batches(range(steps))):
        clock.advance(0.002)
        w, _ = mon.step(step, w, x)
        if i == raise_at:
            raise ValueError(f"loss is nan\nat step {i}")


def quiet_monitor(path: pathlib.Path, clock: FakeClock, every: float = 1.0) -> Monitor:
    return Monitor(env={"test": True}, locate_syncs=False, watch_compiles=False,
                   watch_gc=False, clock=clock, read_loss=float, save_to=str(path),
                   save_every_s=every)


def test_an_exception_leaving_the_block_is_saved_and_raised_unchanged(
        tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    out = tmp_path / "run.json"
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    with pytest.raises(ValueError) as caught:
        with quiet_monitor(out, clock) as mon:
            fake_loop(mon, clock, 50, raise_at=12)
    assert str(caught.value) == "loss is nan\nat step 12"
    record = store.load(out, expect=MonitorResult)
    assert record.incomplete == RunEnd("exception", "ValueError: loss is nan", 12)
    assert [s.step for s in record.steps] == list(range(12))
    assert record.steps[3].time_s == pytest.approx(0.012)
    # the handlers it chained are back
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert ended_early(record.incomplete, record.total_steps) == (
        "pipecheck: this run ended early at step 12 (ValueError: loss is nan); the record "
        "holds the 12 steps completed before it")
    # every reader says so on its first line
    runner = CliRunner()
    diffed = runner.invoke(cli, ["diff", str(out), str(out)])
    assert diffed.exit_code == 0, diffed.output
    first = diffed.output.splitlines()[0]
    assert first.startswith(f"pipecheck: A ({out}): this run ended early at step 12 "
                            "(ValueError: loss is nan)")
    pytest.importorskip("matplotlib")
    plotted = runner.invoke(cli, ["plot", str(out), "-o", str(tmp_path / "run.png")])
    assert plotted.exit_code == 0, plotted.output
    assert plotted.output.splitlines()[0].startswith("pipecheck: this run ended early at step 12")


def test_a_finished_run_is_written_complete_and_matches_save(tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    out = tmp_path / "run.json"
    mon = quiet_monitor(out, clock, every=0.05)
    fake_loop(mon, clock, 300)
    result = mon.finish()
    assert mon._saver is not None and mon._saver.writes >= 2  # periodic writes, then the end
    written = store.load(out, expect=MonitorResult)
    assert written.incomplete is None and written.total_steps == 300
    mon.save(str(tmp_path / "saved.json"))
    saved = store.load(tmp_path / "saved.json", expect=MonitorResult)
    assert written == saved == result
    assert json.loads(out.read_text())["steps"]["n"] == 300


@pytest.mark.parametrize("failure", ["disk full", "directory gone"])
def test_a_failing_write_warns_once_and_the_loop_goes_on(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    clock = FakeClock()
    directory = tmp_path / "runs"
    directory.mkdir()
    out = directory / "run.json"
    real_fsync = os.fsync

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    mon = quiet_monitor(out, clock, every=0.01)
    if failure == "disk full":
        monkeypatch.setattr(os, "fsync", disk_full)
    else:
        directory.rmdir()
        directory.write_text("a file where the directory was")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fake_loop(mon, clock, 200)
        assert mon._saver is not None
        mon._saver.close()  # every periodic write has been tried
        failed = [w for w in seen if "could not write the run's record" in str(w.message)]
    assert len(failed) == 1, [str(w.message) for w in seen]
    assert ("No space left on device" if failure == "disk full" else "is a file") in str(
        failed[0].message)
    assert [p.name for p in tmp_path.rglob("*") if p.name.endswith(".tmp")] == []
    if failure == "disk full":
        assert not out.exists()
        monkeypatch.setattr(os, "fsync", real_fsync)
    else:
        directory.unlink()
        directory.mkdir()
    assert mon.finish().total_steps == 200  # the loop went on; the end is written
    assert store.load(out, expect=MonitorResult).total_steps == 200


def test_stale_temporaries_of_a_killed_write_are_removed(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "run.json"
    stale = tmp_path / ".run.json.abc123.tmp"
    stale.write_text("{")
    other = tmp_path / ".other.json.abc123.tmp"
    other.write_text("{")
    assert remove_stale_temporaries(str(out)) == [str(stale)]
    assert not stale.exists() and other.exists()


def test_without_save_to_nothing_is_installed() -> None:
    before = signal.getsignal(signal.SIGTERM)
    clock = FakeClock()
    mon = Monitor(env={}, locate_syncs=False, watch_compiles=False, watch_gc=False,
                  clock=clock, read_loss=float)
    fake_loop(mon, clock, 5)
    assert signal.getsignal(signal.SIGTERM) is before and mon._saver is None
    assert mon.finish().incomplete is None
    assert RUNNING_MESSAGE


def test_save_to_refuses_an_existing_file_and_a_bad_interval_before_the_run(
        tmp_path: pathlib.Path) -> None:
    out = tmp_path / "run.json"
    out.write_text("{}")
    with pytest.raises(MonitorError, match="the file exists; pass force=True"):
        Monitor(save_to=str(out))
    with pytest.raises(MonitorError, match="save_every_s=...\\) must be > 0"):
        Monitor(save_to=str(tmp_path / "new.json"), save_every_s=0)
    with pytest.raises(OutputPathError, match="is a file"):
        Monitor(save_to=str(out / "x.json"))
    assert out.read_text() == "{}"


def test_an_exception_escaping_a_loop_without_with_is_saved_by_the_excepthook(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``with``, an exception that ends the script reaches ``sys.excepthook``: the
    Monitor writes the record first, then the hook that was there prints the traceback."""
    printed: list[str] = []
    monkeypatch.setattr(sys, "excepthook", lambda t, e, tb: printed.append(f"{t.__name__}: {e}"))
    clock = FakeClock()
    out = tmp_path / "run.json"
    mon = quiet_monitor(out, clock)
    try:
        fake_loop(mon, clock, 50, raise_at=7)
    except ValueError as e:
        sys.excepthook(type(e), e, e.__traceback__)  # what the interpreter does at the top
    assert printed == ["ValueError: loss is nan\nat step 7"]
    record = store.load(out, expect=MonitorResult)
    assert record.incomplete == RunEnd("exception", "ValueError: loss is nan", 7)
    assert record.total_steps == 7
    keeper = mon._keeper
    assert keeper is not None
    mon._stop_saving()
    assert sys.excepthook != keeper.excepthook  # the hook before it is back


def test_a_process_exiting_without_finish_writes_the_record_at_exit(
        tmp_path: pathlib.Path) -> None:
    clock = FakeClock()
    out = tmp_path / "run.json"
    mon = quiet_monitor(out, clock)
    fake_loop(mon, clock, 9)
    assert mon._keeper is not None
    mon._keeper.at_exit()  # what atexit runs when the script ends without finish()
    record = store.load(out, expect=MonitorResult)
    assert record.incomplete == RunEnd("exit", "the process exited before Monitor.finish()", 8)
    assert record.total_steps == 8
    assert ended_early(record.incomplete, 8) == (
        "pipecheck: this run ended early at step 8 (the process exited before "
        "Monitor.finish()); the record holds the 8 steps completed before it")
    mon._stop_saving()


def test_closing_the_writer_deletes_a_temporary_file_a_cut_short_write_left(
        tmp_path: pathlib.Path) -> None:
    """A write the run's end interrupted leaves its temporary file unrenamed; once the
    writer is closed (no write under way) it is deleted, and the record stays."""
    from pipecheck.monitor.run_saver import PeriodicWriter

    out = tmp_path / "run.json"
    other = tmp_path / ".other.json.abc.tmp"  # another path's: not ours to delete
    other.write_text("{")
    writer = PeriodicWriter(str(out), build=lambda s: s, encode=lambda s: json.dumps(s))
    writer.submit({"steps": 1}, now=0.0)
    assert writer.write_now({"steps": 2})
    cut_short = tmp_path / ".run.json.k3j2.tmp"
    cut_short.write_text('{"ste')
    writer.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.json.abc.tmp", "run.json"]
    assert json.loads(out.read_text()) == {"steps": 2}
