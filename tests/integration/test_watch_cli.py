"""``pipecheck watch`` on a real Monitor run: a JAX loop (tests/data/tensorboard_loop.py)
keeps its record with ``save_to`` in one process while ``pipecheck watch`` follows it in
another; watch shows the run going and ends by itself, exit 0, when the run finishes."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import time

from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.conftest import REPO

from .doc_examples import skeleton_problems
from .test_monitor_durable import ended

LOOP = REPO / "tests" / "data" / "tensorboard_loop.py"
STEPS = 100
STEP_SLEEP_S = 0.02
TB_EVERY_S = 0.1


def start(run: pathlib.Path, tbdir: pathlib.Path | None, steps: int, wait_at: int = -1,
          save_every: float = 30.0) -> subprocess.Popen[str]:
    """tests/data/tensorboard_loop.py in a process of its own (``tbdir`` None: no
    ``tensorboard_dir``)."""
    env = dict(os.environ, PYTHONFAULTHANDLER="1",
               PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, str(LOOP), str(run), "-" if tbdir is None else str(tbdir),
         str(steps), str(STEP_SLEEP_S), str(save_every), str(TB_EVERY_S), str(wait_at)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=run.parent)


def test_watch_follows_a_running_monitor_to_its_end(tmp_path: pathlib.Path, cli_run) -> None:
    run = tmp_path / "run.json"
    loop = start(run, None, STEPS, save_every=0.2)
    assert loop.stdout is not None
    lines = [loop.stdout.readline(), loop.stdout.readline()]
    assert [x.strip() for x in lines] == ["step 0", "step 1"], (lines, loop.poll())
    for _ in range(300):  # step 1's mark writes the record first (the writer's thread)
        if run.exists():
            break
        time.sleep(0.1)
    watched = cli_run("watch", str(run), "--every", "0.1", timeout=120)
    out, err = ended(loop)
    assert loop.returncode == 0, err[-3000:]
    assert watched.returncode == 0 and watched.stderr == "", watched.stderr
    assert f"pipecheck watch: {run} (running; written" in watched.stdout
    summary = watched.stdout.split(f"pipecheck watch: {run}: the run finished\n")[1]
    assert summary.startswith(f"steps           {STEPS}\n"), summary
    assert "verdict so far  " in summary
    assert skeleton_problems("monitor-watch", watched.stdout) == []
    record = store.load(run, expect=MonitorResult)
    assert record.incomplete is None and record.total_steps == STEPS
