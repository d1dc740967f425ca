"""``pipecheck watch``: the status of Monitor records as the Monitor writes them while its loop
runs (a loop on a simulated device, the records built the way ``save_to``'s writer builds
them), read by the follower with an injected sleep and clock (no real waiting)."""

from __future__ import annotations

import functools
import pathlib
from typing import Any, Callable

import pytest

from pipecheck.analysis.live import live_status
from pipecheck.analysis.loop_verdict import MIN_VERDICT_STEPS
from pipecheck.cli import main
from pipecheck.cli import watch as watch_cli
from pipecheck.logs.run_follow import follow
from pipecheck.monitor import Monitor
from pipecheck.monitor.result import build_result
from pipecheck.monitor.run_saver import RUNNING_MESSAGE
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult, RunEnd
from tests.conftest import REPO
from tests.fakes import SimDevice

ENV = {"backend": "sim"}


def sim_records(load_s: float, compute_s: float, at: tuple[int, ...],
                end: int) -> list[MonitorResult]:
    """A simulated loop's records: a running one (as ``save_to``'s periodic writes) after
    each step in ``at``, and the finished one after ``end`` steps."""
    dev = SimDevice(compute_s=compute_s, load_s=load_s, dispatch_s=0.001)
    mon = Monitor(clock=dev.clock, read_loss=dev.read, locate_syncs=False,
                  watch_compiles=False, watch_gc=False, env=ENV)
    out = []
    state: Any = None
    for step, batch in enumerate(mon.batches(dev.batches())):
        state, _ = mon.step(dev.step, state, batch)
        if step in at:
            out.append(build_result(mon._capture(), ENV, {},
                                    RunEnd("running", RUNNING_MESSAGE, mon._at)))
        if step + 1 == end:
            break
    out.append(mon.finish())
    return out


@pytest.fixture(scope="module")
def input_bound() -> list[MonitorResult]:
    return sim_records(load_s=0.2, compute_s=0.05, at=(4, 20, 35), end=40)


def test_the_status_so_far_of_an_input_bound_loop(input_bound: list[MonitorResult]) -> None:
    early, mid, late, done = (live_status(r) for r in input_bound)
    assert early.state == "running" and early.steps == 4
    assert early.verdict == "inconclusive"
    assert f"a verdict needs at least {MIN_VERDICT_STEPS}" in early.reason
    assert mid.verdict == late.verdict == done.verdict == "input-bound"
    assert late.input_share == pytest.approx(
        input_bound[2].breakdown.seconds("data wait") / input_bound[2].wall_s)
    assert late.input_share > 0.7  # 0.2 s of loading a step against 0.05 s of compute
    assert done.state == "finished" and done.steps == 40
    assert late.steps_per_s == pytest.approx(35 / input_bound[2].wall_s)
    between = live_status(input_bound[2], input_bound[1])
    assert between.recent_steps_per_s == pytest.approx(
        15 / (input_bound[2].wall_s - input_bound[1].wall_s))
    assert between.recent_steps_per_s == pytest.approx(1 / 0.201)  # load + dispatch


def test_a_compute_bound_loop_is_compute_bound_so_far() -> None:
    *_, done = sim_records(load_s=0.01, compute_s=0.2, at=(), end=20)
    status = live_status(done)
    assert status.verdict == "compute-bound" and status.input_share < 0.1
    assert status.stalls == 0


def write_each_sleep(path: pathlib.Path, records: list[MonitorResult],
                     sleeps: list[float]) -> Callable[[float], None]:
    """A sleep that writes the next record to ``path`` (as the Monitor would meanwhile)."""
    pending = list(records)

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if pending:
            store.save(pending.pop(0), path, force=True)
    return sleep


def test_the_follower_reads_the_file_again_only_when_it_changed(
        tmp_path: pathlib.Path, input_bound: list[MonitorResult]) -> None:
    path = tmp_path / "run.json"
    store.save(input_bound[0], path)
    sleeps: list[float] = []
    sleep = write_each_sleep(path, [input_bound[0], input_bound[1]], sleeps)
    polls = follow(str(path), 0.5, sleep=sleep, now=lambda: path.stat().st_mtime + 3.0)
    first, second, third = next(polls), next(polls), next(polls)
    assert [p.changed for p in (first, second, third)] == [True, True, True]
    # the same bytes written again still change the file's time: read again; untouched: not
    fourth = next(polls)
    assert not fourth.changed and fourth.record is third.record
    assert third.record.total_steps == 20 and third.age_s == 3.0
    assert sleeps == [0.5, 0.5, 0.5]


def run_watch(monkeypatch: pytest.MonkeyPatch, path: pathlib.Path,
              sleep: Callable[[float], None], capsys: pytest.CaptureFixture[str]
              ) -> tuple[int, str, str]:
    monkeypatch.setattr(watch_cli, "follow", functools.partial(follow, sleep=sleep))
    code = main(["watch", str(path), "--every", "0.1"])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_watch_shows_each_write_and_ends_with_the_run(
        tmp_path: pathlib.Path, input_bound: list[MonitorResult],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    store.save(input_bound[0], path)
    sleeps: list[float] = []
    code, out, err = run_watch(monkeypatch, path,
                               write_each_sleep(path, input_bound[1:], sleeps), capsys)
    assert (code, err) == (0, "")
    frames = out.split(f"pipecheck watch: {path} (running")
    assert len(frames) == 4  # the three running writes, each once
    assert "steps           35\n" in frames[3]
    assert "verdict so far  input-bound (" in frames[3]
    summary = out.split(f"pipecheck watch: {path}: the run finished\n")[1]
    assert summary.startswith("steps           40\n")
    assert "next: pipecheck report" in summary
    assert sleeps == [0.1, 0.1, 0.1]


def test_ctrl_c_ends_watch_cleanly_with_the_summary(
        tmp_path: pathlib.Path, input_bound: list[MonitorResult],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "run.json"
    store.save(input_bound[1], path)

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    code, out, err = run_watch(monkeypatch, path, interrupted, capsys)
    assert (code, err) == (0, "")
    assert f"pipecheck watch: {path}: stopped watching (Ctrl-C); the run may go on\n" in out
    assert "steps           20\n" in out.split("stopped watching")[1]


@pytest.mark.parametrize("name, expected", [
    ("missing.json", "missing.json does not exist; pipecheck watch reads the file a Monitor "
                     "keeps with Monitor(save_to=...)"),
    ("compare.json", "holds a 'compare' result; expected 'monitor'; pipecheck watch reads"),
])
def test_a_missing_or_other_file_is_one_line_and_exit_2(
        tmp_path: pathlib.Path, name: str, expected: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    if name == "compare.json":
        path.write_text((REPO / "tests/data/records_v4/compare.json").read_text())
    assert main(["watch", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and expected in out.err
