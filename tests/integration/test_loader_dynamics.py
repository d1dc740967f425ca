"""Loader dynamics on loops written as users write them (a script outside the repository,
run as a subprocess): a Grain pipeline with workers whose batches arrive in bursts, a
generator that pays at each epoch boundary, and a clean loop. Their Monitor records must
hold a ``periodic-stall`` finding with the right period and cause, and none on the clean
loop."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from pipecheck.records import store
from pipecheck.records.monitor import MonitorResult
from tests.conftest import REPO

USER_SCRIPT = textwrap.dedent('''
    import sys
    import time

    import grain
    import jax
    import jax.numpy as jnp
    import numpy as np
    from absl import flags

    from pipecheck import Monitor


    def slow_example(i):
        time.sleep(0.02)  # decoding: 20 ms an example, in the worker
        return np.full((16,), i, np.float32)


    def epochs(n_epochs, per_epoch, cost):
        for _ in range(n_epochs):
            time.sleep(cost)  # reopen and reshuffle the files at each epoch
            for i in range(per_epoch):
                yield np.full((8, 16), i, np.float32)


    @jax.jit
    def train_step(w, x):
        loss = jnp.mean((x @ w) ** 2)
        return w * 0.999, {"loss": loss}


    def run(out, batches, config):
        w = jnp.eye(16, dtype=jnp.float32)
        mon = Monitor(config=config, locate_syncs=False)
        for x in mon.batches(batches):
            w, _ = mon.step(train_step, w, jnp.asarray(x))
            time.sleep(0.004)  # the rest of the step
        mon.save(out)


    if __name__ == "__main__":
        flags.FLAGS.mark_as_parsed()
        out = sys.argv[1]
        # 3 workers, 4 examples a batch: 80 ms a batch each, ~8 ms a step to train on it
        ds = (grain.MapDataset.range(100_000).map(slow_example)
              .to_iter_dataset(grain.ReadOptions(num_threads=0, prefetch_buffer_size=1))
              .batch(4)
              .mp_prefetch(grain.MultiprocessingOptions(num_workers=3,
                                                        per_worker_buffer_size=1)))
        it = iter(ds)
        run(out + ".grain.json", (next(it) for _ in range(48)),
            {"num_workers": 3, "per_worker_buffer_size": 1, "batch_size": 4})
        it.close()
        run(out + ".epochs.json", epochs(8, 6, 0.15), {"dataset_size": 48, "batch_size": 8})
        run(out + ".clean.json", epochs(1, 48, 0.0), {"dataset_size": 48, "batch_size": 8})
''')


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, MonitorResult]:
    tmp = tmp_path_factory.mktemp("loader_dynamics")
    script = tmp / "my_train.py"
    script.write_text(USER_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, str(script), str(tmp / "run")], capture_output=True,
                       text=True, timeout=240, env=env, cwd=tmp)
    assert r.returncode == 0, r.stderr[-3000:]
    return {name: store.load(tmp / f"run.{name}.json", expect=MonitorResult)
            for name in ("grain", "epochs", "clean")}


def _periodic(run: MonitorResult) -> list:
    return [f for f in run.findings if f.kind == "periodic-stall"]


def test_grain_workers_in_bursts_stall_every_three_steps(runs: dict[str, MonitorResult]
                                                         ) -> None:
    [f] = _periodic(runs["grain"])
    times = [round(s.time_s * 1e3) for s in runs["grain"].steps]
    assert f.numbers["period"] == 3, times
    assert f.location == "workers" and "the loader's 3 workers" in f.message
    # ~80 ms a round of 3 batches against ~3 x 8 ms of training: well over 2x
    assert f.numbers["keep_ahead_factor"] > 1.5
    assert "raise the workers from 3 to" in (f.fix or "")


def test_generator_epoch_boundary_is_the_period(runs: dict[str, MonitorResult]) -> None:
    [f] = _periodic(runs["epochs"])
    assert f.numbers["period"] == 6
    assert f.location == "epoch" and "the data set holds 6 batches" in f.message
    # 7 boundaries after the first step, 150 ms each
    assert f.numbers["stalls"] == 7
    assert 0.7 * 7 * 0.15 < f.numbers["lost_s"] < 2.0 * 7 * 0.15


def test_clean_loop_has_no_periodic_stall(runs: dict[str, MonitorResult]) -> None:
    assert _periodic(runs["clean"]) == []
