"""A training loop whose input wait goes to TensorBoard, watched live by `pipecheck watch`.

    python examples/monitor_tensorboard.py      # writes tb_run.json and tb_logs/
    tensorboard --logdir tb_logs                # pipecheck/step_time_s, data_wait_s, ...

The loop keeps its record in tb_run.json while it runs (``save_to``) and writes each step's
scalars to tb_logs/ (``tensorboard_dir``; needs ``pip install 'pipecheck[tensorboard]'``).
Beside it, as you would in a second terminal, this script runs
``pipecheck watch tb_run.json`` and prints what watch printed once the loop is done.
The loader sleeps 6 ms a batch (like I/O) and the step computes for a few ms: the loop
waits for its input.
"""

from __future__ import annotations

import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor

STEPS, BATCH, DIM = 240, 64, 256


@jax.jit
def train_step(w, x):
    h = jnp.tanh(x @ w)
    for _ in range(4):
        h = jnp.tanh(h @ w)
    loss = jnp.mean(h * h)
    return w - 1e-3 * jax.grad(lambda v: jnp.mean(jnp.tanh(x @ v) ** 2))(w), {"loss": loss}


def loader(n):
    rng = np.random.default_rng(0)
    for _ in range(n):
        time.sleep(0.006)  # reading and decoding, as a slow input pipeline does
        yield rng.standard_normal((BATCH, DIM), dtype=np.float32)


def main() -> None:
    w = jnp.eye(DIM, dtype=jnp.float32) * 0.5
    mon = Monitor(config={"example": "monitor_tensorboard"}, save_to="tb_run.json",
                  save_every_s=0.5, force=True,                            # pipecheck
                  tensorboard_dir="tb_logs", tensorboard_every_s=0.5)      # pipecheck
    watch = None
    for step, x in enumerate(mon.batches(loader(STEPS))):                  # pipecheck
        w, metrics = mon.step(train_step, w, x)                            # pipecheck
        if step == 0:  # the record exists from the first step on: a second terminal's job
            watch = subprocess.Popen(
                [sys.executable, "-m", "pipecheck", "watch", "tb_run.json", "--every", "0.5"],
                stdout=subprocess.PIPE, text=True)
    mon.finish()                                                           # pipecheck
    assert watch is not None
    out, _ = watch.communicate(timeout=60)
    print(out, end="")


if __name__ == "__main__":
    main()
