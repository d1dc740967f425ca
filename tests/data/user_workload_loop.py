"""A user's training code: entry points for pipecheck, and the user's own loop under Monitor.

The loop logs ``float(loss)`` of the step it just dispatched (line marked FORCED-SYNC) and
loads its batches on the main thread, so the sync costs the whole compute time every step: a
step is loading then compute. Loading is a sleep of ``USER_LOOP_LOAD_S`` seconds (60 ms if
unset); the test sets it to the compute time ``pipecheck synthetic`` measured on this
machine, so the step (their sum, ~2x either) stays clear of the verdict's 1.2x margin on a
fast machine and a slow one alike.

usage: USER_LOOP_LOAD_S=0.02 python user_workload_loop.py RUN.json STEPS
"""

from __future__ import annotations

import os
import sys
import time

import grain
import jax
import jax.numpy as jnp
import numpy as np

ITERS = 150  # matmul chain: ~10-25 ms per step on a 2-core CPU
LOAD_S = float(os.environ.get("USER_LOOP_LOAD_S", "0.060"))  # per-batch loading latency


def init(config):
    return {"w": np.eye(256, dtype=np.float32) * 0.5}


@jax.jit
def train_step(state, batch):
    h = jax.lax.fori_loop(0, ITERS, lambda _, a: jnp.tanh(a @ state["w"]), batch["x"])
    loss = jnp.mean(h * h)
    return {"w": state["w"] - 1e-6 * loss}, {"loss": loss}


class Load:
    def __call__(self, index):
        time.sleep(LOAD_S)
        rng = np.random.default_rng(index)
        return {"x": rng.standard_normal((64, 256), dtype=np.float32)}


def dataset(config):
    return grain.MapDataset.range(1 << 30).map(Load())


def main(out: str, steps: int) -> None:
    from pipecheck import Monitor

    state = jax.device_put(init({}))
    load = Load()
    mon = Monitor(config={"workload": "user-loop"})
    losses = []
    for batch in mon.batches(load(i) for i in range(steps)):
        state, metrics = mon.step(train_step, state, batch)
        losses.append(float(metrics["loss"]))  # FORCED-SYNC
    mon.save(out, force=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
