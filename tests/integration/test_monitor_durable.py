"""A real training loop (tests/data/durable_loop.py) with Monitor(save_to=...), ended by an
exception, SIGTERM, SIGINT and SIGKILL at seeded random steps, in subprocesses: the record
is always a valid file of the current format holding exactly the completed steps."""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time

from pipecheck.monitor.run_saver import remove_stale_temporaries
from pipecheck.records import store
from pipecheck.records.base import FORMAT_VERSION
from pipecheck.records.monitor import MonitorResult
from tests.conftest import REPO
from tests.handshake import WAIT_S, deadline, lines_until

from .doc_examples import skeleton_problems

LOOP = REPO / "tests" / "data" / "durable_loop.py"
STEPS = 80
EVERY_S = 0.05


def start(out: pathlib.Path, end: str, at: int, *extra: str,
          steps: int = STEPS, every: float = EVERY_S) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONFAULTHANDLER="1")
    return subprocess.Popen(
        [sys.executable, str(LOOP), str(out), str(steps), end, str(at), str(every), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=out.parent)


def wait_ready(proc: subprocess.Popen[str], timeout: float = WAIT_S) -> list[str]:
    """The loop's lines up to ``ready`` (the loop then sleeps in its body); a loop that
    ends first, or prints no ``ready`` within ``timeout`` (it is then aborted: faulthandler
    prints every thread's stack), fails the test."""
    assert proc.stdout is not None
    lines = []
    with deadline(lambda: proc.send_signal(signal.SIGABRT), "the loop's 'ready'", timeout):
        for line in proc.stdout:
            lines.append(line.strip())
            if line.strip() == "ready":
                return lines
    raise AssertionError(f"the loop ended before 'ready': {lines[-3:]} {proc.stderr.read()}")


def ended(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    """The loop's output once it ended; a loop still running after ``timeout`` is aborted
    and the test fails with every thread's stack (faulthandler), never left running."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"the loop did not end within {timeout} s:\n{err[-8000:]}") from None


def points(seed: int, n: int = 3) -> list[int]:
    return random.Random(seed).sample(range(1, STEPS - 2), n)


def check_record(out: pathlib.Path, reason: str, at: int, steps: int) -> MonitorResult:
    """The file is JSON of the current format, marked ``incomplete`` with ``reason`` at
    ``at``, and holds steps 0..steps-1; no temporary file of its writes is next to it
    (other loops of the same test, still running, write their own files in this folder)."""
    data = json.loads(out.read_text())
    assert data["kind"] == "monitor" and data["format_version"] == FORMAT_VERSION
    record = store.load(out, expect=MonitorResult)
    assert record.incomplete is not None
    assert (record.incomplete.reason, record.incomplete.step) == (reason, at)
    assert record.total_steps == steps and record.dropped_steps == 0
    assert [s.step for s in record.steps] == list(range(steps))
    assert sorted(p.name for p in out.parent.glob(f".{out.name}.*.tmp")) == []
    return record


def test_an_exception_saves_the_completed_steps_and_goes_on_unchanged(
        tmp_path: pathlib.Path) -> None:
    runs = {at: start(tmp_path / f"exc{at}.json", "exception", at) for at in points(23)}
    for at, proc in runs.items():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 1
        # the user's exception reaches the top unchanged, its traceback through the loop
        assert err.strip().splitlines()[-1] == f"RuntimeError: loss went bad at step {at}"
        assert "durable_loop.py" in err
        record = check_record(tmp_path / f"exc{at}.json", "exception", at, at)
        assert record.incomplete.message == f"RuntimeError: loss went bad at step {at}"


def test_sigterm_and_sigint_save_the_record_then_end_the_process(
        tmp_path: pathlib.Path) -> None:
    runs = []
    for sig, at in [*((signal.SIGTERM, at) for at in points(7)),
                    *((signal.SIGINT, at) for at in points(11))]:
        out = tmp_path / f"{sig.name}{at}.json"
        runs.append((sig, at, out, start(out, "wait", at)))
    for sig, at, out, proc in runs:
        wait_ready(proc)
        proc.send_signal(sig)
        ended(proc)
        # the signal was not swallowed: the process ended as the signal ends it
        assert proc.returncode == -sig, (sig, proc.returncode)
        record = check_record(out, "signal", at, at)
        assert record.incomplete.message == sig.name


def test_a_sigterm_handler_of_the_user_runs_after_the_save(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "user.json"
    proc = start(out, "wait", 30, "user-handler")
    wait_ready(proc)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = ended(proc)
    assert proc.returncode == 3 and "user handler ran" in stdout
    check_record(out, "signal", 30, 30)


def test_sigkill_leaves_the_last_periodic_write(tmp_path: pathlib.Path) -> None:
    """Killed after a write landed: the file is that write. Killed at random moments of a
    running loop: the file is a valid record of the first steps, and a temporary file a
    write was making when the kill came is removed when a Monitor next writes there."""
    for at in points(5, 2):
        out = tmp_path / f"kill{at}.json"
        proc = start(out, "pause", at)
        wait_ready(proc)  # step at+1 was due to write steps 0..at
        end = time.monotonic() + WAIT_S
        while True:  # the writer thread's write of them landed
            try:
                if store.load(out, expect=MonitorResult).total_steps == at + 1:
                    break
            except Exception:  # noqa: BLE001 - not written yet
                pass
            if time.monotonic() > end:
                proc.kill()
                raise AssertionError(f"no write of steps 0..{at} within {WAIT_S:g} s")
            time.sleep(0.02)
        proc.kill()
        proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        check_record(out, "running", at + 1, at + 1)
    rng = random.Random(3)
    for i in range(3):
        out = tmp_path / f"random{i}.json"
        proc = start(out, "none", 0, steps=20_000, every=0.01)
        assert proc.stdout is not None
        seen = lines_until(proc, proc.stdout, lambda line: line == "step 199\n",
                           "the loop's first 200 steps", stop=proc.kill)
        printed = len(seen)
        end = time.monotonic() + WAIT_S
        while not out.exists():  # the first write landed
            if time.monotonic() > end:
                proc.kill()
                raise AssertionError(f"no write of {out} within {WAIT_S:g} s")
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.5))  # a random moment of the running loop
        proc.kill()
        rest, _ = proc.communicate(timeout=30)
        printed += rest.count("step ")
        record = store.load(out, expect=MonitorResult)
        assert record.incomplete is not None and record.incomplete.reason == "running"
        assert [s.step for s in record.steps] == list(range(record.total_steps))
        assert 0 < record.total_steps <= printed
        remove_stale_temporaries(str(out))
        assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_the_documented_example_keeps_the_crashed_run(tmp_path: pathlib.Path) -> None:
    """examples/monitor_ended_early.py (docs/monitor.md): the NaN guard raises at step 30;
    the record holds steps 0-29 and `pipecheck plot` says first that the run ended early."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "monitor_ended_early.py")],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[2].startswith("pipecheck: this run ended early at step 30 "
                               "(FloatingPointError: loss is nan at step 30)")
    check_record(tmp_path / "crashed_run.json", "exception", 30, 30)
    assert (tmp_path / "crashed_run.png").stat().st_size > 0
    assert skeleton_problems("monitor-ended-early", proc.stdout) == []  # docs/monitor.md
