"""A pure-JAX loop that logs the loss one step late, the pattern docs/monitor.md
recommends: keep the step's metrics, convert them on the next step (by then the Monitor's
own lagged sync has waited for them), its data generated on the host in memory.

usage: python lagged_read.py OUT.json

The ``float(...)`` on the line marked LAGGED-READ finds its value ready: no wait.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

from pipecheck import Monitor

DIM, BATCH, DEPTH, STEPS = 384, 256, 8, 50


def loss_fn(params, x, y):
    h = x
    for _ in range(DEPTH):
        h = jnp.tanh(h @ params["w"] + params["b"])
    return jnp.mean((h @ params["out"] - y) ** 2)


@jax.jit
def train_step(params, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch["x"], batch["y"])
    params = jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads)
    return params, {"loss": loss}


def batches(n):
    rng = np.random.default_rng(0)
    data = [{"x": rng.standard_normal((BATCH, DIM), np.float32),
             "y": rng.standard_normal((BATCH, 1), np.float32)} for _ in range(8)]
    for i in range(n):
        yield data[i % len(data)]


def main(out):
    rng = np.random.default_rng(1)
    params = {"w": jnp.asarray(rng.standard_normal((DIM, DIM), np.float32) / DIM ** 0.5),
              "b": jnp.zeros(DIM),
              "out": jnp.asarray(rng.standard_normal((DIM, 1), np.float32) / DIM ** 0.5)}
    mon = Monitor(config={"loop": "lagged_read"})
    losses, previous = [], None
    for step, batch in enumerate(mon.batches(batches(STEPS))):
        params, metrics = mon.step(train_step, params, batch)
        if previous is not None:
            losses.append(float(previous["loss"]))  # LAGGED-READ
            if step % 25 == 0:
                print(f"step {step - 1}: loss {losses[-1]:.4f}")
        previous = metrics
    mon.save(out, force=True)
    print(mon.report())
    losses.append(float(previous["loss"]))
    print(f"final loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main(sys.argv[1])
