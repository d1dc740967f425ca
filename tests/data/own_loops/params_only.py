"""A pure-JAX loop whose step returns only the new params (no loss), full-batch gradient
descent on data held on the host in memory, with no loader: ``mon.batches(range(n))``.

usage: python params_only.py OUT.json {loss|no-loss}

``loss``: the Monitor is told what to wait on, ``Monitor(loss=lambda params:
jnp.sum(params["w"]))``. ``no-loss``: plain ``Monitor()``, which cannot find a loss in a
dict of params and says so at the first step.
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
def train_step(params, x, y):
    grads = jax.grad(loss_fn)(params, x, y)
    return jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads)


def main(out, mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, DIM), np.float32)
    y = rng.standard_normal((BATCH, 1), np.float32)
    params = {"w": jnp.asarray(rng.standard_normal((DIM, DIM), np.float32) / DIM ** 0.5),
              "b": jnp.zeros(DIM),
              "out": jnp.asarray(rng.standard_normal((DIM, 1), np.float32) / DIM ** 0.5)}
    if mode == "loss":
        mon = Monitor(config={"loop": "params_only"},
                      loss=lambda params: jnp.sum(params["w"]))
    else:
        mon = Monitor(config={"loop": "params_only"})
    for _ in mon.batches(range(STEPS)):
        params = mon.step(train_step, params, x, y)
    mon.save(out, force=True)
    print(mon.report())
    print(f"final loss {float(loss_fn(params, x, y)):.4f}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
