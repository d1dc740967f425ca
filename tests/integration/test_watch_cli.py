"""``pipecheck watch`` on a real Monitor run: a JAX loop (tests/data/tensorboard_loop.py)
keeps its record with ``save_to`` in one process while ``pipecheck watch`` follows it in
another; watch shows the run going and ends by itself, exit 0, when the run finishes. The
loop and watch are ordered by a handshake (tests/handshake.py), never by their speed."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.conftest import REPO, cli_env
from tests.handshake import WAIT_S, deadline, lines_until

from .doc_examples import skeleton_problems
from .test_monitor_durable import ended

LOOP = REPO / "tests" / "data" / "tensorboard_loop.py"
STEPS = 100
STEP_SLEEP_S = 0.02
TB_EVERY_S = 0.1


def start(run: pathlib.Path, tbdir: pathlib.Path | None, steps: int, wait_at: int = -1,
          save_every: float = 30.0, hold: str = "signal") -> subprocess.Popen[str]:
    """tests/data/tensorboard_loop.py in a process of its own (``tbdir`` None: no
    ``tensorboard_dir``); with ``wait_at``, it holds after that step (``hold``: until a
    signal ends it, or ``stdin``: until a line on its stdin)."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, str(LOOP), str(run), "-" if tbdir is None else str(tbdir),
         str(steps), str(STEP_SLEEP_S), str(save_every), str(TB_EVERY_S), str(wait_at), hold],
        stdin=subprocess.PIPE if hold == "stdin" else subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=run.parent)


def written(run: pathlib.Path, loop: subprocess.Popen[str]) -> None:
    """Wait until the loop's first write of ``run`` landed (its writer thread's, after step
    1's mark; the file appears whole: written aside, then renamed)."""
    end = time.monotonic() + WAIT_S
    while not run.exists():
        assert loop.poll() is None, ("the loop ended before writing its record",
                                     loop.communicate())
        assert time.monotonic() < end, f"the loop wrote no {run} within {WAIT_S:g} s"
        time.sleep(0.05)


HOLD_AT = 5
"""The step the loop holds after until ``pipecheck watch`` has shown it running."""


def test_watch_follows_a_running_monitor_to_its_end(tmp_path: pathlib.Path) -> None:
    """The order of events is the handshake's, whatever the machine's load: the loop holds
    after step HOLD_AT (its record says "running") until watch printed its first running
    frame; then the loop goes on to its end, and watch ends by itself with the summary."""
    run = tmp_path / "run.json"
    loop = start(run, None, STEPS, wait_at=HOLD_AT, save_every=0.2, hold="stdin")
    watch: subprocess.Popen[str] | None = None
    try:
        assert loop.stdin is not None and loop.stdout is not None
        lines = lines_until(loop, loop.stdout, lambda line: line == "ready\n",
                            f"the loop holding after step {HOLD_AT}")
        assert [x.strip() for x in lines[:2]] == ["step 0", "step 1"], lines
        written(run, loop)
        with (tmp_path / "watch.err").open("w") as err:
            watch = subprocess.Popen(
                [sys.executable, "-m", "pipecheck", "watch", str(run), "--every", "0.1"],
                stdout=subprocess.PIPE, stderr=err, text=True,
                env=cli_env({"PYTHONUNBUFFERED": "1"}), cwd=REPO)
        assert watch.stdout is not None
        head = f"pipecheck watch: {run} (running; written"
        frames = lines_until(watch, watch.stdout, lambda line: line.startswith(head),
                             "pipecheck watch showing the held run as running",
                             stop=watch.kill)
        loop.stdin.write("go\n")  # the release: the loop runs on to its end
        loop.stdin.flush()
        out, err_text = ended(loop)
        assert loop.returncode == 0, err_text[-3000:]
        with deadline(watch.kill, "pipecheck watch ending by itself once the run finished"):
            rest = watch.stdout.read()
            code = watch.wait()
    finally:
        for proc in (loop, watch):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)
    watched = "".join(frames) + rest
    stderr = (tmp_path / "watch.err").read_text()
    assert code == 0 and stderr == "", stderr
    assert head in watched
    summary = watched.split(f"pipecheck watch: {run}: the run finished\n")[1]
    assert summary.startswith(f"steps           {STEPS}\n"), summary
    assert "verdict so far  " in summary
    assert skeleton_problems("monitor-watch", watched) == []
    record = store.load(run, expect=MonitorResult)
    assert record.incomplete is None and record.total_steps == STEPS
