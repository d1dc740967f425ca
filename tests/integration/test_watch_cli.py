"""``pipecheck watch`` on a real Monitor run: a JAX loop (tests/data/tensorboard_loop.py)
keeps its record with ``save_to`` in one process while ``pipecheck watch`` follows it in
another; watch shows the run going and ends by itself, exit 0, when the run finishes."""

from __future__ import annotations

import pathlib
import time

from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.tensorboard_events import read_scalars

from .doc_examples import skeleton_problems
from .test_monitor_durable import ended
from .test_monitor_tensorboard import start

STEPS = 100


def test_watch_follows_a_running_monitor_to_its_end(tmp_path: pathlib.Path, cli_run) -> None:
    run, tb = tmp_path / "run.json", tmp_path / "tb"
    loop = start(run, tb, STEPS, save_every=0.2)
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
    assert sorted(read_scalars(tb)["pipecheck/step_time_s"]) == list(range(STEPS))
