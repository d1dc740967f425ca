"""A training loop that fails at step 30, its record kept by Monitor(save_to=...).

    python examples/monitor_ended_early.py   # writes crashed_run.json and crashed_run.png

The loop's NaN guard raises inside ``with Monitor(save_to=...)``: the Monitor writes the
record marked ``incomplete`` (the exception, the step), then the exception goes on
unchanged (here the script catches it). Until then the record was written every
``save_every_s`` seconds by a helper thread, so a killed process leaves its last write.
Every reader says first that the run ended early: here ``pipecheck plot``.
"""

from __future__ import annotations

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor


@jax.jit
def train_step(w, x):
    loss = jnp.mean(jnp.tanh(x @ w) ** 2)
    return w - 1e-3 * loss, {"loss": loss}


def loader(n):
    rng = np.random.default_rng(0)
    for _ in range(n):
        yield rng.standard_normal((64, 128), dtype=np.float32)


def main():
    w = jnp.eye(128, dtype=jnp.float32)
    try:
        with Monitor(config={"example": "monitor_ended_early"}, save_to="crashed_run.json",
                     save_every_s=10, force=True) as mon:
            for step, x in enumerate(mon.batches(loader(100))):
                w, metrics = mon.step(train_step, w, x)
                if step == 30:  # a NaN guard (here it fires on purpose)
                    raise FloatingPointError(f"loss is nan at step {step}")
    except FloatingPointError as e:
        print(f"the loop raised: {e}")
    print("$ pipecheck plot crashed_run.json -o crashed_run.png --force")
    r = subprocess.run([sys.executable, "-m", "pipecheck", "plot", "crashed_run.json",
                        "-o", "crashed_run.png", "--force"], capture_output=True, text=True)
    print(r.stdout + r.stderr, end="")


if __name__ == "__main__":
    main()
