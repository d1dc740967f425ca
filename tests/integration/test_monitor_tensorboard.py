"""Monitor(tensorboard_dir=...) on real JAX loops (CPU): the event files, read back, hold
the record's own step times, data waits, syncs and dispatches; a run killed by SIGKILL keeps
the scalars of its last fold, one ended by SIGTERM every completed step (its record's)."""

from __future__ import annotations

import pathlib
import signal

import numpy as np
import pytest

from pipecheck.monitor import Monitor
from pipecheck.monitor.tensorboard import SCALAR_TAGS
from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.tensorboard_events import event_files, read_scalars

from .test_monitor_durable import ended, wait_ready
from .test_watch_cli import STEP_SLEEP_S, TB_EVERY_S, start

pytest.importorskip("tensorboardX")

KILL_AT = 30


def test_a_real_loop_writes_the_records_own_numbers(tmp_path: pathlib.Path) -> None:
    import jax
    import jax.numpy as jnp

    @jax.jit
    def train_step(w, x):
        loss = jnp.mean(jnp.tanh(x @ w) ** 2)
        return w - 1e-3 * loss, {"loss": loss}

    def loader():
        for i in range(25):
            yield np.full((16, 32), i / 25, np.float32)

    logdir = tmp_path / "tb"
    w = jnp.eye(32, dtype=jnp.float32)
    mon = Monitor(tensorboard_dir=str(logdir), tensorboard_every_s=0.01)
    for x in mon.batches(loader()):
        w, _ = mon.step(train_step, w, x)
    result = mon.finish()
    assert len(event_files(logdir)) == 1
    got = read_scalars(logdir)
    steps = list(result.steps)
    assert [s.step for s in steps] == list(range(25))
    assert sorted(got["pipecheck/step_time_s"]) == list(range(25))
    for s in steps:
        assert got["pipecheck/step_time_s"][s.step] == np.float32(s.time_s)
        for name in ("data_wait", "sync", "dispatch"):
            if name in s.spans:
                assert got[SCALAR_TAGS[name]][s.step] == np.float32(s.spans[name])
    # step 0 compiled the step: its dispatch is far above a steady one's
    assert got["pipecheck/dispatch_s"][0] > 10 * np.median(
        [got["pipecheck/dispatch_s"][i] for i in range(5, 24)])


def test_a_killed_run_keeps_the_scalars_written(tmp_path: pathlib.Path) -> None:
    """SIGKILL: the steps of the last fold (one every 0.1 s at most) are in the file; SIGTERM
    (with save_to): every completed step, the same as the record."""
    runs = {sig: (tmp_path / f"{sig.name}.json", tmp_path / f"tb-{sig.name}")
            for sig in (signal.SIGKILL, signal.SIGTERM)}
    procs = {sig: start(run, tb, 60, KILL_AT) for sig, (run, tb) in runs.items()}
    try:
        for proc in procs.values():
            # "ready": the loop holds in its body (no mark, no fold) and its event file's
            # writer has written every step handed to it (a handshake, whatever the load)
            wait_ready(proc)
        for sig, proc in procs.items():
            proc.send_signal(sig)
        for sig, proc in procs.items():
            ended(proc)
            assert proc.returncode == -sig
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    # steps 0..KILL_AT-1 were closed when the loop stopped at KILL_AT
    killed = read_scalars(runs[signal.SIGKILL][1])["pipecheck/step_time_s"]
    n = len(killed)
    behind = int(TB_EVERY_S / STEP_SLEEP_S) + 2
    assert sorted(killed) == list(range(n)) and KILL_AT - behind <= n <= KILL_AT
    record = store.load(runs[signal.SIGTERM][0], expect=MonitorResult)
    assert record.incomplete is not None and record.incomplete.reason == "signal"
    termed = read_scalars(runs[signal.SIGTERM][1])["pipecheck/step_time_s"]
    assert sorted(termed) == [s.step for s in record.steps] == list(range(KILL_AT))
    assert all(termed[s.step] == np.float32(s.time_s) for s in record.steps)
